"""Everything the pipeline uses comes from tools/apt-packages.txt, on any machine (dirty or
fresh): see tests/deps/deps_check.py for the rules. A failure names the missing file,
the Debian package that ships it and the line to add to tools/apt-packages.txt."""
from __future__ import annotations

import shutil
from pathlib import Path

import deps_check
import pytest

REPO = Path(__file__).resolve().parents[2]
APT_LIST = REPO / "tools" / "apt-packages.txt"

pytestmark = pytest.mark.skipif(not (shutil.which("dpkg-query") and shutil.which("apt-cache")),
                                reason="not a Debian system: the closure is over Debian packages")


def test_every_executable_the_project_runs_comes_from_a_listed_package():
    problems = deps_check.command_problems(REPO, APT_LIST)
    assert not problems, "\n".join(problems)


def test_every_tex_file_the_manuscript_loads_comes_from_a_listed_package():
    problems = deps_check.tex_problems(REPO, APT_LIST)
    assert not problems, "\n".join(problems)


def test_bootstrap_makes_the_venv_with_a_python_from_a_listed_package():
    problems = deps_check.venv_problems(REPO, APT_LIST)
    assert not problems, "\n".join(problems)


def test_a_needed_line_deleted_from_the_list_is_named(tmp_path):
    """The checks have teeth: without `make` and `lmodern` (lmodern itself, not only
    TeX Live's Recommends of it) they name both, with the line to add."""
    lines = APT_LIST.read_text().splitlines()
    assert "make" in lines and "lmodern" in lines, "tools/apt-packages.txt lacks make or lmodern itself"
    short = tmp_path / "apt-packages.txt"
    short.write_text("\n".join(line for line in lines if line not in ("make", "lmodern")) + "\n")
    commands = "\n".join(deps_check.command_problems(REPO, short))
    tex = "\n".join(deps_check.tex_problems(REPO, short))
    assert "make (" in commands and "'make'" in commands and "add the line: make" in commands
    assert "lmodern.sty (paper/main.tex)" in tex and "add the line: lmodern" in tex


def test_a_package_deleted_from_a_scripts_declaration_is_named():
    """A self-installing script's commands are accounted for by the packages it declares,
    read from their .debs whether or not they are installed here: without slurm-client,
    squeue (tools/slurm-local.sh) is named."""
    own = deps_check.own_packages(REPO)
    assert "slurm-client" in own["tools/slurm-local.sh"] and "podman" in own["tests/test_container_image.py"]
    own["tools/slurm-local.sh"] = [p for p in own["tools/slurm-local.sh"] if p != "slurm-client"]
    problems = "\n".join(deps_check.command_problems(REPO, APT_LIST, own=own))
    assert "squeue (tools/slurm-local.sh:" in problems and "PACKAGES=(...)" in problems, problems
    assert "slurmd (" not in problems and "podman (" not in problems, problems

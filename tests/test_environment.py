"""The pinned environments stay consistent: pins, Nix expressions, the Docker recipe."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_every_direct_requirement_is_pinned_and_in_the_lock():
    lock = {line.split("==")[0].lower(): line for line in (REPO / "requirements.lock").read_text().splitlines()
            if "==" in line}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][^ ]*", line), f"not pinned: {line}"
        name = line.split("==")[0].lower()
        assert lock.get(name) == line, f"{line} differs from the lock ({lock.get(name)})"


@pytest.mark.skipif(not shutil.which("nix-instantiate"), reason="nix-instantiate not installed")
@pytest.mark.parametrize("path", ["flake.nix", *sorted(str(p.relative_to(REPO)) for p in (REPO / "nix").glob("*.nix"))])
def test_nix_expressions_parse(path):
    proc = subprocess.run(["nix-instantiate", "--parse", path], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_docker_image_installs_the_same_debian_packages_as_bootstrap():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "tools/apt-packages.txt" in dockerfile and "requirements.lock" in dockerfile

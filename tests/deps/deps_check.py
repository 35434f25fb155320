"""Does tools/apt-packages.txt account for everything the pipeline uses? Each check
returns its problems, each naming the missing file, the package that ships it and the
line to add to tools/apt-packages.txt (empty: all accounted for).

Needed files resolve to a file a Debian package ships, and that package must be one the
list installs: a listed one, or a Depends/Pre-Depends of one (Recommends are not
installed: bootstrap passes --no-install-recommends). Packages of the base system
(Essential, or Priority required: every Debian has them) are accepted as given. What is
installed by hand counts for nothing: a file no package ships is a problem, and so is
a file that is missing.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import deps_commands
import deps_debian
import deps_latex

from tcpeval.report import texfiles

VENV_BIN = Path(sys.executable).parent
# Where Debian's packages put commands; /usr/local and personal PATH entries (pyenv, ...)
# hold what was installed by hand, which a fresh machine does not have.
DEBIAN_PATH = os.pathsep.join(["/usr/sbin", "/usr/bin", "/sbin", "/bin"])
# For commands that are not installed here (so dpkg cannot say): the package that ships
# them on Debian 12, where its name is not the command's own.
COMMAND_PACKAGE = {
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "bridge": "iproute2", "nft": "nftables",
    "ssh": "openssh-client", "ssh-keygen": "openssh-client", "sshd": "openssh-server",
    "qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static", "vvp": "iverilog",
    "pdfinfo": "poppler-utils", "pdftotext": "poppler-utils", "pdftoppm": "poppler-utils",
    "pdflatex": "texlive-latex-base", "nix": "nix-bin", "nix-instantiate": "nix-bin", "sysctl": "procps",
    "kill": "procps", "ping": "iputils-ping", "cc": "gcc",
}


def _where(uses: list[str]) -> str:
    return ", ".join(uses[:3]) + (f" and {len(uses) - 3} more" if len(uses) > 3 else "")


def judge(needed: dict[str, tuple[list[Path], list[str]]], closure: deps_debian.Closure) -> list[str]:
    """needed: name -> (its files: symlink hops then the real file, where it is used).
    Every hop dpkg knows must come from the closure, and dpkg must know the real file."""
    owned = deps_debian.owners(sorted({f for files, _ in needed.values() for f in files}))
    problems = []
    for name, (files, uses) in needed.items():
        for path in files:
            for package in owned[path]:
                if not closure.accounts_for(package):
                    problems.append(
                        f"{name} ({_where(uses)}): {path} is in the Debian package '{package}', which "
                        f"tools/apt-packages.txt does not install (not listed, not a Depends of a listed "
                        f"package, not Essential/required); add the line: {package}")
        if not owned[files[-1]]:
            problems.append(f"{name} ({_where(uses)}): {files[-1]} belongs to no Debian package "
                            "(installed by hand?); it must come from a package in tools/apt-packages.txt")
    return problems


def system_which(command: str) -> str | None:
    return shutil.which(command, path=DEBIAN_PATH)


def _package_for_missing_command(command: str) -> str:
    known = COMMAND_PACKAGE.get(command)
    if known:
        return f"it is in the Debian package '{known}'; add the line: {known}"
    same = subprocess.run(["apt-cache", "show", "--no-all-versions", command], capture_output=True, text=True)
    if same.returncode == 0 and same.stdout.strip():
        return f"probably in the Debian package '{command}'; add the line: {command}"
    return f"find its Debian package (apt-file search bin/{command}) and add that line to tools/apt-packages.txt"


def _package_for_missing_tex(name: str) -> str:
    known = texfiles.DEBIAN_PACKAGE.get(name)
    if known:
        return f"it is in the Debian package '{known}'; add the line: {known}"
    return f"find its Debian package (apt-file search {name}) and add that line to tools/apt-packages.txt"


DEB_FILES_CACHE = Path(__file__).resolve().parents[2] / "build" / "deb-files"
# A Python file that drives such a script (its test) names it: OWN_PACKAGES_OF = "tools/x.sh".
DRIVES = "OWN_PACKAGES_OF"


def own_packages(repo: Path) -> dict[str, list[str]]:
    """file ("tools/x.sh") -> the Debian packages it installs itself before running them.
    A tools/*.sh script for an optional part (a local SLURM cluster, the container image's
    host side) declares them as PACKAGES=(...) (tools/own-packages.sh installs them); a
    Python file that drives such a script declares OWN_PACKAGES_OF = "tools/x.sh"."""
    own = {}
    for path in sorted(repo.glob("tools/*.sh")):
        packages = deps_commands.shell_array(path, "PACKAGES")
        if packages is not None:
            own[str(path.relative_to(repo))] = packages
    for pattern in deps_commands.SOURCES["python"]:
        for path in sorted(repo.glob(pattern)):
            text = path.read_text()
            if DRIVES not in text:  # most files: no need to parse them a second time
                continue
            for node in ast.parse(text).body:
                if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == DRIVES for t in node.targets)
                        and isinstance(node.value, ast.Constant)):
                    script = node.value.value
                    if script not in own:
                        raise ValueError(f"{path.relative_to(repo)}: {DRIVES} = {script!r} names no tools/*.sh "
                                         "script that declares PACKAGES=(...)")
                    own[str(path.relative_to(repo))] = own[script]
    return own


def _declared(uses: list[str], own: dict[str, list[str]]) -> list[str] | None:
    """The packages declared by the files that run the command, when only such files run it."""
    files = {u.rsplit(":", 1)[0] for u in uses}
    if not files <= own.keys():
        return None
    return sorted({p for f in files for p in own[f]})


def command_problems(repo: Path, apt_list: Path, own: dict[str, list[str]] | None = None) -> list[str]:
    """Every executable the project runs (tests/deps/deps_commands.py). One that only
    self-installing scripts (and the tests that drive them) run is accounted for by the
    packages they declare, read from those packages' .debs: the same on every machine,
    whether or not the packages are installed."""
    closure = deps_debian.closure_of(apt_list)
    own = own_packages(repo) if own is None else own
    problems, resolved = [], {}
    for command, uses in sorted(deps_commands.project_commands(repo).items()):
        declared = _declared(uses, own)
        if declared and deps_debian.ships_command(declared, command, DEB_FILES_CACHE):
            continue
        found = system_which(command)
        if found is not None:
            resolved[command] = (deps_debian.hops(Path(found)), uses)
        elif not (VENV_BIN / command).exists():  # .venv's come from requirements.lock
            if declared:
                problems.append(f"{command} ({_where(uses)}) is shipped by none of the packages its script "
                                f"declares ({', '.join(declared)}): add the one that ships it to the script's "
                                "PACKAGES=(...)")
            else:
                problems.append(f"{command} ({_where(uses)}) is not installed: {_package_for_missing_command(command)}")
    return problems + judge(resolved, closure)


def tex_problems(repo: Path, apt_list: Path) -> list[str]:
    """Every TeX file the manuscript and the generated .tex files load (kpsewhich); also
    keeps tcpeval.report.texfiles's table (for files not installed) true to dpkg."""
    closure = deps_debian.closure_of(apt_list)
    needed = deps_latex.manuscript_files(repo)
    if shutil.which("kpsewhich") is None:
        return ["kpsewhich is not installed: it is in the Debian package 'texlive-binaries', a Depends "
                "of latexmk; add the line: latexmk"]
    proc = subprocess.run(["kpsewhich", *needed], capture_output=True, text=True)
    located = {Path(line).name: Path(line) for line in proc.stdout.splitlines() if line}
    problems = [f"{name} ({_where(uses)}) is not installed: {_package_for_missing_tex(name)}"
                for name, uses in sorted(needed.items()) if name not in located]
    problems += judge({name: (deps_debian.hops(located[name]), uses)
                       for name, uses in needed.items() if name in located}, closure)
    table = {name: located[name] for name in texfiles.DEBIAN_PACKAGE if name in located}
    owners = deps_debian.owners(list(table.values()))
    for name, path in table.items():
        if owners[path] and texfiles.DEBIAN_PACKAGE[name] not in owners[path]:
            problems.append(f"tcpeval.report.texfiles says {name} is in '{texfiles.DEBIAN_PACKAGE[name]}', "
                            f"dpkg says {owners[path]}: correct the table")
    return problems


def venv_problems(repo: Path, apt_list: Path) -> list[str]:
    """tools/bootstrap.sh runs `$PYTHON -m venv` (default: Debian's python3), which needs
    ensurepip (python3-venv)."""
    closure = deps_debian.closure_of(apt_list)
    default = re.search(r"\$\{PYTHON:-([^}]+)\}", (repo / "tools" / "bootstrap.sh").read_text())
    if not default:
        return ["tools/bootstrap.sh no longer names its default interpreter as ${PYTHON:-...}"]
    python = Path(default.group(1))
    uses = ["tools/bootstrap.sh: python -m venv"]
    if not python.exists():
        return [f"{python} is not installed: it is in the Debian package 'python3-minimal', a Depends "
                "of python3; add the line: python3"]
    proc = subprocess.run([str(python), "-c", "import ensurepip, venv; print(ensurepip.__file__)"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"{python} cannot make a virtual environment (no ensurepip): it is in the Debian "
                f"package 'python3-venv'; add the line: python3-venv\n{proc.stderr}"]
    return judge({str(python): (deps_debian.hops(python), uses),
                  "ensurepip": ([Path(proc.stdout.strip())], uses)}, closure)


# formats, font maps and texmf.cnf: TeX Live's triggers (fmtutil, updmap, update-texmf)
# build them from the installed packages, so no package owns them
TEX_GENERATED = ("/var/lib/texmf/", "/etc/texmf/web2c/texmf.cnf")


def latex_input_problems(fls: Path, apt_list: Path) -> list[str]:
    """Every system file a real LaTeX run read (the -recorder file list latexmk keeps):
    also what the loaded packages load in turn, fonts and encodings included."""
    closure = deps_debian.closure_of(apt_list)
    local = fls.resolve().parent.parent
    files = sorted({Path(line[len("INPUT "):]) for line in fls.read_text().splitlines()
                    if line.startswith("INPUT /")})
    files = [f for f in files if not str(f).startswith(TEX_GENERATED) and local not in f.resolve().parents]
    if not files:
        return [f"{fls} lists no system file: not the file list of a LaTeX run"]
    problems = judge({str(f): (deps_debian.hops(f), [f"read by LaTeX ({fls.name})"]) for f in files}, closure)
    by_line: dict[str, list[str]] = {}  # one message per line to add, not per font file
    for problem in problems:
        by_line.setdefault(problem.rpartition("add the line: ")[2] or problem, []).append(problem)
    return [same[0] + (f" (and {len(same) - 1} more files of it)" if len(same) > 1 else "")
            for same in by_line.values()]

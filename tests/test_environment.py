"""The pinned environments stay consistent: pins, the Docker recipe (Nix: test_nix_pin.py)."""
import re
from pathlib import Path

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


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile)
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M)
            if not m.group(0).lstrip().startswith("#")]


def test_docker_image_installs_the_same_debian_packages_as_bootstrap():
    """The image runs tools/bootstrap.sh itself (same package list, same flags) and installs
    nothing on its own, with every file bootstrap reads copied in before it runs."""
    steps = _instructions((REPO / "Dockerfile").read_text())
    runs = [args for op, args in steps if op == "RUN"]
    assert [r for r in runs if "tools/bootstrap.sh" in r], runs
    assert not [r for r in runs if re.search(r"apt-get install|apt install|pip install|dpkg -i", r)], runs
    boot = next(i for i, (op, args) in enumerate(steps) if op == "RUN" and "tools/bootstrap.sh" in args)
    copied = set()
    for op, args in steps[:boot]:
        if op == "COPY":
            *sources, dest = args.split()
            copied |= {s if dest in (".", "./", s) else f"{dest.rstrip('/')}/{Path(s).name}" for s in sources}
    bootstrap = (REPO / "tools" / "bootstrap.sh").read_text()
    read = set(re.findall(r"(?<![\w/.-])((?:tools/)?[\w-]+\.(?:txt|lock|toml))\b", bootstrap))
    read |= {"tools/bootstrap.sh", "src"}  # the script itself; `pip install -e .` builds src/
    assert {"tools/apt-packages.txt", "requirements.lock", "pyproject.toml"} <= read
    assert read <= copied, f"bootstrap reads {sorted(read - copied)}, not in the image when it runs"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored  # `COPY . .` must not overwrite the image's .venv with the host's

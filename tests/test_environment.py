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


def _bootstrap_reads() -> dict[str, set[str]]:
    """step of tools/bootstrap.sh -> the files it reads (from its function's body); "all"
    -> every step's."""
    bootstrap = (REPO / "tools" / "bootstrap.sh").read_text()
    reads = {}
    for step in ("packages", "python-deps", "project"):
        body = re.search(rf"^{step.replace('-', '_')}\(\) {{\n(.*?)^}}", bootstrap, re.M | re.S)
        assert body, f"tools/bootstrap.sh has no function for its step {step}"
        reads[step] = set(re.findall(r"(?<![\w/.-])((?:tools/)?[\w-]+\.(?:txt|lock|toml))\b", body.group(1)))
    reads["project"].add("src")  # `pip install -e .` builds src/
    reads["all"] = set().union(*reads.values())
    assert reads["packages"] == {"tools/apt-packages.txt"}
    assert reads["python-deps"] == {"requirements.txt", "requirements.lock"}
    assert "pyproject.toml" in reads["project"]
    return reads


def test_docker_image_installs_the_same_debian_packages_as_bootstrap():
    """The image runs tools/bootstrap.sh itself (same package list, same flags) and installs
    nothing on its own, each step with every file it reads copied in before it runs; the
    last run is the whole bootstrap, on the whole source."""
    steps = _instructions((REPO / "Dockerfile").read_text())
    assert not [a for op, a in steps if op == "RUN" and re.search(r"apt-get install|apt install|pip install|dpkg -i", a)]
    reads = _bootstrap_reads()
    copied, boots = set(), []
    for op, args in steps:
        if op == "COPY":
            *sources, dest = args.split()
            copied |= {s if dest in (".", "./", s) else f"{dest.rstrip('/')}/{Path(s).name}" for s in sources}
        elif op == "RUN" and "tools/bootstrap.sh" in args:
            step = re.search(r"tools/bootstrap\.sh(?:\s+([a-z-]+))?", args).group(1) or "all"
            needed = reads[step] | {"tools/bootstrap.sh"}
            assert "." in copied or needed <= copied, f"bootstrap {step} reads {sorted(needed - copied)}, not in the image"
            boots.append((step, "." in copied or "src" in copied))
    assert boots and boots[-1] == ("all", True), boots
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored  # `COPY . .` must not overwrite the image's .venv with the host's


def test_docker_layers_keep_apt_and_pip_apart_from_the_source():
    """A change under src/ redoes neither apt nor pip's downloads where the layer cache is
    allowed (`make image`): the packages and python-deps steps run before the source is in."""
    steps = _instructions((REPO / "Dockerfile").read_text())
    order = []
    for op, args in steps:
        if op == "COPY" and re.search(r"(^|\s)(\.|src/?)\s", args + " "):
            order.append("source")
        elif op == "RUN" and (m := re.search(r"tools/bootstrap\.sh\s+(packages|python-deps)\b", args)):
            order.append(m.group(1))
    assert order[:3] == ["packages", "python-deps", "source"], order

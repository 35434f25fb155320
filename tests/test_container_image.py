"""The container image: `make image` builds it here (podman, rootful, no Docker engine or
Docker Hub) and the default suite passes inside it, root-only tests included.

Slow (the build takes minutes, the suite inside about as long as `make test`) and root:
`make test-all` as root. The suite inside shares this host's kernel (its namespaces, BPF
congestion controls and qdiscs), so, like `make test`, it must not run while other
emulated runs are going on here.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "container-image.sh"
# podman, which this test also runs, comes from that script's own packages (tests/deps)
OWN_PACKAGES_OF = "tools/container-image.sh"
LOG = REPO / "build" / "image" / "make-test.log"

pytestmark = [pytest.mark.slow, pytest.mark.root]


def podman(*args):
    env = {**os.environ, "CONTAINERS_CONF": str(REPO / "build" / "image" / "containers.conf")}
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=env, timeout=120)


# not /.dockerenv: some VM images carry one on the host itself
@pytest.mark.skipif(Path("/run/.containerenv").exists() or bool(os.environ.get("container")),
                    reason="inside a container: the image is built and run on the host")
def test_the_image_builds_and_make_test_passes_inside_it():
    build = subprocess.run([SCRIPT, "build"], cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]

    name = f"tcpeval-test-{os.getpid()}"
    LOG.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(LOG, "w") as log:
            proc = subprocess.run([SCRIPT, "run", "--name", name, "make", "test", "PYTEST_ARGS=--require-root"],
                                  cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=5400)
    finally:  # a timeout kills the script, not the container it started
        podman("rm", "-f", "-t", "0", name)
    out = LOG.read_text(errors="replace")
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    print(f"inside the container: {summary}")
    assert proc.returncode == 0, f"make test failed inside the container ({LOG}):\n{out[-6000:]}"
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", summary)}
    assert counts.get("passed", 0) > 100 and not counts.get("failed") and not counts.get("error") \
        and not counts.get("errors"), summary

    # nothing left behind: no container of ours, no namespace of the emulated backend
    assert podman("ps", "-a", "-q", "--filter", f"name={name}").stdout.strip() == ""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [line for line in netns.splitlines() if line.startswith("tev")], netns

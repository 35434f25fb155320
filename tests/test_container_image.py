"""The container image: `make image` builds it here (podman, rootful, no Docker engine or
Docker Hub) and the default suite passes inside it, root-only tests included.

Slow (the build takes minutes, the suite inside about as long as `make test`) and root:
`make test-all` as root. The suite inside shares this host's kernel (its namespaces, BPF
congestion controls and qdiscs), so, like `make test`, it must not run while other
emulated runs are going on here.
"""
import os
import re
import shutil
import signal
import subprocess
import time
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


def script(*args, timeout=300):
    """tools/container-image.sh ARGS, its output captured"""
    return subprocess.run([SCRIPT, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def build_image():
    build = script("build", timeout=3600)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]


# not /.dockerenv: some VM images carry one on the host itself
@pytest.mark.skipif(Path("/run/.containerenv").exists() or bool(os.environ.get("container")),
                    reason="inside a container: the image is built and run on the host")
def test_the_image_builds_and_make_test_passes_inside_it():
    build_image()

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


RT_ROOT = Path("/sys/fs/cgroup/cpu/cpu.rt_runtime_us")


def image_of_this_revision():
    name = script("name")
    assert name.returncode == 0, name.stderr
    # on a fresh machine podman itself comes with the build (the script's own packages)
    if shutil.which("podman") is None or podman("image", "exists", name.stdout.strip()).returncode != 0:
        build_image()


def start_detached(name):
    """`container-image.sh run --name NAME sleep 600` in its own session; the container's pid"""
    starter = subprocess.Popen([SCRIPT, "run", "--name", name, "sleep", "600"], cwd=REPO, start_new_session=True,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        pid = podman("inspect", "-f", "{{.State.Pid}}", name).stdout.strip()
        if pid.isdigit() and int(pid) > 0:
            return starter, int(pid)
        time.sleep(0.1)
    raise AssertionError(f"container {name} did not start")


def rt_holders():
    held = {d.name: int((d / "cpu.rt_runtime_us").read_text()) for d in RT_ROOT.parent.glob("libpod-*")}
    return {name: us for name, us in held.items() if us > 0}


# CI of 2026-12-07: the container of a CI run killed at its time limit still held the
# root's real-time time, and no container could start after it
@pytest.mark.skipif(not RT_ROOT.exists(), reason="no cgroup v1 real-time group scheduling on this host")
def test_a_container_whose_process_is_gone_does_not_block_the_next():
    image_of_this_revision()
    name = f"tcpeval-test-gone-{os.getpid()}"
    try:
        starter, pid = start_detached(name)
        conmon = int(podman("inspect", "-f", "{{.State.ConmonPid}}", name).stdout.strip())
        os.killpg(starter.pid, signal.SIGKILL)   # the job, its container monitor and the container die
        os.kill(conmon, signal.SIGKILL)          # at once, as in a kill of the whole machine state
        os.kill(pid, signal.SIGKILL)
        starter.wait(timeout=10)
        for _ in range(100):   # until init has reaped it
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.1)
        assert rt_holders(), "the dead container's cgroup should still hold real-time time"

        after = script("run", "--name", f"{name}-next", "true")
        assert after.returncode == 0, after.stderr
        assert f"removing container {name}: its process is gone" in after.stderr
        assert "real-time time held" in after.stderr
        assert rt_holders() == {}
    finally:  # the container and the cgroups it may leave
        script("remove", name)


@pytest.mark.skipif(not RT_ROOT.exists(), reason="no cgroup v1 real-time group scheduling on this host")
def test_a_running_container_holding_the_real_time_time_is_named_and_remove_clears_it():
    image_of_this_revision()
    name = f"tcpeval-test-live-{os.getpid()}"
    try:
        starter, _ = start_detached(name)
        os.killpg(starter.pid, signal.SIGKILL)   # CI's time limit: the job dies, the container lives on
        blocked = script("run", "--name", f"{name}-next", "true")
        assert blocked.returncode != 0
        assert "no real-time time left for a container" in blocked.stderr and name in blocked.stderr

        removed = script("remove", "tcpeval-test-live-")
        assert removed.returncode == 0, removed.stderr
        assert podman("ps", "-a", "-q", "--filter", f"name={name}").stdout.strip() == ""
        assert rt_holders() == {}
    finally:  # the container and the cgroups it may leave
        script("remove", name)

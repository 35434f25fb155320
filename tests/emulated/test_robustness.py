"""Kill a run at any point: nothing is left behind, no trace is written, a rerun works.
Also: the not-root error, and the host lock."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emulated_helpers import (
    env,
    leftovers_of,
    nothing_left,
    run_id_of,
    tcpeval_cmd,
    wait_for_log,
)

from tcpeval.backends.emulated import host

pytestmark = pytest.mark.root

# real time whatever the host's calibrated faithful rate (--dilation 1): these tests are
# about processes and leftovers, and a native flow above that rate is refused otherwise
ARGS = ["--variant", "cubic", "--impl", "native", "--rtt", "2", "--drop", "0", "--rate", "300M",
        "--dilation", "1", "--quiet"]



def emulated_netns() -> set[str]:
    """The emulated backend's namespaces only: other experiments' (tevcc*, tevtb*) may come
    and go on a shared host while these tests run."""
    return {ns for ns in host.list_netns() if host.NS_RE.match(ns)}

def _default_sigint() -> None:
    # A harness that starts the suite in the background (a shell without job control)
    # hands every child SIGINT ignored, and Python keeps an inherited SIG_IGN: the run
    # would never see the signal the test sends. The child starts with the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(out: Path, duration: float = 20, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(tcpeval_cmd("run", *ARGS, "--duration", str(duration), "--out", str(out), *extra),
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def wait_for_traffic(out: Path, proc: subprocess.Popen, timeout: float = 120) -> str:
    if not wait_for_log(out, "flow 0 started", proc, timeout):
        if proc.poll() is not None:
            pytest.fail(f"run ended early: {proc.communicate()}")
        pytest.fail("traffic never started")
    time.sleep(0.5)
    return run_id_of(out)


def iperf3_pids(run_id: str) -> list[int]:
    pids = []
    for ns in leftovers_of(run_id)["namespaces"]:
        for pid in host.run(["ip", "netns", "pids", ns], check=False).stdout.split():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "iperf3":
                    pids.append(int(pid))
            except OSError:
                pass
    return pids


def test_sigint_runner_leaves_nothing(tmp_path):
    proc = start_run(tmp_path)
    rid = wait_for_traffic(tmp_path, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not (tmp_path / "trace.json").exists()
    assert "interrupted" in (tmp_path / "run.log").read_text()
    assert nothing_left(rid), leftovers_of(rid)


def test_sigkill_iperf3_fails_run_cleanly(tmp_path):
    proc = start_run(tmp_path)
    rid = wait_for_traffic(tmp_path, proc)
    pids = iperf3_pids(rid)
    assert pids
    os.kill(pids[-1], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    log = (tmp_path / "run.log").read_text()
    assert "killed by signal 9" in log
    assert not (tmp_path / "trace.json").exists()
    assert nothing_left(rid), leftovers_of(rid)


def test_sigkill_runner_then_next_run_cleans_up(tmp_path):
    first = tmp_path / "first"
    proc = start_run(first)
    rid = wait_for_traffic(first, proc)
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    left = leftovers_of(rid)
    # children die with the runner (PR_SET_PDEATHSIG); the namespaces await the next run
    assert left["processes"] == [], left
    assert left["namespaces"] and left["state_file"]
    assert not (first / "trace.json").exists()
    second = tmp_path / "second"
    rerun = subprocess.run(tcpeval_cmd("run", *ARGS, "--duration", "1", "--out", str(second)),
                           env=env(), capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert (second / "trace.json").exists()
    assert nothing_left(rid), leftovers_of(rid)
    assert f"dead run {rid}" in (second / "run.log").read_text()


def test_a_forced_rerun_interrupted_keeps_the_run_it_was_to_replace_whole(tmp_path):
    run_dir = tmp_path / "rep1"
    first = subprocess.run(tcpeval_cmd("run", *ARGS, "--duration", "1", "--out", str(run_dir)),
                           env=env(), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    kept = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert "trace.json" in kept and "iperf3-flow0.json" in kept
    proc = start_run(run_dir, 20, "--force")
    # the rerun runs in a fresh directory; the kept run waits beside it
    rid = wait_for_traffic(run_dir, proc)
    assert (tmp_path / ".rep1.replaced" / "trace.json").exists()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.name != "run.log.failed"} == kept
    assert "interrupted" in (run_dir / "run.log.failed").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep1"]
    assert nothing_left(rid), leftovers_of(rid)


def test_cleanup_command_removes_dead_run(tmp_path):
    proc = start_run(tmp_path)
    rid = wait_for_traffic(tmp_path, proc)
    proc.kill()
    proc.wait()
    res = subprocess.run(tcpeval_cmd("cleanup"), env=env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert nothing_left(rid), leftovers_of(rid)


def test_not_root_fails_before_creating_anything(tmp_path):
    if subprocess.run(["which", "setpriv"], capture_output=True).returncode != 0:
        pytest.skip("setpriv not available")
    before = emulated_netns()
    out = tmp_path / "out"
    os.chmod(tmp_path, 0o777)
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
                         + tcpeval_cmd("run", *ARGS, "--duration", "1", "--out", str(out)),
                         env=env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "needs root" in res.stderr
    assert emulated_netns() == before
    assert not out.exists()


def test_lock_prevents_concurrent_runs(tmp_path):
    fd = os.open(host.LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # wait until no one else (another engineer's test) holds it, then hold it ourselves
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = emulated_netns()
        res = subprocess.run(tcpeval_cmd("run", *ARGS, "--duration", "1", "--out", str(tmp_path),
                                         "--lock-timeout", "1"),
                             env=env(), capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert "another experiment holds" in res.stderr + (tmp_path / "run.log").read_text()
        assert emulated_netns() == before
        assert not (tmp_path / "trace.json").exists()
    finally:
        os.close(fd)


def test_a_runner_that_is_pid_1_starts_its_children():
    """In a container the runner may be pid 1 (`podman run IMAGE .venv/bin/tcpeval run ...`):
    a child whose parent is pid 1 is then the runner's, not an orphan, and starts."""
    code = ("import os; from tcpeval.backends.emulated import host; "
            "assert os.getpid() == 1; print(host.spawn(['true']).wait())")
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "0", proc.stdout + proc.stderr


@pytest.mark.parametrize("extra, message", [
    (["--duration", "2", "--stack", "net.core.rmem_max=4096"], "condition.stack: 'net.core.rmem_max' is not a per-namespace"),
    (["--duration", "2"], "exists; refusing to overwrite a raw trace (use --force)"),
])
def test_what_the_user_must_change_is_a_usage_error_not_a_failed_run(tmp_path, extra, message):
    # told apart by the error's type (ConditionError, TraceExistsError), not its words
    (tmp_path / "trace.json").write_text("{}")
    out = subprocess.run(tcpeval_cmd("run", *ARGS, "--out", str(tmp_path), *extra), capture_output=True,
                         text=True, env=env(), timeout=120)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "run failed" not in out.stderr and (tmp_path / "trace.json").read_text() == "{}"

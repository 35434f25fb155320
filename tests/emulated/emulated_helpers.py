"""Helpers shared by the emulated-backend tests."""
from __future__ import annotations

import os
import re
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the console script (python -m tcpeval.cli would load tcpeval.cli twice: as __main__ and
# as tcpeval.cli, with two UserError classes)
TCPEVAL = [str(Path(sys.executable).parent / "tcpeval")]


# Attempts per run in the tests (the CLI's default is 3): CI shares this VM, whose vCPUs
# stall now and then; a run flagged in every attempt still fails its test.
TEST_ATTEMPTS = 5


def assert_ok_unless_the_host_fell_behind(record: dict) -> None:
    """A run is ok, or flagged only because the host fell behind the frame rate (frames the
    delay line or the link engine released late, or a CPU's input backlog full: findings
    marked fell_behind or host_stall) -- a verdict on the host, which calibration judges,
    not on what the test runs. The senders' loaded RTT above the path's bound passes too
    (not one below the setting: a path shorter than set), but only beside a finding that
    the host fell behind: frames held back late are queueing outside the model, which the
    senders measure (CI, 0.1 Gbps: frames held up to 53 ms, a 90 % quantile of 7.82 ms
    against 7.66). So does the set-up's probe RTT above the setting (a transient "rtt"
    finding: the path's base RTT is within it), beside such a finding: a host in a spell
    that late delays the probe's echoes too (CI's container, 2026-12-07: a probe median of
    3.11 ms on a 2-ms path, in an attempt with 465 host stalls of up to 102 ms and frames
    late beyond them). Any other window, ACK-clock, RTT, drop-rate or rate finding still fails.
    A run accepted that way is reported as a warning. (On CI's host, in one run, four
    tests' native runs at 0.4 Gbps had 0.2-0.4 % of their frames held 2-7 ms in each of
    five attempts over 2.5 minutes; on the 2-vCPU VM they are ok at the first.)"""
    from tcpeval.backends import fidelity

    verdict = record["fidelity"]
    if verdict["verdict"] == "ok":
        return
    findings = verdict["findings"]
    host_queued = fidelity.fell_behind(findings)
    # above its bound only: the same checks also flag a path shorter than set (below), and
    # "rtt" a path whose base RTT exceeds the setting (not transient)
    assert findings and all(f.get("fell_behind") or f.get("host_stall") or
                            (host_queued and (f["check"] == "loaded RTT" or (f["check"] == "rtt" and f["transient"]))
                             and f.get("measured") is not None and f["measured"] > f["limit"])
                            for f in findings), verdict["reasons"]
    warnings.warn(f"run flagged only because the host fell behind: {verdict['reasons']}", stacklevel=2)


def run_id_of(run_dir: Path) -> str:
    """The run id a run logged ("run 1a2b3c: ..."); fails the test when there is none,
    since every check keyed on it would then look at nothing."""
    log = run_dir / "run.log"
    try:
        m = re.search(r"\] run ([0-9a-f]{6}):", log.read_text())
    except OSError as err:
        raise AssertionError(f"no run id: cannot read {log} ({err})") from err
    if m is None:
        raise AssertionError(f"no run id in {log} (no line '] run <6 hex>:')")
    return m.group(1)


def wait_for_log(run_dir: Path, text: str, proc, timeout_s: float) -> bool:
    """Whether the run's run.log says ``text`` before ``timeout_s``; False as soon as the
    run's process ``proc`` has ended without it."""
    log = run_dir / "run.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def leftovers_of(run_id: str) -> dict:
    """Namespaces, processes inside them, state file, of one run."""
    from tcpeval.backends.emulated import host
    _check_run_id(run_id)
    ns = [n for n in host.list_netns() if n.startswith(f"tev{run_id}-")]
    procs = []
    for n in ns:
        procs += host.run(["ip", "netns", "pids", n], check=False).stdout.split()
    state = (host.STATE_DIR / f"{run_id}.json").exists()
    return {"namespaces": ns, "processes": procs + keep_awake_loops(), "state_file": state}


def pids_where(match) -> list[str]:
    """pids of the processes whose argv (a list of bytes) `match` accepts, read from /proc
    (procps, and so pgrep, is not among the project's packages)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if match(argv):
            pids.append(cmdline.parent.name)
    return pids


def keep_awake_loops() -> list[str]:
    """pids of `tevdelay awake` loops (outside any namespace); runs are serialised by the
    host lock, so once a run is over there must be none."""
    return pids_where(lambda argv: len(argv) > 1 and argv[0].endswith(b"/tevdelay") and argv[1] == b"awake")


def _check_run_id(run_id) -> None:
    if not (isinstance(run_id, str) and re.fullmatch(r"[0-9a-f]{6}", run_id)):
        raise AssertionError(f"not a run id: {run_id!r}; a leftover check needs the id of a real run")


def nothing_left(run_id: str) -> bool:
    return leftovers_of(run_id) == {"namespaces": [], "processes": [], "state_file": False}


def tcpeval_cmd(*args: str) -> list[str]:
    return TCPEVAL + list(args)


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e

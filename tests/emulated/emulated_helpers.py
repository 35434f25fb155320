"""Helpers shared by the emulated-backend tests."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the console script (python -m tcpeval.cli would load tcpeval.cli twice: as __main__ and
# as tcpeval.cli, with two UserError classes)
TCPEVAL = [str(Path(sys.executable).parent / "tcpeval")]


# Attempts per run in the tests (the CLI's default is 3): CI shares this VM, whose vCPUs
# stall now and then; a run flagged in every attempt still fails its test.
TEST_ATTEMPTS = 5

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

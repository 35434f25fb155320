"""An attempt the host has doomed ends there and runs again (backends/emulated/doomed.py):
a frame dropped entering the switch flags an attempt whatever follows, so the rest of its
traffic would be spent for a record only its reasons survive of. The last attempt runs
its course: its trace is the one kept."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    env,
    tcpeval_cmd,
    wait_for_log,
)

from tcpeval.backends.emulated.doomed import CHECK_EVERY_S

pytestmark = pytest.mark.root

BACKLOG = Path("/proc/sys/net/core/netdev_max_backlog")
DURATION_S = 30
SECOND_FLOW_AT_S = 20
# real time (--dilation 1) at a rate every test host carries; two attempts: the doomed
# one and the kept one
ARGS = ["--impl", "native", "--rtt", "2", "--drop", "0", "--rate", "300M",
        "--dilation", "1", "--attempts", "2", "--duration", str(DURATION_S), "--quiet"]
ONE_FLOW = ["--variant", "cubic"]
# a pair whose second flow starts later: the record reads every flow's report (a
# convergence pair doomed before its second flow started failed so), and waiting for the
# second flow's time cost such pairs half their attempt, so the second starts when the
# attempt is doomed and runs a check's interval
TWO_FLOWS = ["--flows", "cubic,cubic", "--start", f"0,{SECOND_FLOW_AT_S}"]


@pytest.mark.parametrize("flows", [ONE_FLOW, TWO_FLOWS], ids=["one-flow", "second-flow-later"])
def test_an_attempt_that_lost_frames_entering_the_switch_ends_there_and_runs_again(tmp_path, flows):
    proc = subprocess.Popen(tcpeval_cmd("run", *flows, *ARGS, "--out", str(tmp_path)), env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log, saved = tmp_path / "run.log", BACKLOG.read_text()
    try:
        assert wait_for_log(tmp_path, "flow 0 started", proc, 120), proc.communicate()
        # a CPU's input queue of one frame: the flow's bursts into the switch overflow it,
        # as a slow start's overshoot overflows the default 1,000 on a lagging host
        BACKLOG.write_text("1")
        doomed = wait_for_log(tmp_path, "attempt doomed at", proc, DURATION_S / 2)
    finally:
        # before the next attempt is planned (the calibration is keyed on the setting)
        BACKLOG.write_text(saved)
    out, err = proc.communicate(timeout=300)
    assert doomed, log.read_text()
    assert proc.returncode == 0, err
    record = json.loads((tmp_path / "trace.json").read_text())
    (first,) = record["fidelity"]["earlier_attempts"]
    ended = first["ended_doomed"]
    assert ended["check"] == "switch input"
    assert ended["at_s"] < DURATION_S / 2
    # it ended when seen; a pair's second flow, due later, started then and ran a check's
    # interval (the loop looks every 50 ms: a second's slack), not at its own time
    assert ended["at_s"] <= ended["ended_s"] < DURATION_S
    if flows is TWO_FLOWS:
        assert ended["ended_s"] <= ended["at_s"] + CHECK_EVERY_S + 1.0 < SECOND_FLOW_AT_S + CHECK_EVERY_S
        early = [line for line in log.read_text().splitlines() if "flow 1 started" in line]
        assert any("the attempt is doomed" in line for line in early), early
    assert any(f["check"] == "switch input" and f["measured"] > 0 for f in first["findings"])
    # the kept attempt is the last: it ran its whole length, and nothing ended it early
    assert "ended_doomed" not in record["measured"]
    assert record["measured"]["traffic_s"] >= DURATION_S
    assert len(record["flows"]) == (2 if flows is TWO_FLOWS else 1)
    assert_ok_unless_the_host_fell_behind(record)

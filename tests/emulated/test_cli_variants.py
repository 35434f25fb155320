"""Issue 4's acceptance: `tcpeval run` writes a trace with verdict ok for each of the six
algorithms (their 3.16 ports), at 6.2 ms RTT and drop 1e-5, as a user types it -- at the
emulated tests' rate (conftest `rate`), not the host's default: the default is 0.8 of the
faithful rate, and in a CI run on this VM scalable316 there was flagged in five attempts of
five (delay line and link: 0.27-0.33 % of the frames held back 2 ms or more, up to 5.6 ms)
and highspeed316 passed only at its fifth, where reno316 and the others passed at once."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emulated_helpers import TEST_ATTEMPTS, assert_ok_unless_the_host_fell_behind

from tcpeval import cc, dilation, spec, trace

pytestmark = pytest.mark.root
TCPEVAL = str(Path(sys.executable).with_name("tcpeval"))


@pytest.mark.parametrize("variant", spec.load_design()["variants"])
def test_each_variant_runs_from_the_command_line_with_verdict_ok(variant, tmp_path, rate):
    out = tmp_path / variant
    maps_before = cc.struct_ops_map_ids(f"{variant}316")
    proc = subprocess.run([TCPEVAL, "run", "--backend", "emulated", "--variant", variant, "--rtt", "6.2",
                           "--drop", "1e-5", "--duration", "8", "--rate", f"{rate:.0f}", "--out", str(out), "--quiet",
                           "--attempts", str(TEST_ATTEMPTS)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr + (out / "run.log").read_text()
    record = trace.read_trace(out)
    assert_ok_unless_the_host_fell_behind(record)
    (flow,) = record["flows"]
    assert flow["cc"]["verified"] == f"{variant}316" and flow["impl"] == "port"
    assert flow["cc"]["object_sha256"] and flow["cc"]["hz"] == 250
    # a trace's measurements are physical: a host whose envelope dilates this path (CI's
    # fresh calibration did, x2) ran it at k x 6.2 ms
    k = dilation.factor(record)
    assert abs(dilation.to_virtual(record)["measured"]["rtt_ms"] - 6.2) <= 0.2, f"dilation x{k}"
    assert record["condition"]["drop"] == 1e-5 and record["measured"]["drop"]["seen"] > 0
    assert record["condition"]["rate_bps"] == rate
    assert "trace.json" in proc.stdout and "fidelity ok" in proc.stdout
    assert json.loads((out / "iperf3-flow0.json").read_text())["end"]["sender_tcp_congestion"] == f"{variant}316"
    # the port's struct_ops map goes with the run (no kernel reference left behind)
    for _ in range(25):
        if cc.struct_ops_map_ids(f"{variant}316") <= maps_before:
            break
        time.sleep(0.2)
    assert cc.struct_ops_map_ids(f"{variant}316") <= maps_before

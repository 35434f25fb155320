"""An RPC flow beside a stream on the emulated path: tevrpc's server on the sender side with
the flow's algorithm, every RPC's latency in the trace, the open-loop schedule kept."""
from __future__ import annotations

from dataclasses import replace

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval import trace
from tcpeval.analysis import metrics as M
from tcpeval.condition import Flow
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_an_open_loop_rpc_flow_beside_a_stream_records_every_rpc(backend, tmp_path, rate):
    rtt_ms, rpc_rate, start_s, duration_s = 4.0, 50.0, 1.0, 5.0
    base = adhoc_condition(["reno"], rtt_ms, 0.0, duration_s, impl="native", rate_bps=rate, seed=5, dilation=1)
    rpc = Flow(variant="reno", impl="native", start_s=start_s, protocol="rpc", request_bytes=100,
               response_bytes=10_000, rpcs_per_s=rpc_rate)
    cond = replace(base, flows=(base.flows[0], rpc))
    record = backend.run(cond, tmp_path)
    on_disk = trace.read_trace(tmp_path)  # the schema: flows[].rpc
    flow = on_disk["flows"][1]
    assert flow["protocol"] == "rpc" and flow["cc"]["verified"] == "reno"
    got = flow["rpc"]
    # the open-loop schedule: one RPC every 1/rate for the flow's 4 s, each one answered
    expected = round((duration_s - start_s) * rpc_rate)
    assert abs(got["issued"] - expected) <= 1 and got["completed"] == got["issued"] and got["unfinished"] == 0
    assert got["start_s"][:3] == pytest.approx([0, 1 / rpc_rate, 2 / rpc_rate], abs=1e-6)
    # no RPC beats the path: a request and a 10 kB response take at least one RTT
    lat = M.rpc_latency_summary(got["latency_us"])
    assert lat["min"] >= 0.95 * rtt_ms * 1e3 and lat["count"] == got["completed"]
    # the client's bytes are the responses, whole
    assert flow["summary"]["bytes"] == got["completed"] * 10_000
    assert len(flow["samples"]["cwnd_bytes"]) == len(flow["samples"]["t_s"]) > 30
    assert_ok_unless_the_host_fell_behind(record)
    for name in ("tevrpc-flow1.json", "tevrpc-flow1.server.json", "iperf3-flow0.json"):
        assert (tmp_path / name).exists()
    assert nothing_left(run_id_of(tmp_path))

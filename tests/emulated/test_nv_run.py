"""TCP-NV (cc/src/nv_tev.c) on the emulated path: delay-based, it backs off when the queue
grows, so its senders see an RTT near the path's own where Reno fills the buffer."""
from __future__ import annotations

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval import trace
from tcpeval.condition import payload_ceiling_bps
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

RTT_MS, DURATION_S = 2.0, 6.0


def _median_steady_rtt_ms(record: dict) -> float:
    s = record["flows"][0]["samples"]
    rtts = sorted(v for t, v in zip(s["t_s"], s["rtt_us"]) if t > DURATION_S / 2 and v)
    return rtts[len(rtts) // 2] / 1e3


def test_nv_keeps_the_queue_short_where_reno_fills_the_buffer(backend, tmp_path, rate_on):
    rate = rate_on("tevlink", RTT_MS)
    buffer_bytes = int(rate / 8 * RTT_MS / 1e3)  # one BDP: Reno's queue adds up to RTT_MS
    records = {}
    for variant, impl in (("nv", "port"), ("reno", "native")):
        cond = adhoc_condition([variant], RTT_MS, 0.0, DURATION_S, impl=impl, rate_bps=rate,
                               buffer_bytes=buffer_bytes, seed=5, dilation=1)
        run_dir = tmp_path / variant
        backend.run(cond, run_dir)
        records[variant] = trace.read_trace(run_dir)
        assert nothing_left(run_id_of(run_dir))
    nv, reno = records["nv"], records["reno"]
    assert nv["flows"][0]["cc"]["verified"] == "nv_tev"
    assert nv["fidelity"]["verdict"] == "ok", nv["fidelity"]["reasons"]
    # NV: a queue of a few packets (its pad) over the path; Reno: most of the buffer
    assert _median_steady_rtt_ms(nv) < RTT_MS + 0.3 * RTT_MS < _median_steady_rtt_ms(reno)
    assert nv["measured"]["delay_line"]["link"]["tail_drops"] < reno["measured"]["delay_line"]["link"]["tail_drops"]
    assert nv["measured"]["steady_throughput_bps"] > 0.8 * payload_ceiling_bps(rate)

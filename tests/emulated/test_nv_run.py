"""TCP-NV (cc/src/nv_tev.c) on the emulated path: delay-based, it backs off when the queue
grows, so its senders see an RTT near the path's own where Reno fills the buffer."""
from __future__ import annotations

import warnings

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval import trace
from tcpeval.condition import HEADER_BYTES, MSS_BYTES, payload_ceiling_bps
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

# NV's pad (nv_tev.c, as Linux's nv_pad): it backs off once more than this many of its own
# packets queue. The test compares queues in packets, not in milliseconds: a pad is 0.24 ms
# at 0.5 Gbit/s but 0.6 ms at the 0.2 Gbit/s a slower host's calibration gives, which a
# 2-ms path's "within 30 % of the RTT" took for a standing queue (CI, 2.665 ms).
NV_PAD_PACKETS = 10
# The buffer (one BDP) holds at least this many pads, so that NV's few and Reno's many
# packets queued stay far apart at whatever rate the host carries.
BUFFER_IN_PADS = 8
DURATION_S = 6.0
FRAME_BITS = (MSS_BYTES + HEADER_BYTES) * 8


def _rtt_ms_for(rate_bps: float) -> float:
    """The shortest RTT (at least 2 ms, on a 1-ms grid) whose one-BDP buffer holds
    BUFFER_IN_PADS pads at ``rate_bps``."""
    needed_ms = BUFFER_IN_PADS * NV_PAD_PACKETS * FRAME_BITS / rate_bps * 1e3
    return max(2.0, float(-(-needed_ms // 1)))


def _median_steady_queue_packets(record: dict, rate_bps: float) -> float:
    """The sender's RTT over the run's second half less the idle path's, in frames of the
    link (the flow's own queue: it is alone on the path)."""
    s = record["flows"][0]["samples"]
    rtts = sorted(v for t, v in zip(s["t_s"], s["rtt_us"]) if t > DURATION_S / 2 and v)
    queued_ms = rtts[len(rtts) // 2] / 1e3 - record["measured"]["rtt_ms"]
    return queued_ms / 1e3 * rate_bps / FRAME_BITS


def _second_half(record: dict) -> dict:
    """NV's sender-side samples over the run's second half: its losses (retransmitted
    segments) and its largest window, in bytes."""
    s = record["flows"][0]["samples"]
    half = [i for i, t in enumerate(s["t_s"]) if t > DURATION_S / 2]
    return {"retransmits": sum(s["retransmits"][i] or 0 for i in half),
            "max_cwnd_bytes": max((s["cwnd_bytes"][i] or 0 for i in half), default=0)}


def test_nv_keeps_the_queue_near_its_pad_where_reno_fills_the_buffer(backend, tmp_path, rate_on):
    rtt_ms = _rtt_ms_for(rate_on("tevlink", 2.0))
    rate = rate_on("tevlink", rtt_ms)
    buffer_bytes = int(rate / 8 * rtt_ms / 1e3)  # one BDP: Reno's queue adds up to rtt_ms
    buffer_packets = buffer_bytes * 8 / FRAME_BITS
    records = {}
    for variant, impl in (("nv", "port"), ("reno", "native")):
        cond = adhoc_condition([variant], rtt_ms, 0.0, DURATION_S, impl=impl, rate_bps=rate,
                               buffer_bytes=buffer_bytes, seed=5, dilation=1)
        run_dir = tmp_path / variant
        backend.run(cond, run_dir)
        records[variant] = trace.read_trace(run_dir)
        assert nothing_left(run_id_of(run_dir))
    nv, reno = records["nv"], records["reno"]
    assert nv["flows"][0]["cc"]["verified"] == "nv_tev"
    assert_ok_unless_the_host_fell_behind(nv)
    # NV: about its pad queued (11-13 packets at 0.1-0.5 Gbit/s here; the standing queue of
    # several pads its port once kept after a minimum relearnt fails); Reno's sawtooth
    # between an empty and a full buffer: about half of it (45-49 of 83 packets)
    nv_queue, reno_queue = (_median_steady_queue_packets(r, rate) for r in (nv, reno))
    assert nv_queue < 2 * NV_PAD_PACKETS < buffer_packets / 3 < reno_queue, (nv_queue, reno_queue, buffer_packets, rate, rtt_ms)
    assert nv["measured"]["delay_line"]["link"]["tail_drops"] < reno["measured"]["delay_line"]["link"]["tail_drops"]
    # NV uses the path: its window reaches the path's BDP (a port that backs off on noise or
    # regrows too slowly stays below it) ...
    half = _second_half(nv)
    stalls = nv["measured"]["delay_line"]["host_stalls"]
    seen = (half, nv["measured"]["steady_throughput_bps"], stalls["count"], stalls["max_ns"])
    assert half["max_cwnd_bytes"] >= payload_ceiling_bps(rate) / 8 * rtt_ms / 1e3, seen
    # ... and, between losses, fills it. A loss in the second half costs NV more than Reno
    # (it halves, and after a timeout regrows slower than Reno, as Linux's NV does), and
    # on this drop-0 path with NV's queue far under the buffer, a loss takes a burst that
    # fills the buffer: a host stall that held the engine's frames and then let their ACKs
    # through at once (of 12 runs here, the 7 with second-half losses, 3-14 retransmitted,
    # 93-98 % of the ceiling, all had host stalls; CI once had 66 %). There the shortfall
    # is the host's, and only the window is judged.
    if half["retransmits"] == 0:
        assert nv["measured"]["steady_throughput_bps"] > 0.8 * payload_ceiling_bps(rate), seen
    else:
        warnings.warn(f"NV lost segments in its second half, throughput not judged: {seen}", stacklevel=1)

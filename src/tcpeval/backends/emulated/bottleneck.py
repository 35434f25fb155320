"""The bottleneck link: a TBF qdisc on the switch's device toward the receivers gives it
the condition's rate and buffer, and the senders' TSO frames are sized to it."""
from __future__ import annotations

import json

from tcpeval.backends.emulated import host, topology
from tcpeval.backends.emulated.topology import WIRE_FRAME_BYTES

TBF_BURST_S = 200e-6
# The peak bucket holds one frame, so each frame waits until it has refilled: at 10x the
# rate that took about as long as a dequeue and every few frames waited for the qdisc
# watchdog (~20 us), capping the rate (docs/fidelity.md); at 100x a refill is shorter
# than any dequeue.
PEAK_FACTOR = 100


def shape(topo: topology.Topology, rate_bps: float | None, buffer_bytes: int, dilation: int = 1) -> dict:
    """Rate and buffer on the bottleneck device (nothing for an unshaped calibration run,
    rate None); returns mechanisms.rate_detail."""
    if rate_bps is None:
        return {"mechanism": "none (unshaped calibration)"}
    sender_segs = topology.sender_gso_max_segs(rate_bps * dilation, WIRE_FRAME_BYTES)
    topo.cap_sender_frames(sender_segs)
    burst = max(2 * WIRE_FRAME_BYTES, int(rate_bps / 8 * TBF_BURST_S))
    # peak bucket of one wire frame: TBF then splits every TSO frame into wire packets as
    # it enqueues them, so the buffer fills and overflows packet by packet, like the
    # switch's; at PEAK_FACTOR x the rate it never holds a packet back
    # (tests/emulated/test_runs.py pins the rate)
    peak = int(rate_bps * PEAK_FACTOR)
    limit = max(buffer_bytes, WIRE_FRAME_BYTES)
    host.run(["tc", "qdisc", "replace", "dev", topo.bottleneck_dev, "root", "tbf",
              "rate", f"{int(rate_bps)}bit", "burst", burst, "peakrate", f"{peak}bit",
              "mtu", WIRE_FRAME_BYTES, "limit", limit], ns=topo.sw)
    return {"mechanism": "tbf", "device": topo.bottleneck_dev, "rate_bps": rate_bps,
            "burst_bytes": burst, "peakrate_bps": peak, "mtu_bytes": WIRE_FRAME_BYTES,
            "limit_bytes": limit, "sender_frame_segments": sender_segs}


def qdisc_stats(ns: str, dev: str) -> dict:
    """The root qdisc's counters (bytes, packets, drops, backlog...) of ``dev``."""
    out = host.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], ns=ns, check=False).stdout
    try:
        qdiscs = json.loads(out)
    except json.JSONDecodeError:
        return {}
    root = next((q for q in qdiscs if q.get("root")), qdiscs[0] if qdiscs else {})
    return {k: root.get(k) for k in ("kind", "bytes", "packets", "drops", "overlimits", "requeues",
                                     "backlog", "qlen")}

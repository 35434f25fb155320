"""The bottleneck link: the condition's rate and buffer, and the senders' TSO frames sized
to it. Two mechanisms (LINKS):

- ``tevlink``: the link engine in the delay line's process (delayline/tevdelay.c): data
  frames are stolen at the switch's sender ports and leave at departures computed from the
  link's own clock (departure = max(arrival, previous departure) + bytes / rate), with a
  byte-exact tail drop; it spins on its own CPU, so no timer per packet.
- ``tbf``: a TBF qdisc on the switch's device toward the receivers (the fallback: in a VM
  its watchdog timer per packet costs tens of microseconds).

Which one a run uses: TCPEVAL_LINK if set, else the one calibration measured to need the
smaller time-dilation factor for it (calibrate.choose)."""
from __future__ import annotations

import json
import os

from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host, topology
from tcpeval.backends.emulated.topology import WIRE_FRAME_BYTES

# With two queues (ecn_queues 2), a flow's queue by name; tevdelay numbers them in this
# order (--data-route ...,<queue>)
QUEUES = ("marking", "drop_tail")

LINKS = ("tevlink", "tbf")
LINK_ENV = "TCPEVAL_LINK"


def forced_link() -> str | None:
    """$TCPEVAL_LINK: one mechanism for every run (benchmarks, comparisons), or None."""
    name = os.environ.get(LINK_ENV) or None
    if name is not None and name not in LINKS:
        raise BackendError(f"{LINK_ENV}={name!r}: expected one of {', '.join(LINKS)}")
    return name

TBF_BURST_S = 200e-6
# The peak bucket holds one frame, so each frame waits until it has refilled: at 10x the
# rate that took about as long as a dequeue and every few frames waited for the qdisc
# watchdog (~20 us), capping the rate (docs/fidelity.md); at 100x a refill is shorter
# than any dequeue.
PEAK_FACTOR = 100


def shape(topo: topology.Topology, rate_bps: float | None, buffer_bytes: int, dilation: int = 1,
          link: str = "tbf", art=None, ecn_threshold_bytes: int | None = None,
          flow_queues: list | None = None) -> dict:
    """Rate and buffer on the bottleneck (nothing for an unshaped calibration run, rate
    None); returns mechanisms.rate_detail. For ``tevlink`` this prepares the path (the
    senders' frames, the data taps); the delay line's process is the link (delay.py)."""
    if rate_bps is None:
        return {"mechanism": "none (unshaped calibration)"}
    sender_segs = topology.sender_gso_max_segs(rate_bps * dilation, WIRE_FRAME_BYTES)
    topo.cap_sender_frames(sender_segs)
    if link == "tevlink":
        return engine_path(topo, art, rate_bps, buffer_bytes, sender_segs, ecn_threshold_bytes, flow_queues)
    if ecn_threshold_bytes:
        raise host.BackendError(f"ecn_threshold_bytes: ECN marking needs the link engine; the link is {link}")
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


def engine_path(topo: topology.Topology, art, rate_bps: float, buffer_bytes: int, sender_segs: int,
                ecn_threshold_bytes: int | None = None, flow_queues: list | None = None) -> dict:
    """The data path through the link engine: the senders segment their TSO frames in
    software before their veth (GSO: the engine sees wire packets, one drop decision each),
    and the kernel's own copy of each data frame is discarded at the switch's sender ports
    (tev_steal), so frames cross only the engine. Each frame's checksum state travels with
    it in a virtio-net header (tevdelay.c), so the TCP checksum stays partial as on the
    kernel's own path. The drop stage stays on the receivers' links."""
    for i in range(1, topo.pairs + 1):
        host.run(["ethtool", "-K", topo.dev("ep"), "tso", "off", "gso", "on"],
                 ns=topo.ns(f"s{i}"), check=False)
    for port in topo.sender_ports():
        host.run([art.tevbpf, "attach", art.datapath_obj, "tev_steal", port, "ingress"], ns=topo.sw)
    return {"mechanism": "tevlink", "rate_bps": rate_bps, "buffer_bytes": buffer_bytes,
            "limit_bytes": max(buffer_bytes, WIRE_FRAME_BYTES), "sender_frame_segments": sender_segs,
            "schedule": "departure = max(arrival, previous departure) + wire bytes / rate; "
                        "tail drop when the bytes queued before a frame plus the frame exceed the limit",
            "data_ports": [p.split("-", 1)[1] for p in topo.sender_ports()],
            "checksums": "partial, carried in a virtio-net header (PACKET_VNET_HDR)",
            **({"ecn_threshold_bytes": ecn_threshold_bytes,
                "ecn": "an ECT(0)/ECT(1) frame that finds ecn_threshold_bytes or more queued before it is "
                       "marked CE (IPv4 header checksum updated); a frame that is not ECN-capable is left "
                       "to the tail drop"} if ecn_threshold_bytes else {}),
            **({"ecn_queues": 2, "flow_queues": list(flow_queues),
                "queues": "two queues, each with the whole buffer: the marking one for the flows that "
                          "negotiate ECN (ecn: true, or an algorithm that asks for it itself: DCTCP), a "
                          "drop-tail one for the rest and UDP; a deficit round robin, one full frame "
                          "(1514 bytes) per turn, shares the rate while both have frames waiting"}
               if flow_queues else {})}


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

"""Kernel counters read around a run's traffic: host CPU time and softnet drops, the
namespaces' IP and TCP counters, and from the receivers' counters the ACK record
(segments per ACK) the fidelity verdict judges the ACK clock by."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tcpeval.backends import fidelity
from tcpeval.backends.emulated import host
from tcpeval.backends.emulated.bottleneck import qdisc_stats

# A sender's undos of a recovery it had entered: by DSACK, by timestamps (wholly or in
# part), or of a timeout's loss state -- each a retransmission the kernel found spurious.
UNDO_COUNTERS = ("TCPDSACKUndo", "TCPFullUndo", "TCPPartialUndo", "TCPLossUndo")

TCP_COUNTERS = {"Tcp": ("InSegs", "OutSegs", "RetransSegs"),
                "TcpExt": ("TCPBacklogCoalesce", "DelayedACKs", "TCPAckCompressed", "TCPPureAcks",
                           "TCPHPAcks", "TCPBacklogDrop", "TCPRcvQDrop", "TCPOFOQueue",
                           # why a receiver might hold its ACKs back: a window it cannot
                           # advance (full receive queue, collapsing, memory pressure)
                           "PruneCalled", "TCPRcvCollapsed", "TCPMemoryPressures",
                           "TCPWantZeroWindowAdv", "TCPToZeroWindowAdv", "DelayedACKLocked",
                           # a sender's: frames the host delivered out of order (the path's
                           # model never reorders) and the recoveries it then undid
                           "TCPSACKReorder", "TCPTSReorder", *UNDO_COUNTERS)}


def cpu_times() -> tuple[int, int, int]:
    """Host-wide CPU time: (total, idle, stolen by the hypervisor) in USER_HZ ticks."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts), idle, parts[7] if len(parts) > 7 else 0


def softnet_drops() -> int:
    total = 0
    for line in Path("/proc/net/softnet_stat").read_text().splitlines():
        total += int(line.split()[1], 16)
    return total


def net_counters(ns: str, wanted: dict) -> dict:
    """Counters of a namespace from /proc/net/snmp and /proc/net/netstat (pairs of a
    "Group: names" line and a "Group: values" line): {name: value} for the names in
    ``wanted`` ({group: names}) that the kernel has."""
    text = host.run(["cat", "/proc/net/snmp", "/proc/net/netstat"], ns=ns, check=False).stdout
    out, lines = {}, text.splitlines()
    for names, values in zip(lines, lines[1:]):
        group = names.split(":", 1)[0]
        if group not in wanted or not values.startswith(group + ":") or names == values:
            continue
        table = dict(zip(names.split()[1:], values.split()[1:]))
        for key in wanted[group]:
            if key in table and table[key].lstrip("-").isdigit():
                out[key] = int(table[key])
    return out


def input_drops(ns: str, devs: list[str]) -> dict:
    """{device: frames dropped on its way in} of the named devices of a namespace. A veth
    counts as its received-and-dropped the frames its peer sent that the kernel could not
    queue for input (a CPU's backlog full: net.core.netdev_max_backlog)."""
    out = host.run(["ip", "-s", "-j", "link", "show"], ns=ns, check=False).stdout
    try:
        links = json.loads(out or "[]")
    except ValueError:
        return {}
    return {link["ifname"]: link.get("stats64", {}).get("rx", {}).get("dropped", 0)
            for link in links if link.get("ifname") in devs}


def ip_forwarded(ns: str) -> int | None:
    """IP ForwDatagrams of a namespace: what took the routing fallback instead of the
    switch's L2 redirect."""
    return net_counters(ns, {"Ip": ("ForwDatagrams",)}).get("ForwDatagrams")


def tcp_counters(ns: str) -> dict:
    """A namespace's TCP segment and ACK-processing counters."""
    return net_counters(ns, TCP_COUNTERS)


def in_order_ratio(before: dict, after: dict, pairs: int,
                   acks_per_retransmission: int = 0) -> tuple[float | None, int, int]:
    """(in-order segments per ACK, segments, ACKs) of the receivers between two counter
    snapshots. In-order leaves out what a loss makes a receiver ACK at once, one ACK per
    segment, whatever the ACK clock: out-of-order segments (TCPOFOQueue) and the
    retransmissions that fill the holes (the senders' RetransSegs)."""
    def d(role, key):
        return after[role].get(key, 0) - before[role].get(key, 0)
    rng = range(1, pairs + 1)
    rin = sum(d(f"r{i}", "InSegs") for i in rng)
    rout = sum(d(f"r{i}", "OutSegs") for i in rng)
    immediate = sum(d(f"r{i}", "TCPOFOQueue") + d(f"s{i}", "RetransSegs") for i in rng)
    acks = rout - immediate - acks_per_retransmission * sum(d(f"s{i}", "RetransSegs") for i in rng)
    return ((rin - immediate) / acks if acks > 0 else None), rin, rout


def ack_record(before: dict, after: dict, pairs: int, midway: dict | None = None) -> dict:
    """Per-endpoint counter deltas and the receivers' data segments per ACK (3.16 with
    delayed ACKs: about 2; far more means stretch ACKs), over the whole run and, from the
    `midway` snapshot on, over its second half: the steady state the verdict judges (the
    first seconds, with the receive window still opening, run a little higher)."""
    delta = {role: {k: after[role].get(k, 0) - before[role].get(k, 0) for k in after[role]}
             for role in after}
    in_order, rin, rout = in_order_ratio(before, after, pairs)
    steady, _, steady_acks = in_order_ratio(midway, after, pairs) if midway else (None, 0, 0)
    lenient = (in_order_ratio(midway, after, pairs, fidelity.HOLE_FILL_ACKS)[0] if midway else None)
    return {"endpoints": delta, "receiver_segments_per_ack": rin / rout if rout else None,
            "receiver_segments_per_ack_in_order": in_order,
            "receiver_segments_per_ack_steady": steady, "receiver_acks_steady": steady_acks,
            "receiver_segments_per_ack_steady_after_hole_fills": lenient,
            "backlog_coalesced": sum(d.get("TCPBacklogCoalesce", 0) for d in delta.values())}


@dataclass(frozen=True)
class HostCounters:
    """What the host and the switch counted up to one moment: the bottleneck qdisc, the
    host's CPU time and softnet drops, the keep-awake loops' CPU time and the switch's
    routed (not L2-redirected) packets."""
    qdisc: dict
    cpu: tuple
    softnet: int
    awake_ticks: int
    forwarded: int | None
    switch_input_drops: dict = field(default_factory=dict)  # {port: frames lost entering the switch}

    @classmethod
    def read(cls, topo, keep_awake) -> HostCounters:
        return cls(qdisc=qdisc_stats(topo.sw, topo.bottleneck_dev), cpu=cpu_times(), softnet=softnet_drops(),
                   awake_ticks=keep_awake.ticks(), forwarded=ip_forwarded(topo.sw),
                   switch_input_drops=input_drops(topo.sw, topo.sender_ports() + topo.ack_ports()))


def input_drops_since(before: dict, now: dict) -> dict:
    """Per switch port, the frames from the hosts it dropped between two readings of
    input_drops (the verdict's count at the end, the doomed-attempt watch's on the way)."""
    return {dev: n - before.get(dev, 0) for dev, n in now.items()}


def switch_input_drops(before: HostCounters, after: HostCounters) -> dict:
    """Per switch port, the frames from the hosts it dropped between two host readings."""
    return input_drops_since(before.switch_input_drops, after.switch_input_drops)


def cpu_shares(before: HostCounters, after: HostCounters) -> tuple[float | None, float | None]:
    """(busy, stolen) shares of the host's CPU time between two readings."""
    total = after.cpu[0] - before.cpu[0]
    # the keep-awake loops' time is idle time as far as the run is concerned
    idle = after.cpu[1] - before.cpu[1] + after.awake_ticks - before.awake_ticks
    busy = (1 - idle / total) if total > 0 else None
    # a VM's vCPUs stall while the hypervisor runs something else: the delay line's late
    # frames and the ports' skipped hooks come with it on a virtual machine
    stolen = (after.cpu[2] - before.cpu[2]) / total if total > 0 else None
    return busy, stolen

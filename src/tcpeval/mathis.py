"""The Mathis model of a Reno flow under random loss, the yardstick of the validation
campaign (and of the run lengths it needs).

    B = MSS / RTT * C / sqrt(p),  C = sqrt(3 / (2 b))

Mathis, Semke, Mahdavi, Ott: The macroscopic behavior of the TCP congestion avoidance
algorithm (CCR 1997). b is the number of packets acknowledged per ACK: 2 with delayed
ACKs (C = 0.87), as on the paper's 3.16 receivers. The model holds while the loss, not
the link, limits the flow; above the link rate the flow is link-limited instead.
"""
from __future__ import annotations

import math

from tcpeval.condition import MSS_BYTES, payload_ceiling_bps

PACKETS_PER_ACK = 2       # delayed ACKs
BAND = 0.4                # the acceptance band: the model +-40 %


def constant(packets_per_ack: float = PACKETS_PER_ACK) -> float:
    return math.sqrt(3 / (2 * packets_per_ack))


def throughput_bps(rtt_ms: float, p: float, *, mss_bytes: int = MSS_BYTES,
                   packets_per_ack: float = PACKETS_PER_ACK) -> float:
    """The model's rate in bit/s; inf at p = 0."""
    if rtt_ms <= 0:
        raise ValueError(f"rtt_ms must be > 0, got {rtt_ms}")
    if p <= 0:
        return math.inf
    return mss_bytes * 8 / (rtt_ms / 1e3) * constant(packets_per_ack) / math.sqrt(p)


def loss_events_per_s(rtt_ms: float, p: float, link_bps: float, *,
                      mss_bytes: int = MSS_BYTES) -> float:
    """Packets lost per second at the model's rate, or at the link's payload ceiling if
    that is lower (link_bps counts frames). (With random loss at rate p, about one loss
    event per lost packet.)"""
    rate = min(throughput_bps(rtt_ms, p, mss_bytes=mss_bytes), payload_ceiling_bps(link_bps))
    return p * rate / (mss_bytes * 8)


def duration_for_loss_events(events: int, rtt_ms: float, p: float, link_bps: float, *,
                             min_s: float = 0.0) -> float:
    """Seconds of traffic for `events` expected loss events, at least min_s, whole seconds."""
    per_s = loss_events_per_s(rtt_ms, p, link_bps)
    if per_s <= 0:
        raise ValueError(f"no loss events at p = {p}: a duration for {events} events is undefined")
    return float(max(min_s, math.ceil(events / per_s)))


def reno_pair_cycle_s(rtt_ms: float, link_bps: float, *, mss_bytes: int = MSS_BYTES) -> float:
    """A sawtooth cycle of two Reno flows on a one-BDP buffer (docs/precision.md, "Two-flow
    horizons"): they halve together at each overflow and regrow BDP / 2 segments each at
    half a segment an RTT (3.16 Reno counts ACKs; delayed ACKs), at 1.5 times the base RTT
    on average: BDP RTTs of 1.5 x the base one. Reno grows slowest of the six, so a
    two-flow run that holds this cycle holds every pair's (link_bps counts frames)."""
    bdp_segments = payload_ceiling_bps(link_bps) * rtt_ms / 1e3 / 8 / mss_bytes
    return bdp_segments * 1.5 * rtt_ms / 1e3


def duration_for_cycles(cycles: float, rtt_ms: float, link_bps: float, *, min_s: float = 0.0) -> float:
    """Seconds for `cycles` of a Reno pair's sawtooth (reno_pair_cycle_s), at least min_s,
    whole seconds."""
    return float(max(min_s, math.ceil(cycles * reno_pair_cycle_s(rtt_ms, link_bps))))

"""A scripted path for the host harness: one long-lived flow over a fixed-RTT link with a
drop-tail buffer and independent (Bernoulli) per-segment loss, driving a port's host
build through hostsim.Sim round by round.

Per round (one RTT, longer when the window exceeds the BDP and the buffer holds the
rest) the flow sends cwnd segments; the receiver ACKs every second segment (delayed
ACKs; an odd segment waits for the next round); each ACK reaches the port in the 6.x
order (pkts_acked with the round's RTT, then cong_avoid in Open). The first segment
lost in a round -- randomly with probability p, or by tail drop beyond BDP + buffer --
starts fast recovery as 6.x does (ssthresh(), set_state(Recovery)); the rest of that
round and the retransmission's round are acknowledged in Recovery (no cong_avoid), then
the window is the threshold and the flow is back in Open. Further losses of the first
round start no second reduction; a loss among the new segments of the retransmission's
round starts the next recovery at once. Time advances by the round's duration spread
evenly over its ACKs; throughput counts the segments delivered (x 1460 B).

It abstracts from SACK details, PRR's exact pacing during recovery, and timeouts (none
happen at the loss rates it is meant for); it is a tool for comparing algorithms'
windows on the same loss sequence, not an emulator.

Run as a tool (build the host libraries first, as tests/cc/conftest.py does):

    python tests/cc/scripted_path.py BUILD_DIR reno cubic --seeds 1 2 3
"""
from __future__ import annotations

import argparse
import ctypes as C
import math
import random
from dataclasses import dataclass, field
from fractions import Fraction

from hostsim import INFINITE_SSTHRESH, MSS, OPEN, RECOVERY, Sim

WIRE_MSS = 1460  # bytes per segment for the throughput arithmetic (the paper's MSS)


class Cubic316(C.Structure):  # struct cubic316 in cc/src/cubic316.c, to inspect: sim.ca(Cubic316)
    _fields_ = [("cnt", C.c_uint32), ("last_max_cwnd", C.c_uint32), ("loss_cwnd", C.c_uint32),
                ("last_cwnd", C.c_uint32), ("last_time", C.c_uint32),
                ("bic_origin_point", C.c_uint32), ("bic_K", C.c_uint32),
                ("delay_min", C.c_uint32), ("epoch_start", C.c_uint32), ("ack_cnt", C.c_uint32),
                ("tcp_cwnd", C.c_uint32), ("delayed_ack", C.c_uint16), ("sample_cnt", C.c_uint8),
                ("found", C.c_uint8), ("round_start", C.c_uint32), ("end_seq", C.c_uint32),
                ("last_ack", C.c_uint32), ("curr_rtt", C.c_uint32)]


@dataclass
class PathResult:
    variant: str
    seed: int
    seconds: float          # measured (after warm-up)
    mean_cwnd: float        # time-average window, segments
    throughput_bps: float   # segments delivered x WIRE_MSS x 8 / time
    reductions: int         # loss events (fast recoveries)
    lost: int               # segments lost (random + tail drop)
    rounds: int


def bdp_segments(rate_bps: float, rtt_us: float) -> int:
    return int(rate_bps * rtt_us / 1e6 / 8 / WIRE_MSS)


class ScriptedPath:
    """One flow of `variant` over a path of `rate_bps`, `rtt_us`, a buffer of
    `buffer_segments` (default one BDP) and per-segment loss probability `p` (with `ecn`,
    a connection that negotiated ECN on a path that marks nothing)."""

    def __init__(self, build_dir, variant: str, *, rate_bps=9.5e9, rtt_us=200, p=1e-4,
                 seed=1, buffer_segments=None, hz=250, pkts_per_ack=2, ecn=False,
                 seq_bytes=None, load_params=None, ssthresh=INFINITE_SSTHRESH):
        # ecn: the connection negotiated ECN (the path marks nothing); sequence numbers in
        # bytes then, as an ECN algorithm compares snd_nxt with snd_una (seq_bytes: bytes
        # without ECN, for another such algorithm: nv_tev)
        self.sim = Sim(build_dir, variant, hz=hz, ecn=ecn, ssthresh=ssthresh,
                       seq_bytes=ecn if seq_bytes is None else seq_bytes, load_params=load_params)
        self.variant, self.seed = variant, seed
        self.rate_bps, self.rtt_us, self.p = rate_bps, rtt_us, p
        self.bdp = bdp_segments(rate_bps, rtt_us)
        self.limit = self.bdp + (self.bdp if buffer_segments is None else buffer_segments)
        self.per_ack = pkts_per_ack
        self.rng = random.Random(seed)
        self.held = 0                    # a segment the receiver has not ACKed yet
        self.next_loss = self._gap()     # segments until the next random loss
        self.t_us = 0.0
        self.lost_total = self.reductions = 0
        self.carried = 0                 # segments of a recovery round lost, not yet noticed
        self.on_round = None             # optional callback(path) after every round

    def _gap(self) -> int:
        """Segments up to and including the next random loss (geometric, i.e. Bernoulli
        per segment)."""
        if self.p <= 0:
            return 1 << 62
        u = 1.0 - self.rng.random()
        return int(math.log(u) / math.log1p(-self.p)) + 1

    def _round_us(self, cwnd: int) -> float:
        """A window's round trip: the RTT, or the time the link needs to send it."""
        return max(self.rtt_us, cwnd * WIRE_MSS * 8 / self.rate_bps * 1e6)

    def _acks(self, segments: int, rtt_us: float, lost_at: int | None):
        """ACK `segments` delivered segments over rtt_us (also each ACK's RTT sample, which
        so includes the queueing delay); with lost_at, enter recovery at that segment's ACK.
        Returns the number of segments acknowledged."""
        s = self.sim
        total = segments + self.held
        n = total // self.per_ack
        self.held = total - n * self.per_ack
        if n == 0:
            s.sk.tcp_mstamp += int(rtt_us)
            if lost_at is not None and s.sk.icsk_ca_state == OPEN:
                s._reduce(RECOVERY)
            return 0
        dt = rtt_us / n
        for i in range(n):
            if lost_at is not None and i * self.per_ack >= lost_at and s.sk.icsk_ca_state == OPEN:
                s._reduce(RECOVERY)
            s.ack(self.per_ack, int(rtt_us), dt)
        if lost_at is not None and s.sk.icsk_ca_state == OPEN:  # lost after the last ACKed one
            s._reduce(RECOVERY)
        return n * self.per_ack

    def round(self):
        """One round trip. Returns (cwnd at its start, duration in us, segments delivered)."""
        s = self.sim
        cwnd = s.cwnd
        dur = self._round_us(cwnd)
        lost_at = None
        lost = 0
        if self.carried:                        # lost in the last recovery round, seen now
            lost_at, self.carried = 0, 0
        if cwnd > self.limit:                   # tail drop of what the buffer cannot hold
            lost += cwnd - self.limit
            lost_at = self.limit if lost_at is None else lost_at
        if self.next_loss <= cwnd:
            first = self.next_loss - 1
            lost_at = first if lost_at is None else min(lost_at, first)
            while self.next_loss <= cwnd:
                lost += 1
                self.next_loss += self._gap()
        self.next_loss -= cwnd
        delivered = cwnd - lost
        self._acks(delivered, dur, lost_at)
        if lost_at is not None:
            # the retransmission's round: still in Recovery (PRR sends about ssthresh)
            ss = s.ssthresh
            rdur = self._round_us(ss)
            self._acks(ss, rdur, None)
            dur += rdur
            # its new segments are lost as any others; such a loss starts the next recovery
            self.next_loss -= ss
            while self.next_loss <= 0:
                self.carried += 1
                self.next_loss += self._gap()
            lost += self.carried
            delivered += ss - self.carried
            s.sk.snd_cwnd = ss                  # tcp_end_cwnd_reduction
            if s.ops.set_state:
                s.ops.set_state(s.p, OPEN)
            s.sk.icsk_ca_state = OPEN
            self.reductions += 1
        self.t_us += dur
        self.lost_total += lost
        return cwnd, dur, delivered

    def run(self, seconds: float, warmup: float = 1.0) -> PathResult:
        while self.t_us < warmup * 1e6:
            self.round()
        t0, red0, lost0 = self.t_us, self.reductions, self.lost_total
        area = seg = 0.0
        rounds = 0
        while self.t_us - t0 < seconds * 1e6:
            cwnd, dur, delivered = self.round()
            area += cwnd * dur
            seg += delivered
            rounds += 1
            if self.on_round:
                self.on_round(self)
        T = self.t_us - t0
        return PathResult(self.variant, self.seed, T / 1e6, area / T,
                          seg * WIRE_MSS * 8 / (T / 1e6), self.reductions - red0,
                          self.lost_total - lost0, rounds)


class DctcpTev(C.Structure):  # struct dctcp_tev in cc/src/dctcp_tev.c: sim.ca(DctcpTev)
    _fields_ = [("alpha", C.c_uint32), ("window_end", C.c_uint32), ("prior_snd_una", C.c_uint32),
                ("bytes_acked", C.c_uint32), ("bytes_marked", C.c_uint32), ("loss_cwnd", C.c_uint32),
                ("prior_rcv_nxt", C.c_uint32), ("ce_state", C.c_uint8), ("_pad", C.c_uint8 * 3)]
    ONE = 1 << 20  # alpha's fixed point


class NvTev(C.Structure):  # struct nv_tev in cc/src/nv_tev.c: sim.ca(NvTev)
    _fields_ = [("min_rtt", C.c_uint32), ("min_rtt_new", C.c_uint32), ("min_rtt_reset", C.c_uint32),
                ("avg_rtt", C.c_uint32), ("base_rtt", C.c_uint32), ("lower_bound_rtt", C.c_uint32),
                ("round_end", C.c_uint32), ("round_start_us", C.c_uint32),
                ("round_delivered", C.c_uint32), ("round_flight", C.c_uint32), ("queue", C.c_uint32),
                ("max_rate", C.c_uint32), ("growth_factor", C.c_int32), ("eval_calls", C.c_uint8),
                ("rtt_cnt", C.c_uint8), ("allow_growth", C.c_uint8), ("reset_pending", C.c_uint8),
                ("no_cong_cnt", C.c_uint8), ("round_open", C.c_uint8), ("_pad", C.c_uint8 * 2)]
    NO_RTT = 0xFFFFFFFF


@dataclass
class Reduction:
    """A window reduction the stack made on ECE (tcp_enter_cwr)."""
    una: int          # segments acknowledged when it began
    high_seq: int     # the segment after the last one sent then: it lasts until una passes it
    prior_cwnd: int
    ssthresh: int
    info: object      # what MarkingPath's `probe` returned then


@dataclass
class MarkingPath:
    """One flow over a loss-free path whose bottleneck marks CE on a fraction `fraction`
    of the bytes, for an ECN sender (hostsim.Sim with ECN negotiated and byte sequence
    numbers) whose receiver echoes CE segment by segment (dctcp_tev's receiving side):
    each round trip the receiver acknowledges what was in flight at its start,
    `pkts_per_ack` segments an ACK (the round's last ACK fewer if that is what is left),
    spread evenly over `rtt_us`; the ACKs that carry ECE are chosen by error diffusion
    over the bytes, so that over any run of ACKs the marked bytes are `fraction` of those
    acknowledged to within one ACK's. The path never queues or drops (no rate limit), so
    the window alone sets the rate. The sender reacts as 6.x does (hostsim.Sim.ack): CWR
    on an ECE in Open, once per window of data, with PRR, and cong_avoid in Open.
    `reductions` lists the CWRs entered, with `probe(sim)` taken right after (the
    algorithm's state as its ssthresh hook left it)."""
    build_dir: object
    variant: str
    fraction: float
    rtt_us: int = 100
    pkts_per_ack: int = 2
    cwnd: int = 10
    ssthresh: int = INFINITE_SSTHRESH
    probe: object = None
    sim: Sim = field(init=False)
    reductions: list = field(init=False, default_factory=list)
    acked_bytes: int = field(init=False, default=0)
    marked_bytes: int = field(init=False, default=0)

    def __post_init__(self):
        self.sim = Sim(self.build_dir, self.variant, cwnd=self.cwnd, ssthresh=self.ssthresh,
                       ecn=True, seq_bytes=True)
        self._f = Fraction(self.fraction).limit_denominator(1_000_000)
        self._credit = Fraction(0)

    def _marked(self, pkts: int) -> bool:
        self._credit += self._f * pkts
        if self._credit * 2 >= pkts:
            self._credit -= pkts
            return True
        return False

    def round(self) -> int:
        """One round trip; returns the window (segments in flight) at its start."""
        s = self.sim
        left = in_flight = s.nxt - s.una
        n = -(-in_flight // self.pkts_per_ack)
        for _ in range(n):
            k = min(self.pkts_per_ack, left)
            left -= k
            ece = self._marked(k)
            entered = s.cwr_entries
            s.ack(k, self.rtt_us, self.rtt_us / n, ece=ece)
            self.acked_bytes += k * MSS
            self.marked_bytes += k * MSS if ece else 0
            if s.cwr_entries != entered:
                self.reductions.append(Reduction(s.una, s.cwr[0], s.sk.prior_cwnd, s.ssthresh,
                                                 self.probe(s) if self.probe else None))
        return in_flight


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir", help="the dir holding host/lib<variant>316.so")
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--rtt-us", type=float, default=200)
    ap.add_argument("--p", type=float, default=1e-4)
    ap.add_argument("--rate", type=float, default=9.5e9)
    ap.add_argument("--hz", type=int, default=250)
    ap.add_argument("--seconds", type=float, default=10)
    a = ap.parse_args(argv)
    for v in a.variants:
        for seed in a.seeds:
            r = ScriptedPath(a.build_dir, v, rate_bps=a.rate, rtt_us=a.rtt_us, p=a.p, seed=seed,
                             hz=a.hz).run(a.seconds)
            print(f"{v:10s} seed {seed}: mean cwnd {r.mean_cwnd:7.1f}  "
                  f"{r.throughput_bps / 1e9:5.2f} Gbps  {r.reductions} reductions "
                  f"({r.reductions / r.seconds:.0f}/s)  lost {r.lost}")


if __name__ == "__main__":
    main()

"""What each algorithm's own window rules allow at a condition: the mean throughput of one
long-lived flow under independent random loss on the paper's path (a fixed RTT, a
drop-tail buffer, a link rate), from a round-based model of the six Linux 3.16 variants.

The manuscript sets a finding that does not hold against it: where the model, too, says
the finding cannot hold, the published figure is one that no loss-based response
function supports at that condition; where the model says it should hold and our runs
say not, the emulator (or the port) is suspect. Derived, never typed: every figure comes
from the rules below.

The rules are those of the ports (cc/src/*316.c, Linux 3.16 with HZ = 250), per round of
one RTT in which the flow sends its window (the published response functions are
derived the same way: Mathis et al. 1997 for Reno, Kelly 2003 for Scalable, RFC 3649 for
HighSpeed, Xu et al. 2004 for BIC, Ha et al. 2008 / RFC 8312 for CUBIC, Leith and
Shorten 2004 for H-TCP; tests/test_response.py checks the model against each closed form
where one exists):

* The receiver ACKs every second segment (3.16 counted ACKs, not segments, in Reno,
  Scalable and HighSpeed; BIC and CUBIC compensate for delayed ACKs; H-TCP counts
  segments).
* A round lasts the RTT, or longer while the window exceeds the bandwidth-delay product
  (the queue holds the rest); a window above BDP + buffer loses its excess (tail drop).
* Each segment is lost independently with probability p; a round with a loss ends in one
  reduction (fast recovery; the next round does not grow), as in tests/cc/scripted_path.py;
  the first ACK after it adds a segment (3.16's slow start ran while cwnd <= ssthresh).
* Left out: timeouts, SACK and PRR details, H-TCP's bandwidth switch (it would only
  lower H-TCP's backoff factor to 0.5, which at these RTTs it already is, see below).

Throughput counts the payload of segments of MSS_BYTES; the link's rate counts whole
frames (HEADER_BYTES of Ethernet, IPv4 and TCP headers besides the payload, as the
emulated links and a NIC do), so a flow's payload tops out at link x MSS / (MSS +
HEADER_BYTES), 96.4 % of it. A model, not an emulator: its figures are expectations to compare with, good to a few per cent where the
loss, not the link, limits the flow.
"""
from __future__ import annotations

import bisect
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache

from tcpeval.condition import HEADER_BYTES, MSS_BYTES

PACKETS_PER_ACK = 2          # delayed ACKs on the paper's 3.16 receivers
HZ = 250                     # the paper's 3.16 kernels (design default `hz`)
VARIANTS = ("reno", "scalable", "highspeed", "htcp", "bic", "cubic")
LOSS_EVENTS = 600            # reductions measured after the warm-up (about +-2 % on the mean)
WARMUP_EVENTS = 30
MAX_ROUNDS = 300_000


def _jiffies(seconds: float) -> int:
    """usecs_to_jiffies: rounded up."""
    return max(0, math.ceil(seconds * HZ - 1e-9))


class _Reno:
    """3.16 Reno: one segment per window of ACKs; half the window on loss."""
    def __init__(self, rtt_s: float, packets_per_ack: int):
        self.rtt_s, self.per_ack = rtt_s, packets_per_ack

    def grow(self, w: float, t: float, acks: float) -> float:
        return acks / w

    def reduce(self, w: float, t: float, queue_s: float) -> float:
        return max(w / 2, 2.0)


class _Scalable(_Reno):
    """3.16 Scalable: one segment per min(cwnd, 50) ACKs; an eighth off on loss."""
    def grow(self, w, t, acks):
        return acks / min(w, 50.0)

    def reduce(self, w, t, queue_s):
        return max(w - w / 8, 2.0)


def hstcp_rfc_window(p: float) -> float:
    """RFC 3649's response function: w = 0.12 / p^0.835 segments (above Low_Window)."""
    return 0.12 / p ** 0.835


@lru_cache(maxsize=1)
def _hstcp_bands() -> tuple[tuple[int, int], ...]:
    """The port's band table (cc/src/highspeed316.c, read, not copied): (upper cwnd bound,
    decrease << 8); in band i cwnd grows by i + 1 segments per window of ACKs. The kernel
    rounds RFC 3649's a(w) up to the band's and b(w) down: about 15-20 % above the RFC's
    continuous response at 0.2 ms."""
    from tcpeval.cc._common import source_path
    text = source_path("highspeed").read_text()
    low = int(re.search(r"CC_PARAM\(low_window,\s*(\d+)", text)[1])
    table = text[text.index("hstcp316_bands[HSTCP_BANDS] = {"):]
    table = table[:table.index("};")]
    bands = tuple((low if bound == "low_window" else int(bound), int(md))
                  for bound, md in re.findall(r"\{(low_window|\d+),\s*(\d+)\}", table))
    if len(bands) < 2:
        raise ValueError(f"{source_path('highspeed')}: no band table found")
    return bands


@lru_cache(maxsize=1)
def _hstcp_bounds() -> list[int]:
    return [bound for bound, _md in _hstcp_bands()]


class _HighSpeed(_Reno):
    """3.16 HighSpeed: in band i (the smallest whose bound is at least cwnd) i + 1
    segments per window of ACKs, the window minus md/256 of it on loss."""
    def _band(self, w: float) -> int:
        bounds = _hstcp_bounds()      # every round asks: the list is built once
        return min(bisect.bisect_left(bounds, w), len(bounds) - 1)

    def grow(self, w, t, acks):
        return acks * (self._band(w) + 1) / w

    def reduce(self, w, t, queue_s):
        cw = int(w)
        return max(cw - (cw * _hstcp_bands()[self._band(w)][1] >> 8), 2)


class _Bic(_Reno):
    """3.16 BIC (B = 4, max_increment 16, low_window 14, smooth_part 20, beta 819/1024,
    fast convergence): binary search towards the last maximum, linear probing above it."""
    B, MAX_INC, LOW, SMOOTH, BETA = 4, 16, 14, 20, 819 / 1024

    def __init__(self, rtt_s, packets_per_ack):
        super().__init__(rtt_s, packets_per_ack)
        self.last_max = 0.0

    def _cnt(self, w: float) -> float:
        if w < self.last_max:
            dist = (self.last_max - w) / self.B
            cnt = w / self.MAX_INC if dist > self.MAX_INC else (w * self.SMOOTH / self.B if dist <= 1 else w / dist)
        elif w < self.last_max + self.B:
            cnt = w * self.SMOOTH / self.B
        elif w < self.last_max + self.MAX_INC * (self.B - 1):
            cnt = (self.B - 1) * w / (w - self.last_max)
        else:
            cnt = w / self.MAX_INC
        if self.last_max == 0:
            cnt = min(cnt, 20.0)
        return max(cnt / self.per_ack, 1.0)       # the delayed-ACK compensation

    def grow(self, w, t, acks):
        if w <= self.LOW:
            return acks / w                        # below low_window: Reno
        return acks / self._cnt(w)

    def reduce(self, w, t, queue_s):
        self.last_max = w * (1 + self.BETA) / 2 if w < self.last_max else w
        return max(w / 2 if w <= self.LOW else w * self.BETA, 2.0)


def _icbrt(a: int) -> int:
    """floor(cbrt(a)) for an integer (the port's cubic_root)."""
    y = round(a ** (1 / 3)) if a > 0 else 0
    while y ** 3 > a:
        y -= 1
    while (y + 1) ** 3 <= a:
        y += 1
    return y


class _Cubic(_Reno):
    """3.16 CUBIC (bic_scale 41: C = 0.4; beta 717/1024; fast convergence; TCP
    friendliness with its delayed-ACK scaling), in the port's integer arithmetic and
    jiffies: the window follows C (t - K)^3 + W_max from the last loss, t counted from
    the epoch's start in jiffies plus the minimum RTT in whole ms, in 2^-10 s; the Reno
    estimate lifts it where that is higher. The update is skipped while the window is
    unchanged and at most HZ/32 jiffies have passed (docs/cubic-at-small-bdp.md): at a
    0.2 ms RTT that holds the growth rate for about 140 rounds at a time. Integers
    matter at small windows: C (t - K)^3 is truncated, which puts the target a segment
    above the window right after a reduction (at 0.2 ms and 1e-3 a float version of
    these rules gives 20 % less)."""
    BETA, BETA_SCALE, BIC_SCALE, HZ_SHIFT = 717, 1024, 41, 10
    CUBE_RTT_SCALE = BIC_SCALE * 10
    CUBE_FACTOR = (1 << (10 + 3 * HZ_SHIFT)) // CUBE_RTT_SCALE
    BETA_TCP = 8 * (BETA_SCALE + BETA) // 3 // (BETA_SCALE - BETA)

    def __init__(self, rtt_s, packets_per_ack):
        super().__init__(rtt_s, packets_per_ack)
        self.last_max, self.epoch, self.k, self.origin = 0, None, 0, 0
        self.tcp_cwnd, self.ack_cnt = 0, 0.0
        self.cnt, self.last_cwnd, self.last_time = 1, -1, None
        self.delay_j = _jiffies(math.floor(rtt_s * 1e3) / 1e3)   # msecs_to_jiffies(delay_min >> 3)

    def grow(self, w, t, acks):
        cw, now = int(w), math.floor(t * HZ)
        self.ack_cnt += acks
        if not (cw == self.last_cwnd and self.last_time is not None and now - self.last_time <= HZ // 32):
            self.last_cwnd, self.last_time = cw, now
            if self.epoch is None:
                self.epoch, self.ack_cnt, self.tcp_cwnd = now, 1.0, cw
                if self.last_max <= cw:
                    self.k, self.origin = 0, cw
                else:
                    self.k, self.origin = _icbrt(self.CUBE_FACTOR * (self.last_max - cw)), self.last_max
            elapsed = ((now - self.epoch + self.delay_j) << self.HZ_SHIFT) // HZ
            offs = abs(elapsed - self.k)
            delta = (self.CUBE_RTT_SCALE * offs ** 3) >> (10 + 3 * self.HZ_SHIFT)
            target = self.origin - delta if elapsed < self.k else self.origin + delta
            cnt = cw // (target - cw) if target > cw else 100 * cw
            if self.last_max == 0:
                cnt = min(cnt, 20)
            per = (cw * self.BETA_TCP) >> 3
            if per and self.ack_cnt > per:
                n = int((self.ack_cnt - 1) // per)
                self.ack_cnt -= n * per
                self.tcp_cwnd += n
            if self.tcp_cwnd > cw:
                cnt = min(cnt, cw // (self.tcp_cwnd - cw))
            self.cnt = max(cnt // self.per_ack, 1)            # the delayed-ACK compensation
        return acks / self.cnt

    def reduce(self, w, t, queue_s):
        cw = int(w)
        self.epoch = None
        self.last_max = cw * (self.BETA_SCALE + self.BETA) // (2 * self.BETA_SCALE) if cw < self.last_max else cw
        return max(cw * self.BETA // self.BETA_SCALE, 2)


class _Htcp(_Reno):
    """3.16 H-TCP (Delta_L = 1 s, RTT scaling, adaptive backoff in [0.5, 0.8]), in
    jiffies as the kernel keeps them: alpha grows with the time since the last loss;
    beta is minRTT/maxRTT only when minRTT exceeds 10 ms, which at HZ = 250 (4-ms
    jiffies, RTTs rounded up) the paper's 12.2 and 24.2 ms paths do and its 0.2 and
    6.2 ms paths do not (there it stays 0.5)."""
    def __init__(self, rtt_s, packets_per_ack):
        super().__init__(rtt_s, packets_per_ack)
        self.last_cong, self.beta = 0.0, 0.5
        self.min_rtt = _jiffies(rtt_s)

    def _alpha(self, t: float) -> float:
        diff, factor = _jiffies(t - self.last_cong), 1
        if diff > HZ:                                  # Delta_L = 1 s
            d = diff - HZ
            factor = 1 + (10 * d + (d // 2) * (d // 2) // HZ) // HZ
        if self.min_rtt:
            scale = min(max((HZ << 3) // (10 * self.min_rtt), 4), 80)
            factor = max((factor << 3) // scale, 1)
        return 2 * factor * (1 - self.beta)

    def grow(self, w, t, acks):
        return acks * self.per_ack * self._alpha(t) / w    # counts segments, not ACKs

    def reduce(self, w, t, queue_s):
        max_rtt = _jiffies(self.rtt_s + queue_s)
        if self.min_rtt > _jiffies(0.010) and max_rtt:
            self.beta = min(max(self.min_rtt / max_rtt, 0.5), 0.8)
        else:
            self.beta = 0.5
        self.last_cong = t
        return max(w * self.beta, 2.0)


_RULES = {"reno": _Reno, "scalable": _Scalable, "highspeed": _HighSpeed, "bic": _Bic,
          "cubic": _Cubic, "htcp": _Htcp}


@dataclass(frozen=True)
class Response:
    variant: str
    rtt_ms: float
    drop: float
    link_bps: float
    throughput_bps: float
    mean_window: float         # segments, time-averaged
    loss_events: int
    link_limited: bool         # the link (or the buffer), not random loss, set the rate
                               # (throughput_bps is payload: at most link x MSS / (MSS + HEADER_BYTES))


def base_variant(name: str) -> str:
    """The algorithm a variant name stands for: reno316, reno and reno-bpf are Reno."""
    for v in VARIANTS:
        if name.startswith(v):
            return v
    raise ValueError(f"no response model for variant {name!r}; known: {', '.join(VARIANTS)}")


@lru_cache(maxsize=None)
def response(variant: str, rtt_ms: float, drop: float, link_bps: float, *,
             buffer_bdp: float = 1.0, packets_per_ack: int = PACKETS_PER_ACK, periodic: bool = False,
             seed: int = 1) -> Response:
    """The model's mean throughput of ``variant`` at (rtt_ms, drop) on a link of link_bps
    with a drop-tail buffer of buffer_bdp bandwidth-delay products. packets_per_ack 1 (a
    receiver without delayed ACKs) and periodic loss (one segment in every 1/drop) are
    what the published closed forms assume; the paper's path has neither."""
    if rtt_ms <= 0 or link_bps <= 0 or not 0 <= drop < 1:
        raise ValueError(f"rtt_ms and link_bps must be > 0 and drop in [0, 1): {rtt_ms}, {link_bps}, {drop}")
    algo = base_variant(variant)
    rtt_s = rtt_ms / 1e3
    link_pps = link_bps / ((MSS_BYTES + HEADER_BYTES) * 8)
    payload_bps = link_pps * MSS_BYTES * 8
    bdp = link_pps * rtt_s
    ceiling = bdp * (1 + buffer_bdp)
    rng = random.Random(seed)
    rules = _RULES[algo](rtt_s, packets_per_ack)
    w, t, ssthresh = 10.0, 0.0, math.inf
    events = tail = 0
    sent = seconds = window_time = 0.0
    measuring = False
    until_loss = 1 / drop if drop > 0 else math.inf     # periodic loss: segments to the next
    for _ in range(MAX_ROUNDS):
        duration = max(rtt_s, w / link_pps)
        if periodic:
            until_loss -= w
            lost = until_loss <= 0
            while until_loss <= 0:
                until_loss += 1 / drop
        else:
            lost = drop > 0 and rng.random() < -math.expm1(w * math.log1p(-drop))
        if w > ceiling:
            lost, tail = True, tail + 1
        if measuring:
            sent += w
            seconds += duration
            window_time += w * duration
        t += duration
        if lost:
            events += 1
            if events == WARMUP_EVENTS:
                measuring, tail = True, 0
            if measuring and events >= WARMUP_EVENTS + LOSS_EVENTS:
                break
            w = ssthresh = rules.reduce(min(w, ceiling), t, max(0.0, w / link_pps - rtt_s))
            t += rtt_s                            # the recovery round: no growth
            if measuring:
                sent += w
                seconds += rtt_s
                window_time += w * rtt_s
            continue
        if w < ssthresh:
            w *= 2                                # slow start (no HyStart in the model)
        elif w == ssthresh:
            # 3.16's slow start runs while cwnd <= ssthresh, and stops at ssthresh + 1:
            # the first ACK after a recovery adds a segment (4.x made it cwnd < ssthresh)
            w += 1 + rules.grow(w + 1, t, w / packets_per_ack - 1)
        else:
            w += rules.grow(w, t, w / packets_per_ack)
    if seconds == 0:                              # no loss in MAX_ROUNDS: the link's payload rate
        return Response(variant, rtt_ms, drop, link_bps, payload_bps, ceiling, events, True)
    rate = min(sent * MSS_BYTES * 8 / seconds, payload_bps)
    measured = max(1, events - WARMUP_EVENTS)
    return Response(variant, rtt_ms, drop, link_bps, rate, window_time / seconds, measured,
                    link_limited=tail > 0.5 * measured or rate >= 0.98 * payload_bps)

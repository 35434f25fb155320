"""The fidelity verdict of a run: did the backend realise the condition?

Tolerances (documented in the trace under fidelity.tolerances):

- drop: the measured rate's Wilson 99.9 % interval must contain the configured p (the
  trace also records the 95 % interval, measured.drop.ci95). Tested only when the
  expected number of drops n*p is at least MIN_EXPECTED_DROPS (10): below that the count
  is too small to tell a faulty dropper from chance (with p = 1e-7 and a million packets
  a single drop already "excludes" p), so such runs are reported as not tested rather
  than flagged. p = 0 requires zero drops. Why 99.9 % and not 95 %: the drop sequence is
  a fixed function of the seed, so a 95 % test would flag about one condition in twenty
  on every rerun, for its seed's luck rather than for the emulator (a seed giving 4 drops
  where 10.8 were expected is such a case); 99.9 % still flags a dropper that misses or
  miscounts packets, and the dropper itself is pinned against the model by
  tests/emulated/test_dropper_bpf.py.
- RTT: the idle RTT measured with the delay in place must lie within
  max(RTT_TOL_ABS_MS, RTT_TOL_REL * setting) of the setting, and the path's base RTT
  must not exceed the setting.
- rate: the configured bottleneck rate must not exceed the rate calibration found the host
  to carry faithfully (an emulated run must not overrun its host); and in a run without drops
  (p = 0, where TCP should fill the link) the host's CPUs must not have been saturated
  (>= CPU_SATURATED busy, host-wide, so other tenants count) while the bottleneck
  carried less than RATE_SHORTFALL of the configured rate: that throughput would be the
  host's limit, not the algorithm's. With p > 0 a shortfall is the algorithm's response,
  so CPU load is recorded (measured.cpu_busy) but not judged.
- delay line: no frame may be lost in its rings, at most UNSENT_ACK_SHARE_MAX of the
  ACKs handed to it may fail to send (the sender's full input backlog refused them; of a
  run whose metrics leave out a warm-up, those after the cut: unsent_acks), at most
  LATE_SHARE_MAX of the frames may leave later than LATE_MAX_MS after their due time,
  and at most LATE_HARD_SHARE_MAX later than LATE_HARD_MS (an ACK held back that long
  stalls the sender whatever the RTT).
- link engine (the bottleneck when it is tevlink, emulated/bottleneck.py): no data frame
  may be lost in its rings or fail to send, and its departures are held to the delay
  line's lateness limits (a late departure is queueing the modelled link does not have).
- loaded RTT: the RTT the senders measured while they sent (each flow's smoothed RTT in
  the run's second half, samples with a window of at least LOADED_RTT_MIN_CWND segments,
  whose ACKs no delayed-ACK timer holds) must not exceed what the path allows: the RTT
  setting plus a full bottleneck buffer's queueing (buffer / rate), times
  1 + LOADED_RTT_REL, plus RTT_TOL_ABS_MS; judged on the LOADED_RTT_QUANTILE of the
  samples. Above that the host queued the flow somewhere outside the model -- the idle
  probes cannot see it, and at a short RTT it can be most of the path.
- window: no flow's congestion window may exceed WINDOW_BOUND x (BDP + buffer) of the
  path -- no path needs it, and no 3.16 host reached it (a window far above that is a
  corrupted sender, as the ports' ~1e9-segment windows were). The BDP is taken at the
  larger of the RTT setting and the senders' loaded RTT: host queueing is the loaded-RTT
  check's to flag, not this one's. A 3.16 port is judged by the largest window its guard
  let stand (max_allowed_cwnd), not by its samples: a sample may catch the garbage window
  a skipped hook left until the guard's next check replaced it, and what that window let
  the stack send is the guard check's to judge.
- ACK clock: the receivers' data segments per ACK in the run's second half (steady state),
  leaving out what a loss makes them ACK at once, must lie in SEGS_PER_ACK (3.16 receivers
  with delayed ACKs sent one ACK per two segments; every 3.16 algorithm counts ACKs, so a
  stretched clock slows each of them). Judged once the receivers sent MIN_ACKS ACKs then.
  Where the link marks CE, the lower bound gives way by what the marks make receivers ACK
  at once: an RFC 3168 receiver ACKs the first marked segment at once (quick ACKs), and a
  DCTCP receiver (RFC 8257) sends its pending delayed ACK and ACKs the segment at each
  change of CE state, so a marked segment costs at most ACKS_PER_MARK ACKs beyond the
  every-second one: the bound is SEGS_PER_ACK[0] / (1 + 2 x ACKS_PER_MARK x the marked
  share of the ECN-capable frames). The upper bound stays: marks add ACKs, never stretch.
- receiver rate: no flow's receiver may get more than INTERVAL_RATE_MAX x the bottleneck
  rate in two adjacent sampling intervals (their edges jitter with the receiver's report
  timer, and differ from the sender's by a fraction of a packet train, not by a factor),
  plus what a loss can hold back: the data
  that arrived behind a hole reaches the application at once when the retransmission
  fills it, and a reader that fell behind takes what waited at once: up to the
  receiver's buffer where the backend knows it (the emulated receivers': 4 x their
  window clamp; at 24.2 ms a reader on a busy CPU got 2.3 Gbps of a 0.9 Gbps link in one
  interval, 28 MB, more than its 10.9 MB window), else one BDP plus the buffer. The
  link's own byte counts (measured.link_steady) are the exact record of what it carried.
- time dilation: a run dilated by a factor k (tcpeval.dilation) is judged in virtual
  units. Its trace holds physical measurements, so the absolute time tolerances above
  (RTT_TOL_ABS_MS, LATE_MAX_MS, LATE_HARD_MS) apply multiplied by k: a frame 24 ms late on
  a path slowed 48-fold is 0.5 ms late on the path it stands for. Rates, windows in bytes,
  shares and counts need no conversion (rate x RTT and the packets are the virtual ones).
- host stalls: the link engine lists every stall of its vCPU (tevdelay.c). A stall of
  STALL_ROUND_TRIPS or more of the physical path's round trips holds several windows'
  worth of frames and lets their ACKs through at once: a burst the one-BDP buffer does
  not take, lost retransmissions and timeouts that a faithful path would not have. At
  most STALL_RATE_MAX such stalls a virtual second (the lateness checks cannot see them:
  a 7-ms stall holds ~0.01 % of a run's frames; docs/fidelity.md, "Host stalls weighed
  against the round trip"). The factor's floor (calibrate.stall_floor) keeps `auto` runs
  clear of this.
- congestion-control hooks: the ports' guard (cc/include/cc316.h) counts what the host
  did behind a port's back -- reductions without its ssthresh(), values no stack can
  hold, state changes without its set_state() -- and repairs them at the next hook. It
  is judged by the skips' effect, not by their count or their echoes. The effect is
  what the run carried unlike the algorithm, as a share of the data delivered: the
  acknowledged data whose hooks did not run (every ACK's pkts_acked() counts what it saw
  against what the stack delivered since the port's last one) -- for those ACKs the port
  made no increase, and a reduction whose ssthresh() the host skipped stands until the
  port's next hook repairs it, late by exactly such ACKs -- plus the segments the stack
  sent above the largest window the port allowed (a skipped hook's garbage window lets
  it send a burst before the repair). Beyond GUARD_SHARE_MAX the window moved measurably
  unlike the algorithm's. Counted at every ACK (a 12-s reno316 run at 0.2 ms has ~140
  reductions and ~5 x 10^6 ACKs), it needs no long run. The host skips the hooks of the ACKs that
  reduce the window far more often than the others (reno316 filling the link at 0.2 ms:
  8-10 % of the reductions at x7 and at x10, 0.2-0.6 % of the data), so the count of
  missed reductions overstates what the run lost; it is reported with the state changes
  and windows the guard repaired after them (their echoes: 34-50 windows per missed
  reduction at 9.5 Gbps x24), and judged (more than GUARD_MIN_EVENTS and
  GUARD_SHARE_MAX of the reductions) only for a port built before the guard counted
  the data. A window the port itself let stand far above the path stays the window
  check's to flag, whatever the guard saw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tcpeval import response
from tcpeval.precision import (
    wilson,  # the drop rate's interval (record.py reads it here)
)

MIN_EXPECTED_DROPS = 10
Z_FLAG = 3.290526731491926  # two-sided 99.9 %
RTT_TOL_ABS_MS = 0.05
RTT_TOL_REL = 0.03
CPU_SATURATED = 0.97
RATE_SHORTFALL = 0.9
LATE_MAX_MS = 0.5
LATE_SHARE_MAX = 0.01
LATE_HARD_MS = 2
HELD_MS = (LATE_MAX_MS, 1, LATE_HARD_MS, 5)  # thresholds the delay line counts frames against
LATE_HARD_SHARE_MAX = 2e-3
# A lost ACK is no later than its successor, which acknowledges what it would have; it
# costs a 3.16 algorithm one step of its per-ACK growth in congestion avoidance (slow start
# counts acknowledged segments). At a share s of the ACKs the growth per RTT falls by s,
# the mean window by about s/2 (Reno: it grows with the square root of the increase) to s
# (Scalable: linearly): at 2e-3, 0.2 % at most, 25 times inside a run's +-5 %.
UNSENT_ACK_SHARE_MAX = 2e-3
WINDOW_BOUND = 4
SEGS_PER_ACK = (1.9, 2.5)
ACKS_PER_MARK = 4  # at most: into and out of a CE run, each an early delayed ACK and an immediate one
HOLE_FILL_ACKS = 16  # 3.16's TCP_MAX_QUICKACKS: ACKs a receiver may send at once around a hole
MIN_ACKS = 1000
INTERVAL_RATE_MAX = 1.2
LOADED_RTT_REL = 0.05
LOADED_RTT_QUANTILE = 0.9
LOADED_RTT_MIN_CWND = 16  # segments
LOADED_RTT_MIN_SAMPLES = 5
GUARD_MIN_EVENTS = 5
GUARD_SHARE_MAX = 0.02
# A host stall this many physical round trips long or longer counts; at most this many of
# them a virtual second. Reno at 0.2 ms, drop 0 (2026-12-06): x5, whose 1-ms physical path
# met ~0.7 stalls of 4-8 ms a wall second, read 5 % below x10 and x20 (the host's stalls,
# ~6.7 ms, are 3.3 and 1.7 of their round trips); a stall cost the x5 run ~0.015 virtual s
# of delivery, so 0.2 a second keeps that bias under 0.3 %.
STALL_ROUND_TRIPS = 4
STALL_RATE_MAX = 0.2
RECEIVE_WINDOW_CWND_BOUND = 2.0  # a window this many times a loss-bound clamp: the clamp held the flight


def tolerances(dilation: int = 1) -> dict:
    """The verdict's tolerances, in virtual units; a dilated run applies the time-valued
    ones multiplied by its factor (recorded as "dilation") to its physical measurements."""
    return {
        "dilation": {"factor": dilation},
        "drop": {"interval": "wilson99.9", "recorded_interval": "wilson95",
                 "min_expected_drops": MIN_EXPECTED_DROPS},
        "rtt": {"abs_ms": RTT_TOL_ABS_MS, "rel": RTT_TOL_REL},
        "rate": {"max_fraction_of_host_capacity": 1.0, "cpu_saturated": CPU_SATURATED,
                 "shortfall": RATE_SHORTFALL},
        "delay_line": {"ring_drops": 0, "unsent_ack_share_max": UNSENT_ACK_SHARE_MAX,
                       "late_max_ms": LATE_MAX_MS, "late_share_max": LATE_SHARE_MAX,
                       "late_hard_ms": LATE_HARD_MS, "late_hard_share_max": LATE_HARD_SHARE_MAX},
        "link_engine": {"ring_drops": 0, "send_errors": 0, "late_max_ms": LATE_MAX_MS,
                        "late_share_max": LATE_SHARE_MAX, "late_hard_ms": LATE_HARD_MS,
                        "late_hard_share_max": LATE_HARD_SHARE_MAX},
        "switch_input": {"dropped_frames": 0},
        "host_stalls": {"round_trips": STALL_ROUND_TRIPS, "per_virtual_s_max": STALL_RATE_MAX},
        "link_busy": {"share_of_rate_min": LINK_BUSY_MIN, "variants": list(BUSY_VARIANTS),
                      "where": "p = 0, buffer >= BDP, bulk TCP flows, no ECN, no sock_ops program; the second half"},
        "loaded_rtt": {"bound": "rtt setting + buffer / rate", "rel": LOADED_RTT_REL, "abs_ms": RTT_TOL_ABS_MS,
                       "quantile": LOADED_RTT_QUANTILE, "min_cwnd_segments": LOADED_RTT_MIN_CWND,
                       "min_samples": LOADED_RTT_MIN_SAMPLES,
                       "floor": "median >= rtt setting - rtt tolerance"},
        "window": {"max_cwnd_over_bdp_plus_buffer": WINDOW_BOUND, "rtt": "max(setting, loaded RTT)"},
        "receive_window": {"max_cwnd_over_clamp_where_loss_bound": RECEIVE_WINDOW_CWND_BOUND},
        "ack_clock": {"segments_per_ack": list(SEGS_PER_ACK), "min_acks": MIN_ACKS,
                      "extra_acks_per_ce_mark": ACKS_PER_MARK,
                      "lower_bound_leaves_out_acks_per_retransmission": HOLE_FILL_ACKS},
        "receiver_rate": {"max_interval_over_bottleneck": INTERVAL_RATE_MAX},
        "cc_guard": {"min_events": GUARD_MIN_EVENTS, "share_of_reductions_max": GUARD_SHARE_MAX,
                     "share_of_acked_data_max": GUARD_SHARE_MAX,
                     "plus": "the share of the port's flow time spent drained (drained_ms)"},
    }


# What a busy or virtualised host does to a run now and then, unlike a setting it cannot
# realise: the ACK path stalled (delay line, link), host queueing (loaded RTT), the ports'
# hooks skipped (cc, and the window and receiver-rate excesses that follow from it), and a
# stretched ACK clock, which at low rates varies between runs of one setting
# (docs/fidelity.md, "Measurements behind the backend's choices"); a disturbed RTT set-up
# too (an "rtt" finding says so itself). A run flagged only for these is worth running
# again (EmulatedBackend attempts); the trace keeps every attempt's findings, and a run
# that stays flagged through every attempt stays flagged.
TRANSIENT_CHECKS = frozenset({"delay line", "link", "loaded RTT", "cc", "window", "receiver rate",
                              "ACK clock", "switch input", "host stalls", "link busy"})


class Finding(str):
    """One reason a run is flagged: the sentence people read ("<check>: ..."), carrying the
    fields policy reads -- the check that found it, whether it is transient host trouble
    (TRANSIENT_CHECKS unless the check says otherwise), the measured value and the limit
    it broke, in the check's own unit (None where one number would not say it). Retries,
    calibration and reports read the fields (the trace's fidelity.findings), never the
    sentence."""
    check: str
    transient: bool
    measured: float | None
    limit: float | None
    host_stall: bool
    behind: bool
    backlog: bool

    def __new__(cls, check: str, detail: str, *, transient: bool | None = None,
                measured: float | None = None, limit: float | None = None, host_stall: bool = False,
                behind: bool = False, backlog: bool = False):
        self = super().__new__(cls, f"{check}: {detail}")
        self.check = check
        self.transient = check in TRANSIENT_CHECKS if transient is None else transient
        self.measured = None if measured is None else float(measured)
        self.limit = None if limit is None else float(limit)
        # the excess lies wholly in host stalls the link engine saw (the hypervisor took its
        # vCPU): the run's numbers may be disturbed, but not by its setting (calibration)
        self.host_stall = host_stall
        # the host fell behind the frame rate: frames released late by the delay line or
        # the link engine, or dropped in a CPU's full input backlog (fell_behind)
        self.behind = behind
        # of those, frames a CPU's full input backlog refused (net.core.netdev_max_backlog):
        # a burst's loss, which a deeper backlog cures and a higher factor need not
        self.backlog = backlog
        return self

    def record(self) -> dict:
        record = {"check": self.check, "transient": self.transient, "text": str(self),
                  "measured": self.measured, "limit": self.limit}
        if self.host_stall:
            record["host_stall"] = True
        if self.behind:
            record["fell_behind"] = True
        if self.backlog:
            record["input_backlog"] = True
        return record


def host_stalls_only(findings: list[dict]) -> bool:
    """Whether every finding (records) lies wholly in host stalls: the run carried its
    rate, and the hypervisor delayed frames meanwhile, as it would at any rate."""
    return bool(findings) and all(f.get("host_stall") for f in findings)


def fell_behind(findings: list[dict]) -> bool:
    """Whether a finding (records) says the host fell behind the frame rate on its own:
    frames the delay line or the link engine released late (not wholly in host stalls the
    engine saw), frames dropped entering the switch or ACKs the delay line could not send
    (a CPU's input backlog full). A slower physical path (a higher time-dilation factor)
    asks fewer frames a second of it; a stall would hold the frames at any factor."""
    return any(f.get("fell_behind") and not f.get("host_stall") for f in findings)


def fell_behind_in_time(findings: list[dict]) -> bool:
    """Whether the host fell behind (fell_behind) with frames released late, not only with
    frames a full input backlog refused: what a run teaches the host's record of where it
    fell behind (emulated fell_behind.note). Backlog losses come in bursts a higher factor
    need not shrink (a Scalable pair at 12.2 ms lost 1-6 frames entering the switch at each
    of x8-x12 with the default backlog of 1,000, none at x7 with 10,000; docs/fidelity.md)."""
    return fell_behind([f for f in findings if not f.get("input_backlog")])


def transient_only(findings: list[dict]) -> bool:
    """Whether every finding (records as the trace keeps them) is transient host trouble:
    a run flagged for these alone is worth running again."""
    return bool(findings) and all(f["transient"] for f in findings)


def drop_check(p: float, seen: int, dropped: int) -> tuple[Finding | None, str]:
    """(finding or None, status) for the drop stage."""
    if p == 0:
        return (None, "ok") if dropped == 0 else (
            Finding("drop", f"{dropped} packets dropped with p = 0", measured=dropped, limit=0), "failed")
    if seen * p < MIN_EXPECTED_DROPS:
        return None, f"not tested: expected drops {seen * p:.2g} < {MIN_EXPECTED_DROPS}"
    lo, hi = wilson(dropped, seen, Z_FLAG)
    if not lo <= p <= hi:
        return (Finding("drop", f"measured rate {dropped}/{seen} = {dropped / seen:.3g}, 99.9% CI "
                                f"[{lo:.3g}, {hi:.3g}] excludes the configured p = {p:g}",
                        measured=dropped / seen, limit=p), "failed")
    return None, "ok"


def rtt_tolerance_ms(setting_ms: float, dilation: int = 1) -> float:
    """Tolerance for a (physical) RTT setting of a run dilated by `dilation`."""
    return max(RTT_TOL_ABS_MS * dilation, RTT_TOL_REL * setting_ms)


def held_ms(dilation: int = 1) -> tuple:
    """The lateness thresholds (physical ms) a run's delay line counts frames against."""
    return tuple(ms * dilation for ms in HELD_MS)


def _ms_key(ms: float) -> str:
    return format(ms, "g")  # as the delay line prints it (%g)


def window_check(max_cwnd_bytes: float | None, rate_bps: float, rtt_ms: float,
                 buffer_bytes: float | None, loaded_rtt_ms: float | None = None) -> Finding | None:
    if not max_cwnd_bytes or not rate_bps:
        return None
    rtt_ms = max(rtt_ms, loaded_rtt_ms or 0.0)
    bound = WINDOW_BOUND * (rate_bps * rtt_ms / 1e3 / 8 + (buffer_bytes or 0))
    if max_cwnd_bytes > bound:
        return Finding("window", f"a congestion window of {max_cwnd_bytes / 1e6:.3g} MB exceeds "
                                 f"{WINDOW_BOUND} x (BDP + buffer) = {bound / 1e6:.3g} MB; no path needs it "
                                 f"(a corrupted sender)", measured=max_cwnd_bytes, limit=bound)
    return None


def receive_window_check(max_cwnd_bytes: float | None, loss_bound_clamp_bytes: float | None) -> Finding | None:
    """Whether a receive window clamped by the loss rate (emulated topology.receive_window:
    a flight no flow reaches under that loss) held a flow's flight: then it may have limited
    the flow, and the run does not measure the algorithm alone. Slow start grows a window up
    to twice the largest flight (tcp_is_cwnd_limited; the ports' own copy too), so a window
    above the clamp alone says nothing (a Scalable slow start at 6.2 ms, 1e-2 reached 516
    segments against a clamp of 499); twice the clamp needs a flight at the clamp."""
    if not max_cwnd_bytes or not loss_bound_clamp_bytes:
        return None
    bound = RECEIVE_WINDOW_CWND_BOUND * loss_bound_clamp_bytes
    if max_cwnd_bytes < bound:
        return None
    return Finding("receive window", f"a congestion window of {max_cwnd_bytes / 1e6:.3g} MB, at least "
                                     f"{RECEIVE_WINDOW_CWND_BOUND:g} x the receive window clamped at "
                                     f"{loss_bound_clamp_bytes / 1e6:.3g} MB by the loss rate: the clamp held a "
                                     "flight no flow should reach under that loss, and may have limited the flow",
                   measured=max_cwnd_bytes, limit=bound)


def loaded_rtt(samples: list[tuple[float, float]], mss_bytes: int) -> dict | None:
    """One flow's loaded RTT from its steady-state samples [(rtt_us, cwnd_bytes), ...]:
    the samples with a window of at least LOADED_RTT_MIN_CWND segments (a smaller flight
    can wait for the receiver's delayed-ACK timer, which is the receiver's, not the host's);
    None with fewer than LOADED_RTT_MIN_SAMPLES of them."""
    rtts = sorted(r / 1e3 for r, cwnd in samples
                  if r is not None and cwnd is not None and cwnd >= LOADED_RTT_MIN_CWND * mss_bytes)
    if len(rtts) < LOADED_RTT_MIN_SAMPLES:
        return None
    at = min(len(rtts) - 1, int(LOADED_RTT_QUANTILE * len(rtts)))
    return {"quantile_ms": rtts[at], "median_ms": rtts[len(rtts) // 2], "max_ms": rtts[-1],
            "samples": len(rtts)}


def loaded_rtt_bound_ms(rtt_setting_ms: float, buffer_bytes: float, rate_bps: float, dilation: int = 1) -> float:
    """The most RTT a sender may see on the path (physical ms): the setting plus a full
    buffer's queueing, with LOADED_RTT_REL and RTT_TOL_ABS_MS (x dilation) on top."""
    return (rtt_setting_ms + 8e3 * buffer_bytes / rate_bps) * (1 + LOADED_RTT_REL) + RTT_TOL_ABS_MS * dilation


def loaded_rtt_check(per_flow: dict, rtt_setting_ms: float, buffer_bytes: float | None,
                     rate_bps: float | None, dilation: int = 1) -> Finding | None:
    """per_flow: {flow label: loaded_rtt(...) or None}. Times physical; the finding speaks
    in the virtual path's units (/ dilation), its measured value the worst flow's. Above
    the setting plus a full buffer: the host queued outside the model; a median below the
    setting: the path was shorter than set (short_path_check)."""
    if not per_flow:
        return None
    if not rate_bps:
        return short_path_check(per_flow, rtt_setting_ms, dilation)
    bound = loaded_rtt_bound_ms(rtt_setting_ms, buffer_bytes or 0, rate_bps, dilation)
    k = dilation
    over = [f"{label} {m['quantile_ms'] / k:.3g} ms (max {m['max_ms'] / k:.3g})"
            for label, m in per_flow.items() if m and m["quantile_ms"] > bound]
    if over:
        virtual = " (virtual)" if k > 1 else ""
        worst = max(m["quantile_ms"] for m in per_flow.values() if m)
        return Finding("loaded RTT", f"senders measured {', '.join(over)}{virtual} at their "
                       f"{LOADED_RTT_QUANTILE:.0%} quantile, above the {bound / k:.3g} ms the path allows "
                       f"(RTT {rtt_setting_ms / k:g} ms + buffer/rate {8e3 * (buffer_bytes or 0) / rate_bps / k:.3g} ms "
                       f"+ {LOADED_RTT_REL:.0%}): the host queued them outside the model",
                       measured=worst / k, limit=bound / k)
    return short_path_check(per_flow, rtt_setting_ms, dilation)


def short_path_check(per_flow: dict, rtt_setting_ms: float, dilation: int = 1) -> Finding | None:
    """No sender can measure less than the path's RTT, so a median below the setting (less
    the RTT tolerance) means the path was shorter than set: its delay was computed from a
    base RTT measured long on a busy host, and the idle probes, slowed by the same host,
    passed. Two runs of the findings slice (2026-11-27) had 0.48 and 0.05 ms for a 1.2-ms
    path, the first judged ok. A flow that fills its buffer hides a short path under its
    queue. Transient: the next attempt measures the base again."""
    k, tol = dilation, rtt_tolerance_ms(rtt_setting_ms, dilation)
    floor = rtt_setting_ms - tol
    under = {label: m["median_ms"] for label, m in per_flow.items() if m and m["median_ms"] < floor}
    if not under:
        return None
    virtual = " (virtual)" if k > 1 else ""
    listed = ", ".join(f"{label} {ms / k:.3g} ms" for label, ms in under.items())
    return Finding("loaded RTT", f"senders measured {listed}{virtual} at their median, below the "
                   f"{rtt_setting_ms / k:g} ms RTT of the path (less {tol / k:.3g} ms): "
                   f"the path was shorter than set", transient=True,
                   measured=min(under.values()) / k, limit=floor / k)


def ack_clock_check(segments_per_ack: float | None, acks: int | None,
                    after_hole_fills: float | None = None, marked_share: float = 0.0) -> Finding | None:
    """after_hole_fills: the same ratio with HOLE_FILL_ACKS ACKs per retransmission left
    out, judged against the lower bound only: a filled hole releases a window's data to
    the reader at once, and the window updates of its reads (tcp_cleanup_rbuf, 3.16 too)
    and the immediate ACK of the fill add about ten ACKs per retransmission
    (docs/fidelity.md). marked_share: the share of the ECN-capable frames the link marked
    CE, whose immediate ACKs lower the lower bound (ack_clock_floor)."""
    if segments_per_ack is None or not acks or acks < MIN_ACKS:
        return None
    lo, hi = ack_clock_floor(marked_share), SEGS_PER_ACK[1]
    if segments_per_ack < lo and after_hole_fills is not None and after_hole_fills >= lo:
        return None
    if not lo <= segments_per_ack <= hi:
        what = "stretch ACKs" if segments_per_ack > hi else "ACKs for less than two segments"
        marks = f", with {100 * marked_share:.1f} % of the frames marked CE" if marked_share else ""
        return Finding("ACK clock", f"receivers sent {segments_per_ack:.2f} in-order segments per ACK "
                                    f"in steady state, outside [{lo:.3g}, {hi}] ({what}; 3.16 receivers "
                                    f"ACKed every second segment{marks})",
                       measured=segments_per_ack, limit=hi if segments_per_ack > hi else lo)
    return None


def ack_clock_floor(marked_share: float = 0.0) -> float:
    """The ACK clock's lower bound in segments per ACK: SEGS_PER_ACK[0], less what the
    link's marks make receivers ACK at once (at most ACKS_PER_MARK ACKs per marked frame
    beyond one per two segments)."""
    return SEGS_PER_ACK[0] / (1.0 + 2.0 * ACKS_PER_MARK * max(0.0, marked_share or 0.0))


def marked_share(link_stats: dict | None) -> float:
    """The share of the ECN-capable frames the link engine marked CE (0 without marking)."""
    ecn = (link_stats or {}).get("ecn") or {}
    return ecn["ce_marked"] / ecn["ect_frames"] if ecn.get("ect_frames") else 0.0


def per_flow_rates(interval_bps) -> list[list[float]]:
    """The receivers' per-interval rates as one list per flow (given so, or as one flat
    list of a single flow's), intervals without a rate (None) left out."""
    flows = list(interval_bps or [])
    if flows and not isinstance(flows[0], (list, tuple)):
        flows = [flows]
    return [[r for r in rates if r is not None] for rates in flows]


def receiver_rate_check(interval_bps: list, rate_bps: float, held_bytes: float = 0.0,
                        interval_s: float | None = None) -> Finding | None:
    """interval_bps: the receivers' per-interval rates, one list per flow (or one flat
    list). held_bytes: what a receiver may hold behind a hole and release at once, over
    the sampling interval interval_s. Judged on each two adjacent intervals of a flow: a
    receiver's report times jitter (iperf3's timer fires late when its process is busy),
    moving bytes from one interval into the next; the pair's mean does not change."""
    if not rate_bps or not interval_bps:
        return None
    flows = per_flow_rates(interval_bps)
    spans = []
    for rates in flows:
        spans += [(sum(pair) / 2, 2) for pair in zip(rates, rates[1:])] if len(rates) > 1 else \
            [(r, 1) for r in rates]
    over = []
    for mean, n in spans:
        limit = INTERVAL_RATE_MAX * rate_bps + (8 * held_bytes / (n * interval_s)
                                                if held_bytes and interval_s else 0.0)
        if mean > limit:
            over.append(mean)
    if over:
        top = max(r for rates in flows for r in rates)
        held = f" plus what a receiver holds at once ({held_bytes / 1e6:.3g} MB)" if held_bytes else ""
        return Finding("receiver rate", f"{len(over)} pair(s) of adjacent intervals averaging up to "
                                        f"{max(over) / 1e9:.3g} Gbps (one interval up to {top / 1e9:.3g}), above "
                                        f"{INTERVAL_RATE_MAX} x the bottleneck's {rate_bps / 1e9:.3g} Gbps{held}",
                       measured=max(over), limit=INTERVAL_RATE_MAX * rate_bps)
    return None


def skipped_share(g: dict) -> float | None:
    """What a port's skipped hooks did, as a share of the data the stack delivered: the
    data whose pkts_acked() did not run (the guard's acked_seen against acked_delivered)
    plus the segments sent above the largest window the port allowed (sent_over); None
    for counters without them."""
    delivered = g.get("acked_delivered")
    if not delivered or g.get("acked_seen") is None:
        return None
    return max(0.0, (delivered - g["acked_seen"]) / delivered) + g.get("sent_over", 0) / delivered


def stalled_share(g: dict, flow_s: float | None) -> float:
    """The share of its flows' time a port's connections spent drained by a skipped hook's
    threshold of 0 (the guard's drained_ms: from the port's last hook before the drain to
    the first after it, when a timer sent again), of `flow_s` (physical flow-seconds)."""
    return g.get("drained_ms", 0) / 1e3 / flow_s if flow_s else 0.0


def guard_check(guard: dict | None, flow_s: dict | None = None) -> Finding | None:
    """guard: {algorithm: counter deltas} (tcpeval.cc guard_stats), None where no port ran;
    flow_s: {algorithm: physical seconds its flows ran}. Measured: the largest share of
    skipped hooks among the ports flagged -- of the acknowledged data plus of the flows'
    time spent drained, or of the reductions for a port that does not count the data."""
    parts, worst = [], 0.0
    for name, g in sorted((guard or {}).items()):
        if not g:
            continue
        stalled = stalled_share(g, (flow_s or {}).get(name))
        acked_share = skipped_share(g)
        missed = g["missed_reductions"]
        reductions = g["reductions"] + missed
        if acked_share is not None:
            share = acked_share + stalled
            flagged = share > GUARD_SHARE_MAX
        else:
            share = missed / reductions if reductions else 0.0
            flagged = missed > max(GUARD_MIN_EVENTS, GUARD_SHARE_MAX * g["reductions"])
        if flagged:
            worst = max(worst, share)
            acked = "" if acked_share is None else (
                f"{100 * acked_share:.1f} % of the acknowledged data ({g['acked_delivered'] - g['acked_seen']} "
                f"of {g['acked_delivered']} segments with no pkts_acked() of the port, "
                f"{g.get('sent_over', 0)} sent above the window it allowed"
                + (f", {100 * stalled:.1f} % of its flows' time drained by a threshold of 0 "
                   f"({g['drained']} drains, {g['drained_ms']} ms)" if stalled else "") + "), ")
            parts.append(f"{name}: {acked}{missed} reductions without its ssthresh() of {reductions} "
                         f"(echoes, repaired: {g['missed_states']} state changes without its set_state(), "
                         f"{g['foreign_ssthresh']} thresholds and {g['foreign_cwnd']} windows no hook allowed)")
    if parts:
        return Finding("cc", f"the host skipped the ports' congestion-control hooks for more than "
                             f"{100 * GUARD_SHARE_MAX:g} % of the acknowledged data (or, for a port that does "
                             f"not count it, of the reductions): " + "; ".join(parts),
                       measured=worst, limit=GUARD_SHARE_MAX)
    return None


# Built-in algorithms whose init() marks a socket for TCP-internal pacing; the mark
# outlives a switch to another algorithm (TCP_CONGESTION after connect, as iperf3 -C does).
PACING_DEFAULTS = frozenset({"bbr"})


def pacing_check(sender_defaults: dict) -> Finding | None:
    """sender_defaults: {sender: its net.ipv4.tcp_congestion_control}. 3.16 hosts (no fq
    qdisc) never paced; a sender whose connections start under a pacing algorithm does."""
    paced = sorted(f"{who} ({cc})" for who, cc in sender_defaults.items() if cc in PACING_DEFAULTS)
    if paced:
        return Finding("pacing", f"connections of {', '.join(paced)} start under a default algorithm that "
                                 "marks them for TCP-internal pacing, kept after iperf3 -C switches them; "
                                 "3.16 senders did not pace", measured=len(paced), limit=0)
    return None


@dataclass(frozen=True)
class Setting:
    """What the run asked of the path, physical (a dilated run's k x RTT and rate / k),
    and its factor k, by which the time-valued tolerances scale."""
    drop: float
    rtt_ms: float
    rate_bps: float | None = None       # None: no configured rate (unshaped, the testbed)
    buffer_bytes: float | None = None
    interval_s: float | None = None     # the flows' sampling interval
    dilation: int = 1
    # where loss bounds what the flows can carry below the link, that bound: the rate the
    # run's factor was chosen for (tcpeval.dilation.carried_bound_bps); None: the link's
    carried_bound_bps: float | None = None
    # where the path promises a busy link (busy_link_from_s), when the last flow started
    # (physical s after the traffic's start); None where it promises none
    busy_from_s: float | None = None


@dataclass(frozen=True)
class PathMeasurements:
    """What the path did: the drop stage's counts and the RTTs measured on it."""
    seen: int
    dropped: int
    rtt_ms: float | None                # the idle probes' median, delay in place
    base_rtt_ms: float | None = None    # the path without added delay
    loaded_rtts: dict | None = None     # per flow, loaded_rtt() of its senders' samples


@dataclass(frozen=True)
class HostMeasurements:
    """Whether the host kept up: its calibrated capacity, what the bottleneck carried,
    its CPUs, and the lateness of the delay line and the link engine."""
    capacity_bps: float | None = None
    achieved_bps: float | None = None
    cpu_busy: float | None = None
    delay_stats: dict | None = None
    link_stats: dict | None = None
    switch_input_drops: int | None = None  # frames from the hosts lost entering the switch
    input_backlog: int | None = None  # net.core.netdev_max_backlog during the run (named in findings)
    unsent_acks: dict | None = None  # unsent_acks(): which of the delay line's unsent ACKs are judged
    link_steady: dict | None = None  # what the bottleneck sent over the second half (its counters)


@dataclass(frozen=True)
class FlowMeasurements:
    """What the flows' own stacks showed: windows, the receivers' ACK clock and reading
    rate, the ports' guard and the senders' default algorithms."""
    max_cwnd_bytes: float | None = None
    segments_per_ack: float | None = None
    segments_per_ack_after_hole_fills: float | None = None
    receiver_acks: int | None = None
    interval_bps: tuple | list = ()     # each flow's interval throughputs
    receiver_holds_bytes: float | None = None
    loss_bound_clamp_bytes: float | None = None  # the receive window, where the loss rate clamped it
    cc_guard: dict | None = None
    port_flow_s: dict | None = None     # per port: the physical seconds its flows ran
    sender_defaults: dict | None = None


def verdict(setting: Setting, path: PathMeasurements, host: HostMeasurements = HostMeasurements(),
            flows: FlowMeasurements = FlowMeasurements(), extra: list[Finding] = ()) -> dict:
    """The verdict of both backends. Every time-valued measurement is physical; the
    setting's dilation converts the tolerances. A check whose measurement a backend does
    not have is skipped when it is None (or empty): the testbed has no base-RTT bound,
    delay line, window, ACK-clock or guard data, and no configured rate to judge (rate_bps
    None, as an unshaped calibration run); only the drop and the measured RTT are always
    judged."""
    k, s = setting.dilation, setting
    reasons = list(extra)
    reason, drop_status = drop_check(s.drop, path.seen, path.dropped)
    reasons += [reason] if reason else []
    reasons += _rtt_reasons(s.rtt_ms, path.base_rtt_ms, path.rtt_ms, k)
    if s.rate_bps is not None:
        reasons += _rate_reasons(s.drop, s.rate_bps, host.capacity_bps, host.achieved_bps, host.cpu_busy,
                                 s.carried_bound_bps, _peak_carried_bps(flows.interval_bps))
    reasons += _delay_line_reasons(host.delay_stats, k, host.unsent_acks)
    stalls = (host.delay_stats or {}).get("host_stalls")
    reasons += _link_reasons(host.link_stats, k, stalls)
    reasons += [r] if (r := switch_input_check(host.switch_input_drops, host.input_backlog)) else []
    reasons += [r] if (r := stall_check(stalls, s.rtt_ms, k)) else []
    reasons += [r] if (r := link_busy_check(s.rate_bps, s.busy_from_s, host.link_steady)) else []
    rate = s.rate_bps or 0.0
    loaded = path.loaded_rtts or {}
    worst_loaded = max((m["quantile_ms"] for m in loaded.values() if m), default=None)
    held_bytes = (flows.receiver_holds_bytes or rate * s.rtt_ms / 8000 + (s.buffer_bytes or 0)) if rate else 0.0
    for reason in (loaded_rtt_check(loaded, s.rtt_ms, s.buffer_bytes, s.rate_bps, k),
                   window_check(flows.max_cwnd_bytes, rate, s.rtt_ms, s.buffer_bytes, worst_loaded),
                   receive_window_check(flows.max_cwnd_bytes, flows.loss_bound_clamp_bytes),
                   ack_clock_check(flows.segments_per_ack, flows.receiver_acks,
                                   flows.segments_per_ack_after_hole_fills, marked_share(host.link_stats)),
                   receiver_rate_check(list(flows.interval_bps), rate, held_bytes=held_bytes,
                                       interval_s=s.interval_s),
                   guard_check(flows.cc_guard, flows.port_flow_s), pacing_check(flows.sender_defaults or {})):
        if reason:
            reasons.append(reason)
    return {"verdict": "flagged" if reasons else "ok", "reasons": [str(r) for r in reasons],
            "findings": [r.record() for r in reasons],
            "tolerances": tolerances(k), "checks": {"drop": drop_status}}


def long_stalls(stalls: dict | None, physical_rtt_ms: float) -> list[float] | None:
    """The lengths (ms) of the stalls the engine listed that lasted STALL_ROUND_TRIPS or more
    of the physical path's round trips; None where it listed none (no stall watch, an
    older engine, the testbed)."""
    if not stalls or "length_us" not in stalls or not stalls.get("watched_ns") or physical_rtt_ms <= 0:
        return None
    return [us / 1e3 for us in stalls["length_us"] if us / 1e3 >= STALL_ROUND_TRIPS * physical_rtt_ms]


def stall_check(stalls: dict | None, physical_rtt_ms: float, k: int = 1) -> Finding | None:
    """Host stalls long against the physical round trip (long_stalls), more than
    STALL_RATE_MAX a virtual second (the engine's watched time / k). Such a stall holds
    frames for several round trips and releases their ACKs together; the sender's burst
    then overflows the buffer (Reno at 0.2 ms, drop 0: 5 % less at x5 than at x10 and
    x20, docs/fidelity.md). It is the host's doing at this factor, not the setting's:
    marked host_stall (a calibration's rate is not refused for it), and transient (a
    spell of stalls passes; the factor's floor is what avoids it)."""
    long = long_stalls(stalls, physical_rtt_ms)
    if not long:
        return None
    virtual_s = stalls["watched_ns"] / 1e9 / k
    per_s = len(long) / virtual_s
    if per_s <= STALL_RATE_MAX:
        return None
    unlisted = stalls.get("count", 0) - len(stalls["length_us"])
    return Finding("host stalls", f"{len(long)} of the link engine's {stalls.get('count', len(long))} host stalls "
                   f"lasted {STALL_ROUND_TRIPS} or more of the physical path's {physical_rtt_ms:g}-ms round trips "
                   f"(up to {max(long):.2f} ms), {per_s:.2f} a virtual second (> {STALL_RATE_MAX:g})"
                   + (f"; {unlisted} more not listed" if unlisted > 0 else "")
                   + ": each holds several round trips of frames and lets their ACKs through at once, "
                   "a burst the buffer does not take (a higher factor makes the round trip longer)",
                   measured=per_s, limit=STALL_RATE_MAX, host_stall=True)


# A link a lossless path keeps busy: at p = 0 each of the paper's six algorithms (BUSY_VARIANTS)
# keeps the bottleneck sending where its buffer holds a bandwidth-delay product or more, since
# a window after a reduction is still at least one (Reno halves BDP + buffer; the others cut
# less). The link's own counters over the run's second half must show it busy LINK_BUSY_MIN
# of the time, the share the calibration asks of native CUBIC (calibrate.DELIVERY). Reno at
# 0.2 ms, drop 0, 9.5 Gbit/s delivered 95.5-98.8 % of the payload at x9-x12, every verdict
# ok (docs/fidelity.md, "What it caught, and what it did not"). Not judged: other algorithms
# (BBR drains the queue to probe its RTT, delay-based ones keep it short), ECN marking, paced
# or RPC flows, a flow that stops, or a half that began before the last flow started.
BUSY_VARIANTS = response.VARIANTS  # the paper's six
LINK_BUSY_MIN = 0.98
BUSY_BUFFER_BDPS = 0.999  # a buffer sized to the BDP, rounded to whole bytes


def busy_link_from_s(drop: float, background_loss: float, rate_bps: float | None, rtt_ms: float,
                     buffer_bytes: float, flows, ecn_threshold_bytes: int | None,
                     sock_ops: bool = False) -> float | None:
    """When (the last flow's start, s) a path promises a busy link (link_busy_check): p = 0
    without background loss, a rate, a buffer of a bandwidth-delay product or more, no ECN
    marking, no sock_ops program on the senders (a user's program may size their buffers,
    clamp their windows or change their algorithm: condition.sock_ops) and every flow a
    bulk TCP flow of BUSY_VARIANTS that runs to the end. None where it does not."""
    bdp = (rate_bps or 0.0) * rtt_ms / 8000
    if (drop or background_loss or not rate_bps or ecn_threshold_bytes or sock_ops or not flows
            or buffer_bytes < BUSY_BUFFER_BDPS * bdp):
        return None
    if any(f.protocol != "tcp" or f.variant not in BUSY_VARIANTS or f.rate_bps or f.stop_s is not None
           for f in flows):
        return None
    return max(f.start_s for f in flows)


def link_busy_check(rate_bps: float | None, busy_from_s: float | None, link_steady: dict | None) -> Finding | None:
    """A link the path promised busy (busy_link_from_s) that sent less than LINK_BUSY_MIN of
    its rate over the run's second half (``link_steady``, the link's own counters; judged
    only where that half began after the last flow's start). The host, not the algorithms,
    left it idle: marked fell_behind, so an `auto` run's next attempt is slower."""
    if rate_bps is None or busy_from_s is None or not link_steady or link_steady["from_s"] < busy_from_s:
        return None
    share = link_steady["bps"] / rate_bps
    if share >= LINK_BUSY_MIN:
        return None
    return Finding("link busy", f"the link sent {share:.1%} of its {rate_bps / 1e9:.3g} Gbps over the run's second "
                   f"half (its {link_steady.get('source', 'own')} counters; < {LINK_BUSY_MIN:.0%}): at p = 0 with a "
                   "buffer of a bandwidth-delay product or more these flows keep it busy, so the host left it "
                   "idle", measured=share, limit=LINK_BUSY_MIN, behind=True)


def switch_input_check(dropped: int | None, backlog: int | None = None) -> Finding | None:
    """Frames the hosts sent that never entered the switch: the kernel queues a veth's
    frames for its peer's input on a CPU's backlog, and drops them when that holds
    net.core.netdev_max_backlog (``backlog``, named in the finding) already -- in a slow
    start's overshoot the senders' CPU took data and ACKs faster than it could work them
    off. Such losses lie outside the path's model (its only losses are the drop stage's
    and the buffer's), so any flags the run; they come with the host's load and its
    backlog setting, not the condition."""
    if not dropped:
        return None
    setting = f"net.core.netdev_max_backlog = {backlog}" if backlog is not None else "net.core.netdev_max_backlog"
    return Finding("switch input", f"{dropped} frames from the hosts dropped entering the switch "
                   f"(a CPU's input backlog full, {setting}; a deeper one keeps a burst's frames): "
                   f"lost outside the path's model", measured=dropped, limit=0, behind=True, backlog=True)


def _rtt_reasons(setting_ms: float, base_ms: float | None, rtt_ms: float | None, k: int) -> list[Finding]:
    reasons = []
    tol = rtt_tolerance_ms(setting_ms, k)
    if base_ms is not None and base_ms > setting_ms + tol:
        reasons.append(Finding("rtt", f"the path's base RTT {base_ms:.3f} ms exceeds the setting "
                                      f"{setting_ms} ms", measured=base_ms, limit=setting_ms + tol))
    if rtt_ms is None:
        reasons.append(Finding("rtt", "not measured"))
    elif abs(rtt_ms - setting_ms) > tol:
        # the path can reach the setting (its base RTT is below it): the set-up was disturbed
        reasons.append(Finding("rtt", f"measured {rtt_ms:.3f} ms, setting {setting_ms} ms, "
                                      f"tolerance +-{tol:.3f} ms", transient=True,
                               measured=rtt_ms, limit=setting_ms + tol if rtt_ms > setting_ms else setting_ms - tol))
    return reasons


def _peak_carried_bps(interval_bps) -> float | None:
    """The most the flows carried together in a sampling interval, at most: the sum of
    each flow's highest interval rate (None without samples)."""
    peaks = [max(rates) for rates in per_flow_rates(interval_bps) if rates]
    return float(sum(peaks)) if peaks else None


def _rate_reasons(p: float, rate_bps: float, host_capacity_bps: float | None,
                  achieved_bps: float | None, cpu_busy: float | None,
                  carried_bound_bps: float | None = None, peak_bps: float | None = None) -> list[Finding]:
    reasons = []
    # where loss bounds the flows below the link, the host must carry that bound, not the link
    carried = rate_bps if carried_bound_bps is None else min(rate_bps, carried_bound_bps)
    if host_capacity_bps is None:
        reasons.append(Finding("rate", "host capacity unknown (run `tcpeval calibrate`)"))
    elif carried > host_capacity_bps:
        what = "configured" if carried == rate_bps else "the flows' most under this loss rate,"
        reasons.append(Finding("rate", f"{what} {carried / 1e9:.3g} Gbps exceeds what this host "
                                       f"carries faithfully ({host_capacity_bps / 1e9:.3g} Gbps, calibration)",
                               measured=carried, limit=host_capacity_bps))
    if carried_bound_bps is not None and peak_bps is not None and peak_bps > carried_bound_bps:
        reasons.append(Finding("rate", f"the flows carried up to {peak_bps / 1e9:.3g} Gbps, more than the "
                                       f"{carried_bound_bps / 1e9:.3g} Gbps their loss rate allows and the "
                                       "time-dilation factor was chosen for (tcpeval.dilation.carried_bound_bps)",
                               measured=peak_bps, limit=carried_bound_bps))
    if (p == 0 and cpu_busy is not None and achieved_bps is not None and cpu_busy >= CPU_SATURATED
            and achieved_bps < RATE_SHORTFALL * rate_bps):
        reasons.append(Finding("rate", f"host CPUs {cpu_busy:.0%} busy while the bottleneck carried "
                                       f"{achieved_bps / 1e9:.3g} of {rate_bps / 1e9:.3g} Gbps: host-limited",
                               measured=achieved_bps, limit=RATE_SHORTFALL * rate_bps))
    return reasons


def unsent_acks(total: int | None, forwarded: int | None, counted_at, metrics_from_s: float | None) -> dict | None:
    """The ACKs the delay line could not send (the kernel refused them: the sender's input
    backlog was full), of `forwarded + total` it was handed, and of them those the verdict
    judges: all; or, where the metrics leave out a warm-up (a precision-driven run's, from
    `metrics_from_s` on, s after the traffic's start), those after the delay line's last
    count at or before that cut (`counted_at`: (s after the start, ACKs not sent by then,
    ACKs forwarded by then), its snapshots): the lost ACKs of slow start's overshoot then
    fall in the part no metric takes, and a count from a snapshot before the cut judges a
    few more than that, never fewer. `share`: of the ACKs handed to it in the judged part.
    None without the delay line's counts."""
    if total is None or forwarded is None:
        return None
    before = [(t, n, f) for t, n, f in counted_at
              if metrics_from_s is not None and None not in (n, f) and t <= metrics_from_s]
    from_s, unsent_before, forwarded_before = max(before, default=(None, 0, 0))
    judged = total - unsent_before
    handed = judged + forwarded - forwarded_before
    return {"total": total, "judged": judged, "share": judged / handed if handed else 0.0,
            "judged_from_s": from_s, "metrics_from_s": metrics_from_s}


def _delay_line_reasons(delay_stats: dict | None, k: int, unsent: dict | None = None) -> list[Finding]:
    if not delay_stats:
        return []
    reasons = []
    if delay_stats.get("ring_drops", 0) > 0:
        reasons.append(Finding("delay line", f"{delay_stats['ring_drops']} frames lost in its rings",
                               measured=delay_stats["ring_drops"], limit=0))
    # ACKs the kernel refused to send (sendmmsg failed: the sender's input backlog full
    # while its CPU lagged) are lost on the way back: a share is judged, not each one
    unsent = unsent or unsent_acks(delay_stats.get("send_errors", 0), delay_stats.get("forwarded", 0), (), None)
    if unsent["share"] > UNSENT_ACK_SHARE_MAX:
        text = f"{unsent['judged']} ACKs not sent (lost), {unsent['share']:.2%} of those handed to it"
        if unsent["judged_from_s"] is not None:
            text += (f" after {unsent['judged_from_s']:.3g} s, its last count before the metrics' warm-up cut "
                     f"at {unsent['metrics_from_s']:.3g} s ({unsent['total'] - unsent['judged']} before, not judged)")
        reasons.append(Finding("delay line", text, measured=unsent["share"], limit=UNSENT_ACK_SHARE_MAX,
                               behind=True, backlog=True))
    return reasons + _lateness_reasons("delay line", "{n}/{total} frames left more than {ms} ms late",
                                       "{n}/{total} frames held back {ms} ms or more",
                                       delay_stats, delay_stats.get("forwarded", 0),
                                       late_frames(delay_stats, k), k, stalls=delay_stats.get("host_stalls"))


def _lateness_reasons(check: str, late_text: str, held_text: str, stats: dict, total: int, late: int | None,
                      k: int, late_note: str = "", stalls: dict | None = None) -> list[Finding]:
    """The delay line's lateness limits (LATE_* x the dilation) on a count of frames sent,
    of which `late` left more than LATE_MAX_MS late; stats["late_ge_ms"] has the count
    held back LATE_HARD_MS or more. The texts get n, total and ms filled in; the findings'
    measured values and limits are shares of the frames sent. Where the link engine watched
    for host stalls (`stalls`, tevdelay.c), stats["late_ge_ms_beyond_stalls"] counts the
    frames late by as much less what a stall excuses (up to its length, in frames due before
    the engine should have caught up: within as long again after it); a finding whose excess
    lies wholly in stalls says so and is marked host_stall."""
    reasons = []
    virtual = f" physical, {k} x the virtual limit" if k > 1 else ""
    beyond = stats.get("late_ge_ms_beyond_stalls") if stalls else None

    def finding(text: str, n: int, ms: float, share_max: float) -> Finding:
        n_beyond = (beyond or {}).get(_ms_key(ms))
        in_stalls = n_beyond is not None and n_beyond / total <= share_max
        if in_stalls:
            text += (f"; {n - n_beyond} of them waited out the {stalls['count']} host stall(s) the engine saw "
                     f"(the hypervisor took its vCPU, up to {stalls['max_ns'] / 1e6:.3g} ms; "
                     f"{stalls['stolen_ns'] / 1e6:.3g} ms in all), {n_beyond} beyond them")
        return Finding(check, text, measured=n / total, limit=share_max, host_stall=in_stalls, behind=True)

    if total and late is not None and late / total > LATE_SHARE_MAX:
        reasons.append(finding(late_text.format(n=late, total=total, ms=_ms_key(LATE_MAX_MS * k))
                               + virtual + late_note, late, LATE_MAX_MS * k, LATE_SHARE_MAX))
    held = (stats.get("late_ge_ms") or {}).get(_ms_key(LATE_HARD_MS * k))
    if total and held is not None and held / total > LATE_HARD_SHARE_MAX:
        reasons.append(finding(held_text.format(n=held, total=total, ms=_ms_key(LATE_HARD_MS * k)) + virtual
                               + f" (max {stats.get('max_late_ns', 0) / 1e6:.3g} ms)",
                               held, LATE_HARD_MS * k, LATE_HARD_SHARE_MAX))
    return reasons


def _link_reasons(link: dict | None, k: int, stalls: dict | None = None) -> list[Finding]:
    """The link engine's own record (tevdelay.c link_stats): lost or unsent data frames,
    and departures later than the delay line's limits (host stalls as _lateness_reasons)."""
    if not link:
        return []
    reasons = []
    if link.get("ring_drops", 0) > 0 or link.get("send_errors", 0) > 0:
        reasons.append(Finding("link", f"{link.get('ring_drops', 0)} data frames lost in the engine's rings, "
                                       f"{link.get('send_errors', 0)} not sent",
                               measured=link.get("ring_drops", 0) + link.get("send_errors", 0), limit=0))
    late = (link.get("late_ge_ms") or {}).get(_ms_key(LATE_MAX_MS * k))
    return reasons + _lateness_reasons(
        "link", "{n}/{total} data frames left more than {ms} ms after their scheduled departure",
        "{n}/{total} data frames held back {ms} ms or more", link, link.get("sent", 0), late, k,
        late_note=f" (p99.9 {link.get('late_us_p999')} us)", stalls=stalls)


def late_frames(stats: dict, dilation: int = 1) -> int:
    """Frames released later than LATE_MAX_MS (x dilation, physical): the delay line's
    count at that threshold, or (older traces) the quantum-relative histogram's buckets
    that lie wholly beyond it."""
    limit_ms = LATE_MAX_MS * dilation
    counted = (stats.get("late_ge_ms") or {}).get(_ms_key(limit_ms))
    if counted is not None:
        return counted
    q_ms = stats.get("quantum_ns", 0) / 1e6
    hist = stats.get("error_histogram", {})
    bounds = [("lt_q", 1), ("lt_2q", 2), ("lt_5q", 5), ("lt_10q", 10), ("lt_100q", 100), ("ge_100q", math.inf)]
    late = 0
    lower = 0.5
    for name, upper in bounds:
        # count a bucket when its lower edge is already beyond the limit
        if lower * q_ms >= limit_ms:
            late += hist.get(name, 0)
        lower = upper
    return late

"""What an emulated run will do: the condition checked against the dumbbell, and turned
into a physical plan (rate, buffer, RTT, times) with the host's calibration and the
time-dilation factor."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tcpeval import cc
from tcpeval import dilation as dilation_mod
from tcpeval.backends import common, fidelity
from tcpeval.backends.base import ConditionError, refuse_condition
from tcpeval.backends.emulated import calibrate, fell_behind, host

MAX_FLOWS = host.MAX_PAIRS  # sender/receiver pairs of the dumbbell (parallel-flow designs: 10)
MIN_BUFFER_BYTES = 64 * 1024
RTO_MIN_SYSCTL = common.RTO_MIN_SYSCTL
RTO_MIN_US = 200_000                        # TCP_RTO_MIN


@dataclass
class Plan:
    """What a run will do, derived from the condition and the host's calibration."""
    rate_bps: float | None          # None: unshaped (calibration)
    buffer_bytes: int
    rtt_ms: float
    drop: float
    seed: int
    background_loss: float
    duration_s: float
    interval_s: float
    flows: list                      # tcpeval.spec.Flow
    stack: dict
    hz: int
    host_capacity_bps: float | None
    calibration: dict | None
    rate_source: str = "condition"
    notes: list = field(default_factory=list)
    dilation: int = 1                # time-dilation factor: every field above is physical
    # where loss bounds what the flows can carry below the link (dilation.carried_bound_bps),
    # that bound (physical): the factor was chosen for it, and the verdict checks it
    carried_bound_bps: float | None = None
    link: str = "tbf"                # the bottleneck's mechanism (bottleneck.LINKS)
    judged_at: int | None = None     # the factor whose tolerances the verdict applies, if
                                     # not `dilation` (a calibration point: calibrate.judged_at)
    stop: object = None              # a precision-driven run's rule (precision.StopRule), virtual
    ecn_threshold_bytes: int | None = None  # ECN marking at the link (bytes queued), None: off
    flow_queues: list | None = None  # ecn_queues 2: each flow's queue (bottleneck.QUEUES); None: one
    flow_stacks: list | None = None  # each flow's endpoints' own sysctls over `stack` (a flow's ecn)
    # factors passed over because this host fell behind their physical path (fell_behind)
    skipped_factors: list = field(default_factory=list)
    # the least factor the host's stalls allow at this RTT (calibrate.stall_floor), where it
    # raised an `auto` factor; None where it did not
    stall_floor: dict | None = None

    @property
    def path_buffer_bytes(self) -> int:
        """The most the path can queue: the buffer, once per queue. With two queues sharing
        the rate, a frame behind a full queue of its own waits as long as behind both."""
        return self.buffer_bytes * (2 if self.flow_queues else 1)

    @property
    def verdict_dilation(self) -> int:
        return self.judged_at or self.dilation


def check_condition(condition) -> None:
    """Reject what the emulated backend cannot realise, naming each field: what any run
    needs (Condition.problems), and the dumbbell's own limits."""
    problems = list(condition.problems())
    if condition.backend != "emulated":
        problems.append(f"backend: {condition.backend!r}, expected 'emulated'")
    if len(condition.flows) > MAX_FLOWS:
        problems.append(f"flows: {len(condition.flows)} flows; the dumbbell has {MAX_FLOWS} sender/receiver pairs")
    problems += [f"stack: {name!r} is not a per-namespace net.ipv4.* sysctl (host-global settings are "
                 "never changed by a run)" for name in condition.stack or {} if not name.startswith("net.ipv4.")]
    refuse_condition(problems)


def stack_settings(condition, dilation: int = 1) -> dict:
    """The endpoints' sysctls: the paper's, 3.16's, a dilated minimum RTO, the condition's."""
    scaled = {}
    if dilation > 1:
        # the kernel's minimum RTO is a constant the ports do not own: k x 200 ms
        scaled[RTO_MIN_SYSCTL] = str(RTO_MIN_US * dilation)
    # with ECN at the bottleneck every endpoint asks for it and accepts it (RFC 3168), so a
    # classic algorithm's flow sees the marks too (it reacts as to a loss); DCTCP asks anyway.
    # With a second queue for the traffic without ECN, the endpoints keep the kernel's
    # default (accept, never ask): only the algorithms that ask themselves use ECN.
    ecn = {"net.ipv4.tcp_ecn": 1} if getattr(condition, "ecn_threshold_bytes", None) \
        and getattr(condition, "ecn_queues", None) != 2 else {}
    return {**common.PAPER_SYSCTLS, **common.STACK_316, **scaled, **ecn, **(condition.stack or {})}


def flow_queue(flow) -> str:
    """With two queues at the bottleneck (ecn_queues 2, bottleneck.QUEUES): "marking" for a
    flow that negotiates ECN there -- told to (ecn: true), or its algorithm asks itself
    (DCTCP) -- and "drop_tail" for every other flow and UDP."""
    if flow.protocol == "udp":
        return "drop_tail"
    return "marking" if flow.ecn or cc.ecn_response(flow.variant) == "marked_fraction" else "drop_tail"


def flow_stacks(condition) -> list | None:
    """Each flow's endpoints' sysctls over the run's: net.ipv4.tcp_ecn 1 (ask and accept)
    for a flow with ecn: true, 2 (accept only) for ecn: false; with two queues also 1 for a
    flow whose algorithm asks itself (DCTCP), whose receiver must accept its SYN: that SYN
    is ECT, and a listener with tcp_ecn = 2 and another algorithm then refuses ECN (6.18).
    None where no flow needs its own."""
    def own(f) -> dict:
        if f.ecn is not None:
            return {"net.ipv4.tcp_ecn": 1 if f.ecn else 2}
        if getattr(condition, "ecn_queues", None) == 2 and flow_queue(f) == "marking":
            return {"net.ipv4.tcp_ecn": 1}
        return {}
    stacks = [own(f) for f in condition.flows]
    return stacks if any(stacks) else None


def bdp_buffer(rate_bps: float, rtt_ms: float) -> int:
    """One bandwidth-delay product, at least MIN_BUFFER_BYTES."""
    return max(MIN_BUFFER_BYTES, int(rate_bps * (rtt_ms / 1000) / 8))


def for_condition(condition, cal: dict, log, at_least: int = 1) -> Plan:
    """The plan of a condition on a host with calibration ``cal``; an `auto` factor no
    lower than ``at_least`` (slower)."""
    if condition.rate_bps is None:
        rate, source = cal["default_rate_bps"], "calibrated host default"
    else:
        rate, source = float(condition.rate_bps), "condition"
    if condition.buffer_bytes is None:
        buffer = bdp_buffer(rate, condition.rtt_ms)
    else:
        buffer = int(condition.buffer_bytes)
    # the link mechanism and factor from the host's faithful envelope (calibrate.py):
    # the smallest k with rate / k inside it at the physical RTT k x RTT
    ecn = condition.ecn_threshold_bytes
    if ecn and "tevlink" not in (cal.get("links") or ()):
        raise ConditionError("condition.ecn_threshold_bytes: ECN marking needs the link engine (tevlink), "
                             f"which this host's calibration did not measure (links: {cal.get('links')}); "
                             "calibrate without $TCPEVAL_LINK")
    try:
        # marks need the engine: TBF has no ECN (and fq_codel/red are not on every kernel)
        k, link, capacity, skipped, floor = factor_on_host(cal, condition, rate, link="tevlink" if ecn else None,
                                                           at_least=at_least)
    except dilation_mod.DilationError as err:
        raise ConditionError(f"condition.{err}") from None
    if floor:
        log(f"this host's stalls ({floor['per_virtual_s']:.2g} a virtual second of {floor['stalls_from_ms']:g} ms "
            f"or more under its calibration at x{floor['factor']}, the physical path's "
            f"{fidelity.STALL_ROUND_TRIPS} round trips) ask at least x{floor['factor']} at {condition.rtt_ms} ms")
    waived = waived_stall_floor(cal, condition, k)
    if waived:
        i, flow = dilation_mod.native_flow(condition)
        log(f"this host's stalls ({waived['per_virtual_s']:.2g} a virtual second of {waived['stalls_from_ms']:g} ms "
            f"or more under its calibration at x{waived['factor']}) would ask x{waived['factor']} at "
            f"{condition.rtt_ms} ms, but flows[{i}] ({flow.variant}, impl native) cannot be slowed: "
            f"x{k}, and the verdict's stall check judges the run")
    for s in skipped:
        log(f"this host fell behind at x{s['factor']} on this physical path under its calibration "
            f"({s['run']}, {s['at']}): x{s['factor'] + 1} instead")
    if ecn and link != "tevlink":
        raise ConditionError(f"condition.ecn_threshold_bytes: ECN marking needs the link engine (tevlink); "
                             f"this run would take {link} ($TCPEVAL_LINK)")
    carried = dilation_mod.rate_for_factor(condition, rate)
    if carried < rate:
        log(f"the flows carry at most {carried / 1e9:.3g} Gbps at p = {condition.drop:g} "
            f"({dilation_mod.WINDOW_BOUND_LOSSES:g}/p segments a round trip each): the factor is chosen for that")
    if k > 1:
        log(f"time dilation x{k}: {rate / 1e9:.3g} Gbps at {condition.rtt_ms} ms runs as "
            f"{rate / k / 1e9:.3g} Gbps at {condition.rtt_ms * k:g} ms for "
            f"{condition.duration_s * k:g} s (the {link} link carries {capacity / 1e9:.3g} Gbps "
            f"faithfully there)")
    # the virtual path as a physical one (tcpeval.dilation): rate / k, times x k; the
    # buffer in bytes, the drop probability and the seed stay
    flows = [replace(f, start_s=f.start_s * k, stop_s=f.stop_s * k if f.stop_s is not None else None,
                     rate_bps=f.rate_bps / k if f.rate_bps else f.rate_bps,
                     rpcs_per_s=f.rpcs_per_s / k if f.rpcs_per_s else f.rpcs_per_s)
             for f in condition.flows]
    return Plan(rate_bps=rate / k, buffer_bytes=buffer, rtt_ms=condition.rtt_ms * k,
                drop=condition.drop, seed=condition.seed, background_loss=condition.background_loss,
                duration_s=condition.duration_s * k, interval_s=condition.interval_s * k,
                flows=flows, stack=stack_settings(condition, k), hz=condition.hz,
                host_capacity_bps=capacity, calibration=cal, rate_source=source, dilation=k,
                carried_bound_bps=carried / k if carried < rate else None,
                link=link, stop=condition.stop, ecn_threshold_bytes=ecn,
                flow_queues=[flow_queue(f) for f in flows] if condition.ecn_queues == 2 else None,
                flow_stacks=flow_stacks(condition), skipped_factors=skipped, stall_floor=floor)


def stall_floor_above(cal: dict, condition, rate: float | None, link: str | None = None,
                      at_least: int = 1) -> dict | None:
    """The host's stall floor (calibrate.stall_floor) of an `auto` run with a rate, where it
    lies above the factor the envelope alone gives (and ``at_least``); else None. A run
    with a native flow has none: it cannot be slowed, and a floor above x1 would refuse
    what the verdict's own stall check (twice the floor's limit) may well pass -- it runs
    at its envelope's factor and the verdict judges it (waived_stall_floor says so)."""
    if (dilation_mod.parse(condition.dilation) != dilation_mod.AUTO or not rate
            or dilation_mod.native_flow(condition)):
        return None
    floor = calibrate.stall_floor(cal, condition.rtt_ms)
    if not floor or floor["factor"] <= at_least:
        return None
    try:
        k = calibrate.factor_for(cal, condition, rate, link)[0]
    except dilation_mod.DilationError:
        return None  # refused as it is; factor_on_host says why
    return floor if floor["factor"] > k else None


def waived_stall_floor(cal: dict, condition, k: int) -> dict | None:
    """The stall floor an `auto` run at factor ``k`` would have taken but for a native flow
    (stall_floor_above), or None: what its run log says it ran without."""
    if dilation_mod.parse(condition.dilation) != dilation_mod.AUTO or not dilation_mod.native_flow(condition):
        return None
    floor = calibrate.stall_floor(cal, condition.rtt_ms)
    return floor if floor and floor["factor"] > k else None


def factor_on_host(cal: dict, condition, rate: float | None, link: str | None = None,
                   at_least: int = 1) -> tuple[int, str, float, list, dict | None]:
    """(factor, link, capacity, skipped, stall floor) of a condition on this host: the envelope's
    factor (calibrate.factor_for), at least ``at_least`` for an `auto` one, and above each
    factor whose physical path this host fell behind under the calibration
    (fell_behind.known; ``skipped`` says which, and where that was seen), and no lower
    than the host's stalls allow (stall_floor_above; the floor where it set the factor,
    else None). Runs and `tcpeval plan` choose so alike."""
    floor = stall_floor_above(cal, condition, rate, link, at_least)
    at_least = floor["factor"] if floor else at_least
    k, link, capacity = calibrate.factor_for(cal, condition, rate, link)
    if at_least > k:  # the same mechanism, a slower physical path
        k, link, capacity = calibrate.factor_for(cal, replace(condition, dilation=at_least), rate, link=link)
    skipped = []
    if dilation_mod.parse(condition.dilation) != dilation_mod.AUTO or not rate:
        return k, link, capacity, skipped, floor
    carried = dilation_mod.rate_for_factor(condition, rate)
    behind = fell_behind.entries(cal)  # one read of the record, whatever the factors tried
    while k < dilation_mod.MAX_FACTOR:
        seen = fell_behind.known(behind, len(condition.flows), condition.rtt_ms * k, carried / k)
        if seen is None:
            break
        skipped.append({"factor": k, "run": seen["run"], "at": seen["at"]})
        k, link, capacity = calibrate.factor_for(cal, replace(condition, dilation=k + 1), rate, link=link)
    return k, link, capacity, skipped, floor


def slower(condition, plan: Plan, record: dict, log) -> Plan | None:
    """The plan of the next attempt after a spoiled one (`record`): where the host fell
    behind that attempt's frame rate (fidelity.fell_behind: frames released late, not in
    host stalls, or dropped in a CPU's full input backlog) and the condition's factor is
    `auto`, the same condition one factor higher -- half the frames a second per step at
    x1, a fifth fewer at x4 -- asking less of the host than the calibration's envelope,
    measured on steady flows, promised this one (a slow start's overshoot is burstier).
    None (run it as before) otherwise: a factor the condition sets is kept, and a condition
    that cannot be slowed (a native flow) is run again as it is."""
    if (dilation_mod.parse(condition.dilation) != dilation_mod.AUTO or plan.dilation >= dilation_mod.MAX_FACTOR
            or not fidelity.fell_behind(record["fidelity"]["findings"])):
        return None
    try:
        nxt = for_condition(condition, plan.calibration, lambda m: None, at_least=plan.dilation + 1)
    except ConditionError as err:
        log(f"the host fell behind at x{plan.dilation}, and the condition cannot run slower ({err}): "
            "the next attempt runs as this one")
        return None
    log(f"the host fell behind the frame rate at x{plan.dilation}: the next attempt runs at "
        f"x{nxt.dilation}, {nxt.rate_bps / 1e9:.3g} Gbps at {nxt.rtt_ms:g} ms for {nxt.duration_s:g} s")
    # the run's record of what it passed over stays with its later attempts
    return replace(nxt, skipped_factors=[*plan.skipped_factors, *nxt.skipped_factors])


def for_calibration(condition, rtt_ms: float, duration_s: float, rate_bps: float | None,
                    link: str = "tbf", judged_at: int = 1) -> Plan:
    """The plan of a calibration run: native CUBIC at p = 0, unshaped (rate None) or at
    a bottleneck rate with a one-BDP buffer on the link mechanism ``link``, judged with the
    tolerances of a run dilated ``judged_at``-fold (the flows themselves run undilated)."""
    shaped = rate_bps is not None
    return Plan(rate_bps=rate_bps, buffer_bytes=bdp_buffer(rate_bps, rtt_ms) if shaped else 0,
                rtt_ms=rtt_ms, drop=0.0, seed=1, background_loss=0.0, duration_s=duration_s,
                interval_s=0.1, flows=list(condition.flows), stack=stack_settings(condition), hz=condition.hz,
                host_capacity_bps=rate_bps, calibration=None,
                rate_source="calibration (faithful rate search)" if shaped else "unshaped (calibration)",
                link=link, judged_at=judged_at)

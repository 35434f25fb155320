"""What a campaign will cost on this host: each run's time-dilation factor, its traffic
time and wall time (`tcpeval plan`, and the ETA of `tcpeval design status`)."""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from tcpeval import dilation, findings, mathis, precision, quantity
from tcpeval.backends.base import RUN_ATTEMPTS, retry_pause_s
from tcpeval.condition import payload_ceiling_bps

# Wall time of a run beyond its traffic: the workflow's job, namespaces, qdiscs, BPF, RTT
# set-up, teardown, trace writing. From one run's start to the next's, less its traffic x
# factor, in `make findings` on the 2-vCPU VM: median 1.9 s, upper quartile 2.8 s over the
# 0.2-ms slice's 89 runs of one attempt (2026-11-28); 0.5-2.5 s, once 8 s, at 6.2 and
# 12.2 ms (2026-11-29; docs/precision.md). `make bench` measures the backend's part alone.
RUN_OVERHEAD_S = 3.0


@dataclass(frozen=True)
class Ceiling:
    """The highest rate the backend carries faithfully, and where the figure comes from;
    with this host's calibration, its envelope (per link mechanism, flow count and
    physical RTT: calibrate.choose gives each run its factor, as the backend does)."""
    rate_bps: float | None
    default_rate_bps: float | None
    source: str
    calibration: dict | None = None
    link: str | None = None  # with a calibration: plan every run on this link mechanism


def given_ceiling(rate: str | float) -> Ceiling:
    """A host that carries `rate` faithfully (e.g. a node of a cluster: `10G`), in place of
    this host's calibration."""
    bps = quantity.rate(rate, "--faithful-rate")
    return Ceiling(bps, None, f"a host that carries {quantity.format_rate(bps)} faithfully (given)")


def node_ceiling(rate) -> Ceiling:
    """What the workflow plans a cluster node's runs with: a given rate, or none (a login
    node neither builds the emulator nor holds the nodes' calibration)."""
    if rate is None:
        return Ceiling(None, None, "nodes' faithful rate not given")
    return given_ceiling(rate)


def ceiling(backend: str) -> Ceiling:
    """Emulated: the cached calibration of this host and build (none yet: unknown);
    testbed: real links, no ceiling and no dilation."""
    if backend != "emulated":
        return Ceiling(None, None, f"{backend}: real links run in real time (no dilation)")
    # here, not at the top: planning a testbed campaign needs nothing of the emulator
    from tcpeval.backends.emulated import build, calibrate
    # a query: it reads the calibration filed under the sources' hashes, never builds
    cal = calibrate.load(build.source_hashes())
    if cal is None:
        return Ceiling(None, None, "no calibration of this host and build yet "
                                   "(`tcpeval calibrate`); factors assume 1")
    rate = cal.get("faithful_rate_bps") or cal["host_capacity_bps"]
    return Ceiling(rate, cal.get("default_rate_bps"),
                   f"calibration of {cal.get('measured_at', '?')}: an envelope of "
                   f"{len(cal['points'])} points, {rate / 1e9:.3g} Gbps faithful at the design's RTTs "
                   f"({cal.get('link')})", calibration=cal)


@dataclass(frozen=True)
class RunPlan:
    factor: int | None       # None: the run would be refused
    traffic_s: float         # virtual: expected (a precision-driven run may stop sooner)
    wall_s: float            # physical: expected traffic x factor + overhead
    refused: str | None = None
    max_traffic_s: float | None = None   # virtual: the condition's duration, its longest
    max_wall_s: float | None = None      # physical: max_traffic_s x factor + overhead


# What a precision-driven run is expected to last (`expected_traffic_s`), a model to check
# against real runs (docs/precision.md, "What the plan expects"):
# - the rule decides every DECIDE_EVERY_S and its batches need two decisions' samples: no
#   stop before 4 virtual s (every drop-0 run of the 0.2-ms slice stopped at 4.1 s);
# - without random loss it also waits for a sample after its warm-up cut that met the link
#   (precision.decide's link_met) and, where a finding asks its mean for more (+-0.5 % at drop 0), for that:
#   the 24 drop-0 cells of 2026-12-06 (afternoon) ran 6.1-30 virtual s, 13.5 in the mean (six
#   at their 30-s cap), so such a run is planned at LOSSLESS_STOP_S (a mean: the plan sums),
#   as is one the link limits under rare loss, whose rule asks no loss events (spec.expand);
# - it waits for min_loss_events, at the Mathis rate or the link's ceiling if lower;
# - where loss, not the link, sets the rate, the estimates need about PRECISION_EVENTS loss
#   events for +-5 % (the run-length model's rule of thumb for Reno, CUBIC and H-TCP;
#   the high-speed variants need more, but lose more often at the same p).
STOP_FLOOR_S = 2 * precision.DECIDE_EVERY_S
LOSSLESS_STOP_S = 7 * precision.DECIDE_EVERY_S
PRECISION_EVENTS = 500


def expected_traffic_s(cond) -> float:
    """Virtual seconds a run is expected to carry traffic: its duration, or for a
    precision-driven run (cond.stop) when the rule is expected to be met, on the
    decisions' grid, at most its duration."""
    rule = cond.stop
    if rule is None:
        return float(cond.duration_s)
    if cond.drop <= 0:
        needed = LOSSLESS_STOP_S
    elif cond.rate_bps is None:
        needed = 0.0
    else:
        per_s = mathis.loss_events_per_s(cond.rtt_ms, cond.drop, cond.rate_bps)
        loss_limited = mathis.throughput_bps(cond.rtt_ms, cond.drop) < payload_ceiling_bps(cond.rate_bps)
        events = max(rule.min_loss_events, PRECISION_EVENTS if loss_limited else 0)
        if not events:  # the link sets the rate, and the rule asks no loss events: as without loss
            needed = LOSSLESS_STOP_S
        else:
            needed = events / per_s if per_s > 0 else math.inf
    at = max(STOP_FLOOR_S, needed, rule.min_s or 0.0)
    decided = math.ceil(at / precision.DECIDE_EVERY_S) * precision.DECIDE_EVERY_S
    return float(min(cond.duration_s, decided))


def plan_run(cond, ceil: Ceiling) -> RunPlan:
    """The factor a run gets (as the emulated backend chooses it) and what it costs:
    expected, and at most (a precision-driven run that meets its rule late or never)."""
    rate = cond.rate_bps if cond.rate_bps is not None else ceil.default_rate_bps
    try:
        if ceil.calibration:
            # here, not at the top: planning a testbed campaign needs nothing of the emulator
            from tcpeval.backends.emulated import plan as emulated_plan
            # as a run chooses: the envelope, and above the factors this host fell behind at
            k = emulated_plan.factor_on_host(ceil.calibration, cond, rate, ceil.link)[0]
        else:
            # a given rate (a cluster's nodes) plans as an envelope does: for what the
            # flows can carry where loss bounds them below the link
            k = dilation.factor_for(cond, dilation.rate_for_factor(cond, rate), ceil.rate_bps) if ceil.rate_bps else 1
    except dilation.DilationError as err:  # as the emulated backend would refuse it
        return RunPlan(None, expected_traffic_s(cond), 0.0, str(err), cond.duration_s, 0.0)
    expected = expected_traffic_s(cond)
    return RunPlan(k, expected, expected * k + RUN_OVERHEAD_S, None, cond.duration_s, _wall_s(cond, k))


def _wall_s(cond, k: int) -> float:
    """Physical wall time of a run dilated k times at its longest: its duration x k plus
    set-up."""
    return cond.duration_s * k + RUN_OVERHEAD_S


def makespan_s(walls: list[float], nodes: int) -> float:
    """Wall time of independent runs on `nodes` machines, one run per machine at a time
    (each network run owns its node): longest runs first, each to the machine that frees
    up first."""
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, got {nodes}")
    free = [0.0] * min(nodes, max(len(walls), 1))
    for w in sorted(walls, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


# A job's time limit (SLURM --time) over its expected wall time: runs retried inside the
# backend (RUN_ATTEMPTS when the host flags one, with the pauses between them; an `auto`
# run's next attempt one factor slower where the host fell behind its frame rate) and
# slower nodes (half a run more) must fit.
SLOW_NODE_MARGIN = 0.5
RETRY_PAUSES_TOTAL_S = sum(retry_pause_s(n) for n in range(1, RUN_ATTEMPTS))
TIME_LIMIT_MIN_MIN = 10


def attempt_factors(cond, k: int) -> list[int]:
    """The factors a run's attempts may run at, at most: each after the first one higher
    for an `auto` run (emulated plan.slower), a set factor kept."""
    step = 1 if dilation.parse(cond.dilation) == dilation.AUTO else 0
    return [min(k + i * step, dilation.MAX_FACTOR) for i in range(RUN_ATTEMPTS)]


def time_limit_min(cond, ceil: Ceiling) -> int:
    """Minutes to ask the scheduler for one run. Without a calibration (a login node) an
    `auto` run is planned at the largest dilation factor, so it is never cut short."""
    plan = plan_run(cond, ceil)
    if plan.factor is None:
        return TIME_LIMIT_MIN_MIN
    k = plan.factor
    if ceil.rate_bps is None and dilation.parse(cond.dilation) == dilation.AUTO:
        k = dilation.MAX_FACTOR
    # a precision-driven run may need its whole duration (_wall_s: at its longest)
    wall = sum(_wall_s(cond, f) for f in attempt_factors(cond, k)) + SLOW_NODE_MARGIN * _wall_s(cond, k)
    return max(TIME_LIMIT_MIN_MIN, math.ceil((wall + RETRY_PAUSES_TOTAL_S) / 60))


@dataclass(frozen=True)
class FindingStep:
    """A finding's place in a first round run finding by finding (by_finding): the runs it
    adds (those no finding before it brought, nor already run), their planned wall time,
    and the wall time on one node when every cell it reads has run."""
    claim: str
    cells: int
    runs: tuple
    wall_s: float
    by_s: float
    blocked: bool   # it reads a cell the campaign plans but does not run: undecided at this budget


def by_finding(claims: list[dict], runs: list, wall_s, cell_of, done=lambda run: False,
               blocked: frozenset = frozenset()) -> list[FindingStep]:
    """The runs of a first round in the order that gives the most findings all their cells
    soonest: at each step the finding whose cells not yet run nor scheduled cost the least
    wall time (``wall_s(run)``; ties in claims.yaml order) brings them. A budget cut
    anywhere then leaves whole findings run rather than a little of each (greedy: the
    cheapest-first choice, not a proven optimum). Findings in ``blocked`` (ids) come last,
    since no repetition decides them; those that read none of ``runs`` are left out.
    ``cell_of(run)`` is a run's cell (findings.matches), ``done(run)`` whether its trace exists."""
    cells = [cell_of(run) for run in runs]
    reads = {}
    for claim in claims:
        mine = [i for i, cell in enumerate(cells) if findings.needed(cell, [claim])]
        if mine:
            reads[claim["id"]] = mine
    scheduled = {i for i, run in enumerate(runs) if done(run)}   # already run: free
    cost = [0.0 if i in scheduled else float(wall_s(run)) for i, run in enumerate(runs)]

    def price(cid):
        return (cid in blocked, sum(cost[i] for i in reads[cid] if i not in scheduled))

    steps, clock = [], 0.0
    pending = [c["id"] for c in claims if c["id"] in reads]
    while pending:
        cid = min(pending, key=price)   # min keeps the first of equals: claims.yaml order
        pending.remove(cid)
        new = [i for i in reads[cid] if i not in scheduled]
        scheduled.update(new)
        wall = sum(cost[i] for i in new)
        clock += wall
        read = len({tuple(sorted(cells[i].items())) for i in reads[cid]})
        steps.append(FindingStep(cid, read, tuple(runs[i] for i in new), wall, clock, cid in blocked))
    return steps

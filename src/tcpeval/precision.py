"""Runs as long as their estimates need: the statistics of precision-driven stopping.

A run's receiver reports interval throughput (one sample per reporting interval). While
the run goes on, `decide` is asked, now and then, whether the samples so far estimate the
steady-state mean throughput (and its quartiles) precisely enough:

1. The warm-up (slow start, the first loss episodes) is cut by MSER-5 (`warmup_cut`).
2. The retained samples are split into a fixed number of non-overlapping batches; the batch
   means are close to independent and normal once batches are longer than the series'
   correlation time, so a Student-t interval over them covers the mean (`batch_means`;
   Schmeiser 1982 recommends 10 to 30 batches).
3. Quantiles of interval throughput get the same treatment with each batch's quantile in
   place of its mean (`quantile_interval`).
4. The run stops when every interval's half-width is at most `half_width` times its
   estimate (the mean's `mean_half_width`, where a rule sets it), and never before
   `min_loss_events` loss events or `min_s` seconds, nor, where the path drops nothing at
   random, before the flow has met the link after the warm-up;
   at `max_s` it stops regardless, recording whether the precision was reached (`decide`).

Nothing here knows a backend or the analysis: both use it (the backend to stop a run, the
analysis to report what a trace's estimates are worth). Pure Python and numpy; the
Student-t quantile is computed here because SciPy is not a dependency.

References: B. Schmeiser, Batch size effects in the analysis of simulation output,
Operations Research 30(3), 1982. K. P. White Jr., An effective truncation heuristic for
bias reduction in simulation output, Simulation 69(6), 1997 (MSER-5: White, Cobb and
Spratt, WSC 2000; Franklin and White, WSC 2008). G. S. Fishman, Grouping observations in digital
simulation, Management Science 24(5), 1978 (the von Neumann test of batch means).
S. Asmussen and P. W. Glynn, Stochastic Simulation, Springer 2007, III.5 (sectioning).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from tcpeval.errors import SpecError

MSER_BATCH = 5                    # MSER-5: the warm-up is searched in batches of 5 samples
BATCHES_ALLOWED = (10, 30)        # Schmeiser (1982): 10 to 30 batches
INDEPENDENCE_LEVEL = 0.05         # one-sided level of the von Neumann test of batch means
NOT_ENOUGH_SAMPLES = "not enough samples"
# how often a run asks `decide` (virtual s): each decision costs a drop read and an MSER-5
# search; the emulated backend's watch asks at this pace, and a replay of the rule on a
# recorded series (tcpeval.analysis.stopping_check) asks at the same
DECIDE_EVERY_S = 2.0
# what a precision-driven run's metrics are taken over: the samples after the warm-up cut
# (what the rule's intervals are about), or every sample (the paper's definition)
METRICS_SPANS = ("after_warmup", "whole_run")
# why a run on a path that drops nothing at random may not stop yet (decide's link_met)
LINK_NOT_MET = "the flow has not met the link since the warm-up (its window still grows)"


# --- Student t, without SciPy -------------------------------------------------------------

def _t_central_probability(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with an integer number of degrees of freedom; the
    closed forms of Abramowitz & Stegun 26.7.3-26.7.4 (finite sums in cos(theta))."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        if df > 1:
            total = 1.0
            for k in range(3, df - 1, 2):        # 1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ...
                term *= (k - 1) / k * cos2
                total += term
        return 2 / math.pi * (theta + sin * math.cos(theta) * total)
    total, term = 1.0, 1.0
    for k in range(2, df - 1, 2):                 # 1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ...
        term *= (k - 1) / k * cos2
        total += term
    return sin * total


@lru_cache(maxsize=256)
def t_critical(confidence: float, df: int) -> float:
    """The two-sided Student-t critical value: P(|T_df| <= value) = confidence."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if int(df) != df or df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    df = int(df)
    low, high = 0.0, 1.0
    while _t_central_probability(high, df) < confidence:
        high *= 2
    for _ in range(200):                          # bisection: monotone, and cheap at this size
        middle = (low + high) / 2
        if _t_central_probability(middle, df) < confidence:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


# --- a proportion ------------------------------------------------------------------------

Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's interval of a proportion k / n at the normal quantile z (the fidelity
    verdict's drop rate, the stopping check's coverage); (0, 1) for n = 0."""
    if n <= 0:
        return (0.0, 1.0)
    phat = k / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); say so rather than leave rounding residue.
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


# --- the rule ---------------------------------------------------------------------------

def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rule_problems(values: Mapping, where: str) -> list[str]:
    """Every problem of a rule's settings, each naming its field under `where`."""
    problems = []

    def need(name: str, ok: bool, expectation: str) -> None:
        if not ok:
            problems.append(f"{where}.{name}: {expectation}, got {values[name]!r}")

    half_width = values["half_width"]
    need("half_width", _is_number(half_width) and 0 < half_width < 1, "must be in (0, 1)")
    mean_hw = values.get("mean_half_width")
    if mean_hw is not None:
        need("mean_half_width", _is_number(mean_hw) and 0 < mean_hw < 1, "must be in (0, 1) (or unset)")
    events = values["min_loss_events"]
    need("min_loss_events", isinstance(events, int) and not isinstance(events, bool)
         and events >= 0, "must be an integer >= 0")
    max_s = values["max_s"]
    max_ok = _is_number(max_s) and 0 < max_s < math.inf
    need("max_s", max_ok, "must be a finite number of seconds > 0")
    min_s = values["min_s"]
    need("min_s", min_s is None or (_is_number(min_s) and 0 <= min_s
                                    and (not max_ok or min_s <= max_s)),
         f"must be a number of seconds in [0, max_s = {max_s}]")
    confidence = values["confidence"]
    need("confidence", _is_number(confidence) and 0.5 <= confidence < 1, "must be in [0.5, 1)")
    quantiles = values["quantiles"]
    need("quantiles", isinstance(quantiles, (list, tuple))
         and all(_is_number(q) and 0 < q < 1 for q in quantiles)
         and len(set(quantiles)) == len(quantiles),
         "must be a list of distinct numbers in (0, 1)")
    batches = values["batches"]
    low, high = BATCHES_ALLOWED
    need("batches", isinstance(batches, int) and not isinstance(batches, bool)
         and low <= batches <= high, f"must be an integer in [{low}, {high}] (Schmeiser 1982)")
    need("check_independence", isinstance(values["check_independence"], bool),
         "must be true or false")
    need("metrics", values["metrics"] in METRICS_SPANS, f"must be one of {', '.join(METRICS_SPANS)}")
    return problems


@dataclass(frozen=True)
class StopRule:
    """When a run has estimated enough: every interval's half-width at most `half_width`
    times its estimate (relative, e.g. 0.05 for +-5 %), after at least `min_loss_events`
    loss events and `min_s` virtual seconds; at `max_s` the run stops regardless.

    `quantiles` are the interval-throughput quantiles that must be as precise as the mean
    (empty: the mean alone). `check_independence` also holds a run back while its batch
    means are correlated (a von Neumann test, Fishman 1978): batches shorter than the
    correlation time make the interval too narrow, and a rare long dip (H-TCP at 1e-7 in
    the run-length model) otherwise lets a run stop too early. `metrics` says what the
    analysis takes the run's mean and quantiles over: `after_warmup` (the samples after
    the cut, which the intervals describe) or `whole_run` (the paper's definition, slow
    start included; then the interval describes the steady state, not the figure).
    `mean_half_width`, where set, is the mean's own target, tighter than the quantiles'
    (a finding that compares means closely asks it of its cells: tcpeval.findings).
    """
    half_width: float
    max_s: float
    min_loss_events: int = 0
    min_s: float | None = None
    confidence: float = 0.95
    quantiles: tuple[float, ...] = (0.25, 0.5, 0.75)
    batches: int = 20
    check_independence: bool = True
    metrics: str = "after_warmup"
    mean_half_width: float | None = None

    def __post_init__(self):
        if isinstance(self.quantiles, list):      # frozen: keep it hashable
            object.__setattr__(self, "quantiles", tuple(self.quantiles))
        problems = _rule_problems(self.settings(), "StopRule")
        if problems:
            raise SpecError("; ".join(problems))

    def settings(self) -> dict:
        out = {"half_width": self.half_width, "min_loss_events": self.min_loss_events,
               "max_s": self.max_s, "min_s": self.min_s, "confidence": self.confidence,
               "quantiles": list(self.quantiles), "batches": self.batches,
               "check_independence": self.check_independence, "metrics": self.metrics}
        if self.mean_half_width is not None:     # unset: as rules were recorded before it
            out["mean_half_width"] = self.mean_half_width
        return out

    def target(self, name: str) -> float:
        """The relative half-width the interval named `name` ("mean", "Q25", ...) must meet."""
        return self.mean_half_width if name == "mean" and self.mean_half_width is not None else self.half_width

    @classmethod
    def from_design(cls, mapping, where: str) -> StopRule:
        """The rule of a design's `stop:` mapping, e.g. {half_width: 0.05,
        min_loss_events: 100, max_s: 900}; `where` is its path in the design
        ("criteria.responsiveness.stop"), which every error names (SpecError, a ValueError)."""
        if not isinstance(mapping, Mapping):
            raise SpecError(f"{where}: must be a mapping, got {type(mapping).__name__}")
        defaults = {"min_loss_events": 0, "min_s": None, "confidence": 0.95,
                    "quantiles": [0.25, 0.5, 0.75], "batches": 20, "check_independence": True,
                    "metrics": "after_warmup", "mean_half_width": None}
        allowed = ["half_width", "max_s", *defaults]
        problems = [f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}"
                    for key in mapping if key not in allowed]
        problems += [f"{where}.{key}: required" for key in ("half_width", "max_s")
                     if key not in mapping]
        if problems:
            raise SpecError("; ".join(problems))
        values = {**defaults, **mapping}
        problems = _rule_problems(values, where)
        if problems:
            raise SpecError("; ".join(problems))
        values["quantiles"] = tuple(float(q) for q in values["quantiles"])
        values["max_s"] = float(values["max_s"])
        if values["min_s"] is not None:
            values["min_s"] = float(values["min_s"])
        return cls(**values)


# --- warm-up ----------------------------------------------------------------------------

def _mser5(values) -> tuple[int, bool]:
    """MSER-5's cut (an index into `values`) and whether it fell on the last truncation the
    search allows (then the warm-up may not be over yet: the series is too short)."""
    series = np.asarray(values, dtype=float)
    batches = len(series) // MSER_BATCH
    if batches < 2:
        return 0, False
    means = series[:batches * MSER_BATCH].reshape(batches, MSER_BATCH).mean(axis=1)
    means = means - means.mean()                  # centred: sums of squares without cancellation
    # suffix sums: kept[d] = batches - d means remain after cutting d batches
    suffix_sum = np.cumsum(means[::-1])[::-1]
    suffix_squares = np.cumsum((means ** 2)[::-1])[::-1]
    kept = batches - np.arange(batches)
    deviations = suffix_squares - suffix_sum ** 2 / kept
    last = batches // 2                           # search the first half only
    statistic = deviations[:last + 1] / kept[:last + 1] ** 2
    cut = int(np.argmin(statistic))               # the earliest of equal minima
    return cut * MSER_BATCH, cut == last


def warmup_cut(values) -> int:
    """Where the warm-up ends, by MSER-5 (White 1997; Franklin & White 2008), as an index
    into `values`: the samples before it are dropped.

    The series is averaged in consecutive, non-overlapping batches of 5 (a trailing
    remainder of fewer than 5 samples is left out of the search). Cutting the first d
    batch means leaves k - d of them; MSER weighs how spread they still are, the sum of
    their squared deviations from their own mean, against how many remain, dividing by
    (k - d)^2. A transient far from the steady state inflates the spread, so cutting it
    lowers the statistic; cutting steady-state data shrinks the divisor faster than the
    spread, so it raises it. The cut is the d that minimises the statistic, searched over
    the first half of the series only (beyond it the statistic, computed from few means,
    tends to fall again by chance), and returned as 5 d. Series of fewer than 10 samples
    are not cut. Ties go to the earliest d.
    """
    return _mser5(values)[0]


# --- intervals --------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    """A confidence interval estimate +- half_width (at `confidence`) from `batches`
    batches of `batch_size` samples (`n` samples given; the earliest n - batches x
    batch_size were left out). half_width is inf, with a `note`, when there were too
    few samples."""
    estimate: float
    half_width: float
    relative_half_width: float
    batches: int
    batch_size: int
    n: int
    confidence: float
    note: str | None = None

    def record(self) -> dict:
        return {"estimate": _finite_or_none(self.estimate),
                "half_width": _finite_or_none(self.half_width),
                "relative_half_width": _finite_or_none(self.relative_half_width),
                "batches": self.batches, "batch_size": self.batch_size, "n": self.n,
                "confidence": self.confidence, "note": self.note}


def metrics_from_s(record: dict | None) -> float:
    """Where a run's single-flow metrics begin (s after the first flow's start), from its
    trace's measured.precision: the warm-up cut of a precision-driven run whose rule takes
    its metrics after it, else 0."""
    if not record:
        return 0.0
    if (record.get("rule") or {}).get("metrics", "after_warmup") != "after_warmup":
        return 0.0
    return float((record.get("warmup") or {}).get("cut_s") or 0.0)


def _finite_or_none(value: float) -> float | None:
    """JSON has no inf or NaN: a trace records them as null."""
    return float(value) if math.isfinite(value) else None


def _batched(values, batches: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The series and its non-overlapping batches (rows); the earliest remainder is left
    out, as it lies next to the warm-up cut. Fewer than 2 samples per batch: no rows."""
    if int(batches) != batches or batches < 2:
        raise ValueError(f"batches must be an integer >= 2, got {batches}")
    series = np.asarray(values, dtype=float)
    if series.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {series.shape}")
    batch_size = len(series) // batches
    if batch_size < 2:
        return series, np.empty((0, 0)), 0
    kept = series[len(series) - batch_size * batches:]
    return series, kept.reshape(batches, batch_size), batch_size


def _interval(estimate: float, spread: float, batches: int, batch_size: int, n: int,
              confidence: float) -> Interval:
    half_width = t_critical(confidence, batches - 1) * spread / math.sqrt(batches)
    relative = half_width / abs(estimate) if estimate != 0 else math.inf
    return Interval(float(estimate), float(half_width), float(relative), batches, batch_size,
                    n, confidence)


def _too_short(series: np.ndarray, estimate: float, batches: int, confidence: float) -> Interval:
    return Interval(float(estimate), math.inf, math.inf, batches, 0, len(series), confidence,
                    f"{NOT_ENOUGH_SAMPLES}: {len(series)} < 2 x {batches} batches")


def batch_means(values, batches: int = 20, confidence: float = 0.95) -> Interval:
    """The mean of `values` with a Student-t interval over non-overlapping batch means
    (Schmeiser 1982): estimate = the mean of the batch means, half-width =
    t(confidence, batches - 1) x their standard deviation / sqrt(batches). Valid when the
    batch means are nearly independent, i.e. batches longer than the correlation time.
    Fewer than 2 x batches samples: half-width inf and a note."""
    series, rows, batch_size = _batched(values, batches)
    if not batch_size:
        estimate = float(series.mean()) if len(series) else math.nan
        return _too_short(series, estimate, batches, confidence)
    means = rows.mean(axis=1)
    return _interval(means.mean(), means.std(ddof=1), batches, batch_size, len(series),
                     confidence)


def quantile_intervals(values, quantiles: Sequence[float], batches: int = 20,
                       confidence: float = 0.95) -> dict[float, Interval]:
    """For each q of `quantiles`, the q-quantile of `values` (the distribution of
    interval throughput) with an interval by batched quantiles, in the sectioning form
    (Asmussen & Glynn 2007): the estimate is the q-quantile of all batched samples, the
    half-width t(confidence, batches - 1) x s / sqrt(batches), where s is the spread of
    the batches' own q-quantiles about that estimate.

    Bias caveat: a sample quantile of m correlated samples is biased by O(1/m), so the
    batch quantiles scatter about a slightly shifted value; taking the estimate from all
    samples keeps its own bias O(1/n), but with short batches the interval is centred
    well only if that shift is small next to the half-width. Where interval throughput
    is bimodal (timeouts, a second flow) a batch's quantile may jump between modes, the
    batch quantiles are far from normal and the coverage is not to be trusted (Q25 is
    most exposed). The quantile is that of interval throughput at the receiver's
    reporting interval, not of an instantaneous rate. Quantiles use linear interpolation
    (numpy's default)."""
    levels = [float(q) for q in quantiles]
    for q in levels:
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1), got {q}")
    if not levels:
        return {}
    series, rows, batch_size = _batched(values, batches)
    if not batch_size:
        estimates = np.quantile(series, levels) if len(series) else [math.nan] * len(levels)
        return {q: _too_short(series, estimate, batches, confidence)
                for q, estimate in zip(levels, estimates)}
    estimates = np.quantile(rows, levels)                  # one sort for every level
    batch_quantiles = np.quantile(rows, levels, axis=1)    # levels x batches
    intervals = {}
    for q, estimate, per_batch in zip(levels, estimates, batch_quantiles):
        intervals[q] = _interval(estimate, _sectioning_spread(estimate, per_batch), batches, batch_size,
                                 len(series), confidence)
    return intervals


def _sectioning_spread(estimate: float, per_batch) -> float:
    """How the batches' own values scatter about the estimate of all samples."""
    values = np.asarray(per_batch, dtype=float)
    return math.sqrt(float(((values - estimate) ** 2).sum()) / (len(values) - 1))


def sectioning_half_width(estimate: float, per_batch, confidence: float = 0.95) -> float:
    """The half-width of a statistic that is no mean of the samples (a quantile, a ratio of
    means, Jain's index) by sectioning (Asmussen & Glynn 2007): the statistic of all
    samples is the estimate, each batch's own value scatters about it, and
    t(confidence, b - 1) x sqrt(sum (value - estimate)^2 / (b - 1)) / sqrt(b) is the
    half-width for b batches."""
    b = len(per_batch)
    if b < 2:
        raise ValueError(f"sectioning needs at least 2 batches, got {b}")
    return _interval(estimate, _sectioning_spread(estimate, per_batch), b, 0, b, confidence).half_width


def quantile_interval(values, q: float, batches: int = 20,
                      confidence: float = 0.95) -> Interval:
    """The q-quantile of `values` with its batched-quantile interval
    (`quantile_intervals`, which states the method and its bias caveat)."""
    return quantile_intervals(values, [q], batches, confidence)[float(q)]


@dataclass(frozen=True)
class Independence:
    """The von Neumann test of the batch means (Fishman 1978): C = 1 - (sum of squared
    successive differences) / (2 x sum of squared deviations) estimates their lag-1
    correlation; without correlation it is about normal with mean 0 and variance
    (b - 2) / (b^2 - 1). `passed` when C is below its one-sided critical value."""
    statistic: float
    critical: float
    passed: bool

    def record(self) -> dict:
        return {"statistic": _finite_or_none(self.statistic), "critical": self.critical,
                "passed": self.passed}


def batch_means_independence(values, batches: int = 20,
                             level: float = INDEPENDENCE_LEVEL) -> Independence | None:
    """The von Neumann test of the batch means of `values`; None when too short."""
    _, rows, batch_size = _batched(values, batches)
    if not batch_size:
        return None
    return means_independence(rows.mean(axis=1), level)


def means_independence(means, level: float = INDEPENDENCE_LEVEL) -> Independence:
    """The von Neumann test of batch means already formed (at least 3 of them)."""
    means = np.asarray(means, dtype=float)
    batches = len(means)
    if batches < 3:
        raise ValueError(f"the von Neumann test needs at least 3 batch means, got {batches}")
    squares = float(((means - means.mean()) ** 2).sum())
    critical = NormalDist().inv_cdf(1 - level) * math.sqrt((batches - 2) / (batches ** 2 - 1))
    if squares == 0:                              # constant batch means: nothing correlates
        return Independence(0.0, critical, True)
    statistic = 1 - float((np.diff(means) ** 2).sum()) / (2 * squares)
    return Independence(statistic, critical, statistic <= critical)


# --- the decision -----------------------------------------------------------------------

def _percent(value: float) -> str:
    return f"{value * 100:.1f} %" if math.isfinite(value) else "inf"


def _quantile_label(q: float) -> str:
    return f"Q{q * 100:g}"


@dataclass(frozen=True)
class Decision:
    """`decide`'s answer: whether to stop, why, and what the estimates are worth now.

    `precision_reached` says whether the rule was met (every interval within the
    half-width, the loss-event floor, the warm-up and independence checks); `why` is
    "precision reached", "max_s reached: precision not reached (...)", or while the run
    goes on, every reason it may not stop yet ("; "-joined), e.g. "fewer than 100 loss
    events (42); mean half-width 7.1 % > 5 %". `projected_s` is the virtual run length
    at which the widest interval would meet the rule if half-widths shrink as
    1 / sqrt(time after the cut), capped at max_s (None while no interval is finite): a
    hint for when to ask again, not a promise. `link_met` says, on a path that drops
    nothing at random, whether the flow met the link after the warm-up (None elsewhere).
    """
    stop: bool
    precision_reached: bool
    why: str
    rule: StopRule
    elapsed_s: float
    loss_events: int
    warmup_cut_index: int
    warmup_cut_s: float
    mean: Interval
    quantiles: dict[float, Interval] = field(default_factory=dict)
    independence: Independence | None = None
    projected_s: float | None = None
    link_met: bool | None = None      # None: not asked (a path that drops at random)

    def expected_stop_s(self) -> float | None:
        """When the run should stop at its pace so far: the later of `projected_s` and,
        below the loss-event floor, the time the floor is met if losses keep their rate
        so far (and min_s), at most max_s; `elapsed_s` once it stops; None while that
        cannot be told (no finite interval yet, no loss event yet below the floor, or a flow
        that has not met the link: when it will is not in its samples)."""
        if self.stop:
            return self.elapsed_s
        if self.projected_s is None or self.link_met is False:
            return None
        expected = self.projected_s
        if self.loss_events < self.rule.min_loss_events:
            if self.loss_events == 0:
                return None
            expected = max(expected, self.elapsed_s * self.rule.min_loss_events / self.loss_events)
        if self.rule.min_s is not None:
            expected = max(expected, self.rule.min_s)
        return min(expected, self.rule.max_s)

    def progress(self, offset_s: float = 0.0) -> str:
        """One line on how far a running run is from its rule, for its log: loss events
        (against the floor), the mean's and the widest interval's half-width against the
        target, and when it should stop (offset_s added to the times, to count them as
        the log does)."""
        rule = self.rule
        events = (f"{self.loss_events}/{rule.min_loss_events} loss events"
                  if self.loss_events < rule.min_loss_events else f"{self.loss_events} loss events")
        if self.link_met is False:
            events += f"; {LINK_NOT_MET}"
        named = [("mean", self.mean), *((_quantile_label(q), i) for q, i in self.quantiles.items())]
        widest_name, widest = max(named, key=lambda item: item[1].relative_half_width)
        if not math.isfinite(self.mean.half_width):
            # early in a run: "+-inf" would read as a number
            widths = f"no interval yet ({self.mean.note})"
        elif not math.isfinite(self.mean.relative_half_width):
            widths = "a mean of zero: no relative width"
        else:
            widths = f"mean +-{_percent(self.mean.relative_half_width)}"
            if not math.isfinite(widest.half_width):
                widths += f", {widest_name}: no interval yet"
            elif not math.isfinite(widest.relative_half_width):
                # a quartile of zero (timeouts in a quarter of the intervals) has an interval
                widths += f", {widest_name} of zero: no relative width"
            elif widest.relative_half_width > self.mean.relative_half_width:
                widths += f", {widest_name} +-{_percent(widest.relative_half_width)}"
        expected = self.expected_stop_s()
        if self.stop:
            when = "stopping"
        elif expected is None:
            when = "stop not yet foreseeable"
        elif expected >= rule.max_s:
            when = f"at this pace not before max_s ({rule.max_s + offset_s:.0f} s)"
        else:
            when = f"stop expected near {expected + offset_s:.0f} s"
        target = (f"target {rule.half_width * 100:g} %" if rule.mean_half_width is None else
                  f"target mean {rule.mean_half_width * 100:g} %, quantiles {rule.half_width * 100:g} %")
        return f"{events}; {widths} ({target}); {when}"

    def record(self) -> dict:
        """A JSON-serialisable summary for a trace (no inf or NaN)."""
        return {
            "rule": self.rule.settings(),
            "stopped": self.stop,
            "precision_reached": self.precision_reached,
            "why": self.why,
            "elapsed_s": self.elapsed_s,
            "loss_events": self.loss_events,
            "warmup": {"cut_index": self.warmup_cut_index, "cut_s": self.warmup_cut_s,
                       "method": "MSER-5"},
            "mean": self.mean.record(),
            "quantiles": [{"q": q, **interval.record()} for q, interval in self.quantiles.items()],
            "independence": self.independence.record() if self.independence else None,
            "projected_s": self.projected_s,
            "link_met": self.link_met,
        }


@dataclass(frozen=True)
class SteadyState:
    """A series' steady state as a rule sees it: MSER-5's cut (an index), whether it fell
    at the end of its search, the samples after it, the intervals of their mean and of the
    rule's quantiles, and (where the rule checks it) the batch means' independence."""
    cut: int
    cut_at_limit: bool
    retained: np.ndarray
    mean: Interval
    quantiles: dict[float, Interval]
    independence: Independence | None

    @property
    def settled(self) -> bool:
        """Whether the series looks steady: MSER-5's cut inside its search, and batch means
        that do not correlate (where checked). A rule holds a run back until it is."""
        return not self.cut_at_limit and (self.independence is None or self.independence.passed)


def steady_state(rule: StopRule, throughput_bps) -> SteadyState:
    """The warm-up cut and the intervals `decide` holds to the rule, over a run's samples
    so far; the analysis takes a precision-driven run's figures from the same call on the
    samples the run stopped on, so the interval it reports is the one the rule met."""
    series = np.asarray(throughput_bps, dtype=float)
    cut, cut_at_limit = _mser5(series)
    retained = series[cut:]
    return SteadyState(cut, cut_at_limit, retained, batch_means(retained, rule.batches, rule.confidence),
                       quantile_intervals(retained, rule.quantiles, rule.batches, rule.confidence),
                       batch_means_independence(retained, rule.batches) if rule.check_independence else None)


def decide(rule: StopRule, t_s, throughput_bps, loss_events: int,
           elapsed_s: float, link_met: Sequence[bool] | None = None) -> Decision:
    """Whether a run may stop now, by `rule`.

    t_s and throughput_bps are the receiver's samples so far: each reporting interval's
    end (virtual seconds) and its throughput. loss_events is the run's cumulative count
    of loss events (warm-up included), elapsed_s its virtual time so far. The warm-up is
    cut by MSER-5 and the rule's intervals are computed over the rest; warmup_cut_s is
    the end of the last sample cut (0 when none was).

    The run stops when the mean and every quantile of the rule meet its half-width, and
    not before min_loss_events and min_s; nor while MSER-5 cut at the end of its search
    range (the warm-up may not be over) or, with check_independence, while the batch
    means are correlated. At max_s it stops in any case.

    link_met, one flag per sample, is for a path that drops nothing at random: True where
    the bottleneck was full (it sent at its rate) or dropped from its queue during that
    sample's interval. There a loss-based flow's window grows until it meets the link, so
    a flow below the link with no loss since the warm-up is still on its way up, however
    flat its samples (H-TCP at 12.2 ms crept up 1 packet an RTT at 58 % of the link for
    2 virtual s after its slow start, and stopped there at +-2.9 %): the run may not stop
    before a sample after the warm-up cut has met the link. None: not asked.
    """
    times = np.asarray(t_s, dtype=float)
    series = np.asarray(throughput_bps, dtype=float)
    if times.shape != series.shape or series.ndim != 1:
        raise ValueError(f"t_s and throughput_bps must be equally long sequences, "
                         f"got shapes {times.shape} and {series.shape}")
    if not np.all(np.isfinite(series)):
        raise ValueError("throughput_bps has a value that is not finite")
    if link_met is not None and len(link_met) != len(series):
        raise ValueError(f"link_met must have one flag per sample ({len(series)}), got {len(link_met)}")
    steady = steady_state(rule, series)
    cut, cut_at_limit, mean, quantiles = steady.cut, steady.cut_at_limit, steady.mean, steady.quantiles
    cut_s = float(times[cut - 1]) if cut > 0 else 0.0
    independence = steady.independence

    named = [("mean", mean), *((_quantile_label(q), i) for q, i in quantiles.items())]
    imprecise = [f"{name} half-width {_percent(interval.relative_half_width)} > {rule.target(name) * 100:g} %"
                 for name, interval in named if interval.relative_half_width > rule.target(name)]
    if mean.note:                                 # the quantiles share the batches, and the note
        imprecise = [f"{mean.note} after the warm-up"]
    doubtful = []
    if cut_at_limit:
        doubtful.append("warm-up may not be over (MSER-5 cut at the end of its search)")
    if independence is not None and not independence.passed:
        doubtful.append(f"batch means correlated (von Neumann {independence.statistic:.2f} > "
                        f"{independence.critical:.2f})")

    # half-widths shrink about as 1 / sqrt(samples kept after the cut)
    widest = max(interval.relative_half_width / rule.target(name) for name, interval in named)
    projected = (min(rule.max_s, max(elapsed_s, cut_s + (elapsed_s - cut_s) * widest ** 2))
                 if math.isfinite(widest) else None)

    early = []
    if loss_events < rule.min_loss_events:
        early.append(f"fewer than {rule.min_loss_events} loss events ({loss_events})")
    if rule.min_s is not None and elapsed_s < rule.min_s:
        early.append(f"{elapsed_s:g} s < min_s {rule.min_s:g} s")
    met = None if link_met is None else bool(any(link_met[cut:]))
    if met is False:
        early.append(LINK_NOT_MET)

    unmet = early + imprecise + doubtful
    precision_reached = not unmet
    if precision_reached:
        stop, why = True, "precision reached"
    elif elapsed_s >= rule.max_s:
        stop, why = True, f"max_s reached: precision not reached ({'; '.join(unmet)})"
    else:
        stop, why = False, "; ".join(unmet)
    return Decision(stop=stop, precision_reached=precision_reached, why=why, rule=rule,
                    elapsed_s=float(elapsed_s), loss_events=int(loss_events),
                    warmup_cut_index=cut, warmup_cut_s=cut_s, mean=mean, quantiles=quantiles,
                    independence=independence, projected_s=projected, link_met=met)

"""The original study's findings as checks on our data (paper/claims.yaml).

Each claim names a check over a table of cells (means over repetitions of the per-run
metrics, one row per condition, each with a 95 % confidence interval). A check returns a
verdict and a short statement of what we measured, intervals included:

  holds / does not hold   the intervals are clear of the check's threshold (or of each
                          other): the same answer for every value inside them
  undecided at this budget  an interval straddles it: more repetitions (or longer runs)
                          would be needed to tell; the text says about how many
                          repetitions a cell would decide it if the means held
                          (reps_to_decide)
  not enough data         a cell the check needs is missing

A cell's interval of its mean throughput and quartiles, and of a two-flow run's Jain
index, utilisation and first flow's share, pools its runs' own intervals (batch means,
batched quantiles, sectioning: runs table `mean_hw_bps`, `q25_hw_bps`, ..., `jain_hw`,
`utilisation_hw_bps`, `share_first_hw`) where every run has one and the repetitions
agree within them (pooled_half_width); otherwise, and for every other metric, it is
Student's t over its repetitions (none, unbounded, for a cell of one run). The
repetitions of a cell with nothing random in its condition (drop 0, no background loss)
may replay one another on the emulator: they count as one run (`replays`). A mean over
several cells, and a difference, add the cells' standard errors in quadrature and read them
at Welch-Satterthwaite's degrees of freedom (their repetitions' together), not at each
cell's own. Each comparison is at 95 %, with no correction for the several cells a check
may read: a stated simplification.

Check types (``check.type``):
  at_least / at_most / above / below  every selected cell's metric vs ``threshold``
  between                             every selected cell within [lo, hi]
  best / worst                        the selected cells' top (bottom) variant is in ``expect``,
                                      per group of ``per`` keys if given
  greater                             mean of selection ``a`` > mean of selection ``b``
  close                               |mean a - mean b| / max <= ``tolerance``
  within                              per group of ``per``: (max - min) / max <= ``tolerance``

Selections (``where``, ``a``, ``b``): criterion, variant (one or a list), second, rtt_ms,
rtt_min, rtt_max, drop, drop_min, drop_max, same_variant (bool). Thresholds may be given
as ``{gbps: x, of_link_gbps: y}`` (the paper's absolute numbers, scaled to our link as x/y).

Each finding about a single flow's mean throughput is also checked on the algorithms'
response model (tcpeval.response) at the same cells and link rate: the model verdict tells
a reader whether a finding that does not hold on our runs is one no loss-based response
function supports (the model disagrees with the paper too) or one our runs should have
reproduced (the model agrees with the paper: look for an emulator or port fault).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from statistics import NormalDist

import numpy as np
import pandas as pd

from tcpeval import mathis, response, spec
from tcpeval.analysis import tables as T
from tcpeval.condition import HEADER_BYTES, MSS_BYTES, payload_ceiling_bps
from tcpeval.findings import (  # noqa: F401 (the report's API)
    ClaimError,
    load_claims,
    matches,
    needed,
    only_failure_decidable,
    selections,
)
from tcpeval.precision import t_critical
from tcpeval.report.latex import escape

HOLDS, FAILS, UNDECIDED, NODATA = "holds", "does not hold", "undecided at this budget", "not enough data"
VERDICTS = (HOLDS, FAILS, UNDECIDED, NODATA)
CONFIDENCE = 0.95
# what the response model gives, with the model's own precision (about 600 loss events a
# cell: +-3 % of the mean) as its interval
MODELED_METRICS = ("mean_gbps", "mean_frac")
MODEL_RELATIVE_HW = 0.03
METRICS = {
    "responsiveness": ["mean_gbps", "mean_frac", "q25_frac", "q50_frac", "q75_frac"],
    "fairness": ["jain", "utilisation_gbps", "utilisation_frac", "share_first"],
    "compatibility": ["jain", "utilisation_gbps", "utilisation_frac", "share_first"],
    "convergence": ["conv_time_s", "spread_gbps", "spread_frac"],
}


@dataclass
class Verdict:
    id: str
    section: str
    paper: str
    check: str
    verdict: str
    ours: str
    model: str = ""          # the same check on the response model ("" where it has no figure)
    model_text: str = ""
    model_link_limited: bool = False   # every cell the model read is at the link's payload ceiling
    # what the verdict rests on (budget): the cells and runs the finding read, their traffic
    # in virtual seconds, the kept attempts' wall time and every attempt the runner made
    cells: int = 0
    runs: int = 0
    virtual_s: float = 0.0
    wall_s: float = 0.0
    attempts: int = 0
    campaign: str = ""       # the campaign whose runs gave the verdict (lead)
    at_scale: bool = False   # that campaign ran on the paper's link
    # an undecided verdict's cells that keep it open (contested): what a next round repeats
    contested: list = field(default_factory=list)
    # the cells that keep it open but whose repetitions replay one another: no round repeats them
    replaying: list = field(default_factory=list)
    # the cells it reads that the campaign has no usable run of (never run, failed or flagged)
    absent: list = field(default_factory=list)


def _ran_s(runs: pd.DataFrame) -> pd.Series:
    """How long each run's traffic ran (virtual s): a precision-driven run's stop, else its
    condition's length (runs tabled before `ran_s` existed: the length; NaN without either)."""
    length = runs["duration_s"] if "duration_s" in runs else pd.Series(np.nan, index=runs.index)
    return runs["ran_s"].fillna(length) if "ran_s" in runs else length


def cells(ds: T.Dataset) -> pd.DataFrame:
    """Per-condition means of every per-run metric the claims may use, with the number of
    runs (``n``) and each metric's 95 % half-width (``<metric>_hw``; inf where unknown)."""
    r = ds.runs.copy()
    if r.empty:
        return pd.DataFrame(columns=["criterion", "variant", "second", "rtt_ms", "drop", "n"])
    r["mean_gbps"] = r["mean_bps"] / 1e9
    # fractions of the link's payload ceiling, as the original's "of the 9.5 Gbit/s
    # available" were (runs tabled before the ceiling was: of the link's rate in payload)
    ceiling = (r["payload_ceiling_bps"] if "payload_ceiling_bps" in r
               else r["link_rate_bps"].map(payload_ceiling_bps))
    for q in ("q25", "q50", "q75"):
        r[f"{q}_frac"] = r[f"{q}_bps"] / ceiling
    r["utilisation_gbps"] = r["utilisation_bps"] / 1e9
    r["share_first"] = r["flow1_bps"] / (r["flow1_bps"] + r["flow2_bps"])
    r["spread_gbps"] = r["spread_bps"] / 1e9
    r["spread_frac"] = r["spread_bps"] / r["ubar_bps"]
    r["virtual_s"] = _ran_s(r)
    # a run with nothing random in its condition (no drop rate, no background loss) may be
    # replayed, not repeated, by its repetitions: such a cell `replays` (docs/precision.md)
    r["random"] = (r["drop"] > 0) | (T.background_loss_of(r) > 0)
    within = r["mean_hw_bps"] if "mean_hw_bps" in r else pd.Series(np.inf, index=r.index)
    r["mean_gbps_within_hw"] = within / 1e9
    r["mean_frac_within_hw"] = within / ceiling
    for q in ("q25", "q50", "q75"):
        if f"{q}_hw_bps" in r:
            r[f"{q}_frac_within_hw"] = r[f"{q}_hw_bps"] / ceiling
    # two-flow runs' own intervals (extract._two_flow_half_widths; NaN where a run has none)
    if "utilisation_hw_bps" in r:
        r["jain_within_hw"] = r["jain_hw"]
        r["utilisation_gbps_within_hw"] = r["utilisation_hw_bps"] / 1e9
        r["utilisation_frac_within_hw"] = r["utilisation_hw_bps"] / ceiling
        r["share_first_within_hw"] = r["share_first_hw"]
    # a convergence run's own interval of its spread (extract.spread_half_width)
    if "spread_hw_bps" in r:
        r["spread_gbps_within_hw"] = r["spread_hw_bps"] / 1e9
        r["spread_frac_within_hw"] = r["spread_hw_bps"] / r["ubar_bps"]
    # convergence metrics average over converged runs only (NaN otherwise, skipped by mean)
    metric_cols = sorted({m for ms in METRICS.values() for m in ms})
    r["second"] = r["second"].fillna("")
    keys = ["criterion", "variant", "second", "rtt_ms", "drop"]
    groups = r.groupby(keys)
    out = groups[metric_cols].mean()
    out["n"] = groups.size()
    out["replays"] = ~groups["random"].any()
    out["link_gbps"] = groups["link_rate_bps"].median() / 1e9   # the link (frames) the cell ran on
    # the cell's cost (budget): traffic in virtual s, the kept attempts' wall time, attempts
    out["virtual_s"] = groups["virtual_s"].sum()
    for col in ("wall_s", "attempts"):
        out[col] = groups[col].sum() if col in r else np.nan
    replays = out["replays"].to_numpy(bool)
    for metric in metric_cols:
        n, sd = groups[metric].count(), groups[metric].std(ddof=1)
        # the degrees of freedom of the half-width's quantile: Student's over the repetitions
        df = np.maximum(n - 1, 1).astype(float)
        t = np.array([_t95(d) for d in df])
        # replays tell nothing about a population of runs: no interval from them
        hw = np.where((n >= 2) & ~replays, t * sd / np.sqrt(np.maximum(n, 1)), np.inf)
        if f"{metric}_within_hw" in r:  # the runs' own intervals, where they have them
            pooled = np.array([pooled_half_width(g[metric].to_numpy(float), g[f"{metric}_within_hw"].to_numpy(float),
                                                 replayed=bool(rep), alone=metric not in SET_BY_THE_START)
                               for (_, g), rep in zip(groups, replays)])   # in the groups' order, as n and sd
            hw = np.where(np.isfinite(pooled), pooled, hw)
            df = np.where(np.isfinite(pooled), np.inf, df)   # pooled with the normal quantile
        out[f"{metric}_hw"], out[f"{metric}_df"] = hw, df
    return out.reset_index()


def chi2_critical(confidence: float, df: int) -> float:
    """The chi-square quantile: at df = 1 exactly, the squared normal quantile; beyond,
    Wilson-Hilferty's cube-root normal approximation (5.94 for 5.99 at df = 2, closer
    as df grows)."""
    if df == 1:
        return NormalDist().inv_cdf(0.5 + confidence / 2) ** 2
    z, c = NormalDist().inv_cdf(confidence), 2.0 / (9.0 * df)
    return float(df * (1 - c + z * np.sqrt(c)) ** 3)


# Two-flow metrics of how the link is split: where slow start leaves the two flows sets
# them for the run, so one run's own interval (sectioning within it) does not hold the
# spread between runs. CUBIC beside Reno at 6.2 ms gave a share of 39.5 +- 2.7 % in one
# run where three earlier runs gave 55, 59 and 65 %. A cell needs two runs for these.
SET_BY_THE_START = frozenset({"jain", "share_first"})


def pooled_half_width(values: np.ndarray, within_hw: np.ndarray, replayed: bool = False,
                      alone: bool = True) -> float:
    """The 95 % half-width of the mean of a cell's runs from the runs' own intervals
    (batch means after each run's warm-up cut): sqrt(sum hw_i^2) / n, the mean of
    independent estimates. Only where every run has an interval and the runs agree with
    each other as their intervals say they should (Cochran's Q of the run means, weighted
    by their own variances, within its 95 % chi-square quantile): repetitions that differ
    by more than their runs' noise differ for a reason the runs' intervals do not see, and
    keep Student's t over the repetitions. A single run: its own interval, unless the
    metric's own interval cannot stand alone (``alone`` False: SET_BY_THE_START) and a
    second run would not replay it. inf otherwise
    (the caller keeps Student's t). With two repetitions t has one degree of freedom
    (12.7 standard errors at 95 %), which left most findings of the 0.2-ms slice undecided
    though each run knew its mean to +-5 %. Runs that replay one another (``replayed``:
    nothing random in their condition) are one run's worth: the widest of their own
    intervals, not narrowed by their number."""
    n = len(values)
    if n == 0 or not np.all(np.isfinite(within_hw)) or np.any(within_hw <= 0) or not np.all(np.isfinite(values)):
        return np.inf
    if n == 1:
        # where the runs replay one another there is no spread between runs to miss
        return float(within_hw[0]) if alone or replayed else np.inf
    if replayed:
        return float(np.max(within_hw))
    se = within_hw / NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    w = 1.0 / se ** 2
    centre = float(np.sum(w * values) / np.sum(w))
    q = float(np.sum(w * (values - centre) ** 2))
    if q > chi2_critical(CONFIDENCE, n - 1):
        return np.inf
    return float(np.sqrt(np.sum(within_hw ** 2)) / n)


@lru_cache(maxsize=None)
def _t95(df: float) -> float:
    """The 95 % two-sided quantile at ``df`` degrees of freedom: Student's t (a
    Satterthwaite df rounded down, the wider interval), the normal's where df is inf."""
    if not np.isfinite(df):
        return NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    return t_critical(CONFIDENCE, max(1, int(df)))


@dataclass(frozen=True)
class Estimate:
    """A value and its interval [lo, hi]: a 95 % half-width `hw` (inf when unknown), drawn
    with Student's t at `df` degrees of freedom (inf: a normal quantile, as the runs' own
    batch-means intervals are pooled), and `worst`, a certain bound on top of it (the
    metric's own range about the value, where a cell has no interval), which sums and
    differences add in full, never in quadrature."""
    value: float
    hw: float
    worst: float = 0.0
    df: float = np.inf
    # from (or partly from) cells whose repetitions replay one another: more of them
    # narrow nothing (cells: `replays`)
    replays: bool = False

    @property
    def se(self) -> float:
        return self.hw / _t95(self.df)

    @property
    def half(self) -> float:
        return self.hw + self.worst

    @property
    def lo(self) -> float:
        return self.value - self.half

    @property
    def hi(self) -> float:
        return self.value + self.half

    def __sub__(self, other: Estimate) -> Estimate:
        """The difference of two independent estimates (_combined); range bounds added in full."""
        return _combined(self.value - other.value, [(1.0, self), (-1.0, other)], self.worst + other.worst)


def _combined(value: float, parts: list[tuple[float, Estimate]], worst: float) -> Estimate:
    """sum(c_i x_i) over independent estimates x_i: standard errors in quadrature, and the t
    quantile at Welch-Satterthwaite's degrees of freedom, (sum v_i)^2 / sum(v_i^2 / df_i)
    with v_i = (c_i se_i)^2. Each cell's own quantile would stand for the whole otherwise:
    22 cells of two repetitions each were read at 12.7 standard errors (t at 1 df), where
    their 22 degrees of freedom together give 2.1. Where every part is drawn with the
    normal quantile this is the half-widths in quadrature."""
    v = [(c * e.se) ** 2 for c, e in parts]
    total = float(sum(v))
    replays = any(e.replays for _, e in parts)
    if not np.isfinite(total):
        return Estimate(value, np.inf, worst, replays=replays)
    finite = [vi ** 2 / e.df for vi, (_, e) in zip(v, parts) if np.isfinite(e.df)]
    df = total ** 2 / sum(finite) if finite and sum(finite) > 0 else np.inf
    return Estimate(value, _t95(df) * float(np.sqrt(total)), worst, df, replays)


# Metrics whose value cannot leave a range, whatever the run: Jain's index of n flows lies
# in [1/n, 1], a flow's share in [0, 1]. A cell without an interval (one repetition whose
# batches are correlated, tables.py) still lies there, which can decide a comparison of
# means over many cells (compat-worse-than-fair: 0.98 vs 0.71 with 8 of 39 runs so).
METRIC_RANGE = {"jain": lambda n_flows: (1.0 / n_flows, 1.0), "share_first": lambda n_flows: (0.0, 1.0)}


def _estimates(sel: pd.DataFrame, metric: str) -> list[Estimate]:
    hw = sel[f"{metric}_hw"] if f"{metric}_hw" in sel else pd.Series(np.inf, index=sel.index)
    dfs = sel[f"{metric}_df"] if f"{metric}_df" in sel else pd.Series(np.inf, index=sel.index)
    flows = sel["n_flows"] if "n_flows" in sel else pd.Series(2, index=sel.index)
    replays = sel["replays"] if "replays" in sel else pd.Series(False, index=sel.index)
    out = []
    for v, h, df, n, rep in zip(sel[metric], hw.fillna(np.inf), dfs.fillna(np.inf), flows.fillna(2),
                                replays.fillna(False)):
        v, h = float(v), float(h)
        if not np.isfinite(h) and metric in METRIC_RANGE:
            lo, hi = METRIC_RANGE[metric](int(n))
            out.append(Estimate(v, 0.0, worst=max(v - lo, hi - v, 0.0), replays=bool(rep)))
        else:
            out.append(Estimate(v, h, df=float(df), replays=bool(rep)))
    return out


def _mean_of(ests: list[Estimate]) -> Estimate:
    """The mean of independent estimates (_combined), the range bounds of those without an
    interval added in full (their worst case)."""
    m = len(ests)
    return _combined(sum(e.value for e in ests) / m, [(1.0 / m, e) for e in ests], sum(e.worst for e in ests) / m)


# beyond this many repetitions a cell, an undecided verdict's note calls the figures too
# close to tell apart (the 0.2-ms slice's three-way tie at 1e-5 asked for about 9,800)
REPS_PRACTICAL = 100


def reps_to_decide(gap: float, hw: float, n: int, df: float = np.inf) -> float:
    """About how many repetitions a cell would need before an interval of half-width hw
    (from n of them, drawn at df degrees of freedom) clears a distance gap, if the means and
    their spread stay where they are: the standard error shrinks as 1 / sqrt(m), and the t
    quantile with the degrees of freedom m repetitions give (df scaled by (m - 1) / (n - 1);
    df x m from one run's batches). inf when the means coincide or the interval is unknown.
    Without the quantile's shrinking two repetitions of a Jain index (H-TCP/H-TCP at 12.2 ms,
    0.978 +- 0.172 against 0.96, t at 1 df: 12.7) asked for about 187, where 7 do."""
    if not (np.isfinite(hw) and gap > 0):
        return float("inf")
    n = max(int(n), 1)

    def half_width(m: int) -> float:
        grown = df * (m - 1) / (n - 1) if n > 1 else df * m
        return hw * float(np.sqrt(n / m)) * _t95(grown) / _t95(df)
    # the quantile only shrinks: the normal-quantile count bounds the search from above
    hi = max(n + 1, int(np.ceil(n * (hw / gap) ** 2)))
    lo = n + 1
    if half_width(lo) <= gap:
        return float(lo)
    while hi - lo > 1:              # half_width(lo) > gap >= half_width(hi)
        mid = (lo + hi) // 2
        if half_width(mid) <= gap:
            hi = mid
        else:
            lo = mid
    return float(hi)


# a part whose cells include one without an interval of its own (a single two-flow run:
# its metric's whole range stands in) cannot be extrapolated: a second repetition comes first
NEEDS_AN_INTERVAL = -1.0
# a part read from cells whose repetitions replay one another: no number of them decides it
REPLAYS = -2.0


def _reps(gap: float, est: Estimate, n: int) -> float:
    """reps_to_decide on an estimate; NEEDS_AN_INTERVAL where a range stands in for part of
    its interval (+-0.5 on a Jain index of 1.000 would ask for thousands of repetitions) or
    where one run without an interval of its own leaves it unknown (a convergence time);
    REPLAYS where part of it comes from cells whose repetitions replay one another."""
    if est.replays:
        return REPLAYS
    if est.worst > 0 or (n < 2 and not np.isfinite(est.half)):   # one run, no interval of its own
        return NEEDS_AN_INTERVAL
    return reps_to_decide(gap, est.half, n, est.df)


def _reps_note(needs: list[float]) -> str:
    """What would decide an undecided check: the largest repetition count its parts need."""
    if not needs:
        return ""
    if REPLAYS in needs:
        return ("; its cells at drop 0 without background loss have nothing random in them: their "
                "repetitions replay one another, so no number of them decides it")
    if NEEDS_AN_INTERVAL in needs:
        return ("; its cells of one run without an interval of their own "
                "need a second repetition before a count can be told")
    worst = max(needs)
    if not np.isfinite(worst):
        return "; no number of repetitions decides it (a mean on the threshold, or no interval)"
    if worst > REPS_PRACTICAL:
        return (f"; over {REPS_PRACTICAL} repetitions a cell would decide it (about {worst:.0f}): "
                "its figures lie too close to tell apart at any practical budget")
    return f"; about {worst:.0f} repetitions a cell would decide it"


def _decide(passed: list[bool | None]) -> str:
    """Every part decided and passed: holds; any part decided and failed: does not hold;
    else undecided (None: that part's interval straddles the threshold)."""
    if any(p is False for p in passed):
        return FAILS
    return HOLDS if all(passed) else UNDECIDED


def _select(df: pd.DataFrame, where: dict) -> pd.DataFrame:
    """The cells in a selection (tcpeval.findings.matches: one meaning for the checks and
    for the campaign that runs the findings' cells)."""
    return _read(df, [where])


def _read(df: pd.DataFrame, wheres: list[dict]) -> pd.DataFrame:
    """The cells in any of the selections (a claim's: findings.selections)."""
    if df.empty:
        return df
    return df[[any(matches(cell, where) for where in wheres) for cell in df.to_dict("records")]]


def _threshold(t) -> float:
    if isinstance(t, dict):
        if "gbps" in t and "of_link_gbps" in t:
            return float(t["gbps"]) / float(t["of_link_gbps"])
        raise ClaimError(f"threshold {t!r}: give a number or {{gbps, of_link_gbps}}")
    return float(t)


def _fmt(metric: str, v: float, hw: float | None = None) -> str:
    """A metric's value in its unit, with its half-width (+- ..., or "+- ?" when unknown)."""
    if v is None or not np.isfinite(v):
        return "n/a"
    scale, unit, digits = 1.0, "", 3
    if metric.endswith("_frac") or metric == "share_first":
        scale, unit, digits = 100.0, "\\,\\%", 1
    elif metric.endswith("_gbps"):
        unit, digits = "\\,Gbit/s", 2
        if abs(v) < 0.995:  # a lossy cell's tens of Mbit/s would read as 0.04 +- 0.00
            scale, unit, digits = 1000.0, "\\,Mbit/s", 1
    elif metric.endswith("_s"):
        unit, digits = "\\,s", 2
    if hw is None:
        return f"{scale * v:.{digits}f}{unit}"
    pm = f"{scale * hw:.{digits}f}" if np.isfinite(hw) else "?"
    return f"{scale * v:.{digits}f}\\,$\\pm$\\,{pm}{unit}"


def _fmt_est(metric: str, e: Estimate) -> str:
    return _fmt(metric, e.value, e.half)


def _label_cell(row) -> str:
    parts = [T.pairing_label(row["variant"], row["second"] or None)]
    parts.append(f"{row['rtt_ms']:g}\\,ms")
    if row["criterion"] == "responsiveness":
        parts.append(f"drop {row['drop']:g}")
    return " ".join(parts)


def _threshold_passes(kind: str, e: Estimate, t: float, hi_t: float | None = None) -> bool | None:
    """Whether one cell's interval lies on the right side of the threshold (True), wholly
    on the wrong side (False), or straddles it (None)."""
    if kind == "between":
        return True if (e.lo >= t and e.hi <= hi_t) else False if (e.hi < t or e.lo > hi_t) else None
    if kind in ("at_least", "above"):
        ok, bad = (e.lo >= t, e.hi < t) if kind == "at_least" else (e.lo > t, e.hi <= t)
    else:
        ok, bad = (e.hi <= t, e.lo > t) if kind == "at_most" else (e.hi < t, e.lo >= t)
    return True if ok else False if bad else None


def _ranked(kind: str, group: pd.DataFrame, metric: str, expect: list[str]) -> bool | None:
    """best (worst): an expected variant's interval is above (below) every other's: True;
    another's is above (below) every expected one's: False; else None."""
    ests = dict(zip(group["variant"], _estimates(group, metric)))
    ours = [e for v, e in ests.items() if v in expect]
    others = [e for v, e in ests.items() if v not in expect]
    if not others:
        return True
    if kind == "best":
        if max(e.lo for e in ours) > max(e.hi for e in others):
            return True
        return False if max(e.lo for e in others) > max(e.hi for e in ours) else None
    if min(e.hi for e in ours) < min(e.lo for e in others):
        return True
    return False if min(e.hi for e in others) < min(e.lo for e in ours) else None


def _groups(check: dict, sel: pd.DataFrame) -> list[pd.DataFrame]:
    """The selected cells per group of the check's ``per`` keys (one group without them)."""
    per = check.get("per", [])
    return [g for _, g in sel.groupby(per)] if per else ([sel] if len(sel) else [])


def _ranking_groups(check: dict, sel: pd.DataFrame, expect: list[str]) -> list[pd.DataFrame]:
    """The groups a best/worst check ranks: those with ``min_variants`` variants, one of
    them expected."""
    need = int(check.get("min_variants", 2))
    return [g for g in _groups(check, sel) if g["variant"].nunique() >= need and g["variant"].isin(expect).any()]


def _spread_passes(ests: list[Estimate], tol: float) -> bool | None:
    """A within check's group: its intervals' widest spread within ``tol`` of the top mean
    (True), their narrowest beyond it (False), else None; a group whose top is 0 passes."""
    top = max(e.value for e in ests)
    if top <= 0:
        return True
    gap_hi = (max(e.hi for e in ests) - min(e.lo for e in ests)) / top
    gap_lo = max(0.0, max(e.lo for e in ests) - min(e.hi for e in ests)) / top
    return True if gap_hi <= tol else False if gap_lo > tol else None


def _within_group_text(check: dict, g: pd.DataFrame, ests: list[Estimate], gap_rel: float,
                       passed: bool | None) -> str:
    """One group of a within check: its `per` values, its gap and where it stands, and the
    cells without an interval that keep an open group open."""
    first = g.iloc[0]
    label = " ".join(f"{first[k]:g}\\,ms" if k == "rtt_ms" else f"{k} {first[k]}" for k in check.get("per", []))
    state = "within" if passed else "beyond" if passed is False else "open"
    text = f"{label + ': ' if label else ''}{100 * gap_rel:.1f}\\,\\% {state}"
    blind = [str(T.pairing_label(r["variant"], r["second"] or None))
             for (_, r), e in zip(g.iterrows(), ests) if not math.isfinite(e.hw)]
    if passed is None and blind:
        text += f", {', '.join(blind)} without an interval"
    return text


def evaluate(claim: dict, df: pd.DataFrame, reps_note: bool = True) -> tuple[str, str]:
    """(verdict, what the cells show); an undecided verdict's text says how many
    repetitions would decide it unless ``reps_note`` is off (the model has no repetitions)."""
    check = claim["check"]
    kind = check["type"]
    metric = check.get("metric")
    if metric is None:
        raise ClaimError(f"claim {claim['id']}: check needs a metric")
    base = dict(check.get("where", {}))
    min_cells = int(check.get("min_cells", 1))

    if kind in ("at_least", "at_most", "above", "below", "between"):
        sel = _select(df, base).dropna(subset=[metric])
        if len(sel) < min_cells:
            return NODATA, f"{len(sel)} of {min_cells} required cells present"
        ests = _estimates(sel, metric)
        if kind == "between":
            lo, hi = _threshold(check["lo"]), _threshold(check["hi"])
            passed = [_threshold_passes(kind, e, lo, hi) for e in ests]
        else:
            t = _threshold(check["threshold"])
            passed = [_threshold_passes(kind, e, t) for e in ests]
        vals = np.array([e.value for e in ests])
        needs = [_reps(min(abs(e.value - t) for t in ((lo, hi) if kind == "between" else (t,))), e, int(n))
                 for e, n, p in zip(ests, sel["n"], passed) if p is None]
        worst = int(np.argmin(vals)) if kind in ("at_least", "above", "between") else int(np.argmax(vals))
        text = f"{len(ests)} cell(s), " + (_fmt_est(metric, ests[0]) if len(ests) == 1 else
                                          f"{_fmt(metric, vals.min())} to {_fmt(metric, vals.max())}; "
                                          f"nearest {_label_cell(sel.iloc[worst])}: {_fmt_est(metric, ests[worst])}")
        failed, open_ = sum(p is False for p in passed), sum(p is None for p in passed)
        if failed:
            text += f"; {failed} fail"
        if open_:
            text += f"; {open_} undecided"
        verdict = _decide(passed)
        return verdict, text + (_reps_note(needs) if verdict == UNDECIDED and reps_note else "")

    if kind in ("best", "worst"):
        expect = check["expect"] if isinstance(check["expect"], list) else [check["expect"]]
        sel = _select(df, base).dropna(subset=[metric])
        per = check.get("per", [])
        need = int(check.get("min_variants", 2))
        results, texts, needs = [], [], []
        for g in _ranking_groups(check, sel, expect):
            pos = int(np.argmax(g[metric].to_numpy()) if kind == "best" else np.argmin(g[metric].to_numpy()))
            top, top_est = g.iloc[pos], _estimates(g, metric)[pos]
            results.append(_ranked(kind, g, metric, expect))
            if results[-1] is None and len(g) > 1:      # the top two decide it
                order = np.argsort(g[metric].to_numpy())
                first, second = (order[-1], order[-2]) if kind == "best" else (order[0], order[1])
                ests = _estimates(g, metric)
                gap = ests[first] - ests[second]
                needs.append(_reps(abs(gap.value), gap, int(min(g["n"].iloc[first], g["n"].iloc[second]))))
            where = f" at {top['rtt_ms']:g}\\,ms" if "rtt_ms" in per else ""
            texts.append(f"{kind}{where}: {T.label(top['variant'])} ({_fmt_est(metric, top_est)}"
                         f" of {g['variant'].nunique()} variants)")
        if not results:
            return NODATA, f"fewer than {need} variants (with {'/'.join(T.label(e) for e in expect)}) present"
        verdict = _decide(results)
        return verdict, "; ".join(texts) + (_reps_note(needs) if verdict == UNDECIDED and reps_note else "")

    if kind in ("greater", "close"):
        a = _select(df, {**base, **check["a"]}).dropna(subset=[metric])
        b = _select(df, {**base, **check["b"]}).dropna(subset=[metric])
        if len(a) < min_cells or len(b) < min_cells:
            return NODATA, f"cells present: {len(a)} and {len(b)}"
        ea, eb = _mean_of(_estimates(a, metric)), _mean_of(_estimates(b, metric))
        diff = ea - eb
        text = f"{_fmt_est(metric, ea)} vs {_fmt_est(metric, eb)}"
        n = int(min(a["n"].min(), b["n"].min()))
        if kind == "greater":
            verdict = _decide([True if diff.lo > 0 else False if diff.hi <= 0 else None])
            return verdict, text + (_reps_note([_reps(abs(diff.value), diff, n)])
                                    if verdict == UNDECIDED and reps_note else "")
        scale = max(abs(ea.value), abs(eb.value))
        tol = float(check["tolerance"])
        if scale == 0:
            return HOLDS, f"{text} (0.0\\,\\% apart)"
        gap_lo, gap_hi = max(0.0, abs(diff.value) - diff.half) / scale, (abs(diff.value) + diff.half) / scale
        passed = True if gap_hi <= tol else False if gap_lo > tol else None
        note = _reps_note([_reps(abs(abs(diff.value) - tol * scale), diff, n)]) if passed is None and reps_note else ""
        return _decide([passed]), f"{text} ({100 * abs(diff.value) / scale:.1f}\\,\\% apart){note}"

    if kind == "within":
        sel = _select(df, base).dropna(subset=[metric])
        tol = float(check["tolerance"])
        groups = [g for g in _groups(check, sel) if g["variant"].nunique() >= int(check.get("min_variants", 2))]
        if not groups:
            return NODATA, "fewer than two variants per group"
        worst_rel, passed, needs, shown = 0.0, [], [], []
        for g in groups:
            ests = _estimates(g, metric)
            top = max(e.value for e in ests)
            gap = top - min(e.value for e in ests)
            if top > 0:
                worst_rel = max(worst_rel, gap / top)
            passed.append(_spread_passes(ests, tol))
            if passed[-1] is None:
                # the spread test puts two intervals on the gap: each must shrink to half
                # of what lies between the gap and the tolerance
                needs += [_reps(abs(tol * top - gap) / 2, e, int(n)) for e, n in zip(ests, g["n"])]
            shown.append(_within_group_text(check, g, ests, gap / top if top > 0 else 0.0, passed[-1]))
        verdict = _decide(passed)
        note = _reps_note(needs) if verdict == UNDECIDED and reps_note else ""
        return verdict, (f"{len(groups)} group(s); largest gap {100 * worst_rel:.1f}\\,\\%"
                         + (f" ({'; '.join(shown)})" if len(groups) > 1 or passed[0] is None else "") + note)
    raise ClaimError(f"claim {claim['id']}: unknown check type {kind!r}")


def contested(claim: dict, df: pd.DataFrame) -> list[dict]:
    """The cells that keep a check undecided (each as findings.matches selects it): the
    cells whose interval straddles the threshold (threshold checks), the contenders for
    the top (bottom) place -- every cell whose interval reaches past the leader's far end --
    of a group still open (best, worst), both sides of a comparison (greater, close), every
    cell of a group still open (within). Another repetition of any other cell leaves the
    verdict where it is; a cell that is clear of the threshold, or clearly out of the
    running, gets none (issue 25: "more where the compared quantities are close"), nor
    does a cell whose repetitions replay one another (cells: `replays`)."""
    return held_open(claim, df)[0]


def held_open(claim: dict, df: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """The cells that keep a check undecided (_contested), split: those another repetition
    can move (contested), and those whose repetitions replay one another (no round repeats
    them); each without its `replays` flag."""
    held = [(c["replays"], {k: v for k, v in c.items() if k != "replays"}) for c in _contested(claim, df)]
    return [c for replays, c in held if not replays], [c for replays, c in held if replays]


def _records(sel: pd.DataFrame) -> list[dict]:
    return [{"criterion": str(r["criterion"]), "variant": str(r["variant"]), "second": str(r["second"] or ""),
             "rtt_ms": float(r["rtt_ms"]), "drop": float(r["drop"]), "replays": bool(r.get("replays", False))}
            for r in sel.to_dict("records")]


def _contested(claim: dict, df: pd.DataFrame) -> list[dict]:
    check = claim["check"]
    kind, metric = check["type"], check.get("metric")
    base = dict(check.get("where", {}))
    if kind in ("at_least", "at_most", "above", "below", "between"):
        sel = _select(df, base).dropna(subset=[metric])
        lo = _threshold(check["lo"] if kind == "between" else check["threshold"])
        hi = _threshold(check["hi"]) if kind == "between" else None
        return [c for c, e in zip(_records(sel), _estimates(sel, metric)) if _threshold_passes(kind, e, lo, hi) is None]
    if kind in ("best", "worst"):
        expect = check["expect"] if isinstance(check["expect"], list) else [check["expect"]]
        sel = _select(df, base).dropna(subset=[metric])
        out = []
        for g in _ranking_groups(check, sel, expect):
            if _ranked(kind, g, metric, expect) is not None:
                continue
            ests = _estimates(g, metric)
            if kind == "best":
                bar = max(e.lo for e in ests)
                out += [c for c, e in zip(_records(g), ests) if e.hi >= bar]
            else:
                bar = min(e.hi for e in ests)
                out += [c for c, e in zip(_records(g), ests) if e.lo <= bar]
        return out
    if kind in ("greater", "close"):
        return [c for part in ("a", "b") for c in _records(_select(df, {**base, **check[part]}).dropna(subset=[metric]))]
    if kind == "within":
        sel = _select(df, base).dropna(subset=[metric])
        tol = float(check["tolerance"])
        return [c for g in _groups(check, sel) if g["variant"].nunique() >= int(check.get("min_variants", 2))
                and _spread_passes(_estimates(g, metric), tol) is None for c in _records(g)]
    raise ClaimError(f"claim {claim['id']}: unknown check type {kind!r}")


def model_cells(df: pd.DataFrame, claims: list[dict]) -> pd.DataFrame:
    """The single-flow cells of ``df`` that a claim on a modeled metric reads, with their
    mean throughput as the response model gives it at each cell's RTT, drop rate and link
    rate (tcpeval.response), its interval the model's own precision; every other metric
    absent."""
    wanted = [sel for c in claims if c["check"].get("metric") in MODELED_METRICS for sel in selections(c)]
    if not len(df) or "link_gbps" not in df or not wanted:
        return pd.DataFrame(columns=["criterion", "variant", "second", "rtt_ms", "drop", "n", "link_limited",
                                     *MODELED_METRICS, *(f"{m}_hw" for m in MODELED_METRICS)])
    read = _read(df, wanted)
    single = read[(read["second"].fillna("") == "") & read["link_gbps"].notna()]
    keep = ["criterion", "variant", "second", "rtt_ms", "drop", "n"]
    out = single[[k for k in keep if k in single]].copy()
    link_gbps = single["link_gbps"]
    modeled = []
    for (_, cell), link in zip(single.iterrows(), link_gbps):
        try:
            r = response.response(str(cell["variant"]), float(cell["rtt_ms"]), float(cell["drop"]),
                                  float(link) * 1e9)
            rate, limited = r.throughput_bps / 1e9, r.link_limited
        except ValueError:                      # a variant the model does not know
            rate, limited = np.nan, False
        modeled.append((rate, rate / payload_ceiling_bps(link), limited))
    out["mean_gbps"] = [m[0] for m in modeled]
    out["mean_frac"] = [m[1] for m in modeled]
    out["link_limited"] = [m[2] for m in modeled]
    # without loss, or where no loss in its whole horizon brought the window down, the
    # model gives the payload ceiling itself: exact
    exact = (out["drop"] <= 0) | (out["mean_frac"] >= 1 - 1e-9)
    for metric in MODELED_METRICS:
        out[f"{metric}_hw"] = np.where(exact, 0.0, out[metric] * MODEL_RELATIVE_HW)
    return out.dropna(subset=["mean_gbps"])


def grid_cells(conditions, default_link_gbps: float) -> pd.DataFrame:
    """The single-flow cells of a campaign's conditions (no runs needed), each on its own
    link rate (default_link_gbps where a condition leaves it to the backend): what
    `model_cells` needs to give the model's verdicts at a campaign's grid."""
    rows = {(c.criterion, c.flows[0].variant, float(c.rtt_ms), float(c.drop),
             c.rate_bps / 1e9 if c.rate_bps else default_link_gbps)
            for c in conditions if len(c.flows) == 1}
    return pd.DataFrame([dict(criterion=cr, variant=v, second="", rtt_ms=r, drop=d, n=1, link_gbps=link)
                         for cr, v, r, d, link in sorted(rows)])


def model_verdicts(claims: list[dict], grid: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(claim id, the model's verdict, its figures) of each claim on a modeled metric, at
    the cells of ``grid`` (grid_cells)."""
    model_df = model_cells(grid, claims)
    return [(c["id"], *evaluate(c, model_df, reps_note=False)) for c in claims
            if c["check"].get("metric") in MODELED_METRICS]


def budget(claim: dict, df: pd.DataFrame) -> dict:
    """What a finding read in a campaign: its cells, their runs, virtual seconds of traffic,
    wall seconds of the kept attempts and attempts made (cells' columns from ``cells``)."""
    read = _read(df, selections(claim))

    def total(col):
        return float(read[col].sum()) if col in read else 0.0
    return dict(cells=len(read), runs=int(total("n")), virtual_s=total("virtual_s"), wall_s=total("wall_s"),
                attempts=int(total("attempts")))


# The two-flow metrics whose value depends on the run's horizon: an index, a share, a sum
# or a spread averaged over whatever part of the flows' sawtooth cycles the run saw.
HORIZON_METRICS = frozenset({"jain", "share_first", "utilisation_gbps", "utilisation_frac", "spread_gbps",
                             "spread_frac", "conv_time_s"})
PAPER_RUN_S = 900          # the original's runs: 15 min (its Sec. III-B)
# Below this many cycles of the slowest pair's sawtooth a run's index is of its horizon,
# not of the algorithms: the label says so.
HORIZON_MIN_CYCLES = 10


def horizon_note(claim: dict, df: pd.DataFrame) -> str:
    """Where a two-flow finding reads runs shorter than HORIZON_MIN_CYCLES of a Reno pair's
    sawtooth at its longest RTT read: what its runs' horizon holds of that cycle, and what
    the original's 15 min did. "" for other findings, or runs long enough."""
    if claim["check"].get("metric") not in HORIZON_METRICS or not len(df):
        return ""
    read = _read(df, selections(claim))
    read = read[(read["second"].fillna("") != "") & (read["n"] > 0)]
    if not len(read):
        return ""
    cycles = [(float(r["virtual_s"]) / float(r["n"]), mathis.reno_pair_cycle_s(float(r["rtt_ms"]), float(r["link_gbps"]) * 1e9),
               float(r["rtt_ms"])) for _, r in read.iterrows() if np.isfinite(r["virtual_s"]) and r["link_gbps"] > 0]
    if not cycles:
        return ""
    run_s, cycle_s, rtt = min(cycles, key=lambda c: c[0] / c[1])
    if run_s >= HORIZON_MIN_CYCLES * cycle_s:
        return ""
    return (f"; over a horizon shorter than the original's: a {run_s:.0f}-s run holds {run_s / cycle_s:.2g} of "
            f"a Reno pair's {_duration(cycle_s)} sawtooth cycle at {rtt:g}\\,ms (15\\,min: {PAPER_RUN_S / cycle_s:.2g})")


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f}-min" if seconds >= 120 else f"{seconds:.2g}-s"


def check_all(claims: list[dict], ds: T.Dataset, not_run: list[dict] = ()) -> list[Verdict]:
    """Each claim's verdict on the dataset's cells. A claim that reads a cell the campaign
    planned but did not run (``not_run``: tcpeval.spec.not_run) is undecided at this
    budget, and names what the missing ones need -- unless it does not hold on the cells it
    has and no further cell could make it hold (only_failure_decidable). A claim about
    single-flow mean throughput also gets the model's verdict on the same cells."""
    df = cells(ds)
    model_df = model_cells(df, claims) if len(df) else None
    absent = absent_cells(ds)
    out = []
    for c in claims:
        verdict, ours = evaluate(c, df) if len(df) else (NODATA, "no runs")
        missing = [cell for cell in not_run if needed(cell, [c])]
        if missing:
            need = max(cell["needed_s"] for cell in missing) / 60
            unrun = (f"{len(missing)} cell(s) not run at this budget (up to {need:.0f}\\,min each needed, "
                     f"{missing[0]['max_s'] / 60:.0f}\\,min allowed)")
            if verdict == FAILS and only_failure_decidable(c):
                ours = f"{ours}; {unrun}, which cannot make it hold"
            else:
                verdict, ours = UNDECIDED, unrun + (f"; {ours}" if verdict != NODATA else "")
        model, model_text, limited = "", "", False
        if model_df is not None and c["check"].get("metric") in MODELED_METRICS:
            model, model_text = evaluate(c, model_df, reps_note=False)
            read = _read(model_df, selections(c))
            limited = bool(len(read)) and bool(read["link_limited"].all())
        # a claim missing a cell is open to a failure alone: the cells that could show one
        decidable = not missing or only_failure_decidable(c)
        open_cells, replaying = held_open(c, df) if verdict == UNDECIDED and decidable and len(df) else ([], [])
        lacking = [cell for cell in absent if needed(cell, [c])]
        if lacking and verdict != NODATA:
            verdict, ours = _without(c, verdict, ours, lacking)
        if verdict != NODATA:
            ours += horizon_note(c, df)
        out.append(Verdict(c["id"], str(c["section"]), c["paper"], c.get("encoding", ""), verdict, ours,
                           model, model_text, limited, **budget(c, df), contested=open_cells,
                           replaying=replaying, absent=lacking))
    return out


def _without(claim: dict, verdict: str, ours: str, lacking: list[dict]) -> tuple[str, str]:
    """A decided verdict on some of a claim's cells, the others without a usable run: it
    stands if they cannot change it, else it is undecided and says which are lacking."""
    if verdict == FAILS and only_failure_decidable(claim):
        return verdict, ours
    names = ", ".join(_label_cell(cell) for cell in lacking[:3]) + (", ..." if len(lacking) > 3 else "")
    return UNDECIDED, (f"{ours}; {len(lacking)} cell(s) it reads have no usable run "
                       f"(not run, or failed or flagged in every attempt): {names}")


def absent_cells(ds: T.Dataset) -> list[dict]:
    """The campaign's cells (its expected runs, every repetition) with no usable run (of
    this campaign or, pooled, of another slice of the same findings campaign)."""
    exp = ds.expected
    if exp is None or exp.empty:
        return []
    have = set(T.cell_keys(ds.runs)) if len(ds.runs) else set()
    return [dict(zip(T.CELL_KEYS, key)) for key in dict.fromkeys(T.cell_keys(exp)) if key not in have]


OPEN = (UNDECIDED, NODATA)


def next_round(claims: list[dict], verdicts: list[Verdict], runs: list, done, not_run: list[dict] = ()) -> list:
    """A sequential campaign's next round (`tcpeval next-runs`): for each cell that keeps
    a finding open on the runs so far -- an undecided finding's contested cells (its
    Verdict's ``contested``; all of its cells where none are named), every cell of one
    without enough data -- the lowest repetition of the campaign's runs (``runs``,
    Conditions) not yet done (``done(run)``: its trace exists). A cell that only decided
    findings read gets none, nor does a cell whose interval already decides its part, nor
    a finding that reads a cell the campaign plans but does not run (``not_run``), unless
    it can still be found not to hold (only_failure_decidable): then its contested cells
    get theirs, the cells that could show the failure, and its cells not yet started their
    first. A finding without enough data gets the first repetition of the cells it lacks,
    not another of a cell that ran and was flagged (each run has tried its attempts
    already: the 1e-2 cells of the 0.2-ms slice were flagged in every repetition). Empty
    when every such cell's repetitions are done.
    In order of the findings that need the fewest runs not listed before (fewest_first):
    under a deadline (`make findings FINDINGS_HOURS=H` runs the round in this order) a
    finding one run from decided does not wait behind one that needs thirty-two."""
    asks = []   # per open finding: (selections whose cells it repeats, those it starts)
    for c, v in zip(claims, verdicts):
        blocked = any(needed(cell, [c]) for cell in not_run)
        if v.verdict not in OPEN or (blocked and not only_failure_decidable(c)):
            continue
        if v.verdict == NODATA or (v.absent and not v.contested):
            # lacking cells, the ones present decided: a first run of those never started
            asks.append(([], selections(c)))
        elif blocked:
            # open to a failure alone: the cells that could still show one, none else
            asks.append((v.contested, []))
        else:
            # all its cells where none is named, but none where those that hold it open
            # replay one another (drop 0: a second run of one asks the same question again)
            asks.append((v.contested or ([] if v.replaying else selections(c)), []))
    started, lowest = set(), {}   # cells with a run done; each cell's lowest repetition not done
    for run in runs:
        cell = spec.cell_of(run)
        key = tuple(sorted(cell.items()))
        if done(run):
            started.add(key)
        elif key not in lowest or run.rep < lowest[key][1].rep:
            lowest[key] = (cell, run)
    return fewest_first([{key: run for key, (cell, run) in lowest.items()
                          if any(matches(cell, where) for where in repeat)
                          or (key not in started and any(matches(cell, where) for where in first))}
                         for repeat, first in asks])


def fewest_first(per_finding: list[dict]) -> list:
    """The runs of every finding's {cell: run}, a finding at a time: next the one that needs
    the fewest runs not yet listed (ties: the earlier finding), its runs in its own order;
    a cell two findings read once."""
    out: dict = {}
    left = [asked for asked in per_finding if asked]
    while left:
        i = min(range(len(left)), key=lambda j: len(left[j].keys() - out.keys()))
        for key, run in left.pop(i).items():
            out.setdefault(key, run)
    return list(out.values())


def lead(columns: dict[str, list[Verdict]], built: str, at_scale: list[str]) -> list[Verdict]:
    """The verdict the manuscript leads with, per finding: that of the first campaign at the
    paper's scale (``at_scale``, in order: the findings campaigns first) that has the
    finding's cells, else that of the campaign it is built from (``built``); each names
    its campaign."""
    out = []
    for i in range(len(columns[built])):
        pick = next((name for name in at_scale if columns[name][i].verdict != NODATA), built)
        out.append(replace(columns[pick][i], campaign=pick, at_scale=pick in at_scale))
    return out


def lead_note(verdicts: list[Verdict], built: str) -> str:
    """The sentence above the reproduction table when some verdicts come from campaigns at
    the paper's scale other than the one the manuscript is built from (empty otherwise)."""
    others = [v for v in verdicts if v.campaign and v.campaign != built]
    if not others:
        return ""
    names = ", ".join(f"\\texttt{{{escape(n)}}}" for n in dict.fromkeys(v.campaign for v in others))
    return (f"\\textbf{{Led by the paper's scale:}} {len(others)} of {len(verdicts)} findings are judged on "
            f"{names}, run at the paper's link rate (the campaign is named in the row, and its scale is "
            f"given below); the others on this manuscript's campaign, \\texttt{{{escape(built)}}}. ")


def plain(text: str) -> str:
    """A verdict's text as a terminal shows it: without the LaTeX of the table."""
    for tex, txt in (("\\,$\\pm$\\,", " +- "), ("\\,", " "), ("\\%", "%"), ("$\\pm$", "+-")):
        text = text.replace(tex, txt)
    return text


def budget_table(verdicts: list[Verdict]) -> str:
    """Plain text, one line per finding: its verdict's campaign, cells, runs, virtual and wall
    time, attempts, verdict and what the runs show (the log of `tcpeval claims`)."""
    lines = [f"{'finding':34s} {'campaign':20s} {'cells':>5s} {'runs':>4s} {'virtual s':>9s} {'wall h':>6s} "
             f"{'tries':>5s}  verdict: our data"]
    for v in verdicts:
        lines.append(f"{v.id:34s} {v.campaign or '-':20s} {v.cells:5d} {v.runs:4d} {v.virtual_s:9.0f} "
                     f"{v.wall_s / 3600:6.2f} {v.attempts:5d}  {v.verdict}: {plain(v.ours)}")
    return "\n".join(lines) + "\n"


def paper_link_gbps(claims: list[dict]) -> float | None:
    """The link rate the paper's absolute figures refer to (their thresholds' of_link_gbps):
    a payload ceiling, its NICs' most without jumbo frames."""
    rates = {float(t["of_link_gbps"]) for c in claims for key in ("threshold", "lo", "hi")
             if isinstance(t := c["check"].get(key), dict) and "of_link_gbps" in t}
    return rates.pop() if len(rates) == 1 else None


# A campaign is at the paper's scale when its links' payload ceilings are the paper's to
# this share (the paper's figure is rounded to 0.1 Gbit/s; 10 GbE less preamble, gap and
# headers carries 9.49)
PAPER_SCALE_TOLERANCE = 0.005


def _link_rates_gbps(ds: T.Dataset) -> list[float]:
    return sorted({round(float(r) / 1e9, 3) for r in ds.runs.get("link_rate_bps", pd.Series(dtype=float)).dropna()})


def at_paper_scale(ds: T.Dataset, claims: list[dict]) -> bool:
    """Whether every run of the dataset had the paper's link: a payload ceiling equal to
    the one the paper's absolute figures refer to."""
    paper, ours = paper_link_gbps(claims), _link_rates_gbps(ds)
    return (paper is not None and bool(ours) and
            all(abs(payload_ceiling_bps(r) - paper) <= PAPER_SCALE_TOLERANCE * paper for r in ours))


def scale_note(ds: T.Dataset, claims: list[dict]) -> str:
    """Whether the campaign ran at the paper's link rate: its verdicts are at the paper's
    scale only then; elsewhere the paper's absolute rates are compared as fractions of our
    link's payload ceiling, which the table says above it."""
    paper, ours = paper_link_gbps(claims), _link_rates_gbps(ds)
    if not ours or paper is None:
        return ""
    rates = ", ".join(f"{r:g}" for r in ours)
    ceilings = ", ".join(f"{payload_ceiling_bps(r):.2f}" for r in ours)
    if at_paper_scale(ds, claims):
        return (f"At the paper's scale: every run of this campaign had the paper's link, {rates}\\,Gbit/s "
                f"of frames, whose payload ceiling ({ceilings}\\,Gbit/s) is the paper's "
                f"{paper:g}\\,Gbit/s (time-dilated where the host carries less), and its absolute "
                "figures are compared as they are.\\par\n")
    return (f"\\textbf{{Not the paper's scale:}} this campaign's link ran at {rates}\\,Gbit/s "
            f"({ceilings}\\,Gbit/s of payload), not the paper's {paper:g}\\,Gbit/s of payload; the "
            "paper's absolute rates are compared as fractions of the payload ceiling, and a "
            "window-dependent finding need not carry over.\\par\n")


def table(verdicts: list[Verdict], note: str = "", built: str = "") -> str:
    """The reproduction table: claim, our encoding of it, verdict, what we measured, the
    response model's verdict; ``note`` (scale_note) above it, the deviations (deviations)
    below. A verdict from another campaign than ``built`` (lead) names it in its row."""
    mark = {HOLDS: r"\textsf{holds}", FAILS: r"\textbf{does not hold}", UNDECIDED: r"\textit{undecided}",
            NODATA: r"\textit{not enough data}"}
    short = {HOLDS: r"\textsf{holds}", FAILS: r"\textbf{no}", UNDECIDED: r"\textit{undecided}",
             NODATA: r"\textit{n/a}", "": "--"}   # the narrow model column
    lines = [r"\begin{longtable}{@{}p{0.05\linewidth}p{0.31\linewidth}p{0.13\linewidth}p{0.31\linewidth}"
             r"p{0.12\linewidth}@{}}",
             r"\toprule", r"Sec. & Published finding (paraphrased) & Verdict & Our data & Response model \\",
             r"\midrule", r"\endhead", r"\bottomrule", r"\endfoot"]
    for v in verdicts:
        finding = escape(v.paper) + (f" \\emph{{Check: {escape(v.check)}}}" if v.check else "")
        source = (f"\\texttt{{{escape(v.campaign)}}}{'$^*$' if v.at_scale else ''}: "
                  if v.campaign and v.campaign != built else "")
        lines.append(f"{escape(v.section)} & {finding} & {mark[v.verdict]} & {source}{v.ours} & {short[v.model]} \\\\")
    lines.append(r"\end{longtable}")
    return lead_note(verdicts, built) + note + "\n".join(lines) + "\n" + deviations(verdicts)


def deviation_reading(v: Verdict) -> str:
    """What a finding that does not hold on our runs means, given the model's verdict."""
    if v.model == FAILS and v.model_link_limited:
        mss, frame = MSS_BYTES, MSS_BYTES + HEADER_BYTES
        return (f"at these cells the model gives the link's payload ceiling and no more ({mss} "
                f"payload bytes of every {frame} on the wire): the finding as encoded asks for "
                "more than the link carries, whatever the algorithm")
    if v.model == FAILS:
        return ("the response model does not support the published finding either: no "
                "loss-based response of these algorithms gives it at this condition")
    if v.model == HOLDS:
        return ("the response model supports the published finding: our runs should have "
                "reproduced it, so the emulator or the port is suspect here")
    if v.model == UNDECIDED:
        return (f"the response model cannot separate the compared figures (within its "
                f"{100 * MODEL_RELATIVE_HW:g}\\,\\% precision)")
    return "the response model has no figure for this metric"


def deviations(verdicts: list[Verdict]) -> str:
    """One paragraph per finding that does not hold: the model's figures at the same cells
    and what they say about the deviation (empty when every finding holds or is open)."""
    failed = [v for v in verdicts if v.verdict == FAILS]
    if not failed:
        return ""
    items = [f"\\item \\texttt{{{escape(v.id)}}}: ours {v.ours}; the model {v.model_text or 'n/a'}. "
             f"Reading: {deviation_reading(v)}." for v in failed]
    return ("\\paragraph{Deviations against the algorithms' response model.} For each finding that "
            "does not hold on our runs, the same check on the response model of the six Linux~3.16 "
            "algorithms (one flow, random loss, the same RTT, drop rate and link; "
            "\\texttt{tcpeval.response}):\n\\begin{itemize}\n" + "\n".join(items) + "\n\\end{itemize}\n")


@dataclass(frozen=True)
class Scale:
    """What a campaign's verdicts rest on: its link rate(s), time-dilation factors, how
    long its runs' traffic ran (virtual s) and how many repetitions its cells have."""
    runs: int
    link_gbps: tuple[float, ...]
    dilation: tuple[int, int]
    ran_s: tuple[float, float]
    repetitions: tuple[int, int]
    stopped_early: int

    def cells(self) -> list[str]:
        def span(lo, hi, fmt="{:g}"):
            return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}--{fmt.format(hi)}"
        return [", ".join(f"{r:g}" for r in self.link_gbps), span(*self.dilation),
                span(*self.ran_s, "{:.0f}") + (f" ({self.stopped_early} stopped early)" if self.stopped_early else ""),
                span(*self.repetitions), str(self.runs)]


def campaign_scale(ds: T.Dataset) -> Scale | None:
    """The scale of a campaign's results (None without runs)."""
    r = ds.runs
    if r.empty:
        return None
    ran = _ran_s(r)
    dilation = r["dilation"].fillna(1).astype(int) if "dilation" in r else pd.Series(1, index=r.index)
    reps = r.fillna({"second": ""}).groupby(["criterion", "variant", "second", "rtt_ms", "drop"]).size()
    early = int(r["stopped_early"].fillna(False).astype(bool).sum()) if "stopped_early" in r else 0
    return Scale(len(r), tuple(_link_rates_gbps(ds)), (int(dilation.min()), int(dilation.max())),
                 (float(ran.min()), float(ran.max())), (int(reps.min()), int(reps.max())), early)


def by_campaign(columns: dict[str, list[Verdict]], absent: list[str], at_scale: list[str] = (),
                scales: dict[str, Scale | None] | None = None, pooled: dict[str, list[str]] | None = None) -> str:
    """Which finding holds at which campaign: one row per claim, one column per campaign
    whose results exist (those at the paper's scale, ``at_scale``, marked); campaigns
    without results are named below the table, the campaigns a column pools (``pooled``:
    a findings campaign judged on its slices' runs) too, and the scale each column rests
    on (``scales``: link, dilation, run length, repetitions) in a table of its own."""
    mark = {HOLDS: r"\textsf{holds}", FAILS: r"\textbf{no}", UNDECIDED: "?", NODATA: r"\textit{n/a}"}
    names = list(columns)
    ids = [v.id for v in next(iter(columns.values()))] if columns else []
    lines = [r"\begin{longtable}{@{}l" + "c" * len(names) + "@{}}", r"\toprule",
             "Finding & " + " & ".join(f"\\texttt{{{escape(n)}}}" + ("$^*$" if n in at_scale else "")
                                       for n in names) + r" \\",
             r"\midrule", r"\endhead", r"\bottomrule", r"\endfoot"]
    for i, cid in enumerate(ids):
        marks = [mark[columns[n][i].verdict] for n in names]
        lines.append(f"\\texttt{{{escape(cid)}}} & " + " & ".join(marks) + r" \\")
    lines.append(r"\end{longtable}")
    tail = ("$^*$ at the paper's scale (its link rate); the others compare fractions of a "
            "slower link. ?: undecided at that campaign's budget.\\par\n")
    for name, parts in (pooled or {}).items():
        # ragged: long typewriter names leave a justified line no feasible break
        tail += (f"{{\\raggedright\\texttt{{{escape(name)}}}: its verdicts so far, on the runs of "
                 + ", ".join(f"\\texttt{{{escape(p)}}}" for p in parts)
                 + " (a finding that reads a cell none of them has run holds nowhere yet).\\par}\n")
    if absent:
        tail += ("Campaigns without results for this backend: "
                + ", ".join(f"\\texttt{{{escape(a)}}}" for a in absent) + ".\\par\n")
    return _lead(list(at_scale)) + "\n".join(lines) + "\n" + tail + _scale_table(scales or {})


def _lead(at_scale) -> str:
    """The sentence before the table: which columns are at the paper's scale, or that none is."""
    if at_scale:
        named = ", ".join(f"\\texttt{{{escape(n)}}}" for n in at_scale)
        return (f"Verdicts at the paper's scale come first ({named}: the paper's link rate, "
                "time-dilated where the host carries less); read the other columns as trends "
                "on a slower link.\\par\n")
    return ("No campaign at the paper's scale has results for this backend yet (\\texttt{make findings} "
            "runs the cells the findings read at the paper's link rate); every column compares "
            "fractions of a slower link.\\par\n")


def _scale_table(scales: dict[str, Scale | None]) -> str:
    rows = [(name, scale) for name, scale in scales.items() if scale is not None]
    if not rows:
        return ""
    lines = [r"\par\smallskip What each column rests on (run lengths in virtual seconds of traffic):\par",
             r"\begin{tabular}{@{}lccccc@{}}", r"\toprule",
             r"Campaign & Link (Gbit/s) & Dilation $k$ & Run length (s) & Repetitions & Runs \\", r"\midrule"]
    lines += [f"\\texttt{{{escape(name)}}} & " + " & ".join(scale.cells()) + r" \\" for name, scale in rows]
    lines += [r"\bottomrule", r"\end{tabular}\par"]
    return "\n".join(lines) + "\n"


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    return {k: sum(v.verdict == k for v in verdicts) for k in VERDICTS}

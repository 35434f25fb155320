"""Cross-validation of time dilation: the same condition at k = 1 and at k > 1 must give
the same virtual-path results (campaigns `dilation`, `dilation-quick` and `dilation-long`, criteria
dilation_k1/k2/k4; `make validate-dilation`).

For one condition (variant, RTT, drop, rate) and one factor k, against k = 1:
- mean throughput: the mean over repetitions agrees within MEAN_TOLERANCE;
- per-interval throughput: a two-sample Kolmogorov-Smirnov test over the steady-state
  intervals of all repetitions does not reject equality at KS_ALPHA. Successive intervals
  of one run are not independent (a Reno sawtooth spans dozens), which the KS p-value
  assumes; it is computed with each side's effective sample size instead, sum over runs
  of n (1 - r) / (1 + r), r the run's lag-1 autocorrelation (an AR(1) series; clipped to
  [0, RHO_MAX]) -- without it, 162 intervals of a sawtooth count as 162 draws and
  sub-percent differences "reject". And the distributions are compared at a resolution of
  KS_RESOLUTION of the link rate: the statistic is the largest CDF gap left once either
  side may be offset by up to that much (the Levy distance's form of KS; with no offset it
  is the plain D, and it is never larger, so the test stays a test of "further apart than
  the resolution"). Without it a full link is a point mass whose sub-percent jitter -- at
  k = 1 the host's scheduling hiccups, which dilation shrinks by k -- decides the test;
  1 % of the link is 1 ms of a 100-ms interval. Nor finer than the receiver's own counting:
  the resolution is at least one READ_QUANTUM_BYTES per interval;
- loss events: the dropped-packet counts agree within Poisson noise (LOSS_SIGMAS standard
  deviations) or LOSS_TOLERANCE, whichever is wider -- summed over the repetitions usable
  at both factors (repetition r meets the same drop sequence at every k), else over the
  per-run means.
The tidy tables are in virtual units already (tcpeval.analysis.extract reads every trace
through tcpeval.dilation.to_virtual). A pair whose sides ran on different bottleneck
mechanisms (TBF at k = 1, the link engine at k = 4) is not judged: it would compare the
mechanisms. Only runs with fidelity verdict ok count (the Dataset leaves flagged ones out): a flagged run (a stretched ACK clock, a stalled delay
line) measures the host, not the method, and a side left without ok runs is not judged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MEAN_TOLERANCE = 0.05
KS_ALPHA = 0.01
LOSS_SIGMAS = 3.0
LOSS_TOLERANCE = 0.05
STEADY_FROM = 0.2  # share of the run left out as start-up (slow start)
RHO_MAX = 0.95  # a run counts as at least n / 39 independent intervals
KS_RESOLUTION = 0.01  # of the link rate: interval rates closer than this are not told apart
# ... nor closer than what one read of the receiver can carry in an interval: at 0.2 Gbps
# and k >= 2 the receiver took its data in 45-segment pieces (65,700 bytes) and the
# intervals of a full link came out 36 or 37 pieces long, 189.2 or 194.5 Mbit/s (k = 1:
# anywhere between), 2.7 % of the link apart
READ_QUANTUM_BYTES = 45 * 1460
CRITERION_PREFIX = "dilation_k"


@dataclass
class Side:
    """The runs of one condition at one factor."""
    factor: int
    expected: int                                   # runs the campaign asks for
    means_bps: list = field(default_factory=list)   # per usable run, virtual
    intervals_bps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # steady state, all runs
    effective_n: float = 0.0                        # of those intervals, as independent draws
    dropped: dict = field(default_factory=dict)     # repetition -> dropped packets, usable runs
    links: set = field(default_factory=set)         # the bottleneck mechanisms its runs used


def effective_size(series) -> float:
    """Independent draws a stationary series is worth: n (1 - r) / (1 + r), r its lag-1
    autocorrelation clipped to [0, RHO_MAX] (never more than n)."""
    x = np.asarray(series, float)
    n = x.size
    if n < 3 or np.std(x) == 0:
        return float(n)
    r = float(np.corrcoef(x[:-1], x[1:])[0, 1])
    r = min(RHO_MAX, max(0.0, r)) if r == r else 0.0
    return n * (1 - r) / (1 + r)


def ks_2samp(a, b, n_a: float | None = None, n_b: float | None = None,
             resolution: float = 0.0) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov statistic D and its asymptotic p-value
    (Kolmogorov distribution, Stephens' small-sample correction), for samples worth
    n_a and n_b independent draws (default: their sizes). With a resolution r > 0, D is
    the largest gap F_a(x - r) - F_b(x) or F_b(x - r) - F_a(x): how far one side lies
    below the other by more than r (r = 0: the plain statistic)."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    if a.size == 0 or b.size == 0:
        return math.nan, math.nan

    def cdf(x, at):
        return np.searchsorted(x, at, side="right") / x.size

    # each step difference peaks where its rising CDF jumps: at a + r, resp. b + r
    d = max(0.0, float(np.max(cdf(a, a) - cdf(b, a + resolution))),
            float(np.max(cdf(b, b) - cdf(a, b + resolution))))
    n, m = n_a or a.size, n_b or b.size
    en = math.sqrt(n * m / (n + m))
    lam = (en + 0.12 + 0.11 / en) * d
    if lam < 1e-3:
        return d, 1.0
    p = 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return d, float(min(1.0, max(0.0, p)))


def _not_judged(base: dict, resolution: float, why: str) -> dict:
    return {**base, "judged": False, "why": why,
            "mean_bps": [math.nan, math.nan], "mean_rel_diff": math.nan, "ks_d": math.nan,
            "ks_p": math.nan, "ks_effective_n": [0.0, 0.0], "ks_resolution_bps": resolution,
            "loss_events": [0, 0], "loss_band": math.nan, "loss_reps": [],
            "checks": {}, "agree": False}


def ks_resolution(link_rate_bps: float, interval_s: float) -> float:
    """KS_RESOLUTION of the link rate or one READ_QUANTUM_BYTES per interval, whichever is
    coarser (an unknown figure contributes nothing)."""
    of_link = KS_RESOLUTION * link_rate_bps if link_rate_bps == link_rate_bps else 0.0
    of_read = 8 * READ_QUANTUM_BYTES / interval_s if interval_s == interval_s and interval_s > 0 else 0.0
    return max(of_link, of_read)


def compare(ref: Side, dil: Side, link_rate_bps: float = math.nan, interval_s: float = math.nan) -> dict:
    """The three checks for one condition: k = 1 against one k > 1 (the KS test at
    ks_resolution(link_rate_bps, interval_s); both unknown: no resolution)."""
    resolution = ks_resolution(link_rate_bps, interval_s)
    base = {"factor": dil.factor, "runs": [ref.expected, dil.expected],
            "ok_runs": [len(ref.means_bps), len(dil.means_bps)], "ks_alpha": KS_ALPHA}
    if not ref.means_bps or not dil.means_bps:
        side = ref if not ref.means_bps else dil
        return _not_judged(base, resolution,
                           f"no usable k = {side.factor} run (flagged or missing: the host, not the method)")
    if ref.links and dil.links and ref.links != dil.links:
        return _not_judged(base, resolution,
                           f"k = 1 ran on {', '.join(sorted(ref.links))}, k = {dil.factor} on "
                           f"{', '.join(sorted(dil.links))}: that compares the link mechanisms, not time "
                           f"dilation (pin one: $TCPEVAL_LINK)")
    m1, mk = float(np.mean(ref.means_bps)), float(np.mean(dil.means_bps))
    rel = (mk - m1) / m1 if m1 else math.nan
    d, p = ks_2samp(ref.intervals_bps, dil.intervals_bps, ref.effective_n or None, dil.effective_n or None,
                    resolution)
    paired = sorted(set(ref.dropped) & set(dil.dropped))
    if paired:
        l1, lk = (int(sum(side.dropped[r] for r in paired)) for side in (ref, dil))
    else:  # no repetition usable at both factors: per-run means, as many runs as the smaller side
        n = min(len(ref.dropped), len(dil.dropped))
        l1, lk = (int(round(n * float(np.mean(list(side.dropped.values()))))) for side in (ref, dil))
    loss_band = max(LOSS_SIGMAS * math.sqrt(max(l1, 1) + max(lk, 1)), LOSS_TOLERANCE * max(l1, lk))
    checks = {"mean": bool(abs(rel) <= MEAN_TOLERANCE) if rel == rel else False,
              "distribution": bool(p >= KS_ALPHA) if p == p else False,
              "loss_events": bool(abs(lk - l1) <= loss_band)}
    return {**base, "judged": True, "why": None, "mean_bps": [m1, mk], "mean_rel_diff": rel,
            "ks_d": d, "ks_p": p, "loss_events": [l1, lk], "loss_band": loss_band, "loss_reps": paired,
            "checks": checks, "agree": all(checks.values())}


def factor_of(criterion: str) -> int | None:
    """dilation_k4 -> 4; None for criteria outside the cross-validation."""
    if criterion.startswith(CRITERION_PREFIX) and criterion[len(CRITERION_PREFIX):].isdigit():
        return int(criterion[len(CRITERION_PREFIX):])
    return None


def _side(factor: int, expected: pd.DataFrame, runs: pd.DataFrame, samples_by_run: dict) -> Side:
    side = Side(factor=factor, expected=len(expected))
    if not len(runs):
        return side
    side.means_bps = [float(x) for x in runs["mean_bps"]]
    if "mech_rate" in runs:
        side.links = {str(x) for x in runs["mech_rate"] if isinstance(x, str) and x}
    side.dropped = {int(r): int(x) if x == x and x is not None else 0
                    for r, x in zip(runs["rep"], runs["dropped_packets"])}
    parts = []
    for run, duration in zip(runs["run"], runs["duration_s"]):
        s = samples_by_run.get(run)
        if s is None or not len(s):
            continue
        s = s[s["flow"] == s["flow"].min()]  # the condition's one flow
        parts.append(s.loc[s["t_s"] > STEADY_FROM * duration, "throughput_bps"].to_numpy(float))
    side.intervals_bps = np.concatenate(parts) if parts else np.zeros(0)
    side.effective_n = float(sum(effective_size(x) for x in parts))
    return side


def conditions(runs: pd.DataFrame, expected: pd.DataFrame, samples: pd.DataFrame) -> list[dict]:
    """Every (variant, RTT, drop) of the cross-validation's criteria compared at each
    factor against k = 1. runs: the usable runs (tables.Dataset.runs); expected: the
    campaign's run list (Dataset.expected); samples: those runs' intervals."""
    exp = expected.assign(factor=expected["criterion"].map(factor_of)).dropna(subset=["factor"])
    used = runs[runs["criterion"].map(factor_of).notna()]
    used = used.assign(factor=used["criterion"].map(factor_of))
    samples_by_run = {str(run): df for run, df in samples.groupby("run", observed=True)} if len(samples) else {}
    out = []
    for (variant, rtt, p), group in exp.groupby(["variant", "rtt_ms", "drop"], sort=True):
        sides = {}
        for k, e in group.groupby("factor"):
            r = used[(used["variant"] == variant) & (used["rtt_ms"] == rtt) & (used["drop"] == p)
                     & (used["factor"] == k)]
            sides[int(k)] = _side(int(k), e, r, samples_by_run)
        if 1 not in sides:
            continue
        path = used[(used["variant"] == variant) & (used["rtt_ms"] == rtt)]
        link = float(path["link_rate_bps"].median()) if len(path) else math.nan
        interval = float(path["interval_s"].median()) if len(path) and "interval_s" in path else math.nan
        for k in sorted(sides):
            if k == 1:
                continue
            out.append({"variant": variant, "rtt_ms": float(rtt), "drop": float(p), "rate_bps": link,
                        **compare(sides[1], sides[k], link, interval)})
    return out


def summary(results: list[dict]) -> dict:
    judged = [r for r in results if r["judged"]]
    agree = [r for r in judged if r["agree"]]
    diffs = [abs(r["mean_rel_diff"]) for r in judged]
    ks = [r["ks_p"] for r in judged if r["ks_p"] == r["ks_p"]]
    return {
        "comparisons": len(results), "judged": len(judged), "agree": len(agree),
        "not_judged": len(results) - len(judged),
        "variants": sorted({r["variant"] for r in results}),
        "variants_all_agree": sorted({r["variant"] for r in judged}
                                     - {r["variant"] for r in results if not r["agree"]}),
        "factors": sorted({r["factor"] for r in results}),
        "max_abs_mean_diff": max(diffs) if diffs else math.nan,
        "min_ks_p": min(ks) if ks else math.nan,
        "failed_checks": {c: sum(1 for r in judged if not r["checks"][c])
                          for c in ("mean", "distribution", "loss_events")},
        "tolerances": {"mean": MEAN_TOLERANCE, "ks_alpha": KS_ALPHA,
                       "loss_sigmas": LOSS_SIGMAS, "loss_tolerance": LOSS_TOLERANCE,
                       "steady_from": STEADY_FROM, "ks_rho_max": RHO_MAX,
                       "ks_resolution": KS_RESOLUTION, "read_quantum_bytes": READ_QUANTUM_BYTES},
    }

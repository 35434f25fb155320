"""Cross-validation of time dilation: the same condition at k = 1 and at k > 1 must give
the same virtual-path results (`make validate-dilation`, bench/validate_dilation.py).

For one condition (variant, RTT, drop, rate) and one factor k, against k = 1:
- mean throughput: the mean over repetitions agrees within MEAN_TOLERANCE;
- per-interval throughput: a two-sample Kolmogorov-Smirnov test over the steady-state
  intervals of all repetitions does not reject equality at KS_ALPHA;
- loss events: the dropped-packet counts (summed over repetitions) agree within
  Poisson noise (LOSS_SIGMAS standard deviations) or LOSS_TOLERANCE, whichever is wider.
Every record is read in virtual units first (tcpeval.dilation.to_virtual). Only runs
with fidelity verdict ok count: a flagged run (a stretched ACK clock, a stalled delay
line) measures the host, not the method; a side left without ok runs is not judged.
"""
from __future__ import annotations

import math

import numpy as np

from tcpeval import dilation

MEAN_TOLERANCE = 0.05
KS_ALPHA = 0.01
LOSS_SIGMAS = 3.0
LOSS_TOLERANCE = 0.05
STEADY_FROM = 0.2  # share of the run left out as start-up (slow start)


def ks_2samp(a, b) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov statistic D and its asymptotic p-value
    (Kolmogorov distribution, Stephens' small-sample correction)."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    n, m = a.size, b.size
    if n == 0 or m == 0:
        return math.nan, math.nan
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / n
    cdf_b = np.searchsorted(b, grid, side="right") / m
    d = float(np.max(np.abs(cdf_a - cdf_b)))
    en = math.sqrt(n * m / (n + m))
    lam = (en + 0.12 + 0.11 / en) * d
    if lam < 1e-3:
        return d, 1.0
    p = 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return d, float(min(1.0, max(0.0, p)))


def steady_intervals(record: dict) -> np.ndarray:
    """Per-interval receiver throughput of the first flow after start-up, virtual units."""
    v = dilation.to_virtual(record)
    s = v["flows"][0]["samples"]
    t = np.asarray(s["t_s"], float)
    rate = np.asarray(s["throughput_bps"], float)
    if t.size == 0:
        return rate
    return rate[t > STEADY_FROM * t[-1]]


def _mean(record: dict) -> float:
    return float(dilation.to_virtual(record)["flows"][0]["summary"]["mean_throughput_bps"])


def compare(reference: list[dict], dilated: list[dict]) -> dict:
    """The three checks for one condition: k = 1 repetitions against k > 1 ones."""
    if not reference or not dilated:
        raise ValueError("compare: both sides need at least one run")
    k = dilation.factor(dilated[0])
    verdicts = [r["fidelity"]["verdict"] for r in reference + dilated]
    ok_ref = [r for r in reference if r["fidelity"]["verdict"] == "ok"]
    ok_dil = [r for r in dilated if r["fidelity"]["verdict"] == "ok"]
    if not ok_ref or not ok_dil:
        side = f"k = {dilation.factor(reference[0])}" if not ok_ref else f"k = {k}"
        return {"factor": k, "runs": [len(reference), len(dilated)], "ok_runs": [len(ok_ref), len(ok_dil)],
                "verdicts": verdicts, "judged": False,
                "why": f"every {side} run was flagged (the host, not the method)",
                "mean_bps": [math.nan, math.nan], "mean_rel_diff": math.nan, "ks_d": math.nan,
                "ks_p": math.nan, "ks_alpha": KS_ALPHA, "loss_events": [0, 0], "loss_band": math.nan,
                "checks": {}, "agree": False}
    dilated_all = dilated
    reference, dilated = ok_ref, ok_dil
    m1 = float(np.mean([_mean(r) for r in reference]))
    mk = float(np.mean([_mean(r) for r in dilated]))
    rel = (mk - m1) / m1 if m1 else math.nan
    d, p = ks_2samp(np.concatenate([steady_intervals(r) for r in reference]),
                    np.concatenate([steady_intervals(r) for r in dilated]))
    l1 = sum(int(r["measured"]["drop"]["dropped"]) for r in reference)
    lk = sum(int(r["measured"]["drop"]["dropped"]) for r in dilated)
    loss_band = max(LOSS_SIGMAS * math.sqrt(max(l1, 1) + max(lk, 1)), LOSS_TOLERANCE * max(l1, lk))
    checks = {"mean": abs(rel) <= MEAN_TOLERANCE if rel == rel else False,
              "distribution": bool(p >= KS_ALPHA) if p == p else False,
              "loss_events": abs(lk - l1) <= loss_band}
    return {"factor": k, "runs": [len(verdicts) - len(dilated_all), len(dilated_all)],
            "mean_bps": [m1, mk], "mean_rel_diff": rel,
            "ks_d": d, "ks_p": p, "ks_alpha": KS_ALPHA,
            "loss_events": [l1, lk], "loss_band": loss_band,
            "ok_runs": [len(reference), len(dilated)], "verdicts": verdicts, "judged": True,
            "checks": checks, "agree": all(checks.values())}

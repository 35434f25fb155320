"""Stopped early is not stopped wrong: a precision-driven run's interval against the mean
of a much longer run of the same condition (campaigns `stopping` and `stopping-quick`,
criteria stopping_rule and stopping_long; `make validate-stopping`).

For each condition (variant, RTT, drop) and each usable run of the rule:
- stopped by itself: the rule was met and ended the run before its max_s
  (`precision_reached`, `stopped_early` in the runs table);
- long enough to tell: the long runs lasted at least MIN_LENGTH_RATIO times as long as
  the rule's run (virtual seconds of traffic, `ran_s`);
- covers: the long runs' mean lies within the rule run's 95 % interval of the mean
  (`mean_bps` +- `mean_hw_bps`, batch means after the rule's warm-up cut -- the figure and
  interval the claims use). The long runs are independent of the rule's run (their own
  seeds), so this is the interval's coverage of the condition's mean as the long run
  estimates it; the long run's own interval is reported beside it, and so are the
  quartiles, which are not judged.
Only runs with fidelity verdict ok count (tables.Dataset leaves flagged ones out); a
condition without a usable run on either side is not judged, with the reason.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tcpeval import precision

RULE = "stopping_rule"
LONG = "stopping_long"
MIN_LENGTH_RATIO = 5.0
QUARTILES = ("q25", "q50", "q75")


def _num(value) -> float:
    """A runs-table cell as a float (NaN where it holds none)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _long_side(long: pd.DataFrame) -> dict:
    """The long runs of one condition: their mean (over runs), the runs' own intervals and
    length."""
    means = long["mean_bps"].astype(float).to_numpy()
    if len(means) > 1:   # Student's t over the runs' means
        hw = precision.t_critical(0.95, len(means) - 1) * float(np.std(means, ddof=1)) / math.sqrt(len(means))
    else:                # the run's own batch-means interval
        hw = _num(long["mean_hw_bps"].iloc[0])
    side = {"runs": [str(r) for r in long["run"]], "mean_bps": float(np.mean(means)),
            "ran_s": float(long["ran_s"].astype(float).min()), "mean_hw_bps": hw}
    for q in QUARTILES:
        side[f"{q}_bps"] = float(long[f"{q}_bps"].astype(float).mean())
    return side


def compare(rule_row: pd.Series | dict, long: dict) -> dict:
    """One run of the rule against the condition's long runs (`_long_side`)."""
    mean, hw = _num(rule_row["mean_bps"]), _num(rule_row["mean_hw_bps"])
    ran = _num(rule_row["ran_s"])
    ratio = long["ran_s"] / ran if ran > 0 else math.nan
    stopped = bool(rule_row.get("precision_reached")) and bool(rule_row.get("stopped_early"))
    covers = bool(math.isfinite(hw) and abs(long["mean_bps"] - mean) <= hw)
    quartiles = {}
    for q in QUARTILES:
        est, q_hw = _num(rule_row.get(f"{q}_bps")), _num(rule_row.get(f"{q}_hw_bps"))
        quartiles[q] = {"rule_bps": est, "rule_hw_bps": q_hw, "long_bps": long[f"{q}_bps"],
                        "covers": bool(math.isfinite(q_hw) and abs(long[f"{q}_bps"] - est) <= q_hw)}
    checks = {"stopped_by_itself": stopped,
              "long_enough": bool(ratio >= MIN_LENGTH_RATIO - 1e-9),
              "covers_mean": covers}
    return {
        "judged": True, "why_not": None,
        "rule_run": str(rule_row["run"]), "rule_mean_bps": mean, "rule_hw_bps": hw,
        "rule_relative_hw": hw / mean if mean else math.nan,
        "rule_ran_s": ran, "rule_max_s": _num(rule_row.get("duration_s")),
        "rule_warmup_s": _num(rule_row.get("metrics_from_s")),
        "long_runs": long["runs"], "long_mean_bps": long["mean_bps"], "long_hw_bps": long["mean_hw_bps"],
        "long_ran_s": long["ran_s"], "length_ratio": ratio,
        "mean_rel_diff": (long["mean_bps"] - mean) / long["mean_bps"] if long["mean_bps"] else math.nan,
        "quartiles": quartiles, "checks": checks, "agree": all(checks.values()),
    }


def _not_judged(why: str) -> dict:
    return {"judged": False, "why_not": why, "rule_run": None, "agree": False, "checks": {}}


def conditions(runs: pd.DataFrame, expected: pd.DataFrame) -> list[dict]:
    """Every condition of the two criteria, each usable run of the rule compared with the
    condition's usable long runs. runs: the usable runs (tables.Dataset.runs); expected:
    the campaign's run list (Dataset.expected)."""
    exp = expected[expected["criterion"].isin([RULE, LONG])]
    used = runs[runs["criterion"].isin([RULE, LONG])]
    out = []
    for (variant, rtt, p), group in exp.groupby(["variant", "rtt_ms", "drop"], sort=True):
        of = used[(used["variant"] == variant) & (used["rtt_ms"] == rtt) & (used["drop"] == p)]
        rule, long = of[of["criterion"] == RULE], of[of["criterion"] == LONG]
        base = {"variant": variant, "rtt_ms": float(rtt), "drop": float(p),
                "rate_bps": float(of["link_rate_bps"].median()) if len(of) else math.nan,
                "expected_rule_runs": int((group["criterion"] == RULE).sum()),
                "expected_long_runs": int((group["criterion"] == LONG).sum())}
        if not len(rule) or not len(long):
            side = "rule" if not len(rule) else "long"
            out.append({**base, **_not_judged(f"no usable {side} run (flagged or missing)")})
            continue
        long_side = _long_side(long)
        for _, row in rule.sort_values("rep").iterrows():
            out.append({**base, **compare(row, long_side)})
    return out


def summary(results: list[dict]) -> dict:
    judged = [r for r in results if r["judged"]]
    return {
        "comparisons": len(results), "judged": len(judged),
        "agree": sum(1 for r in judged if r["agree"]),
        "not_judged": len(results) - len(judged),
        "failed_checks": {c: sum(1 for r in judged if not r["checks"][c])
                          for c in ("stopped_by_itself", "long_enough", "covers_mean")},
        "max_rule_ran_s": max((r["rule_ran_s"] for r in judged), default=math.nan),
        "max_rule_relative_hw": max((r["rule_relative_hw"] for r in judged), default=math.nan),
        "max_abs_mean_diff": max((abs(r["mean_rel_diff"]) for r in judged), default=math.nan),
        "quartiles_covered": sum(q["covers"] for r in judged for q in r["quartiles"].values()),
        "quartiles_judged": sum(len(r["quartiles"]) for r in judged),
        "min_length_ratio": MIN_LENGTH_RATIO,
    }

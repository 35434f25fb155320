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

One run of the rule is one stop; a 95 % interval misses one time in twenty, so a single
pair per condition cannot tell a sound rule from one that covers 80 %. The rule's coverage
over many stops comes from replays (`replays`): the rule applied, as the run's watch
applies it (a decision every precision.DECIDE_EVERY_S virtual seconds on the samples so
far), to the receiver samples of runs recorded at its longest length (criterion
stopping_replay, independent seeds: each run one stop), and to consecutive segments of
the long runs (each against the rest of its own run: a coverage without run-to-run
differences, which tells the rule's own shortfall from that of a run's conditions).
A replay takes iperf3's interval samples where the watch reads the receiver socket, and
the sender's retransmissions as its loss events where the watch counts the drop stage's
drops (one each at the drop rates of these conditions).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tcpeval import precision, spec
from tcpeval.analysis import metrics as M

RULE = "stopping_rule"
LONG = "stopping_long"
REPLAY = "stopping_replay"
CONFIDENCE = 0.95
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


# --- the rule replayed on recorded series -------------------------------------------------

def rule_of(design: dict, campaign: str) -> precision.StopRule:
    """The stopping rule the campaign's rule runs are held to (criterion stopping_rule)."""
    settings = spec.criterion_settings(design, campaign, RULE)
    return precision.StopRule.from_design(settings["stop"], f"campaigns/{campaign}/criteria/{RULE}/stop")


def replay(rule: precision.StopRule, t_s, rates, loss_events,
           every_s: float = precision.DECIDE_EVERY_S) -> precision.Decision | None:
    """The rule as a run applies it, on a recorded series: t_s the samples' ends (virtual s
    from the flow's start), rates their throughput, loss_events the cumulative loss events
    at each sample. A decision every every_s seconds on the samples so far; the first that
    says stop, else the last at min(max_s, the series' end) (a series shorter than max_s
    ends undecided: stop False). None when the series has fewer than two samples."""
    t = np.asarray(t_s, dtype=float)
    values = np.asarray(rates, dtype=float)
    events = np.asarray(loss_events, dtype=float)
    horizon = min(rule.max_s, float(t[-1])) if len(t) else 0.0
    decision, look = None, every_s
    while look <= horizon + 1e-9:
        m = int(np.searchsorted(t, look + 1e-9))
        if m >= 2:
            decision = precision.decide(rule, t[:m], values[:m], int(events[m - 1]), look)
            if decision.stop:
                return decision
        look += every_s
    m = int(np.searchsorted(t, horizon + 1e-9))
    if m >= 2 and (decision is None or decision.elapsed_s < horizon):
        decision = precision.decide(rule, t[:m], values[:m], int(events[m - 1]), horizon)
    return decision


def replayed_stop(rule: precision.StopRule, t_s, nbytes, loss_events,
                  every_s: float = precision.DECIDE_EVERY_S) -> dict | None:
    """Where the rule stops on a recorded flow and what a run stopped there reports: the
    mean of its samples after the warm-up cut and the interval the rule met (batch means
    in the rule's batches, precision.steady_state), as extract.summarise reports a
    precision-driven run from the samples its rule decided on."""
    t = np.asarray(t_s, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    if len(t) < 2:
        return None
    rates = M.interval_rates(t, b)
    decision = replay(rule, t, rates, loss_events, every_s)
    if decision is None:
        return None
    mean = decision.mean
    return {"stopped_s": decision.elapsed_s, "precision_reached": decision.precision_reached, "why": decision.why,
            "warmup_s": decision.warmup_cut_s, "loss_events": decision.loss_events,
            "mean_bps": mean.estimate, "mean_hw_bps": mean.half_width if math.isfinite(mean.half_width) else math.nan,
            "rule_relative_hw": mean.relative_half_width}


def _judged_stop(stop: dict | None, reference_bps: float) -> dict:
    """A replayed stop against the mean it should cover."""
    if stop is None:
        return {"judged": False, "covers": False}
    hw, mean = stop["mean_hw_bps"], stop["mean_bps"]
    judged = bool(stop["precision_reached"] and math.isfinite(hw) and math.isfinite(reference_bps))
    signed = (reference_bps - mean) / hw if judged and hw > 0 else math.nan
    return {**stop, "judged": judged, "reference_bps": reference_bps,
            "signed_miss_in_hw": signed, "miss_in_hw": abs(signed),
            "covers": bool(judged and abs(reference_bps - mean) <= hw)}


def _first_flow(samples: pd.DataFrame) -> pd.DataFrame:
    first = samples[samples["flow"] == samples["flow"].min()]
    return first.sort_values("t_s")


def _loss_events(flow: pd.DataFrame) -> np.ndarray:
    """The sender's cumulative retransmissions at each sample (a missing count as none)."""
    return np.nan_to_num(flow["retransmits"].to_numpy(dtype=float)).cumsum()


def segments_of(flow: pd.DataFrame, length_s: float) -> list[tuple[pd.DataFrame, float]]:
    """A long run's samples cut into consecutive segments of length_s (the last, if
    shorter, is dropped), each with the mean throughput of the rest of the run; segment
    times from its start."""
    t = flow["t_s"].to_numpy(dtype=float)
    b = flow["bytes"].to_numpy(dtype=float)
    out = []
    for k in range(int((t[-1] + 1e-9) // length_s) if len(t) else 0):
        inside = (t > k * length_s + 1e-9) & (t <= (k + 1) * length_s + 1e-9)
        segment = flow[inside].assign(t_s=t[inside] - k * length_s)
        # intervals of the whole run, masked: the rest's gap is no time
        out.append((segment, M.mean_throughput(t, b, ~inside)))
    return out


def replays(runs: pd.DataFrame, samples: pd.DataFrame, rule: precision.StopRule) -> list[dict]:
    """The rule replayed, per condition: on each usable stopping_replay run (against the
    mean of the condition's long runs) and on each max_s-long segment of each long run
    (against the rest of that run). runs: the usable runs; samples: theirs (flow, t_s,
    bytes, retransmits)."""
    out = []
    used = runs[runs["criterion"].isin([LONG, REPLAY])]
    for (variant, rtt, p), of in used.groupby(["variant", "rtt_ms", "drop"], sort=True):
        base = {"variant": variant, "rtt_ms": float(rtt), "drop": float(p)}
        long = of[of["criterion"] == LONG]
        long_mean = float(long["mean_bps"].astype(float).mean()) if len(long) else math.nan
        for _, row in of[of["criterion"] == REPLAY].sort_values("rep").iterrows():
            flow = _first_flow(samples[samples["run"] == row["run"]])
            stop = replayed_stop(rule, flow["t_s"], flow["bytes"], _loss_events(flow))
            out.append({**base, "kind": "run", "run": str(row["run"]), "segment": None,
                        **_judged_stop(stop, long_mean)})
        for _, row in long.sort_values("rep").iterrows():
            flow = _first_flow(samples[samples["run"] == row["run"]])
            for k, (segment, rest_mean) in enumerate(segments_of(flow, rule.max_s)):
                stop = replayed_stop(rule, segment["t_s"], segment["bytes"], _loss_events(segment))
                out.append({**base, "kind": "segment", "run": str(row["run"]), "segment": k,
                            **_judged_stop(stop, rest_mean)})
    return out


def honest_median_miss(batches: int) -> float:
    """The median miss, in half-widths, of an honest 95 % interval of `batches` batch means:
    the median of |t| over t's 97.5 % quantile (20 batches, 19 degrees of freedom:
    0.688 / 2.093 = 0.33)."""
    return precision.t_critical(0.5, batches - 1) / precision.t_critical(CONFIDENCE, batches - 1)


def coverage(stops: list[dict]) -> dict:
    """How often the judged stops' intervals covered their reference: the share, its Wilson
    interval, and the median miss in half-widths (honest_median_miss for an honest one)."""
    judged = [s for s in stops if s["judged"]]
    k = sum(s["covers"] for s in judged)
    low, high = precision.wilson(k, len(judged)) if judged else (math.nan, math.nan)
    misses = [s["miss_in_hw"] for s in judged]
    return {"stops": len(stops), "judged": len(judged), "covered": k,
            "share": k / len(judged) if judged else math.nan, "share_low": low, "share_high": high,
            "median_miss_in_hw": float(np.median(misses)) if misses else math.nan,
            "median_stop_s": float(np.median([s["stopped_s"] for s in judged])) if judged else math.nan}

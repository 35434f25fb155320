"""Aggregates over the tidy tables, and the expected matrix they are checked against.

Everything the figures, LaTeX tables, macros and claims show is computed here, from the
gathered runs table and the design -- never typed in.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tcpeval import paths, spec
from tcpeval.analysis import tidy
from tcpeval.condition import Condition

VARIANT_LABELS = {"reno": "Reno", "scalable": "Scalable", "highspeed": "HS-TCP",
                  "htcp": "H-TCP", "bic": "BIC", "cubic": "CUBIC"}
CRITERION_LABELS = {"responsiveness": "Responsiveness", "efficiency": "Efficiency",
                    "fairness": "Fairness", "compatibility": "Downward compatibility",
                    "convergence": "Convergence"}


def label(variant: str | None) -> str:
    return VARIANT_LABELS.get(variant, variant or "")


def pairing_label(variant: str, second: str | None) -> str:
    return label(variant) if not second else f"{label(variant)}/{label(second)}"


def expected_runs(design: dict, campaign: str, backend: str, also: Iterable[Condition] = ()) -> pd.DataFrame:
    """The campaign's matrix: one row per run the design asks for, and per run in ``also``
    (a findings campaign's slices' runs in cells it leaves out itself: spec.family_cells)."""
    rows = []
    horizon = {}   # (campaign, criterion) -> whether a cycle rule sets its runs' horizon
    for c in [*spec.expand(design, campaign, backend), *also]:
        key = (c.campaign, c.criterion)
        if key not in horizon:
            rule = spec.length_rule(design, c.campaign, c.criterion)
            horizon[key] = bool(rule and "cycles" in rule)
        rows.append({"run": paths.run_dir(c, raw_dir="."), "criterion": c.criterion,
                     "variant": c.flows[0].variant,
                     "second": c.flows[1].variant if len(c.flows) > 1 else None,
                     "rtt_ms": c.rtt_ms, "drop": c.drop, "rep": c.rep, "background_loss": c.background_loss,
                     "horizon_s": c.duration_s if horizon[key] else np.nan})
    return pd.DataFrame(rows, columns=["run", "criterion", "variant", "second", "rtt_ms", "drop", "rep",
                                       "background_loss", "horizon_s"])


@dataclass
class Dataset:
    """The runs the figures use, and the accounting of the ones they do not."""
    runs: pd.DataFrame                  # status ok, verdict ok (or flagged too if included)
    flows: pd.DataFrame
    expected: pd.DataFrame
    include_flagged: bool
    n_flagged_excluded: int = 0
    n_flagged_included: int = 0
    bad: list = field(default_factory=list)          # skipped with --skip-bad
    missing: pd.DataFrame = field(default_factory=pd.DataFrame)  # expected, no usable trace
    extra: int = 0                      # traces outside the campaign's matrix (ignored)
    # traces at a run path of the matrix but of another condition than the design now gives
    # it (a setting the path does not name has changed since: stale_runs), left out
    stale: list = field(default_factory=list)
    results: Path | None = None
    # the design's efficiency_panel_drop of responsiveness: RTT (ms) -> the panel's drop rate
    efficiency_panel_drop: dict = field(default_factory=dict)

    def criterion(self, name: str) -> pd.DataFrame:
        return self.runs[self.runs["criterion"] == name]

    @property
    def absent(self) -> pd.DataFrame:
        """Expected runs the figures cannot use: missing, bad, or excluded as flagged."""
        return self.expected[~self.expected["run"].isin(self.runs["run"])]

    def expected_in(self, criterion: str) -> pd.DataFrame:
        return self.expected[self.expected["criterion"] == criterion]

    def note(self, criterion: str | None = None) -> str:
        """One line for captions: what is left out and why."""
        def count(df):
            return len(df) if criterion is None else int((df["criterion"] == criterion).sum()) if len(df) else 0
        parts = []
        flagged = self._flagged(criterion)
        if self.include_flagged and flagged:
            parts.append(f"{flagged} flagged run(s) included")
        elif flagged:
            parts.append(f"{flagged} run(s) with fidelity verdict `flagged' excluded")
        miss = count(self.missing)
        if miss:
            parts.append(f"{miss} of {count(self.expected)} run(s) missing")
        if self.bad:
            parts.append(f"{len(self.bad)} unreadable trace(s) skipped")
        if self.stale:
            parts.append(f"{len(self.stale)} trace(s) of another condition than the design's left out")
        return "; ".join(parts) if parts else "all runs of the campaign present"

    def _flagged(self, criterion):
        df = self.flagged_runs
        if criterion is not None and len(df):
            df = df[df["criterion"] == criterion]
        return len(df)

    # the campaign's runs with verdict flagged, whether or not `runs` includes them
    flagged_runs: pd.DataFrame = field(default_factory=pd.DataFrame)


CELL_KEYS = ["criterion", "variant", "second", "rtt_ms", "drop"]


def cell_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's cell (criterion, variant, second -- "" for one flow --, RTT, drop): what
    runs of one condition in different campaigns (a findings campaign's slices) share."""
    if df.empty:
        return pd.Series([], dtype=object)
    return pd.Series(list(zip(df["criterion"], df["variant"], df["second"].fillna(""),
                              df["rtt_ms"].astype(float).round(6), df["drop"].astype(float))), index=df.index)


def pool(parts: list[Dataset], expected: pd.DataFrame) -> Dataset:
    """The runs of several campaigns' datasets as one, against ``expected`` (the matrix
    they are parts of: a findings campaign's, whose slices they are); a run's `run` is its
    path, so runs of different campaigns stay apart."""
    def cat(frames):
        frames = [f for f in frames if f is not None and len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    runs = cat([p.runs for p in parts])
    have = set(cell_keys(runs)) if len(runs) else set()
    return Dataset(runs=runs, flows=cat([p.flows for p in parts]), expected=expected,
                   include_flagged=any(p.include_flagged for p in parts),
                   n_flagged_excluded=sum(p.n_flagged_excluded for p in parts),
                   n_flagged_included=sum(p.n_flagged_included for p in parts),
                   bad=[b for p in parts for b in p.bad], missing=expected[~cell_keys(expected).isin(have)],
                   extra=sum(p.extra for p in parts), stale=[r for p in parts for r in p.stale], results=None,
                   efficiency_panel_drop=parts[0].efficiency_panel_drop if parts else {},
                   flagged_runs=cat([p.flagged_runs for p in parts]))


def _efficiency_panel_drop(design: dict) -> dict[float, float]:
    crit = design["criteria"].get("responsiveness", {})
    return {round(float(rtt), 3): float(p) for rtt, p in crit.get("efficiency_panel_drop", {}).items()}


def background_loss_of(runs: pd.DataFrame) -> pd.Series:
    """Each run's background loss; runs tabled before it was recorded had none (no design
    set one before)."""
    if "background_loss" not in runs:
        return pd.Series(0.0, index=runs.index)
    return runs["background_loss"].fillna(0.0).astype(float)


def stale_runs(runs: pd.DataFrame, expected: pd.DataFrame) -> list[dict]:
    """The runs whose trace holds another condition than the design now gives their path:
    a path names a condition only up to the settings it does not spell out (the
    background loss; a pair's horizon where a cycle rule sets it, which defines its index
    or share, where another length of a single flow only changes the precision its
    intervals carry: docs/precision.md), and editing the design keeps the traces
    (runs.smk), so a cell could otherwise pool runs of two conditions. Each as {run,
    reason} (background_loss_of)."""
    if runs.empty or "background_loss" not in expected:
        return []
    design = expected.drop_duplicates("run").set_index("run")
    have = background_loss_of(runs)
    want = runs["run"].map(design["background_loss"]).astype(float)
    differ = ~np.isclose(have, want, rtol=1e-9, atol=0.0)
    out = [{"run": run, "reason": f"background_loss {h:g} in its trace, {w:g} in the design"}
           for run, h, w in zip(runs["run"][differ], have[differ], want[differ])]
    if "duration_s" in runs and "horizon_s" in design:
        have_s = runs["duration_s"].astype(float)
        want_s = runs["run"].map(design["horizon_s"]).astype(float)
        other = ~np.isclose(have_s, want_s, rtol=1e-9, atol=0.0) & want_s.notna() & have_s.notna() & ~differ
        out += [{"run": run, "reason": f"a pair's horizon of {h:g} virtual s in its trace, {w:g} s in the design"}
                for run, h, w in zip(runs["run"][other], have_s[other], want_s[other])]
    return out


def load(results: str | Path, design: dict, campaign: str, backend: str, *,
         include_flagged: bool = False) -> Dataset:
    """Runs of one campaign, split into used / flagged / bad, and what is missing."""
    results = Path(results)
    runs = tidy.read_runs(results)
    flows = tidy.read_flows(results)
    expected = expected_runs(design, campaign, backend)
    bad = runs[runs["status"] != "ok"]
    good = runs[runs["status"] == "ok"]
    in_matrix = good["run"].isin(expected["run"])
    extra = int((~in_matrix).sum())
    good = good[in_matrix]
    stale = stale_runs(good, expected)
    good = good[~good["run"].isin([r["run"] for r in stale])]
    flagged = good[good["verdict"] != "ok"]
    used = good if include_flagged else good[good["verdict"] == "ok"]
    # Missing: expected runs with no readable trace (never run, or skipped as bad). Runs
    # excluded as flagged are counted apart; both leave their cell empty (`absent`).
    missing = expected[~expected["run"].isin(good["run"])]
    ds = Dataset(runs=used.reset_index(drop=True), flows=flows[flows["run"].isin(used["run"])],
                 expected=expected, include_flagged=include_flagged,
                 n_flagged_excluded=0 if include_flagged else len(flagged),
                 n_flagged_included=len(flagged) if include_flagged else 0,
                 bad=bad[["run", "error"]].to_dict("records"), missing=missing, extra=extra, stale=stale,
                 results=results, efficiency_panel_drop=_efficiency_panel_drop(design),
                 flagged_runs=flagged)
    return ds


# ---------------------------------------------------------------------------- aggregates

def _agg(df: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=keys + ["mean", "std", "min", "max", "n"])
    g = df.groupby(keys, dropna=False)[value]
    return g.agg(["mean", "std", "min", "max", "count"]).rename(columns={"count": "n"}).reset_index()


def responsiveness(ds: Dataset) -> pd.DataFrame:
    """Sec. III-B responsiveness: mean over repetitions of each run's mean throughput,
    per variant x RTT x drop (bit/s), plus the link-rate fraction."""
    df = ds.criterion("responsiveness")
    out = _agg(df, ["variant", "rtt_ms", "drop"], "mean_bps")
    if not df.empty:
        frac = df.groupby(["variant", "rtt_ms", "drop"])["mean_frac"].mean().rename("frac").reset_index()
        out = out.merge(frac, on=["variant", "rtt_ms", "drop"], how="left")
    else:
        out["frac"] = []
    return out


def efficiency(ds: Dataset) -> pd.DataFrame:
    """Sec. III-B efficiency per variant x RTT x drop: quantiles of the pooled per-interval
    throughput of all repetitions (from the samples table; numpy linear quantiles)."""
    cols = ["variant", "rtt_ms", "drop", "q25", "q50", "q75", "n"]
    df = ds.criterion("responsiveness")
    if df.empty or ds.results is None:
        return pd.DataFrame(columns=cols)
    names, codes, values = tidy.sample_column_by_run(ds.results)
    keys = df.set_index("run")[["variant", "rtt_ms", "drop"]]
    conds = keys.drop_duplicates().reset_index(drop=True)
    cond_id = keys.merge(conds.reset_index(), on=["variant", "rtt_ms", "drop"], how="left")["index"]
    cond_of_run = dict(zip(keys.index, cond_id))
    # run code -> condition index (-1: a run the figures do not use)
    lut = np.array([cond_of_run.get(n, -1) for n in names], dtype=np.int64)
    per_sample = lut[codes] if len(codes) else np.zeros(0, dtype=np.int64)
    keep = (per_sample >= 0) & np.isfinite(values)
    per_sample, vals = per_sample[keep], values[keep]
    order = np.argsort(per_sample, kind="stable")
    per_sample, vals = per_sample[order], vals[order]
    bounds = np.searchsorted(per_sample, np.arange(len(conds) + 1))
    rows = []
    for i, c in conds.iterrows():
        seg = vals[bounds[i]:bounds[i + 1]].astype(np.float64)
        if seg.size == 0:
            continue
        q = np.quantile(seg, [0.25, 0.5, 0.75])
        rows.append({"variant": c["variant"], "rtt_ms": c["rtt_ms"], "drop": c["drop"],
                     "q25": q[0], "q50": q[1], "q75": q[2], "n": int(seg.size)})
    return pd.DataFrame(rows, columns=cols)


def efficiency_samples(ds: Dataset, runs: list[str]) -> pd.DataFrame:
    s = tidy.read_samples(ds.results, runs=runs, columns=["run", "throughput_bps"])
    s["run"] = s["run"].astype(str)
    meta = ds.runs.set_index("run")[["variant", "rtt_ms", "drop"]]
    return s.join(meta, on="run")


def efficiency_drop(ds: Dataset, rtt_ms: float, expected_drops: list[float] | None = None) -> tuple[float | None, bool]:
    """The drop rate the efficiency panel at ``rtt_ms`` shows: the design's (the paper's
    choice), else the present drop closest to it in log scale (ties: the larger). Returns
    (drop, is_preferred)."""
    preferred = ds.efficiency_panel_drop.get(round(rtt_ms, 3))
    df = ds.criterion("responsiveness")
    present = sorted(df.loc[np.isclose(df["rtt_ms"], rtt_ms), "drop"].unique())
    if not present:
        return (preferred if preferred in (expected_drops or []) else None), False
    if preferred is not None and any(np.isclose(present, preferred)):
        return preferred, True
    target = np.log10(preferred) if preferred else -5.0
    nonzero = [d for d in present if d > 0] or present
    best = min(nonzero, key=lambda d: (abs((np.log10(d) if d > 0 else -9) - target), -d))
    return float(best), False


def two_flow(ds: Dataset, criterion: str) -> pd.DataFrame:
    """Sec. III-B fairness / downward compatibility per pairing x RTT: Jain's index and
    link utilisation (means over repetitions), and both flows' mean throughputs."""
    df = ds.criterion(criterion)
    keys = ["variant", "second", "rtt_ms"]
    cols = keys + ["jain", "utilisation_bps", "utilisation_frac", "flow1_bps", "flow2_bps", "n"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(keys, dropna=False)
    out = g[["jain", "utilisation_bps", "utilisation_frac", "flow1_bps", "flow2_bps"]].mean()
    return out.join(g.size().rename("n")).reset_index()[cols]


def convergence(ds: Dataset) -> pd.DataFrame:
    """Sec. III-B convergence per pairing x RTT: mean convergence time and spread over the
    repetitions that converged; runs that never converged are counted, not averaged."""
    df = ds.criterion("convergence")
    keys = ["variant", "second", "rtt_ms"]
    cols = keys + ["conv_time_s", "spread_bps", "ubar_bps", "n", "n_not_converged"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    conv = df[df["converged"]]
    g = conv.groupby(keys, dropna=False)[["conv_time_s", "spread_bps", "ubar_bps"]].mean()
    counts = df.groupby(keys, dropna=False).agg(n=("run", "size"),
                                                n_not_converged=("converged", lambda s: int((~s.astype(bool)).sum())))
    return counts.join(g).reset_index()[cols]


def table2(design: dict, campaign: str, backend: str) -> pd.DataFrame:
    """Table II as data: per criterion, the metrics, the factor levels and the run count."""
    runs = spec.expand(design, campaign, backend)
    counts = spec.counts_by_criterion(runs)
    rows = []
    for name in spec.criteria_of(design, campaign):
        crit = design["criteria"][name]
        sel = [r for r in runs if r.criterion == name]
        rows.append({"criterion": name, "metrics": ", ".join(crit.get("metrics", [])),
                     "variants": sorted({r.flows[0].variant for r in sel}, key=list(VARIANT_LABELS).index),
                     "second": sorted({r.flows[1].variant for r in sel if len(r.flows) > 1}),
                     "rtt_ms": sorted({r.rtt_ms for r in sel}), "drop": sorted({r.drop for r in sel}),
                     "repetitions": max((r.rep for r in sel), default=0),
                     "duration_s": max((r.duration_s for r in sel), default=0.0),
                     "runs": counts.get(name, 0)})
    return pd.DataFrame(rows)

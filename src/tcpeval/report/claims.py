"""The original study's findings as checks on our data (paper/claims.yaml).

Each claim names a check over a table of cells (means over repetitions of the per-run
metrics, one row per condition). A check returns a verdict -- ``holds``, ``does not
hold`` or ``not enough data`` -- and a short statement of what we measured.

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
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from tcpeval.analysis import tables as T
from tcpeval.report.latex import escape

HOLDS, FAILS, NODATA = "holds", "does not hold", "not enough data"
METRICS = {
    "responsiveness": ["mean_gbps", "mean_frac", "q25_frac", "q50_frac", "q75_frac"],
    "fairness": ["jain", "utilisation_gbps", "utilisation_frac", "share_first"],
    "compatibility": ["jain", "utilisation_gbps", "utilisation_frac", "share_first"],
    "convergence": ["conv_time_s", "spread_gbps", "spread_frac"],
}


class ClaimError(ValueError):
    pass


@dataclass
class Verdict:
    id: str
    section: str
    paper: str
    check: str
    verdict: str
    ours: str


def cells(ds: T.Dataset) -> pd.DataFrame:
    """Per-condition means of every per-run metric the claims may use."""
    r = ds.runs.copy()
    if r.empty:
        return pd.DataFrame(columns=["criterion", "variant", "second", "rtt_ms", "drop"])
    r["mean_gbps"] = r["mean_bps"] / 1e9
    for q in ("q25", "q50", "q75"):
        r[f"{q}_frac"] = r[f"{q}_bps"] / r["link_rate_bps"]
    r["utilisation_gbps"] = r["utilisation_bps"] / 1e9
    r["share_first"] = r["flow1_bps"] / (r["flow1_bps"] + r["flow2_bps"])
    r["spread_gbps"] = r["spread_bps"] / 1e9
    r["spread_frac"] = r["spread_bps"] / r["ubar_bps"]
    # convergence metrics average over converged runs only (NaN otherwise, skipped by mean)
    metric_cols = sorted({m for ms in METRICS.values() for m in ms})
    r["second"] = r["second"].fillna("")
    out = r.groupby(["criterion", "variant", "second", "rtt_ms", "drop"])[metric_cols].mean().reset_index()
    return out


def _select(df: pd.DataFrame, where: dict) -> pd.DataFrame:
    m = np.ones(len(df), dtype=bool)
    for key, val in where.items():
        if key == "criterion":
            m &= (df["criterion"] == val).to_numpy()
        elif key in ("variant", "second"):
            vals = val if isinstance(val, list) else [val]
            m &= df[key].isin(vals).to_numpy()
        elif key in ("rtt_ms", "drop"):
            vals = val if isinstance(val, list) else [val]
            m &= np.isin(np.round(df[key].astype(float), 12), np.round(np.array(vals, dtype=float), 12))
        elif key in ("rtt_min", "drop_min"):
            m &= (df[key[:-4] if key == "drop_min" else "rtt_ms"].astype(float) >= float(val) - 1e-12).to_numpy()
        elif key in ("rtt_max", "drop_max"):
            m &= (df[key[:-4] if key == "drop_max" else "rtt_ms"].astype(float) <= float(val) + 1e-12).to_numpy()
        elif key == "same_variant":
            m &= ((df["variant"] == df["second"]) == bool(val)).to_numpy()
        else:
            raise ClaimError(f"unknown selection key {key!r}")
    return df[m]


def _threshold(t) -> float:
    if isinstance(t, dict):
        if "gbps" in t and "of_link_gbps" in t:
            return float(t["gbps"]) / float(t["of_link_gbps"])
        raise ClaimError(f"threshold {t!r}: give a number or {{gbps, of_link_gbps}}")
    return float(t)


def _fmt(metric: str, v: float) -> str:
    if v is None or not np.isfinite(v):
        return "n/a"
    if metric.endswith("_frac") or metric == "share_first":
        return f"{100 * v:.1f}\\,\\%"
    if metric.endswith("_gbps"):
        return f"{v:.2f}\\,Gbit/s"
    if metric.endswith("_s"):
        return f"{v:.2f}\\,s"
    return f"{v:.3f}"


def _label_cell(row) -> str:
    parts = [T.pairing_label(row["variant"], row["second"] or None)]
    parts.append(f"{row['rtt_ms']:g}\\,ms")
    if row["criterion"] == "responsiveness":
        parts.append(f"drop {row['drop']:g}")
    return " ".join(parts)


def evaluate(claim: dict, df: pd.DataFrame) -> tuple[str, str]:
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
        vals = sel[metric].to_numpy(float)
        if kind == "between":
            lo, hi = _threshold(check["lo"]), _threshold(check["hi"])
            ok = (vals >= lo) & (vals <= hi)
        else:
            t = _threshold(check["threshold"])
            ok = {"at_least": vals >= t, "at_most": vals <= t, "above": vals > t, "below": vals < t}[kind]
        worst = sel.iloc[int(np.argmin(vals))] if kind in ("at_least", "above", "between") else sel.iloc[int(np.argmax(vals))]
        rng = f"{_fmt(metric, vals.min())} to {_fmt(metric, vals.max())}" if len(vals) > 1 else _fmt(metric, vals[0])
        text = f"{len(vals)} cell(s), {rng}"
        if not ok.all():
            text += f"; {int((~ok).sum())} fail, e.g. {_label_cell(worst)}"
        return (HOLDS if ok.all() else FAILS), text

    if kind in ("best", "worst"):
        expect = check["expect"] if isinstance(check["expect"], list) else [check["expect"]]
        sel = _select(df, base).dropna(subset=[metric])
        per = check.get("per", [])
        groups = [g for _, g in sel.groupby(per)] if per else ([sel] if len(sel) else [])
        need = int(check.get("min_variants", 2))
        results, texts = [], []
        for g in groups:
            if g["variant"].nunique() < need or not g["variant"].isin(expect).any():
                continue
            top = g.loc[g[metric].idxmax() if kind == "best" else g[metric].idxmin()]
            results.append(top["variant"] in expect)
            where = f" at {top['rtt_ms']:g}\\,ms" if "rtt_ms" in per else ""
            texts.append(f"{kind}{where}: {T.label(top['variant'])} ({_fmt(metric, top[metric])}"
                         f" of {g['variant'].nunique()} variants)")
        if not results:
            return NODATA, f"fewer than {need} variants (with {'/'.join(T.label(e) for e in expect)}) present"
        return (HOLDS if all(results) else FAILS), "; ".join(texts)

    if kind in ("greater", "close"):
        a = _select(df, {**base, **check["a"]}).dropna(subset=[metric])
        b = _select(df, {**base, **check["b"]}).dropna(subset=[metric])
        if len(a) < min_cells or len(b) < min_cells:
            return NODATA, f"cells present: {len(a)} and {len(b)}"
        ma, mb = float(a[metric].mean()), float(b[metric].mean())
        text = f"{_fmt(metric, ma)} vs {_fmt(metric, mb)}"
        if kind == "greater":
            return (HOLDS if ma > mb else FAILS), text
        rel = abs(ma - mb) / max(abs(ma), abs(mb)) if max(abs(ma), abs(mb)) > 0 else 0.0
        tol = float(check["tolerance"])
        return (HOLDS if rel <= tol else FAILS), f"{text} ({100 * rel:.1f}\\,\\% apart)"

    if kind == "within":
        sel = _select(df, base).dropna(subset=[metric])
        per = check.get("per", [])
        tol = float(check["tolerance"])
        groups = [g for _, g in sel.groupby(per)] if per else ([sel] if len(sel) else [])
        groups = [g for g in groups if g["variant"].nunique() >= int(check.get("min_variants", 2))]
        if not groups:
            return NODATA, "fewer than two variants per group"
        worst_rel = 0.0
        for g in groups:
            hi, lo = g[metric].max(), g[metric].min()
            worst_rel = max(worst_rel, (hi - lo) / hi if hi > 0 else 0.0)
        return (HOLDS if worst_rel <= tol else FAILS), (f"{len(groups)} group(s); largest gap "
                                                        f"{100 * worst_rel:.1f}\\,\\%")
    raise ClaimError(f"claim {claim['id']}: unknown check type {kind!r}")


def load_claims(path: str | Path) -> list[dict]:
    data = yaml.safe_load(Path(path).read_text())
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ClaimError(f"{path}: expected a top-level 'claims' list")
    ids = set()
    for c in claims:
        for key in ("id", "section", "paper", "check"):
            if key not in c:
                raise ClaimError(f"{path}: claim {c.get('id', '?')} lacks {key!r}")
        if c["id"] in ids:
            raise ClaimError(f"{path}: duplicate claim id {c['id']!r}")
        ids.add(c["id"])
    return claims


def check_all(claims: list[dict], ds: T.Dataset) -> list[Verdict]:
    df = cells(ds)
    out = []
    for c in claims:
        verdict, ours = evaluate(c, df) if len(df) else (NODATA, "no runs")
        out.append(Verdict(c["id"], str(c["section"]), c["paper"], c.get("encoding", ""), verdict, ours))
    return out


def table(verdicts: list[Verdict]) -> str:
    """The reproduction table: claim, our encoding of it, verdict, what we measured."""
    mark = {HOLDS: r"\textsf{holds}", FAILS: r"\textbf{does not hold}", NODATA: r"\textit{not enough data}"}
    lines = [r"\begin{longtable}{@{}p{0.05\linewidth}p{0.37\linewidth}p{0.15\linewidth}p{0.35\linewidth}@{}}",
             r"\toprule", r"Sec. & Published finding (paraphrased) & Verdict & Our data \\", r"\midrule",
             r"\endhead", r"\bottomrule", r"\endfoot"]
    for v in verdicts:
        finding = escape(v.paper) + (f" \\emph{{Check: {escape(v.check)}}}" if v.check else "")
        lines.append(f"{escape(v.section)} & {finding} & {mark[v.verdict]} & {v.ours} \\\\")
    lines.append(r"\end{longtable}")
    return "\n".join(lines) + "\n"


def by_campaign(columns: dict[str, list[Verdict]], absent: list[str]) -> str:
    """Which finding holds at which campaign: one row per claim, one column per campaign
    whose results exist; campaigns without results are named below the table."""
    mark = {HOLDS: r"\textsf{holds}", FAILS: r"\textbf{no}", NODATA: r"\textit{n/a}"}
    names = list(columns)
    ids = [v.id for v in next(iter(columns.values()))] if columns else []
    lines = [r"\begin{longtable}{@{}l" + "c" * len(names) + "@{}}", r"\toprule",
             "Finding & " + " & ".join(f"\\texttt{{{escape(n)}}}" for n in names) + r" \\",
             r"\midrule", r"\endhead", r"\bottomrule", r"\endfoot"]
    for i, cid in enumerate(ids):
        marks = [mark[columns[n][i].verdict] for n in names]
        lines.append(f"\\texttt{{{escape(cid)}}} & " + " & ".join(marks) + r" \\")
    lines.append(r"\end{longtable}")
    tail = ""
    if absent:
        tail = ("Campaigns without results for this backend: "
                + ", ".join(f"\\texttt{{{escape(a)}}}" for a in absent) + ".\\par\n")
    return "\n".join(lines) + "\n" + tail


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    return {k: sum(v.verdict == k for v in verdicts) for k in (HOLDS, FAILS, NODATA)}

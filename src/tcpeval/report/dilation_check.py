"""The cross-validation of time dilation in the manuscript's setup section: a figure (per
comparison of a condition at k > 1 with k = 1, the mean's difference and the KS p-value)
and a paragraph whose numbers come from the campaign's tables
(tcpeval.analysis.dilation_check).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tcpeval.analysis import dilation_check as dc
from tcpeval.analysis import tables as T
from tcpeval.analysis import tidy
from tcpeval.report import method_check
from tcpeval.report.figures import _order, _palette, _save, _style, _write_tex
from tcpeval.report.latex import escape, num

GBPS = 1e9
MARKERS = {2: "o", 4: "s", 8: "D"}


def results_of(ds: T.Dataset) -> list[dict]:
    samples = tidy.read_samples(ds.results, runs=list(ds.runs["run"]),
                                columns=["run", "flow", "t_s", "throughput_bps"])
    return dc.conditions(ds.runs, ds.expected, samples)


def draw(results: list[dict], prefix: Path) -> list[Path]:
    """Per comparison: the mean's difference from k = 1 (left, with the tolerance band)
    and the KS test's p-value (right, with alpha); comparisons without usable runs on one
    side are marked n/a."""
    import matplotlib.pyplot as plt

    _style()
    order = _order([r["variant"] for r in results])
    conds = sorted({(r["variant"], r["rtt_ms"], r["drop"]) for r in results},
                   key=lambda c: (order.index(c[0]), c[1], c[2]))
    factors = sorted({r["factor"] for r in results})
    colours = _palette([c[0] for c in conds])
    multi_rtt = len({c[1] for c in conds}) > 1
    fig, (ax_m, ax_p) = plt.subplots(1, 2, figsize=(6.8, 2.5), sharex=True)
    width = 0.6 / max(1, len(factors))
    ax_m.axhspan(-100 * dc.MEAN_TOLERANCE, 100 * dc.MEAN_TOLERANCE, color="0.9", lw=0)
    ax_m.axhline(0, color="0.4", lw=0.6)
    ax_p.axhline(dc.KS_ALPHA, color="0.4", lw=0.8, ls="--")
    for i, cond in enumerate(conds):
        of_cond = {r["factor"]: r for r in results if (r["variant"], r["rtt_ms"], r["drop"]) == cond}
        if of_cond and not any(r["judged"] for r in of_cond.values()):
            # one mark for the condition: a mark per factor, a few points apart, overlapped
            for ax, y in ((ax_m, 0), (ax_p, 1)):
                ax.text(i, y, "n/a", rotation=90, ha="center", va="bottom", fontsize=5, color="0.5")
            continue
        for j, k in enumerate(factors):
            r = of_cond.get(k)
            if r is None:
                continue
            x = i + (j - (len(factors) - 1) / 2) * width
            style = dict(marker=MARKERS.get(k, "^"), color=colours[cond[0]], s=18,
                         edgecolors="black" if r["judged"] and not r["agree"] else "none", linewidths=0.7)
            if not r["judged"]:  # beside judged factors: a small mark where its point would be
                for ax, y in ((ax_m, 0), (ax_p, 1)):
                    ax.scatter(x, y, marker="x", color="0.5", s=8, linewidths=0.6)
                continue
            ax_m.scatter(x, 100 * r["mean_rel_diff"], **style)
            ax_p.scatter(x, max(r["ks_p"], 1e-6), **style)
    labels = [f"{T.label(v)}\n" + (f"{rtt:g} ms, " if multi_rtt else "") + (f"p={p:g}" if p else "p=0")
              for v, rtt, p in conds]
    for ax in (ax_m, ax_p):
        ax.set_xticks(range(len(conds)))
        ax.set_xticklabels(labels, fontsize=5, rotation=90)
    ax_m.set_ylabel("mean, k vs k = 1 (%)")
    ax_p.set_yscale("log")
    ax_p.set_ylim(5e-7, 2)
    ax_p.set_ylabel("KS p-value, per-interval")
    for k in factors:
        ax_m.scatter([], [], marker=MARKERS.get(k, "^"), color="0.4", s=18, label=f"k = {k}")
    # above the axes: the points may lie anywhere inside
    ax_m.legend(fontsize=6, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(factors),
                borderaxespad=0.2)
    fig.tight_layout()
    return _save(fig, prefix)


def _p(p) -> str:
    return "$p < 0.001$" if p == p and p < 1e-3 else f"$p = {num(p, 3)}$"


def flag_summary(ds: T.Dataset) -> str:
    """Why the cross-validation's runs were flagged, per factor: '13 of 24 runs at k = 4
    (ACK clock)'."""
    flagged = ds.flagged_runs
    if not len(flagged):
        return ""
    parts = []
    for k in sorted({dc.factor_of(c) for c in flagged["criterion"] if dc.factor_of(c)}):
        rows = flagged[flagged["criterion"].map(dc.factor_of) == k]
        expected = int((ds.expected["criterion"].map(dc.factor_of) == k).sum())
        kinds = sorted({check for text in rows["flag_checks"].fillna("") for check in text.split("; ") if check})
        parts.append(f"{len(rows)} of {expected} runs at $k = {k}$"
                     + (f" ({escape(', '.join(kinds))})" if kinds else ""))
    return "Flagged by their fidelity verdict and left out: " + "; ".join(parts) + "."


def _pct(x) -> str:
    return num(100 * x, 1) if x == x else num(x)


def _sentence(s: dict, ds: T.Dataset | None, campaign: str | None, rate_bps: float) -> str:
    if ds is None or not s.get("comparisons"):
        return ("The cross-validation of time dilation has not been run for this backend "
                "(\\texttt{make validate-dilation}); its figure and numbers are missing.")
    reps = int(ds.expected.groupby(["criterion", "variant", "rtt_ms", "drop"]).size().max())
    duration = float(ds.runs["duration_s"].median()) if len(ds.runs) else math.nan
    factors = ", ".join(str(k) for k in s["factors"])
    parts = [f"We cross-validated time dilation on this host (campaign \\texttt{{{escape(campaign)}}}): "
             f"{s['comparisons']} comparisons of a condition at $k = 1$ with the same condition at "
             f"$k \\in \\{{{factors}\\}}$, for {len(s['variants'])} ports, {reps} repetitions of "
             f"{num(duration, 0)}\\,s (virtual) each at {num(rate_bps / GBPS, 2)}\\,Gb/s, with the same drop "
             f"sequence at every factor."]
    if s["judged"]:
        parts.append(
            f"Of the {s['judged']} comparisons with usable runs on both sides, {s['agree']} agree: the mean "
            f"throughputs differ by at most {_pct(s['max_abs_mean_diff'])}\\,\\% (tolerance "
            f"{num(100 * dc.MEAN_TOLERANCE, 0)}\\,\\%), a two-sample Kolmogorov-Smirnov test at "
            f"$\\alpha = {dc.KS_ALPHA:g}$ (successive intervals of a run are correlated, so each side "
            f"counts as its effective number of independent intervals; resolution "
            f"{num(100 * dc.KS_RESOLUTION, 0)}\\,\\% of the link rate or one receiver read of "
            f"{num(dc.READ_QUANTUM_BYTES / 1000, 1)}\\,kB per interval, whichever is coarser) tells the per-interval "
            f"distributions apart in "
            f"{s['failed_checks']['distribution']} (smallest {_p(s['min_ks_p'])}), and the "
            f"loss-event counts differ beyond Poisson noise in {s['failed_checks']['loss_events']} "
            f"(Fig.~\\ref{{fig:dilation-check}}).")
        if s["variants_all_agree"]:
            names = ", ".join(escape(T.label(v)) for v in s["variants_all_agree"])
            parts.append(f"Every comparison agrees for {names}.")
    if s["not_judged"]:
        parts.append(f"{s['not_judged']} comparison(s) are not judged: every run on one side was "
                     f"flagged by its fidelity verdict or is missing, or the two sides ran on different "
                     f"link mechanisms.")
    parts.append(flag_summary(ds) or escape(ds.note()) + ".")
    return " ".join(parts)


def write(ds: T.Dataset | None, campaign: str | None, fig_dir: Path, out_tex: Path,
          out_json: Path | None = None) -> dict:
    """dilation-check.{pdf,png,tex} in fig_dir (when there is data), the paragraph in
    out_tex, the comparisons in out_json. ds None: the campaign has no results."""
    results = results_of(ds) if ds is not None else []
    s = dc.summary(results)
    rates = [r["rate_bps"] for r in results if r["rate_bps"] == r["rate_bps"]]
    rate = float(np.median(rates)) if rates else math.nan
    lines = ["% generated by tcpeval dilation-check"]
    if s["judged"]:
        prefix = Path(fig_dir) / "dilation-check"
        draw(results, prefix)
        _write_tex(prefix, "Time dilation cross-validated: per port and condition, the mean throughput "
                           "on a path slowed $k$-fold (read back in virtual units) against the same path at "
                           f"$k = 1$ (left; band $\\pm${num(100 * dc.MEAN_TOLERANCE, 0)}\\,\\%) and the "
                           "two-sample KS test of their per-interval throughput (right; dashed: "
                           f"$\\alpha = {dc.KS_ALPHA:g}$); the same drop sequences at every factor, outlined "
                           "markers disagree; n/a (a grey cross beside other factors): no usable run on one side. " + escape(ds.note()) + ".",
                   "fig:dilation-check")
        lines.append("\\input{generated/figures/dilation-check.tex}")
    lines.append(_sentence(s, ds, campaign, rate))
    method_check.write_outputs(lines, out_tex, out_json,
                               {"campaign": campaign, "rate_bps": rate, "summary": s, "results": results})
    return {"summary": s, "results": results}


def table(results: list[dict]) -> str:
    """The comparisons as a plain-text table (make validate-dilation prints it)."""
    lines = [f"{'variant':9s} {'RTT':>5s} {'drop':>6s} {'k':>3s} {'mean k=1':>9s} {'mean k':>9s} "
             f"{'diff':>6s} {'KS p':>6s} {'losses':>13s}  {'ok runs':>7s}  agree"]
    for r in results:
        head = f"{r['variant']:9s} {r['rtt_ms']:5g} {r['drop']:6g} {r['factor']:3d} "
        if not r["judged"]:
            lines.append(head + f" not judged: {r['why']}")
            continue
        lines.append(head + f"{r['mean_bps'][0] / GBPS:9.3f} {r['mean_bps'][1] / GBPS:9.3f} "
                     f"{100 * r['mean_rel_diff']:+5.1f}% {r['ks_p']:6.3f} "
                     f"{r['loss_events'][0]:6d}/{r['loss_events'][1]:<6d}  "
                     f"{r['ok_runs'][0]}/{r['runs'][0]} {r['ok_runs'][1]}/{r['runs'][1]}  "
                     + method_check.verdict_cell(r))
    return "\n".join(lines)

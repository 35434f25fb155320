"""The paper's figures, one function each, from the tidy tables (never from traces).

Each function draws into files ``<prefix>.pdf`` and ``<prefix>.png`` and writes
``<prefix>.tex``: a complete LaTeX figure environment whose caption is generated too
(which drop rate a panel shows, what is missing or excluded). A partial matrix renders
what exists; every expected cell without data is marked "n/a" and counted.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from tcpeval.analysis import tables as T  # noqa: E402
from tcpeval.condition import payload_ceiling_bps  # noqa: E402
from tcpeval.paths import format_rtt  # noqa: E402
from tcpeval.report.latex import escape, fmt_drop  # noqa: E402

GBPS = 1e9
NA_COLOR = "0.55"
FIG_WIDTH = 6.8
FIGURES = ("responsiveness", "utilisation", "convergence", "flows")


def _style() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.95)
    plt.rcParams.update({"pdf.fonttype": 42, "savefig.bbox": "tight", "axes.titlesize": 9,
                         "legend.fontsize": 7, "legend.title_fontsize": 7})


def _palette(variants: list[str]) -> dict:
    colours = sns.color_palette("colorblind", n_colors=len(T.VARIANT_LABELS))
    return {v: colours[i] for i, v in enumerate(T.VARIANT_LABELS) if v in variants}


def _order(variants) -> list[str]:
    known = list(T.VARIANT_LABELS)
    return sorted(set(variants), key=lambda v: known.index(v) if v in known else len(known))


def _save(fig, prefix: Path) -> list[Path]:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("pdf", "png"):
        path = prefix.with_name(prefix.name + "." + ext)
        meta = {"CreationDate": None} if ext == "pdf" else {}
        fig.savefig(path, dpi=150, metadata=meta)
        out.append(path)
    plt.close(fig)
    return out


def _write_tex(prefix: Path, caption: str, label: str, width: str = "\\linewidth") -> Path:
    # Paths in the snippet are relative to the paper directory (generated/figures/...).
    tex = prefix.with_name(prefix.name + ".tex")
    tex.write_text("\\begin{figure}[tbp]\n  \\centering\n"
                   f"  \\includegraphics[width={width}]{{generated/figures/{prefix.name}.pdf}}\n"
                   f"  \\caption{{{caption}}}\n  \\label{{{label}}}\n\\end{{figure}}\n")
    return tex


def _na(ax, x, y, text="n/a", **kw):
    ax.text(x, y, text, ha="center", va="bottom", fontsize=6, color=NA_COLOR, rotation=90, **kw)


def _note_sentence(ds: T.Dataset, criteria: list[str]) -> str:
    notes = [ds.note(c) for c in criteria]
    notes = [n for n in notes if n != "all runs of the campaign present"]
    if not notes:
        return "All runs of the campaign are present."
    text = escape("; ".join(notes))
    return text[:1].upper() + text[1:] + "; empty cells are marked n/a."


# ---------------------------------------------------------------------------- Figs. 4-7

def responsiveness(ds: T.Dataset, rtt_ms: float, prefix: Path) -> dict:
    """Figs. 4-7: (a) mean throughput vs drop rate per variant; (b) the distribution of
    per-interval throughput per variant at one drop rate."""
    _style()
    exp = ds.expected_in("responsiveness")
    exp = exp[np.isclose(exp["rtt_ms"], rtt_ms)]
    variants = _order(exp["variant"]) or _order(ds.criterion("responsiveness")["variant"])
    drops = sorted(exp["drop"].unique())
    resp = T.responsiveness(ds)
    resp = resp[np.isclose(resp["rtt_ms"].astype(float), rtt_ms)] if len(resp) else resp
    pal = _palette(variants)
    link = float(np.nanmedian(ds.runs["link_rate_bps"])) if len(ds.runs) else np.nan

    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(FIG_WIDTH, 3.0), gridspec_kw={"width_ratios": [1.25, 1]})
    xpos = {d: i for i, d in enumerate(drops)}
    n_missing_cells = 0
    for k, v in enumerate(variants):
        cell = resp[resp["variant"] == v].sort_values("drop") if len(resp) else resp
        if len(cell):
            x = [xpos[d] + (k - len(variants) / 2) * 0.04 for d in cell["drop"] if d in xpos]
            keep = cell[cell["drop"].isin(xpos)]
            y = keep["mean"] / GBPS
            err = np.vstack([y - keep["min"] / GBPS, keep["max"] / GBPS - y])
            ax_a.errorbar(x, y, yerr=err, marker="o", ms=3, lw=1, capsize=2, color=pal[v], label=T.label(v))
        else:
            ax_a.plot([], [], marker="o", color=pal[v], label=f"{T.label(v)} (n/a)")
    top = (link if link == link else 10 * GBPS) / GBPS * 1.05
    for d in drops:
        have = set(resp.loc[np.isclose(resp["drop"].astype(float), d), "variant"]) if len(resp) else set()
        lacking = [v for v in variants if v not in have]
        if lacking:
            n_missing_cells += len(lacking)
            ax_a.axvspan(xpos[d] - 0.3, xpos[d] + 0.3, color="0.93", zorder=0)
            ax_a.text(xpos[d], top * 0.97, f"n/a: {len(lacking)} of {len(variants)}", ha="center", va="top",
                      fontsize=6, color=NA_COLOR)
    if link == link:
        ax_a.axhline(payload_ceiling_bps(link) / GBPS, color="0.3", lw=0.8, ls=":", label="payload ceiling")
    ax_a.set_xticks(range(len(drops)), [fmt_drop(d, tex=False) for d in drops])
    ax_a.set_xlim(-0.5, len(drops) - 0.5)
    ax_a.set_ylim(0, top)
    ax_a.set_xlabel("drop rate")
    ax_a.set_ylabel("mean throughput [Gbit/s]")
    ax_a.set_title("(a) responsiveness")
    handles, labels_a = ax_a.get_legend_handles_labels()
    fig.legend(handles, labels_a, loc="lower center", ncol=len(labels_a), frameon=False,
               bbox_to_anchor=(0.5, -0.02))

    eff_drop, preferred = T.efficiency_drop(ds, rtt_ms, drops)
    paper_drop = ds.efficiency_panel_drop.get(round(rtt_ms, 3))
    data = pd.DataFrame()
    if eff_drop is not None:
        runs = ds.criterion("responsiveness")
        sel = runs[np.isclose(runs["rtt_ms"], rtt_ms) & np.isclose(runs["drop"], eff_drop)]
        if len(sel):
            data = T.efficiency_samples(ds, sel["run"].tolist())
            data["throughput_gbps"] = data["throughput_bps"] / GBPS
    labels = [T.label(v) for v in variants]
    if len(data):
        data["label"] = data["variant"].map(T.label)
        sns.boxplot(data=data, x="label", y="throughput_gbps", order=labels, hue="label", hue_order=labels,
                    palette={T.label(v): pal[v] for v in variants}, showfliers=False, width=0.6,
                    linewidth=0.8, ax=ax_b, legend=False)
    present = set(data["variant"]) if len(data) else set()
    for i, v in enumerate(variants):
        if v not in present:
            _na(ax_b, i, top * 0.02)
    ax_b.set_xticks(range(len(labels)), labels, rotation=30)
    ax_b.set_xlim(-0.5, len(labels) - 0.5)
    ax_b.set_ylim(0, top)
    ax_b.set_xlabel("")
    ax_b.set_ylabel("per-interval throughput [Gbit/s]")
    ax_b.set_title(f"(b) efficiency at drop {fmt_drop(eff_drop, tex=False) if eff_drop is not None else 'n/a'}")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    files = _save(fig, prefix)

    if eff_drop is None:
        choice = "no responsiveness run at this RTT, so panel (b) is empty"
    elif preferred:
        choice = f"panel (b) shows drop rate {fmt_drop(eff_drop)}, as in the original study"
    else:
        want = fmt_drop(paper_drop) if paper_drop is not None else "none"
        choice = (f"panel (b) shows drop rate {fmt_drop(eff_drop)} because the original study's "
                  f"{want} is not in the data")
    caption = (f"Responsiveness and efficiency at {format_rtt(rtt_ms)}\\,ms RTT. (a) Mean throughput per run, "
               "averaged over repetitions (bars: min to max); dotted: the link's payload ceiling. (b) Per-interval "
               "throughput of all repetitions (box: quartiles, whiskers 1.5 IQR, outliers not drawn); "
               f"{choice}. {_note_sentence(ds, ['responsiveness'])}")
    tex = _write_tex(prefix, caption, f"fig:rtt{format_rtt(rtt_ms)}")
    return {"files": files + [tex], "efficiency_drop": eff_drop, "preferred": preferred,
            "missing_cells": n_missing_cells}


# ---------------------------------------------------------------------------- helpers for bar charts

def _bars(ax, groups: list, hues: list, value, pal: dict, width=0.8, annotate=None, top=1.0) -> int:
    """Grouped bars; ``value(g, h)`` -> number or None (missing -> "n/a"). Returns #missing."""
    n, missing = len(hues), 0
    w = width / max(n, 1)
    labelled = set()
    for gi, g in enumerate(groups):
        for hi, h in enumerate(hues):
            x = gi - width / 2 + w * (hi + 0.5)
            v = value(g, h)
            if v is None or not np.isfinite(v):
                missing += 1
                _na(ax, x, top * 0.02)
                continue
            ax.bar(x, v, w * 0.92, color=pal[h], label=None if h in labelled else h)
            labelled.add(h)
            if annotate:
                text = annotate(g, h)
                if text:
                    ax.text(x, v + top * 0.01, text, ha="center", va="bottom", fontsize=5, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xlim(-0.5, len(groups) - 0.5)  # keeps n/a marks of empty cells inside the axes
    return missing


def _cell(df: pd.DataFrame, **keys):
    m = np.ones(len(df), dtype=bool)
    for k, v in keys.items():
        m &= np.isclose(df[k].astype(float), v) if isinstance(v, float) else (df[k] == v).to_numpy()
    sel = df[m]
    return sel.iloc[0] if len(sel) else None


# ---------------------------------------------------------------------------- Fig. 8

def utilisation(ds: T.Dataset, prefix: Path) -> dict:
    """Fig. 8: link utilisation (sum of both flows' means) of the two-flow runs per RTT;
    (a) two flows of the same variant, (b) each variant against Reno. Jain's index on top."""
    _style()
    fig, axes = plt.subplots(1, 2, figsize=(FIG_WIDTH, 2.6), sharey=True)
    link = float(np.nanmedian(ds.runs["link_rate_bps"])) if len(ds.runs) else np.nan
    top = (link if link == link else 10 * GBPS) / GBPS * 1.15
    missing = 0
    for ax, crit, title in zip(axes, ("fairness", "compatibility"), ("(a) same variant", "(b) against Reno")):
        exp = ds.expected_in(crit)
        agg = T.two_flow(ds, crit)
        rtts = sorted(exp["rtt_ms"].unique())
        variants = _order(exp["variant"])
        pal = _palette(variants)
        hues = [T.label(v) for v in variants]
        pal_l = {T.label(v): pal[v] for v in variants}
        back = {T.label(v): v for v in variants}

        def val(r, h, agg=agg, back=back):
            c = _cell(agg, rtt_ms=float(r), variant=back[h]) if len(agg) else None
            return None if c is None else c["utilisation_bps"] / GBPS

        def ann(r, h, agg=agg, back=back):
            c = _cell(agg, rtt_ms=float(r), variant=back[h])
            return f"J={c['jain']:.2f}" if c is not None and np.isfinite(c["jain"]) else None

        missing += _bars(ax, rtts, hues, val, pal_l, annotate=ann, top=top)
        ax.set_xticklabels([f"{format_rtt(r)} ms" for r in rtts])
        if not rtts:
            ax.text(0.5, 0.5, "not in this campaign", transform=ax.transAxes, ha="center", color=NA_COLOR)
        if link == link:
            ax.axhline(payload_ceiling_bps(link) / GBPS, color="0.3", lw=0.8, ls=":")
        ax.set_ylim(0, top)
        ax.set_xlabel("RTT")
        ax.set_title(title)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", ncol=3, frameon=True)
    axes[0].set_ylabel("link utilisation [Gbit/s]")
    fig.tight_layout()
    files = _save(fig, prefix)
    caption = ("Link utilisation, the sum of both flows' mean throughputs over the period they share, "
               "averaged over repetitions; J: Jain's fairness index of the two means; dotted: the link's payload ceiling. "
               "(a) Two flows of the same variant (fairness); (b) each high-speed variant against Reno "
               f"(downward compatibility). {_note_sentence(ds, ['fairness', 'compatibility'])}")
    tex = _write_tex(prefix, caption, "fig:utilisation")
    return {"files": files + [tex], "missing_cells": missing}


# ---------------------------------------------------------------------------- Fig. 9

def convergence(ds: T.Dataset, prefix: Path) -> dict:
    """Fig. 9: epsilon-convergence time of the new flow (bars) and spread (points) per
    pairing and RTT. All RTTs of the campaign are drawn (the original left out 0.2 ms)."""
    _style()
    exp = ds.expected_in("convergence")
    agg = T.convergence(ds)
    pairs = (exp[["variant", "second"]].drop_duplicates().assign(o=lambda d: d["variant"].map(_order(exp["variant"]).index))
             .sort_values(["o", "second"]).drop(columns="o"))
    groups = [(r.variant, r.second) for r in pairs.itertuples()]
    rtts = sorted(exp["rtt_ms"].unique())
    rtt_labels = [f"{format_rtt(r)} ms" for r in rtts]
    colours = dict(zip(rtt_labels, sns.color_palette("crest", n_colors=max(len(rtts), 1))))
    fig, ax = plt.subplots(figsize=(FIG_WIDTH, 2.8))
    ax2 = ax.twinx()
    ax2.grid(False)
    tmax = float(np.nanmax(agg["conv_time_s"])) if len(agg) and agg["conv_time_s"].notna().any() else 1.0
    top = tmax * 1.25
    not_conv = int(agg["n_not_converged"].sum()) if len(agg) else 0

    def cell(g, rl):
        r = rtts[rtt_labels.index(rl)]
        return _cell(agg, variant=g[0], second=g[1], rtt_ms=float(r)) if len(agg) else None

    def val(g, rl):
        c = cell(g, rl)
        return None if c is None else c["conv_time_s"]

    def ann(g, rl):
        c = cell(g, rl)
        return f"nc {int(c['n_not_converged'])}" if c is not None and c["n_not_converged"] else None

    missing = _bars(ax, groups, rtt_labels, val, colours, annotate=ann, top=top)
    width = 0.8 / max(len(rtt_labels), 1)
    spread_top = 0.0
    for gi, g in enumerate(groups):
        for hi, rl in enumerate(rtt_labels):
            c = cell(g, rl)
            if c is not None and np.isfinite(c["spread_bps"]):
                ax2.plot(gi - 0.4 + width * (hi + 0.5), c["spread_bps"] / GBPS, "D", ms=3.5,
                         color="black", mfc=colours[rl])
                spread_top = max(spread_top, c["spread_bps"] / GBPS)
    ax.set_xticklabels([T.pairing_label(*g) for g in groups], rotation=30, ha="right")
    ax.set_ylim(0, top)
    ax.set_ylabel("convergence time [s] (bars)")
    ax2.set_ylabel("spread [Gbit/s] (points)")
    # headroom so the highest point is drawn whole rather than cut by the frame
    ax2.set_ylim(0, spread_top * 1.15 if spread_top > 0 else None)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title="RTT", loc="upper left", ncol=len(rtt_labels), frameon=True)
    if not groups:
        ax.text(0.5, 0.5, "not in this campaign", transform=ax.transAxes, ha="center", color=NA_COLOR)
    fig.tight_layout()
    files = _save(fig, prefix)
    nc = (f" {not_conv} run(s) never reached the threshold (labelled nc); they are counted, not averaged."
          if not_conv else " Every run converged.")
    caption = ("Convergence of the flow that joins second (label: first/second variant). Bars: "
               "$\\varepsilon$-convergence time, the time from its start until its short-term throughput "
               "(moving average with $\\lambda=\\tevLambda$) first reaches $\\varepsilon=\\tevEpsilon$ times its mean "
               "over the period both flows run; points: spread, the mean distance between that mean and the "
               f"short-term throughput after convergence. Means over converged repetitions.{nc} "
               f"{_note_sentence(ds, ['convergence'])}")
    tex = _write_tex(prefix, caption, "fig:convergence")
    return {"files": files + [tex], "missing_cells": missing, "not_converged": not_conv}


# ---------------------------------------------------------------------------- Fig. 10

def flows(ds: T.Dataset, prefix: Path) -> dict:
    """Fig. 10: each flow's mean throughput in the two-flow runs started together
    (same variant and against Reno), one row per RTT: fairness at a glance."""
    _style()
    exp = pd.concat([ds.expected_in("fairness"), ds.expected_in("compatibility")])
    agg = pd.concat([T.two_flow(ds, "fairness"), T.two_flow(ds, "compatibility")])
    rtts = sorted(exp["rtt_ms"].unique())
    pairs = exp[["variant", "second"]].drop_duplicates()
    order = _order(pairs["variant"])
    pairs = pairs.assign(o=pairs["variant"].map(order.index), r=pairs["second"] == "reno").sort_values(["r", "o"])
    groups = [(p.variant, p.second) for p in pairs.itertuples()]
    fig, axes = plt.subplots(max(len(rtts), 1), 1, figsize=(FIG_WIDTH, 0.4 + 1.55 * max(len(rtts), 1)),
                             sharex=True, squeeze=False)
    link = float(np.nanmedian(ds.runs["link_rate_bps"])) if len(ds.runs) else np.nan
    top = (link if link == link else 10 * GBPS) / GBPS * 0.75
    c1, c2 = sns.color_palette("colorblind", 2)
    hues = ["first flow", "second flow"]
    missing = 0
    for ax, r in zip(axes[:, 0], rtts):
        def val(g, h, r=r):
            c = _cell(agg, variant=g[0], second=g[1], rtt_ms=float(r)) if len(agg) else None
            return None if c is None else c["flow1_bps" if h == hues[0] else "flow2_bps"] / GBPS

        def ann(g, h, r=r):
            c = _cell(agg, variant=g[0], second=g[1], rtt_ms=float(r)) if len(agg) else None
            return f"J={c['jain']:.2f}" if h == hues[1] and c is not None and np.isfinite(c["jain"]) else None

        missing += _bars(ax, groups, hues, val, {hues[0]: c1, hues[1]: c2}, annotate=ann, top=top)
        ax.set_ylim(0, top)
        ax.set_ylabel(f"{format_rtt(r)} ms\n[Gbit/s]")
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(loc="upper right", ncol=2, frameon=True)
    axes[-1, 0].set_xticks(range(len(groups)), [T.pairing_label(*g) for g in groups], rotation=30, ha="right")
    if not rtts:
        axes[0, 0].text(0.5, 0.5, "not in this campaign", transform=axes[0, 0].transAxes, ha="center")
    fig.tight_layout()
    files = _save(fig, prefix)
    caption = ("Mean throughput of each flow in the two-flow runs started together, over the period both "
               "run, averaged over repetitions; one row per RTT; J: Jain's index. "
               f"{_note_sentence(ds, ['fairness', 'compatibility'])}")
    tex = _write_tex(prefix, caption, "fig:flows")
    return {"files": files + [tex], "missing_cells": missing}


def draw(name: str, ds: T.Dataset, out_dir: Path, rtt_ms: float | None = None) -> dict:
    """Dispatch by figure name; output prefix is ``out_dir/<name>[-rtt<rtt>]``."""
    out_dir = Path(out_dir)
    if name == "responsiveness":
        if rtt_ms is None:
            raise ValueError("figure responsiveness needs an RTT")
        return responsiveness(ds, rtt_ms, out_dir / f"responsiveness-rtt{format_rtt(rtt_ms)}")
    fn = {"utilisation": utilisation, "convergence": convergence, "flows": flows}.get(name)
    if fn is None:
        raise ValueError(f"unknown figure {name!r}; allowed values: {', '.join(FIGURES)}")
    return fn(ds, out_dir / name)

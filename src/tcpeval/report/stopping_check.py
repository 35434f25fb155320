"""Stopped early is not stopped wrong, shown: per condition the precision-driven run's
mean with its 95 % interval beside the mean of an independent run five times longer (a
figure), a paragraph whose numbers come from the campaign's tables, the comparisons as
JSON and as a plain-text table (tcpeval.analysis.stopping_check; `make validate-stopping`).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tcpeval.analysis import stopping_check as sc
from tcpeval.analysis import tables as T
from tcpeval.analysis import tidy
from tcpeval.report import method_check
from tcpeval.report.figures import _order, _palette, _save, _style, _write_tex
from tcpeval.report.latex import escape, num

GBPS = 1e9


def results_of(ds: T.Dataset) -> list[dict]:
    return sc.conditions(ds.runs, ds.expected)


def replays_of(ds: T.Dataset, rule) -> list[dict]:
    """The rule (precision.StopRule) replayed on the campaign's replay runs and long runs
    (sc.replays)."""
    runs = ds.runs[ds.runs["criterion"].isin([sc.LONG, sc.REPLAY])]
    if not len(runs):
        return []
    samples = tidy.read_samples(ds.results, runs=list(runs["run"]),
                                columns=["run", "flow", "t_s", "bytes", "retransmits"])
    return sc.replays(runs, samples, rule)


def replay_summary(stops: list[dict]) -> dict:
    """Coverage of the replayed stops: on independent runs, on segments of the long runs,
    and of both together."""
    out = {kind: sc.coverage([r for r in stops if r["kind"] == kind]) for kind in ("run", "segment")}
    out["all"] = sc.coverage(stops)
    return out


def _draw_replays(ax, stops: list[dict], colours: dict) -> None:
    """Each replayed stop's miss in half-widths of its interval, (reference - mean) / hw:
    inside the grey band it covers; independent runs left, segments of long runs right."""
    order = _order([r["variant"] for r in stops])
    kinds = [("run", "o", "replayed runs"), ("segment", "s", "segments of long runs")]
    x = 0
    ticks, labels = [], []
    for kind, marker, label in kinds:
        of = sorted((r for r in stops if r["kind"] == kind),
                    key=lambda r: (order.index(r["variant"]), r["rtt_ms"], r["drop"], r["run"], r["segment"] or 0))
        if not of:
            continue
        first = x
        for r in of:
            ax.plot(x, r["signed_miss_in_hw"], marker, color=colours[r["variant"]], ms=3.5,
                    mec="black" if not r["covers"] else colours[r["variant"]])
            x += 1
        ticks.append((first + x - 1) / 2)
        labels.append(f"{label}\n({sum(r['covers'] for r in of)} of {len(of)} covered)")
        x += 1
    ax.axhspan(-1, 1, color="0.9", zorder=0)
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels, fontsize=6)
    ax.set_xlim(-0.8, x - 0.2)
    ax.set_ylabel("miss in half-widths\n(reference - mean) / hw", fontsize=7)


def draw(results: list[dict], prefix: Path, replays: list[dict] | None = None) -> list[Path]:
    """Per judged comparison: the rule's mean and interval (error bar, coloured by
    variant; outlined where it misses) and the long run's mean (a black bar); beside it,
    where the rule was replayed, each replayed stop's miss in half-widths."""
    import matplotlib.pyplot as plt

    _style()
    judged = [r for r in results if r["judged"]]
    order = _order([r["variant"] for r in judged])
    judged.sort(key=lambda r: (order.index(r["variant"]), r["rtt_ms"], r["drop"], r["rule_run"]))
    colours = _palette([r["variant"] for r in judged])
    stops = [r for r in (replays or []) if r["judged"]]
    if stops:
        fig, (ax, replay_ax) = plt.subplots(1, 2, figsize=(6.8, 2.3), gridspec_kw={"width_ratios": [1, 1.2]})
        _draw_replays(replay_ax, stops, colours=_palette([r["variant"] for r in stops]))
    else:
        fig, ax = plt.subplots(figsize=(3.4, 2.3))
    for i, r in enumerate(judged):
        colour = colours[r["variant"]]
        ax.errorbar(i, r["rule_mean_bps"] / GBPS, yerr=r["rule_hw_bps"] / GBPS, fmt="o", color=colour,
                    ms=4, capsize=3, mec="black" if not r["checks"]["covers_mean"] else colour)
        ax.plot([i - 0.25, i + 0.25], [r["long_mean_bps"] / GBPS] * 2, color="black", lw=1.2)
    ax.set_xlim(-0.6, len(judged) - 0.4)
    ax.set_xticks(range(len(judged)))
    ax.set_xticklabels([f"{T.label(r['variant'])}\n{r['rtt_ms']:g} ms, p={r['drop']:g}\n"
                        f"{num(r['rule_ran_s'], 0)} s vs {num(r['long_ran_s'], 0)} s" for r in judged], fontsize=6)
    ax.set_ylabel("mean throughput (Gb/s)")
    ax.plot([], [], "o", color="0.4", ms=4, label="stopped by the rule (95 % interval)")
    ax.plot([], [], color="black", lw=1.2, label=f"run at least {num(sc.MIN_LENGTH_RATIO, 0)} times as long")
    ax.legend(fontsize=6, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), borderaxespad=0.2)
    fig.tight_layout()
    return _save(fig, prefix)


def _replay_sentence(replay: dict, rule_max_s: float | None, rule_batches: int) -> str:
    runs, segments = replay["run"], replay["segment"]
    if not runs["judged"] and not segments["judged"]:
        return ""
    parts = []
    if runs["judged"]:
        parts.append(f"on {runs['judged']} independent run(s) of the rule's longest length its interval "
                     f"covered the long runs' mean in {runs['covered']} "
                     f"(Wilson interval of the coverage {num(100 * runs['share_low'], 0)}--"
                     f"{num(100 * runs['share_high'], 0)}\\,\\%)")
    if segments["judged"]:
        parts.append(f"on {segments['judged']} consecutive {num(rule_max_s or math.nan, 0)}-s segment(s) of the "
                     f"long runs it covered the rest of the same run in {segments['covered']}")
    both = replay["all"]
    return (f"Replayed as the run applies it: {'; '.join(parts)}; it stopped after a median of "
            f"{num(both['median_stop_s'], 1)}\\,s, and the median miss was {num(both['median_miss_in_hw'], 2)} "
            f"half-widths ({num(sc.honest_median_miss(rule_batches), 2)} for an honest interval of "
            f"{rule_batches} batch means).")


def _sentence(s: dict, ds: T.Dataset | None, campaign: str | None) -> str:
    if ds is None or not s["comparisons"]:
        return ("The check of the stopping rule against longer runs has not been run for this backend "
                "(\\texttt{make validate-stopping}); its figure and numbers are missing.")
    judged, failed = s["judged"], s["failed_checks"]
    parts = [f"We checked the stopping rule against longer runs (campaign \\texttt{{{escape(campaign)}}}): "
             f"{s['comparisons']} precision-driven run(s), each against an independent run of the same "
             f"condition at least {num(sc.MIN_LENGTH_RATIO, 0)} times as long."]
    if judged:
        parts.append(
            f"The rule stopped {judged - failed['stopped_by_itself']} of {judged} by "
            f"itself, after at most {num(s['max_rule_ran_s'], 1)}\\,s (virtual), with intervals of the mean "
            f"of at most $\\pm${num(100 * s['max_rule_relative_hw'], 1)}\\,\\%; the interval covered the "
            f"longer run's mean in {judged - failed['covers_mean']} of {judged} "
            f"(largest difference {num(100 * s['max_abs_mean_diff'], 1)}\\,\\%), and the intervals of the "
            f"quartiles covered the longer runs' in {s['quartiles_covered']} of {s['quartiles_judged']} "
            f"(Fig.~\\ref{{fig:stopping-check}}).")
    if s["not_judged"]:
        parts.append(f"{s['not_judged']} condition(s) are not judged: no usable run on one side.")
    if s.get("replay"):
        parts.append(_replay_sentence(s["replay"], s.get("rule_max_s"), s["rule_batches"]))
    note = escape(ds.note())
    parts.append(note[:1].upper() + note[1:] + ".")
    return " ".join(parts)


def write(ds: T.Dataset | None, campaign: str | None, fig_dir: Path, out_tex: Path,
          out_json: Path | None = None, design: dict | None = None) -> dict:
    """stopping-check.{pdf,png,tex} in fig_dir (when something is judged), the paragraph in
    out_tex, the comparisons in out_json. ds None: the campaign has no results. With the
    design, the rule is also replayed on the campaign's replay and long runs."""
    results = results_of(ds) if ds is not None else []
    rule = sc.rule_of(design, campaign) if ds is not None and design is not None else None
    replays = replays_of(ds, rule) if rule else []
    s = sc.summary(results)
    if replays:
        s["replay"] = replay_summary(replays)
        s["rule_max_s"], s["rule_batches"] = rule.max_s, rule.batches
    lines = ["% generated by tcpeval stopping-check"]
    if s["judged"]:
        prefix = Path(fig_dir) / "stopping-check"
        draw(results, prefix, replays)
        _write_tex(prefix, "Stopped early is not stopped wrong: the mean throughput of a run the precision "
                           "rule stopped, with its 95\\,\\% interval (batch means after the warm-up cut), "
                           "against an independent run of the same condition at least "
                           f"{num(sc.MIN_LENGTH_RATIO, 0)} times as long (black bar); an outlined marker "
                           "misses." + (" Right: the rule replayed on runs of its longest length and on "
                                        "segments of the long runs, each stop's miss in half-widths of its "
                                        "interval (inside the grey band it covers)." if replays else "")
                           + " " + escape(ds.note()) + ".", "fig:stopping-check",
                           width="\\linewidth" if replays else "0.6\\linewidth")
        lines.append("\\input{generated/figures/stopping-check.tex}")
    lines.append(_sentence(s, ds, campaign))
    rates = [r["rate_bps"] for r in results if r["rate_bps"] == r["rate_bps"]]
    method_check.write_outputs(lines, out_tex, out_json,
                               {"campaign": campaign, "rate_bps": float(np.median(rates)) if rates else math.nan,
                                "summary": s, "results": results, "replays": replays})
    return {"summary": s, "results": results, "replays": replays}


def table(results: list[dict]) -> str:
    """The comparisons as a plain-text table (make validate-stopping prints it)."""
    lines = [f"{'variant':9s} {'RTT':>5s} {'drop':>7s} {'rule run':>9s} {'+-':>7s} {'ran':>6s} "
             f"{'long run':>9s} {'ran':>6s} {'diff':>6s}  agree"]
    for r in results:
        head = f"{r['variant']:9s} {r['rtt_ms']:5g} {r['drop']:7g} "
        if not r["judged"]:
            lines.append(head + f"not judged: {r['why_not']}")
            continue
        lines.append(head + f"{r['rule_mean_bps'] / GBPS:9.3f} {100 * r['rule_relative_hw']:6.1f}% "
                     f"{r['rule_ran_s']:5.1f}s {r['long_mean_bps'] / GBPS:9.3f} {r['long_ran_s']:5.0f}s "
                     f"{100 * r['mean_rel_diff']:+5.1f}%  " + method_check.verdict_cell(r))
    return "\n".join(lines)


def replay_table(replays: list[dict]) -> str:
    """The replayed stops as a plain-text table."""
    lines = [f"{'variant':9s} {'RTT':>5s} {'drop':>7s} {'replayed on':24s} {'stop':>6s} {'mean':>7s} "
             f"{'+-':>6s} {'reference':>9s} {'miss/hw':>7s}  covers"]
    for r in replays:
        where = f"{r['kind']} {r['run'].rsplit('/', 1)[-1]}"       # the run's rep
        where += f" #{r['segment']}" if r["segment"] is not None else ""
        head = f"{r['variant']:9s} {r['rtt_ms']:5g} {r['drop']:7g} {where[:24]:24s} "
        if not r["judged"]:
            lines.append(head + "not judged: " + str(r.get("why", "no stop")))
            continue
        lines.append(head + f"{r['stopped_s']:5.1f}s {r['mean_bps'] / GBPS:7.3f} "
                     f"{100 * r['mean_hw_bps'] / r['mean_bps']:5.1f}% {r['reference_bps'] / GBPS:9.3f} "
                     f"{r['signed_miss_in_hw']:+7.2f}  {'yes' if r['covers'] else 'NO'}")
    return "\n".join(lines)

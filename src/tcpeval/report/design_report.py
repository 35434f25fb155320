"""A report for any design: HTML (and the same content as a PDF), generated from the design.

For every criterion of the campaign: what it varies, a table of its conditions with the
metrics the criterion names (means over repetitions, with n), a bar plot of the headline
metric per varying factor, and a throughput timeline per condition (first repetition).
Everything comes from the gathered tables (runs/flows/samples.parquet) and the design;
nothing is specific to the paper's design, whose own report is its manuscript.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402

from tcpeval import paths, spec  # noqa: E402
from tcpeval.analysis import metrics as M  # noqa: E402

# metric name in the design -> (column, heading, scale, format); a metric with several
# columns lists them all
METRIC_COLUMNS = {
    "mean_throughput": [("tcp_total_bps", "TCP throughput [Mbit/s]", 1e-6, "{:.1f}")],
    "throughput_quantiles": [("q25_bps", "Q0.25 [Mbit/s]", 1e-6, "{:.1f}"), ("q50_bps", "Q0.5 [Mbit/s]", 1e-6, "{:.1f}"),
                             ("q75_bps", "Q0.75 [Mbit/s]", 1e-6, "{:.1f}")],
    "jain_index": [("jain", "Jain (common interval)", 1, "{:.3f}")],
    "link_utilisation": [("utilisation_frac", "utilisation", 1, "{:.3f}")],
    "convergence_time": [("conv_time_s", "convergence [s]", 1, "{:.2f}")],
    "spread": [("spread_bps", "spread [Mbit/s]", 1e-6, "{:.2f}")],
    "retransmission_rate": [("retrans_rate", "retransmissions / segment", 1, "{:.2e}")],
    "recovery": [("pre_bps", "before [Mbit/s]", 1e-6, "{:.1f}"), ("during_bps", "during [Mbit/s]", 1e-6, "{:.1f}"),
                 ("post_bps", "after [Mbit/s]", 1e-6, "{:.1f}"), ("recovery_ratio", "after/before", 1, "{:.3f}"),
                 ("recovery_time_s", "time to 90 % [s]", 1, "{:.2f}")],
    "jain_over_overlap": [("jain_overlap", "Jain (overlap)", 1, "{:.3f}"), ("overlap_s", "overlap [s]", 1, "{:.1f}")],
    "throughput_timeline": [],
    # per-flow tables (FLOW_TABLE_COLUMNS) and, for RPC flows, latency CDFs; no run-level column
    "flow_throughput": [],
    "rpc_latency": [],
    "flow_timelines": [],
    "ecn_marks": [("ecn_ce_marked", "CE marks", 1, "{:.0f}"), ("ecn_marked_share", "marked share of ECT frames", 1, "{:.4f}")],   # per flow over time: goodput, window, RTT, retransmissions (_flow_timelines)
}
# The per-flow table of a criterion that asks for flow_throughput or rpc_latency: one row
# per flow of each condition, means over its repetitions (column, heading, scale, format).
FLOW_TABLE_COLUMNS = [("mean_bps", "mean [Mbit/s]", 1e-6, "{:.1f}"), ("min_bps", "min [Mbit/s]", 1e-6, "{:.1f}"),
                      ("max_bps", "max [Mbit/s]", 1e-6, "{:.1f}"), ("retransmits", "retransmits", 1, "{:.0f}")]
RPC_TABLE_COLUMNS = [("rpc_per_s", "RPCs/s", 1, "{:.0f}"), ("rpc_lat_min_us", "min [us]", 1, "{:.0f}"),
                     ("rpc_lat_mean_us", "mean [us]", 1, "{:.0f}"), ("rpc_lat_p50_us", "p50 [us]", 1, "{:.0f}"),
                     ("rpc_lat_p90_us", "p90 [us]", 1, "{:.0f}"), ("rpc_lat_p99_us", "p99 [us]", 1, "{:.0f}"),
                     ("rpc_lat_p999_us", "p99.9 [us]", 1, "{:.0f}")]
# The bar plots' metric: the first of these the criterion names, by its column (_headline).
HEADLINE = {"mean_throughput": "tcp_total_bps", "jain_over_overlap": "jain_overlap", "jain_index": "jain",
            "recovery": "recovery_ratio", "retransmission_rate": "retrans_rate"}


@dataclass
class Section:
    name: str
    description: str
    factors: list[str]          # what varies within the criterion (condition columns)
    table: pd.DataFrame         # one row per condition
    bars: list[tuple[str, bytes]]       # (title, PNG)
    timelines: list[tuple[str, bytes]]  # (condition, PNG)
    figures: list                # matplotlib figures, for the PDF
    metric_cols: list            # METRIC_COLUMNS entries of the criterion's metrics
    n_expected: int              # runs of the criterion in the campaign
    n_ok: int                    # of those, in the tables (verdict ok, or any with flagged runs included)
    flow_table: pd.DataFrame | None = None   # per flow of each condition (FLOW_TABLE_COLUMNS)
    flow_cols: list = field(default_factory=list)   # the columns flow_table shows
    cdfs: list = field(default_factory=list)        # (condition, PNG): RPC latency CDFs
    flow_timelines: list = field(default_factory=list)  # (condition, PNG): window, RTT, losses


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _load(results: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    missing = [n for n in ("runs.parquet", "flows.parquet", "samples.parquet") if not (results / n).exists()]
    if missing:
        raise FileNotFoundError(f"{results}: {', '.join(missing)} missing; run `tcpeval metrics gather` "
                                "(or make report) first")
    return (pd.read_parquet(results / "runs.parquet"), pd.read_parquet(results / "flows.parquet"),
            pd.read_parquet(results / "samples.parquet"))


def condition_columns(crit: dict) -> list[str]:
    """The columns that name a condition of a criterion: the flows (which name every
    variant-valued grid key), then every numeric grid key with more than one value
    (rtt_ms, drop, factors), in grid order."""
    variant_keys = _variant_keys(crit)
    return ["flows_label"] + [k for k, vs in crit["grid"].items() if len(vs) > 1 and k not in variant_keys]


def _with_factors(runs: pd.DataFrame) -> pd.DataFrame:
    runs = runs.copy()
    extra = runs["factors"].fillna("{}").map(json.loads)
    for key in sorted({k for d in extra for k in d}):
        runs[key] = extra.map(lambda d, k=key: d.get(k, math.nan))
    return runs


def _variant_keys(crit: dict) -> list[str]:
    return [k for k, vs in crit["grid"].items() if k not in spec.CONDITION_KEYS
            and all(isinstance(v, str) for v in vs)]


def _timeline(samples: pd.DataFrame, flows: pd.DataFrame, run: pd.Series):
    mine = flows[flows["run"] == run["run"]].sort_values("flow")
    per_flow, labels = [], []
    for _, f in mine.iterrows():
        s = samples[(samples["run"] == run["run"]) & (samples["flow"] == f["flow"])]
        per_flow.append((f["start_s"], s["t_s"].to_numpy(), s["bytes"].to_numpy()))
        labels.append(_flow_label(f))
    tl = M.throughput_timelines(per_flow, float(run["interval_s"]))
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    for i, label in enumerate(labels):
        part = tl[tl["flow"] == i]
        ax.plot(part["t_s"], part["throughput_bps"] / 1e6, lw=0.9, label=label)
    if np.isfinite(run.get("disturbance_start_s", math.nan)):
        ax.axvspan(run["disturbance_start_s"], run["disturbance_stop_s"], color="0.85", zorder=0,
                   label="disturbance")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("throughput [Mbit/s]")
    ax.set_xlim(0, float(run["duration_s"]))
    ax.legend(fontsize=7, ncol=min(4, len(labels) + 1), loc="upper right")
    ax.set_title(run["condition"], fontsize=8)
    return fig


def _flow_table(flows: pd.DataFrame, have: pd.DataFrame, rpc: bool) -> tuple[pd.DataFrame, list]:
    """One row per flow of each condition: the per-flow columns (and, with ``rpc``, the
    RPC ones) as means over the condition's repetitions; the columns shown."""
    cols = FLOW_TABLE_COLUMNS + (RPC_TABLE_COLUMNS if rpc else [])
    mine = flows[flows["run"].isin(have["run"])].copy()
    mine["condition"] = mine["run"].map(dict(zip(have["run"], have["condition"])))
    mine["label"] = mine.apply(_flow_label, axis=1)
    for c, *_ in cols:
        if c not in mine.columns:
            mine[c] = math.nan
    table = (mine.groupby(["condition", "flow"], sort=False)
             .agg(label=("label", "first"), n=("run", "size"), **{c: (c, "mean") for c, *_ in cols})
             .reset_index())
    return table, cols


def _flow_label(f: pd.Series) -> str:
    impl = "" if f["impl"] == "port" or f["protocol"] == "udp" else f" ({f['impl']})"
    text = f"{f['flow']}: {f['variant']}{impl}"
    if f["protocol"] == "rpc":
        rate = f.get("rpc_rate_setting")
        text += (f", RPC {_size(f['rpc_request_bytes'])}/{_size(f['rpc_response_bytes'])}"
                 + (f" at {rate:g}/s" if rate is not None and np.isfinite(rate) else " back to back"))
    return text + _ecn_note(f)


# What a flow does with the link's marks (flows[].cc.ecn), beside its label where it marks
ECN_NOTES = {"as_loss": "ECN: reduces as for a loss", "marked_fraction": "ECN: reduces by the marked fraction",
             "ignores": "ECN negotiated, marks ignored"}


def _ecn_note(f: pd.Series) -> str:
    negotiated = f.get("ecn_negotiated")
    if negotiated is None or pd.isna(negotiated):
        return ""  # the link does not mark, or a trace from before this was recorded
    queue = f.get("ecn_queue")
    where = f", {queue.replace('_', '-')} queue" if isinstance(queue, str) else ""
    if not negotiated:
        return f"; no ECN (tail drop only){where}"
    return f"; {ECN_NOTES.get(f.get('ecn_response'), 'ECN')}{where}"


def _size(nbytes: float) -> str:
    for unit, div in (("MB", 1e6), ("kB", 1e3)):
        if nbytes >= div and nbytes % div == 0:
            return f"{nbytes / div:g} {unit}"
    return f"{nbytes:g} B"


def _latency_cdf(flows: pd.DataFrame, run: pd.Series):
    """The RPC flows' latency CDFs of one run (log time axis: the tail is the story)."""
    mine = flows[(flows["run"] == run["run"]) & (flows["protocol"] == "rpc")].sort_values("flow")
    fig, ax = plt.subplots(figsize=(5.5, 2.8))
    for _, f in mine.iterrows():
        lat = np.asarray(f["rpc_lat_cdf_us"] if f["rpc_lat_cdf_us"] is not None else [], dtype=float)
        if lat.size:
            ax.step(lat / 1e3, M.RPC_CDF_PROBS[:lat.size], where="post", lw=1.0, label=_flow_label(f))
    ax.set_xscale("log")
    ax.set_xlabel("RPC latency [ms]")
    ax.set_ylabel("fraction of RPCs")
    ax.set_ylim(0, 1.005)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(run["condition"], fontsize=8)
    return fig


def _flow_timelines(samples: pd.DataFrame, flows: pd.DataFrame, run: pd.Series):
    """One run's flows over time, on the run's clock: goodput with its retransmissions
    marked below, the sender's window, its smoothed RTT, and the retransmissions summed."""
    mine = flows[flows["run"] == run["run"]].sort_values("flow")
    fig, axes = plt.subplots(4, 1, figsize=(7.5, 7.2), sharex=True)
    for i, (_, f) in enumerate(mine.iterrows()):
        s = samples[(samples["run"] == run["run"]) & (samples["flow"] == f["flow"])].sort_values("t_s")
        t = s["abs_t_s"].to_numpy()
        colour = f"C{i}"
        label = _flow_label(f)
        axes[0].plot(t, s["throughput_bps"] / 1e6, lw=0.8, color=colour, label=label)
        retr = s["retransmits"].fillna(0).to_numpy()
        hit = retr > 0
        axes[0].plot(t[hit], np.full(hit.sum(), -0.04 - 0.03 * i), "|", color=colour, ms=6,
                     transform=axes[0].get_xaxis_transform(), clip_on=False)
        axes[1].plot(t, s["cwnd_bytes"] / 1e3, lw=0.8, color=colour)
        axes[2].plot(t, s["rtt_us"] / 1e3, lw=0.8, color=colour)
        axes[3].step(t, np.cumsum(retr), where="post", lw=0.8, color=colour)
    axes[0].set_ylabel("goodput\n[Mbit/s]")
    axes[1].set_ylabel("window\n[kB]")
    axes[2].set_ylabel("RTT [ms]")
    axes[3].set_ylabel("retransmitted\nsegments")
    axes[3].set_xlabel("time [s] (ticks under the goodput: intervals with retransmissions)")
    axes[3].set_xlim(0, float(run["duration_s"]))
    axes[0].legend(fontsize=7, ncol=min(3, len(mine)), loc="upper right")
    axes[0].set_title(run["condition"], fontsize=8)
    fig.tight_layout()
    return fig


def _cells(row: pd.Series, cols: list) -> list[str]:
    return ["n/a" if not np.isfinite(row.get(c, math.nan)) else f.format(row[c] * s) for c, _, s, f in cols]


def _bars(table: pd.DataFrame, factor: str, metric_col: str, heading: str, scale: float, hue: str | None):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    data = table.copy()
    data["_x"] = data[factor].map(lambda v: _fmt_level(factor, v))
    data["_y"] = data[metric_col] * scale
    data["_err"] = data[metric_col + "_sd"].fillna(0) * scale
    groups = list(dict.fromkeys(data[hue])) if hue else [None]
    xs = list(dict.fromkeys(data["_x"]))
    width = 0.8 / len(groups)
    for g, group in enumerate(groups):
        part = data if group is None else data[data[hue] == group]
        part = part.groupby("_x", sort=False)[["_y", "_err"]].mean().reindex(xs)
        ax.bar(np.arange(len(xs)) + (g - (len(groups) - 1) / 2) * width, part["_y"], width,
               yerr=part["_err"], label=str(group) if group is not None else None, capsize=2)
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(factor)
    ax.set_ylabel(heading)
    if hue:
        ax.legend(fontsize=7, title=hue, title_fontsize=7)
    return fig


def _headline(metric_cols: list[tuple], metrics: list[str]) -> tuple | None:
    """The bar plots' metric column: the first HEADLINE metric the criterion names, else the
    first column of its metrics (convergence: the convergence time); None when its metrics
    have no column (a timeline only)."""
    for name in HEADLINE:
        if name in metrics:
            return next(c for c in METRIC_COLUMNS[name] if c[0] == HEADLINE[name])
    return metric_cols[0] if metric_cols else None


def _fmt_level(key: str, value) -> str:
    if isinstance(value, str):
        return value
    if key == "rate_bps":
        return paths.format_factor("rate_bps", value).removeprefix("rate")
    if key == "buffer_bytes":
        return paths.format_factor("buffer_bytes", value).removeprefix("buf")
    if key == "drop":
        return paths.format_drop(value)
    return paths.format_rtt(value)


def build(design: dict, campaign: str, backend: str, results: Path, *, include_flagged: bool = False) -> dict:
    """The report's content: header facts and one Section per criterion."""
    runs, flows, samples = _load(results)
    runs = _with_factors(runs[runs["status"] == "ok"])
    expected = spec.expand(design, campaign, backend)
    flagged = runs[runs["verdict"] != "ok"]
    if not include_flagged:
        runs = runs[runs["verdict"] == "ok"]
    # per-run retransmission rate: the mean of the TCP flows'
    rr = flows[flows["protocol"].fillna("tcp") == "tcp"].groupby("run")["retrans_rate"].mean()
    runs = runs.assign(retrans_rate=runs["run"].map(rr))
    sections = []
    for name in spec.criteria_of(design, campaign):
        crit = design["criteria"][name]
        cols = condition_columns(crit)
        have = runs[runs["criterion"] == name].copy()
        for key in cols:
            if key not in have.columns:
                have[key] = math.nan
        have["condition"] = have["run"].map(lambda r: paths.split_run_id(r)[1].rsplit("/rep", 1)[0])
        metric_cols = [c for m in crit.get("metrics", ["mean_throughput"]) for c in METRIC_COLUMNS.get(m, [])]
        values = [c for c, *_ in metric_cols]
        n_expected = sum(1 for r in expected if r.criterion == name)
        if have.empty:
            table = pd.DataFrame(columns=["condition", *cols, "n"])
        else:
            table = (have.groupby("condition", sort=False)
                     .agg(**{c: (c, "first") for c in cols}, n=("run", "size"),
                          **{v: (v, "mean") for v in values}, **{v + "_sd": (v, "std") for v in values})
                     .reset_index())
        sec = Section(name=name, description=crit.get("description", ""), factors=cols, table=table,
                      bars=[], timelines=[], figures=[], metric_cols=metric_cols,
                      n_expected=n_expected, n_ok=len(have))
        # bar plots of the headline metric per varying factor
        headline = _headline(metric_cols, crit.get("metrics", ["mean_throughput"]))
        varying = [c for c in cols if c != "flows_label" and not table.empty and table[c].nunique() > 1]
        if headline and not table.empty and (varying or table["flows_label"].nunique() > 1):
            col, heading, scale, _ = headline
            for factor in varying or ["flows_label"]:
                others = [c for c in cols if c not in (factor, "flows_label") and table[c].nunique() > 1]
                hue = "flows_label" if factor != "flows_label" and table["flows_label"].nunique() > 1 else (
                    others[0] if others else None)
                fig = _bars(table, factor, col, heading, scale, hue)
                sec.bars.append((f"{heading} by {factor}", _png(fig)))
                sec.figures.append(fig)
        for cond, group in have.sort_values("rep").groupby("condition", sort=False):
            fig = _timeline(samples, flows, group.iloc[0])
            sec.timelines.append((f"{cond} (rep {int(group.iloc[0]['rep'])})", _png(fig)))
            sec.figures.append(fig)
        wanted = set(crit.get("metrics", []))
        if wanted & {"flow_throughput", "rpc_latency"} and not have.empty:
            sec.flow_table, sec.flow_cols = _flow_table(flows, have, "rpc_latency" in wanted)
        if "flow_timelines" in wanted:
            for cond, group in have.sort_values("rep").groupby("condition", sort=False):
                fig = _flow_timelines(samples, flows, group.iloc[0])
                sec.flow_timelines.append((f"{cond} (rep {int(group.iloc[0]['rep'])})", _png(fig)))
                sec.figures.append(fig)
        if "rpc_latency" in wanted:
            for cond, group in have.sort_values("rep").groupby("condition", sort=False):
                fig = _latency_cdf(flows, group.iloc[0])
                sec.cdfs.append((f"{cond} (rep {int(group.iloc[0]['rep'])})", _png(fig)))
                sec.figures.append(fig)
        sections.append(sec)
    env = runs.iloc[0] if not runs.empty else {}
    return {"design": design, "campaign": campaign, "backend": backend, "sections": sections,
            "n_expected": len(expected), "n_ok": int((runs["verdict"] == "ok").sum()),
            "n_used": len(runs), "flagged": flagged,
            "kernel": env.get("kernel") if len(runs) else None,
            "git_revision": env.get("git_revision") if len(runs) else None,
            "include_flagged": include_flagged}


def _table_html(sec: Section) -> str:
    t = sec.table
    heads = ["condition", *[c for c in sec.factors if c != "flows_label"], "flows", "n",
             *[h for _, h, _, _ in sec.metric_cols]]
    rows = []
    for _, r in t.iterrows():
        cells = [f"<code>{html.escape(str(r['condition']))}</code>"]
        cells += [html.escape(_fmt_level(c, r[c])) for c in sec.factors if c != "flows_label"]
        cells += [html.escape(str(r["flows_label"])), str(int(r["n"]))]
        for col, _, scale, fmt in sec.metric_cols:
            v = r.get(col, math.nan)
            sd = r.get(col + "_sd", math.nan)
            text = "n/a" if not np.isfinite(v) else fmt.format(v * scale)
            if np.isfinite(v) and np.isfinite(sd) and r["n"] > 1:
                text += " &plusmn; " + fmt.format(sd * scale)
            cells.append(text)
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _flow_table_html(sec: Section) -> str:
    heads = ["condition", "flow", "n", *[h for _, h, _, _ in sec.flow_cols]]
    rows = ["<tr>" + "".join(f"<td>{c}</td>" for c in [f"<code>{html.escape(str(r['condition']))}</code>",
                                                         html.escape(str(r["label"])), str(int(r["n"])),
                                                         *_cells(r, sec.flow_cols)]) + "</tr>"
            for _, r in sec.flow_table.iterrows()]
    return ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _img(png: bytes, alt: str) -> str:
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,'
            f'{base64.b64encode(png).decode()}"><figcaption>{html.escape(alt)}</figcaption></figure>')


def _included_note(content: dict) -> str:
    n = len(content["flagged"]) if content["include_flagged"] else 0
    return f" ({n} flagged run{'s' if n != 1 else ''} included)" if n else ""


def render_html(content: dict) -> str:
    d = content["design"]
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(d.get('title', d['name']))}</title>",
           "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto;color:#222}"
           "table{border-collapse:collapse;font-size:85%;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;"
           "text-align:right}td:first-child{text-align:left}figure{display:inline-block;margin:.5em}"
           "img{max-width:100%}figcaption{font-size:80%;color:#555}.flag{color:#a40}</style></head><body>",
           f"<h1>{html.escape(d.get('title', d['name']))}</h1>",
           f"<p>Design <code>{html.escape(d['name'])}</code>, campaign <code>{html.escape(content['campaign'])}</code>"
           + (f" ({html.escape(d['campaigns'][content['campaign']]['description'])})"
              if d["campaigns"][content["campaign"]].get("description") else "") + ", backend "
           f"<code>{content['backend']}</code>. Runs with verdict ok: {content['n_ok']} of {content['n_expected']}"
           f"{_included_note(content)}. Kernel {html.escape(str(content['kernel']))},"
           f" tcpeval revision <code>{html.escape(str(content['git_revision']))}</code>.</p>"]
    if len(content["flagged"]):
        out.append("<p class='flag'>Flagged runs (" + ("included" if content["include_flagged"] else "left out")
                   + "):</p><ul class='flag'>" + "".join(
                       f"<li><code>{html.escape(r['run'])}</code>: {html.escape(str(r['flag_reasons']))}</li>"
                       for _, r in content["flagged"].iterrows()) + "</ul>")
    for sec in content["sections"]:
        out.append(f"<h2>{html.escape(sec.name)}</h2><p>{html.escape(sec.description)} "
                   f"({sec.n_ok} of {sec.n_expected} runs)</p>")
        out.append(_table_html(sec))
        out += [_img(png, title) for title, png in sec.bars]
        if sec.flow_table is not None:
            out.append("<h3>Per flow</h3>" + _flow_table_html(sec))
        if sec.flow_timelines:
            out.append("<h3>Window, RTT and retransmissions over time</h3>")
            out += [_img(png, title) for title, png in sec.flow_timelines]
        if sec.cdfs:
            out.append("<h3>RPC latency</h3>")
            out += [_img(png, title) for title, png in sec.cdfs]
        if sec.timelines:
            out.append("<h3>Throughput over time</h3>")
            out += [_img(png, title) for title, png in sec.timelines]
    out.append("<p><small>Generated by <code>tcpeval report</code> from the design file and "
               "the campaign's tables; means over repetitions &plusmn; standard deviation.</small></p></body></html>")
    return "\n".join(out)


def render_pdf(content: dict, path: Path) -> None:
    d = content["design"]
    with PdfPages(path) as pdf:
        fig = plt.figure(figsize=(8.27, 11.69))
        lines = [d.get("title", d["name"]), "",
                 f"design {d['name']}, campaign {content['campaign']}, backend {content['backend']}",
                 f"runs with verdict ok: {content['n_ok']} of {content['n_expected']}{_included_note(content)}",
                 f"kernel {content['kernel']}, tcpeval {content['git_revision']}", ""]
        for sec in content["sections"]:
            lines.append(f"{sec.name}: {sec.description} ({sec.n_ok} of {sec.n_expected} runs)")
        lines += _pdf_flagged_lines(content)
        fig.text(0.08, 0.95, "\n".join(lines), va="top", fontsize=9, wrap=True)
        pdf.savefig(fig)
        plt.close(fig)
        for sec in content["sections"]:
            if not sec.table.empty:
                _pdf_table(pdf, ["condition", "n", *[h for _, h, _, _ in sec.metric_cols]],
                           [[str(r["condition"]), str(int(r["n"])), *_cells(r, sec.metric_cols)]
                            for _, r in sec.table.iterrows()], f"{sec.name}: {sec.description}")
            if sec.flow_table is not None and not sec.flow_table.empty:
                _pdf_table(pdf, ["condition", "flow", "n", *[h for _, h, _, _ in sec.flow_cols]],
                           [[str(r["condition"]), str(r["label"]), str(int(r["n"])), *_cells(r, sec.flow_cols)]
                            for _, r in sec.flow_table.iterrows()], f"{sec.name}: per flow")
            for f in sec.figures:
                pdf.savefig(f, bbox_inches="tight")
                plt.close(f)


def _pdf_flagged_lines(content: dict, reason_chars: int = 160) -> list[str]:
    """The first page's list of flagged runs, as the HTML header has it (each reason cut to
    `reason_chars`: the trace and the HTML have it whole)."""
    flagged = content["flagged"]
    if not len(flagged):
        return []
    lines = ["", f"Flagged runs ({'included' if content['include_flagged'] else 'left out'}):"]
    for _, r in flagged.iterrows():
        reason = str(r["flag_reasons"])
        lines.append(f"  {r['run']}: {reason[:reason_chars]}{'...' if len(reason) > reason_chars else ''}")
    return lines


def _pdf_table(pdf, heads: list[str], cells: list[list[str]], title: str) -> None:
    """One table on a page of its own."""
    fig, ax = plt.subplots(figsize=(11.69, 0.5 + 0.3 * (len(cells) + 2)))
    ax.axis("off")
    tab = ax.table(cellText=cells, colLabels=heads, loc="upper left", cellLoc="right")
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    tab.auto_set_column_width(list(range(len(heads))))
    ax.set_title(title, fontsize=9, loc="left")
    pdf.savefig(fig, bbox_inches="tight")
    plt.close(fig)


def write(design: dict, campaign: str, backend: str, results: Path, out_dir: Path, *,
          include_flagged: bool = False) -> list[Path]:
    """report.html and report.pdf in out_dir, each written atomically."""
    content = build(design, campaign, backend, results, include_flagged=include_flagged)
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, pdf_path = out_dir / "report.html", out_dir / "report.pdf"
    tmp = html_path.with_suffix(".html.tmp")
    tmp.write_text(render_html(content))
    tmp.replace(html_path)
    tmp_pdf = out_dir / "report.tmp.pdf"
    render_pdf(content, tmp_pdf)
    tmp_pdf.replace(pdf_path)
    return [html_path, pdf_path]

"""The validation campaign in the manuscript: Reno 3.16 against the Mathis model, and
against the host kernel's own Reno.

Per condition (RTT, p) of the criteria `mathis` (the port) and `mathis_native`: the
median over repetitions of the flows' mean throughput, the model's rate at the
*measured* RTT and drop rate, and whether the model applies -- only where it stays below
LINK_FRACTION of the link, since above it the link, not the loss, limits the flow. The
port passes where it lies within the model's band (tcpeval.mathis.BAND). Where the
window limits the flow, the port must also be slower than the kernel's Reno: 3.16 Reno
grows by one segment per window of ACKs, 6.x Reno per window of packets.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tcpeval import mathis
from tcpeval.analysis import tables as T
from tcpeval.report.figures import _save, _style, _write_tex
from tcpeval.report.latex import escape, num

PORT, NATIVE = "mathis", "mathis_native"
LINK_FRACTION = 0.7
GBPS = 1e9


def conditions(ds: T.Dataset) -> pd.DataFrame:
    """One row per (rtt_ms, drop) of the campaign: port_bps, native_bps (medians over
    repetitions, NaN where no run is usable), n_port, n_native, rtt/p as measured on the
    port's runs (the settings where none), model_bps, link_bps, applies, ratio, within,
    port_slower (NaN where not both measured or the model does not apply)."""
    expected = ds.expected[ds.expected["criterion"].isin([PORT, NATIVE])]
    grid = expected[["rtt_ms", "drop"]].drop_duplicates().sort_values(["rtt_ms", "drop"])
    rows = []
    for rtt, p in grid.itertuples(index=False):
        def runs(crit, rtt=rtt, p=p):
            r = ds.criterion(crit)
            return r[(r["rtt_ms"] == rtt) & (r["drop"] == p)]
        port, native = runs(PORT), runs(NATIVE)
        m_rtt = port["measured_rtt_ms"].mean() if len(port) else np.nan
        m_p = port["measured_drop"].mean() if len(port) else np.nan
        rtt_used = m_rtt if np.isfinite(m_rtt) else rtt
        p_used = m_p if np.isfinite(m_p) and m_p > 0 else p
        link = pd.concat([port, native])["link_rate_bps"].median() if len(port) + len(native) else np.nan
        model = mathis.throughput_bps(rtt_used, p_used)
        applies = bool(np.isfinite(link) and model <= LINK_FRACTION * link)
        port_bps = port["mean_bps"].median() if len(port) else np.nan
        native_bps = native["mean_bps"].median() if len(native) else np.nan
        ratio = port_bps / model if applies and np.isfinite(port_bps) else np.nan
        rows.append({
            "rtt_ms": rtt, "drop": p, "n_port": len(port), "n_native": len(native),
            "measured_rtt_ms": m_rtt, "measured_drop": m_p, "port_bps": port_bps,
            "native_bps": native_bps, "model_bps": model, "link_bps": link, "applies": applies,
            "ratio": ratio, "within": bool(abs(ratio - 1) <= mathis.BAND) if np.isfinite(ratio) else np.nan,
            "port_slower": (bool(port_bps < native_bps) if applies and np.isfinite(port_bps)
                            and np.isfinite(native_bps) else np.nan),
        })
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> dict:
    judged = df[df["within"].notna()]
    compared = df[df["port_slower"].notna()]
    return {
        "conditions": len(df),
        "with_data": int(((df["n_port"] > 0) | (df["n_native"] > 0)).sum()),
        "judged": len(judged), "within": int(judged["within"].sum()) if len(judged) else 0,
        "median_ratio": float(judged["ratio"].median()) if len(judged) else np.nan,
        "compared": len(compared),
        "port_slower": int(compared["port_slower"].sum()) if len(compared) else 0,
        "link_limited": int(((~df["applies"]) & (df["n_port"] > 0)).sum()),
    }


def draw(df: pd.DataFrame, prefix: Path, note: str) -> list[Path]:
    import matplotlib.pyplot as plt

    _style()
    rtts = sorted(df["rtt_ms"].unique())
    fig, axes = plt.subplots(1, len(rtts), figsize=(6.8, 2.4), sharey=True, squeeze=False)
    for ax, rtt in zip(axes[0], rtts):
        d = df[df["rtt_ms"] == rtt].sort_values("drop")
        p = np.geomspace(d["drop"].min() / 2, d["drop"].max() * 2, 50)
        model = np.array([mathis.throughput_bps(rtt, x) for x in p]) / GBPS
        ax.plot(p, model, color="0.2", lw=1, label="Mathis model")
        ax.fill_between(p, model * (1 - mathis.BAND), model * (1 + mathis.BAND), color="0.85",
                        label=f"model $\\pm${mathis.BAND:.0%}")
        link = d["link_bps"].median()
        if np.isfinite(link):
            ax.axhline(LINK_FRACTION * link / GBPS, color="0.6", ls=":", lw=0.8,
                       label=f"{LINK_FRACTION:.0%} of the link")
        ax.plot(d["drop"], d["port_bps"] / GBPS, "o", color="C0", ms=4, label="Reno 3.16 (port)")
        ax.plot(d["drop"], d["native_bps"] / GBPS, "x", color="C3", ms=5, label="kernel Reno")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"RTT {rtt:g} ms", fontsize=8)
        ax.set_xlabel("drop probability")
    axes[0][0].set_ylabel("mean throughput (Gbps)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=6, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return _save(fig, prefix)


def _sentence(s: dict, note: str) -> str:
    if not s["with_data"]:
        return ("The validation campaign has not been run for this backend "
                "(\\texttt{make validation}); its figure and numbers are missing.")
    parts = [f"Of {s['judged']} conditions where the model applies (it stays below "
             f"{num(LINK_FRACTION * 100, 0)}\\,\\% of the link), Reno 3.16 lies within the "
             f"model's $\\pm${num(mathis.BAND * 100, 0)}\\,\\% band in {s['within']}"
             + (f", with a median ratio of measured to model of {num(s['median_ratio'], 2)}."
                if s["judged"] else ".")]
    if s["compared"]:
        parts.append(f"Where the window limits the flow, the port is slower than the kernel's "
                     f"own Reno in {s['port_slower']} of {s['compared']} conditions, as a 3.16 "
                     f"Reno that counts ACKs must be.")
    else:
        parts.append("No condition has both the port and the kernel's Reno measured yet.")
    if s["link_limited"]:
        parts.append(f"{s['link_limited']} condition(s) are link-limited and not judged.")
    parts.append(note)
    return " ".join(parts)


def write(ds: T.Dataset | None, fig_dir: Path, out_tex: Path) -> dict:
    """validation.{pdf,png,tex} in fig_dir (when there is data) and the manuscript's
    paragraph with its numbers in out_tex. ds None: the campaign has no results."""
    df = conditions(ds) if ds is not None else pd.DataFrame(
        columns=["rtt_ms", "drop", "n_port", "n_native", "applies", "within", "port_slower", "ratio"])
    s = summary(df) if len(df) else {"with_data": 0}
    note = escape(ds.note()) + "." if ds is not None else ""
    lines = ["% generated by tcpeval validation"]
    if s["with_data"]:
        prefix = Path(fig_dir) / "validation"
        draw(df, prefix, note)
        _write_tex(prefix, "Validation: mean throughput of one Reno flow (3.16 port, circles) and of "
                           "the kernel's own Reno (crosses) against the Mathis model with delayed ACKs "
                           f"(line, band $\\pm${num(mathis.BAND * 100, 0)}\\,\\%), per RTT; medians over "
                           "repetitions, the model at the measured RTT and drop rate. " + note,
                   "fig:validation")
        lines.append("\\input{generated/figures/validation.tex}")
    lines.append(_sentence(s, note))
    out_tex = Path(out_tex)
    out_tex.parent.mkdir(parents=True, exist_ok=True)
    out_tex.write_text("\n".join(lines) + "\n")
    return s

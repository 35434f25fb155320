"""Figures draw the values of the tidy tables at the places their axes say, full and
partial matrix; captions say what is shown, missing and excluded."""

import numpy as np
import pytest
from report_helpers import keep_drawn, overlapping_texts

from tcpeval.analysis import tables
from tcpeval.paths import format_rtt
from tcpeval.report import figures
from tcpeval.report.latex import fmt_drop


def _load(results, design, **kw):
    return tables.load(results, design, "smoke", "emulated", **kw)


@pytest.fixture
def drawn(monkeypatch):
    """Draw with the real figure code and keep each matplotlib figure to read back."""
    return keep_drawn(monkeypatch, figures)


def _means(ds, criterion, keys, column):
    """Per-cell means over repetitions, straight from the per-run rows."""
    runs = ds.criterion(criterion)
    runs = runs[np.isfinite(runs[column].astype(float))]
    return {k: v / 1e9 if column.endswith("_bps") else v
            for k, v in runs.groupby(keys)[column].mean().items()}


def _bars(ax, groups, hues, width=0.8):
    """Bar heights by (group, hue), from where each bar stands (figures._bars' layout)."""
    w = width / len(hues)
    out = {}
    for bar in ax.patches:
        x = bar.get_x() + bar.get_width() / 2
        gi = int(round(x))
        hi = int(round((x - gi + width / 2) / w - 0.5))
        out[(groups[gi], hues[hi])] = bar.get_height()
    return out


def _close(got: dict, want: dict):
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9), key


def test_responsiveness_plots_each_variants_mean_per_drop_rate(smoke_results, design, tmp_path, drawn):
    ds = _load(smoke_results, design)
    out = figures.draw("responsiveness", ds, tmp_path, rtt_ms=6.2)
    ax_a = drawn[-1].axes[0]
    drops = [t.get_text() for t in ax_a.get_xticklabels()]
    got = {}
    for container in ax_a.containers:  # one errorbar per variant
        line = container.lines[0]
        variant = next(v for v in tables.VARIANT_LABELS if tables.label(v) == container.get_label())
        for x, y in zip(line.get_xdata(), line.get_ydata()):
            got[(variant, drops[int(round(x))])] = y
    want = {(v, fmt_drop(d, tex=False)): m
            for (v, r, d), m in _means(ds, "responsiveness", ["variant", "rtt_ms", "drop"], "mean_bps").items()
            if np.isclose(r, 6.2)}
    _close(got, want)
    assert out["missing_cells"] == len(ds.expected_in("responsiveness").query("rtt_ms == 6.2")) - len(want)
    for f in out["files"][:2]:
        assert f.read_bytes()[:4] in (b"%PDF", b"\x89PNG")


def test_utilisation_bars_are_the_sum_of_both_flows_per_rtt(smoke_results, design, tmp_path, drawn):
    ds = _load(smoke_results, design)
    figures.draw("utilisation", ds, tmp_path)
    for ax, criterion in zip(drawn[-1].axes, ("fairness", "compatibility")):
        want = {(format_rtt(r), tables.label(v)): u
                for (r, v), u in _means(ds, criterion, ["rtt_ms", "variant"], "utilisation_bps").items()}
        rtts = [t.get_text().removesuffix(" ms") for t in ax.get_xticklabels()]
        hues = [tables.label(v) for v in figures._order(ds.expected_in(criterion)["variant"])]
        _close(_bars(ax, rtts, hues), want)
        assert want, criterion  # smoke has two-flow runs of both kinds


def test_convergence_bars_and_points_are_time_and_spread_per_pairing(smoke_results, design, tmp_path, drawn):
    ds = _load(smoke_results, design)
    figures.draw("convergence", ds, tmp_path)
    ax, ax2 = drawn[-1].axes
    runs = ds.criterion("convergence")
    converged = runs[runs["converged"] == True]  # noqa: E712 (a column of booleans)
    times = converged.groupby(["variant", "second", "rtt_ms"])["conv_time_s"].mean()
    pairings = [t.get_text() for t in ax.get_xticklabels()]
    rtts = sorted(ds.expected_in("convergence")["rtt_ms"].unique())
    want = {(tables.pairing_label(v, s), f"{format_rtt(r)} ms"): t for (v, s, r), t in times.items()}
    _close(_bars(ax, pairings, [f"{format_rtt(r)} ms" for r in rtts]), want)
    spreads = sorted(converged.groupby(["variant", "second", "rtt_ms"])["spread_bps"].mean() / 1e9)
    points = sorted(float(line.get_ydata()[0]) for line in ax2.lines)
    assert points == pytest.approx(spreads, rel=1e-9) and points


def test_flows_bars_are_each_flows_mean_per_rtt(smoke_results, design, tmp_path, drawn):
    ds = _load(smoke_results, design)
    figures.draw("flows", ds, tmp_path)
    axes = drawn[-1].axes
    pairings = [t.get_text() for t in axes[-1].get_xticklabels()]
    rtts = sorted(set(ds.expected_in("fairness")["rtt_ms"]) | set(ds.expected_in("compatibility")["rtt_ms"]))
    assert len(axes) == len(rtts)
    for ax, r in zip(axes, rtts):
        want = {}
        for criterion in ("fairness", "compatibility"):
            for column, hue in (("flow1_bps", "first flow"), ("flow2_bps", "second flow")):
                for (v, s, rr), m in _means(ds, criterion, ["variant", "second", "rtt_ms"], column).items():
                    if np.isclose(rr, r):
                        want[(tables.pairing_label(v, s), hue)] = m
        _close(_bars(ax, pairings, ["first flow", "second flow"]), want)


def test_responsiveness_caption_names_the_drop_rate_shown_and_the_flagged_runs(smoke_results, design, tmp_path):
    ds = _load(smoke_results, design)
    out = figures.draw("responsiveness", ds, tmp_path, rtt_ms=12.2)
    tex = (tmp_path / "responsiveness-rtt12.2.tex").read_text()
    # smoke has no 1e-6 at 12.2 ms: the caption must say which drop rate it shows instead
    assert "because the original study's $10^{-6}$ is not in the data" in tex
    assert "\\includegraphics" in tex and "\\label{fig:rtt12.2}" in tex
    assert out["efficiency_drop"] == 1e-4 and not out["preferred"]
    # flagged runs are excluded by default and the caption counts them
    n_flagged_resp = ds._flagged("responsiveness")
    assert n_flagged_resp > 0 and f"{n_flagged_resp} run(s) with fidelity verdict" in tex


def test_include_flagged_changes_the_note(smoke_results, design, tmp_path):
    ds = _load(smoke_results, design, include_flagged=True)
    out = figures.draw("responsiveness", ds, tmp_path, rtt_ms=12.2)
    tex = (tmp_path / "responsiveness-rtt12.2.tex").read_text()
    assert "flagged run(s) included" in tex and out["missing_cells"] == 0


def test_partial_matrix_marks_missing(partial_results, design, tmp_path):
    ds = _load(partial_results, design)
    assert len(ds.missing) > 0
    res = [figures.draw("responsiveness", ds, tmp_path, rtt_ms=6.2)]
    res += [figures.draw(n, ds, tmp_path) for n in ("utilisation", "convergence", "flows")]
    assert sum(r["missing_cells"] for r in res) > 0
    tex = (tmp_path / "responsiveness-rtt6.2.tex").read_text()
    assert "missing" in tex and "n/a" in tex


@pytest.mark.parametrize("rtt", [6.2, 12.2])
def test_marks_of_missing_cells_never_overlap(partial_results, design, tmp_path, drawn, rtt):
    # a third of the matrix: marks at neighbouring drop rates in panel (a) and per
    # variant in (b), beside the figure's other labels
    res = figures.draw("responsiveness", _load(partial_results, design), tmp_path, rtt_ms=rtt)
    assert res["missing_cells"] > 0
    assert sum("n/a" in t.get_text() for ax in drawn[-1].axes for t in ax.texts) >= 2
    assert overlapping_texts(drawn[-1]) == []

"""The dilation cross-validation in the manuscript, from synthetic traces of the
dilation-quick campaign (the same seed at every factor, so identical runs at k = 1, 2, 4),
one port's k = 4 runs made 20 % faster: the paragraph's numbers are the comparisons'."""
from __future__ import annotations

import json
import shutil

import pytest
from report_helpers import compile_paragraph, keep_drawn, overlapping_texts

from tcpeval import spec, trace
from tcpeval.analysis import synthetic, tables
from tcpeval.cli import main
from tcpeval.report import dilation_check

CAMPAIGN = "dilation-quick"


@pytest.fixture(scope="module")
def dilation_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("dilation")
    design = spec.load_design()
    conds = synthetic.campaign_conditions(design, CAMPAIGN, duration_s=10.0)
    paths = synthetic.write_traces(conds, root / "raw")
    for cond, path in zip(conds, paths):
        if cond.criterion == "dilation_k4" and cond.flows[0].variant == "bic":
            record = trace.read_trace(path.parent)
            for f in record["flows"]:  # a dilated port that runs faster than its k = 1 self
                f["samples"]["throughput_bps"] = [x * 1.2 for x in f["samples"]["throughput_bps"]]
                f["samples"]["bytes"] = [x * 1.2 for x in f["samples"]["bytes"]]
                f["summary"]["bytes"] *= 1.2
                f["summary"]["mean_throughput_bps"] *= 1.2
            trace.write_trace(path.parent, record, force=True)
    assert main(["metrics", "build", "--campaign", CAMPAIGN, "--raw-dir", str(root / "raw"),
                 "--results-dir", str(root / "results")]) == 0
    results = root / "results" / "emulated" / CAMPAIGN
    return results, tables.load(results, design, CAMPAIGN, "emulated")


def test_every_port_is_compared_at_each_factor_and_the_faster_one_disagrees(dilation_results):
    _, ds = dilation_results
    results = dilation_check.results_of(ds)
    # 6 ports x 1 RTT x 2 drop rates x factors {2, 4}
    assert len(results) == 24 and {r["factor"] for r in results} == {2, 4}
    bad = {(r["variant"], r["drop"], r["factor"]) for r in results if not r["agree"]}
    assert bad == {("bic", 0.0, 4), ("bic", 1e-4, 4)}
    faster = next(r for r in results if r["variant"] == "bic" and r["factor"] == 4)
    assert faster["mean_rel_diff"] == pytest.approx(0.2, abs=0.01) and not faster["checks"]["mean"]
    same = next(r for r in results if r["variant"] == "bic" and r["factor"] == 2)
    assert same["mean_rel_diff"] == pytest.approx(0.0, abs=1e-9) and same["ks_p"] == 1.0
    assert all(r["ok_runs"] == r["runs"] == [2, 2] for r in results)


def test_paragraph_figure_and_json_carry_the_comparisons(dilation_results, tmp_path):
    _, ds = dilation_results
    out = dilation_check.write(ds, CAMPAIGN, tmp_path / "fig", tmp_path / "d.tex", tmp_path / "d.json")
    s = out["summary"]
    assert (s["comparisons"], s["judged"], s["agree"]) == (24, 24, 22)
    assert s["variants_all_agree"] == sorted(set(synthetic.RESPONSE) - {"bic"})
    text = (tmp_path / "d.tex").read_text()
    assert "\\input{generated/figures/dilation-check.tex}" in text
    assert "Of the 24 comparisons with usable runs on both sides, 22 agree" in text
    assert "at most 20.0\\,\\%" in text and "2 repetitions of 10\\,s" in text
    assert (tmp_path / "fig" / "dilation-check.pdf").stat().st_size > 5000
    assert "fig:dilation-check" in (tmp_path / "fig" / "dilation-check.tex").read_text()
    saved = json.loads((tmp_path / "d.json").read_text())
    assert saved["campaign"] == CAMPAIGN and saved["summary"]["agree"] == 22 and len(saved["results"]) == 24


def test_cli_strict_fails_on_a_disagreement_and_prints_the_table(dilation_results, tmp_path, capsys):
    results, _ = dilation_results
    args = ["dilation-check", "--results", str(results), "--fig-dir", str(tmp_path / "fig"),
            "--out-tex", str(tmp_path / "d.tex"), "--table"]
    assert main(args) == 0
    assert main(args + ["--strict"]) == 1
    printed = capsys.readouterr().out
    assert "NO: mean, distribution" in printed and "22 of 24 judged comparisons agree" in printed


def test_without_the_campaign_the_paragraph_says_so(tmp_path):
    assert main(["dilation-check", "--results", str(tmp_path / "results/emulated/dilation"),
                 "--fig-dir", str(tmp_path / "fig"), "--out-tex", str(tmp_path / "d.tex")]) == 0
    assert "make validate-dilation" in (tmp_path / "d.tex").read_text()
    assert not (tmp_path / "fig").exists()
    assert main(["dilation-check", "--results", str(tmp_path / "results/emulated/dilation"), "--strict",
                 "--fig-dir", str(tmp_path / "fig"), "--out-tex", str(tmp_path / "d.tex")]) == 2


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_the_paragraph_and_figure_compile_with_their_reference(dilation_results, tmp_path):
    _, ds = dilation_results
    gen = tmp_path / "generated"
    dilation_check.write(ds, CAMPAIGN, gen / "figures", gen / "dilation-check.tex")
    compile_paragraph(tmp_path, "dilation-check.tex")


def test_the_paragraph_says_why_runs_were_left_out_per_factor():
    import pandas as pd

    expected = pd.DataFrame({"run": [f"r{i}" for i in range(6)],
                             "criterion": ["dilation_k1"] * 2 + ["dilation_k2"] * 2 + ["dilation_k4"] * 2})
    flagged = pd.DataFrame({"run": ["r3", "r4", "r5"], "criterion": ["dilation_k2", "dilation_k4", "dilation_k4"],
                            # the checks' names are read, not the sentences (reworded here)
                            "flag_reasons": ["receivers sent 1.90 ...", "receivers sent 1.72 ...; 9/100 frames ...",
                                             "receivers sent 1.71 ..."],
                            "flag_checks": ["ACK clock", "ACK clock; delay line", "ACK clock"]})
    ds = tables.Dataset(runs=pd.DataFrame(), flows=pd.DataFrame(), expected=expected, include_flagged=False)
    ds.flagged_runs = flagged
    assert dilation_check.flag_summary(ds) == (
        "Flagged by their fidelity verdict and left out: 1 of 2 runs at $k = 2$ (ACK clock); "
        "2 of 2 runs at $k = 4$ (ACK clock, delay line).")


def test_conditions_without_usable_runs_get_one_mark_that_overlaps_nothing(tmp_path, monkeypatch):
    # smoke has no dilation runs: every comparison is unjudged at both factors; a mark per
    # factor, a few points apart, printed the marks on top of each other (smoke's Figure 1)
    kept = keep_drawn(monkeypatch, dilation_check)
    dilation_check.draw([{"variant": v, "rtt_ms": 0.2, "drop": p, "factor": k, "judged": False, "agree": None,
               "mean_rel_diff": None, "ks_p": None}
              for v in ("reno", "cubic", "bic", "htcp", "scalable", "highspeed") for p in (0.0, 1e-4)
              for k in (2, 4)], tmp_path / "dc")
    for ax in kept[0].axes:
        assert sum(t.get_text() == "n/a" for t in ax.texts) == 12  # one per condition
    assert overlapping_texts(kept[0], "n/a") == []

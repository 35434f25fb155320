"""Stopped early is not stopped wrong, from synthetic traces of the `stopping` campaign:
each rule run cut to where a precision rule would have stopped it (its trace carries the
decision), one port's long run made 20 % faster than its rule run, one port's rule that
ran to its max_s without reaching the precision: the check finds exactly those."""
from __future__ import annotations

import json
import shutil

import pytest
from report_helpers import compile_paragraph

from tcpeval import spec, trace
from tcpeval.analysis import stopping_check as sc
from tcpeval.analysis import synthetic, tables
from tcpeval.cli import main
from tcpeval.report import stopping_check

CAMPAIGN = "stopping"
STOP_S = 10.0  # where the rule "stopped" the reno and bic runs


def _decision(stopped: bool, at_s: float) -> dict:
    """measured.precision as a precision-driven run records it (the fields the analysis reads)."""
    rule = {"half_width": 0.05, "min_loss_events": 100, "max_s": 60.0, "min_s": None, "confidence": 0.95,
            "quantiles": [0.25, 0.5, 0.75], "batches": 20, "check_independence": True, "metrics": "after_warmup"}
    return {"rule": rule, "stopped": stopped, "precision_reached": stopped,
            "why": "precision reached" if stopped else "max_s reached: precision not reached",
            "elapsed_s": at_s, "loss_events": 400, "warmup": {"cut_index": 0, "cut_s": 0.0, "method": "MSER-5"},
            "stopped_early": stopped, "stopped_at_s": at_s if stopped else None}


def _truncate(record: dict, at_s: float) -> None:
    for f in record["flows"]:
        s = f["samples"]
        keep = sum(1 for t in s["t_s"] if t <= at_s + 1e-9)
        for key in s:
            s[key] = s[key][:keep]
        f["summary"]["bytes"] = float(sum(s["bytes"]))
        f["summary"]["mean_throughput_bps"] = f["summary"]["bytes"] * 8 / at_s


def _scale(record: dict, factor: float) -> None:
    for f in record["flows"]:
        for key in ("bytes", "throughput_bps"):
            f["samples"][key] = [x * factor for x in f["samples"][key]]
        f["summary"]["bytes"] *= factor
        f["summary"]["mean_throughput_bps"] *= factor


@pytest.fixture(scope="module")
def stopping_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("stopping")
    design = spec.load_design()
    conds = synthetic.campaign_conditions(design, CAMPAIGN)
    assert sorted((c.criterion, c.flows[0].variant, c.duration_s) for c in conds) == [
        ("stopping_long", v, 300.0) for v in ("bic", "cubic", "reno")] + [
        ("stopping_replay", v, 60.0) for v in ("bic", "cubic", "reno") for _ in range(3)] + [
        ("stopping_rule", v, 60.0) for v in ("bic", "cubic", "reno")]
    paths = synthetic.write_traces(conds, root / "raw")
    for cond, path in zip(conds, paths):
        record = trace.read_trace(path.parent)
        variant = cond.flows[0].variant
        if cond.criterion == sc.RULE:
            stopped = variant != "cubic"    # cubic's rule ran to its max_s
            if stopped:
                _truncate(record, STOP_S)
            record["measured"]["precision"] = _decision(stopped, STOP_S if stopped else 60.0)
        elif cond.criterion == sc.LONG and variant == "bic":   # a mean 20 % above the rule's
            _scale(record, 1.2)
        trace.write_trace(path.parent, record, force=True)
    assert main(["metrics", "build", "--campaign", CAMPAIGN, "--raw-dir", str(root / "raw"),
                 "--results-dir", str(root / "results")]) == 0
    results = root / "results" / "emulated" / CAMPAIGN
    return results, tables.load(results, design, CAMPAIGN, "emulated")


def test_each_rule_run_is_judged_against_its_conditions_long_run(stopping_results):
    _, ds = stopping_results
    results = {r["variant"]: r for r in stopping_check.results_of(ds)}
    assert set(results) == {"reno", "cubic", "bic"} and all(r["judged"] for r in results.values())
    reno, cubic, bic = results["reno"], results["cubic"], results["bic"]
    assert reno["agree"] and reno["rule_ran_s"] == STOP_S and reno["length_ratio"] == pytest.approx(30)
    assert abs(reno["mean_rel_diff"]) <= reno["rule_relative_hw"]
    # ran to its max_s: not stopped by itself, and the long run is exactly five times as long
    assert cubic["checks"] == {"stopped_by_itself": False, "long_enough": True, "covers_mean": True}
    assert cubic["length_ratio"] == pytest.approx(5)
    assert bic["checks"] == {"stopped_by_itself": True, "long_enough": True, "covers_mean": False}
    assert bic["mean_rel_diff"] > 0.15                   # 1 - 1 / 1.2, and the rule's start-up
    assert set(bic["quartiles"]) == {"q25", "q50", "q75"} and not any(q["covers"] for q in bic["quartiles"].values())


def test_paragraph_figure_and_json_carry_the_comparisons(stopping_results, tmp_path):
    _, ds = stopping_results
    out = stopping_check.write(ds, CAMPAIGN, tmp_path / "fig", tmp_path / "s.tex", tmp_path / "s.json")
    s = out["summary"]
    assert (s["comparisons"], s["judged"], s["agree"], s["not_judged"]) == (3, 3, 1, 0)
    assert s["failed_checks"] == {"stopped_by_itself": 1, "long_enough": 0, "covers_mean": 1}
    text = (tmp_path / "s.tex").read_text()
    assert "\\input{generated/figures/stopping-check.tex}" in text
    assert "stopped 2 of 3 by itself" in text and "covered the longer run's mean in 2 of 3" in text
    assert (tmp_path / "fig" / "stopping-check.pdf").stat().st_size > 5000
    assert "fig:stopping-check" in (tmp_path / "fig" / "stopping-check.tex").read_text()
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["campaign"] == CAMPAIGN and saved["summary"]["agree"] == 1 and len(saved["results"]) == 3


def test_the_rule_is_replayed_on_replay_runs_and_on_segments_of_long_runs(stopping_results, tmp_path):
    _, ds = stopping_results
    out = stopping_check.write(ds, CAMPAIGN, tmp_path / "fig", tmp_path / "s.tex", tmp_path / "s.json",
                               design=spec.load_design())
    replays = out["replays"]
    runs = [r for r in replays if r["kind"] == "run"]
    segments = [r for r in replays if r["kind"] == "segment"]
    assert len(runs) == 9 and len(segments) == 15                # 3 x 3 runs; 3 x 300 s / 60 s
    assert all(r["judged"] and r["stopped_s"] < 60 for r in replays)
    # bic's long run is 20 % above its replay runs: none covers it; its segments are judged
    # against the rest of that same run, which they match
    bic_runs = [r for r in runs if r["variant"] == "bic"]
    assert not any(r["covers"] for r in bic_runs) and all(r["miss_in_hw"] > 1 for r in bic_runs)
    long_bic = float(ds.runs[(ds.runs["criterion"] == sc.LONG) & (ds.runs["variant"] == "bic")]["mean_bps"].iloc[0])
    assert all(r["reference_bps"] == long_bic for r in bic_runs)
    assert all(abs(r["reference_bps"] / long_bic - 1) < 0.02 for r in segments if r["variant"] == "bic")
    s = out["summary"]["replay"]
    assert s["run"]["judged"] == 9 and s["run"]["covered"] == sum(r["covers"] for r in runs) <= 6
    assert s["segment"]["judged"] == 15
    text = (tmp_path / "s.tex").read_text()
    assert "Replayed as the run applies it: on 9 independent run(s)" in text
    assert "on 15 consecutive 60-s segment(s)" in text
    saved = json.loads((tmp_path / "s.json").read_text())
    assert len(saved["replays"]) == 24


def test_cli_strict_fails_on_a_miss_and_prints_the_table(stopping_results, tmp_path, capsys):
    results, _ = stopping_results
    args = ["stopping-check", "--results", str(results), "--fig-dir", str(tmp_path / "fig"),
            "--out-tex", str(tmp_path / "s.tex"), "--table"]
    assert main(args) == 0
    assert main(args + ["--strict"]) == 1
    printed = capsys.readouterr().out
    assert "NO: covers_mean" in printed and "NO: stopped_by_itself" in printed
    assert "1 of 3 judged comparisons agree" in printed
    assert "replayed on" in printed and "segment" in printed   # the replayed stops, one per line


def test_without_results_strict_names_the_make_target(tmp_path, capsys):
    args = ["stopping-check", "--results", str(tmp_path / "emulated" / CAMPAIGN), "--fig-dir", str(tmp_path),
            "--out-tex", str(tmp_path / "s.tex")]
    assert main(args) == 0
    assert "has not been run" in (tmp_path / "s.tex").read_text()
    assert main(args + ["--strict"]) != 0
    assert "make validate-stopping" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_the_paragraph_and_figure_compile_with_their_reference(stopping_results, tmp_path):
    _, ds = stopping_results
    gen = tmp_path / "generated"
    stopping_check.write(ds, CAMPAIGN, gen / "figures", gen / "stopping-check.tex", design=spec.load_design())
    assert "Replayed as the run applies it" in (gen / "stopping-check.tex").read_text()
    compile_paragraph(tmp_path, "stopping-check.tex")

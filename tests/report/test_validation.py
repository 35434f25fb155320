"""The validation campaign's figure and paragraph, from synthetic traces (Reno port at the
Mathis rate with delayed ACKs, the kernel's Reno without): the numbers the manuscript
prints are the ones the table gives."""
from __future__ import annotations

import math

import pytest

from tcpeval import mathis, spec
from tcpeval.analysis import synthetic, tables
from tcpeval.cli import main
from tcpeval.report import validation


@pytest.fixture(scope="module")
def validation_ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("validation")
    design = spec.load_design()
    conds = [c for c in synthetic.campaign_conditions(design, "validation", duration_s=20.0) if c.rep == 1]
    synthetic.write_traces(conds, root / "raw")
    assert main(["metrics", "build", "--campaign", "validation", "--raw-dir", str(root / "raw"),
                 "--results-dir", str(root / "results")]) == 0
    results = root / "results" / "emulated" / "validation"
    return results, tables.load(results, design, "validation", "emulated")


def test_conditions_compare_the_port_with_the_model_and_the_kernels_reno(validation_ds):
    _, ds = validation_ds
    df = validation.conditions(ds)
    assert len(df) == 16 and set(df["n_port"]) == {1} and set(df["n_native"]) == {1}
    row = df[(df["rtt_ms"] == 6.2) & (df["drop"] == 1e-4)].iloc[0]
    # the model at the measured RTT (synthetic: setting + 0.03 ms) and drop rate
    assert row["model_bps"] == pytest.approx(mathis.throughput_bps(row["measured_rtt_ms"],
                                                                   row["measured_drop"]))
    assert row["applies"] and row["within"] and row["port_slower"]
    # 0.2 ms, 1e-5: the model is far above a 9.5 Gbps link -- link-limited, not judged
    fast = df[(df["rtt_ms"] == 0.2) & (df["drop"] == 1e-5)].iloc[0]
    assert not fast["applies"] and math.isnan(fast["ratio"])


def test_paragraph_and_figure_carry_the_tables_numbers(validation_ds, tmp_path):
    _, ds = validation_ds
    df = validation.conditions(ds)
    s = validation.write(ds, tmp_path / "fig", tmp_path / "validation.tex")
    judged = df[df["applies"]]
    assert s["judged"] == len(judged) > 0
    assert s["within"] == int(judged["within"].sum())
    assert s["port_slower"] == s["compared"] == len(judged)
    text = (tmp_path / "validation.tex").read_text()
    assert "\\input{generated/figures/validation.tex}" in text
    assert f"Of {s['judged']} conditions where the model applies" in text
    assert f"in {s['port_slower']} of {s['compared']} conditions" in text
    assert (tmp_path / "fig" / "validation.pdf").stat().st_size > 5000
    assert "fig:validation" in (tmp_path / "fig" / "validation.tex").read_text()


def test_without_the_campaign_the_paragraph_says_so_and_draws_nothing(tmp_path):
    s = validation.write(None, tmp_path / "fig", tmp_path / "validation.tex")
    assert s == {"with_data": 0}
    assert "has not been run" in (tmp_path / "validation.tex").read_text()
    assert not (tmp_path / "fig").exists()


def test_cli_writes_not_run_for_a_missing_results_dir(tmp_path):
    assert main(["validation", "--results", str(tmp_path / "results/emulated/validation"),
                 "--fig-dir", str(tmp_path / "fig"), "--out-tex", str(tmp_path / "v.tex")]) == 0
    assert "make validation" in (tmp_path / "v.tex").read_text()

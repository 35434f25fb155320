"""Another study's design, end to end on the emulated backend: flows that leave on time,
UDP cross traffic, the host's native BBR, and `make report`'s Snakemake target."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval import paths, spec, trace
from tcpeval.backends import algorithms

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

DESIGN = """
name: tiny-study
defaults: {{duration_s: 6, interval_s: 0.1, repetitions: 1, rate_bps: {rate}, dilation: 1}}
campaigns: {{short: {{}}}}
criteria:
  burst:
    description: a port flow, native BBR that leaves at 4 s, UDP during [2, 4)
    metrics: [mean_throughput, recovery, retransmission_rate, jain_over_overlap, throughput_timeline]
    grid: {{rtt_ms: [4], drop: [0]}}
    flows:
      - {{variant: reno}}
      - {{variant: {native}, impl: native, stop_s: 4}}
      - {{protocol: udp, rate_bps: {udp}, start_s: 2, stop_s: 4}}
"""


def test_a_design_with_stops_udp_and_native_runs_and_is_reported(tmp_path, rate):
    native = "bbr" if "bbr" in algorithms.native_here() else "cubic"
    design_path = tmp_path / "design.yaml"
    design_path.write_text(DESIGN.format(rate=int(rate), native=native, udp=int(rate / 4)))
    design = spec.load_design(design_path)
    (run,) = spec.expand(design, "short")
    assert paths.run_dir(run) == f"data/raw/emulated/tiny-study/short/burst/reno+{native}-native+udp/rtt4/drop0/rep1"

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text())
    # include_flagged: this run's verdict is the host's to give (two TCP flows and UDP make
    # this VM skip a port's hook now and then, and a run can stay flagged after its retries);
    # the report must show the run and say which verdict it got either way
    proc = subprocess.run([*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-c2", "report", "--config",
                           f"design={design_path}", "campaign=short", "include_flagged=True"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    record = trace.read_trace(tmp_path / paths.run_dir(run))
    flows = record["flows"]
    assert [f["protocol"] for f in flows] == ["tcp", "tcp", "udp"]
    assert flows[1]["cc"]["verified"] == native and flows[1]["impl"] == "native"
    # each flow started and stopped on time (physical seconds of the run; 0.5 s slack)
    assert flows[1]["stop_s"] == 4 and abs(flows[1]["actual"]["stop_s"] - 4) < 0.5
    assert abs(flows[2]["actual"]["start_s"] - 2) < 0.5 and abs(flows[2]["actual"]["stop_s"] - 4) < 0.5
    assert flows[1]["samples"]["t_s"][-1] <= 4.05 and flows[0]["samples"]["t_s"][-1] >= 5.9

    results = tmp_path / "results" / "emulated" / "tiny-study" / "short"
    html = (results / "report" / "report.html").read_text()
    # one condition: its table and its timeline (bar plots need a factor that varies)
    assert "<h2>burst</h2>" in html and "time to 90 %" in html and f"reno+{native}-native+udp" in html
    assert html.count("<img") == 1
    if record["fidelity"]["verdict"] == "ok":
        assert "Runs with verdict ok: 1 of 1." in html and "Flagged runs" not in html
    else:
        assert "Runs with verdict ok: 0 of 1 (1 flagged run included)." in html
        assert "Flagged runs (included)" in html
        assert f"reno+{native}-native+udp/rtt4/drop0/rep1</code>: " in html
    pdf = results / "report" / "report.pdf"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert "Pages:" in info
    import pandas as pd
    row = pd.read_parquet(results / "runs.parquet").iloc[0]
    assert (row["disturbance_start_s"], row["disturbance_stop_s"]) == (2, 4)
    assert row["n_tcp"] == 2 and 0 < row["jain_overlap"] <= 1
    assert json.loads(row["factors"]) == {}
    assert nothing_left(run_id_of(tmp_path / paths.run_dir(run)))

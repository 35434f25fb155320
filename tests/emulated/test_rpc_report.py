"""The RPC design's short campaign, end to end: `make report`'s Snakemake target runs it and
reports per-flow goodput, RPC latency percentiles and CDFs, and the flows' window, RTT and
retransmissions over time, in HTML and PDF."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tcpeval import paths, spec

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "config" / "designs" / "rpc-beside-streams.yaml"


def test_the_rpc_design_runs_and_reports_latency_and_per_flow_figures(tmp_path):
    design = spec.load_design(DESIGN)
    runs = spec.expand(design, "short")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text())
    # include_flagged: the report must show a run whatever verdict this host gives it
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-c2", "report",
                           "--config", f"design={DESIGN}", "campaign=short", "include_flagged=True"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    results = tmp_path / "results" / "emulated" / "rpc-beside-streams" / "short"
    flows = pd.read_parquet(results / "flows.parquet")
    rpc = flows[flows["protocol"] == "rpc"]
    assert len(rpc) == len(runs) == 2
    # every RPC flow: answered RPCs, percentiles in order, none faster than the 10-ms path
    for _, f in rpc.iterrows():
        assert f["rpc_completed"] > 0 and f["rpc_completed"] == f["rpc_issued"]
        assert 10e3 * 0.95 <= f["rpc_lat_min_us"] <= f["rpc_lat_p50_us"] <= f["rpc_lat_p90_us"] \
            <= f["rpc_lat_p99_us"] <= f["rpc_lat_p999_us"] <= f["rpc_lat_max_us"]
        assert len(f["rpc_lat_cdf_us"]) > 100
    # a 1 MB response takes longer than a 10 kB one
    by_size = rpc.set_index("rpc_response_bytes")["rpc_lat_p50_us"]
    assert by_size[1e6] > by_size[1e4]
    html = (results / "report" / "report.html").read_text()
    for heading in ("Per flow", "Window, RTT and retransmissions over time", "RPC latency"):
        assert f"<h3>{heading}</h3>" in html
    assert "RPC 100 B/10 kB back to back" in html and "p99.9 [us]" in html
    assert html.count("<img") == 3 * len(runs)  # timelines, flow timelines, CDFs
    for r in runs:
        assert paths.run_dir(r).split("/rtt")[0].rsplit("/", 1)[1] in html
    info = subprocess.run(["pdfinfo", str(results / "report" / "report.pdf")], capture_output=True,
                          text=True, check=True).stdout
    assert int(info.split("Pages:")[1].split()[0]) >= 1 + 2 + 3 * len(runs)

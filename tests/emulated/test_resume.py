"""A matrix interrupted mid-way resumes where it stopped: killing Snakemake (SIGTERM, as
`kill` sends) and starting it again runs only the runs that have no trace, and leaves
the traces already written untouched. The local profile here; the SLURM profile in
tests/emulated/test_slurm.py."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval import paths, spec, trace

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]

DESIGN = """
name: resume-study
defaults: {{duration_s: 2, interval_s: 0.1, repetitions: 2, rate_bps: {rate}, dilation: 1}}
campaigns: {{short: {{}}}}
criteria:
  one:
    description: one reno flow at three RTTs, twice
    metrics: [mean_throughput]
    grid: {{rtt_ms: [2, 4, 8], drop: [0]}}
    flows:
      - {{variant: reno}}
"""


def snakemake(workdir: Path, design: Path, profile: str = "default") -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
            "--profile", str(REPO / "workflow" / "profiles" / profile), "runs",
            "--config", f"design={design}", "campaign=short"]


def interrupt_after(cmd: list[str], cwd: Path, traces: list[Path], n: int, timeout_s: float,
                    env: dict | None = None, sig: int = signal.SIGTERM) -> str:
    """Start Snakemake, send it `sig` once n traces exist, wait for it to exit; its output.
    SIGTERM (`kill`): Snakemake lets the running jobs finish; SIGINT (Ctrl-C): it stops
    them (on SLURM: cancels every job it submitted)."""
    log = cwd / "first.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + timeout_s
            while sum(t.exists() for t in traces) < n:
                assert proc.poll() is None, f"Snakemake ended before the interruption:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no {n} traces in {timeout_s} s:\n{log.read_text()[-3000:]}"
                time.sleep(0.2)
            proc.send_signal(sig)
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                pytest.fail(f"Snakemake did not stop within 300 s of {signal.Signals(sig).name}:\n"
                            f"{log.read_text()[-3000:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return log.read_text()


def test_an_interrupted_matrix_runs_only_its_missing_runs_when_started_again(tmp_path, rate):
    design_path = tmp_path / "design.yaml"
    design_path.write_text(DESIGN.format(rate=int(rate)))
    runs = spec.expand(spec.load_design(design_path), "short")
    traces = [tmp_path / paths.trace_path(r) for r in runs]
    assert len(traces) == 6
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text())
    cmd = snakemake(tmp_path, design_path)

    first = interrupt_after(cmd, tmp_path, traces, n=2, timeout_s=600)
    done = {t: t.stat().st_mtime_ns for t in traces if t.exists()}
    assert 2 <= len(done) < len(traces), first[-3000:]
    for t in done:
        trace.read_trace(t.parent)  # each trace written is whole (validated)

    second = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    log = second.stdout + second.stderr
    # Snakemake's job table: exactly the missing runs, and nothing for the ones written
    ran = int(re.search(r"^run\s+(\d+)$", log, re.M).group(1))
    assert ran == len(traces) - len(done), log[-3000:]
    assert all(t.exists() for t in traces)
    assert {t: t.stat().st_mtime_ns for t in done} == done   # untouched
    for t in traces:
        assert trace.read_trace(t.parent)["fidelity"]["verdict"] in ("ok", "flagged")
    assert nothing_left(run_id_of(traces[-1].parent))

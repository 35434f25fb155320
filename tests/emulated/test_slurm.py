"""The smoke campaign's network runs on a real SLURM cluster (one node, from Debian's
packages, started by tools/slurm-local.sh) through the `slurm` profile and Snakemake's
executor plugin: every run a job that owns its node, interrupted mid-matrix and resumed
with only the missing runs, and no daemon left afterwards. Slow (~20 min): run with
`make test-all` or `pytest -m slow tests/emulated/test_slurm.py`."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from emulated_helpers import nothing_left, run_id_of
from test_resume import interrupt_after

from tcpeval import paths, spec, trace

pytestmark = [pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "slurm-local.sh"
DAEMONS = ("munged", "slurmctld", "slurmd")


def running(names=DAEMONS) -> list[str]:
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue
        if name in names:
            found.append(f"{name} ({comm.parent.name})")
    return found


def jobs(env) -> list[dict]:
    out = subprocess.run([str(SCRIPT), "jobs"], env=env, capture_output=True, text=True, check=True).stdout
    keys = ("id", "name", "state", "oversubscribe", "cpus")
    return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line]


@pytest.fixture
def cluster(tmp_path):
    conf = Path("/etc/slurm/slurm.conf")
    if conf.exists() and not str(conf.resolve()).startswith(str(tmp_path)):
        pytest.skip(f"{conf} belongs to a real cluster here; the test will not replace it")
    if running():
        pytest.skip(f"SLURM or munge daemons already run here: {running()}")
    env = {**os.environ, "SLURM_LOCAL_DIR": str(tmp_path / "slurm"),
           "TCPEVAL_SLURM_ACCOUNT": "tcpeval", "TCPEVAL_SLURM_PARTITION": "tcpeval"}
    subprocess.run([str(SCRIPT), "start"], env=env, check=True, timeout=900)
    try:
        yield env
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, check=True, timeout=120)
        assert not running(), f"left running: {running()}"
        assert not conf.is_symlink()


def test_smoke_runs_on_slurm_own_their_node_and_resume_after_an_interruption(tmp_path, cluster):
    work = tmp_path / "work"
    (work / "config").mkdir(parents=True)
    for name in ("config.yaml", "design.yaml"):
        (work / "config" / name).write_text((REPO / "config" / name).read_text())
    runs = spec.expand(spec.load_design(work / "config" / "design.yaml"), "smoke")
    traces = [work / paths.trace_path(r) for r in runs]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--profile", str(REPO / "workflow" / "profiles" / "slurm"), "--slurm-keep-successful-logs",
           "runs", "--config", "campaign=smoke"]

    # Ctrl-C: Snakemake cancels the jobs it submitted (a plain `kill` would let all of
    # them, queued ones included, run to the end)
    first = interrupt_after(cmd, work, traces, n=4, timeout_s=1200, env=cluster, sig=signal.SIGINT)
    assert "has been submitted with SLURM jobid" in first, first[-3000:]
    # wait until the cancelled jobs have left the queue
    deadline = time.monotonic() + 300
    while any(j["state"] in ("PENDING", "RUNNING", "COMPLETING") for j in jobs(cluster)):
        assert time.monotonic() < deadline, jobs(cluster)
        time.sleep(2)
    # a job that ended after the last status check counts as running for Snakemake, which
    # removes its output on Ctrl-C (it runs again): at least the others stay
    done = {t: t.stat().st_mtime_ns for t in traces if t.exists()}
    assert 1 <= len(done) < len(traces)

    second = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=3600, env=cluster)
    log = second.stdout + second.stderr
    assert second.returncode == 0, log[-4000:]
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", log)
    assert len(submitted) == len(traces) - len(done), log[-3000:]
    assert all(t.exists() for t in traces)
    assert {t: t.stat().st_mtime_ns for t in done} == done      # the written ones untouched
    for t in traces:
        assert trace.read_trace(t.parent)["run"]["path"]         # whole and valid
    # every network run was an exclusive job holding all of the node's CPUs (squeue still
    # shows the jobs of the last MinJobAge = 300 s)
    seen = [j for j in jobs(cluster) if j["id"] in submitted]
    assert seen, jobs(cluster)
    for j in seen:
        assert j["oversubscribe"] == "NO" and int(j["cpus"]) == os.cpu_count(), j
    assert len(list((work / ".snakemake" / "slurm_logs" / "rule_run").glob("*/*.log"))) >= len(submitted)
    assert nothing_left(run_id_of(traces[-1].parent))

"""The Snakemake workflow: the DAG of each campaign, the rule per run, config validation."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/default"]


def dry_run(*args):
    proc = subprocess.run([*SNAKEMAKE, "-n", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def job_counts(output):
    """The 'Job stats' table of a dry run: rule -> count."""
    table = output.split("Job stats:")[1].split("Reasons:")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.parametrize("campaign, runs", [("paper", 1280), ("quick", 256), ("smoke", 33)])
def test_dry_run_lists_every_run_of_the_campaign(campaign, runs, tmp_path):
    code, out = dry_run("--config", f"campaign={campaign}", f"raw_dir={tmp_path}/raw",
                        f"results_dir={tmp_path}/results", "-q", "rules")
    assert code == 0, out
    counts = job_counts(out)
    assert counts["run"] == runs
    assert counts["all"] == 1
    assert len(counts) > 3  # analysis, figures and paper jobs follow the runs


def test_one_run_path_is_a_target_of_its_own(tmp_path):
    target = f"{tmp_path}/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep3/trace.json"
    code, out = dry_run(target, "--config", "campaign=paper", f"raw_dir={tmp_path}/raw")
    assert code == 0, out
    assert job_counts(out) == {"run": 1, "total": 1}
    assert "tcpeval run" in out and "rtt6.2/drop1e-05/rep3" in out


def test_invalid_config_value_stops_before_any_job():
    code, out = dry_run("--config", "backend=simulated")
    assert code != 0
    assert "backend" in out and "simulated" in out


def test_unknown_campaign_stops_with_allowed_values():
    code, out = dry_run("--config", "campaign=full")
    assert code != 0
    assert "unknown campaign 'full'" in out and "paper, quick, smoke" in out

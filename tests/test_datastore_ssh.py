"""Raw traces over SSH: `tcpeval data push|pull` with TCPEVAL_DVC_REMOTE=ssh://... against a
real OpenSSH server (sshd in a network namespace, throw-away keys: tests/ssh_lab.py) through
the real dvc and its dvc-ssh plugin. A fresh clone pulls the campaign byte for byte, and its
workflow then schedules no run."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssh_lab import running_ssh_lab
from tcpeval import spec
from tcpeval.analysis import synthetic
from tcpeval.datastore import REMOTE_ENV, URL_REMOTE

REPO = Path(__file__).resolve().parents[1]
DVC = str(Path(sys.executable).with_name("dvc"))
CAMPAIGN = "smoke"
pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(not Path(DVC).exists() or not shutil.which("git"), reason="needs dvc and git"),
    pytest.mark.skipif(importlib.util.find_spec("dvc_ssh") is None,
                       reason="needs the dvc-ssh plugin (requirements.txt): run `make bootstrap`"),
]


def sh(*args, cwd, env=None):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def ssh_store(tmp_path_factory):
    """One sshd (host `store`) and the environment of an SSH client in the lab's controller
    namespace: its own HOME whose ~/.ssh/config names the lab's key (read by asyncssh, the
    client dvc-ssh uses), and a DVC site cache of its own (not /var/tmp/dvc)."""
    root = tmp_path_factory.mktemp("ssh-lab")
    with running_ssh_lab(root, ["store"]) as lab:
        home = root / "home"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        (home / ".ssh" / "config").write_text(
            f"Host {lab.addresses['store']}\n    User root\n    IdentityFile {lab.key}\n")
        env = {**os.environ, "HOME": str(home), "DVC_SITE_CACHE_DIR": str(root / "dvc-site-cache"),
               "DVC_NO_ANALYTICS": "1"}
        env.pop(REMOTE_ENV, None)
        yield lab, env, root / "remote"


def tcpeval_in_lab(lab, env, *args, cwd, check=True):
    """The CLI as `make data-push|data-pull` runs it, from the controller namespace."""
    proc = subprocess.run(["ip", "netns", "exec", lab.ctl, sys.executable, "-m", "tcpeval.cli", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def job_counts(output):
    """Snakemake's 'Job stats' table: rule -> count (as tests/test_workflow.py reads it)."""
    table = re.search(r"Job stats:\n(.*?^total\s+\d+$)", output, re.S | re.M).group(1)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def dry_run(root):
    """The jobs `make paper` would run there. allow_missing=False (the default, said here):
    a missing trace is a `run` job (33 for the campaign: tests/test_workflow.py)."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-c1", "-n", "-q",
                           "rules", "--config", f"campaign={CAMPAIGN}", "allow_missing=False"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return job_counts(proc.stdout + proc.stderr)


def project_repo(root: Path, env: dict) -> Path:
    """A git + DVC repository with the workflow's config and manuscript sources (what a
    dry run reads) and synthetic traces of every run of the campaign."""
    repo = root / "repo"
    repo.mkdir()
    sh("git", "init", "-q", cwd=repo)
    sh("git", "config", "user.email", "t@example.invalid", cwd=repo)
    sh("git", "config", "user.name", "t", cwd=repo)
    sh(DVC, "init", "-q", cwd=repo, env=env)
    (repo / "config").mkdir()
    (repo / "paper").mkdir()
    for name in ("config/config.yaml", "config/design.yaml", "paper/main.tex", "paper/claims.yaml"):
        shutil.copy2(REPO / name, repo / name)
    design = spec.load_design(REPO / "config" / "design.yaml")
    synthetic.write_traces(synthetic.campaign_conditions(design, CAMPAIGN, duration_s=2), repo / "data" / "raw")
    return repo


def test_a_campaign_goes_over_ssh_and_a_fresh_clone_needs_no_run(ssh_store, tmp_path):
    lab, env, remote_dir = ssh_store
    repo = project_repo(tmp_path, env)
    traces = repo / "data" / "raw" / "emulated" / CAMPAIGN
    files = {p.relative_to(repo): p.read_bytes() for p in traces.rglob("*") if p.is_file()}
    assert sum(p.name == "trace.json" for p in files) == 33
    url = f"ssh://root@{lab.addresses['store']}{remote_dir}"
    env = {**env, REMOTE_ENV: url}

    tcpeval_in_lab(lab, env, "data", "push", "--campaign", CAMPAIGN, "--repo", repo, cwd=repo)
    objects = sum(p.is_file() for p in remote_dir.rglob("*"))
    assert objects > len(set(files.values())), "the SSH remote lacks objects"  # one per content, + the listing
    # the server's address is the user's: in git-ignored .dvc/config.local, not the committed config
    assert url not in (repo / ".dvc" / "config").read_text()
    assert url in (repo / ".dvc" / "config.local").read_text()
    sh("git", "add", "-A", cwd=repo)
    sh("git", "commit", "-qm", "snapshot", cwd=repo)

    clone = tmp_path / "clone"
    sh("git", "clone", "-q", repo, clone, cwd=tmp_path)
    assert not (clone / traces.relative_to(repo)).exists()  # only the .dvc pointer is in git
    assert not (clone / ".dvc" / "cache").exists() and not (clone / ".dvc" / "config.local").exists()

    tcpeval_in_lab(lab, env, "data", "pull", "--campaign", CAMPAIGN, "--repo", clone, cwd=clone)
    assert {p: (clone / p).read_bytes() for p in files} == files
    counts = dry_run(clone)
    assert "run" not in counts, counts  # the analysis and the paper follow from the pulled traces
    assert counts["metrics_run"] == 33 and counts["paper"] == counts["all"] == 1


def test_an_unreachable_ssh_remote_names_the_setting(ssh_store, tmp_path):
    lab, env, remote_dir = ssh_store
    repo = tmp_path / "repo"
    (repo / "data" / "raw" / "emulated" / CAMPAIGN / "run").mkdir(parents=True)
    (repo / "data" / "raw" / "emulated" / CAMPAIGN / "run" / "trace.json").write_text("{}\n")
    sh("git", "init", "-q", cwd=repo)
    sh(DVC, "init", "-q", cwd=repo, env=env)
    url = f"ssh://root@10.78.0.1{remote_dir}"  # the controller's own address: no sshd there
    proc = tcpeval_in_lab(lab, {**env, REMOTE_ENV: url}, "data", "push", "--campaign", CAMPAIGN,
                          "--repo", repo, cwd=repo, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{REMOTE_ENV}={url}" in proc.stderr and "Connect call failed" in proc.stderr, proc.stderr
    assert f"-r {URL_REMOTE}" in proc.stderr

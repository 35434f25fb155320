"""Raw traces go to a real DVC remote and come back byte for byte in a fresh clone."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpeval import datastore
from tcpeval.errors import UserError

DVC = str(Path(sys.executable).with_name("dvc"))
pytestmark = pytest.mark.skipif(not Path(DVC).exists() or not shutil.which("git"), reason="needs dvc and git")


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True)


@pytest.fixture(autouse=True)
def dvc_environment(monkeypatch, tmp_path):
    """The tester's own TCPEVAL_DVC_REMOTE must not send these pushes anywhere, and dvc's
    per-repository site cache goes to tmp_path, not /var/tmp/dvc (one more directory a run)."""
    monkeypatch.delenv(datastore.REMOTE_ENV, raising=False)
    monkeypatch.setenv("DVC_SITE_CACHE_DIR", str(tmp_path / "dvc-site-cache"))


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    sh("git", "init", "-q", cwd=repo)
    sh("git", "config", "user.email", "t@example.invalid", cwd=repo)
    sh("git", "config", "user.name", "t", cwd=repo)
    sh(DVC, "init", "-q", cwd=repo)
    sh(DVC, "remote", "add", "-d", "store", str(tmp_path / "store"), cwd=repo)
    return repo


def write_runs(repo):
    files = {}
    for rep in (1, 2):
        run = repo / f"data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop0/rep{rep}"
        run.mkdir(parents=True)
        (run / "trace.json").write_text(f'{{"rep": {rep}}}\n')
        (run / "flow0.iperf3.json").write_bytes(bytes(range(256)) * rep)
        files.update({p.relative_to(repo): p.read_bytes() for p in run.iterdir()})
    return files


def test_push_then_pull_in_a_fresh_clone_restores_every_trace(repo, tmp_path):
    files = write_runs(repo)
    dvc_file = datastore.push(repo, "data/raw", "emulated", "smoke")
    assert dvc_file == repo / "data/raw/emulated/smoke.dvc"
    assert any((tmp_path / "store").rglob("*")), "the remote received no objects"
    sh("git", "add", "-A", cwd=repo)
    sh("git", "commit", "-qm", "snapshot", cwd=repo)

    clone = tmp_path / "clone"
    sh("git", "clone", "-q", str(repo), str(clone), cwd=tmp_path)
    assert not (clone / "data/raw/emulated/smoke").exists()  # only the .dvc pointer is in git
    datastore.pull(clone, "data/raw", "emulated", "smoke")
    assert {p: (clone / p).read_bytes() for p in files} == files


def test_push_of_a_missing_campaign_names_it(repo):
    with pytest.raises(UserError, match="no raw traces for backend 'emulated', campaign 'quick'"):
        datastore.push(repo, "data/raw", "emulated", "quick")


def test_pull_without_snapshot_says_how_to_make_one(repo):
    with pytest.raises(UserError, match="no snapshot.*tcpeval data push"):
        datastore.pull(repo, "data/raw", "emulated", "paper")


def test_the_environment_variable_chooses_the_remote(repo, tmp_path, monkeypatch):
    sh(DVC, "remote", "add", "other", str(tmp_path / "other"), cwd=repo)
    write_runs(repo)
    monkeypatch.setenv(datastore.REMOTE_ENV, "other")
    datastore.push(repo, "data/raw", "emulated", "smoke")
    assert any((tmp_path / "other").rglob("*")) and not (tmp_path / "store").exists()


def test_an_unknown_remote_name_names_the_setting_and_the_remotes_there(repo, monkeypatch):
    write_runs(repo)
    monkeypatch.setenv(datastore.REMOTE_ENV, "shared")
    with pytest.raises(UserError, match=r"TCPEVAL_DVC_REMOTE=shared: no DVC remote of that name .*\(it has: store\)"):
        datastore.push(repo, "data/raw", "emulated", "smoke")
    with pytest.raises(UserError, match="--remote elsewhere: no DVC remote of that name"):
        datastore.push(repo, "data/raw", "emulated", "smoke", remote="elsewhere")


@pytest.mark.parametrize("url, problem", [("ssh://host", "no directory on the server"),
                                          ("ssh://host/", "no directory on the server"),
                                          ("ssh://user@:22/traces", "no host"),
                                          ("ssh://host:ssh/traces", "the port is not a TCP port number")])
def test_a_malformed_ssh_url_is_refused_before_dvc_runs(url, problem, tmp_path, monkeypatch):
    (tmp_path / "data/raw/emulated/smoke").mkdir(parents=True)  # no DVC repository: nothing gets that far
    monkeypatch.setenv(datastore.REMOTE_ENV, url)
    with pytest.raises(UserError, match=f"^TCPEVAL_DVC_REMOTE={url}: {problem} \\(expected ssh://"):
        datastore.push(tmp_path, "data/raw", "emulated", "smoke")

"""The root gate (tests/root_gate.py) on a small suite of its own, in real pytest runs:
without root a root-marked test is skipped whatever folder it is in, and only those;
with --require-root a root-marked test that does not run fails, and the option refuses
to start without root."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SUITE = {
    "a/test_a.py": "import pytest\n\n@pytest.mark.root\ndef test_root_runs():\n    pass\n\n"
                   "def test_plain_runs():\n    pass\n",
    "b/test_b.py": "import pytest\n\n@pytest.mark.root\ndef test_root_skips_itself():\n"
                   "    pytest.skip('host has one CPU')\n\n"
                   "def test_plain_skip():\n    pytest.skip('no nix')\n",
}


@pytest.fixture
def suite():
    """The suite in a directory any user can read (pytest's tmp_path is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="tcpeval-gate-"))
    try:
        os.chmod(root, 0o755)
        (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    root: needs root\n")
        for name, text in SUITE.items():
            (root / name).parent.mkdir(exist_ok=True)
            (root / name).write_text(text)
        yield root
    finally:
        shutil.rmtree(root)


def _pytest(suite, *args, user=None):
    cmd = [sys.executable, "-m", "pytest", "-p", "root_gate", "-p", "no:cacheprovider", "-rfEs", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--", *cmd]
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run(cmd, cwd=suite, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.root
def test_require_root_fails_a_root_test_that_did_not_run(suite):
    proc = _pytest(suite, "--require-root")
    assert proc.returncode == 1, proc.stdout
    assert "root-only test did not run under --require-root: host has one CPU" in proc.stdout
    assert "1 failed, 2 passed, 1 skipped" in proc.stdout  # the plain skip stays a skip


@pytest.mark.root
def test_as_root_without_the_option_a_root_test_may_skip(suite):
    proc = _pytest(suite)
    assert proc.returncode == 0 and "2 passed, 2 skipped" in proc.stdout, proc.stdout


@pytest.mark.root  # setpriv needs root to become another user
def test_without_root_only_root_tests_are_skipped_in_every_folder(suite):
    proc = _pytest(suite, user=65534)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("needs root (network namespaces, qdiscs, BPF)") == 2
    assert "1 passed, 3 skipped" in proc.stdout
    refused = _pytest(suite, "--require-root", user=65534)
    assert refused.returncode == 4 and "--require-root: running as uid 65534, not root" in refused.stderr

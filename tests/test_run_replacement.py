"""A forced rerun over a kept run never half-overwrites it: the old run waits aside until
the new trace is written, and comes back whole if the rerun fails (backends.record.replacing;
the real runs: tests/emulated/test_robustness.py)."""
from __future__ import annotations

import pytest

from tcpeval.backends.base import BackendError
from tcpeval.backends.record import FAILED_LOG, replacing


def _kept_run(run_dir):
    run_dir.mkdir(parents=True)
    (run_dir / "trace.json").write_text('{"old": true}')
    (run_dir / "iperf3-flow0.json").write_text("old raw")
    (run_dir / "run.log").write_text("old log")


def _rerun(run_dir, raw="new raw"):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.log").write_text("new log")
    (run_dir / "iperf3-flow0.json").write_text(raw)


def test_a_forced_rerun_that_fails_puts_the_old_run_back_whole_with_its_own_log_beside_it(tmp_path):
    run_dir = tmp_path / "rep1"
    _kept_run(run_dir)
    with pytest.raises(KeyboardInterrupt), replacing(run_dir, force=True) as aside:
        assert aside == tmp_path / ".rep1.replaced" and (aside / "trace.json").exists()
        assert not run_dir.exists()  # the rerun starts in a fresh directory
        _rerun(run_dir, raw="")
        raise KeyboardInterrupt
    assert (run_dir / "trace.json").read_text() == '{"old": true}'
    assert (run_dir / "iperf3-flow0.json").read_text() == "old raw"
    assert (run_dir / "run.log").read_text() == "old log"
    assert (run_dir / FAILED_LOG).read_text() == "new log"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep1"]


def test_a_forced_rerun_that_succeeds_leaves_only_the_new_run(tmp_path):
    run_dir = tmp_path / "rep1"
    _kept_run(run_dir)
    with replacing(run_dir, force=True):
        _rerun(run_dir)
        (run_dir / "trace.json").write_text('{"new": true}')
    assert sorted(p.name for p in run_dir.iterdir()) == ["iperf3-flow0.json", "run.log", "trace.json"]
    assert (run_dir / "trace.json").read_text() == '{"new": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep1"]


@pytest.mark.parametrize("force", [False, True])
def test_without_a_trace_to_replace_nothing_is_moved(tmp_path, force):
    run_dir = tmp_path / "rep1"
    run_dir.mkdir()
    (run_dir / "run.log").write_text("an earlier failed run's log")
    with replacing(run_dir, force=force) as aside:
        assert aside is None and (run_dir / "run.log").exists()


def test_a_run_set_aside_by_an_unfinished_rerun_is_never_overwritten(tmp_path):
    run_dir = tmp_path / "rep1"
    _kept_run(run_dir)
    (tmp_path / ".rep1.replaced").mkdir()
    with pytest.raises(BackendError, match=r"\.rep1\.replaced exists: an earlier forced rerun"):
        with replacing(run_dir, force=True):
            pytest.fail("ran")
    assert (run_dir / "trace.json").exists()

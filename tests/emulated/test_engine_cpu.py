"""The link engine's CPU is cleared of the host's movable tasks for a run, and every one
of them (and what they started meanwhile) gets it back -- also after a run killed midway.
Real processes and the real affinity calls; the engine's CPU is this host's last."""
from __future__ import annotations

import os
import subprocess

import pytest

from tcpeval.backends.emulated import engine_cpu, host

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")]

ALL = frozenset(os.sched_getaffinity(0))
CPU = max(ALL)
OTHERS = sorted(ALL - {CPU})


@pytest.fixture
def shell():
    """A shell that may run anywhere and starts a child when told to (stdin 'go')."""
    proc = subprocess.Popen(["sh", "-c", "read go; sleep 60 & echo $!; wait"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    os.sched_setaffinity(proc.pid, ALL)
    children = []
    yield proc, children
    for pid in children:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.wait()


def _start_child(proc, children) -> int:
    proc.stdin.write("go\n")
    proc.stdin.flush()
    children.append(int(proc.stdout.readline()))
    return children[-1]


def test_a_task_that_may_move_leaves_the_engine_cpu_and_gets_it_back_with_what_it_started(shell, tmp_path):
    proc, children = shell
    state = tmp_path / f"run{engine_cpu.STATE_SUFFIX}"
    record = engine_cpu.clear(CPU, OTHERS, state)
    try:
        assert record["cleared"] and record["moved"] >= 1
        assert state.exists()  # written before anything moved
        assert os.sched_getaffinity(proc.pid) == set(OTHERS)
        child = _start_child(proc, children)  # inherits the moved mask
        assert os.sched_getaffinity(child) == set(OTHERS)
    finally:
        engine_cpu.restore(state, record)
    assert os.sched_getaffinity(proc.pid) == ALL
    assert os.sched_getaffinity(child) == ALL
    assert record["restored"] >= 1 and record["given_back"] >= 1
    assert not state.exists()


def test_a_task_pinned_to_the_engine_cpu_alone_stays_there(tmp_path):
    pinned = subprocess.Popen(["sleep", "60"])
    os.sched_setaffinity(pinned.pid, {CPU})
    state = tmp_path / f"run{engine_cpu.STATE_SUFFIX}"
    try:
        record = engine_cpu.clear(CPU, OTHERS, state)
        engine_cpu.restore(state, record)
        assert os.sched_getaffinity(pinned.pid) == {CPU}
        assert "sleep" in record["left_pinned"]
    finally:
        pinned.kill()
        pinned.wait()


def test_a_run_killed_midway_is_put_back_by_cleanup(shell):
    proc, _ = shell
    run_id = host.new_run_id()
    host.STATE_DIR.mkdir(parents=True, exist_ok=True)
    state = host.STATE_DIR / f"{run_id}{engine_cpu.STATE_SUFFIX}"
    engine_cpu.clear(CPU, OTHERS, state)
    assert os.sched_getaffinity(proc.pid) == set(OTHERS)
    host.remove_run(run_id)  # what `tcpeval cleanup` does for a dead run's id
    assert os.sched_getaffinity(proc.pid) == ALL
    assert not state.exists()


def test_the_opt_out_moves_nothing_and_says_so(shell, tmp_path, monkeypatch):
    proc, _ = shell
    monkeypatch.setenv(engine_cpu.OPT_OUT, "0")
    state = tmp_path / f"run{engine_cpu.STATE_SUFFIX}"
    record = engine_cpu.clear(CPU, OTHERS, state)
    assert record == {"cpu": CPU, "cleared": False, "why": f"{engine_cpu.OPT_OUT}=0"}
    assert os.sched_getaffinity(proc.pid) == ALL and not state.exists()

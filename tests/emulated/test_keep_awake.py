"""The keep-awake loops (backends/emulated/awake.py): one per CPU for the span of a run,
they take only time nothing else wants, their CPU time stays out of measured.cpu_busy, and
none outlives its run."""
from __future__ import annotations

import os
import time

import pytest
from emulated_helpers import keep_awake_loops, nothing_left, run_id_of

from tcpeval.backends.emulated import awake, host
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_loops_yield_the_cpu_to_real_work_and_count_their_own_time(art):
    cpu = sorted(os.sched_getaffinity(0))[0]
    with host.HostLock(900.0):  # no run (with loops of its own) beside this test
        _yield_and_count(art, cpu)


def _yield_and_count(art, cpu: int) -> None:
    loops = awake.KeepAwake(art.tevdelay, [cpu])
    loops.start()
    try:
        assert len(keep_awake_loops()) == 1
        time.sleep(0.5)
        assert loops.ticks() > 0  # it ran while the CPU had nothing else to do
        # a busy ordinary task on the same CPU gets (nearly) all of it: SCHED_IDLE
        pid = os.fork()
        if pid == 0:
            os.sched_setaffinity(0, {cpu})
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                pass
            os._exit(0)
        before = loops.ticks()
        os.waitpid(pid, 0)
        spent = (loops.ticks() - before) / os.sysconf("SC_CLK_TCK")
        assert spent < 0.1, f"the loop took {spent:.2f} s of the 1 s a busy task wanted"
    finally:
        loops.stop()
    assert keep_awake_loops() == []


def test_a_run_records_the_loops_and_leaves_them_out_of_cpu_busy(backend, tmp_path):
    cond = adhoc_condition(["cubic"], 6.2, 0.0, 2.0, impl="native", rate_bps=200e6, seed=4,
                           dilation=1)  # real time: the keep-awake loops are what is compared
    record = backend.run(cond, tmp_path)
    ka = record["mechanisms"]["keep_awake"]
    # every CPU but the link engine's: it spins, and a runnable loop beside it is what the
    # kernel's fair server would stop it for
    engine_cpu = {record["mechanisms"]["placement"]["line"]} if record["mechanisms"]["rate"] == "tevlink" else set()
    assert ka["cpus"] == sorted(set(os.sched_getaffinity(0)) - engine_cpu) and ka["mechanism"] == "tevdelay-awake"
    # in the root cpu group, where SCHED_IDLE puts them behind everything on the host (a
    # container's group would compete with ksoftirqd as ordinary work: mount the host's
    # /sys/fs/cgroup into it, README "Container image")
    assert ka["cpu_cgroup"] == "/", ka
    # at 0.2 Gbps the host is far from busy; counted with the loops it would read ~100 %
    assert record["measured"]["cpu_busy"] < 0.9, record["measured"]["cpu_busy"]
    assert keep_awake_loops() == []
    assert nothing_left(run_id_of(tmp_path))

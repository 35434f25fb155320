"""The bottleneck's two mechanisms on real runs (root only): the link engine (scheduled
departures, tevdelay.c) carries exactly its rate, never queues more than its buffer,
drops at the tail and says how late its departures left; TBF stays as the fallback.
Each trace names the mechanism that shaped it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    pids_where,
    run_id_of,
)

from tcpeval.backends import get_backend
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_the_link_engine_carries_its_rate_and_queues_at_most_its_buffer(backend, rate_on, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPEVAL_LINK", "tevlink")
    rate = rate_on("tevlink", 2.0)
    # a buffer of one BDP or more: Reno's halved window still fills the link (with half a
    # BDP it idles part of the time: 0.94 of the rate at 0.5 Gbps, 2 ms)
    buffer = max(64 * 1024, int(1.1 * rate * 0.002 / 8))
    cond = adhoc_condition(["reno"], 2.0, 0.0, 4.0, impl="native", rate_bps=rate, buffer_bytes=buffer, seed=5)
    rec = backend.run(cond, tmp_path)
    assert rec["mechanisms"]["rate"] == "tevlink"
    assert rec["mechanisms"]["delay_detail"]["link_engine"] is True
    # the engine's CPU was the engine's: the host's movable tasks left it, and came back
    alone = rec["mechanisms"]["placement"]["engine_cpu"]
    assert alone["cleared"] and alone["cpu"] == rec["mechanisms"]["placement"]["line"]
    assert 0 < alone["moved"] and alone["restored"] <= alone["moved"]
    link = rec["measured"]["delay_line"]["link"]
    # the link's own clock: the second half at the rate, to the byte count
    steady = rec["measured"]["link_steady"]
    assert steady["source"] == "link engine"
    assert 0.97 * rate <= steady["bps"] <= 1.005 * rate, (steady, rate)
    # byte-exact tail drop: never more than the buffer waiting, and p = 0 still loses
    assert 0 < link["max_backlog_bytes"] <= buffer
    assert link["tail_drops"] > 0 and rec["flows"][0]["summary"]["retransmits"] > 0
    assert link["ring_drops"] == 0 and link["send_errors"] == 0
    assert link["sent"] == link["admitted"]  # every frame the link took, it delivered
    # and every frame the hosts sent entered the switch: each of its ports counted (a
    # sender's and a receiver's), none dropped for a full input backlog
    ports = rec["measured"]["switch_input_drops"]
    assert len(ports) == 2 and set(ports.values()) == {0}, ports
    assert rec["fidelity"]["tolerances"]["switch_input"] == {"dropped_frames": 0}
    p50, p99, p999 = link["late_us_p50"], link["late_us_p99"], link["late_us_p999"]
    assert p50 <= p99 <= p999 and p50 <= 50, link
    # its departures late past the limits are a verdict on the host, marked so (CI, 2026-12-07:
    # 0.6 % of the frames held 2-7.5 ms beyond 82 hypervisor stalls, in each of five attempts)
    late = [f for f in rec["fidelity"]["findings"] if f["check"] == "link"]
    assert all(f.get("fell_behind") for f in late), late
    assert_ok_unless_the_host_fell_behind(rec)
    # the engine watched for host stalls (this kernel: steal accounting, no IRQ time
    # accounting), and the lateness it excused is part of what it counted
    assert rec["mechanisms"]["delay_detail"]["host_stalls"]["watched"] is True
    stalls = rec["measured"]["delay_line"]["host_stalls"]
    assert stalls["count"] <= stalls["gaps_examined"] and stalls["max_ns"] <= stalls["stolen_ns"]
    for ms, n in link["late_ge_ms"].items():
        assert link["late_ge_ms_beyond_stalls"][ms] <= n
    assert nothing_left(run_id_of(tmp_path))


STOPS, STOP_S = 5, 0.025  # longer than the hypervisor's stalls here (3-10 ms, once 20)
SPIN = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
"""


def hold_the_engine(how: str, engine: list[int]) -> None:
    """Keep the link engine from running for STOP_S: stopped by a signal (it gives up its CPU:
    a voluntary switch), or preempted by a real-time task spinning on its CPU (it waits on
    the run queue: an involuntary switch)."""
    if how == "stopped":
        for pid in engine:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(STOP_S)
        for pid in engine:
            os.kill(pid, signal.SIGCONT)
        return
    for cpu in sorted({c for pid in engine for c in os.sched_getaffinity(pid)}):
        subprocess.run([sys.executable, "-c", SPIN, str(cpu), str(STOP_S)], check=True)


@pytest.mark.parametrize("how", ["stopped", "preempted"])
def test_the_engine_held_inside_the_host_is_not_read_as_a_host_stall(how, rate_on, tmp_path, monkeypatch):
    # A stall the engine may excuse is time the hypervisor took: it never gave up its CPU,
    # and the time was neither its own CPU time nor a wait on the run queue. Stopped by a
    # signal, or preempted by another task of the host (25 ms, five times), it is held by
    # the host -- as a receiver taking its CPU would hold it -- so the frames it holds back
    # are the run's fault.
    backend = get_backend("emulated", progress=False, lock_timeout_s=900, attempts=1)  # this attempt's stats
    monkeypatch.setenv("TCPEVAL_LINK", "tevlink")
    rate = rate_on("tevlink", 2.0)
    # a buffer of eight BDPs keeps a large window's worth of frames waiting at each hold: with
    # the default one a stop held back about 60 frames, and five stops came to 0.17-0.2 % of
    # the frames against the verdict's 0.2 % (in CI 285 of 160,017, and the finding read as
    # the hypervisor's); with four BDPs, 1,300-2,000 frames left 0.5 ms late, against its 1 %
    # of 160,000. The test is about whose stall it is, not about those margins
    bdp = rate * 0.002 / 8
    buffer = int(8 * bdp)
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="native", rate_bps=rate, buffer_bytes=buffer, seed=6,
                           dilation=1)
    done = threading.Event()

    def pids(*words: str) -> list[int]:
        """Processes whose command line has all these words."""
        return [int(pid) for pid in pids_where(lambda argv: all(w.encode() in argv for w in words))]

    def hold():
        while not pids("iperf3", "-c") and not done.wait(0.02):
            pass  # the traffic has begun
        time.sleep(1.5)  # into its steady part
        engine = pids("line", "--rate-bps")  # tevdelay line ... --rate-bps: the link engine
        for _ in range(STOPS):
            hold_the_engine(how, engine)
            time.sleep(0.1)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        rec = backend.run(cond, tmp_path)
    finally:
        done.set()
        holder.join()
    link, stalls = rec["measured"]["delay_line"]["link"], rec["measured"]["delay_line"]["host_stalls"]
    # each hold is seen for what it is: a long gap the engine gave up its CPU in, or spent
    # waiting for it on the run queue -- not a stall
    held_gaps = [g for g in stalls["longest_gaps"] if g["gap_ns"] >= 0.8 * STOP_S * 1e9]
    if how == "stopped":
        seen = [g for g in held_gaps if g["voluntary"] >= 1]
    else:
        seen = [g for g in held_gaps if g["voluntary"] == 0 and g["waited_ns"] >= 0.8 * g["gap_ns"]
                and g["stolen_ns"] < g["gap_ns"] / 2]
    assert len(seen) == STOPS, "\n".join(map(str, stalls["longest_gaps"]))
    # and the frames the holds kept back 5 ms or more count (the host's own stalls, which
    # come in spells here, may excuse some of theirs meanwhile)
    held, beyond = link["late_ge_ms"]["5"], link["late_ge_ms_beyond_stalls"]["5"]
    assert held > 0 and beyond >= 0.5 * held, (link["late_ge_ms"], stalls["longest_gaps"])
    # the holds were told apart above (`seen`); the hypervisor's own stalls, each shorter
    # than a hold, may still be counted and flag the run, as in any run (2026-12-07: five
    # of up to 10 ms, 24.7 ms in all, and a host stalls finding)
    assert stalls["max_ns"] < STOP_S * 1e9, stalls
    assert nothing_left(run_id_of(tmp_path))


def test_tbf_stays_as_the_fallback_and_is_named(backend, rate, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPEVAL_LINK", "tbf")
    # dilation 1: `rate` is a share of the better mechanism's faithful rate, and TBF's may
    # lie below it (0.4-0.5 Gbps in one calibration: native CUBIC would need x2, which it
    # cannot have); this test is about the mechanism, not its fidelity
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 3.0, impl="native", rate_bps=rate, seed=5, dilation=1)
    rec = backend.run(cond, tmp_path)
    assert rec["mechanisms"]["rate"] == "tbf"
    assert rec["mechanisms"]["rate_detail"]["peakrate_bps"] > rate
    assert "link" not in (rec["measured"]["delay_line"] or {})
    assert rec["measured"]["link_steady"]["source"] == "qdisc"
    assert rec["measured"]["link_steady"]["bps"] <= 1.02 * rate


def test_an_unknown_link_mechanism_is_refused_by_name(backend, rate, tmp_path, monkeypatch):
    from tcpeval.backends.base import BackendError
    monkeypatch.setenv("TCPEVAL_LINK", "netfpga")
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 1.0, impl="native", rate_bps=rate, seed=5)
    with pytest.raises(BackendError, match="TCPEVAL_LINK='netfpga': expected one of tevlink, tbf"):
        backend.run(cond, tmp_path)
    assert not (tmp_path / "trace.json").exists()

"""Time-dilated runs on the real emulator (root only): a virtual path run k times slower
records its factor and what was scaled, reads back in virtual units, and a native
algorithm is refused when a run needs dilation."""
from __future__ import annotations

import pytest
from emulated_helpers import leftovers_of, nothing_left, run_id_of

from tcpeval import dilation, trace
from tcpeval.backends.base import BackendError
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_a_forced_factor_runs_the_physical_path_and_reads_back_virtual(backend, rate, tmp_path):
    k = 2
    cond = adhoc_condition(["reno"], 6.2, 1e-4, 6.0, rate_bps=rate, seed=3, dilation=k)
    backend.run(cond, tmp_path)
    rec = trace.read_trace(tmp_path)
    mech = rec["mechanisms"]["dilation"]
    assert mech["factor"] == k and mech["setting"] == k
    # the physical path: rate / k, RTT, duration and sampling interval x k
    assert mech["scaled"]["physical_rate_bps"] == pytest.approx(rate / k)
    assert mech["scaled"]["physical_rtt_ms"] == pytest.approx(6.2 * k)
    assert mech["scaled"]["physical_duration_s"] == pytest.approx(6.0 * k)
    assert rec["mechanisms"]["rate_detail"]["rate_bps"] == pytest.approx(rate / k)
    assert rec["measured"]["rtt_ms"] == pytest.approx(6.2 * k, abs=0.2 * k)
    # the kernel's minimum RTO and the port's clocks follow the factor
    assert "rto_min" in mech["scaled"], mech
    sysctls = rec["environment"]["sysctls"]["endpoints"]
    assert sysctls["s1"]["net.ipv4.tcp_rto_min_us"] == 200_000 * k
    assert rec["flows"][0]["cc"]["dilation"] == k and rec["flows"][0]["cc"]["verified"] == "reno316"
    assert mech["not_scaled"] == {}  # what cannot scale is the same in every run: docs/trace-format.md
    # the delay line counted late frames against the verdict's limits x k (physical ms)
    line = rec["measured"]["delay_line"]
    if line is not None:
        assert sorted(float(ms) for ms in line["late_ge_ms"]) == [0.5 * k, 1.0 * k, 2.0 * k, 5.0 * k]
    assert rec["fidelity"]["tolerances"]["dilation"]["factor"] == k
    # receivers ACK as 3.16 did: the drop stage cleared PSH on full-sized segments
    assert rec["mechanisms"]["push_flag"]["segments"] > 0
    # read back in the virtual path's units: the condition's RTT, rate and duration
    virtual = dilation.to_virtual(rec)
    assert virtual["measured"]["rtt_ms"] == pytest.approx(6.2, abs=0.2)
    f = virtual["flows"][0]
    assert f["samples"]["t_s"][-1] == pytest.approx(6.0, abs=0.3)
    assert f["summary"]["mean_throughput_bps"] <= 1.05 * rate
    assert f["summary"]["mean_throughput_bps"] == pytest.approx(
        rec["flows"][0]["summary"]["mean_throughput_bps"] * k)
    assert not leftovers_of(run_id_of(tmp_path))["namespaces"]


def test_a_native_algorithm_that_would_need_dilation_is_refused(backend, rate, tmp_path):
    cond = adhoc_condition(["cubic"], 6.2, 0.0, 2.0, impl="native", rate_bps=rate, dilation=2)
    with pytest.raises(BackendError, match=r"flows\[0\] \(cubic, impl native\).*cannot be slowed"):
        backend.run(cond, tmp_path)
    assert not (tmp_path / "trace.json").exists()


def test_auto_needs_no_dilation_within_the_faithful_rate(backend, rate, tmp_path):
    cond = adhoc_condition(["reno"], 6.2, 0.0, 2.0, impl="native", rate_bps=rate, dilation="auto")
    backend.run(cond, tmp_path)
    rec = trace.read_trace(tmp_path)
    assert rec["mechanisms"]["dilation"]["factor"] == 1
    assert rec["mechanisms"]["dilation"]["scaled"] == {}


def test_a_long_dilated_path_keeps_the_ack_clock(backend, tmp_path):
    # 9.5 Gbps at 12.2 ms runs as ~0.3 Gbps at ~0.4-0.6 s: receive windows of ~100 MB,
    # advertised in 8-16 KB units of window scale. The kernel offers the whole buffer at
    # the first data segment; before the receivers could shrink their window back to the
    # clamp, it never moved per ACK and only the reader's wakeups sent ACKs: 3.1 segments
    # per ACK here (2.9 at 24.2 ms).
    cond = adhoc_condition(["cubic"], 12.2, 0.0, 1.0, rate_bps=9.5e9, seed=5, dilation="auto")
    rec = backend.run(cond, tmp_path)
    assert dilation.factor(rec) > 1
    assert rec["environment"]["sysctls"]["endpoints"]["r1"]["net.ipv4.tcp_shrink_window"] == 1
    acks = rec["measured"]["acks"]
    assert 1.9 <= acks["receiver_segments_per_ack_steady"] <= 2.5, acks
    assert rec["fidelity"]["verdict"] == "ok", rec["fidelity"]["reasons"]
    assert nothing_left(run_id_of(tmp_path))


def test_a_lossy_run_whose_flows_carry_far_less_than_the_link_is_slowed_down_only_for_them(backend, tmp_path):
    # the paper's link at 24.2 ms and p = 2e-2: one flow carries at most 10 / p = 500
    # frames a round trip, 0.25 Gbit/s (Reno about 3 Mbit/s); the link alone needs more
    from tcpeval.backends.emulated import calibrate
    cond = adhoc_condition(["reno"], 24.2, 2e-2, 10.0, rate_bps=9.85e9, seed=3, dilation="auto")
    rec = backend.run(cond, tmp_path)
    mech = rec["mechanisms"]["dilation"]
    bound = dilation.carried_bound_bps(cond)
    assert bound == pytest.approx(500 * 1514 * 8 / 0.0242)
    assert mech["chosen_for"] == {"rate_bps": pytest.approx(bound), "from": "loss bound (dilation.carried_bound_bps)"}
    cal = backend.calibrate(force=False)
    for_link = calibrate.choose(cal, flows=1, rtt_ms=24.2, rate_bps=9.85e9, link=rec["mechanisms"]["rate"],
                                ports=True)[0]
    assert mech["factor"] < for_link
    assert rec["fidelity"]["verdict"] == "ok", rec["fidelity"]["reasons"]
    carried = rec["flows"][0]["summary"]["mean_throughput_bps"] * mech["factor"]
    assert 0 < carried < 0.1 * bound
    assert nothing_left(run_id_of(tmp_path))

"""The fidelity checks every backend applies (pure: no root needed)."""
from dataclasses import replace

import pytest

from tcpeval.backends import fidelity
from tcpeval.backends.fidelity import FlowMeasurements as Flows
from tcpeval.backends.fidelity import HostMeasurements as Host
from tcpeval.backends.fidelity import PathMeasurements as Path
from tcpeval.backends.fidelity import Setting


def test_a_seed_with_few_drops_by_chance_is_not_flagged():
    # Seen in a real run: 4 drops where 10.8 were expected (p = 1e-5): unlucky, not broken.
    reason, status = fidelity.drop_check(1e-5, 1_083_475, 4)
    assert (reason, status) == (None, "ok")


def test_a_dropper_that_misses_packets_is_flagged():
    reason, status = fidelity.drop_check(1e-4, 2_000_000, 120)  # 200 expected
    assert status == "failed" and "99.9% CI" in reason and "p = 0.0001" in reason


def test_drops_at_p_zero_are_flagged():
    assert fidelity.drop_check(0, 10**6, 1) == ("drop: 1 packets dropped with p = 0", "failed")


def test_too_few_expected_drops_is_reported_as_not_tested():
    reason, status = fidelity.drop_check(1e-7, 10**6, 1)
    assert reason is None and status.startswith("not tested")


@pytest.mark.parametrize("k, n", [(0, 100), (5, 100), (100, 100), (11, 1_000_000)])
def test_wilson_interval_contains_the_estimate_and_widens_with_confidence(k, n):
    lo95, hi95 = fidelity.wilson(k, n)
    lo999, hi999 = fidelity.wilson(k, n, fidelity.Z_FLAG)
    assert lo999 <= lo95 <= k / n <= hi95 <= hi999
    assert 0 <= lo999 and hi999 <= 1


def test_rtt_tolerance_is_absolute_for_short_and_relative_for_long_paths():
    assert fidelity.rtt_tolerance_ms(0.2) == pytest.approx(0.05)
    assert fidelity.rtt_tolerance_ms(24.2) == pytest.approx(0.726)


def test_verdict_lists_every_reason():
    out = fidelity.verdict(Setting(drop=0, rtt_ms=6.2, rate_bps=5e9),
                           Path(seen=10, dropped=1, rtt_ms=7.0, base_rtt_ms=0.05), Host(capacity_bps=3e9))
    assert out["verdict"] == "flagged" and len(out["reasons"]) == 3


# ------------------------------------------------- window, ACK clock, rate, guard (issue 10)

def test_a_window_no_path_needs_is_flagged_with_its_size():
    # 6.2 ms at 1 Gbps: BDP 775 kB, one-BDP buffer; the ports' corrupted windows were ~1e12 B
    assert fidelity.window_check(2.9e6, 1e9, 6.2, 775_000) is None
    reason = fidelity.window_check(1.5e12, 1e9, 6.2, 775_000)
    assert reason.startswith("window:") and "1.5e+06 MB" in reason and "6.2 MB" in reason
    assert fidelity.window_check(1.5e12, 0.0, 6.2, 0) is None  # unshaped: no path to judge


@pytest.mark.parametrize("spa, flagged", [(2.0, False), (1.9, False), (2.5, False), (3.27, True),
                                          (1.5, True)])
def test_receivers_ack_clock_outside_one_ack_per_two_segments_is_flagged(spa, flagged):
    reason = fidelity.ack_clock_check(spa, 50_000)
    assert (reason is not None) == flagged
    if flagged:
        assert f"{spa:.2f} in-order segments per ACK" in reason


def test_ack_clock_is_not_judged_on_a_handful_of_acks():
    assert fidelity.ack_clock_check(8.0, fidelity.MIN_ACKS - 1) is None


def test_receiver_intervals_above_the_bottleneck_are_flagged():
    rate = 1e9
    assert fidelity.receiver_rate_check([0.9e9, 1.1e9, 1.0e9], rate) is None
    reason = fidelity.receiver_rate_check([0.9e9, 34e9, 1.0e9, 5e9], rate)
    assert reason.startswith("receiver rate: 3 pair(s) of adjacent intervals averaging up to 17.5 Gbps "
                             "(one interval up to 34)")


def test_a_late_report_that_moves_bytes_into_the_next_interval_is_not_flagged():
    # a receiver's timer fired 30 ms late: 1.3 then 0.7 of a 1 Gbps link; per flow, so the
    # last interval of one flow is never paired with the first of the next
    assert fidelity.receiver_rate_check([[1.0e9, 1.3e9, 0.7e9, 1.0e9], [1.3e9]], 1e9) is not None
    assert fidelity.receiver_rate_check([[1.0e9, 1.3e9, 0.7e9, 1.0e9], [1.1e9, 1.0e9]], 1e9) is None


def test_acks_around_filled_holes_do_not_count_against_the_lower_bound_only():
    # a 1-s CUBIC run whose slow start overflowed the buffer: 1.87 segments per ACK, 2.07
    # with 16 ACKs per retransmission left out (38 retransmissions, 6,319 ACKs)
    assert fidelity.ack_clock_check(1.87, 6_319, 2.07) is None
    assert "less than two segments" in fidelity.ack_clock_check(1.70, 6_319, 1.80)
    assert "stretch ACKs" in fidelity.ack_clock_check(2.6, 6_319, 2.9)


def test_the_acks_that_ce_marks_call_for_at_once_lower_the_lower_bound_only():
    # a three-flow DCTCP run at 20 us: its receivers ACK at once at each change of CE state
    # (RFC 8257); 1.73 segments per ACK with 4.6 % of the ECN-capable frames marked
    link = {"ecn": {"ect_frames": 303_814, "ce_marked": 13_939}}
    share = fidelity.marked_share(link)
    assert share == pytest.approx(0.04588, abs=1e-5)
    assert fidelity.ack_clock_floor(share) == pytest.approx(1.9 / (1 + 8 * share))
    assert fidelity.ack_clock_check(1.73, 50_000, marked_share=share) is None
    finding = fidelity.ack_clock_check(1.73, 50_000)  # the same clock without marks
    assert finding.check == "ACK clock" and finding.limit == 1.9
    # far below even the bound the marks allow, and stretched ACKs, stay flagged
    low = fidelity.ack_clock_check(1.2, 50_000, marked_share=share)
    assert "4.6 % of the frames marked CE" in str(low) and low.limit == pytest.approx(1.390, abs=1e-3)
    assert "stretch ACKs" in str(fidelity.ack_clock_check(2.6, 50_000, marked_share=share))
    # no marking, or a link without ECN counts: the 3.16 bound
    assert fidelity.marked_share(None) == fidelity.marked_share({"ecn": {"ect_frames": 0}}) == 0.0
    assert fidelity.ack_clock_floor(0.0) == 1.9


def test_a_verdict_reads_the_marked_share_from_the_link():
    setting = fidelity.Setting(rtt_ms=2.0, drop=0.0, rate_bps=None)
    path = fidelity.PathMeasurements(seen=10_000, dropped=0, rtt_ms=2.0)
    flows = fidelity.FlowMeasurements(segments_per_ack=1.73, receiver_acks=50_000)
    marked = fidelity.HostMeasurements(link_stats={"ecn": {"ect_frames": 1000, "ce_marked": 50}})
    assert not any(f["check"] == "ACK clock" for f in fidelity.verdict(setting, path, marked, flows)["findings"])
    unmarked = fidelity.verdict(setting, path, fidelity.HostMeasurements(), flows)
    assert any(f["check"] == "ACK clock" for f in unmarked["findings"])


def test_a_window_released_at_once_after_a_retransmission_is_not_flagged():
    # 0.2 Gbps, 20 ms, 1 MB buffer: 1.5 MB can wait behind a hole and reach the reader in
    # one 0.1 s interval: 0.24 Gbps + 8 x 1.5 MB / 0.1 s = 0.36 Gbps is the limit
    rate, held = 2e8, 2e8 * 0.020 / 8 + 1e6
    assert fidelity.receiver_rate_check([0.36e9], rate, held_bytes=held, interval_s=0.1) is None
    reason = fidelity.receiver_rate_check([0.37e9], rate, held_bytes=held, interval_s=0.1)
    assert reason.startswith("receiver rate: 1 pair(s)") and "1.5 MB" in reason
    # over two intervals the same window is half the allowance: 0.24 + 0.06 Gbps
    assert fidelity.receiver_rate_check([0.2e9, 0.39e9], rate, held_bytes=held, interval_s=0.1) is None
    assert fidelity.receiver_rate_check([0.2e9, 0.41e9], rate, held_bytes=held, interval_s=0.1) is not None


def _guard(reductions, missed=0, states=0, foreign_ss=0, foreign_cwnd=0, acked=None, skipped=0, over=0):
    g = {"reductions": reductions, "missed_reductions": missed, "missed_states": states,
         "foreign_ssthresh": foreign_ss, "foreign_cwnd": foreign_cwnd}
    if acked is not None:
        g.update(acked_seen=acked - skipped, acked_delivered=acked, sent_over=over)
    return g


def test_ports_are_judged_by_the_share_of_the_data_their_hooks_missed():
    assert fidelity.guard_check({"reno316": _guard(0, acked=0)}) is None
    assert fidelity.guard_check({"cubic": None}) is None  # native: no guard
    # reno316 filling the link at 0.2 ms, x10: 15 of 148 reductions skipped, each repaired
    # at the port's next hook; the ACKs in between were 0.6 % of the data
    assert fidelity.guard_check({"reno316": _guard(133, missed=15, states=14, foreign_ss=15, foreign_cwnd=459,
                                                   acked=9_486_076, skipped=55_871)}) is None
    reason = fidelity.guard_check({"reno316": _guard(130, missed=3, acked=400_000, skipped=12_000),
                                   "bic316": _guard(100, acked=400_000, skipped=4_000)})
    assert reason.startswith("cc: the host skipped the ports' congestion-control hooks for more than 2 %")
    assert "reno316: 3.0 % of the acknowledged data (12000 of 400000 segments with no pkts_acked()" in reason
    assert "3 reductions without its ssthresh() of 133" in reason and "bic316" not in reason
    assert reason.measured == pytest.approx(0.03) and reason.limit == fidelity.GUARD_SHARE_MAX
    # the stack counts SACKed data early: a few more seen than delivered is no skip
    assert fidelity.skipped_share(_guard(10, acked=1000, skipped=-3)) == 0.0
    # a burst a garbage window let out counts with the skipped data: 1 % + 1.5 %
    burst = fidelity.guard_check({"highspeed316": _guard(900, missed=2, acked=1_000_000, skipped=10_000,
                                                         over=15_000)})
    assert "15000 sent above the window it allowed" in burst and burst.measured == pytest.approx(0.025)


def test_time_a_port_spent_drained_by_a_threshold_of_zero_counts_with_the_skipped_data():
    # dctcp_tev at 0.5 Gbps / 2 ms on the VM (2026-11-28): 0.5 % of the data with skipped
    # hooks, and one CWR whose every ACK skipped them; PRR drained the window to 0 and the
    # flow waited 230 ms for the probe timer -- 2.9 % of an 8-s run
    dctcp = _guard(1101, missed=6, states=8, foreign_ss=3, acked=316_986, skipped=1_671)
    assert fidelity.guard_check({"dctcp_tev": dctcp}, {"dctcp_tev": 8.0}) is None
    dctcp.update(drained=1, drained_ms=230)
    reason = fidelity.guard_check({"dctcp_tev": dctcp}, {"dctcp_tev": 8.0})
    assert "dctcp_tev: 0.5 % of the acknowledged data (1671 of 316986" in reason  # the data's share alone
    assert "2.9 % of its flows' time drained by a threshold of 0 (1 drains, 230 ms)" in reason
    assert reason.measured == pytest.approx(1_671 / 316_986 + 0.23 / 8.0)
    # over two flows of 60 s the same stall is 0.2 % of the flows' time: passes
    assert fidelity.guard_check({"dctcp_tev": dctcp}, {"dctcp_tev": 120.0}) is None
    # without the flows' time (calibration) the drained time is not judged
    assert fidelity.guard_check({"dctcp_tev": dctcp}) is None


def test_a_port_without_the_data_counters_is_judged_by_its_missed_reductions():
    assert fidelity.skipped_share(_guard(10)) is None
    assert fidelity.guard_check({"reno316": _guard(1900, missed=2, foreign_ss=2)}) is None
    # one reduction of ~1,250 skipped (scalable316 at 0.2 ms / 1e-4, x24) and its 50 echoes
    assert fidelity.guard_check({"scalable316": _guard(1250, missed=1, states=1, foreign_cwnd=50)}) is None
    # skips counted once: 21 of 1,917 reductions (1.1 %) with their 20 state changes pass
    assert fidelity.guard_check({"reno316": _guard(1896, missed=21, states=20, foreign_ss=21)}) is None
    reason = fidelity.guard_check({"reno316": _guard(1896, missed=45, states=44, foreign_ss=45)})
    assert "reno316: 45 reductions without its ssthresh() of 1941" in reason
    assert reason.measured == pytest.approx(45 / 1941)


def test_senders_that_start_their_connections_under_bbr_are_flagged_as_paced():
    # BBR's init marks a socket for TCP-internal pacing and the mark survives iperf3's
    # switch to the algorithm under test; 3.16 senders never paced
    assert fidelity.pacing_check({"s1": "reno", "s2": "cubic"}) is None
    assert fidelity.pacing_check({}) is None
    reason = fidelity.pacing_check({"s1": "reno", "s2": "bbr"})
    assert reason.startswith("pacing:") and "s2 (bbr)" in reason and "s1" not in reason
    v = fidelity.verdict(Setting(drop=0, rtt_ms=6.2, rate_bps=1e8), Path(seen=10, dropped=0, rtt_ms=6.2, base_rtt_ms=0.1),
                         Host(capacity_bps=2e8, achieved_bps=1e8, cpu_busy=0.5),
                         Flows(sender_defaults={"s1": "bbr"}))
    assert v["verdict"] == "flagged" and any(r.startswith("pacing:") for r in v["reasons"])


def _host_trouble() -> dict:
    """The verdict's measurements with findings of every transient kind, as the checks
    produce them."""
    return dict(setting=Setting(drop=0, rtt_ms=6.2, rate_bps=1e9, buffer_bytes=775_000),
                path=Path(seen=10**6, dropped=0, rtt_ms=7.9, base_rtt_ms=0.1),
                host=Host(capacity_bps=3e9, achieved_bps=0.95e9, cpu_busy=0.5,
                          delay_stats={"forwarded": 100_000, "quantum_ns": 5000, "error_histogram": {},
                                       "late_ge_ms": {"1": 900, "2": 500, "5": 10}, "max_late_ns": 9e6}),
                flows=Flows(max_cwnd_bytes=1e12, segments_per_ack=7.99, receiver_acks=28_478,
                            interval_bps=[1e9, 29e9], cc_guard={"reno316": _guard(100, missed=30)}))


def test_only_host_trouble_is_transient():
    trouble = fidelity.verdict(**_host_trouble())["findings"]
    assert {f["check"] for f in trouble} == {"rtt", "delay line", "window", "ACK clock", "receiver rate", "cc"}
    assert fidelity.transient_only(trouble)
    assert not fidelity.transient_only([])
    # a setting the host cannot realise is not worth running again, beside host trouble or alone
    trouble = _host_trouble()
    s, path = trouble["setting"], trouble["path"]
    for setting in (dict(setting=replace(s, drop=1e-4), path=replace(path, seen=2_000_000, dropped=120)),
                    dict(setting=replace(s, rate_bps=4e9)),           # above the calibration (3e9)
                    dict(setting=replace(s, rtt_ms=0.2),              # the path is longer
                         path=replace(path, base_rtt_ms=1.1, rtt_ms=1.1))):
        findings = fidelity.verdict(**{**trouble, **setting})["findings"]
        assert not fidelity.transient_only(findings), setting
        alone = [f for f in findings if not f["transient"]]
        assert alone and not fidelity.transient_only(alone)


def test_a_finding_carries_its_check_measurement_and_limit_beside_the_sentence():
    v = fidelity.verdict(**_host_trouble())
    assert v["reasons"] == [f["text"] for f in v["findings"]]
    by_check = {f["check"]: f for f in v["findings"]}
    assert by_check["rtt"]["measured"] == 7.9 and by_check["rtt"]["limit"] == pytest.approx(6.2 + 0.186)
    assert by_check["window"]["measured"] == 1e12 and by_check["window"]["limit"] < 1e12
    assert by_check["ACK clock"] == {"check": "ACK clock", "transient": True, "measured": 7.99, "limit": 2.5,
                                     "text": by_check["ACK clock"]["text"]}
    assert all(f["text"].startswith(f["check"] + ": ") for f in v["findings"])


def test_verdict_names_each_new_reason():
    trouble = _host_trouble()
    v = fidelity.verdict(**{**trouble, "path": replace(trouble["path"], rtt_ms=6.2)})
    kinds = [r.split(":", 1)[0] for r in v["reasons"]]
    assert v["verdict"] == "flagged"
    assert kinds == ["delay line", "window", "ACK clock", "receiver rate", "cc"], v["reasons"]
    assert v["tolerances"]["ack_clock"]["segments_per_ack"] == [1.9, 2.5]


def _late_line(late_ge_ms: dict) -> dict:
    return {"forwarded": 100_000, "quantum_ns": 50_000, "error_histogram": {}, "ring_drops": 0,
            "late_ge_ms": late_ge_ms, "max_late_ns": 30e6}


def _verdict_at(k: int, delay_stats: dict, rtt_ms: float | None = None) -> dict:
    return fidelity.verdict(Setting(drop=0, rtt_ms=6.2 * k, rate_bps=1e9 / k, dilation=k),
                            Path(seen=10**6, dropped=0, rtt_ms=rtt_ms or 6.2 * k, base_rtt_ms=0.1),
                            Host(capacity_bps=1e9, achieved_bps=0.95e9 / k, cpu_busy=0.5, delay_stats=delay_stats))


def test_a_dilated_run_judges_lateness_in_virtual_time():
    # 5 % of the frames 1-24 ms late (physical): at k = 48 that is under 0.5 ms virtual
    stats = _late_line({"24": 0, "48": 0, "96": 0, "240": 0, "0.5": 5000, "1": 5000, "2": 5000})
    assert _verdict_at(48, stats)["verdict"] == "ok"
    assert _verdict_at(1, _late_line({"0.5": 5000, "1": 5000, "2": 5000, "5": 0}))["verdict"] == "flagged"
    # the same frames 24 ms late are 0.5 ms late on the virtual path: flagged, in physical ms
    late = _late_line({"24": 5000, "48": 0, "96": 0, "240": 0})
    v = _verdict_at(48, late)
    assert v["verdict"] == "flagged"
    assert v["reasons"] == ["delay line: 5000/100000 frames left more than 24 ms late physical, "
                            "48 x the virtual limit"]
    # held back: 2 ms virtual is 96 ms physical at k = 48
    held = _late_line({"24": 0, "48": 0, "96": 300, "240": 0})
    assert _verdict_at(48, held)["reasons"][0].startswith("delay line: 300/100000 frames held back 96 ms")
    assert _verdict_at(48, held)["tolerances"]["dilation"]["factor"] == 48


def test_an_undilated_run_counts_the_delay_lines_own_threshold():
    v = _verdict_at(1, _late_line({"0.5": 2000, "1": 1500, "2": 100, "5": 0}))
    assert v["reasons"] == ["delay line: 2000/100000 frames left more than 0.5 ms late"]


def test_held_thresholds_and_rtt_tolerance_scale_with_the_factor():
    assert fidelity.held_ms(1) == (0.5, 1, 2, 5)
    assert fidelity.held_ms(48) == (24, 48, 96, 240)
    # 0.2 ms virtual at k = 4 is 0.8 ms physical, tolerated +-0.05 ms virtual = +-0.2 ms
    assert fidelity.rtt_tolerance_ms(0.8, 4) == pytest.approx(0.2)
    assert fidelity.rtt_tolerance_ms(24.2 * 4, 4) == pytest.approx(0.726 * 4)
    assert _verdict_at(4, None, rtt_ms=6.2 * 4 + 0.7)["verdict"] == "ok"
    assert _verdict_at(4, None, rtt_ms=6.2 * 4 + 0.8)["verdict"] == "flagged"


def test_older_traces_without_the_threshold_count_histogram_buckets():
    stats = {"forwarded": 1000, "quantum_ns": 50_000, "late_ge_ms": {"1": 3, "2": 1, "5": 0},
             "error_histogram": {"lt_q": 5, "lt_2q": 4, "lt_5q": 3, "lt_10q": 2, "lt_100q": 20, "ge_100q": 1}}
    # buckets wholly beyond 0.5 ms: [10q, 100q) and >= 100q (q = 0.05 ms)
    assert fidelity.late_frames(stats) == 21


# ------------------------------------------------- one verdict for both backends

def test_checks_without_a_measurement_are_skipped_as_on_the_testbed():
    # the testbed has the drop counters, ping's RTT and the senders' default algorithm,
    # nothing else: only those are judged, in the order drop, rtt, pacing
    v = fidelity.verdict(Setting(drop=1e-2, rtt_ms=6.2), Path(seen=100_000, dropped=5, rtt_ms=7.0),
                         flows=Flows(sender_defaults={"s1": "bbr"}))
    kinds = [r.split(":", 1)[0] for r in v["reasons"]]
    assert kinds == ["drop", "rtt", "pacing"], v["reasons"]
    assert v["reasons"][1] == "rtt: measured 7.000 ms, setting 6.2 ms, tolerance +-0.186 ms"
    ok = fidelity.verdict(Setting(drop=0, rtt_ms=6.2), Path(seen=100_000, dropped=0, rtt_ms=6.25),
                          flows=Flows(sender_defaults={"s1": "reno"}))
    assert ok["verdict"] == "ok" and ok["tolerances"] == fidelity.tolerances()


def test_without_a_configured_rate_no_rate_check_applies():
    # an unshaped calibration run (and the testbed): no capacity to exceed, no shortfall
    path = Path(seen=10**6, dropped=0, rtt_ms=0.2, base_rtt_ms=0.1)
    v = fidelity.verdict(Setting(drop=0, rtt_ms=0.2), path, Host(achieved_bps=1e9, cpu_busy=1.0),
                         Flows(max_cwnd_bytes=1e12, interval_bps=[50e9]))
    assert v["reasons"] == []
    shaped = fidelity.verdict(Setting(drop=0, rtt_ms=0.2, rate_bps=1e9), path,
                              Host(achieved_bps=1e9, cpu_busy=0.5))
    assert shaped["reasons"] == ["rate: host capacity unknown (run `tcpeval calibrate`)"]


# ------------------------------------------------- loaded RTT, link engine (issue 24)

def _samples(rtt_ms: float, n: int = 20, cwnd_segments: int = 100) -> list:
    return [(rtt_ms * 1e3, cwnd_segments * 1460)] * n


def test_senders_rtt_above_base_plus_a_full_buffer_is_flagged_with_the_figure():
    # 0.2 ms at 0.4 Gbps with a 64 KiB buffer: the queue adds at most 1.31 ms; the smoke
    # traces' senders saw a median of 1.1-2.9 ms
    per_flow = {"1:reno": fidelity.loaded_rtt(_samples(2.9), 1460)}
    reason = fidelity.loaded_rtt_check(per_flow, 0.2, 65536, 0.4e9)
    assert reason.startswith("loaded RTT:") and "1:reno 2.9 ms" in reason and "1.64 ms" in reason
    ok = {"1:reno": fidelity.loaded_rtt(_samples(1.4), 1460)}
    assert fidelity.loaded_rtt_check(ok, 0.2, 65536, 0.4e9) is None


def test_loaded_rtt_is_judged_in_virtual_units_for_a_dilated_run():
    # x24: 4.8 ms physical with the same buffer at 9.5/24 Gbps; 0.40 ms virtual allowed
    bound = fidelity.loaded_rtt_bound_ms(0.2 * 24, 65536, 9.5e9 / 24, 24)
    assert bound / 24 == pytest.approx((0.2 + 8e3 * 65536 / 9.5e9) * 1.05 + 0.05)
    late = {"1:cubic": fidelity.loaded_rtt(_samples(1.4 * 24), 1460)}
    reason = fidelity.loaded_rtt_check(late, 0.2 * 24, 65536, 9.5e9 / 24, 24)
    assert "1.4 ms" in reason and "(virtual)" in reason


def test_senders_rtt_below_the_setting_is_flagged_as_a_path_shorter_than_set():
    # the findings slice, 2026-11-27: a 1.2-ms path (0.2 ms x6) whose delay was computed from
    # a base RTT measured at 0.40 ms on a busy host; cubic's senders saw 0.48 ms, judged ok
    short = {"1:cubic": fidelity.loaded_rtt(_samples(0.48), 1460)}
    reason = fidelity.loaded_rtt_check(short, 1.2, 246250, 9.85e9 / 6, 6)
    assert reason.startswith("loaded RTT:") and "1:cubic 0.08 ms (virtual) at their median" in reason
    assert "shorter than set" in reason and reason.transient
    assert reason.measured == pytest.approx(0.08) and reason.limit == pytest.approx(0.15)
    # within the tolerance (0.05 ms virtual) below the setting, and at or above it: ok
    for rtt_ms in (0.95, 1.2, 2.0):
        assert fidelity.loaded_rtt_check({"1:cubic": fidelity.loaded_rtt(_samples(rtt_ms), 1460)},
                                         1.2, 246250, 9.85e9 / 6, 6) is None
    # judged without a configured rate too (an unshaped run)
    assert fidelity.loaded_rtt_check(short, 1.2, None, None, 6) is not None


def test_small_windows_and_few_samples_are_not_judged():
    # a flight of a few segments can wait for the receiver's delayed-ACK timer
    assert fidelity.loaded_rtt(_samples(40.0, cwnd_segments=4), 1460) is None
    assert fidelity.loaded_rtt(_samples(1.0, n=fidelity.LOADED_RTT_MIN_SAMPLES - 1), 1460) is None
    mixed = _samples(40.0, cwnd_segments=4) + _samples(0.5, n=10)
    assert fidelity.loaded_rtt(mixed, 1460)["quantile_ms"] == 0.5


def test_the_window_check_takes_the_loaded_rtt_so_it_does_not_stand_in_for_host_queueing():
    # 0.33-1.13 MB windows at 0.2 ms flagged every rate from 2.9 down to 0.6 Gbps: the
    # host's queueing, which the loaded-RTT check names; a corrupted window still trips it
    assert fidelity.window_check(1.13e6, 0.6e9, 0.2, 65536) is not None
    assert fidelity.window_check(1.13e6, 0.6e9, 0.2, 65536, loaded_rtt_ms=2.9) is None
    assert fidelity.window_check(1e9, 0.6e9, 0.2, 65536, loaded_rtt_ms=2.9) is not None


def test_the_link_engines_losses_and_late_departures_are_flagged():
    link = {"sent": 100_000, "ring_drops": 0, "send_errors": 0, "late_us_p999": 40,
            "late_ge_ms": {"0.5": 50, "1": 10, "2": 5, "5": 0}, "max_late_ns": 3e6}
    assert fidelity._link_reasons(link, 1) == []
    late = {**link, "late_ge_ms": {"0.5": 2_000, "1": 900, "2": 400, "5": 0}}
    reasons = fidelity._link_reasons(late, 1)
    assert len(reasons) == 2 and all(r.startswith("link:") for r in reasons)
    assert fidelity._link_reasons({**link, "ring_drops": 3}, 1)[0].startswith("link: 3 data frames lost")
    # dilated x4: 0.5 ms virtual is 2 ms physical (the engine counts at k x the thresholds)
    dilated = {**link, "late_ge_ms": {"2": 400, "4": 300, "8": 100, "20": 0}}
    assert fidelity._link_reasons(dilated, 4) == []
    dilated["late_ge_ms"]["2"] = 2_000
    assert fidelity._link_reasons(dilated, 4) == [
        "link: 2000/100000 data frames left more than 2 ms after their scheduled departure physical, "
        "4 x the virtual limit (p99.9 40 us)"]
    assert fidelity.transient_only([r.record() for r in reasons])


def test_lateness_that_lies_wholly_in_host_stalls_is_marked_so_and_other_lateness_is_not():
    # 1.6 Gbps at 24.2 ms: two ~3.2-ms stalls of the engine's vCPU held 0.3 % of the frames
    # back 2 ms or more; without the part of their wait the stalls covered, 0.02 %
    stalls = {"count": 2, "stolen_ns": 6_500_000, "max_ns": 3_300_000, "gaps_examined": 40}
    link = {"sent": 500_000, "ring_drops": 0, "send_errors": 0, "late_us_p999": 2500, "max_late_ns": 3.4e6,
            "late_ge_ms": {"0.5": 2_000, "1": 1_800, "2": 1_500, "5": 0},
            "late_ge_ms_beyond_stalls": {"0.5": 300, "1": 150, "2": 100, "5": 0}}
    (held,) = fidelity._link_reasons(link, 1, stalls)  # 0.4 % later than 0.5 ms: within 1 %
    assert held == ("link: 1500/500000 data frames held back 2 ms or more (max 3.4 ms); 1400 of them waited "
                    "out the 2 host stall(s) the engine saw (the hypervisor took its vCPU, up to 3.3 ms; "
                    "6.5 ms in all), 100 beyond them")
    assert held.record()["host_stall"] is True and fidelity.host_stalls_only([held.record()])
    # the same lateness beyond the stalls is the load's: flagged, not excused
    loaded = {**link, "late_ge_ms_beyond_stalls": {"0.5": 300, "1": 1_500, "2": 1_200, "5": 0}}
    (held,) = [r for r in fidelity._link_reasons(loaded, 1, stalls) if "held back" in r]
    assert not held.host_stall and "host stall" not in held and "host_stall" not in held.record()
    assert not fidelity.host_stalls_only([held.record()])
    # an engine that did not watch (a kernel that accounts IRQ time apart): nothing excused
    assert not any(r.host_stall for r in fidelity._link_reasons(link, 1, None))
    # the delay line's ACKs, with the same rule, and through the verdict
    line = {"forwarded": 200_000, "late_ge_ms": {"0.5": 100, "1": 90, "2": 800, "5": 0}, "max_late_ns": 3.3e6,
            "late_ge_ms_beyond_stalls": {"0.5": 10, "1": 5, "2": 0, "5": 0}, "host_stalls": stalls}
    (ack,) = fidelity._delay_line_reasons(line, 1)
    assert ack.startswith("delay line: 800/200000 frames held back 2 ms or more") and ack.host_stall


def test_a_reader_that_fell_behind_may_take_its_whole_receive_buffer_at_once():
    # 24.2 ms at 0.9 Gbps: a reader on a busy CPU got 2.26 Gbps in one 0.1-s interval
    # (28 MB), more than one BDP plus the buffer (5.4 MB) and its window (10.9 MB), all
    # of it from its 43.6 MB receive buffer
    setting = Setting(drop=0, rtt_ms=24.2, rate_bps=0.9e9, buffer_bytes=2.72e6, interval_s=0.1)
    path, host = Path(seen=10**6, dropped=0, rtt_ms=24.2), Host(capacity_bps=0.9e9)
    burst = Flows(interval_bps=[[0.86e9, 2.26e9, 0.9e9]])
    assert any(r.startswith("receiver rate") for r in fidelity.verdict(setting, path, host, burst)["reasons"])
    assert fidelity.verdict(setting, path, host, replace(burst, receiver_holds_bytes=43.6e6))["reasons"] == []


def test_a_link_above_the_hosts_capacity_is_fine_where_loss_bounds_what_the_flows_carry():
    # a 9.85 Gbit/s link, undilated, at 24.2 ms and p = 1e-2 on a host that carries 2:
    # the flows can carry at most 0.5 Gbit/s, which the host carries
    path = Path(seen=10**5, dropped=1000, rtt_ms=24.2, base_rtt_ms=24.1)
    host = Host(capacity_bps=2e9, achieved_bps=8e6, cpu_busy=0.2)
    bounded = Setting(drop=1e-2, rtt_ms=24.2, rate_bps=9.85e9, carried_bound_bps=0.5e9)
    v = fidelity.verdict(bounded, path, host, Flows(interval_bps=[[6e6, 9e6, 12e6]]))
    assert not [r for r in v["reasons"] if r.startswith("rate")], v["reasons"]
    # without the bound the configured link is what the host would have to carry
    v = fidelity.verdict(replace(bounded, carried_bound_bps=None), path, host, Flows(interval_bps=[[6e6, 9e6]]))
    assert "rate: configured 9.85 Gbps exceeds what this host carries faithfully (2 Gbps, calibration)" in v["reasons"]
    # flows that carried more than the bound: the factor was chosen for too little (an
    # interval without a rate, None, is no sample)
    v = fidelity.verdict(bounded, path, host, Flows(interval_bps=[[0.3e9, None, 0.35e9], [0.2e9]]))
    assert any(r.startswith("rate: the flows carried up to 0.55 Gbps, more than the 0.5 Gbps") for r in v["reasons"])
    # a bound the host cannot carry either is named as such
    v = fidelity.verdict(replace(bounded, carried_bound_bps=3e9), path, host, Flows(interval_bps=[[8e6]]))
    assert "rate: the flows' most under this loss rate, 3 Gbps exceeds what this host carries faithfully " \
           "(2 Gbps, calibration)" in v["reasons"]


def test_acks_the_delay_line_could_not_send_are_judged_by_their_share():
    # bic+reno at 6.2 ms x6 passed its verdict with 1,155 ACKs the delay line's sendmmsg
    # refused (2026-11-29): 1.1 % of the 101,155 handed to it here, far beyond what a
    # share of lost ACKs may cost the per-ACK growth of a 3.16 algorithm
    v = _verdict_at(1, {**_late_line({"0.5": 0, "1": 0, "2": 0, "5": 0}), "send_errors": 1155})
    assert v["verdict"] == "flagged"
    assert v["reasons"] == ["delay line: 1155 ACKs not sent (lost), 1.14% of those handed to it"]
    assert v["findings"][0]["transient"] and v["findings"][0]["measured"] == pytest.approx(1155 / 101_155)
    assert v["tolerances"]["delay_line"]["unsent_ack_share_max"] == fidelity.UNSENT_ACK_SHARE_MAX == 2e-3
    # scalable at 12.2 ms x8, 1e-5 (2026-11-30): 369 of some 40 million ACKs, spread over
    # the run: 1e-5 of them, a 1e-5 slower growth
    assert _verdict_at(1, {**_late_line({"0.5": 0}), "forwarded": 40_000_000, "send_errors": 369})["verdict"] == "ok"
    assert _verdict_at(1, {**_late_line({"0.5": 0}), "send_errors": 200})["verdict"] == "ok"   # 0.1996 %
    assert _verdict_at(1, {**_late_line({"0.5": 0}), "send_errors": 201})["verdict"] == "flagged"
    assert _verdict_at(1, {**_late_line({"0.5": 0}), "send_errors": 0})["verdict"] == "ok"
def test_unsent_acks_of_a_warmup_the_metrics_leave_out_are_recorded_not_judged():
    # 1,340 ACKs refused in a slow start's overshoot, in a run whose metrics begin at its
    # warm-up cut; the delay line counted them at its snapshots (s after the traffic's
    # start, ACKs not sent by then, ACKs forwarded by then)
    counted = [(3.5, 0, 10_000), (10.0, 1200, 90_000), (25.0, 1340, 300_000), (40.0, 1340, 500_000)]
    unsent = fidelity.unsent_acks(1340, 1_000_000, counted, metrics_from_s=31.0)
    assert unsent == {"total": 1340, "judged": 0, "share": 0.0, "judged_from_s": 25.0, "metrics_from_s": 31.0}
    stats = {**_late_line({"0.5": 0, "1": 0, "2": 0, "5": 0}), "send_errors": 1340}
    setting = Setting(drop=0, rtt_ms=6.2, rate_bps=1e9)
    path, host = Path(seen=10**6, dropped=0, rtt_ms=6.2, base_rtt_ms=0.1), Host(capacity_bps=1e9, delay_stats=stats)
    assert fidelity.verdict(setting, path, replace(host, unsent_acks=unsent))["verdict"] == "ok"
    # the count is taken from the last snapshot at or before the cut, never after it: the
    # 3,000 lost after 25 s are judged against the 100,000 ACKs handed to it since
    unsent = fidelity.unsent_acks(4340, 397_000, counted[:3], metrics_from_s=31.0)
    assert unsent["judged"] == 3000 and unsent["share"] == pytest.approx(0.03) and unsent["judged_from_s"] == 25.0
    v = fidelity.verdict(setting, path, replace(host, unsent_acks=unsent))
    assert v["reasons"] == ["delay line: 3000 ACKs not sent (lost), 3.00% of those handed to it after 25 s, its "
                            "last count before the metrics' warm-up cut at 31 s (1340 before, not judged)"]
    assert v["findings"][0]["measured"] == pytest.approx(0.03)
def test_unsent_acks_are_all_judged_without_a_warmup_cut_or_a_count_before_it():
    counted = [(3.5, 0, 10_000), (10.0, 1200, 90_000)]
    # a run of fixed length: its metrics take the whole run
    assert fidelity.unsent_acks(1340, 98_660, counted, None)["share"] == pytest.approx(1340 / 100_000)
    # a cut before the first snapshot: nothing known to lie before it
    assert fidelity.unsent_acks(1340, 98_660, counted, 2.0) == {
        "total": 1340, "judged": 1340, "share": pytest.approx(0.0134), "judged_from_s": None, "metrics_from_s": 2.0}
    # a snapshot that did not count (an older delay line): skipped
    assert fidelity.unsent_acks(1340, 98_660, [(3.5, None, None)], 31.0)["judged"] == 1340
    assert fidelity.unsent_acks(None, 98_660, counted, 31.0) is None
def test_frames_dropped_entering_the_switch_are_lost_outside_the_model_and_flagged():
    # scalable at 24.2 ms x7, drop 0 (2026-11-29): in the slow start's overshoot the senders'
    # CPU backlog overflowed; 26,600 data frames never reached the switch's sender port,
    # losses no counter of the path saw
    def at(dropped):
        return fidelity.verdict(Setting(drop=0, rtt_ms=6.2, rate_bps=1e9, dilation=1),
                                Path(seen=10**6, dropped=0, rtt_ms=6.2, base_rtt_ms=0.1),
                                Host(capacity_bps=1e9, achieved_bps=0.95e9, cpu_busy=0.5,
                                     delay_stats=_late_line({"0.5": 0}), switch_input_drops=dropped,
                                     input_backlog=1000))
    v = at(26600)
    assert v["verdict"] == "flagged"
    # the finding names the setting that holds the cure
    assert v["reasons"] == ["switch input: 26600 frames from the hosts dropped entering the switch "
                            "(a CPU's input backlog full, net.core.netdev_max_backlog = 1000; a deeper one keeps "
                            "a burst's frames): lost outside the path's model"]
    assert v["findings"][0]["transient"] and v["findings"][0]["measured"] == 26600
    assert v["findings"][0]["input_backlog"] and v["findings"][0]["fell_behind"]
    assert "full, net.core.netdev_max_backlog;" in fidelity.switch_input_check(5)  # setting not known
    assert v["tolerances"]["switch_input"]["dropped_frames"] == 0
    assert at(0)["verdict"] == "ok" and at(None)["verdict"] == "ok"


def test_late_frames_dropped_frames_and_unsent_acks_say_the_host_fell_behind_unless_a_stall_holds_them():
    # marked in the record, which the emulated backend reads to run the next attempt slower
    # (plan.slower): the delay line's and the link engine's lateness ...
    late = _verdict_at(4, _late_line({"2": 5000, "4": 0, "8": 0, "20": 0}))
    assert [f.get("fell_behind") for f in late["findings"]] == [True]
    assert fidelity.fell_behind(late["findings"])
    link = {"sent": 100_000, "ring_drops": 0, "send_errors": 0, "late_us_p999": 40, "max_late_ns": 3e6,
            "late_ge_ms": {"0.5": 2_000, "1": 900, "2": 400, "5": 0}}
    assert fidelity.fell_behind([r.record() for r in fidelity._link_reasons(link, 1)])
    # ... ACKs the delay line could not send, frames dropped entering the switch (a CPU's
    # input backlog full: the senders' CPU took frames faster than it worked them off) ...
    lost = _verdict_at(1, {**_late_line({"0.5": 0, "1": 0, "2": 0, "5": 0}), "send_errors": 1155})
    assert lost["verdict"] == "flagged" and fidelity.fell_behind(lost["findings"])
    assert fidelity.fell_behind([fidelity.switch_input_check(2505).record()])
    # of these, only the lateness says it fell behind in time (what the host's record of
    # paths learns): a full input backlog's losses are a burst's (input_backlog)
    assert fidelity.fell_behind_in_time(late["findings"])
    assert not fidelity.fell_behind_in_time(lost["findings"])
    assert not fidelity.fell_behind_in_time([fidelity.switch_input_check(2505).record()])
    # ... but not lateness wholly in host stalls (it would hold the frames at any factor),
    # nor frames lost in the engine's rings, nor the other host trouble
    stalled = {"check": "link", "transient": True, "text": "link: ...", "measured": 0.003, "limit": 0.002,
               "host_stall": True, "fell_behind": True}
    assert not fidelity.fell_behind([stalled])
    ring = fidelity._link_reasons({**link, "ring_drops": 3, "late_ge_ms": {}}, 1)
    assert len(ring) == 1 and not fidelity.fell_behind([r.record() for r in ring])
    others = [f for f in fidelity.verdict(**_host_trouble())["findings"] if f["check"] != "delay line"]
    assert {f["check"] for f in others} == {"rtt", "window", "ACK clock", "receiver rate", "cc"}
    assert not fidelity.fell_behind(others)

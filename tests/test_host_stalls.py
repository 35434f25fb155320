"""Host stalls weighed against the physical round trip: the verdict's check
(fidelity.stall_check), what a calibration learns of the host's stalls
(calibrate.add_stalls) and the least factor an `auto` run takes for them
(calibrate.stall_floor, plan.factor_on_host)."""
from __future__ import annotations

import pytest

from tcpeval.backends import fidelity, planning
from tcpeval.backends.emulated import calibrate
from tcpeval.backends.emulated import plan as plans
from tcpeval.spec import adhoc_condition


def _stalls(lengths_ms: list[float], watched_s: float) -> dict:
    """The engine's host_stalls record (tevdelay.c stall_stats) for these stalls."""
    return {"count": len(lengths_ms), "stolen_ns": int(sum(lengths_ms) * 1e6), "max_ns": int(max(lengths_ms, default=0) * 1e6),
            "gaps_examined": len(lengths_ms), "min_gap_ns": 250000, "watched_ns": int(watched_s * 1e9),
            "at_ms": [i * 100 for i in range(len(lengths_ms))],
            "length_us": [int(round(ms * 1e3)) for ms in lengths_ms], "longest_gaps": []}


# The x5 run of 2026-12-06 (Reno, 0.2 ms, drop 0): 150 s of wall time, ~0.7 stalls a second,
# the longest ~6.7 ms; here 100 stalls, 30 of them 6.7 ms
X5_STALLS = [6.7] * 30 + [2.0] * 70


def test_stalls_several_physical_round_trips_long_flag_a_run_when_they_come_often():
    # x5 at 0.2 ms: a 1-ms physical round trip, so a 6.7-ms stall is 6.7 of them; 30 in
    # 30 virtual seconds is one a virtual second, five times the limit
    finding = fidelity.stall_check(_stalls(X5_STALLS, 150.0), physical_rtt_ms=1.0, k=5)
    assert finding is not None and finding.check == "host stalls"
    assert finding.measured == pytest.approx(1.0) and finding.limit == fidelity.STALL_RATE_MAX
    # the host's doing, not the rate's (a calibration keeps the rate), and worth another try
    assert finding.host_stall and finding.transient
    assert str(finding).startswith("host stalls: 30 of the link engine's 100 host stalls lasted 4 or more "
                                   "of the physical path's 1-ms round trips (up to 6.70 ms), 1.00 a virtual second")


def test_the_same_stalls_are_short_against_a_longer_round_trip_or_rare_enough():
    # x10: a 2-ms round trip; 6.7 ms is 3.35 of them
    assert fidelity.stall_check(_stalls(X5_STALLS, 300.0), physical_rtt_ms=2.0, k=10) is None
    # x5 again, but six long stalls in 30 virtual s: 0.2 a virtual second, at the limit
    assert fidelity.stall_check(_stalls([6.7] * 6 + [2.0] * 94, 150.0), physical_rtt_ms=1.0, k=5) is None
    assert fidelity.stall_check(_stalls([6.7] * 7 + [2.0] * 93, 150.0), physical_rtt_ms=1.0, k=5) is not None


def test_a_record_without_a_stall_list_is_not_judged():
    # the testbed, a host without the watch, and traces from engines before the list
    assert fidelity.stall_check(None, 1.0, 5) is None
    old = _stalls(X5_STALLS, 150.0)
    del old["length_us"]
    assert fidelity.stall_check(old, 1.0, 5) is None


def test_the_verdict_carries_the_check_and_its_tolerances():
    setting = fidelity.Setting(drop=0.0, rtt_ms=1.0, rate_bps=None, buffer_bytes=None, dilation=5)
    path = fidelity.PathMeasurements(seen=10**6, dropped=0, rtt_ms=1.0)
    host = fidelity.HostMeasurements(delay_stats={"host_stalls": _stalls(X5_STALLS, 150.0)})
    v = fidelity.verdict(setting, path, host)
    assert v["verdict"] == "flagged" and [f["check"] for f in v["findings"]] == ["host stalls"]
    assert fidelity.host_stalls_only(v["findings"])  # a calibration keeps the rate
    assert v["tolerances"]["host_stalls"] == {"round_trips": 4, "per_virtual_s_max": 0.2}


def _cal(runs: list | None) -> dict:
    """A calibration whose envelope carries 2 Gbps from 0.2 to 500 ms, and whose runs
    met these stalls (by_run: [watched s, [lengths ms]] each)."""
    cal = {"key": {"hostname": "test"}, "measured_at": "2026-12-06T16:00:00+0000", "links": ["tevlink"],
           "default_rate_bps": 2e9,
           "points": [{"flows": f, "rtt_ms": r, "faithful": {"tevlink": {"rate_bps": 2e9}}}
                      for f in (1, 2) for r in (0.2, 500.0)]}
    if runs is not None:
        cal["host_stalls"] = calibrate.stall_totals(runs)
    return cal


def _vm_runs(spell: list[float] = (), spell_runs: int = 2) -> list:
    """100 runs of 6 s as the calibration of 2026-12-06 met them: ~0.7 stalls a second,
    most ~2 ms, one a run of 6.55 ms and one 7.5-ms stall in all; ``spell`` (lengths)
    spread over ``spell_runs`` runs of their own."""
    runs = [[6.0, [6.55, 2.0, 2.0, 2.0]] for _ in range(100)]
    runs[0][1].append(7.5)
    for i, ms in enumerate(spell):
        runs[1 + i % spell_runs][1].append(ms)
    return runs


def test_the_factor_floor_lengthens_the_round_trip_until_the_hosts_stalls_are_rare():
    # 0.2 ms: x5 (1 ms) to x8 (1.6 ms) still meet every 6.55-ms stall as 4 round trips or
    # more (x8: 8 x 100 / 600 s = 1.3 a virtual second); x9 (7.2 ms) only the 7.5-ms one,
    # whose run, the worst, is set aside as a spell
    floor = calibrate.stall_floor(_cal(_vm_runs()), 0.2)
    assert floor["factor"] == 9 and floor["stalls_from_ms"] == pytest.approx(7.2)
    assert floor["per_virtual_s"] == 0 and floor["set_aside_s"] == 6
    assert floor["limit_per_virtual_s"] == pytest.approx(0.1) and floor["calibrated_over_s"] == 600
    # had every run met a 7.5-ms stall: 9 x 100 / 600 s = 1.5 a virtual second; x10 (8 ms) clears them
    every = [[s, [*lengths, 7.5]] for s, lengths in _vm_runs()]
    assert calibrate.stall_floor(_cal(every), 0.2)["factor"] == 10
    # 6.2 ms: any factor's round trip is longer than the stalls
    assert calibrate.stall_floor(_cal(_vm_runs()), 6.2)["factor"] == 1
    # a calibration without the record (older, or no stall watch): no floor
    assert calibrate.stall_floor(_cal(None), 0.2) is None


def test_a_path_whose_round_trip_no_factor_lifts_above_the_stalls_gets_no_floor():
    # 20 us: x64 makes 4 round trips 5.12 ms, and every run's 6.55-ms stall still counts
    # (64 x 100 / 600 s, ~10.7 a virtual second): no floor, not a run at x64 that the
    # stalls flag all the same (the 20-us test ran 436 s at x64 so)
    assert calibrate.stall_floor(_cal(_vm_runs()), 0.02) is None
    # at 0.03 ms x55 (6.6 ms) clears them
    assert calibrate.stall_floor(_cal(_vm_runs()), 0.03)["factor"] == 55


def test_a_spell_of_long_stalls_in_a_few_runs_does_not_set_the_floor_and_one_across_many_does():
    # ten stalls of 26.5 ms in two runs (2 % of the time): set aside as a spell (with the
    # run of the 7.5-ms one)
    spell = calibrate.stall_floor(_cal(_vm_runs([26.5] * 10)), 0.2)
    assert spell["factor"] == 9 and spell["set_aside_s"] == 18
    # twenty, one in each of twenty runs (20 % of the time): half of them stay, 10 in 540 s,
    # and only a round trip a quarter of 26.5 ms long clears them (x34: 27.2 ms)
    assert calibrate.stall_floor(_cal(_vm_runs([26.5] * 20, spell_runs=20)), 0.2)["factor"] == 34


def test_an_auto_run_takes_the_floor_and_its_trace_says_why_a_set_factor_does_not():
    cond = adhoc_condition(["reno"], 0.2, 0.0, 30.0, rate_bps=9.85e9)
    said = []
    plan = plans.for_condition(cond, _cal(_vm_runs()), said.append)
    assert plan.dilation == 9 and plan.rtt_ms == pytest.approx(1.8)
    assert plan.stall_floor["factor"] == 9
    assert any("ask at least x9 at 0.2 ms" in m for m in said), said
    # without the stalls the envelope's factor (9.85 / 2 Gbps: x5) stands, and no floor is named
    assert plans.for_condition(cond, _cal(None), lambda m: None).dilation == 5
    assert plans.for_condition(cond, _cal(None), lambda m: None).stall_floor is None
    # a factor the condition sets is its own: the verdict judges it
    forced = plans.for_condition(adhoc_condition(["reno"], 0.2, 0.0, 30.0, rate_bps=9.85e9, dilation=5),
                                 _cal(_vm_runs()), lambda m: None)
    assert forced.dilation == 5 and forced.stall_floor is None
    # the plan of a campaign counts the same factor
    ceil = planning.Ceiling(2e9, 2e9, "test envelope", calibration=_cal(_vm_runs()))
    assert planning.plan_run(cond, ceil).factor == 9


def test_a_native_flow_runs_at_its_envelopes_factor_and_the_log_names_the_floor_it_ran_without():
    # CI's calibration of 2026-12-07 asked x2 at 2 ms for its stalls; native CUBIC at
    # 0.1 Gbps, 2 ms was refused ("needs time dilation x2") where the verdict's stall check,
    # twice the floor's limit, judges such a run at x1
    runs = [[6.0, [8.5, 2.0]] for _ in range(100)]  # one 8.5-ms stall a run: 4 round trips at x1
    assert calibrate.stall_floor(_cal(runs), 2.0)["factor"] == 2
    native = adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="native", rate_bps=1e8)
    said = []
    plan = plans.for_condition(native, _cal(runs), said.append)
    assert plan.dilation == 1 and plan.stall_floor is None
    assert any("would ask x2 at 2.0 ms" in m and "flows[0] (cubic, impl native) cannot be slowed" in m
               for m in said), said
    # a port of the same algorithm can be slowed, and takes the floor
    ported = plans.for_condition(adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="port", rate_bps=1e8),
                                 _cal(runs), lambda m: None)
    assert ported.dilation == 2 and ported.stall_floor["factor"] == 2
    # a native flow the envelope itself cannot carry at x1 is still refused, with the figures
    with pytest.raises(plans.ConditionError, match=r"flows\[0\] \(cubic, impl native\).*x3"):
        plans.for_condition(adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="native", rate_bps=5e9),
                            _cal(runs), lambda m: None)


def test_a_calibration_keeps_every_runs_stalls():
    seen = []
    calibrate.add_stalls(seen, {"measured": {"delay_line": {"host_stalls": _stalls([6.7, 2.0], 4.0)}}})
    calibrate.add_stalls(seen, {"measured": {"delay_line": {"host_stalls": _stalls([], 5.0)}}})
    calibrate.add_stalls(seen, {"measured": {"delay_line": None}})             # TBF without the engine
    calibrate.add_stalls(seen, calibrate.failed_record(RuntimeError("broke")))  # a failed run
    assert seen == [[4.0, [6.7, 2.0]], [5.0, []]]
    assert calibrate.stall_totals(seen) == {"runs": 2, "watched_s": pytest.approx(9.0), "length_ms": [2.0, 6.7],
                                            "by_run": seen}

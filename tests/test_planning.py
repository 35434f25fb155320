"""What a campaign costs on a host: the factor each run gets and its wall time
(`tcpeval plan`, `tcpeval design status`)."""
import json
import math
import re
from dataclasses import replace

import pytest

from tcpeval import spec
from tcpeval.backends import planning
from tcpeval.cli import main

SLOW_HOST = planning.Ceiling(rate_bps=0.3e9, default_rate_bps=0.3e9, source="test host")


def test_a_paper_run_on_a_slow_host_is_dilated_and_costs_its_factor_in_wall_time(design):
    run = spec.expand(design, "paper")[0]
    p = planning.plan_run(run, SLOW_HOST)
    assert p.factor == 33 and p.traffic_s == 900                # 9.85 / 0.3 = 32.8
    assert p.wall_s == pytest.approx(900 * 33 + planning.RUN_OVERHEAD_S)


def test_a_run_at_the_hosts_default_rate_is_not_dilated(design):
    run = spec.expand(design, "smoke")[0]
    assert planning.plan_run(run, SLOW_HOST).factor == 1


def test_without_a_calibration_or_on_the_testbed_nothing_is_dilated(design):
    run = spec.expand(design, "paper")[0]
    assert planning.plan_run(run, planning.Ceiling(None, None, "none")).factor == 1
    assert planning.ceiling("testbed").rate_bps is None


def test_the_emulators_ceiling_is_read_without_building_anything(tmp_path, monkeypatch):
    # a query: `tcpeval plan` on a host with neither a build nor a calibration compiles
    # nothing; a calibration filed under the sources' hashes is found as it is
    from tcpeval.backends.emulated import build, calibrate
    monkeypatch.setenv("TCPEVAL_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("TCPEVAL_CACHE", str(tmp_path / "cache"))
    ceil = planning.ceiling("emulated")
    assert ceil.calibration is None and "no calibration" in ceil.source
    assert not (tmp_path / "build").exists() or not any((tmp_path / "build").iterdir())
    key = calibrate.host_key(build.source_hashes())
    cal = {"key": key, "measured_at": "test", "points": [], "faithful_rate_bps": 1e9,
           "default_rate_bps": 0.8e9, "host_capacity_bps": 2e9, "link": "tevlink"}
    calibrate.cache_path(key).parent.mkdir(parents=True)
    calibrate.cache_path(key).write_text(json.dumps(cal))
    ceil = planning.ceiling("emulated")
    assert ceil.rate_bps == 1e9 and ceil.default_rate_bps == 0.8e9
    assert not (tmp_path / "build").exists() or not any((tmp_path / "build").iterdir())


def test_a_native_flow_that_would_need_dilation_is_reported_as_refused(design):
    native = [r for r in spec.expand(design, "validation") if r.flows[0].impl == "native"][0]
    from dataclasses import replace
    p = planning.plan_run(replace(native, rate_bps=9.5e9), SLOW_HOST)
    assert p.factor is None and "native" in p.refused


def test_plan_prints_every_criterion_and_the_total(capsys):
    assert main(["plan", "--campaign", "paper", "--backend", "testbed"]) == 0
    out = capsys.readouterr().out
    for name in ("responsiveness", "fairness", "compatibility", "convergence"):
        assert name in out
    assert re.search(r"total +1280 +320.00 ", out) and "x1: 840" in out


def test_makespan_puts_the_longest_runs_first_on_the_node_that_frees_up_first():
    # by hand: 8 | 7 | then 5 on node 2 (7+5=12), 4 on node 1 (8+4=12), 3 on either (15)
    assert planning.makespan_s([3, 5, 8, 7, 4], 2) == 15
    assert planning.makespan_s([3, 5, 8, 7, 4], 1) == 27
    assert planning.makespan_s([3, 5, 8, 7, 4], 64) == 8       # more nodes than runs
    assert planning.makespan_s([], 8) == 0
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        planning.makespan_s([1.0], 0)


def test_a_jobs_time_limit_covers_its_dilated_run_and_retries_each_slower(design):
    run = spec.expand(design, "paper")[0]                      # 900 s at 9.85 Gbps, dilation auto
    assert planning.RUN_OVERHEAD_S == 3 and planning.RETRY_PAUSES_TOTAL_S == 5 + 15
    # three attempts at x1, x2, x3 (each after a late one runs one factor slower), half a
    # run more for a slow node, the two pauses: 903 + 1803 + 2703 + 451.5 + 20 s = 98.0 min
    fast = planning.given_ceiling("10G")
    assert planning.attempt_factors(run, 1) == [1, 2, 3]
    assert planning.time_limit_min(run, fast) == 99
    # a login node knows no calibration: an `auto` run is planned at the largest factor,
    # which no attempt exceeds: 3 x 57,603 + 28,801.5 + 20 s = 3360.5 min
    blind = planning.node_ceiling(None)
    assert planning.attempt_factors(run, 64) == [64, 64, 64]
    assert planning.time_limit_min(run, blind) == 3361
    # x33, x34, x35: 29,703 + 30,603 + 31,503 + 14,851.5 + 20 s = 1778.0 min
    assert planning.time_limit_min(run, SLOW_HOST) == 1779
    # a factor the condition sets is kept in every attempt: 3 x 3,603 + 1,801.5 + 20 s = 210.6 min
    forced = replace(run, dilation=4)
    assert planning.attempt_factors(forced, 4) == [4, 4, 4]
    assert planning.time_limit_min(forced, fast) == 211


def test_plan_prints_the_wall_time_on_each_node_count(capsys):
    assert main(["plan", "--campaign", "paper", "--nodes", "1", "8", "64", "--faithful-rate", "10G"]) == 0
    out = capsys.readouterr().out
    rows = {int(m[1]): float(m[2]) for m in re.finditer(r"^\s+(\d+)\s+([\d.]+)\s+[\d.]+$", out, re.M)}
    # 1,280 runs of 900 s (no dilation on a 10G node) plus the set-up of each
    one = 1280 * (900 + planning.RUN_OVERHEAD_S) / 3600
    assert rows[1] == pytest.approx(one, abs=0.01)
    assert rows[8] == pytest.approx(one / 8, abs=0.01) and rows[64] == pytest.approx(one / 64, abs=0.01)
    assert "a host that carries 10G faithfully (given)" in out


def test_plan_refuses_a_rate_it_cannot_read_and_a_node_count_below_one(capsys):
    assert main(["plan", "--campaign", "smoke", "--faithful-rate", "fast"]) != 0
    assert "--faithful-rate: 'fast' is not a rate" in capsys.readouterr().err
    assert main(["plan", "--campaign", "smoke", "--nodes", "0"]) != 0
    assert "--nodes" in capsys.readouterr().err


def test_with_an_envelope_each_run_gets_the_factor_of_its_own_physical_path(design):
    # faithful 1.4 Gbps at 0.2 ms falling to 0.7 at 193.6 ms: a 9.85 Gbps run at 0.2 ms
    # needs k = 8 (1.23 Gbps at 1.6 ms; k = 7 would be 1.41), one at 24.2 ms a larger k
    # (its path is k x longer)
    cal = {"links": ["tevlink"], "points": [
        {"flows": f, "rtt_ms": r, "faithful": {"tevlink": {"rate_bps": v}}}
        for f in (1, 2) for r, v in ((0.2, 1.4e9), (2.2, 1.4e9), (24.2, 1.0e9), (193.6, 0.7e9))]}
    ceil = planning.Ceiling(1.0e9, 1.0e9, "test envelope", calibration=cal)
    runs = [r for r in spec.expand(design, "paper") if r.criterion == "responsiveness"]
    short = next(r for r in runs if r.rtt_ms == 0.2)
    long = next(r for r in runs if r.rtt_ms == 24.2)
    assert planning.plan_run(short, ceil).factor == 8
    k = planning.plan_run(long, ceil).factor
    assert k == 15  # 0.66 Gbps at 363 ms: beyond the grid, its longest point (0.7)
    from tcpeval.backends.emulated import calibrate
    assert long.rate_bps / k <= calibrate.envelope_rate(cal, "tevlink", 1, 24.2 * k)
    assert long.rate_bps / (k - 1) > calibrate.envelope_rate(cal, "tevlink", 1, 24.2 * (k - 1))


def _findings_run(design, rtt_ms, drop, variant="reno"):
    runs = spec.expand(design, "findings")
    return next(r for r in runs if r.criterion == "responsiveness" and r.rtt_ms == rtt_ms
                and r.drop == drop and r.variants == (variant,) and r.rep == 1)


def test_a_precision_driven_run_is_planned_at_the_length_its_rule_is_expected_to_need(design):
    # by hand, 9.85 Gbps of frames (9.50 of payload), MSS 1460, decisions every 2 s:
    # drop 0: no loss event to wait for; the link met after the warm-up and the mean to the
    # +-0.5 % a within finding asks, as the 24 drop-0 cells of 2026-12-06 took in the mean
    # (13.5 virtual s; six at their 30-s cap), not the first decision (4 s)
    assert planning.expected_traffic_s(_findings_run(design, 0.2, 0.0)) == 14
    # 1e-5 and 1e-7 at 0.2 ms: link-limited (Mathis 16 and 160 Gbps); the rule asks them no
    # loss events (1e-7 drops one every 12 s), so they are planned as a lossless run, and
    # last up to the rule's 300 s (link_bound: max_s)
    for drop in (1e-5, 1e-7):
        run = _findings_run(design, 0.2, drop)
        assert run.duration_s == 300 and planning.expected_traffic_s(run) == 14
    # 1e-4 at 0.2 ms: loss-limited (Mathis 5.06 Gbps, 43.3 losses/s); 500 events by 11.5 s
    assert planning.expected_traffic_s(_findings_run(design, 0.2, 1e-4)) == 12
    # 1e-2 at 6.2 ms: 14.0 losses/s, 500 events by 35.8 s, the length the run was given
    run = _findings_run(design, 6.2, 1e-2)
    assert run.duration_s == 36 and planning.expected_traffic_s(run) == 36


def test_a_precision_driven_run_costs_its_expected_length_and_at_most_its_duration(design):
    run = _findings_run(design, 0.2, 1e-4)
    p = planning.plan_run(run, SLOW_HOST)
    assert p.traffic_s == 12 and p.max_traffic_s == run.duration_s == 30
    assert p.wall_s == pytest.approx(12 * p.factor + planning.RUN_OVERHEAD_S)
    assert p.max_wall_s == pytest.approx(30 * p.factor + planning.RUN_OVERHEAD_S)
    # a scheduler's limit must hold the run that never meets its rule
    k = p.factor
    attempts_s = sum(30 * f + planning.RUN_OVERHEAD_S for f in (k, k + 1, k + 2))
    assert planning.time_limit_min(run, SLOW_HOST) == math.ceil((attempts_s + 0.5 * p.max_wall_s + 20) / 60)
    fixed = spec.expand(design, "paper")[0]
    q = planning.plan_run(fixed, SLOW_HOST)
    assert q.traffic_s == q.max_traffic_s == 900 and q.wall_s == q.max_wall_s


def test_plan_says_how_it_plans_precision_driven_runs_and_their_longest(capsys):
    assert main(["plan", "--campaign", "findings-short-rtt", "--faithful-rate", "10G"]) == 0
    out = capsys.readouterr().out
    assert "30 precision-driven run(s) planned at the length their rule is expected to need" in out
    assert "and 12 cell(s) the first round defers" in out     # rivals of rankings (spec.deferred_cells)
    row = re.search(r"^\s+1\s+([\d.]+)\s+[\d.]+\s+([\d.]+)$", out, re.M)
    assert row and float(row[1]) < float(row[2])            # expected, then at most


def _envelope_2g() -> planning.Ceiling:
    """A calibration whose envelope carries 2 Gbit/s at every RTT, one flow or two."""
    cal = {"links": ["tevlink"], "points": [
        {"flows": f, "rtt_ms": r, "faithful": {"tevlink": {"rate_bps": 2e9}}}
        for f in (1, 2) for r in (0.2, 2.2, 24.2, 193.6)]}
    return planning.Ceiling(2e9, 2e9, "test envelope", calibration=cal)


def test_a_run_whose_loss_bounds_its_flows_far_below_the_link_is_not_slowed_down(design):
    # an envelope of 2 Gbit/s at every RTT: the paper's link needs x5, but at 24.2 ms and
    # p = 1e-2 one flow carries at most 0.5 Gbit/s (dilation.carried_bound_bps)
    ceil = _envelope_2g()
    lossy, lossless = _findings_run(design, 24.2, 1e-2), _findings_run(design, 24.2, 0.0)
    assert planning.plan_run(lossless, ceil).factor == 5
    assert planning.plan_run(lossy, ceil).factor == 1


def test_a_given_faithful_rate_plans_lossy_runs_as_an_envelope_does(design):
    # `--faithful-rate` (a cluster's nodes) has no envelope, only a rate: the loss bound
    # applies all the same, or a lossy cell would be planned (and its job's time limit
    # asked) at the link's factor
    given = planning.given_ceiling("2G")
    envelope = _envelope_2g()
    lossy, lossless = _findings_run(design, 24.2, 1e-2), _findings_run(design, 24.2, 0.0)
    assert planning.plan_run(lossless, given).factor == 5
    assert planning.plan_run(lossy, given).factor == 1
    for run in (lossy, lossless):
        assert planning.plan_run(run, given) == planning.plan_run(run, envelope)
        assert planning.time_limit_min(run, given) == planning.time_limit_min(run, envelope)


def test_a_calibration_made_under_another_input_backlog_is_not_used(tmp_path, monkeypatch):
    # net.core.netdev_max_backlog decides whether a slow start's burst into the switch is
    # queued or dropped on the senders' CPU: a host that changed it calibrates again
    from tcpeval.backends.emulated import build, calibrate
    monkeypatch.setenv("TCPEVAL_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("TCPEVAL_CACHE", str(tmp_path / "cache"))
    hashes = build.source_hashes()
    key = calibrate.host_key(hashes)
    assert key["netdev_max_backlog"] == int(open("/proc/sys/net/core/netdev_max_backlog").read())
    cal = {"key": {**key, "netdev_max_backlog": key["netdev_max_backlog"] + 1}, "measured_at": "test",
           "points": [], "faithful_rate_bps": 1e9, "default_rate_bps": 0.8e9, "host_capacity_bps": 2e9}
    calibrate.cache_path(key).parent.mkdir(parents=True)
    calibrate.cache_path(key).write_text(json.dumps(cal))
    assert calibrate.load(hashes) is None
    calibrate.cache_path(key).write_text(json.dumps({**cal, "key": key}))
    assert calibrate.load(hashes)["faithful_rate_bps"] == 1e9


def _cell(variant, rtt, second=""):
    return {"criterion": "responsiveness", "variant": variant, "second": second, "rtt_ms": rtt, "drop": 0.0}


def test_by_finding_brings_the_cheapest_findings_cells_first_and_counts_shared_cells_once():
    # three findings over four cells: "slow" reads the 24.2-ms cell (100 s), "cheap" and
    # "shares" read 0.2-ms cells (10 s each), "shares" one of cheap's and one of its own
    claims = [{"id": "slow", "check": {"where": {"rtt_ms": 24.2}}},
              {"id": "shares", "check": {"where": {"rtt_ms": 0.2, "variant": ["bic", "cubic"]}}},
              {"id": "cheap", "check": {"where": {"rtt_ms": 0.2, "variant": ["reno", "bic"]}}}]
    runs = [_cell("reno", 0.2), _cell("bic", 0.2), _cell("cubic", 0.2), _cell("reno", 24.2)]
    wall = {0.2: 10.0, 24.2: 100.0}
    steps = planning.by_finding(claims, runs, lambda r: wall[r["rtt_ms"]], lambda r: r)
    assert [s.claim for s in steps] == ["shares", "cheap", "slow"]   # 20 = 20 s: claims.yaml order
    assert [len(s.runs) for s in steps] == [2, 1, 1]                 # bic came with "shares"
    assert [s.wall_s for s in steps] == [20.0, 10.0, 100.0]
    assert [s.by_s for s in steps] == [20.0, 30.0, 130.0]
    assert [s.cells for s in steps] == [2, 2, 1]


def test_by_finding_counts_runs_already_done_as_free_and_puts_blocked_findings_last():
    claims = [{"id": "blocked", "check": {"where": {"variant": "reno"}}},
              {"id": "costly", "check": {"where": {"variant": "cubic"}}},
              {"id": "done", "check": {"where": {"variant": "bic"}}},
              {"id": "elsewhere", "check": {"where": {"variant": "htcp"}}}]
    runs = [_cell("reno", 0.2), _cell("cubic", 24.2), _cell("bic", 24.2)]
    steps = planning.by_finding(claims, runs, lambda r: 50.0, lambda r: r,
                                done=lambda r: r["variant"] == "bic", blocked=frozenset({"blocked"}))
    assert [(s.claim, len(s.runs), s.by_s, s.blocked) for s in steps] == [
        ("done", 0, 0.0, False), ("costly", 1, 50.0, False), ("blocked", 1, 100.0, True)]
    # a finding none of the runs reads is left out: it belongs to another campaign (a slice)


def test_plan_by_finding_orders_a_slices_findings_and_cuts_them_at_a_budget(capsys, tmp_path):
    args = ["plan", "--campaign", "findings-short-rtt", "--faithful-rate", "10G", "--by-finding",
            "--raw-dir", str(tmp_path)]
    assert main(args) == 0
    table = capsys.readouterr().out
    rows = re.findall(r"^  (\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)", table, re.M)
    assert len(rows) >= 5
    by = [float(r[4]) for r in rows]
    assert by == sorted(by) and by[-1] > 0
    # the runs' paths, one finding's per line, exactly the first round's runs, each once
    assert main(args + ["--paths"]) == 0
    lines = capsys.readouterr().out.splitlines()
    every = [p for line in lines for p in line.split()]
    assert len(every) == len(set(every)) == sum(int(r[2]) for r in rows)
    assert all(p.startswith(str(tmp_path)) and p.endswith("/trace.json") for p in every)
    # a budget that the cheapest finding fits in and the last one does not
    hours = (float(rows[0][4]) + by[-1]) / 2
    assert main(args + ["--paths", "--hours", f"{hours}"]) == 0
    cut = capsys.readouterr()
    assert 0 < len(cut.out.splitlines()) < len(lines)
    assert "findings' runs fit in" in cut.err


def test_plan_by_finding_says_which_findings_cells_not_run_leave_open_and_which_can_still_fail(capsys, tmp_path):
    # the findings campaign plans, not runs, its pairs at 12.2 and 24.2 ms: "every pairing
    # above 50 %" can still fail on its 6.2-ms pairs, a comparison of two means cannot
    assert main(["plan", "--campaign", "findings", "--faithful-rate", "10G", "--by-finding",
                 "--raw-dir", str(tmp_path)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  compat-")}
    assert "at this budget it can only be found not to hold" in rows["compat-high-speed-takes-more"]
    assert "reads cells planned, not run: undecided at this budget" in rows["compat-worse-than-fair"]
    assert "planned, not run" not in rows["compat-cubic-fairer-than-bic"]


def test_plan_by_finding_refuses_a_campaign_without_findings_and_paths_alone(capsys):
    assert main(["plan", "--campaign", "smoke", "--by-finding"]) != 0
    assert "has no findings" in capsys.readouterr().err
    assert main(["plan", "--campaign", "findings", "--paths"]) != 0
    assert "only with --by-finding" in capsys.readouterr().err
    assert main(["plan", "--campaign", "findings", "--by-finding", "--hours", "0"]) != 0
    assert "--hours" in capsys.readouterr().err


def test_plan_names_the_default_input_backlog_where_pairs_will_run(design):
    # the sitting of 2026-12-07: seven attempts of pairs at 6.2 and 12.2 ms spoiled by frames
    # a full backlog of 1,000 refused; the plan says so before a reviewer spends the hours
    from tcpeval.backends.cli import _input_backlog_note
    runs = spec.expand(design, "findings")
    pairs = sum(len(r.flows) > 1 for r in runs)

    def on(backlog):
        cal = {"key": {"netdev_max_backlog": backlog}, "points": []}
        return planning.Ceiling(2e9, 2e9, "test host", calibration=cal)
    note = _input_backlog_note(on(1000), runs)
    assert "net.core.netdev_max_backlog is 1000" in note and f"{pairs} run(s) of several flows" in note
    assert "sysctl -w net.core.netdev_max_backlog=10000" in note and "make calibrate" in note
    assert _input_backlog_note(on(10000), runs) == ""
    assert _input_backlog_note(on(1000), [r for r in runs if len(r.flows) == 1]) == ""
    assert _input_backlog_note(SLOW_HOST, runs) == ""       # no calibration, no key to read

"""What a campaign costs on a host: the factor each run gets and its wall time
(`tcpeval plan`, `tcpeval design status`)."""
import json
import re

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


def test_a_jobs_time_limit_covers_its_dilated_run_and_retries(design):
    run = spec.expand(design, "paper")[0]                      # 900 s at 9.85 Gbps
    fast = planning.given_ceiling("10G")
    assert planning.time_limit_min(run, fast) == -(-(900 + planning.RUN_OVERHEAD_S) * planning.TIME_LIMIT_MARGIN // 60)
    # a login node knows no calibration: an `auto` run is planned at the largest factor
    blind = planning.node_ceiling(None)
    assert planning.time_limit_min(run, blind) == -(-(900 * 64 + planning.RUN_OVERHEAD_S) * planning.TIME_LIMIT_MARGIN // 60)
    assert planning.time_limit_min(run, SLOW_HOST) == -(-(900 * 33 + planning.RUN_OVERHEAD_S) * planning.TIME_LIMIT_MARGIN // 60)


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

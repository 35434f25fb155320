"""What a campaign costs on a host: the factor each run gets and its wall time
(`tcpeval plan`, `tcpeval design status`)."""
import re

import pytest

from tcpeval import spec
from tcpeval.backends import planning
from tcpeval.cli import main

SLOW_HOST = planning.Ceiling(rate_bps=0.3e9, default_rate_bps=0.3e9, source="test host")


def test_a_paper_run_on_a_slow_host_is_dilated_and_costs_its_factor_in_wall_time(design):
    run = spec.expand(design, "paper")[0]
    p = planning.plan_run(run, SLOW_HOST)
    assert p.factor == 32 and p.traffic_s == 900
    assert p.wall_s == pytest.approx(900 * 32 + planning.RUN_OVERHEAD_S)


def test_a_run_at_the_hosts_default_rate_is_not_dilated(design):
    run = spec.expand(design, "smoke")[0]
    assert planning.plan_run(run, SLOW_HOST).factor == 1


def test_without_a_calibration_or_on_the_testbed_nothing_is_dilated(design):
    run = spec.expand(design, "paper")[0]
    assert planning.plan_run(run, planning.Ceiling(None, None, "none")).factor == 1
    assert planning.ceiling("testbed").rate_bps is None


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

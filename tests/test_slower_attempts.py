"""An attempt whose frame rate the host fell behind (frames released late, or dropped in a
CPU's full input backlog) is followed by one at the next time-dilation factor, where the
condition leaves the factor to the host (`auto`): the calibration's envelope promised the
first one too much (emulated plan.slower)."""
from __future__ import annotations

from dataclasses import replace

from tcpeval.backends.emulated import plan as plans
from tcpeval.spec import adhoc_condition


def _cal(faithful_bps: float) -> dict:
    """A calibration whose envelope carries `faithful_bps` from 0.2 to 500 ms, one flow or two."""
    return {"links": ["tevlink"], "default_rate_bps": faithful_bps,
            "points": [{"flows": f, "rtt_ms": r, "faithful": {"tevlink": {"rate_bps": faithful_bps}}}
                       for f in (1, 2) for r in (0.2, 500.0)]}


def _spoiled(*, behind: bool = True, host_stall: bool = False) -> dict:
    finding = {"check": "delay line", "transient": True, "text": "delay line: ...", "measured": 0.0075,
               "limit": 0.002}
    if behind:
        finding["fell_behind"] = True
    if host_stall:
        finding["host_stall"] = True
    return {"fidelity": {"verdict": "flagged", "findings": [finding]}}


def test_a_late_attempt_is_followed_by_one_a_factor_slower_with_the_same_virtual_path():
    cal, said = _cal(2e9), []
    cond = adhoc_condition(["reno"], 24.2, 0.0, 30.0, rate_bps=9.5e9)
    first = plans.for_condition(cond, cal, said.append)
    assert first.dilation == 5                                       # 9.5 / 2 Gbps
    second = plans.slower(cond, first, _spoiled(), said.append)
    assert second.dilation == 6
    # the physical path is the virtual one slowed six-fold; buffer, drop rate and seed stay
    assert second.rate_bps == 9.5e9 / 6 and second.rtt_ms == 24.2 * 6 and second.duration_s == 30.0 * 6
    assert (second.buffer_bytes, second.drop, second.seed) == (first.buffer_bytes, first.drop, first.seed)
    assert said[-1].startswith("the host fell behind the frame rate at x5: the next attempt runs at x6")
    assert plans.slower(cond, second, _spoiled(), said.append).dilation == 7


def test_an_attempt_is_run_again_as_it_was_unless_the_host_fell_behind_it_at_a_factor_it_chose():
    cal = _cal(2e9)
    cond = adhoc_condition(["reno"], 24.2, 0.0, 30.0, rate_bps=9.5e9)
    first = plans.for_condition(cond, cal, lambda m: None)
    # lateness wholly in host stalls, or other host trouble: the same factor again
    assert plans.slower(cond, first, _spoiled(host_stall=True), print) is None
    assert plans.slower(cond, first, _spoiled(behind=False), print) is None
    # a factor the condition sets is the user's: kept
    forced = replace(cond, dilation=5)
    assert plans.slower(forced, plans.for_condition(forced, cal, lambda m: None), _spoiled(), print) is None


def test_a_native_flow_that_cannot_be_slowed_is_run_again_as_it_was_and_the_log_says_why():
    cal, said = _cal(2e9), []
    cond = adhoc_condition(["cubic"], 6.2, 0.0, 10.0, rate_bps=1e9, impl="native")
    first = plans.for_condition(cond, cal, said.append)
    assert first.dilation == 1
    assert plans.slower(cond, first, _spoiled(), said.append) is None
    assert said[-1].startswith("the host fell behind at x1, and the condition cannot run slower (condition.flows[0]")

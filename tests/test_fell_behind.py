"""Where this host fell behind a run's frame rate at a factor it chose, the next run on
that physical path starts a factor slower, says so in its log and trace, and `tcpeval
plan` plans it so; a new calibration, another physical path, a factor the condition sets
or lateness in host stalls teach it nothing (emulated fell_behind, plan.factor_on_host)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tcpeval.backends import planning
from tcpeval.backends.emulated import fell_behind
from tcpeval.backends.emulated import plan as plans
from tcpeval.spec import adhoc_condition


def _cal(faithful_bps: float = 2e9, measured_at: str = "2026-12-03T18:00:00+0000") -> dict:
    """A calibration whose envelope carries `faithful_bps` from 0.2 to 500 ms, one flow or two."""
    return {"key": {"hostname": "test"}, "measured_at": measured_at, "links": ["tevlink"],
            "default_rate_bps": faithful_bps,
            "points": [{"flows": f, "rtt_ms": r, "faithful": {"tevlink": {"rate_bps": faithful_bps}}}
                       for f in (1, 2) for r in (0.2, 500.0)]}


def _spoiled(*, behind: bool = True, host_stall: bool = False) -> dict:
    finding = {"check": "link", "transient": True, "text": "link: frames left late", "measured": 0.02,
               "limit": 0.002}
    if behind:
        finding["fell_behind"] = True
    if host_stall:
        finding["host_stall"] = True
    return {"fidelity": {"verdict": "flagged", "reasons": [finding["text"]], "findings": [finding]}}


@pytest.fixture
def record(tmp_path, monkeypatch):
    where = tmp_path / "fell-behind.json"
    monkeypatch.setenv("TCPEVAL_FELL_BEHIND", str(where))
    return where


PAIR = adhoc_condition(["scalable", "reno"], 6.2, 0.0, 60.0, rate_bps=9.85e9)


def test_a_path_the_host_fell_behind_on_is_run_a_factor_slower_next_time_and_the_log_says_why(record):
    cal, said = _cal(), []
    first = plans.for_condition(PAIR, cal, said.append)
    assert first.dilation == 5 and first.skipped_factors == []           # 9.85 / 2 Gbps
    entry = fell_behind.note(first, PAIR, _spoiled(), "data/raw/emulated/x/rep1")
    assert entry["factor"] == 5 and entry["flows"] == 2 and entry["rtt_ms"] == pytest.approx(31.0)
    assert entry["rate_bps"] == pytest.approx(9.85e9 / 5) and entry["variants"] == ["scalable", "reno"]
    again = plans.for_condition(PAIR, cal, said.append)
    assert again.dilation == 6 and again.rtt_ms == pytest.approx(6.2 * 6)
    assert again.skipped_factors == [{"factor": 5, "run": "data/raw/emulated/x/rep1", "at": entry["at"]}]
    assert any(m.startswith("this host fell behind at x5 on this physical path") and m.endswith("x6 instead")
               for m in said)
    # the record is one JSON document, written whole (no temporary file beside it)
    assert [p.name for p in record.parent.iterdir()] == [record.name]
    assert len(json.loads(record.read_text())["entries"]) == 1


def test_each_factor_the_host_fell_behind_at_is_passed_over_in_turn(record):
    cal = _cal()
    at5 = plans.for_condition(PAIR, cal, lambda m: None)
    fell_behind.note(at5, PAIR, _spoiled(), "run-a")
    at6 = plans.slower(PAIR, at5, _spoiled(), lambda m: None)
    assert at6.dilation == 6
    fell_behind.note(at6, PAIR, _spoiled(), "run-a")
    nxt = plans.for_condition(PAIR, cal, lambda m: None)
    assert nxt.dilation == 7 and [s["factor"] for s in nxt.skipped_factors] == [5, 6]
    # an attempt run slower after one that started above the record keeps what was passed over
    # (the BIC pair at 24.2 ms: x9 skipped, x10 and x11 fell behind, kept at x12)
    at8 = plans.slower(PAIR, nxt, _spoiled(), lambda m: None)
    assert at8.dilation == 8 and [s["factor"] for s in at8.skipped_factors] == [5, 6]


def test_other_physical_paths_keep_the_envelopes_factor(record):
    cal = _cal()
    one_flow = adhoc_condition(["scalable"], 6.2, 0.0, 60.0, rate_bps=9.85e9)
    longer = replace(PAIR, rtt_ms=12.2)
    before = {c: plans.for_condition(c, cal, lambda m: None).dilation for c in (one_flow, longer)}
    fell_behind.note(plans.for_condition(PAIR, cal, lambda m: None), PAIR, _spoiled(), "run-a")
    for cond in (one_flow, longer):
        p = plans.for_condition(cond, cal, lambda m: None)
        assert p.dilation == before[cond] == 5 and p.skipped_factors == [], cond
    # the same physical RTT at a lower rate is not what fell behind (9.7 Gbps virtual at x5:
    # 1.94 of the 1.97 Gbps physical that did)
    behind = fell_behind.entries(cal)
    assert fell_behind.known(behind, 2, 6.2 * 5, 9.7e9 / 5) is None
    assert fell_behind.known(behind, 2, 6.2 * 5, 9.85e9 / 5) is not None
    assert fell_behind.known(behind, 2, 6.2 * 5, 2.5e9) is not None    # faster still


def test_frames_a_full_input_backlog_refused_slow_the_next_attempt_but_teach_the_record_nothing(record):
    # the Scalable pair at 12.2 ms (2026-12-04) lost 1-6 frames entering the switch at each
    # of x8..x12 with net.core.netdev_max_backlog = 1000, and none at x7 with 10,000: a
    # burst a higher factor need not shrink; an entry would slow every later run on the path
    from tcpeval.backends import fidelity
    cal = _cal()
    first = plans.for_condition(PAIR, cal, lambda m: None)
    backlog = [fidelity.switch_input_check(3, 1000).record()]
    acks = {"check": "delay line", "transient": True, "text": "delay line: 1340 ACKs not sent (lost)",
            "measured": 0.013, "limit": 0.001, "fell_behind": True, "input_backlog": True}
    for findings in (backlog, [acks], [*backlog, acks]):
        spoiled = {"fidelity": {"verdict": "flagged", "reasons": [f["text"] for f in findings], "findings": findings}}
        assert fell_behind.note(first, PAIR, spoiled, "r") is None
        assert plans.slower(PAIR, first, spoiled, lambda m: None).dilation == first.dilation + 1
    assert not record.exists()
    # beside late frames it is the lateness that teaches it
    late = _spoiled()["fidelity"]["findings"]
    both = {"fidelity": {"verdict": "flagged", "reasons": [], "findings": [*backlog, *late]}}
    assert fell_behind.note(first, PAIR, both, "r")["factor"] == first.dilation


def test_an_attempt_ended_early_as_doomed_slows_the_next_attempt_but_teaches_the_record_nothing(record):
    # Reno/Reno at 24.2 ms (2026-12-05): the 10-s stump of a doomed attempt, two slow starts
    # at once, had 6.7 % of its frames late; the record speaks for whole runs
    cal = _cal()
    first = plans.for_condition(PAIR, cal, lambda m: None)
    stump = _spoiled()
    stump["measured"] = {"ended_doomed": {"at_s": 5.0, "ended_s": 10.0, "why": "switch input: 7 frames",
                                          "check": "switch input"}}
    assert fell_behind.note(first, PAIR, stump, "r") is None
    assert not record.exists()
    assert plans.slower(PAIR, first, stump, lambda m: None).dilation == first.dilation + 1
    # the same findings over a whole attempt are remembered
    assert fell_behind.note(first, PAIR, _spoiled(), "r")["factor"] == first.dilation


def test_nothing_is_learnt_from_host_stalls_other_trouble_a_set_factor_or_with_the_record_off(record, monkeypatch):
    cal = _cal()
    first = plans.for_condition(PAIR, cal, lambda m: None)
    assert fell_behind.note(first, PAIR, _spoiled(host_stall=True), "r") is None
    assert fell_behind.note(first, PAIR, _spoiled(behind=False), "r") is None
    forced = replace(PAIR, dilation=5)
    assert fell_behind.note(plans.for_condition(forced, cal, lambda m: None), forced, _spoiled(), "r") is None
    assert not record.exists()
    monkeypatch.setenv("TCPEVAL_FELL_BEHIND", fell_behind.OFF)
    assert fell_behind.path() is None and fell_behind.note(first, PAIR, _spoiled(), "r") is None
    assert plans.for_condition(PAIR, cal, lambda m: None).dilation == 5


def test_a_new_calibration_starts_the_record_afresh(record):
    old = _cal(measured_at="2026-12-03T14:32:44+0000")
    fell_behind.note(plans.for_condition(PAIR, old, lambda m: None), PAIR, _spoiled(), "run-a")
    assert plans.for_condition(PAIR, old, lambda m: None).dilation == 6
    new = _cal(measured_at="2026-12-03T19:00:00+0000")
    assert plans.for_condition(PAIR, new, lambda m: None).dilation == 5
    fell_behind.note(plans.for_condition(PAIR, new, lambda m: None), PAIR, _spoiled(), "run-b")
    kept = json.loads(record.read_text())
    assert kept["calibration"]["measured_at"] == new["measured_at"]
    assert [e["run"] for e in kept["entries"]] == ["run-b"]


def test_the_plan_counts_a_path_the_host_fell_behind_on_at_the_factor_a_run_will_take(record):
    cal = _cal()
    ceil = planning.Ceiling(2e9, 2e9, "test envelope", calibration=cal)
    assert planning.plan_run(PAIR, ceil).factor == 5
    fell_behind.note(plans.for_condition(PAIR, cal, lambda m: None), PAIR, _spoiled(), "run-a")
    p = planning.plan_run(PAIR, ceil)
    assert p.factor == 6 and p.wall_s == pytest.approx(60 * 6 + planning.RUN_OVERHEAD_S)

"""A run the host spoiled is run again, after a pause that grows with each spoiled attempt;
a run flagged for its setting, or ok, is kept at once (tcpeval.backends.base)."""
from __future__ import annotations

import pytest

from tcpeval.backends.base import RETRY_PAUSES_S, attempt_until_ok, retry_pause_s


def _record(verdict: str, *checks: tuple[str, bool], factor: int = 1) -> dict:
    findings = [{"check": c, "transient": t, "text": f"{c}: ...", "measured": None, "limit": None}
                for c, t in checks]
    return {"fidelity": {"verdict": verdict, "reasons": [f["text"] for f in findings], "findings": findings},
            "flows": [{"summary": {"mean_throughput_bps": 1e9}}], "measured": {"cpu_stolen": 0.01},
            "mechanisms": {"dilation": {"factor": factor}}}


def _attempts(records: list[dict], attempts: int, pauses=RETRY_PAUSES_S):
    left, slept, said = list(records), [], []
    record = attempt_until_ok(lambda last: left.pop(0), attempts, pauses, said.append, slept.append)
    return record, slept, said, len(records) - len(left)


def test_an_attempt_spoiled_by_the_host_is_run_again_after_a_growing_pause_until_ok():
    host = _record("flagged", ("delay line", True))
    record, slept, said, ran = _attempts([host, host, host, _record("ok")], attempts=5)
    assert ran == 4 and record["fidelity"]["verdict"] == "ok"
    assert slept == [5.0, 15.0, 30.0]
    earlier = record["fidelity"]["earlier_attempts"]
    assert [e["then_paused_s"] for e in earlier] == slept
    assert earlier[0]["reasons"] == ["delay line: ..."] and earlier[0]["mean_throughput_bps"] == [1e9]
    assert said[0].startswith("attempt 1 flagged by the host") and said[0].endswith("again in 5 s")


def test_the_last_attempt_is_kept_flagged_and_not_followed_by_a_pause():
    host = _record("flagged", ("link", True))
    record, slept, _, ran = _attempts([host] * 3, attempts=3)
    assert ran == 3 and record["fidelity"]["verdict"] == "flagged"
    assert slept == [5.0, 15.0] and len(record["fidelity"]["earlier_attempts"]) == 2


@pytest.mark.parametrize("first", [_record("ok"), _record("flagged", ("delay line", True), ("drop rate", False))],
                         ids=["ok", "flagged-for-its-setting"])
def test_an_ok_run_or_one_its_setting_spoiled_is_kept_at_once(first):
    record, slept, said, ran = _attempts([first, _record("ok")], attempts=3)
    assert ran == 1 and record is first and slept == [] and said == []
    assert record["fidelity"]["earlier_attempts"] == []


def test_the_pause_after_many_attempts_stays_at_the_longest():
    assert [retry_pause_s(n) for n in range(1, 7)] == [5.0, 15.0, 30.0, 60.0, 60.0, 60.0]
    assert retry_pause_s(3, ()) == 0.0


def test_a_backend_refuses_a_negative_pause_or_no_attempt():
    from tcpeval.backends.base import BackendError
    from tcpeval.backends.emulated.runner import EmulatedBackend
    with pytest.raises(BackendError, match="retry pauses must not be negative"):
        EmulatedBackend(retry_pauses_s=(5.0, -1.0))
    with pytest.raises(BackendError, match="attempts must be at least 1"):
        EmulatedBackend(attempts=0)


def test_each_spoiled_attempt_is_handed_over_before_the_next_and_its_factor_recorded():
    # the emulated backend's hook re-plans the next attempt (slower where the host fell
    # behind its frame rate); the attempts' factors stay in the trace beside their means
    records = [_record("flagged", ("delay line", True), factor=4), _record("flagged", ("link", True), factor=5),
               _record("ok", factor=6)]
    left, seen = list(records), []
    record = attempt_until_ok(lambda last: left.pop(0), 3, (0.0,), before_retry=seen.append, sleep=lambda s: None)
    assert record is records[2] and seen == records[:2]
    assert [e["dilation"] for e in record["fidelity"]["earlier_attempts"]] == [4, 5]
    # the last attempt, kept flagged, is not handed over: no attempt follows it
    left, seen = [records[0]] * 2, []
    attempt_until_ok(lambda last: left.pop(0), 2, (0.0,), before_retry=seen.append, sleep=lambda s: None)
    assert seen == [records[0]]


def test_an_attempt_ended_where_the_host_doomed_it_is_run_again_whatever_else_its_verdict_says():
    # cut short, the attempt may also fail a check its full length would have passed (a
    # drop rate from a few seconds' packets): the host's fault decided it, so it runs again
    doomed = _record("flagged", ("switch input", True), ("drop rate", False))
    doomed["measured"]["ended_doomed"] = {"at_s": 35.0, "why": "switch input: ...", "check": "switch input"}
    record, slept, said, ran = _attempts([doomed, _record("ok")], attempts=3)
    assert ran == 2 and record["fidelity"]["verdict"] == "ok" and slept == [5.0]
    assert record["fidelity"]["earlier_attempts"][0]["ended_doomed"]["at_s"] == 35.0
    # without the mark, a finding of its setting keeps the attempt at once
    del doomed["measured"]["ended_doomed"]
    record, _, _, ran = _attempts([doomed, _record("ok")], attempts=3)
    assert ran == 1 and record is doomed


def test_only_the_attempt_no_other_can_follow_is_told_it_is_the_last():
    # the emulated backend ends a doomed attempt early only when another may follow it
    host, told = _record("flagged", ("link", True)), []

    def execute(last: bool) -> dict:
        told.append(last)
        return host
    attempt_until_ok(execute, 3, (0.0,), sleep=lambda s: None)
    assert told == [False, False, True]
    told.clear()
    attempt_until_ok(execute, 1, (0.0,), sleep=lambda s: None)
    assert told == [True]

"""Queueing the model does not have is seen: delay added on the ACK path once the idle RTT
has been measured -- what a host's backlog does to a flow, invisible to the idle probes --
flags the run for the RTT its senders saw under load, with the figure; the same run
without it is not (root only)."""
from __future__ import annotations

import pytest

from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

EXTRA_MS = 3.0   # more than the path allows above its setting: 2 ms RTT + a BDP of buffer


def _loaded_rtt_reasons(record: dict) -> list[str]:
    return [r for r in record["fidelity"]["reasons"] if r.startswith("loaded RTT:")]


def test_delay_outside_the_bottleneck_is_flagged_and_a_clean_run_is_not(rate, tmp_path, monkeypatch):
    from tcpeval.backends import get_backend
    from tcpeval.backends.emulated import delay

    # one attempt each: a loaded-RTT flag is retried as host trouble, and every retry of
    # the queued run would be flagged the same way
    backend = get_backend("emulated", progress=False, lock_timeout_s=900, attempts=1)
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="native", rate_bps=rate, seed=1, dilation=1)
    clean = backend.run(cond, tmp_path / "clean")
    assert not _loaded_rtt_reasons(clean), clean["fidelity"]["reasons"]
    loaded = clean["measured"]["loaded_rtt"]
    flow = loaded["flows"]["1:cubic"]
    assert flow and 2.0 <= flow["quantile_ms"] <= loaded["bound_ms"], loaded

    set_rtt = delay.set_rtt

    def set_rtt_then_hold_acks(delayer, prober, rtt_ms, tol_ms, log):
        setting = set_rtt(delayer, prober, rtt_ms, tol_ms, log)
        delayer.start(int((setting.added_ms + EXTRA_MS) * 1e6))   # after the idle probes
        return setting

    monkeypatch.setattr(delay, "set_rtt", set_rtt_then_hold_acks)
    held = backend.run(cond, tmp_path / "held")
    reasons = _loaded_rtt_reasons(held)
    assert held["fidelity"]["verdict"] == "flagged" and reasons, held["fidelity"]["reasons"]
    seen = held["measured"]["loaded_rtt"]["flows"]["1:cubic"]["quantile_ms"]
    assert seen >= 2.0 + EXTRA_MS
    assert f"{seen:.3g} ms" in reasons[0] and "outside the model" in reasons[0]
    # the idle probes, measured before, saw the setting: only the loaded RTT tells
    assert not [r for r in held["fidelity"]["reasons"] if r.startswith("rtt:")]

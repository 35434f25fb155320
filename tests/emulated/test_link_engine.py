"""The bottleneck's two mechanisms on real runs (root only): the link engine (scheduled
departures, tevdelay.c) carries exactly its rate, never queues more than its buffer,
drops at the tail and says how late its departures left; TBF stays as the fallback.
Each trace names the mechanism that shaped it."""
from __future__ import annotations

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_the_link_engine_carries_its_rate_and_queues_at_most_its_buffer(backend, rate_on, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPEVAL_LINK", "tevlink")
    rate = rate_on("tevlink", 2.0)
    # a buffer of one BDP or more: Reno's halved window still fills the link (with half a
    # BDP it idles part of the time: 0.94 of the rate at 0.5 Gbps, 2 ms)
    buffer = max(64 * 1024, int(1.1 * rate * 0.002 / 8))
    cond = adhoc_condition(["reno"], 2.0, 0.0, 4.0, impl="native", rate_bps=rate, buffer_bytes=buffer, seed=5)
    rec = backend.run(cond, tmp_path)
    assert rec["mechanisms"]["rate"] == "tevlink"
    assert rec["mechanisms"]["delay_detail"]["link_engine"] is True
    link = rec["measured"]["delay_line"]["link"]
    # the link's own clock: the second half at the rate, to the byte count
    steady = rec["measured"]["link_steady"]
    assert steady["source"] == "link engine"
    assert 0.97 * rate <= steady["bps"] <= 1.005 * rate, (steady, rate)
    # byte-exact tail drop: never more than the buffer waiting, and p = 0 still loses
    assert 0 < link["max_backlog_bytes"] <= buffer
    assert link["tail_drops"] > 0 and rec["flows"][0]["summary"]["retransmits"] > 0
    assert link["ring_drops"] == 0 and link["send_errors"] == 0
    assert link["sent"] == link["admitted"]  # every frame the link took, it delivered
    p50, p99, p999 = link["late_us_p50"], link["late_us_p99"], link["late_us_p999"]
    assert p50 <= p99 <= p999 and p50 <= 50, link
    assert not [r for r in rec["fidelity"]["reasons"] if r.startswith("link:")], rec["fidelity"]["reasons"]
    assert nothing_left(run_id_of(tmp_path))


def test_tbf_stays_as_the_fallback_and_is_named(backend, rate, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPEVAL_LINK", "tbf")
    # dilation 1: `rate` is a share of the better mechanism's faithful rate, and TBF's may
    # lie below it (0.4-0.5 Gbps in one calibration: native CUBIC would need x2, which it
    # cannot have); this test is about the mechanism, not its fidelity
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 3.0, impl="native", rate_bps=rate, seed=5, dilation=1)
    rec = backend.run(cond, tmp_path)
    assert rec["mechanisms"]["rate"] == "tbf"
    assert rec["mechanisms"]["rate_detail"]["peakrate_bps"] > rate
    assert "link" not in (rec["measured"]["delay_line"] or {})
    assert rec["measured"]["link_steady"]["source"] == "qdisc"
    assert rec["measured"]["link_steady"]["bps"] <= 1.02 * rate


def test_an_unknown_link_mechanism_is_refused_by_name(backend, rate, tmp_path, monkeypatch):
    from tcpeval.backends.base import BackendError
    monkeypatch.setenv("TCPEVAL_LINK", "netfpga")
    cond = adhoc_condition(["cubic"], 2.0, 0.0, 1.0, impl="native", rate_bps=rate, seed=5)
    with pytest.raises(BackendError, match="TCPEVAL_LINK='netfpga': expected one of tevlink, tbf"):
        backend.run(cond, tmp_path)
    assert not (tmp_path / "trace.json").exists()

"""A lossless path keeps its link busy: which runs promise it (fidelity.busy_link_from_s),
the verdict's check of the link's own counters over the second half
(fidelity.link_busy_check), and what a flagged run does next (fell_behind: an `auto`
run's next attempt is slower)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tcpeval.backends import fidelity
from tcpeval.spec import adhoc_condition

RATE = 1.09e9   # Reno at 0.2 ms, 9.85 Gbit/s at x9: the physical link
RTT = 1.8       # ms, physical
BDP = RATE * RTT / 8000


def _busy_from(cond, **over) -> float | None:
    args = {"drop": cond.drop, "background_loss": cond.background_loss, "rate_bps": RATE, "rtt_ms": RTT,
            "buffer_bytes": BDP, "flows": cond.flows, "ecn_threshold_bytes": None, **over}
    return fidelity.busy_link_from_s(**args)


def _steady(share: float, from_s: float = 135.0) -> dict:
    """measured.link_steady of a 270-s physical run whose link sent ``share`` of its rate."""
    span = 135.0
    return {"bps": share * RATE, "bytes": int(share * RATE * span / 8), "frames": None,
            "from_s": from_s, "to_s": from_s + span, "source": "link engine"}


def test_each_of_the_six_at_p0_with_a_bdp_of_buffer_promises_a_busy_link_from_the_last_start():
    for variant in fidelity.BUSY_VARIANTS:
        assert _busy_from(adhoc_condition([variant], 0.2, 0.0, 30.0)) == 0.0
    pair = adhoc_condition(["reno", "cubic"], 0.2, 0.0, 30.0)
    pair = replace(pair, flows=(pair.flows[0], replace(pair.flows[1], start_s=12.0)))
    assert _busy_from(pair) == 12.0
    assert _busy_from(adhoc_condition(["reno"], 0.2, 0.0, 30.0), buffer_bytes=2 * BDP) == 0.0


def test_no_busy_link_is_promised_where_loss_marks_a_short_buffer_or_the_flows_leave_it_idle():
    reno = adhoc_condition(["reno"], 0.2, 0.0, 30.0)
    assert _busy_from(adhoc_condition(["reno"], 0.2, 1e-4, 30.0)) is None       # random loss
    assert _busy_from(reno, background_loss=1e-5) is None
    assert _busy_from(reno, buffer_bytes=0.5 * BDP) is None                        # Reno halves below a BDP
    assert _busy_from(reno, ecn_threshold_bytes=int(BDP / 6)) is None               # marks keep the queue short
    assert _busy_from(reno, rate_bps=None) is None                                  # unshaped
    for variant in ("bbr", "vegas"):                                                # they drain the queue
        assert _busy_from(adhoc_condition([variant], 0.2, 0.0, 30.0)) is None
    stops = replace(reno, flows=(replace(reno.flows[0], stop_s=20.0),))
    assert _busy_from(stops) is None
    paced = replace(reno, flows=(replace(reno.flows[0], rate_bps=1e8),))
    assert _busy_from(paced) is None
    # a sock_ops program may size the senders' buffers below the BDP (config/sockops: a
    # 20 Mbit/s sizing left a 0.5 Gbps link 11 % busy, flagged in all five attempts)
    assert _busy_from(reno, sock_ops=True) is None


def test_a_link_idle_more_than_the_limit_flags_the_run_as_the_host_falling_behind():
    finding = fidelity.link_busy_check(RATE, 0.0, _steady(0.969))
    assert finding is not None and finding.check == "link busy"
    assert finding.measured == pytest.approx(0.969) and finding.limit == fidelity.LINK_BUSY_MIN
    assert finding.transient and finding.behind
    assert str(finding).startswith("link busy: the link sent 96.9% of its 1.09 Gbps over the run's second half "
                                   "(its link engine counters; < 98%)")
    assert fidelity.link_busy_check(RATE, 0.0, _steady(0.985)) is None
    # not judged: no promise, no counters, or a half that began before the last flow started
    assert fidelity.link_busy_check(RATE, None, _steady(0.5)) is None
    assert fidelity.link_busy_check(RATE, 0.0, None) is None
    assert fidelity.link_busy_check(RATE, 140.0, _steady(0.5)) is None


def test_the_verdict_carries_the_check_its_tolerance_and_an_auto_runs_next_attempt_is_slower():
    setting = fidelity.Setting(drop=0.0, rtt_ms=RTT, rate_bps=None, buffer_bytes=BDP, dilation=9,
                               busy_from_s=0.0)
    path = fidelity.PathMeasurements(seen=10**6, dropped=0, rtt_ms=RTT)
    v = fidelity.verdict(setting, path, fidelity.HostMeasurements(link_steady=_steady(0.5)))
    assert not any(f["check"] == "link busy" for f in v["findings"])  # no rate: nothing to judge against
    v = fidelity.verdict(replace(setting, rate_bps=RATE), path,
                         fidelity.HostMeasurements(capacity_bps=2e9, link_steady=_steady(0.955)))
    busy = [f for f in v["findings"] if f["check"] == "link busy"]
    assert v["verdict"] == "flagged" and len(busy) == 1 and busy[0]["fell_behind"] is True
    assert fidelity.fell_behind(v["findings"]) and fidelity.fell_behind_in_time(v["findings"])
    assert v["tolerances"]["link_busy"]["share_of_rate_min"] == 0.98
    ok = fidelity.verdict(replace(setting, rate_bps=RATE), path,
                          fidelity.HostMeasurements(capacity_bps=2e9, link_steady=_steady(0.991)))
    assert not any(f["check"] == "link busy" for f in ok["findings"])

"""Short real runs: a valid trace, the fidelity verdict, drop rate and RTT honoured."""
from __future__ import annotations

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval import trace
from tcpeval.backends import fidelity
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

# The rate is the `rate` fixture (conftest.py): at most what the host carries faithfully.
# Runs whose verdict matters last 6 s: the verdict judges the ACK clock over the second
# half, and at 0.2 Gbps the first 2-3 s are still start-up (receive window opening).


@pytest.mark.parametrize("variant", ["reno", "cubic"])
def test_short_run_writes_ok_trace(backend, tmp_path, variant, rate):
    cond = adhoc_condition([variant], 6.2, 0.0, 6.0, impl="native", rate_bps=rate, seed=3)
    record = backend.run(cond, tmp_path)
    on_disk = trace.read_trace(tmp_path)  # validates against the schema
    assert on_disk["condition"] == cond.to_dict()
    assert_ok_unless_the_host_fell_behind(record)
    flow = on_disk["flows"][0]
    assert flow["cc"]["requested"] == flow["cc"]["verified"] == variant
    assert len(flow["samples"]["t_s"]) >= 55  # 0.1 s intervals over 6 s
    assert flow["summary"]["mean_throughput_bps"] > 0.5 * rate
    assert on_disk["mechanisms"]["drop"] == "bpf-tc"
    assert on_disk["mechanisms"]["delay"] in ("netem", "tevdelay-afpacket")
    for name in ("iperf3-flow0.json", "run.log"):
        assert (tmp_path / name).exists()
    assert nothing_left(run_id_of(tmp_path))


def test_drop_rate_matches_p(backend, tmp_path, rate):
    p = 1e-3
    cond = adhoc_condition(["cubic"], 2.0, p, 3.0, impl="native", rate_bps=rate, seed=11)
    record = backend.run(cond, tmp_path)
    drop = record["measured"]["drop"]
    assert drop["seen"] * p >= fidelity.MIN_EXPECTED_DROPS  # the check is actually performed
    lo, hi = drop["ci95"]
    assert lo <= p <= hi, drop
    assert drop["check"] == "ok"


def test_rtt_setting_honoured(backend, tmp_path, rate):
    cond = adhoc_condition(["cubic"], 12.2, 0.0, 2.0, impl="native", rate_bps=rate, seed=5)
    record = backend.run(cond, tmp_path)
    tol = fidelity.rtt_tolerance_ms(12.2)
    assert abs(record["measured"]["rtt_ms"] - 12.2) <= tol
    # what TCP itself saw: its minimum smoothed RTT cannot undercut the setting
    min_rtt_ms = record["flows"][0]["summary"]["min_rtt_us"] / 1000
    assert min_rtt_ms >= 12.2 - tol, min_rtt_ms
    assert record["measured"]["base_rtt_ms"] < 12.2


def test_two_flows_with_offset(backend, tmp_path, rate):
    cond = adhoc_condition(["reno", "cubic"], 2.0, 0.0, 3.0, starts=[0.0, 1.0], impl="native",
                           rate_bps=rate, seed=9)
    record = backend.run(cond, tmp_path)
    flows = record["flows"]
    assert [f["cc"]["verified"] for f in flows] == ["reno", "cubic"]
    assert flows[1]["start_s"] == 1.0
    # the late flow runs for duration - offset
    assert flows[1]["samples"]["t_s"][-1] == pytest.approx(2.0, abs=0.15)
    assert record["mechanisms"]["topology"]["bridged"] is True
    assert nothing_left(run_id_of(tmp_path))


def test_background_loss_drops_on_each_receivers_link_at_its_rate_and_is_logged(backend, tmp_path, rate):
    # the paper's ring as the two-flow criteria model it, here at 1e-3 to see enough drops
    p = 1e-3
    cond = adhoc_condition(["reno", "cubic"], 2.0, 0.0, 3.0, impl="native", rate_bps=rate, seed=9,
                           background_loss=p)
    record = backend.run(cond, tmp_path)
    assert record["mechanisms"]["background_loss"]["probability"] == p
    counters = record["measured"]["background_drop"]
    assert len(counters) == 2 and all(c["seen"] > 0 for c in counters)   # one dropper per receiver
    seen, dropped = sum(c["seen"] for c in counters), sum(c["dropped"] for c in counters)
    assert abs(dropped - seen * p) <= 5 * (seen * p) ** 0.5, (dropped, seen)
    assert record["measured"]["drop"]["dropped"] == 0                      # the drop module's own: none
    log = (tmp_path / "run.log").read_text()
    assert "drop 0 background loss 0.001 rate" in log and f"background loss: {dropped} of {seen} packets" in log
    assert nothing_left(run_id_of(tmp_path))


def test_refuses_to_overwrite(backend, tmp_path, rate):
    from tcpeval.backends.base import BackendError
    (tmp_path / "trace.json").write_text("{}")
    cond = adhoc_condition(["reno"], 1.0, 0.0, 1.0, impl="native", rate_bps=rate)
    with pytest.raises(BackendError, match="refusing to overwrite"):
        backend.run(cond, tmp_path)
    assert (tmp_path / "trace.json").read_text() == "{}"


@pytest.mark.parametrize("link", ["tevlink", "tbf"])
def test_bottleneck_delivers_its_configured_rate(backend_once, tmp_path, link, monkeypatch):
    """Each link mechanism must carry the rate it is given -- TBF with the one-frame peak
    bucket that splits TSO frames (a rate above ~0.55 Gbps once stalled on the qdisc
    watchdog every few frames), the link engine on its own clock. The rate is what
    calibration found the mechanism to carry faithfully at 2 ms (where native CUBIC at
    p = 0 filled the link; with a BDP buffer it does so within a second). The better of
    two runs counts: a capped link fails both, one noisy run of a shared VM (seen: 0.62
    and 1.11 Gbps for the same 1.2 Gbps setting) does not. One attempt each: at the whole
    envelope rate a run is often flagged for late frames (five attempts of five, twice, in a
    make test run), and the rate is judged here, not the verdict."""
    from tcpeval.backends.emulated import calibrate
    backend = backend_once
    monkeypatch.setenv("TCPEVAL_LINK", link)
    cal = backend.calibrate(force=False)
    envelope = calibrate.envelope_rate(cal, link, 1, 2.0)
    # on calibration's own grid: 0.1 Gbps, finer below its floor (0.1 made 0.07 a rate of 0)
    rate = calibrate.on_grid(envelope, calibrate.search_grid(envelope)[0])
    best = 0.0
    for k in range(2):
        cond = adhoc_condition(["cubic"], 2.0, 0.0, 4.0, impl="native", rate_bps=rate, seed=5 + k)
        record = backend.run(cond, tmp_path / f"run{k}")
        assert record["mechanisms"]["rate"] == link
        if link == "tbf":
            assert record["mechanisms"]["rate_detail"]["peakrate_bps"] > rate
        best = max(best, record["measured"]["steady_throughput_bps"])
        if best > 0.85 * rate:
            break
    assert best > 0.85 * rate, (best, rate)


def test_without_random_loss_the_bottleneck_queue_fills_and_overflows(backend, tmp_path, rate):
    """The switch forwards a clone of each sender frame: a frame that kept its socket
    across the redirect counted against TCP small queues, which held the whole bottleneck
    queue to ~1 ms of data, so a half-BDP buffer never overflowed and p = 0 meant no loss."""
    bdp = int(rate * 0.0062 / 8)
    cond = adhoc_condition(["reno"], 6.2, 0.0, 5.0, impl="native", rate_bps=rate, buffer_bytes=bdp // 2, seed=5)
    record = backend.run(cond, tmp_path)
    if record["mechanisms"]["rate"] == "tevlink":
        assert record["measured"]["delay_line"]["link"]["tail_drops"] > 0
    else:
        queue = record["measured"]["bottleneck_qdisc"]
        assert queue["after"]["drops"] - queue["before"]["drops"] > 0, queue
    assert record["flows"][0]["summary"]["retransmits"] > 0
    assert "clone" in record["mechanisms"]["switch"]["mechanism"]
    assert nothing_left(run_id_of(tmp_path))

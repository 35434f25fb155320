"""The receivers' window clamp (topology.receive_window): a multiple of the path's BDP +
buffer, and on a lossy path no more than a window no flow holds under that loss."""
from __future__ import annotations

import math

import pytest
from emulated_helpers import assert_ok_unless_the_host_fell_behind

from tcpeval import trace
from tcpeval.backends import fidelity
from tcpeval.backends.emulated import topology
from tcpeval.condition import MSS_BYTES
from tcpeval.spec import adhoc_condition

PAPER_LINK = 9.85e9


def _bdp(rtt_ms: float) -> int:
    return int(PAPER_LINK * rtt_ms / 1e3 / 8)


def test_a_loss_free_path_gets_twice_bdp_plus_buffer():
    rwin = topology.receive_window(PAPER_LINK, 24.2, _bdp(24.2))
    assert rwin["bound_by"] == "path"
    assert rwin["window_clamp_bytes"] == 2 * (_bdp(24.2) + _bdp(24.2))  # ~119 MB
    assert rwin["buffer_bytes"] == 4 * rwin["window_clamp_bytes"]


def test_a_lossy_long_path_is_clamped_at_five_losses_per_window():
    # 24.2 ms at 1e-2: the path's clamp is 119 MB, the burst one skipped hook lets out;
    # 500 segments (730 kB) is a window that loses none in a round trip with p = e^-5
    rwin = topology.receive_window(PAPER_LINK, 24.2, _bdp(24.2), 1e-2)
    assert rwin["bound_by"] == "loss"
    assert rwin["window_clamp_bytes"] == 500 * MSS_BYTES
    assert rwin["buffer_bytes"] == 4 * rwin["window_clamp_bytes"]
    assert math.exp(-topology.LOSS_BOUND_LOSSES_PER_WINDOW) < 0.01


def test_the_loss_bound_leaves_a_path_that_needs_less_alone():
    # 0.2 ms at 1e-3: 5,000 segments (7.3 MB) is more than the 1-MiB clamp of the path
    rwin = topology.receive_window(PAPER_LINK, 0.2, _bdp(0.2), 1e-3)
    assert rwin["bound_by"] == "path" and rwin["window_clamp_bytes"] == topology.RECEIVE_WINDOW_MIN
    # and no loss bound without loss; a tiny loss rate bounds nothing either
    assert topology.loss_bound_bytes(0.0) is None
    assert topology.receive_window(PAPER_LINK, 6.2, _bdp(6.2), 1e-9)["bound_by"] == "path"


def test_the_loss_bound_has_a_floor():
    assert topology.loss_bound_bytes(0.5) == topology.LOSS_BOUND_MIN


def test_a_window_twice_a_loss_bound_clamp_is_flagged_and_a_slow_start_overshoot_is_not():
    clamp = 500 * MSS_BYTES
    assert fidelity.receive_window_check(40 * MSS_BYTES, clamp) is None
    # slow start grows the window to twice the flight: 516 segments (a Scalable slow start
    # at 6.2 ms, 1e-2) needs a flight of 258, not one at the clamp
    assert fidelity.receive_window_check(516 * MSS_BYTES, clamp) is None
    assert fidelity.receive_window_check(999 * MSS_BYTES, clamp) is None
    reason = fidelity.receive_window_check(2 * clamp, clamp)
    assert reason.startswith("receive window:") and "0.73 MB" in reason and "1.46 MB" in reason
    assert reason.check == "receive window" and not reason.transient and reason.limit == 2 * clamp
    # a path-bound clamp is the path's business (window_check), not this check's
    assert fidelity.receive_window_check(clamp, None) is None


@pytest.mark.root
def test_a_lossy_run_records_its_loss_bound_clamp_and_passes_its_verdict(backend, rate, tmp_path):
    # 24.2 ms at 1e-2: the path's clamp would be 2 x (BDP + buffer), megabytes at the test
    # rate; the loss bound is 500 segments, of which Reno holds about a dozen
    cond = adhoc_condition(["reno"], 24.2, 1e-2, 6.0, rate_bps=rate, seed=3)
    backend.run(cond, tmp_path)
    rec = trace.read_trace(tmp_path)
    rwin = rec["mechanisms"]["receive_window"]
    # 5 / p segments of the loss both drop stages apply, 1 - (1 - p)(1 - 0): a hair above p
    # in floating point, so 499 whole segments here
    assert rwin["bound_by"] == "loss" and abs(rwin["window_clamp_bytes"] - 500 * MSS_BYTES) <= MSS_BYTES, rwin
    assert rwin["buffer_bytes"] == 4 * rwin["window_clamp_bytes"]
    assert rec["fidelity"]["tolerances"]["receive_window"]["max_cwnd_over_clamp_where_loss_bound"] == 2.0
    assert_ok_unless_the_host_fell_behind(rec)


def test_the_verdict_judges_the_ports_window_against_a_loss_bound_clamp_only():
    setting = fidelity.Setting(drop=1e-2, rtt_ms=24.2, rate_bps=None)
    path = fidelity.PathMeasurements(seen=100_000, dropped=1_000, rtt_ms=24.2)
    clamp = 500 * MSS_BYTES
    at_clamp = fidelity.verdict(setting, path, flows=fidelity.FlowMeasurements(
        max_cwnd_bytes=2 * clamp, loss_bound_clamp_bytes=clamp))
    assert at_clamp["verdict"] == "flagged"
    assert [f["check"] for f in at_clamp["findings"]] == ["receive window"]
    for flows in (fidelity.FlowMeasurements(max_cwnd_bytes=20 * MSS_BYTES, loss_bound_clamp_bytes=clamp),
                  fidelity.FlowMeasurements(max_cwnd_bytes=2 * clamp)):
        assert fidelity.verdict(setting, path, flows=flows)["verdict"] == "ok"

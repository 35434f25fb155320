"""The receivers' window clamp (topology.receive_window): a multiple of the path's BDP +
buffer, and on a lossy path no more than a window no flow holds under that loss."""
from __future__ import annotations

import math

import pytest

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


def test_a_port_window_at_a_loss_bound_clamp_is_flagged_and_below_it_is_not():
    clamp = 500 * MSS_BYTES
    assert fidelity.receive_window_check(40 * MSS_BYTES, clamp) is None
    assert fidelity.receive_window_check(499 * MSS_BYTES, clamp) is None
    reason = fidelity.receive_window_check(clamp, clamp)
    assert reason.startswith("receive window:") and "0.73 MB" in reason
    assert reason.check == "receive window" and not reason.transient
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
    assert rwin["bound_by"] == "loss" and rwin["window_clamp_bytes"] == 500 * MSS_BYTES, rwin
    assert rwin["buffer_bytes"] == 4 * rwin["window_clamp_bytes"]
    assert rec["fidelity"]["tolerances"]["receive_window"]["max_cwnd_over_clamp_where_loss_bound"] == 1.0
    assert rec["fidelity"]["verdict"] == "ok", rec["fidelity"]["reasons"]

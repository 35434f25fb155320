"""The ACK record of a run (segments per ACK, backlog merges) and the host reference the
benchmark measures beside the emulator."""
from __future__ import annotations

import pytest

from tcpeval.backends.emulated import host
from tcpeval.backends.emulated.counters import ack_record as _ack_record


def test_ack_record_gives_receiver_segments_per_ack_and_merges():
    before = {"s1": {"InSegs": 10, "OutSegs": 100, "TCPBacklogCoalesce": 0},
              "r1": {"InSegs": 100, "OutSegs": 10, "TCPBacklogCoalesce": 5}}
    after = {"s1": {"InSegs": 510, "OutSegs": 1100, "TCPBacklogCoalesce": 3},
             "r1": {"InSegs": 1100, "OutSegs": 510, "TCPBacklogCoalesce": 5}}
    rec = _ack_record(before, after, pairs=1)
    assert rec["endpoints"]["r1"] == {"InSegs": 1000, "OutSegs": 500, "TCPBacklogCoalesce": 0}
    assert rec["receiver_segments_per_ack"] == 2.0
    assert rec["backlog_coalesced"] == 3


def test_ack_record_sums_both_receivers_and_survives_no_acks():
    zero = {"InSegs": 0, "OutSegs": 0}
    rec = _ack_record({r: dict(zero) for r in ("s1", "r1", "s2", "r2")},
                      {"s1": zero, "s2": zero, "r1": {"InSegs": 300, "OutSegs": 100},
                       "r2": {"InSegs": 100, "OutSegs": 100}}, pairs=2)
    assert rec["receiver_segments_per_ack"] == 2.0
    idle = _ack_record({"s1": zero, "r1": zero}, {"s1": zero, "r1": zero}, pairs=1)
    assert idle["receiver_segments_per_ack"] is None


@pytest.mark.root
def test_host_reference_measures_both_yardsticks_and_leaves_nothing():
    from tcpeval.backends.emulated import reference

    before = set(host.list_netns())
    ref = reference.measure(duration_s=1.0)
    assert ref["direct_bps"] > 1e8 and ref["forwarding_bps"] > 1e8
    assert set(host.list_netns()) == before


def test_in_order_segments_per_ack_leave_out_what_a_loss_makes_a_receiver_ack_at_once():
    zero = {"InSegs": 0, "OutSegs": 0, "TCPOFOQueue": 0, "RetransSegs": 0}
    after = {"s1": {**zero, "RetransSegs": 100},
             "r1": {"InSegs": 10_000, "OutSegs": 5_400, "TCPOFOQueue": 700, "RetransSegs": 0}}
    rec = _ack_record({"s1": dict(zero), "r1": dict(zero)}, after, pairs=1)
    assert rec["receiver_segments_per_ack"] == pytest.approx(10_000 / 5_400)
    # 800 segments (700 out of order, 100 retransmissions) each got their own ACK
    assert rec["receiver_segments_per_ack_in_order"] == pytest.approx(9_200 / 4_600)


def test_steady_state_ack_clock_counts_only_the_second_half():
    zero = {"InSegs": 0, "OutSegs": 0, "TCPOFOQueue": 0, "RetransSegs": 0}
    # first half: 3 segments per ACK while the window opens; second half: 2
    mid = {"s1": dict(zero), "r1": {**zero, "InSegs": 3_000, "OutSegs": 1_000}}
    end = {"s1": dict(zero), "r1": {**zero, "InSegs": 7_000, "OutSegs": 3_000}}
    rec = _ack_record({"s1": dict(zero), "r1": dict(zero)}, end, pairs=1, midway=mid)
    assert rec["receiver_segments_per_ack_in_order"] == pytest.approx(7_000 / 3_000)
    assert rec["receiver_segments_per_ack_steady"] == pytest.approx(2.0)
    assert rec["receiver_acks_steady"] == 2_000
    without = _ack_record({"s1": dict(zero), "r1": dict(zero)}, end, pairs=1)
    assert without["receiver_segments_per_ack_steady"] is None

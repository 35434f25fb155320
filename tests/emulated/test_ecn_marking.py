"""ECN at the link engine (tevdelay.c, --ecn-threshold-bytes K): an ECN-capable frame that
finds K bytes or more queued leaves with CE and a valid header checksum; below K, or a
frame that is not ECN-capable, leaves as it came."""
from __future__ import annotations

import subprocess

import pytest
from test_segment_mark import frame, ip_checksum

NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3
K = 30_000


def decide(art, backlog: int, frames: list[bytes], threshold: int = K) -> list[bytes]:
    out = subprocess.run([str(art.tevdelay), "ecntest", str(threshold), str(backlog), *(f.hex() for f in frames)],
                         capture_output=True, text=True, check=True).stdout.split()
    return [bytes.fromhex(x) for x in out]


@pytest.mark.parametrize("ect", [ECT0, ECT1])
def test_marks_start_at_the_threshold_not_before(art, ect):
    tos = 0x20 | ect  # a DSCP beside the ECN field, which must survive
    sent = frame(tos, 7)
    below, at, above = (decide(art, b, [sent])[0] for b in (K - 1, K, 10 * K))
    assert below == sent
    for marked in (at, above):
        assert marked[15] == 0x20 | CE
        assert ip_checksum(marked[14:34]) == 0  # the header still sums to zero
        assert marked[:15] + marked[16:24] + marked[26:] == sent[:15] + sent[16:24] + sent[26:]


def test_a_frame_that_is_not_ecn_capable_is_left_to_the_tail_drop(art):
    sent = frame(0x20 | NOT_ECT, 9)
    assert decide(art, 10 * K, [sent]) == [sent]


def test_a_frame_already_ce_stays_as_it_is(art):
    sent = frame(CE, 11)
    assert decide(art, 10 * K, [sent]) == [sent]


def test_a_threshold_of_zero_marks_nothing(art):
    sent = frame(ECT0, 13)
    assert decide(art, 10 * K, [sent], threshold=0) == [sent]


@pytest.mark.root
def test_a_run_with_ecn_marks_at_k_and_the_flow_backs_off_before_the_buffer_fills(backend, tmp_path, rate_on):
    from dataclasses import replace

    from emulated_helpers import nothing_left, run_id_of

    from tcpeval import trace
    from tcpeval.spec import adhoc_condition

    rate = rate_on("tevlink", 10.0)
    bdp = int(rate * 0.010 / 8)
    # Reno's window at most doubles in the round trip before a mark's echo comes back, and a
    # mark comes at the latest when the window fills the path and K: a buffer of 2 x (BDP + K)
    # takes any burst of one window. (With 250 kB, at 0.5 Gbit/s, a window of 150-250 kB
    # sent as one burst overflowed it once in CI: 37 tail drops.)
    buffer_bytes = 2 * (bdp + K)
    cond = replace(adhoc_condition(["reno"], 10.0, 0.0, 6.0, impl="native", rate_bps=rate,
                                   buffer_bytes=buffer_bytes, seed=3, dilation=1),
                   ecn_threshold_bytes=K)
    record = backend.run(cond, tmp_path)
    on_disk = trace.read_trace(tmp_path)
    assert on_disk["condition"]["ecn_threshold_bytes"] == K
    assert on_disk["mechanisms"]["rate_detail"]["ecn_threshold_bytes"] == K
    ecn = on_disk["measured"]["ecn"]
    assert ecn["threshold_bytes"] == K and ecn["ce_marked"] > 0
    # marks start at K, not before: every marked frame found >= K queued, every unmarked one less
    assert ecn["min_marked_backlog_bytes"] >= K > ecn["max_unmarked_ect_backlog_bytes"]
    assert ecn["not_ect_over_threshold"] == 0  # the flow's data is ECN-capable: both ends asked for ECN
    # Reno reacts to the echoed marks (RFC 3168): no loss, and a window that never grew to
    # the buffer, where without ECN it would reach BDP + buffer before its first loss
    link = on_disk["measured"]["delay_line"]["link"]
    summary = on_disk["flows"][0]["summary"]
    assert summary["retransmits"] == 0 and summary["max_cwnd_bytes"] < buffer_bytes, (summary, buffer_bytes)
    assert link["tail_drops"] == 0 and link["max_backlog_bytes"] < buffer_bytes
    assert record["environment"]["sysctls"]["endpoints"]["s1"]["net.ipv4.tcp_ecn"] in (1, "1")
    # what the flow did with ECN is recorded: negotiated, and answered as a loss would be
    assert on_disk["flows"][0]["cc"]["ecn"] == {"negotiated": True, "response": "as_loss"}
    assert nothing_left(run_id_of(tmp_path))


@pytest.mark.root
def test_ecn_on_an_algorithm_that_ignores_marks_is_allowed_and_recorded(backend_once, tmp_path, rate_on):
    """BBR negotiates ECN like any flow but sets its window from its model: the link marks
    it, nothing backs off at K, and the trace says which flow ignored the marks -- beside a
    UDP flow, whose frames are never ECN-capable and meet the tail drop alone. One attempt:
    the test reads what the trace records, not its verdict, and a flagged attempt would
    be run again after pauses of 5-60 s (in CI on 2026-12-01 the test took 142 s)."""
    from dataclasses import replace

    from emulated_helpers import nothing_left, run_id_of

    from tcpeval import trace
    from tcpeval.backends import algorithms
    from tcpeval.condition import Flow
    from tcpeval.spec import adhoc_condition

    if "bbr" not in algorithms.native_here():
        pytest.skip("this kernel has no native bbr")
    rate = rate_on("tevlink", 10.0)
    cond = adhoc_condition(["bbr"], 10.0, 0.0, 4.0, impl="native", rate_bps=rate, buffer_bytes=250_000,
                           seed=5, dilation=1)
    udp = Flow("udp", protocol="udp", rate_bps=rate / 20)
    cond = replace(cond, flows=(*cond.flows, udp), ecn_threshold_bytes=K)
    backend_once.run(cond, tmp_path)
    on_disk = trace.read_trace(tmp_path)
    bbr, cross = on_disk["flows"]
    assert bbr["cc"]["verified"] == "bbr"
    assert bbr["cc"]["ecn"] == {"negotiated": True, "response": "ignores"}
    assert cross["protocol"] == "udp" and cross["cc"]["ecn"] == {"negotiated": False, "response": None}
    ecn = on_disk["measured"]["ecn"]
    # BBR's frames are marked (it keeps more than K queued) and the UDP frames found the
    # queue above K without being ECN-capable
    assert ecn["ce_marked"] > 0 and ecn["not_ect_over_threshold"] > 0
    assert nothing_left(run_id_of(tmp_path))

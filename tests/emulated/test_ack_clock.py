"""The receivers' ACK clock is 3.16's -- one ACK per two segments -- and a receiver that
stretches its ACKs does not pass unnoticed (real runs, root only)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tcpeval import trace
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

RATE = 1e9  # fast enough that a lagging reader would show, well inside the host's reach
# A rate at which the receiver, fed 64 KB sender frames, builds a socket backlog: at 1 Gbps a
# fresh 2-vCPU VM's receiver kept up (2.17-2.28 segments per ACK, inside the check's bound);
# at 3 Gbps it stretched to 6.7-9.4, at 2 Gbps to 3.0-3.5.
STRETCH_RATE = 3e9


def _run(backend, tmp_path, rate_bps=RATE, **stack):
    # in real time (dilation 1) even where 1 Gbps is above the calibrated faithful rate:
    # the receivers' ACK clock is what is measured here, and a native flow cannot be dilated
    cond = adhoc_condition(["cubic"], 6.2, 0.0, 4.0, impl="native", rate_bps=rate_bps, seed=5,
                           dilation=1)
    if stack:
        cond = replace(cond, stack=stack)
    backend.run(cond, tmp_path)
    return trace.read_trace(tmp_path)


def test_receivers_ack_every_second_segment(backend, tmp_path):
    rec = _run(backend, tmp_path)
    acks = rec["measured"]["acks"]
    assert 1.9 <= acks["receiver_segments_per_ack_steady"] <= 2.3, acks
    assert acks["receiver_acks_steady"] >= 1000, acks
    assert not [r for r in rec["fidelity"]["reasons"] if r.startswith("ACK clock")]
    rwin = rec["mechanisms"]["receive_window"]
    assert rwin["buffer_bytes"] >= 4 * rwin["window_clamp_bytes"]


def test_an_ack_stretching_receiver_is_flagged(backend_once, tmp_path, monkeypatch):
    # 6.8's deferral of ACKs while a socket's backlog is processed (one ACK for the batch).
    # A backlog needs a busy receiver: with the senders' frames capped at 10 us of the
    # link (two segments at 1 Gbps) the sender's CPU cost caps this host near 0.6 Gbps and
    # the receiver keeps up, so here the senders send the kernel's own 64 KB frames, and
    # faster than RATE (STRETCH_RATE)
    from tcpeval.backends.emulated import topology
    monkeypatch.setattr(topology, "SENDER_GSO_SEGS", (44, 44))
    # TBF: 3 Gbps is above what the link engine carries here, and this is the receivers' test
    monkeypatch.setenv("TCPEVAL_LINK", "tbf")
    # one attempt: the stretched ACK clock is what this run is for, and the check calls it
    # transient (the backend would run it again, after pauses, to the same flag)
    rec = _run(backend_once, tmp_path, rate_bps=STRETCH_RATE, **{"net.ipv4.tcp_backlog_ack_defer": 1})
    assert rec["mechanisms"]["rate_detail"]["sender_frame_segments"] == 44
    assert rec["measured"]["acks"]["receiver_segments_per_ack_steady"] > 2.5
    assert rec["fidelity"]["verdict"] == "flagged"
    assert any(r.startswith("ACK clock: receivers sent") and "stretch ACKs" in r
               for r in rec["fidelity"]["reasons"]), rec["fidelity"]["reasons"]

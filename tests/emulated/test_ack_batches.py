"""The delay line releases ACKs in batches, as a NIC's interrupt moderation delivers them
(tevdelay.c): each batch the frames due within a quantum Q after its first, sent at the
middle of their due times, so no frame leaves more than Q/2 early or (the host willing)
late, a lone frame -- an idle RTT probe -- leaves on time, and the senders' CPU is
interrupted once per batch. The link engine's data rings hold its whole buffer
(root only)."""
from __future__ import annotations

import pytest
from emulated_helpers import assert_ok_unless_the_host_fell_behind

from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

RTT_MS = 20.0            # a delay of 100 quanta or more: Q = 250 us, the cap
BIG_BUFFER = 48 << 20    # more frames than the rings' fixed 32,768 hold


def test_acks_leave_in_batches_within_half_a_quantum_and_a_lone_probe_on_time(backend, rate_on, tmp_path, monkeypatch):
    from tcpeval.backends.emulated.delay import quantum_ns

    monkeypatch.setenv("TCPEVAL_LINK", "tevlink")
    rate = rate_on("tevlink", RTT_MS)
    cond = adhoc_condition(["reno"], RTT_MS, 0.0, 4.0, impl="native", rate_bps=rate, seed=3, dilation=1)
    rec = backend.run(cond, tmp_path)
    line = rec["measured"]["delay_line"]
    q = line["quantum_ns"]
    assert q == quantum_ns(line["delay_ns"]) == 250_000
    # never early beyond half a quantum (the loop's microsecond aside), so never before
    # the batch's window; the early bin stays empty
    assert line["error_histogram"]["early"] == 0
    assert line["max_early_ns"] <= q / 2 + 1_000, line["max_early_ns"]
    assert line["error_histogram"]["lt_half_q"] > 0.9 * line["forwarded"], line["error_histogram"]
    # several ACKs per batch (about rate / (2 segments) x Q of them): one interrupt each
    acks_per_s = rate / (8 * 1514 * 2)
    assert line["forwarded"] / line["batches"] >= min(3.0, 0.5 * acks_per_s * q / 1e9), line
    # a lone frame is not held for a batch: the idle probes see the setting, not Q/2 more
    assert abs(rec["measured"]["rtt_ms"] - RTT_MS) <= q / 4 / 1e6, rec["measured"]["rtt_probe"]
    # and the batches spoil nothing the verdict judges (ACK clock, RTT, host queueing); a
    # host that fell behind the frame rate is no release rule's fault (in one CI run a busy
    # vCPU held 106 of 50,368 ACKs 2-4.3 ms, in each of five attempts)
    assert_ok_unless_the_host_fell_behind(rec)


def test_the_link_engines_data_ring_holds_its_whole_buffer(backend_once, rate_on, tmp_path, monkeypatch):
    monkeypatch.setenv("TCPEVAL_LINK", "tevlink")
    rate = rate_on("tevlink", RTT_MS)
    # a buffer far beyond a BDP: the run is not meant to be faithful (the receivers' reader
    # falls behind a queue of 0.8 s), only to fill its rings
    cond = adhoc_condition(["reno"], RTT_MS, 0.0, 4.0, impl="native", rate_bps=rate,
                           buffer_bytes=BIG_BUFFER, seed=3, dilation=1)
    link = backend_once.run(cond, tmp_path)["measured"]["delay_line"]["link"]
    # the buffer in frames of 1,000 bytes, and spare (at 193.6 ms a one-BDP buffer at
    # 1.6 Gbps overflowed the 32,768 frames every ring had before)
    assert link["ring_frames"] >= BIG_BUFFER // 1000 + 16384
    assert link["max_backlog_bytes"] > 4 << 20 and link["ring_drops"] == 0, link

"""The senders do not pace, as 3.16 senders without the fq qdisc did not. iperf3 -C
switches the data socket's algorithm after connect(), and a connection that starts under
BBR (this host's default) keeps BBR's mark for TCP-internal pacing: the port would then
send 2 x cwnd per RTT in slow start, a round's ACKs would spread over half an RTT, and
3.16 HyStart's ACK-train test would end slow start at ~75 segments whatever the path."""
from __future__ import annotations

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

MSS = 1448


def test_port_senders_do_not_pace_so_hystart_leaves_slow_start_near_the_bdp(backend, tmp_path):
    rate, rtt_ms = 2e8, 24.2                       # BDP: 418 segments
    cond = adhoc_condition(["cubic"], rtt_ms, 0.0, 1.0, impl="port", rate_bps=rate, seed=11,
                           dilation=1)
    record = backend.run(cond, tmp_path)
    assert_ok_unless_the_host_fell_behind(record)
    traffic = record["mechanisms"]["traffic"]
    assert traffic["sender_default_cc"] == {"s1": "reno"}
    assert traffic["pacing"].startswith("none")
    # unpaced, a round's ACKs arrive as one train: HyStart waits for the delay increase
    # of a queue, near the BDP (the host harness replaying this path: 520 segments) and
    # within 0.3 s. Paced (seen with BBR as the default): it left at 75 segments, and
    # CUBIC's 5 %/RTT start-up had 119 at 0.3 s and carried 0.11 Gbps in the second.
    samples = record["flows"][0]["samples"]
    early = [c / MSS for t, c in zip(samples["t_s"], samples["cwnd_bytes"]) if t <= 0.3 + 1e-9]
    assert max(early) > 300, early
    assert record["flows"][0]["summary"]["mean_throughput_bps"] > 0.75 * rate
    assert nothing_left(run_id_of(tmp_path))

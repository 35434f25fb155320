"""The Mathis model against hand-computed values, and the run lengths it sets."""
import math

import pytest

from tcpeval import mathis


def test_model_rate_by_hand():
    # 1460 B * 8 / 6.2 ms * sqrt(3/4) / sqrt(1e-4) = 1,883,871 b/s * 0.8660 * 100
    assert mathis.MSS_BYTES == 1460  # the paper's hosts ran without timestamps
    assert mathis.throughput_bps(6.2, 1e-4) == pytest.approx(163.15e6, rel=1e-3)
    # without delayed ACKs (b = 1): C = sqrt(3/2)
    assert mathis.throughput_bps(6.2, 1e-4, packets_per_ack=1) == pytest.approx(230.7e6, rel=1e-3)
    assert mathis.throughput_bps(24.2, 1e-2) == pytest.approx(4.179e6, rel=1e-3)
    assert mathis.throughput_bps(1.0, 0) == math.inf
    with pytest.raises(ValueError, match="rtt_ms"):
        mathis.throughput_bps(0, 1e-3)


def test_loss_events_follow_the_model_below_the_link_and_the_link_above_it():
    # below the link: p * B / (8 MSS) = sqrt(p) * C / RTT
    assert mathis.loss_events_per_s(24.2, 1e-5, 9.5e9) == pytest.approx(
        math.sqrt(1e-5) * math.sqrt(0.75) / 0.0242, rel=1e-9)
    # 0.2 ms, 1e-5: the model (15.9 Gbps) is above the paper's link, which carries one
    # 1514-byte frame per 1460-byte segment: p times its packets per second
    assert mathis.loss_events_per_s(0.2, 1e-5, 9.85e9) == pytest.approx(1e-5 * 9.85e9 / (8 * 1514))


@pytest.mark.parametrize("rtt, p", [(24.2, 1e-5), (6.2, 1e-4), (0.2, 1e-2), (12.2, 1e-3)])
def test_duration_gives_at_least_the_asked_loss_events(rtt, p):
    d = mathis.duration_for_loss_events(100, rtt, p, 9.5e9, min_s=20)
    assert d >= 20 and d == int(d)
    assert d * mathis.loss_events_per_s(rtt, p, 9.5e9) >= 100
    assert (d - 1) * mathis.loss_events_per_s(rtt, p, 9.5e9) < 100 or d == 20


def test_duration_at_p_zero_is_refused():
    with pytest.raises(ValueError, match="no loss events"):
        mathis.duration_for_loss_events(100, 6.2, 0, 9.5e9)

"""What a precision run's watch takes, on a lossless path, as the flow having met the link:
the bottleneck dropped from its queue, or sent at 95 % of its rate, between two readings."""
from tcpeval.backends.emulated.precision_watch import (
    LINK_MET_FRACTION,
    link_met_between,
)

RATE = 1.4e9   # physical bit/s


def reading(t_s: float, sent_bytes: float, drops: int | None = 0) -> dict:
    return {"t_s": t_s, "bytes": sent_bytes, "drops": drops, "source": "link engine"}


def test_a_bottleneck_sending_at_its_rate_has_met_the_flow():
    at_rate = RATE / 8 * 0.7
    assert link_met_between(reading(10.0, 0), reading(10.7, at_rate), RATE)
    assert link_met_between(reading(10.0, 0), reading(10.7, LINK_MET_FRACTION * at_rate), RATE)


def test_a_flow_at_58_percent_of_the_link_without_drops_has_not():
    # H-TCP at 12.2 ms after its slow start (the run that stopped there at +-2.9 %)
    assert not link_met_between(reading(10.0, 0), reading(10.7, 0.58 * RATE / 8 * 0.7), RATE)


def test_a_queue_drop_is_the_link_met_whatever_the_rate():
    assert link_met_between(reading(10.0, 0, drops=25891), reading(10.7, 1000, drops=25892), RATE)
    assert not link_met_between(reading(10.0, 0, drops=25891), reading(10.7, 1000, drops=25891), RATE)


def test_a_missing_or_stale_reading_is_not_taken_as_the_link_met():
    assert not link_met_between(None, reading(10.7, RATE), RATE)
    assert not link_met_between(reading(10.0, 0), None, RATE)
    assert not link_met_between(reading(10.7, 0), reading(10.7, RATE), RATE)
    # a qdisc without a drop count still tells by its rate
    assert link_met_between(reading(10.0, 0, None), reading(10.7, RATE / 8 * 0.7, None), RATE)

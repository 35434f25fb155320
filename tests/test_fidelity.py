"""The fidelity checks every backend applies (pure: no root needed)."""
import pytest

from tcpeval.backends import fidelity


def test_a_seed_with_few_drops_by_chance_is_not_flagged():
    # Seen in a real run: 4 drops where 10.8 were expected (p = 1e-5): unlucky, not broken.
    reason, status = fidelity.drop_check(1e-5, 1_083_475, 4)
    assert (reason, status) == (None, "ok")


def test_a_dropper_that_misses_packets_is_flagged():
    reason, status = fidelity.drop_check(1e-4, 2_000_000, 120)  # 200 expected
    assert status == "failed" and "99.9% CI" in reason and "p = 0.0001" in reason


def test_drops_at_p_zero_are_flagged():
    assert fidelity.drop_check(0, 10**6, 1) == ("drop: 1 packets dropped with p = 0", "failed")


def test_too_few_expected_drops_is_reported_as_not_tested():
    reason, status = fidelity.drop_check(1e-7, 10**6, 1)
    assert reason is None and status.startswith("not tested")


@pytest.mark.parametrize("k, n", [(0, 100), (5, 100), (100, 100), (11, 1_000_000)])
def test_wilson_interval_contains_the_estimate_and_widens_with_confidence(k, n):
    lo95, hi95 = fidelity.wilson(k, n)
    lo999, hi999 = fidelity.wilson(k, n, fidelity.Z_FLAG)
    assert lo999 <= lo95 <= k / n <= hi95 <= hi999
    assert 0 <= lo999 and hi999 <= 1


def test_rtt_tolerance_is_absolute_for_short_and_relative_for_long_paths():
    assert fidelity.rtt_tolerance_ms(0.2) == pytest.approx(0.05)
    assert fidelity.rtt_tolerance_ms(24.2) == pytest.approx(0.726)


def test_verdict_lists_every_reason():
    out = fidelity.verdict(p=0, seen=10, dropped=1, rtt_setting_ms=6.2, base_rtt_ms=0.05, rtt_ms=7.0,
                           rate_bps=5e9, host_capacity_bps=3e9, achieved_bps=None, cpu_busy=None,
                           delay_stats=None)
    assert out["verdict"] == "flagged" and len(out["reasons"]) == 3

"""Each metric of Sec. III-B pinned against hand-computed cases."""
import math

import numpy as np
import pytest

from tcpeval.analysis import metrics as M


def test_jain_extremes():
    assert M.jain_index([5.0, 5.0]) == pytest.approx(1.0)
    assert M.jain_index([3.0, 3.0, 3.0, 3.0]) == pytest.approx(1.0)
    # one flow takes everything: 1/n
    assert M.jain_index([7.0, 0.0]) == pytest.approx(0.5)
    assert M.jain_index([7.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    # (1+3)^2 / (2 * (1+9)) = 16/20
    assert M.jain_index([1.0, 3.0]) == pytest.approx(0.8)
    assert math.isnan(M.jain_index([0.0, 0.0]))
    assert math.isnan(M.jain_index([]))


def test_quantiles_linear_interpolation():
    # type 7 on 1..5: Q.25 = 2, Q.5 = 3, Q.75 = 4; on 1..4: 1.75, 2.5, 3.25
    assert list(M.throughput_quantiles(np.array([5, 1, 4, 2, 3.0]))) == [2.0, 3.0, 4.0]
    assert list(M.throughput_quantiles(np.array([1, 2, 3, 4.0]))) == pytest.approx([1.75, 2.5, 3.25])
    assert all(math.isnan(v) for v in M.throughput_quantiles(np.array([])))


def test_interval_rates_and_mean_are_byte_weighted():
    t = np.array([0.1, 0.2, 0.4])            # irregular last interval (0.2 s)
    b = np.array([125.0, 250.0, 250.0])
    assert list(M.interval_rates(t, b)) == pytest.approx([10_000.0, 20_000.0, 10_000.0])
    # 8 * 625 bytes / 0.4 s, not the mean of the three rates
    assert M.mean_throughput(t, b) == pytest.approx(12_500.0)
    assert M.mean_throughput(t, b, np.array([False, True, True])) == pytest.approx(8 * 500 / 0.3)


def test_short_term_throughput_hand_computed():
    # lam = 0.5, u0 = 0: 0.5*800 = 400; 0.5*400 + 0 = 200; 0.5*200 + 400 = 500
    u = M.short_term_throughput(np.array([800.0, 0.0, 800.0]), lam=0.5)
    assert list(u) == pytest.approx([400.0, 200.0, 500.0])


def test_short_term_throughput_matches_recursion_across_blocks():
    rng = np.random.default_rng(1)
    x = rng.random(1000) * 1e10
    u = M.short_term_throughput(x, 0.1, block=64)
    ref, prev = [], 0.0
    for v in x:
        prev = 0.9 * prev + 0.1 * v
        ref.append(prev)
    np.testing.assert_allclose(u, ref, rtol=1e-12)


def test_convergence_hand_computed():
    # 100 bytes per 1 s interval except one empty: rates 800, 0, 800 bit/s; lam = 0.5
    t = np.array([1.0, 2.0, 3.0])
    b = np.array([100.0, 0.0, 100.0])
    c = M.convergence(t, b, lam=0.5, eps=0.8)
    # u_bar = 8*200/3 = 533.3; eps*u_bar = 426.7; u = 400, 200, 500 -> first at t = 3
    assert c.converged and c.ubar_bps == pytest.approx(1600 / 3)
    assert c.time_s == pytest.approx(3.0)
    assert c.spread_bps == pytest.approx(1600 / 3 - 500)
    assert c.n_after == 1


def test_convergence_constant_rate_defaults():
    # constant x: u_k = x (1 - 0.9^k) >= 0.8 x  <=>  0.9^k <= 0.2  <=>  k >= 15.28 -> k = 16
    t = np.arange(1, 201) * 0.1
    b = np.full(200, 1.25e8)                  # 10 Gbit/s at 0.1 s
    c = M.convergence(t, b)
    assert c.time_s == pytest.approx(1.6)
    x = 1e10
    after = x * (1 - 0.9 ** np.arange(16, 201))
    assert c.spread_bps == pytest.approx(np.mean(np.abs(x - after)))
    assert c.n_after == 185


def test_convergence_period_end_limits_ubar_and_spread():
    t = np.arange(1, 11, dtype=float)
    b = np.array([100.0] * 5 + [0.0] * 5)
    c = M.convergence(t, b, end_s=5.0, lam=1.0, eps=0.8)  # lam = 1: u = per-interval rate
    assert c.ubar_bps == pytest.approx(800.0) and c.time_s == 1.0 and c.spread_bps == 0.0


def test_never_converged_is_nan():
    c = M.convergence(np.array([1.0, 2.0]), np.array([0.0, 0.0]))
    assert not c.converged and math.isnan(c.time_s) and math.isnan(c.spread_bps)
    # a single burst then silence at lam small: u never reaches eps * u_bar
    c = M.convergence(np.arange(1, 4, dtype=float), np.array([300.0, 0, 0]), lam=0.1, eps=0.8)
    assert not c.converged and math.isnan(c.time_s)


def test_parameter_validation():
    with pytest.raises(ValueError):
        M.short_term_throughput(np.ones(3), lam=0)
    with pytest.raises(ValueError):
        M.convergence(np.ones(1), np.ones(1), eps=1.5)

"""The cross-validation of time dilation: its KS test, and its three checks on one
condition at k = 1 against k > 1 (virtual units, as the tidy tables hold them)."""
import math

import numpy as np
import pandas as pd
import pytest

from tcpeval.analysis import dilation_check as dc


def test_ks_statistic_is_the_largest_gap_between_the_two_cdfs():
    d, _ = dc.ks_2samp([1, 2, 3], [2, 3, 4, 5])
    assert d == pytest.approx(0.5)
    assert dc.ks_2samp([1, 2, 3], [1, 2, 3]) == (0.0, 1.0)


def test_ks_tells_one_distribution_from_a_shifted_one():
    rng = np.random.default_rng(7)
    a, b = rng.normal(0, 1, 400), rng.normal(0, 1, 400)
    assert dc.ks_2samp(a, b)[1] > 0.05
    assert dc.ks_2samp(a, b + 0.5)[1] < 1e-6


def _ar1(rng, rho, n):
    x = np.empty(n)
    x[0] = rng.normal()
    for i in range(1, n):
        x[i] = rho * x[i - 1] + math.sqrt(1 - rho * rho) * rng.normal()
    return x


def test_effective_size_discounts_a_correlated_series_and_never_inflates_one():
    rng = np.random.default_rng(3)
    assert dc.effective_size(rng.normal(size=1000)) == pytest.approx(1000, rel=0.1)
    assert dc.effective_size(_ar1(rng, 0.9, 1000)) == pytest.approx(1000 * 0.1 / 1.9, rel=0.5)
    alternating = np.tile([1.0, -1.0], 50)  # r = -1: still at most n
    assert dc.effective_size(alternating) == 100
    assert dc.effective_size(np.ones(20)) == 20


def test_ks_on_correlated_intervals_rejects_about_alpha_of_equal_pairs():
    # two runs of the same sawtooth-like process (AR(1), r = 0.9): the plain test takes
    # 160 intervals for 160 draws and "rejects" most pairs; with effective sizes it
    # rejects about as often as alpha says
    rng = np.random.default_rng(11)
    plain = corrected = 0
    trials = 200
    for _ in range(trials):
        a, b = _ar1(rng, 0.9, 160), _ar1(rng, 0.9, 160)
        plain += dc.ks_2samp(a, b)[1] < 0.01
        corrected += dc.ks_2samp(a, b, dc.effective_size(a), dc.effective_size(b))[1] < 0.01
    assert plain > 0.3 * trials
    assert corrected <= 0.05 * trials
    # and a real shift of one standard deviation is still found
    a, b = _ar1(rng, 0.9, 800), _ar1(rng, 0.9, 800) + 1.0
    assert dc.ks_2samp(a, b, dc.effective_size(a), dc.effective_size(b))[1] < 0.01


def test_ks_resolution_forgives_offsets_below_it_and_only_those():
    rng = np.random.default_rng(5)
    full = 1e9 - np.abs(rng.normal(0, 1e6, 400))        # a full link: a point mass, 0.1 % jitter
    shaky = full - np.abs(rng.normal(0, 4e6, 400))      # the same, with 0.4 % hiccups
    assert dc.ks_2samp(full, shaky)[1] < 1e-6           # plain KS: "different"
    assert dc.ks_2samp(full, shaky, resolution=1e7)[1] > 0.5  # within 1 % of the link: alike
    # a shift beyond the resolution is still found, in either direction
    for lower in (full - 2e7, full + 2e7):
        assert dc.ks_2samp(full, lower, resolution=1e7)[1] < 1e-6
    # no resolution: the plain statistic; the statistic never grows with the resolution
    a, b = rng.normal(0, 1, 300), rng.normal(0.3, 1, 300)
    d0 = dc.ks_2samp(a, b)[0]
    assert d0 == dc.ks_2samp(a, b, resolution=0.0)[0] > dc.ks_2samp(a, b, resolution=0.2)[0]


def test_ks_resolution_is_never_finer_than_one_read_of_the_receiver_per_interval():
    # dilation-long at 0.2 Gbps, p = 0: k = 1 intervals anywhere in 189-197 Mbit/s, k = 4
    # intervals 36 or 37 reads of 65,700 bytes per 0.1 s (189.2 or 194.5 Mbit/s), same mean
    rng = np.random.default_rng(7)
    piece = 8 * dc.READ_QUANTUM_BYTES / 0.1
    k1 = rng.uniform(36.0, 37.5, 600) * piece
    k4 = rng.choice([36, 37], 600, p=[0.4, 0.6]) * piece
    assert dc.ks_resolution(0.2e9, 0.1) == pytest.approx(piece) and piece > 0.01 * 0.2e9
    assert dc.ks_resolution(10e9, 0.1) == pytest.approx(1e8)  # at 10 Gbps 1 % of the link is coarser
    assert dc.ks_resolution(math.nan, math.nan) == 0.0
    assert dc.ks_2samp(k1, k4, resolution=0.01 * 0.2e9)[1] < 0.01   # finer than a read: "different"
    assert dc.ks_2samp(k1, k4, resolution=dc.ks_resolution(0.2e9, 0.1))[1] > 0.5
    # a shift of two reads is still found
    assert dc.ks_2samp(k1, k4 - 2.2 * piece, resolution=dc.ks_resolution(0.2e9, 0.1))[1] < 0.01


def _rates(seed, mean=1e9, n=200):
    return np.random.default_rng(seed).normal(mean, 0.1 * mean, n)


def _side(k, seeds, dropped, mean=1e9, expected=None):
    series = [_rates(s, mean) for s in seeds]
    return dc.Side(factor=k, expected=expected or len(seeds), means_bps=[float(x.mean()) for x in series],
                   intervals_bps=np.concatenate(series) if series else np.zeros(0),
                   dropped=dict(enumerate(dropped, start=1)))


def test_the_same_virtual_path_at_another_factor_agrees():
    got = dc.compare(_side(1, (1, 2), (1001, 1002)), _side(4, (11, 12), (1011, 1012)))
    assert got["factor"] == 4 and got["judged"] and got["agree"], got
    assert abs(got["mean_rel_diff"]) < 0.05 and got["loss_events"] == [2003, 2023]


def test_a_dilated_path_that_runs_faster_or_loses_more_is_told_apart():
    ref = _side(1, (1, 2), (1000, 1000))
    got = dc.compare(ref, _side(2, (11, 12), (1000, 1000), mean=1.2e9))
    assert not got["checks"]["mean"] and not got["checks"]["distribution"] and not got["agree"]
    got = dc.compare(ref, _side(2, (11, 12), (1400, 1400)))
    assert got["checks"]["mean"] and not got["checks"]["loss_events"] and not got["agree"]


def test_a_side_without_usable_runs_is_not_judged_and_says_which():
    got = dc.compare(_side(1, (), (), expected=2), _side(2, (11,), (1005,)))
    assert not got["judged"] and not got["agree"] and "k = 1" in got["why"]
    assert got["runs"] == [2, 1] and got["ok_runs"] == [0, 1]


def test_sides_on_different_link_mechanisms_are_not_judged_and_say_which():
    # dilation-long, 2026-11-26: with the mechanism left to choose, k = 1 took TBF (the
    # engine's envelope at 24.2 ms read 0.3 Gbps that morning) and k = 4 the link engine;
    # their per-interval distributions differed at p = 0 with means 0.7 % apart
    ref, dil = _side(1, (1, 2), (1000, 1000)), _side(4, (11, 12), (1000, 1000))
    ref.links, dil.links = {"tbf"}, {"tevlink"}
    got = dc.compare(ref, dil)
    assert not got["judged"] and not got["agree"]
    assert "k = 1 ran on tbf, k = 4 on tevlink" in got["why"] and "TCPEVAL_LINK" in got["why"]
    dil.links = {"tbf"}
    assert dc.compare(ref, dil)["agree"]


def test_conditions_group_the_campaigns_runs_by_condition_and_factor():
    # two repetitions of one condition at k = 1 and 2; the k = 2 repetition 2 was flagged
    # (absent from the usable runs) and counts as expected but not usable
    expected = pd.DataFrame([{"run": f"k{k}/r{r}", "criterion": f"dilation_k{k}", "variant": "cubic",
                              "second": None, "rtt_ms": 6.2, "drop": 1e-3, "rep": r}
                             for k in (1, 2) for r in (1, 2)])
    used = expected[expected["run"] != "k2/r2"].assign(
        mean_bps=1e9, dropped_packets=500, duration_s=20.0, link_rate_bps=0.2e9)
    rows = []
    for i, run in enumerate(used["run"]):
        t = np.arange(1, 201) * 0.1
        rows.append(pd.DataFrame({"run": run, "flow": 0, "t_s": t, "throughput_bps": _rates(i)}))
    samples = pd.concat(rows)
    got = dc.conditions(used, expected, samples)
    assert len(got) == 1
    r = got[0]
    assert (r["variant"], r["rtt_ms"], r["drop"], r["factor"]) == ("cubic", 6.2, 1e-3, 2)
    assert r["runs"] == [2, 2] and r["ok_runs"] == [2, 1] and r["agree"]
    assert r["rate_bps"] == pytest.approx(0.2e9)
    # losses over the repetitions usable at both factors: repetition 1 only
    assert r["loss_reps"] == [1] and r["loss_events"] == [500, 500]
    s = dc.summary(got)
    assert s["comparisons"] == 1 and s["judged"] == s["agree"] == 1 and s["factors"] == [2]
    assert s["variants_all_agree"] == ["cubic"] and math.isfinite(s["max_abs_mean_diff"])
    # the runs table's mechanism column decides whether the sides are alike
    mixed = used.assign(mech_rate=np.where(used["criterion"] == "dilation_k1", "tbf", "tevlink"))
    assert "ran on tbf" in dc.conditions(mixed, expected, samples)[0]["why"]


def test_without_a_repetition_usable_at_both_factors_losses_compare_per_run_means():
    ref = dc.Side(factor=1, expected=2, means_bps=[1e9], intervals_bps=_rates(1), dropped={1: 1000})
    dil = dc.Side(factor=2, expected=2, means_bps=[1e9], intervals_bps=_rates(2), dropped={2: 1010})
    got = dc.compare(ref, dil)
    assert got["loss_reps"] == [] and got["loss_events"] == [1000, 1010] and got["agree"]


def test_factor_is_read_from_the_criterion_name():
    assert dc.factor_of("dilation_k4") == 4
    assert dc.factor_of("responsiveness") is None and dc.factor_of("dilation_kx") is None

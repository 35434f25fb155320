"""The cross-validation of time dilation: its KS test, and its three checks on
k = 1 against k > 1 runs (synthetic traces, physical units as the backend writes them)."""
import numpy as np
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


def _run(k, rates_bps, dropped, seed=0):
    """A physical trace of a virtual run with per-interval rates `rates_bps` (0.1 s each)."""
    n = len(rates_bps)
    t = [(i + 1) * 0.1 * k for i in range(n)]
    phys = [r / k for r in rates_bps]
    return {
        "mechanisms": {"dilation": {"factor": k}},
        "flows": [{"start_s": 0.0,
                   "samples": {"t_s": t, "bytes": [r * 0.1 / 8 for r in rates_bps], "throughput_bps": phys},
                   "summary": {"bytes": sum(rates_bps) * 0.1 / 8, "mean_throughput_bps": float(np.mean(phys))}}],
        "measured": {"rtt_ms": 6.2 * k, "drop": {"seen": 10**6, "dropped": dropped}},
        "fidelity": {"verdict": "ok"},
    }


def _rates(seed, mean=1e9, n=200):
    return list(np.random.default_rng(seed).normal(mean, 0.1 * mean, n))


def test_the_same_virtual_path_at_another_factor_agrees():
    ref = [_run(1, _rates(s), 1000 + s) for s in (1, 2)]
    dil = [_run(4, _rates(s + 10), 1010 + s) for s in (1, 2)]
    got = dc.compare(ref, dil)
    assert got["factor"] == 4 and got["agree"], got
    assert abs(got["mean_rel_diff"]) < 0.05
    assert got["mean_bps"][1] == pytest.approx(1e9, rel=0.03)   # read back in virtual units


def test_a_dilated_path_that_runs_faster_or_loses_more_is_told_apart():
    ref = [_run(1, _rates(s), 1000) for s in (1, 2)]
    faster = [_run(2, _rates(s + 10, mean=1.2e9), 1000) for s in (1, 2)]
    got = dc.compare(ref, faster)
    assert not got["checks"]["mean"] and not got["checks"]["distribution"] and not got["agree"]
    lossier = [_run(2, _rates(s + 10), 1400) for s in (1, 2)]
    got = dc.compare(ref, lossier)
    assert got["checks"]["mean"] and not got["checks"]["loss_events"] and not got["agree"]


def test_flagged_runs_do_not_count_and_a_side_without_ok_runs_is_not_judged():
    ref = [_run(1, _rates(1), 1000), _run(1, _rates(2, mean=0.5e9), 1000)]
    ref[1]["fidelity"]["verdict"] = "flagged"       # a stretched ACK clock, say
    dil = [_run(2, _rates(11), 1005)]
    got = dc.compare(ref, dil)
    assert got["ok_runs"] == [1, 1] and got["runs"] == [2, 1] and got["agree"], got
    for r in ref:
        r["fidelity"]["verdict"] = "flagged"
    got = dc.compare(ref, dil)
    assert not got["judged"] and not got["agree"] and "k = 1" in got["why"]

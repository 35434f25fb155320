"""A convergence run's own interval of its spread (extract.spread_half_width): batch means
of the new flow's distances |u_bar - u(t)| from t_c on, by hand; none where those batch
means are correlated or too few; and the claims read it as a cell's interval."""
import math

import numpy as np
import pandas as pd
import pytest

from tcpeval import precision
from tcpeval.analysis import extract
from tcpeval.analysis import metrics as M
from tcpeval.analysis.tables import Dataset
from tcpeval.report import claims as C


def test_spread_half_width_by_hand():
    # 10 batches of 30 distances: 0.9 and 1.1 Gbit/s batch after batch
    distances = np.repeat([0.9e9 if k % 2 == 0 else 1.1e9 for k in range(10)], 30)
    batch_means = np.array([0.9e9, 1.1e9] * 5)
    by_hand = precision.t_critical(0.95, 9) * batch_means.std(ddof=1) / math.sqrt(10)
    assert extract.spread_half_width(distances) == pytest.approx(by_hand)


def test_a_slow_drift_of_the_distances_has_no_interval_of_its_own():
    # the first half far from u_bar, the second close: the batch means are correlated
    distances = np.concatenate([np.full(150, 2e9), np.full(150, 0.5e9)])
    assert math.isnan(extract.spread_half_width(distances))


def test_too_few_distances_have_none():
    assert math.isnan(extract.spread_half_width(np.full(19, 1e9)))   # < 2 a batch
    assert math.isnan(extract.spread_half_width(np.empty(0)))


def test_convergence_keeps_the_distances_its_spread_averages():
    rng = np.random.default_rng(7)
    t = np.arange(1, 601) * 0.1
    b = rng.normal(5e9, 0.5e9, 600) * 0.1 / 8             # a new flow about 5 Gbit/s
    c = M.convergence(t, b)
    assert c.converged and c.n_after == np.count_nonzero(t >= c.time_s)   # every sample from t_c on
    assert c.spread_bps == pytest.approx(c.distances.mean())
    hw = extract.spread_half_width(c.distances)
    assert 0 < hw < c.spread_bps                          # white noise after the ramp: an interval of its own


def test_a_single_convergence_run_gives_its_cell_an_interval_of_the_spread():
    runs = pd.DataFrame([dict(criterion="convergence", variant="bic", second=second, rtt_ms=6.2, drop=0.0, rep=1,
                              link_rate_bps=9.85e9, mean_bps=5e9, conv_time_s=3.0, spread_bps=spread * 1e9,
                              spread_hw_bps=0.05e9, ubar_bps=4e9,
                              **dict.fromkeys(("q25_bps", "q50_bps", "q75_bps", "mean_frac", "flow1_bps", "flow2_bps",
                                               "utilisation_bps", "utilisation_frac", "jain"), float("nan")))
                         for second, spread in (("reno", 1.0), ("bic", 0.4))])
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["spread_frac_hw"].tolist() == pytest.approx([0.05 / 4] * 2)
    assert cell["spread_gbps_hw"].tolist() == pytest.approx([0.05] * 2)
    assert np.isinf(cell["conv_time_s_hw"]).all()        # a first passage: no interval of its own
    claim = {"id": "x", "section": "V", "paper": "p",
             "check": {"type": "greater", "metric": "spread_frac", "where": {"criterion": "convergence"},
                       "a": {"second": "reno"}, "b": {"same_variant": True}}}
    assert C.evaluate(claim, cell)[0] == C.HOLDS        # 0.25 +- 0.0125 against 0.1 +- 0.0125

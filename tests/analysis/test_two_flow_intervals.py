"""A two-flow run's own intervals of its Jain index, utilisation and first flow's share
(extract._two_flow_half_widths), by hand: batches of the common cells, sectioning about the
run's figure; none for a metric whose batches are correlated, each metric tested apart."""
import math

import numpy as np
import pytest

from tcpeval import precision
from tcpeval.analysis import extract
from tcpeval.analysis import metrics as M

DT = 0.1


def _flow(rates_bps, start=0.0):
    rates = np.asarray(rates_bps, dtype=float)
    t = DT * np.arange(1, len(rates) + 1)
    return {"start": start, "t": t, "b": rates * DT / 8}


def _means(flows):
    return [M.mean_throughput(f["t"], f["b"]) for f in flows]


def test_sectioning_half_width_by_hand():
    # spread sqrt((0.01 + 0.01 + 0 + 0) / 3) = 0.08165; t(95 %, 3) = 3.182; / sqrt(4)
    assert precision.sectioning_half_width(1.0, [0.9, 1.1, 1.0, 1.0]) == pytest.approx(3.1824 * 0.081650 / 2, rel=1e-4)
    with pytest.raises(ValueError, match="at least 2 batches"):
        precision.sectioning_half_width(1.0, [1.0])


def test_two_flow_intervals_by_hand():
    # 200 common cells, 10 batches of 20: the first flow alternates 2.9 / 3.1 Gbit/s from
    # batch to batch, the second carries 2 throughout
    first = np.repeat([2.9e9 if k % 2 == 0 else 3.1e9 for k in range(10)], 20)
    flows = [_flow(first), _flow(np.full(200, 2e9))]
    means = _means(flows)
    got = extract._two_flow_half_widths(flows, DT, means)
    sums = np.array([4.9e9, 5.1e9] * 5)
    shares = np.array([2.9 / 4.9, 3.1 / 5.1] * 5)
    jains = np.array([4.9 ** 2 / (2 * (2.9 ** 2 + 4)), 5.1 ** 2 / (2 * (3.1 ** 2 + 4))] * 5)
    t9 = precision.t_critical(0.95, 9)

    def by_hand(estimate, values):
        return t9 * math.sqrt(((values - estimate) ** 2).sum() / 9) / math.sqrt(10)

    assert got["utilisation_hw_bps"] == pytest.approx(by_hand(5e9, sums))
    assert got["share_first_hw"] == pytest.approx(by_hand(3 / 5, shares))
    assert got["jain_hw"] == pytest.approx(by_hand(M.jain_index(means), jains))


def test_flows_that_trade_shares_slowly_have_no_interval_of_their_own():
    # the first half one way, the second the other: the batches' sums drift together
    first = np.concatenate([np.full(100, 3.5e9), np.full(100, 2.5e9)])
    second = np.concatenate([np.full(100, 1.8e9), np.full(100, 2.2e9)])
    flows = [_flow(first), _flow(second)]
    got = extract._two_flow_half_widths(flows, DT, _means(flows))
    assert all(math.isnan(v) for v in got.values())


def test_a_steady_split_keeps_its_jain_interval_while_the_sum_drifts():
    # both flows lose 5 Mbit/s a batch together (the sums fall steadily: correlated), and
    # every other batch the first carries 20 Mbit/s more than the second (the index and
    # the share alternate: not correlated)
    base = 4.73e9 - 5e6 * np.arange(10)
    lead = np.array([2e7 if k % 2 == 0 else 0.0 for k in range(10)])
    flows = [_flow(np.repeat(base + lead / 2, 20)), _flow(np.repeat(base - lead / 2, 20))]
    means = _means(flows)
    sums, shares = 2 * base, (base + lead / 2) / (2 * base)
    jains = (2 * base) ** 2 / (2 * ((base + lead / 2) ** 2 + (base - lead / 2) ** 2))
    assert not precision.means_independence(sums).passed
    got = extract._two_flow_half_widths(flows, DT, means)
    assert math.isnan(got["utilisation_hw_bps"])
    assert got["jain_hw"] == pytest.approx(precision.sectioning_half_width(M.jain_index(means), jains))
    assert got["share_first_hw"] == pytest.approx(precision.sectioning_half_width(means[0] / sum(means), shares))


def test_the_von_neumann_test_of_formed_batch_means():
    # 1 - (sum of squared successive differences) / (2 x sum of squared deviations)
    assert precision.means_independence([1.0, 2.0, 3.0, 4.0]).statistic == pytest.approx(1 - 3 / 10)
    assert precision.means_independence([1.0, 3.0, 1.0, 3.0]).passed
    assert precision.means_independence([5.0, 5.0, 5.0]).passed      # constant: nothing correlates
    with pytest.raises(ValueError, match="at least 3 batch means"):
        precision.means_independence([1.0, 2.0])


def test_a_run_too_short_or_of_one_flow_has_none():
    flows = [_flow(np.full(15, 3e9)), _flow(np.full(15, 2e9))]   # 15 cells: < 2 per batch
    assert all(math.isnan(v) for v in extract._two_flow_half_widths(flows, DT, _means(flows)).values())
    one = [_flow(np.full(200, 3e9))]
    assert all(math.isnan(v) for v in extract._two_flow_half_widths(one, DT, _means(one)).values())


def test_only_the_cells_both_flows_are_active_in_count():
    # the second flow starts at 10 s; before, the first alone carried 9 Gbit/s
    first = np.concatenate([np.full(100, 9e9), np.repeat([2.9e9, 3.1e9] * 5, 10)])
    second = np.full(100, 2e9)
    flows = [_flow(first), _flow(second, start=10.0)]
    got = extract._two_flow_half_widths(flows, DT, [3e9, 2e9])
    sums = np.array([4.9e9, 5.1e9] * 5)
    t9 = precision.t_critical(0.95, 9)
    assert got["utilisation_hw_bps"] == pytest.approx(t9 * math.sqrt(((sums - 5e9) ** 2).sum() / 9) / math.sqrt(10))

"""A run's steady-state throughput is what the flows carried in exactly the second half of
the run: an interval that straddles the midpoint or the end counts for its share."""
from __future__ import annotations

import pytest

from tcpeval.backends.emulated.record_parts import bytes_between


def test_the_interval_ending_just_after_the_midpoint_counts_for_its_share():
    # the end times iperf3 reported in a real 4-s run with 0.5-s samples (1.3 Gbps)
    t = [0.500326, 1.002472, 1.500103, 2.000917, 2.500469, 3.001222, 3.501077, 4.000187]
    rate = 1.3e9 / 8  # bytes per second, steady
    nbytes = [rate * (b - a) for a, b in zip([0.0] + t, t)]
    late = bytes_between(t, nbytes, 0.0, 2.0, 4.0)
    assert late == pytest.approx(rate * 2.0)  # counted whole, it was rate * 2.5


def test_a_flow_that_starts_late_is_shifted_and_cut_at_both_edges():
    # samples of 1 s from a flow started at 1.5 s: (1.5, 2.5], (2.5, 3.5], (3.5, 4.5]
    late = bytes_between([1.0, 2.0, 3.0], [100.0, 200.0, 300.0], 1.5, 2.0, 4.0)
    assert late == pytest.approx(100.0 * 0.5 + 200.0 + 300.0 * 0.5)


def test_samples_outside_the_window_count_nothing():
    assert bytes_between([1.0, 2.0], [10.0, 20.0], 0.0, 2.0, 4.0) == 0.0
    assert bytes_between([], [], 0.0, 2.0, 4.0) == 0.0

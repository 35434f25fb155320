"""Retransmission rate, recovery after a disturbance, Jain's index per grid cell and the
per-flow timelines, pinned against hand-computed cases (the arithmetic is in the comments)."""
import dataclasses
import math

import numpy as np
import pytest

from tcpeval.analysis import metrics as M

NAN = float("nan")


# --- retransmission rate --------------------------------------------------------------

def test_retransmission_rate_is_retransmits_per_mss_segment():
    # (14600 + 29200) / 1460 = 30 segments; (1 + 2) / 30 = 0.1
    assert M.retransmission_rate([14600, 29200], [1, 2]) == pytest.approx(0.1)


def test_retransmission_rate_default_mss_is_1460_and_mss_is_a_parameter():
    assert M.DEFAULT_MSS == 1460
    # 14480 / 1448 = 10 segments; 1 / 10 = 0.1
    assert M.retransmission_rate([14480], [1], mss=1448) == pytest.approx(0.1)
    # with the default mss: 14480 / 1460 = 9.918 segments; 1 / 9.918 = 0.10083
    assert M.retransmission_rate([14480], [1]) == pytest.approx(1460 / 14480)


def test_retransmission_rate_leaves_unknown_intervals_out_of_both_sums():
    # known intervals 0 and 2: (14600 + 29200) / 1460 = 30 segments; (1 + 3) / 30 = 0.13333
    # (the 14600 bytes of the unknown interval are not in the denominator: 4/40 = 0.1 would be wrong)
    r = M.retransmission_rate(np.array([14600.0, 14600.0, 29200.0]), np.array([1.0, NAN, 3.0]))
    assert r == pytest.approx(4 / 30)


def test_retransmission_rate_nan_when_all_retransmits_unknown():
    assert math.isnan(M.retransmission_rate([14600, 14600], [NAN, NAN]))


def test_retransmission_rate_nan_for_empty_flow():
    assert math.isnan(M.retransmission_rate([], []))


def test_retransmission_rate_nan_when_nothing_was_sent():
    assert math.isnan(M.retransmission_rate([0, 0], [0, 0]))
    # bytes only in the unknown interval: the known ones carried nothing
    assert math.isnan(M.retransmission_rate([0, 14600], [0, NAN]))


def test_retransmission_rate_zero_without_retransmits():
    assert M.retransmission_rate([14600], [0]) == 0.0


def test_retransmission_rate_rejects_bad_mss_and_mismatched_lengths():
    with pytest.raises(ValueError):
        M.retransmission_rate([1460], [1], mss=0)
    with pytest.raises(ValueError):
        M.retransmission_rate([1460, 1460], [1])


# --- throughput recovery ----------------------------------------------------------------

# 10 intervals of 0.1 s from start 0; window [0.3, 0.6)
T10 = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def test_recovery_hand_computed():
    b = [1000, 1000, 1000,        # pre: ends 0.1, 0.2, 0.3
         250, 250, 500,           # during: ends 0.4, 0.5, 0.6
         500, 800, 950, 1000]     # post: ends 0.7 .. 1.0; rates 40, 64, 76, 80 kbit/s
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0)
    assert r.pre_bps == pytest.approx(80_000.0)            # 8*3000/0.3
    assert r.during_bps == pytest.approx(8_000 / 0.3)      # 8*1000/0.3 = 26666.7
    assert r.post_bps == pytest.approx(65_000.0)           # 8*3250/0.4
    assert r.ratio == pytest.approx(0.8125)                # 65000/80000
    # level 0.9*80000 = 72000: first reached by the interval (0.8, 0.9] (76000); 0.8 - 0.6 = 0.2
    assert r.recovered
    assert r.time_to_recover_s == pytest.approx(0.2)
    assert (r.n_pre, r.n_during, r.n_post) == (3, 3, 4)


def test_recovery_fraction_is_a_parameter_and_a_rate_equal_to_level_counts():
    b = [1000, 1000, 1000, 250, 250, 500, 500, 800, 950, 1000]
    # level 0.5*80000 = 40000: the first post interval (0.6, 0.7] has 40000 -> 0
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0, fraction=0.5)
    assert r.recovered and r.time_to_recover_s == 0.0
    # level 0.8*80000 = 64000: (0.7, 0.8] has exactly 64000 (a tie, reached despite
    # 0.8 - 0.7 = 0.10000000000000009 in float) -> from 0.7: 0.7 - 0.6 = 0.1
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0, fraction=0.8)
    assert r.time_to_recover_s == pytest.approx(0.1)


def test_recovery_time_zero_when_first_interval_after_window_recovers():
    b = [1000, 1000, 1000, 0, 0, 0, 1000, 1000, 1000, 1000]
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0)
    assert r.during_bps == 0.0
    assert r.recovered and r.time_to_recover_s == 0.0
    assert r.ratio == pytest.approx(1.0)                    # 80000/80000


def test_recovery_pre_s_limits_pre_to_last_seconds_before_window():
    b = [500, 1000, 1000, 250, 250, 500, 500, 800, 950, 1000]
    # all of pre: 8*2500/0.3 = 66666.7
    assert M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0).pre_bps == pytest.approx(20_000 / 0.3)
    # pre_s = 0.2: intervals ending in (0.1, 0.3] -> 8*2000/0.2 = 80000 (the one ending at 0.1 is out)
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0, pre_s=0.2)
    assert r.pre_bps == pytest.approx(80_000.0)
    assert r.n_pre == 2


def test_recovery_intervals_straddling_window_go_to_part_of_their_end():
    # start 0.05, 0.1-s intervals end at 0.15 .. 0.75; window [0.3, 0.5)
    t = [0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75]
    b = [1000, 1000, 100, 100, 1000, 1000, 1000]
    r = M.throughput_recovery(t, b, 0.3, 0.5, start_s=0.05)
    # (0.25, 0.35] straddles d0 -> during; (0.45, 0.55] straddles d1 -> post
    assert (r.n_pre, r.n_during, r.n_post) == (2, 2, 3)
    assert r.pre_bps == pytest.approx(80_000.0)             # 8*2000/0.2
    assert r.during_bps == pytest.approx(8_000.0)           # 8*200/0.2
    assert r.post_bps == pytest.approx(80_000.0)            # 8*3000/0.3
    # the straddling interval starts at 0.45 < d1 and reaches 80000 >= 72000: clamped to 0
    assert r.recovered and r.time_to_recover_s == 0.0


def test_recovery_end_on_boundary_within_tolerance_belongs_to_earlier_part():
    t = np.array([0.1, 0.2, 0.1 + 0.2, 0.4])                # 0.1 + 0.2 = 0.30000000000000004
    b = [1000, 1000, 1000, 0]
    r = M.throughput_recovery(t, b, 0.3, 0.4, start_s=0.0)
    assert (r.n_pre, r.n_during, r.n_post) == (3, 1, 0)


def test_recovery_first_interval_measured_from_flow_start():
    # start 2.0: the first interval (2.0, 2.2] is 0.2 s long
    t = [2.2, 2.3, 2.4, 2.5]
    b = [2000, 1000, 100, 1000]
    r = M.throughput_recovery(t, b, 2.3, 2.4, start_s=2.0)
    assert r.pre_bps == pytest.approx(80_000.0)             # 8*3000/0.3
    assert r.during_bps == pytest.approx(8_000.0)           # 8*100/0.1
    assert r.post_bps == pytest.approx(80_000.0)            # 8*1000/0.1
    assert r.recovered and r.time_to_recover_s == 0.0


def test_recovery_never_recovering():
    b = [1000, 1000, 1000, 250, 250, 500, 500, 500, 500, 500]
    r = M.throughput_recovery(T10, b, 0.3, 0.6, start_s=0.0)
    # post rates all 40000 < 72000
    assert not r.recovered
    assert math.isnan(r.time_to_recover_s)
    assert r.post_bps == pytest.approx(40_000.0)            # 8*2000/0.4
    assert r.ratio == pytest.approx(0.5)                    # 40000/80000


def test_recovery_no_interval_after_window():
    b = [1000, 1000, 1000, 250, 250, 500]
    r = M.throughput_recovery(T10[:6], b, 0.3, 0.6, start_s=0.0)   # the flow ends at d1
    assert r.n_post == 0
    assert math.isnan(r.post_bps) and math.isnan(r.ratio)
    assert not r.recovered and math.isnan(r.time_to_recover_s)
    assert r.pre_bps == pytest.approx(80_000.0)


def test_recovery_flow_starting_inside_window_has_no_pre_level():
    t = [0.4, 0.5, 0.6, 0.7]
    r = M.throughput_recovery(t, [1000] * 4, 0.3, 0.6, start_s=0.3)
    assert r.n_pre == 0 and math.isnan(r.pre_bps)
    assert math.isnan(r.ratio)
    assert not r.recovered and math.isnan(r.time_to_recover_s)
    assert r.post_bps == pytest.approx(80_000.0)            # 8*1000/0.1


def test_recovery_zero_pre_level_is_undefined():
    r = M.throughput_recovery([0.1, 0.2, 0.3], [0, 0, 1000], 0.1, 0.2, start_s=0.0)
    assert r.pre_bps == 0.0
    assert math.isnan(r.ratio) and not r.recovered


def test_recovery_empty_flow():
    r = M.throughput_recovery([], [], 0.3, 0.6, start_s=0.0)
    assert all(math.isnan(v) for v in (r.pre_bps, r.during_bps, r.post_bps, r.ratio, r.time_to_recover_s))
    assert not r.recovered
    assert (r.n_pre, r.n_during, r.n_post) == (0, 0, 0)


def test_recovery_rejects_bad_window_and_parameters():
    with pytest.raises(ValueError):
        M.throughput_recovery(T10, [1] * 10, 0.6, 0.3, start_s=0.0)
    with pytest.raises(ValueError):
        M.throughput_recovery(T10, [1] * 10, 0.3, 0.6, start_s=0.0, fraction=0.0)
    with pytest.raises(ValueError):
        M.throughput_recovery(T10, [1] * 10, 0.3, 0.6, start_s=0.0, pre_s=0.0)


def test_recovery_result_is_frozen():
    r = M.throughput_recovery(T10, [1000] * 10, 0.3, 0.6, start_s=0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.pre_bps = 1.0


# --- Jain's index per grid cell ---------------------------------------------------------

def test_jain_per_cell_hand_computed_offset_flows():
    a = (0.0, [0.1, 0.2, 0.3, 0.4], [1000, 1000, 1000, 1000])   # cells 0.1, 0.2, 0.3, 0.4
    b = (0.15, [0.1, 0.2, 0.3], [1000, 3000, 500])             # ends 0.25, 0.35, 0.45 -> cells 0.3, 0.4, 0.5
    f = M.jain_per_cell([a, b], 0.1)
    np.testing.assert_allclose(f.t_s, [0.3, 0.4])
    assert list(f.n_active) == [2, 2]
    # cell 0.3: 80000 and 80000 -> 1; cell 0.4: 80000 and 240000 -> (1+3)^2/(2*(1+9)) = 0.8
    np.testing.assert_allclose(f.jain, [1.0, 0.8])
    assert f.mean == pytest.approx(0.9)                         # (1 + 0.8)/2, equal cell widths
    assert f.n_used == 2


def test_jain_per_cell_ignores_flows_not_active_in_cell():
    a = (0.0, [0.1, 0.2], [1000, 1000])
    b = (0.0, [0.1, 0.2], [1000, 1000])
    c = (0.1, [0.1], [2000])                                    # only in cell 0.2
    f = M.jain_per_cell([a, b, c], 0.1)
    assert list(f.n_active) == [2, 3]
    # cell 0.1: a, b only -> 1 (not 2/3 as if c counted with 0);
    # cell 0.2: rates 1:1:2 -> (1+1+2)^2/(3*(1+1+4)) = 16/18 = 0.8889
    np.testing.assert_allclose(f.jain, [1.0, 16 / 18])
    assert f.mean == pytest.approx((1.0 + 16 / 18) / 2)        # 0.9444


def test_jain_per_cell_all_zero_cell_is_nan_and_skipped_in_mean():
    a = (0.0, [0.1, 0.2, 0.3], [1000, 0, 1000])
    b = (0.0, [0.1, 0.2, 0.3], [1000, 0, 0])
    f = M.jain_per_cell([a, b], 0.1)
    # cell 0.1: 1; cell 0.2: both 0 -> NaN; cell 0.3: (1000, 0) -> 1/2
    assert f.jain[0] == pytest.approx(1.0)
    assert math.isnan(f.jain[1])
    assert f.jain[2] == pytest.approx(0.5)
    assert f.mean == pytest.approx(0.75)                        # (1 + 0.5)/2
    assert f.n_used == 2


def test_jain_per_cell_nan_when_flows_never_overlap():
    a = (0.0, [0.1, 0.2], [1000, 1000])
    b = (0.5, [0.1, 0.2], [1000, 1000])
    f = M.jain_per_cell([a, b], 0.1)
    assert f.t_s.size == 0 and f.n_active.size == 0 and f.jain.size == 0
    assert math.isnan(f.mean) and f.n_used == 0


def test_jain_per_cell_single_or_empty_flows_give_nan():
    assert math.isnan(M.jain_per_cell([(0.0, [0.1], [1000])], 0.1).mean)
    assert math.isnan(M.jain_per_cell([(0.0, [], []), (0.0, [], [])], 0.1).mean)
    assert math.isnan(M.jain_per_cell([], 0.1).mean)


def test_grid_end_on_cell_boundary_belongs_to_cell_it_closes():
    # 0.2 + 0.1 = 0.30000000000000004 is the boundary 0.3 within 1e-9: cell (0.2, 0.3]
    a = (0.0, [0.1, 0.2, 0.3], [1000, 1000, 1000])
    b = (0.2, [0.1], [1000])
    f = M.jain_per_cell([a, b], 0.1)
    np.testing.assert_allclose(f.t_s, [0.3])
    assert f.jain[0] == pytest.approx(1.0)


def test_grid_sums_bytes_of_intervals_ending_in_same_cell():
    # b's two 0.05-s intervals end in cell 0.1: 8*(500+500)/0.1 = 80000, equal to a's
    a = (0.0, [0.1], [1000])
    b = (0.0, [0.05, 0.1], [500, 500])
    f = M.jain_per_cell([a, b], 0.1)
    assert list(f.n_active) == [2]
    assert f.jain[0] == pytest.approx(1.0)


def test_jain_per_cell_agrees_with_jain_index_per_cell():
    rng = np.random.default_rng(3)
    flows = [(s, np.round(np.arange(1, n + 1) * 0.1, 9), rng.integers(0, 5000, n).astype(float))
             for s, n in ((0.0, 40), (0.37, 30), (1.21, 15))]
    f = M.jain_per_cell(flows, 0.1)
    tl = M.throughput_timelines(flows, 0.1)
    assert f.t_s.size > 0
    for t, j in zip(f.t_s, f.jain):
        cell = tl[np.isclose(tl.t_s, t) & tl.active]
        expect = M.jain_index(cell.throughput_bps.to_numpy())
        assert (math.isnan(j) and math.isnan(expect)) or j == pytest.approx(expect)


def test_grid_rejects_bad_interval():
    with pytest.raises(ValueError):
        M.jain_per_cell([(0.0, [0.1], [1])], 0.0)


# --- per-flow timelines -----------------------------------------------------------------

def test_timeline_flow_stopping_early_shows_zero_and_inactive_afterwards():
    a = (0.0, [0.1, 0.2, 0.3, 0.4], [1000, 1000, 1000, 1000])
    b = (0.1, [0.1, 0.2], [500, 1500])                          # ends 0.2, 0.3; stops at 0.3
    tl = M.throughput_timelines([a, b], 0.1, ids=[1, 2])
    assert list(tl.columns) == ["flow", "t_s", "throughput_bps", "active"]
    assert list(tl.flow) == [1, 1, 1, 1, 2, 2, 2, 2]
    np.testing.assert_allclose(tl.t_s, [0.1, 0.2, 0.3, 0.4] * 2)
    # a: 8*1000/0.1 = 80000 per cell; b: 0 before its start, 8*500/0.1 = 40000,
    # 8*1500/0.1 = 120000, 0 after it stopped
    np.testing.assert_allclose(tl.throughput_bps, [80_000] * 4 + [0, 40_000, 120_000, 0])
    assert list(tl.active) == [True] * 4 + [False, True, True, False]


def test_timeline_rates_integrate_to_flow_bytes():
    flows = [(0.0, [0.1, 0.2, 0.3], [100, 200, 300]), (0.05, [0.1, 0.2, 0.25], [400, 500, 60])]
    tl = M.throughput_timelines(flows, 0.1)
    got = tl.groupby("flow").throughput_bps.sum() * 0.1 / 8
    assert list(got) == pytest.approx([600, 960])               # 100+200+300; 400+500+60


def test_timeline_active_rows_match_jain_cells():
    a = (0.0, [0.1, 0.2, 0.3, 0.4], [1000, 1000, 1000, 1000])
    b = (0.15, [0.1, 0.2, 0.3], [1000, 3000, 500])
    tl = M.throughput_timelines([a, b], 0.1)
    n = tl.groupby("t_s").active.sum()
    f = M.jain_per_cell([a, b], 0.1)
    np.testing.assert_allclose(n.index[n >= 2], f.t_s)
    assert list(n[n >= 2]) == list(f.n_active)


def test_timeline_default_ids_and_empty_flow():
    tl = M.throughput_timelines([(0.0, [0.1, 0.2], [1000, 1000]), (0.0, [], [])], 0.1)
    assert list(tl.flow) == [0, 0, 1, 1]
    assert list(tl.active) == [True, True, False, False]
    assert list(tl.throughput_bps) == pytest.approx([80_000, 80_000, 0, 0])


def test_timeline_no_flows_is_empty_frame_with_columns():
    tl = M.throughput_timelines([], 0.1)
    assert tl.empty and list(tl.columns) == ["flow", "t_s", "throughput_bps", "active"]


def test_timeline_rejects_ids_of_wrong_length():
    with pytest.raises(ValueError):
        M.throughput_timelines([(0.0, [0.1], [1])], 0.1, ids=[1, 2])

"""Claim checks: each type yields holds / does not hold / undecided at this budget / not
enough data, deciding only where the cells' 95 % intervals are clear of the threshold."""
import copy
import re
from dataclasses import replace

import pandas as pd
import pytest

from tcpeval.report import claims as C
from tcpeval.spec import REPO_ROOT as REPO


def _cells(hw: float = 0.05):
    """Cells as claims.cells gives them: means with half-widths (``hw`` Gbit/s on the means)."""
    rows = []
    for v, m in (("reno", 4.0), ("cubic", 4.2), ("bic", 8.0)):
        rows.append(dict(criterion="responsiveness", variant=v, second="", rtt_ms=0.2, drop=1e-4, n=5,
                         mean_gbps=m, mean_gbps_hw=hw, mean_frac=m / 10, mean_frac_hw=hw / 10))
    for v, j, s in (("bic", 0.6, 0.8), ("cubic", 0.9, 0.6)):
        rows.append(dict(criterion="compatibility", variant=v, second="reno", rtt_ms=6.2, drop=0.0, n=5,
                         jain=j, jain_hw=0.02, share_first=s, share_first_hw=0.02))
    return pd.DataFrame(rows)


def _claim(check):
    return {"id": "x", "section": "V", "paper": "p", "check": check}


@pytest.mark.parametrize("check, verdict", [
    ({"type": "best", "metric": "mean_gbps", "expect": "bic", "where": {"criterion": "responsiveness"}}, C.HOLDS),
    ({"type": "best", "metric": "mean_gbps", "expect": "cubic", "where": {"criterion": "responsiveness"}}, C.FAILS),
    ({"type": "best", "metric": "mean_gbps", "expect": "htcp", "where": {"criterion": "responsiveness"}}, C.NODATA),
    ({"type": "worst", "metric": "mean_gbps", "expect": ["reno", "cubic"], "where": {"criterion": "responsiveness"}}, C.HOLDS),
    ({"type": "at_least", "metric": "mean_frac", "threshold": {"gbps": 3.8, "of_link_gbps": 9.5},
      "where": {"criterion": "responsiveness"}}, C.UNDECIDED),   # reno 0.4 +- 0.005 against 0.4
    ({"type": "at_least", "metric": "mean_frac", "threshold": 0.5, "where": {"criterion": "responsiveness"}}, C.FAILS),
    ({"type": "at_least", "metric": "mean_frac", "threshold": 0.5, "where": {"rtt_ms": 24.2}}, C.NODATA),
    ({"type": "above", "metric": "share_first", "threshold": 0.5, "where": {"criterion": "compatibility"}}, C.HOLDS),
    ({"type": "greater", "metric": "jain", "where": {"criterion": "compatibility"},
      "a": {"variant": "cubic"}, "b": {"variant": "bic"}}, C.HOLDS),
    ({"type": "greater", "metric": "jain", "where": {"criterion": "compatibility"},
      "a": {"variant": "bic"}, "b": {"variant": "htcp"}}, C.NODATA),
    ({"type": "close", "metric": "mean_gbps", "tolerance": 0.1, "where": {"criterion": "responsiveness"},
      "a": {"variant": "cubic"}, "b": {"variant": "reno"}}, C.HOLDS),   # 4.2 vs 4.0: 4.8 %
    ({"type": "within", "metric": "mean_gbps", "tolerance": 0.05, "per": ["rtt_ms"],
      "where": {"criterion": "responsiveness"}}, C.FAILS),
])
def test_check_types(check, verdict):
    assert C.evaluate(_claim(check), _cells())[0] == verdict


@pytest.mark.parametrize("check", [
    {"type": "close", "metric": "mean_gbps", "tolerance": 0.1, "where": {"criterion": "responsiveness"},
     "a": {"variant": "cubic"}, "b": {"variant": "reno"}},     # 4.8 % apart, +- 0.3 Gbit/s each
    {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
     "a": {"variant": "cubic"}, "b": {"variant": "reno"}},
    {"type": "worst", "metric": "mean_gbps", "expect": "reno", "where": {"criterion": "responsiveness"}},
])
def test_a_check_whose_intervals_straddle_its_threshold_is_undecided(check):
    assert C.evaluate(_claim(check), _cells(hw=0.05))[0] in (C.HOLDS, C.FAILS)
    verdict, text = C.evaluate(_claim(check), _cells(hw=0.3))
    assert verdict == C.UNDECIDED and "$\\pm$" in text


def _runs(values_by_variant: dict, **extra) -> pd.DataFrame:
    rows = []
    for variant, values in values_by_variant.items():
        for rep, v in enumerate(values, start=1):
            rows.append(dict(criterion="responsiveness", variant=variant, second=None, rtt_ms=0.2, drop=1e-4,
                             rep=rep, mean_bps=v * 1e9, link_rate_bps=9.85e9, q25_bps=v * 1e9, q50_bps=v * 1e9,
                             q75_bps=v * 1e9, utilisation_bps=float("nan"), flow1_bps=float("nan"),
                             flow2_bps=float("nan"), spread_bps=float("nan"), ubar_bps=float("nan"),
                             jain=float("nan"), utilisation_frac=float("nan"), conv_time_s=float("nan"), mean_frac=v / 9.5,  # of 9.85's payload ceiling
                             **extra))
    return pd.DataFrame(rows)


def test_a_cells_interval_is_students_t_over_its_repetitions():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0, 4.6, 5.2]})
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    # by hand: sd 0.6, t(0.975, 2) = 4.302653, half-width 4.302653 * 0.6 / sqrt(3)
    assert cell["n"].iloc[0] == 3 and cell["mean_gbps"].iloc[0] == pytest.approx(4.6)
    assert cell["mean_gbps_hw"].iloc[0] == pytest.approx(4.302653 * 0.6 / 3 ** 0.5, rel=1e-5)
    assert cell["mean_frac_hw"].iloc[0] == pytest.approx(4.302653 * 0.6 / 3 ** 0.5 / 9.5, rel=1e-5)


def test_a_comparison_over_cells_of_few_repetitions_reads_their_degrees_of_freedom_together():
    from tcpeval.analysis.tables import Dataset
    # two cells a side, two repetitions each: every cell's mean is +- one standard error
    # (sd sqrt(2) over sqrt(2) runs). By hand: the sides' means 11.5 and 7.5, each
    # +- sqrt(1 + 1) / 2 = 0.7071 (se) at Welch-Satterthwaite's 0.5^2 / (2 * 0.25^2 / 1) =
    # 2 df (t 4.302653); their difference 4.0 +- 1.0 (se) at 1 / (4 * 0.25^2) = 4 df
    # (t 2.776445): 4.0 +- 2.78, clear of 0. Each cell's own quantile (t 12.706 at 1 df)
    # in quadrature would give +- 12.7: undecided.
    runs = pd.concat([_runs({v: vals}).assign(rtt_ms=rtt) for v, vals, rtt in (
        ("bic", [10.0, 12.0], 0.2), ("bic", [11.0, 13.0], 6.2), ("reno", [6.0, 8.0], 0.2), ("reno", [7.0, 9.0], 6.2))])
    cells = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert list(cells["mean_gbps_df"]) == [1.0] * 4
    a = C._mean_of(C._estimates(cells[cells["variant"] == "bic"], "mean_gbps"))
    assert a.value == pytest.approx(11.5) and a.df == pytest.approx(2.0)
    assert a.hw == pytest.approx(4.302653 * 0.5 ** 0.5, rel=1e-5)
    check = {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
             "a": {"variant": "bic"}, "b": {"variant": "reno"}}
    b = C._mean_of(C._estimates(cells[cells["variant"] == "reno"], "mean_gbps"))
    diff = a - b
    assert diff.value == pytest.approx(4.0) and diff.df == pytest.approx(4.0)
    assert diff.hw == pytest.approx(2.776445, rel=1e-5)
    assert C.evaluate(_claim(check), cells)[0] == C.HOLDS


def test_normal_intervals_still_combine_in_quadrature_and_an_unknown_one_stays_unknown():
    # the runs' own pooled intervals are read with the normal quantile (df inf): the mean of
    # two is their half-widths in quadrature over two, as before
    both = C._mean_of([C.Estimate(4.0, 0.3), C.Estimate(5.0, 0.4)])
    assert both.hw == pytest.approx(0.25) and both.df == float("inf")
    # a wide part of 1 df (se 1) beside a narrow normal one (se 1 / 1.96): by hand v =
    # 0.2603 and 1, df (1.2603)^2 / 1 = 1.588, rounded down to 1 for its quantile (12.706)
    mixed = C.Estimate(4.0, 1.0) - C.Estimate(1.0, 12.706205, df=1.0)
    assert mixed.df == pytest.approx(1.2603 ** 2, rel=1e-3)
    assert mixed.hw == pytest.approx(12.706205 * 1.2603 ** 0.5, rel=1e-4)
    assert (C.Estimate(1.0, float("inf")) - C.Estimate(0.0, 0.1)).hw == float("inf")


def test_runs_that_agree_within_their_own_intervals_pool_them():
    from tcpeval.analysis.tables import Dataset
    # two runs, each +-0.2 Gbit/s (its batch means): by hand sqrt(0.2^2 + 0.2^2) / 2 =
    # 0.1414, where Student's t over the two (1 df) gives 12.706 * 0.1414 / sqrt(2) = 1.27
    runs = _runs({"reno": [4.0, 4.2]}, mean_hw_bps=0.2e9)
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["mean_gbps"].iloc[0] == pytest.approx(4.1)
    assert cell["mean_gbps_hw"].iloc[0] == pytest.approx(0.2 * 2 ** 0.5 / 2)
    assert cell["mean_frac_hw"].iloc[0] == pytest.approx(0.2e9 * 2 ** 0.5 / 2 / C.payload_ceiling_bps(9.85e9))
    # the quartiles have no interval of their own here: Student's t over the two
    assert cell["q50_frac_hw"].iloc[0] == pytest.approx(12.706 * 0.2 / 2 ** 0.5 / 2 ** 0.5 / 9.5, rel=1e-3)


def _two_flow_runs(background_loss: float) -> pd.DataFrame:
    """Two repetitions of a CUBIC pair at drop 0, each with its own intervals."""
    return pd.DataFrame([dict(criterion="fairness", variant="cubic", second="cubic", rtt_ms=6.2, drop=0.0, rep=rep,
                              background_loss=background_loss, link_rate_bps=9.85e9, mean_bps=5e9, flow1_bps=f1 * 1e9, flow2_bps=f2 * 1e9,
                              utilisation_bps=(f1 + f2) * 1e9, jain=j, utilisation_frac=(f1 + f2) / 9.5,
                              jain_hw=0.002, utilisation_hw_bps=0.1e9, share_first_hw=0.01,
                              **dict.fromkeys(("q25_bps", "q50_bps", "q75_bps", "spread_bps", "ubar_bps",
                                               "conv_time_s", "mean_frac"), float("nan")))
                         for rep, (f1, f2, j) in enumerate([(4.7, 4.6, 0.9999), (4.65, 4.7, 0.99997)], start=1)])


def test_two_flow_runs_pool_their_own_intervals_of_jain_utilisation_and_share():
    from tcpeval.analysis.tables import Dataset
    # the ring's losses make each repetition a run of its own
    runs = _two_flow_runs(background_loss=2.2e-8)
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert not cell["replays"].iloc[0]
    # each by hand: sqrt(hw^2 + hw^2) / 2, where Student's t over two would be 12.7 standard errors
    assert cell["jain_hw"].iloc[0] == pytest.approx(0.002 * 2 ** 0.5 / 2)
    assert cell["utilisation_gbps_hw"].iloc[0] == pytest.approx(0.1 * 2 ** 0.5 / 2)
    assert cell["utilisation_frac_hw"].iloc[0] == pytest.approx(0.1e9 * 2 ** 0.5 / 2 / C.payload_ceiling_bps(9.85e9))
    assert cell["share_first_hw"].iloc[0] == pytest.approx(0.01 * 2 ** 0.5 / 2)


def test_one_two_flow_run_does_not_stand_alone_for_how_the_link_is_split():
    from tcpeval.analysis.tables import Dataset
    # where slow start leaves two flows sets their split for the run: CUBIC beside Reno at
    # 6.2 ms read 39.5 +- 2.7 % in one run, 55-65 % in three others. One run's own interval
    # of Jain's index and the share is no interval of the cell; its utilisation's still is
    pairs = _two_flow_runs(background_loss=2.2e-8)
    one = C.cells(Dataset(runs=pairs[pairs["rep"] == 1], flows=pd.DataFrame(), expected=pd.DataFrame(),
                          include_flagged=False))
    assert one["jain_hw"].iloc[0] == float("inf") and one["share_first_hw"].iloc[0] == float("inf")
    assert one["utilisation_gbps_hw"].iloc[0] == pytest.approx(0.1)
    claim = _claim({"type": "at_least", "metric": "jain", "threshold": 0.99, "where": {"criterion": "fairness"}})
    verdict, text = C.evaluate(claim, one)
    assert verdict == C.UNDECIDED and "need a second repetition" in text
    assert [c["variant"] for c in C.contested(claim, one)] == ["cubic"]
    # a second run that agrees decides it, on the two runs' own intervals pooled
    two = C.cells(Dataset(runs=pairs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert two["jain_hw"].iloc[0] == pytest.approx(0.002 * 2 ** 0.5 / 2)
    assert C.evaluate(claim, two)[0] == C.HOLDS


def test_repetitions_with_nothing_random_in_them_count_as_one_run():
    from tcpeval.analysis.tables import Dataset
    # drop 0 and no background loss: the emulator replays the run (Reno/Reno at 6.2 ms, twice:
    # convergence 1.700 s both), so the two are one run's worth: the wider of their own
    # intervals, not sqrt(2) narrower, and no Student's t over them
    runs = _two_flow_runs(background_loss=0.0)
    runs["conv_time_s"] = [1.70, 1.70]
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["replays"].iloc[0] and cell["n"].iloc[0] == 2
    assert cell["jain_hw"].iloc[0] == pytest.approx(0.002)
    assert cell["share_first_hw"].iloc[0] == pytest.approx(0.01)
    assert cell["conv_time_s_hw"].iloc[0] == float("inf")   # sd 0 would give 0 +- 0


def test_a_check_undecided_on_replaying_cells_asks_for_no_repetitions_and_plans_none():
    from tcpeval.analysis.tables import Dataset
    runs = pd.concat([_two_flow_runs(0.0).assign(criterion="convergence", rtt_ms=rtt, conv_time_s=t)
                      for rtt, t in ((6.2, 3.9), (24.2, 4.1))], ignore_index=True)
    cells = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    claim = _claim({"type": "greater", "metric": "conv_time_s", "where": {"criterion": "convergence"},
                    "a": {"rtt_ms": 6.2}, "b": {"rtt_ms": 24.2}})
    verdict, text = C.evaluate(claim, cells)
    assert verdict == C.UNDECIDED
    assert "replay one another, so no number of them decides it" in text
    assert C.contested(claim, cells) == []
    # one run a cell with the ring's losses: a second repetition would give the interval
    one = C.cells(Dataset(runs=runs[runs["rep"] == 1].assign(background_loss=2.2e-8), flows=pd.DataFrame(),
                          expected=pd.DataFrame(), include_flagged=False))
    assert "need a second repetition" in C.evaluate(claim, one)[1]
    # with the ring's losses the same runs are repetitions: both sides are contested
    random = C.cells(Dataset(runs=runs.assign(background_loss=2.2e-8), flows=pd.DataFrame(),
                             expected=pd.DataFrame(), include_flagged=False))
    assert "replay" not in C.evaluate(claim, random)[1]
    assert [c["rtt_ms"] for c in C.contested(claim, random)] == [6.2, 24.2]


def test_runs_that_differ_beyond_their_own_intervals_keep_students_t():
    from tcpeval.analysis.tables import Dataset
    # 4.0 and 5.0, each +-0.2 (se 0.102): Cochran's Q = 2 * (0.5 / 0.102)^2 = 48 > 3.84
    runs = _runs({"reno": [4.0, 5.0]}, mean_hw_bps=0.2e9)
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["mean_gbps_hw"].iloc[0] == pytest.approx(12.706 * 0.5 ** 0.5 / 2 ** 0.5, rel=1e-3)


@pytest.mark.parametrize("values, hws, expected", [
    ([4.0, 4.2], [0.2, 0.2], 0.2 * 2 ** 0.5 / 2),
    ([4.0, 4.2, 4.1], [0.3, 0.2, 0.1], (0.09 + 0.04 + 0.01) ** 0.5 / 3),
    ([4.0], [0.2], 0.2),
    ([4.0, 4.5], [0.2, 0.2], float("inf")),       # Q = 2 * (0.25 / 0.102)^2 = 12.0 > 3.84
    ([4.0, 4.2], [0.2, float("inf")], float("inf")),   # a run without its own interval
    ([4.0, 4.2], [0.2, float("nan")], float("inf")),
])
def test_pooled_half_width_by_hand(values, hws, expected):
    import numpy as np
    got = C.pooled_half_width(np.array(values), np.array(hws))
    assert got == pytest.approx(expected)
    if len(values) == 1:   # a metric set by the start: one run's interval is not the cell's,
        assert C.pooled_half_width(np.array(values), np.array(hws), alone=False) == float("inf")
        # unless a second run would replay it
        assert C.pooled_half_width(np.array(values), np.array(hws), alone=False, replayed=True) == expected


def test_a_throughput_below_one_gbit_reads_in_mbit_with_its_half_width():
    # Scalable at 6.2 ms, 1e-2: in Gbit/s it read "0.04 +- 0.00", hiding both figures
    assert C._fmt("mean_gbps", 0.0404, 0.0018) == "40.4\\,$\\pm$\\,1.8\\,Mbit/s"
    assert C._fmt("mean_gbps", 9.41, 0.02) == "9.41\\,$\\pm$\\,0.02\\,Gbit/s"


def test_chi2_critical_matches_the_tables():
    # 95 %: 3.841 (exact at df 1), 5.991, 7.815, 16.919 (Wilson-Hilferty within 1 %)
    assert C.chi2_critical(0.95, 1) == pytest.approx(3.841459, rel=1e-5)
    for df, table in ((2, 5.991), (3, 7.815), (9, 16.919)):
        assert C.chi2_critical(0.95, df) == pytest.approx(table, rel=0.01)


def test_a_cell_of_one_run_takes_its_own_interval_for_the_mean_and_none_for_the_rest():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0]}, mean_hw_bps=0.2e9)
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["mean_gbps_hw"].iloc[0] == pytest.approx(0.2)
    assert cell["q50_frac_hw"].iloc[0] == float("inf")
    check = {"type": "at_least", "metric": "mean_gbps", "threshold": 3.5, "where": {"criterion": "responsiveness"}}
    assert C.evaluate(_claim(check), cell)[0] == C.HOLDS          # 4.0 - 0.2 >= 3.5
    check["metric"] = "q50_frac"
    assert C.evaluate(_claim(check), cell)[0] == C.UNDECIDED      # no interval: cannot decide


def test_shipped_claims_load_and_evaluate(smoke_results, design):
    from tcpeval.analysis import tables

    claims = C.load_claims(REPO / "paper" / "claims.yaml")
    assert len(claims) >= 15
    ds = tables.load(smoke_results, design, "smoke", "emulated")
    verdicts = C.check_all(claims, ds)
    kinds = {v.verdict for v in verdicts}
    assert C.NODATA in kinds                    # smoke lacks most RTTs and drops
    assert kinds <= set(C.VERDICTS)             # one run of 4 s per cell: few are decided
    assert "longtable" in C.table(verdicts)


def test_unknown_selection_key_is_an_error():
    with pytest.raises(C.ClaimError):
        C.evaluate(_claim({"type": "best", "metric": "mean_gbps", "expect": "bic", "where": {"colour": 1}}), _cells())


def test_verdicts_by_campaign_have_a_column_per_campaign_with_results(smoke_results, tmp_path):
    from tcpeval.cli import main

    out = tmp_path / "by.tex"
    assert main(["claims", "--results", str(smoke_results), "--claims", "paper/claims.yaml",
                 "--out-tex", str(tmp_path / "c.tex"), "--also", "quick",
                 "--out-campaigns-tex", str(out)]) == 0
    text = out.read_text()
    assert "Finding & \\texttt{smoke}" in text and "quick}" not in text.split("\\midrule")[0]  # quick: no results
    assert "Campaigns without results for this backend: \\texttt{quick}." in text
    n_claims = len(C.load_claims("paper/claims.yaml"))
    findings_table = text.split("\\end{longtable}")[0]
    assert findings_table.count("\\\\\n") - 1 == n_claims     # header + one row per claim
    # the lead names the columns at the paper's scale (the synthetic smoke traces are on
    # the paper's link, 9.85 Gbit/s of frames); the scale table has smoke's row
    assert text.startswith("Verdicts at the paper's scale come first (\\texttt{smoke}")
    scale_row = next(line for line in text.splitlines() if line.startswith("\\texttt{smoke} & "))
    link, k, ran, reps, runs = scale_row.removesuffix(" \\\\").split(" & ")[1:]
    assert link == "9.85" and reps == "1" and int(runs) > 0


def test_a_campaigns_scale_is_its_link_dilation_run_lengths_and_repetitions():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0, 4.1], "bic": [8.0, 8.1, 8.2]})
    runs["dilation"] = [10, 10, 10, 12, 12]
    runs["duration_s"] = 300.0
    runs["ran_s"] = [30.5, 42.0, 300.0, 300.0, 61.5]
    runs["stopped_early"] = [True, True, False, False, True]
    scale = C.campaign_scale(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(),
                                     include_flagged=False))
    assert scale.cells() == ["9.85", "10--12", "30--300 (3 stopped early)", "2--3", "5"]
    text = C.by_campaign({"findings": [], "smoke": []}, [], ["findings"], {"findings": scale, "smoke": None})
    assert text.startswith("Verdicts at the paper's scale come first (\\texttt{findings}")
    assert "\\texttt{findings} & 9.85 & 10--12 & 30--300 (3 stopped early) & 2--3 & 5 \\\\" in text


def test_the_table_says_whether_the_campaign_ran_at_the_papers_scale():
    from tcpeval.analysis.tables import Dataset
    claims = C.load_claims(REPO / "paper" / "claims.yaml")
    assert C.paper_link_gbps(claims) == 9.5

    def note(link_bps):
        runs = _runs({"reno": [4.0]})
        runs["link_rate_bps"] = link_bps
        ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
        return C.scale_note(ds, claims)

    # the paper's 9.5 Gbit/s is its NICs' payload ceiling: a 9.85 Gbit/s link (frames)
    assert note(9.85e9).startswith("At the paper's scale") and "(9.50\\,Gbit/s)" in note(9.85e9)
    assert "Not the paper's scale" in note(9.5e9) and "9.16\\,Gbit/s of payload" in note(9.5e9)
    assert "Not the paper's scale" in note(0.8e9) and "0.8\\,Gbit/s" in note(0.8e9)
    assert C.table([], note(0.8e9)).startswith(note(0.8e9))


def test_a_claim_reading_a_cell_planned_but_not_run_is_undecided_at_this_budget():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0, 4.1], "bic": [8.0, 8.1]})
    ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
    claim = _claim({"type": "best", "metric": "mean_gbps", "expect": "bic", "where": {"criterion": "responsiveness"}})
    assert C.check_all([claim], ds)[0].verdict == C.HOLDS
    unrun = [{"criterion": "responsiveness", "variant": "htcp", "second": "", "rtt_ms": 0.2, "drop": 1e-4,
              "needed_s": 7044.0, "max_s": 300.0}]
    v = C.check_all([claim], ds, unrun)[0]
    assert v.verdict == C.UNDECIDED and v.ours.startswith("1 cell(s) not run at this budget (up to 117")
    elsewhere = [{**unrun[0], "rtt_ms": 24.2}]
    assert C.check_all([{**claim, "check": {**claim["check"], "where": {"rtt_ms": 0.2}}}], ds,
                       elsewhere)[0].verdict == C.HOLDS


def test_a_cell_of_one_run_takes_its_own_quartile_intervals_where_the_run_has_them():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0]}, mean_hw_bps=0.2e9, q50_hw_bps=0.38e9)
    cell = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    assert cell["q50_frac_hw"].iloc[0] == pytest.approx(0.04, rel=1e-3)   # 0.38 of 9.5 Gbit/s of payload


def test_a_two_flow_finding_over_runs_shorter_than_ten_sawtooth_cycles_says_its_horizon():
    from tcpeval.analysis.tables import Dataset
    # a Reno pair's cycle, by hand: 9.5 Gbit/s of payload x 12.2 ms / 8 / 1460 B = 9,923
    # segments, as many RTTs of 1.5 x 12.2 ms: 181.6 s; at 0.2 ms 163 x 0.3 ms = 49 ms
    assert C.mathis.reno_pair_cycle_s(12.2, 9.5e9 / C.payload_ceiling_bps(1.0)) == pytest.approx(181.6, abs=0.1)
    assert C.mathis.reno_pair_cycle_s(0.2, 9.5e9 / C.payload_ceiling_bps(1.0)) == pytest.approx(0.0488, abs=1e-4)
    claim = {**_claim({"type": "at_least", "metric": "jain", "threshold": 0.96, "where": {"criterion": "fairness"}}),
             "id": "fair"}
    for rtt_ms, note in ((12.2, "a 60-s run holds 0.33 of a Reno pair's 3.0-min sawtooth cycle at 12.2\\,ms "
                                "(15\\,min: 5)"), (0.2, None)):
        runs = _two_flow_runs(background_loss=2.2e-8).assign(rtt_ms=rtt_ms, duration_s=60.0)
        ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
        (verdict,) = C.check_all([claim], ds)
        assert verdict.verdict == C.HOLDS
        assert (note in verdict.ours) if note else ("horizon" not in verdict.ours), verdict.ours
    # a finding on one flow's mean has no such horizon
    mean_claim = {**claim, "check": {**claim["check"], "metric": "mean_gbps", "threshold": 1.0}}
    assert C.horizon_note(mean_claim, C.cells(ds)) == ""


def _dataset(values_by_variant):
    from tcpeval.analysis.tables import Dataset
    return Dataset(runs=_runs(values_by_variant), flows=pd.DataFrame(), expected=pd.DataFrame(),
                   include_flagged=False)


BIC_BEST = {"id": "bic-best", "section": "V", "paper": "BIC has the highest mean at 0.2 ms, 1e-4.",
            "check": {"type": "best", "metric": "mean_gbps", "expect": "bic",
                      "where": {"criterion": "responsiveness", "rtt_ms": 0.2, "drop": 1e-4}}}
RENO_BEST = {"id": "reno-best", "section": "V", "paper": "Reno has the highest mean at 0.2 ms, 1e-4.",
             "check": {**BIC_BEST["check"], "expect": "reno"}}


def test_a_finding_that_fails_where_the_model_supports_it_points_at_the_emulator():
    # our (made-up) runs put Reno above BIC; the model gives BIC the link, Reno Mathis' ~5.1
    ds = _dataset({"reno": [5.0, 5.1, 5.2], "bic": [4.0, 4.1, 4.2]})
    verdict = C.check_all([BIC_BEST], ds)[0]
    assert verdict.verdict == C.FAILS and verdict.model == C.HOLDS
    assert "BIC" in verdict.model_text
    text = C.table([verdict])
    assert "Response model" in text and "emulator or the port is suspect" in text


def test_a_finding_that_fails_with_the_model_too_is_the_papers_not_the_emulators():
    ds = _dataset({"reno": [5.0, 5.1, 5.2], "bic": [9.3, 9.4, 9.4]})
    verdict = C.check_all([RENO_BEST], ds)[0]
    assert verdict.verdict == C.FAILS and verdict.model == C.FAILS
    assert "does not support the published finding either" in C.table([verdict])


def test_findings_on_metrics_the_model_lacks_get_no_model_verdict():
    jain = {"id": "j", "section": "V", "paper": "p", "check": {
        "type": "at_least", "metric": "jain", "threshold": 0.9, "where": {"criterion": "responsiveness"}}}
    verdict = C.check_all([jain], _dataset({"reno": [5.0, 5.1]}))[0]
    assert verdict.model == "" and verdict.model_text == ""


@pytest.mark.parametrize("check, reps", [
    # |diff| 0.2, half-width hypot(0.3, 0.3) from 5 runs: 5 (0.424 / 0.2)^2 = 22.5
    ({"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
      "a": {"variant": "cubic"}, "b": {"variant": "reno"}}, 23),
    ({"type": "worst", "metric": "mean_gbps", "expect": "reno", "where": {"criterion": "responsiveness"}}, 23),
    # 4.8 % apart against 10 %: the distance to decide is 0.42 - 0.2 = 0.22: 5 (0.424 / 0.22)^2 = 18.6
    ({"type": "close", "metric": "mean_gbps", "tolerance": 0.1, "where": {"criterion": "responsiveness"},
      "a": {"variant": "cubic"}, "b": {"variant": "reno"}}, 19),
])
def test_an_undecided_check_says_how_many_repetitions_would_decide_it(check, reps):
    verdict, text = C.evaluate(_claim(check), _cells(hw=0.3))
    assert verdict == C.UNDECIDED and f"about {reps} repetitions a cell would decide it" in text
    assert "repetitions" not in C.evaluate(_claim(check), _cells(hw=0.05))[1]   # decided: no note


def test_the_repetitions_count_lets_the_t_quantile_shrink_with_them():
    # fair-12.2-high on 2026-12-07: H-TCP's pairs at 0.964 and 0.991 against 0.96, an
    # interval from two repetitions drawn at one degree of freedom (t 12.7); keeping that
    # quantile the count was about 187
    from statistics import stdev

    from tcpeval.precision import t_critical
    jains = [0.964, 0.991]
    s = stdev(jains)
    hw, gap = t_critical(0.95, 1) * s / 2 ** 0.5, sum(jains) / 2 - 0.96
    m = C.reps_to_decide(gap, hw, 2, df=1)
    assert 2 * (hw / gap) ** 2 > 180 and m < 10
    # the least m whose own interval clears the gap, if the spread holds
    assert t_critical(0.95, int(m) - 1) * s / m ** 0.5 <= gap < t_critical(0.95, int(m) - 2) * s / (m - 1) ** 0.5
    # a normal quantile (intervals pooled from the runs' own batches) has nothing to shrink
    assert C.reps_to_decide(0.2, 0.424, 5) == C.reps_to_decide(0.2, 0.424, 5, df=float("inf")) == 23
    # one repetition more is the least it can say, and no interval or no gap: no count
    assert C.reps_to_decide(0.5, 0.1, 3, df=2) == 4
    assert C.reps_to_decide(0.0, 0.1, 3, df=2) == C.reps_to_decide(0.1, float("inf"), 3) == float("inf")


def test_a_tie_is_named_rather_than_given_thousands_of_repetitions():
    # |diff| 0.01 against a half-width of hypot(0.3, 0.3) from 5 runs: 5 (0.4243 / 0.01)^2 = 9,000
    cells = _cells(hw=0.3)
    cells.loc[cells["variant"] == "cubic", "mean_gbps"] = 4.01
    check = {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
             "a": {"variant": "cubic"}, "b": {"variant": "reno"}}
    verdict, text = C.evaluate(_claim(check), cells)
    assert verdict == C.UNDECIDED
    assert re.search(r"over 100 repetitions a cell would decide it \(about 900[01]\): .*any practical budget", text)


def test_a_line_rate_finding_is_read_against_the_links_payload_ceiling():
    # the original's "9.48 of the 9.5 Gbit/s available" is payload against its NICs' payload
    # ceiling; loss-free runs on the paper's link (9.85 Gbit/s of frames) carry 1460/1514 of it
    claim = {"id": "line-rate", "section": "V", "paper": "p", "check": {
        "type": "at_least", "metric": "mean_frac", "threshold": {"gbps": 9.48, "of_link_gbps": 9.5},
        "where": {"criterion": "responsiveness"}}}
    from tcpeval.analysis.tables import Dataset

    def verdict(link_bps, gbps):
        runs = _runs({"reno": gbps, "bic": gbps})
        runs["drop"], runs["link_rate_bps"] = 0.0, link_bps
        # loss-free repetitions replay one another: each run's own interval decides
        runs["mean_hw_bps"] = link_bps * 1e-4
        runs["payload_ceiling_bps"] = link_bps * 1460 / 1514
        runs["mean_frac"] = runs["mean_bps"] / runs["payload_ceiling_bps"]
        return C.check_all([claim], Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(),
                                            include_flagged=False))[0]

    at_ceiling = verdict(9.85e9, [9.495, 9.497])
    assert at_ceiling.verdict == C.HOLDS and at_ceiling.model == C.HOLDS and at_ceiling.model_link_limited
    # a scaled campaign: the same fractions of a 0.8 Gbit/s link's 0.771 of payload
    assert verdict(0.8e9, [0.7712, 0.7713]).verdict == C.HOLDS
    # 98 % of the ceiling is not the line rate
    assert verdict(9.85e9, [9.30, 9.31]).verdict == C.FAILS


def test_the_models_figure_at_the_payload_ceiling_is_exact_and_below_it_has_the_models_precision():
    grid = pd.DataFrame([dict(criterion="responsiveness", variant="bic", second="", rtt_ms=0.2, drop=d, n=1,
                              link_gbps=9.85) for d in (0.0, 1e-7, 1e-3)])
    claim = _claim({"type": "at_least", "metric": "mean_frac", "threshold": 0.5,
                    "where": {"criterion": "responsiveness"}})
    cells = C.model_cells(grid, [claim]).set_index("drop")
    # no loss, and a loss so rare the window never leaves the ceiling: the ceiling itself
    for d in (0.0, 1e-7):
        assert cells.loc[d, "mean_frac"] == pytest.approx(1.0) and cells.loc[d, "mean_frac_hw"] == 0.0
    assert cells.loc[1e-3, "mean_frac"] < 0.9
    assert cells.loc[1e-3, "mean_frac_hw"] == pytest.approx(C.MODEL_RELATIVE_HW * cells.loc[1e-3, "mean_frac"])


def test_a_findings_budget_is_the_cells_runs_and_time_it_read():
    from tcpeval.analysis.tables import Dataset
    runs = _runs({"reno": [4.0, 4.1], "bic": [8.0, 8.1, 8.2]})
    runs["duration_s"] = 300.0
    runs["ran_s"] = [30.5, 42.0, float("nan"), 300.0, 61.5]      # nan: a fixed-length run
    runs["wall_s"] = [200.0, 290.0, 2100.0, 2100.0, 430.0]
    runs["attempts"] = [1, 3, 1, 1, 2]
    df = C.cells(Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False))
    reno_only = {"type": "at_least", "metric": "mean_gbps", "threshold": 3.0,
                 "where": {"criterion": "responsiveness", "variant": "reno"}}
    assert C.budget(_claim(reno_only), df) == dict(cells=1, runs=2, virtual_s=72.5, wall_s=490.0, attempts=4)
    both = {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
            "a": {"variant": "bic"}, "b": {"variant": "reno"}}
    assert C.budget(_claim(both), df) == dict(cells=2, runs=5, virtual_s=734.0, wall_s=5120.0, attempts=8)
    verdict = C.check_all([_claim(both)], Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(),
                                                  include_flagged=False))[0]
    assert (verdict.verdict, verdict.runs, verdict.virtual_s) == (C.HOLDS, 5, 734.0)
    row = C.budget_table([replace(verdict, campaign="findings")]).splitlines()[1].split()
    assert row[:7] == ["x", "findings", "2", "5", "734", "1.42", "8"] and row[7] == "holds:"
    assert "\\" not in " ".join(row) and "+-" in row    # the verdict's text without its LaTeX


def test_the_manuscript_leads_with_the_verdict_at_the_papers_scale_where_one_has_the_cells():
    def v(cid, verdict, ours):
        return C.Verdict(cid, "V", "p", "", verdict, ours)
    columns = {"smoke": [v("a", C.HOLDS, "smoke a"), v("b", C.FAILS, "smoke b"), v("c", C.UNDECIDED, "smoke c")],
               "findings": [v("a", C.FAILS, "findings a"), v("b", C.NODATA, "no runs"), v("c", C.HOLDS, "findings c")],
               "paper": [v("a", C.HOLDS, "paper a"), v("b", C.NODATA, "no runs"), v("c", C.FAILS, "paper c")]}
    lead = C.lead(columns, "smoke", ["findings", "paper"])
    assert [(x.verdict, x.campaign, x.at_scale) for x in lead] == [
        (C.FAILS, "findings", True), (C.FAILS, "smoke", False), (C.HOLDS, "findings", True)]
    text = C.table(lead, built="smoke")
    assert text.startswith("\\textbf{Led by the paper's scale:} 2 of 3 findings are judged on \\texttt{findings}")
    assert "\\texttt{findings}$^*$: findings a" in text and "& smoke b &" in text
    # built from the campaign at the paper's scale itself: no lead sentence, no names in rows
    own = C.lead({"findings": columns["findings"]}, "findings", ["findings"])
    assert "Led by" not in C.table(own, built="findings") and "$^*$:" not in C.table(own, built="findings")


def _responsiveness_runs(variants, reps=2, drops=(1e-4, 1e-3)):
    """The Conditions of a findings-like campaign: each variant at 0.2 ms and ``drops``."""
    from tcpeval.condition import Condition, Flow
    return [Condition(backend="emulated", campaign="findings", criterion="responsiveness",
                      flows=(Flow(variant=v),), rtt_ms=0.2, drop=d, rep=rep, duration_s=30.0, interval_s=0.1)
            for v in variants for d in drops for rep in range(1, reps + 1)]


def test_the_next_round_adds_a_repetition_only_to_the_cells_of_undecided_findings():
    from tcpeval.analysis.tables import Dataset
    runs = _responsiveness_runs(["reno", "cubic", "bic"])
    # at 1e-4 BIC is clear of Reno (decided); at 1e-3 Reno and CUBIC are 1 % apart with
    # +-5 % each (undecided)
    low, high = _runs({"reno": [4.0], "bic": [8.0]}), _runs({"reno": [4.0], "cubic": [4.04]})
    high["drop"] = 1e-3
    ds = Dataset(runs=pd.concat([low, high], ignore_index=True).assign(mean_hw_bps=0.2e9), flows=pd.DataFrame(),
                 expected=pd.DataFrame(), include_flagged=False)
    decided = {**BIC_BEST, "check": {**BIC_BEST["check"], "where": {"criterion": "responsiveness", "drop": 1e-4}}}
    reno_vs_cubic = {"id": "reno-cubic", "section": "V", "paper": "p",
                     "check": {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness",
                                                                                  "drop": 1e-3},
                               "a": {"variant": "cubic"}, "b": {"variant": "reno"}}}
    claims = [decided, reno_vs_cubic]
    verdicts = C.check_all(claims, ds)
    assert [v.verdict for v in verdicts] == [C.HOLDS, C.UNDECIDED]
    done = {("reno", 1e-3, 1), ("cubic", 1e-3, 1), ("reno", 1e-4, 1), ("bic", 1e-4, 1)}

    def is_done(run):
        return (run.flows[0].variant, run.drop, run.rep) in done
    nxt = C.next_round(claims, verdicts, runs, is_done)
    # the undecided finding's two cells, at their second repetition; nothing for BIC's
    assert sorted((r.flows[0].variant, r.drop, r.rep) for r in nxt) == [("cubic", 1e-3, 2), ("reno", 1e-3, 2)]
    # a cell whose first repetition is missing asks for that one first
    done.discard(("cubic", 1e-3, 1))
    assert ("cubic", 1e-3, 1) in {(r.flows[0].variant, r.drop, r.rep) for r in C.next_round(claims, verdicts, runs, is_done)}
    # every repetition done: nothing more; a finding that reads a cell not run: nothing for it
    assert C.next_round(claims, verdicts, runs, lambda run: True) == []
    unrun = [{"criterion": "responsiveness", "variant": "cubic", "second": "", "rtt_ms": 24.2, "drop": 1e-3,
              "needed_s": 7044.0, "max_s": 300.0}]
    elsewhere = {**reno_vs_cubic, "check": {**reno_vs_cubic["check"], "where": {"drop": 1e-3}}}
    claims = [decided, elsewhere]   # now it reads CUBIC at 24.2 ms too, which no run gives
    assert C.next_round(claims, C.check_all(claims, ds, unrun), runs, is_done, unrun) == []


def test_a_finding_that_fails_on_the_cells_run_stands_though_others_are_not_run():
    # "every cell at least 4.1 Gbit/s" reads a cell the campaign plans but does not run (the
    # findings' pairs at 12.2 and 24.2 ms): no such cell can make it hold, so a clear
    # failure on the cells run is a verdict, and an open one asks only for the cells that
    # could show the failure; "greater" (a mean over its cells) stays undecided either way
    from tcpeval.analysis.tables import Dataset
    unrun = [{"criterion": "responsiveness", "variant": "reno", "second": "", "rtt_ms": 24.2, "drop": 1e-4,
              "needed_s": 7044.0, "max_s": 300.0}]
    every = _claim({"type": "at_least", "metric": "mean_gbps", "threshold": 4.1, "where": {"drop": 1e-4}})

    def dataset(reno_gbps):
        return Dataset(runs=_runs({"reno": [reno_gbps], "bic": [8.0]}).assign(mean_hw_bps=0.2e9),
                       flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
    (clear,) = C.check_all([every], dataset(3.0), unrun)
    assert clear.verdict == C.FAILS, clear.ours
    assert clear.ours.endswith("1 cell(s) not run at this budget (up to 117\\,min each needed, "
                               "5\\,min allowed), which cannot make it hold"), clear.ours
    (open_,) = C.check_all([every], dataset(4.0), unrun)   # Reno 4.0 +- 0.2 against 4.1
    assert open_.verdict == C.UNDECIDED and open_.ours.startswith("1 cell(s) not run at this budget")
    assert [(c["variant"], c["drop"]) for c in open_.contested] == [("reno", 1e-4)]
    runs = _responsiveness_runs(["reno", "bic"], drops=(1e-4,))
    nxt = C.next_round([every], [open_], runs, lambda run: run.rep == 1, unrun)
    assert [(r.flows[0].variant, r.rep) for r in nxt] == [("reno", 2)]   # not BIC's, clear of 4.1
    greater = _claim({"type": "greater", "metric": "mean_gbps", "where": {"drop": 1e-4},
                      "a": {"variant": "reno"}, "b": {"variant": "bic"}})
    (either,) = C.check_all([greater], dataset(3.0), unrun)
    assert either.verdict == C.UNDECIDED and not either.contested
    assert C.next_round([greater], [either], runs, lambda run: run.rep == 1, unrun) == []


def test_the_next_round_lists_first_the_finding_that_needs_the_fewest_runs():
    # the round of 2026-12-07 put three Reno/Scalable pairs that spoiled their attempts ahead
    # of a finding five runs from decided, and thirty-two convergence runs after; under a
    # deadline the finding nearest to decided goes first, and a cell two findings share counts
    # for the second only if it is not listed yet
    runs = _responsiveness_runs(["reno", "cubic", "bic", "htcp"], reps=3)

    def claim(cid, variants, drop):
        where = {"criterion": "responsiveness", "drop": drop}
        return ({"id": cid, "section": "V", "paper": "p", "check": {"type": "greater", "metric": "mean_gbps",
                                                                    "where": where}},
                C.Verdict(cid, "V", "p", "", C.UNDECIDED, "open",
                          contested=[{**where, "variant": v} for v in variants]))
    wide = claim("wide", ["reno", "cubic", "bic"], 1e-3)
    narrow = claim("narrow", ["htcp"], 1e-4)
    shared = claim("shared", ["reno", "htcp"], 1e-3)
    pairs = [wide, narrow, shared]
    nxt = C.next_round([c for c, _ in pairs], [v for _, v in pairs], runs, lambda run: run.rep == 1)
    assert [(r.flows[0].variant, r.drop) for r in nxt] == [
        ("htcp", 1e-4),                                   # narrow: one run
        ("reno", 1e-3), ("htcp", 1e-3),                   # shared: two
        ("cubic", 1e-3), ("bic", 1e-3)]                   # wide: its Reno already listed
    assert {r.rep for r in nxt} == {2}
    # the same runs as a union of the findings' cells, whatever the order
    assert len(C.next_round([wide[0], shared[0]], [wide[1], shared[1]], runs, lambda run: run.rep == 1)) == 4


def test_the_next_round_repeats_nothing_for_a_finding_held_open_by_cells_that_replay():
    from tcpeval.analysis.tables import Dataset
    # drop 0, no background loss: Scalable 4 % below Reno, +-0.4 each; "within 5 %" is
    # open, and a second run of either cell would replay the first (the night of
    # 2026-12-06 ran ten such second runs, a quarter of an hour, for nothing)
    runs = _runs({"reno": [9.48], "scalable": [9.10]}, mean_hw_bps=0.4e9).assign(drop=0.0)
    ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
    claim = {"id": "no-loss", "section": "VI", "paper": "p",
             "check": {"type": "within", "metric": "mean_gbps", "where": {"criterion": "responsiveness", "drop": 0},
                       "per": ["rtt_ms"], "tolerance": 0.05}}
    verdict, = C.check_all([claim], ds)
    assert verdict.verdict == C.UNDECIDED
    assert verdict.contested == [] and sorted(c["variant"] for c in verdict.replaying) == ["reno", "scalable"]
    # and its text says so, as the other checks' do
    assert "replay one another, so no number of them decides it" in verdict.ours
    conditions = _responsiveness_runs(["reno", "scalable"], reps=3, drops=(0.0,))
    assert C.next_round([claim], [verdict], conditions, lambda run: run.rep == 1) == []
    # the same cells with something random in them (a lossy path) are repeated
    lossy = C.check_all([claim], Dataset(runs=runs.assign(background_loss=2.2e-8), flows=pd.DataFrame(),
                                         expected=pd.DataFrame(), include_flagged=False))
    assert sorted((r.flows[0].variant, r.rep) for r in C.next_round([claim], lossy, conditions,
                                                                   lambda run: run.rep == 1)) == [("reno", 2), ("scalable", 2)]


def test_a_cell_without_an_interval_of_its_own_asks_for_a_second_repetition_not_thousands():
    """Six same-variant pairs at Jain 1.000, three of them single runs without an interval
    (the 0.2-ms slice's first round, 2026-11-29): +-0.5, the index's range, stood in and
    the note said 'about 2714' repetitions."""
    nan = float("nan")
    cells = pd.DataFrame([dict(criterion="fairness", variant=v, second=v, rtt_ms=0.2, drop=0.0, n=1, n_flows=2,
                               jain=1.0, jain_hw=h) for v, h in (("reno", 0.001), ("bic", nan), ("htcp", nan))])
    check = {"type": "at_least", "metric": "jain", "threshold": 0.99, "where": {"criterion": "fairness"}}
    verdict, text = C.evaluate(_claim(check), cells)
    assert verdict == C.UNDECIDED
    assert "need a second repetition before a count can be told" in text and "about" not in text
    pair = {"type": "greater", "metric": "jain", "where": {"criterion": "fairness"},
            "a": {"variant": "bic"}, "b": {"variant": "htcp"}}
    assert "need a second repetition" in C.evaluate(_claim(pair), cells)[1]


def _cell_rows(means_hw: dict, criterion="responsiveness", metric="mean_gbps"):
    """Cells as claims.cells gives them, at 0.2 ms and 1e-5: {variant: (mean, half-width)}."""
    return pd.DataFrame([dict(criterion=criterion, variant=v, second="", rtt_ms=0.2, drop=1e-5, n=3,
                              **{metric: m, f"{metric}_hw": hw}) for v, (m, hw) in means_hw.items()])


def test_the_contested_cells_of_a_threshold_check_are_those_whose_interval_straddles_it():
    df = _cell_rows({"reno": (9.0, 0.2), "cubic": (8.5, 1.0), "bic": (9.4, 0.05)})
    claim = _claim({"type": "at_least", "metric": "mean_gbps", "threshold": 9.1,
                    "where": {"criterion": "responsiveness"}})
    # reno (8.8-9.2) and cubic (7.5-9.5) straddle 9.1; bic (9.35-9.45) is clear of it
    assert C.evaluate(claim, df)[0] == C.UNDECIDED
    assert sorted(c["variant"] for c in C.contested(claim, df)) == ["cubic", "reno"]


def test_the_contested_cells_of_a_ranking_are_the_contenders_for_its_place():
    # lowest: reno 8.4 +- 0.3 and htcp 8.5 +- 0.4 overlap; cubic 8.85 +- 0.2 reaches below
    # reno's top (8.65 < 8.7): it may be last too; bic 9.4 +- 0.1 is clearly not last
    df = _cell_rows({"reno": (8.4, 0.3), "htcp": (8.5, 0.4), "cubic": (8.85, 0.2), "bic": (9.4, 0.1)})
    worst = _claim({"type": "worst", "metric": "mean_gbps", "expect": ["reno"], "where": {"criterion": "responsiveness"}})
    assert C.evaluate(worst, df)[0] == C.UNDECIDED
    assert sorted(c["variant"] for c in C.contested(worst, df)) == ["cubic", "htcp", "reno"]
    best = _claim({"type": "best", "metric": "mean_gbps", "expect": ["cubic"], "where": {"criterion": "responsiveness"}})
    assert C.evaluate(best, df)[0] == C.FAILS and C.contested(best, df) == []   # decided: nothing contested
    close = _claim({"type": "close", "metric": "mean_gbps", "tolerance": 0.02, "where": {"criterion": "responsiveness"},
                    "a": {"variant": "reno"}, "b": {"variant": "htcp"}})
    assert sorted(c["variant"] for c in C.contested(close, df)) == ["htcp", "reno"]
    # the cells are selections findings.matches reads, with plain (JSON) types
    assert C.contested(close, df)[0] == {"criterion": "responsiveness", "variant": "reno", "second": "",
                                         "rtt_ms": 0.2, "drop": 1e-5}


def test_the_next_round_repeats_only_the_contested_cells_and_starts_the_missing_ones():
    from tcpeval.analysis.tables import Dataset
    runs = _responsiveness_runs(["reno", "cubic", "bic", "htcp"], reps=3, drops=(1e-4,))
    # reno and cubic 1 % apart within +-5 %: undecided; bic far above both, htcp's run flagged
    ds = Dataset(runs=_runs({"reno": [4.0], "cubic": [4.04], "bic": [8.0]}).assign(mean_hw_bps=0.2e9),
                 flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
    worst = {"id": "worst", "section": "V", "paper": "p",
             "check": {"type": "worst", "metric": "mean_gbps", "expect": "reno", "where": {"criterion": "responsiveness"}}}
    needs_htcp = {"id": "htcp", "section": "V", "paper": "p",
                  "check": {"type": "at_least", "metric": "mean_gbps", "threshold": 1.0,
                            "where": {"criterion": "responsiveness", "variant": "htcp"}}}
    claims = [worst, needs_htcp]
    verdicts = C.check_all(claims, ds)
    assert [v.verdict for v in verdicts] == [C.UNDECIDED, C.NODATA]
    assert sorted(c["variant"] for c in verdicts[0].contested) == ["cubic", "reno"]
    done = {("reno", 1), ("cubic", 1), ("bic", 1), ("htcp", 1)}   # htcp's first repetition ran, flagged

    def is_done(run):
        return (run.flows[0].variant, run.rep) in done
    nxt = C.next_round(claims, verdicts, runs, is_done)
    # BIC, clearly not last, gets no second repetition; nor does the flagged H-TCP cell
    assert sorted((r.flows[0].variant, r.rep) for r in nxt) == [("cubic", 2), ("reno", 2)]
    # a cell of a finding without enough data that has not run yet gets its first repetition
    done.discard(("htcp", 1))
    assert ("htcp", 1) in {(r.flows[0].variant, r.rep) for r in C.next_round(claims, verdicts, runs, is_done)}
    # the verdicts, contested cells included, go through the claims' JSON and back
    import json
    assert C.Verdict(**json.loads(json.dumps(verdicts[0].__dict__))) == verdicts[0]


def test_a_finding_holds_only_where_every_cell_it_reads_has_a_usable_run():
    from tcpeval.analysis.tables import Dataset
    # BIC far ahead of Reno and CUBIC; the campaign also ran H-TCP, flagged in every attempt
    runs = _runs({"reno": [4.0], "cubic": [4.2], "bic": [8.0]}).assign(mean_hw_bps=0.05e9)
    runs["run"] = "r/" + runs["variant"]
    expected = pd.DataFrame([dict(run=f"r/{v}", criterion="responsiveness", variant=v, second=None, rtt_ms=0.2,
                                  drop=1e-4, rep=1) for v in ("reno", "cubic", "bic", "htcp")])
    ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=expected, include_flagged=False)
    cubic_over = {"id": "cubic-over", "section": "V", "paper": "p",
                  "check": {"type": "greater", "metric": "mean_gbps", "where": {"criterion": "responsiveness"},
                            "a": {"variant": "cubic"}, "b": {"variant": "reno"}}}
    loss_based_over = {**cubic_over, "id": "lb-over",
                       "check": {**cubic_over["check"], "a": {"variant": ["cubic", "htcp"]}}}
    claims = [BIC_BEST, RENO_BEST, cubic_over, loss_based_over]
    bic, reno, cubic, both = C.check_all(claims, ds)
    htcp = {"criterion": "responsiveness", "variant": "htcp", "second": "", "rtt_ms": 0.2, "drop": 1e-4}
    # H-TCP might have been ahead of BIC: the finding is open, and says which cell it lacks
    assert bic.verdict == C.UNDECIDED and bic.absent == [htcp] and "H-TCP 0.2\\,ms drop 0.0001" in bic.ours
    # Reno is behind BIC whatever H-TCP did: that does not hold, lacking cell or not
    assert reno.verdict == C.FAILS
    # a comparison of means over cells stands where it read no lacking cell, else is open
    assert cubic.verdict == C.HOLDS and cubic.absent == []
    assert both.verdict == C.UNDECIDED and both.absent == [htcp]
    # a next round repeats none of the cells present (they decided what they read), and
    # gives the lacking cell a first run only if it never started
    conditions = _responsiveness_runs(["reno", "cubic", "bic", "htcp"], reps=3, drops=(1e-4,))
    nxt = C.next_round([BIC_BEST], [bic], conditions, lambda run: run.rep == 1)
    assert nxt == []
    nxt = C.next_round([BIC_BEST], [bic], conditions, lambda run: run.rep == 1 and run.flows[0].variant != "htcp")
    assert [(r.flows[0].variant, r.rep) for r in nxt] == [("htcp", 1)]


def test_a_findings_campaign_is_judged_on_all_its_slices_runs_against_its_whole_matrix(design):
    from tcpeval import spec
    from tcpeval.analysis.tables import Dataset
    from tcpeval.report.cli import _pool_slices

    assert spec.slices(design, "findings") == ["findings-short-rtt", "findings-long-rtt-responsiveness",
                                              "findings-long-rtt-pairs", "findings-long-rtt-convergence",
                                              "findings-low-loss"]
    six = ["reno", "cubic", "bic", "scalable", "highspeed", "htcp"]

    def slice_at(rtt_ms, means):
        runs = _runs(dict(zip(six, ([m] for m in means)))).assign(rtt_ms=rtt_ms, drop=1e-2, mean_hw_bps=0.01e9)
        runs["run"] = f"rtt{rtt_ms}/" + runs["variant"]
        return Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)
    bic_ahead = [0.1, 0.1, 0.9, 0.2, 0.2, 0.2]
    lossy = {"id": "bic-lossy", "section": "VI", "paper": "p",
             "check": {"type": "best", "metric": "mean_gbps", "expect": "bic", "per": ["rtt_ms"],
                       "where": {"criterion": "responsiveness", "drop": 1e-2}}}
    # BIC ahead at 0.2 ms and at 6.2 ms: each slice alone holds on what it has; the
    # findings campaign also reads 12.2 and 24.2 ms, which no slice ran: open
    datasets = {"findings-short-rtt": slice_at(0.2, bic_ahead), "findings-long-rtt-responsiveness": slice_at(6.2, bic_ahead)}
    columns = {name: C.check_all([lossy], ds) for name, ds in datasets.items()}
    assert [v[0].verdict for v in columns.values()] == [C.HOLDS, C.HOLDS]
    at_scale, scales = {}, {}
    pooled = _pool_slices([lossy], design, "emulated", datasets, columns, at_scale, scales)
    assert pooled == {"findings": ["findings-short-rtt", "findings-long-rtt-responsiveness"]}
    verdict = columns["findings"][0]
    assert verdict.verdict == C.UNDECIDED and verdict.runs == 12
    assert {(cell["rtt_ms"], cell["drop"]) for cell in verdict.absent} == {(12.2, 1e-2), (24.2, 1e-2)}
    assert scales["findings"].runs == 12
    # Scalable ahead at 6.2 ms: the finding does not hold, whatever the cells not run show;
    # a slice not given is read where it has results (`tcpeval claims` on one slice)
    scalable_ahead = slice_at(6.2, [0.1, 0.1, 0.5, 0.9, 0.2, 0.2])
    datasets = {"findings-short-rtt": slice_at(0.2, bic_ahead)}
    pooled = _pool_slices([lossy], design, "emulated", datasets, columns, at_scale, scales,
                          lambda name: scalable_ahead if name == "findings-long-rtt-responsiveness" else None)
    assert pooled == {"findings": ["findings-short-rtt", "findings-long-rtt-responsiveness"]}
    assert columns["findings"][0].verdict == C.FAILS


def test_cells_the_campaign_leaves_out_count_where_the_low_loss_slice_ran_them(design):
    """The findings campaign skips H-TCP and CUBIC at 12.2 ms, 1e-6 (their loss events need
    about 2 h); findings-low-loss runs them for at most 5 min. Pooled, the comparison waits
    for that slice's runs (named as lacking, not as beyond the budget) and is decided on
    them: H-TCP 2.12 +- 0.40 against CUBIC 1.17 +- 0.30 Gbit/s, as real runs of 300 and
    150 s gave (docs/precision.md)."""
    from tcpeval.analysis.tables import Dataset
    from tcpeval.report.cli import _pool_slices

    htcp_over_cubic = {"id": "htcp-over-cubic", "section": "V", "paper": "p",
                       "check": {"type": "greater", "metric": "mean_gbps", "a": {"variant": "htcp"},
                                 "b": {"variant": "cubic"},
                                 "where": {"criterion": "responsiveness", "rtt_ms": 12.2, "drop": 1e-6}}}

    def dataset(values, hw, rtt_ms, drop):
        runs = _runs(values).assign(rtt_ms=rtt_ms, drop=drop)
        runs["mean_hw_bps"] = runs["variant"].map(hw) * 1e9
        runs["run"] = f"rtt{rtt_ms}/" + runs["variant"]
        return Dataset(runs=runs, flows=pd.DataFrame(), expected=pd.DataFrame(), include_flagged=False)

    short = dataset({"htcp": [9.4], "cubic": [9.4]}, {"htcp": 0.1, "cubic": 0.1}, 0.2, 1e-6)
    columns, at_scale, scales = {}, {}, {}
    _pool_slices([htcp_over_cubic], design, "emulated", {"findings-short-rtt": short}, columns, at_scale, scales)
    waiting = columns["findings"][0]
    assert waiting.verdict in C.OPEN
    assert {(cell["variant"], cell["rtt_ms"], cell["drop"]) for cell in waiting.absent} == {
        ("htcp", 12.2, 1e-6), ("cubic", 12.2, 1e-6)}
    assert "not run at this budget" not in waiting.ours
    low = dataset({"htcp": [2.12], "cubic": [1.17]}, {"htcp": 0.40, "cubic": 0.30}, 12.2, 1e-6)
    pooled = _pool_slices([htcp_over_cubic], design, "emulated", {"findings-short-rtt": short, "findings-low-loss": low},
                          columns, at_scale, scales)
    assert pooled == {"findings": ["findings-short-rtt", "findings-low-loss"]}
    assert columns["findings"][0].verdict == C.HOLDS and columns["findings"][0].absent == []
    # a design without the slice leaves the cells beyond its budget: undecided, and says why
    alone = copy.deepcopy(design)
    del alone["campaigns"]["findings-low-loss"]
    _pool_slices([htcp_over_cubic], alone, "emulated", {"findings-short-rtt": short}, columns, at_scale, scales)
    assert columns["findings"][0].verdict == C.UNDECIDED and "not run at this budget" in columns["findings"][0].ours


def test_a_cell_without_an_interval_counts_with_its_metrics_whole_range_in_a_comparison_of_means():
    """Jain's index of two flows lies in [0.5, 1]: a cell whose one run has no interval is
    bounded by that range, added in full to the mean's half-width and to the difference's
    (its worst case: the bounds of both sides are not independent errors to add in quadrature)."""
    def cells(fair, compat):
        rows = [dict(criterion="fairness", variant=v, second=v, rtt_ms=6.2, drop=0.0, n=1, n_flows=2,
                     jain=j, jain_hw=h) for v, j, h in fair]
        return pd.DataFrame(rows + [dict(criterion="compatibility", variant=v, second="reno", rtt_ms=6.2,
                                         drop=0.0, n=1, n_flows=2, jain=j, jain_hw=h) for v, j, h in compat])
    nan = float("nan")
    check = {"type": "greater", "metric": "jain", "where": {"rtt_ms": 6.2},
             "a": {"criterion": "fairness"}, "b": {"criterion": "compatibility"}}
    # two cells a side: fairness 0.985 +- (0.01 + 0.49) / 2 = 0.25, compatibility 0.575 +-
    # (0.02 + 0.40) / 2 = 0.21; the difference 0.41 +- hypot(0.005, 0.01) + 0.245 + 0.20 = 0.456
    two = cells([("bic", 0.98, 0.01), ("cubic", 0.99, nan)], [("bic", 0.55, 0.02), ("cubic", 0.60, nan)])
    verdict, text = C.evaluate(_claim(check), two)
    assert verdict == C.UNDECIDED, text          # in quadrature (+- 0.33) it would have held
    assert "0.985\\,$\\pm$\\,0.250 vs 0.575\\,$\\pm$\\,0.210" in text
    # four a side, one without an interval each: 0.98 +- 0.0043 + 0.1225 vs 0.575 +- 0.0087 +
    # 0.10; the difference 0.405 +- 0.0097 + 0.2225 = 0.232: clear of 0
    four = cells([("bic", 0.98, 0.01), ("cubic", 0.99, nan), ("htcp", 0.97, 0.01), ("scalable", 0.98, 0.01)],
                 [("bic", 0.55, 0.02), ("cubic", 0.60, nan), ("htcp", 0.60, 0.02), ("scalable", 0.55, 0.02)])
    verdict, text = C.evaluate(_claim(check), four)
    assert verdict == C.HOLDS, text
    assert "0.980\\,$\\pm$\\,0.127 vs 0.575\\,$\\pm$\\,0.109" in text
    # a metric without a natural range keeps an unknown interval unknown
    est = C._estimates(pd.DataFrame([{"mean_gbps": 4.0, "mean_gbps_hw": float("nan")}]), "mean_gbps")[0]
    assert est.hw == float("inf") and est.worst == 0.0


def test_a_rival_ahead_decides_a_ranking_alone_and_the_named_variant_ahead_asks_for_the_deferred_cells(design):
    """findings-low-loss runs BIC and the model's Scalable first at 12.2 ms, 1e-5
    (spec.deferred_cells): Scalable ahead decides 'BIC best' alone, as the real runs did
    (6.80 against 2.32 Gbit/s); BIC ahead leaves it open and the next round starts the
    other four cells."""
    from tcpeval import spec
    from tcpeval.analysis.tables import Dataset, expected_runs

    low = "findings-low-loss"
    bic_best = next(c for c in C.load_claims(REPO / "paper" / "claims.yaml") if c["id"] == "resp-bic-best-12.2")
    conditions = spec.expand(design, low)

    def judged(means):
        runs = _runs({v: [m] for v, m in means.items()}).assign(rtt_ms=12.2, drop=1e-5, mean_hw_bps=0.2e9)
        runs["run"] = "r/" + runs["variant"]
        ds = Dataset(runs=runs, flows=pd.DataFrame(), expected=expected_runs(design, low, "emulated"),
                     include_flagged=False)
        (verdict,) = C.check_all([bic_best], ds)
        ran = {(v, 1) for v in means}
        asked = C.next_round([bic_best], [verdict], conditions,
                             lambda run: run.rtt_ms != 12.2 or run.drop != 1e-5 or (run.flows[0].variant, run.rep) in ran)
        return verdict, {(r.flows[0].variant, r.rep) for r in asked}

    verdict, asked = judged({"bic": 2.32, "scalable": 6.80})
    assert verdict.verdict == C.FAILS and asked == set()
    verdict, asked = judged({"bic": 6.80, "scalable": 2.32})
    assert verdict.verdict == C.UNDECIDED and len(verdict.absent) == 4
    assert asked == {("reno", 1), ("highspeed", 1), ("htcp", 1), ("cubic", 1)}


def test_a_within_checks_text_gives_each_group_where_it_stands_and_the_cells_without_an_interval():
    within = _claim({"type": "within", "metric": "mean_gbps", "tolerance": 0.05, "per": ["rtt_ms"],
                     "where": {"criterion": "responsiveness"}})
    close = _cell_rows({"bic": (9.5, 0.01), "reno": (9.44, 0.04)}).assign(rtt_ms=6.2)
    blind = _cell_rows({"bic": (9.5, 0.001), "reno": (5.62, float("inf"))}).assign(rtt_ms=12.2)
    verdict, text = C.evaluate(within, pd.concat([close, blind], ignore_index=True))
    assert verdict == C.UNDECIDED       # Reno at 12.2 ms has a mean and no interval
    assert "6.2\\,ms: 0.6\\,\\% within" in text
    assert "12.2\\,ms: 40.8\\,\\% open, Reno without an interval" in text
    assert C.evaluate(within, close)[1] == "1 group(s); largest gap 0.6\\,\\%"   # one group decided: no more said

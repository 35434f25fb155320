"""The stopping check on one condition, hand-computed: a rule run's interval of the mean
against the mean of longer runs, and the rule's own record of how it stopped."""
import math

import pandas as pd
import pytest

from tcpeval.analysis import stopping_check as sc

GB = 1e9


def _rule(mean=5.0 * GB, hw=0.2 * GB, ran=10.0, reached=True, early=True, **kw):
    row = {"run": "r", "mean_bps": mean, "mean_hw_bps": hw, "ran_s": ran, "duration_s": 60.0,
           "precision_reached": reached, "stopped_early": early, "metrics_from_s": 0.0}
    for q, v in (("q25", 4.0), ("q50", 5.0), ("q75", 6.0)):
        row[f"{q}_bps"], row[f"{q}_hw_bps"] = v * GB, 0.25 * GB
    return {**row, **kw}


def _long(means, ran=300.0, q50=5.1):
    return sc._long_side(pd.DataFrame({
        "run": [f"l{i}" for i in range(len(means))], "mean_bps": [m * GB for m in means],
        "mean_hw_bps": [0.05 * GB] * len(means), "ran_s": [ran] * len(means),
        "q25_bps": [4.1 * GB] * len(means), "q50_bps": [q50 * GB] * len(means), "q75_bps": [6.5 * GB] * len(means)}))


def test_one_long_runs_interval_is_its_own():
    assert sc.compare(_rule(), _long([5.0]))["long_hw_bps"] == pytest.approx(0.05 * GB)


def test_a_long_mean_inside_the_rules_interval_is_covered_and_one_outside_is_not():
    assert sc.compare(_rule(), _long([5.15]))["checks"]["covers_mean"]
    assert sc.compare(_rule(), _long([5.2]))["checks"]["covers_mean"]         # on the edge
    missed = sc.compare(_rule(), _long([5.25]))
    assert not missed["checks"]["covers_mean"] and not missed["agree"]
    assert missed["mean_rel_diff"] == pytest.approx(0.25 / 5.25)


def test_several_long_runs_are_averaged():
    r = sc.compare(_rule(), _long([5.1, 5.5]))
    assert r["long_mean_bps"] == pytest.approx(5.3 * GB) and not r["checks"]["covers_mean"]
    # their interval is Student's t over the runs: 12.706 x 0.2828 / sqrt(2) Gb/s
    assert r["long_hw_bps"] == pytest.approx(12.706 * 0.4 / math.sqrt(2) / math.sqrt(2) * GB, rel=1e-3)


def test_the_long_runs_must_last_five_times_the_rules():
    assert sc.compare(_rule(ran=60.0), _long([5.0]))["checks"]["long_enough"]      # 300 / 60 = 5
    short = sc.compare(_rule(ran=61.0), _long([5.0]))
    assert not short["checks"]["long_enough"] and short["length_ratio"] == pytest.approx(300 / 61)


def test_a_rule_that_ran_to_its_max_or_missed_its_precision_did_not_stop_by_itself():
    assert sc.compare(_rule(), _long([5.0]))["checks"]["stopped_by_itself"]
    assert not sc.compare(_rule(early=False), _long([5.0]))["checks"]["stopped_by_itself"]
    assert not sc.compare(_rule(reached=False, early=False), _long([5.0]))["checks"]["stopped_by_itself"]
    assert not sc.compare(_rule(reached=None, early=None), _long([5.0]))["checks"]["stopped_by_itself"]


def test_quartiles_are_reported_not_judged():
    r = sc.compare(_rule(), _long([5.0], q50=5.3))
    assert r["quartiles"]["q50"]["covers"] is False and r["quartiles"]["q25"]["covers"] is True
    assert r["quartiles"]["q75"]["covers"] is False   # 6.5 vs 6.0 +- 0.25
    assert r["agree"]                                  # the mean decides


def test_an_interval_that_could_not_be_computed_covers_nothing():
    assert not sc.compare(_rule(hw=math.nan), _long([5.0]))["checks"]["covers_mean"]


def test_a_condition_without_a_usable_long_run_is_not_judged():
    expected = pd.DataFrame({"criterion": [sc.RULE, sc.LONG], "variant": ["reno"] * 2, "rtt_ms": [0.2] * 2,
                             "drop": [1e-4] * 2})
    runs = pd.DataFrame([{**_rule(), "criterion": sc.RULE, "variant": "reno", "rtt_ms": 0.2, "drop": 1e-4,
                          "rep": 1, "link_rate_bps": 9.85 * GB}])
    [r] = sc.conditions(runs, expected)
    assert not r["judged"] and r["why_not"] == "no usable long run (flagged or missing)"
    assert sc.summary([r])["not_judged"] == 1

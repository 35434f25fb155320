"""The design expresses Table II exactly, campaigns scale it, and bad input stops early."""
import copy
import math
import re

import pytest
import yaml

from tcpeval import mathis, paths, run_index, spec


def test_paper_campaign_has_table_ii_counts(design):
    runs = spec.expand(design, "paper")
    assert spec.counts_by_criterion(runs) == {
        "responsiveness": 840, "fairness": 120, "compatibility": 100, "convergence": 220}
    assert len(runs) == 1280


def test_paper_runs_are_fifteen_minutes_with_five_repetitions(design):
    runs = spec.expand(design, "paper")
    assert {r.duration_s for r in runs} == {900}
    assert {r.rep for r in runs} == {1, 2, 3, 4, 5}


def test_responsiveness_grid_is_variant_by_rtt_by_drop(design):
    runs = [r for r in spec.expand(design, "paper") if r.criterion == "responsiveness" and r.rep == 1]
    assert {r.variants for r in runs} == {(v,) for v in spec.load_design()["variants"]}
    assert sorted({r.rtt_ms for r in runs}) == [0.2, 6.2, 12.2, 24.2]
    assert sorted({r.drop for r in runs}) == [0, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]


def test_convergence_has_eleven_pairings_with_a_late_second_flow(design):
    runs = [r for r in spec.expand(design, "paper") if r.criterion == "convergence"]
    pairings = {r.variants for r in runs}
    assert len(pairings) == 11
    assert ("reno", "reno") in pairings and ("bic", "reno") in pairings and ("bic", "bic") in pairings
    assert all(r.flows[0].start_s == 0 and r.flows[1].start_s == r.duration_s / 2 for r in runs)


def test_compatibility_pairs_each_high_speed_variant_with_reno(design):
    runs = [r for r in spec.expand(design, "paper") if r.criterion == "compatibility"]
    assert {r.variants for r in runs} == {(v, "reno") for v in spec.load_design()["variants"] if v != "reno"}


def test_smoke_is_a_small_slice_of_every_criterion(design):
    runs = spec.expand(design, "smoke")
    counts = spec.counts_by_criterion(runs)
    assert set(counts) == {"responsiveness", "fairness", "compatibility", "convergence"}
    assert len(runs) <= 40
    assert sum(r.duration_s for r in runs) < 5 * 60


def test_quick_covers_the_whole_matrix_once(design):
    runs = spec.expand(design, "quick")
    assert len(runs) == 1280 // 5 and {r.rep for r in runs} == {1}


def test_seeds_are_distinct_and_backend_independent(design):
    emulated = spec.expand(design, "paper", "emulated")
    testbed = spec.expand(design, "paper", "testbed")
    assert len({r.seed for r in emulated}) == len(emulated)
    assert [r.seed for r in emulated] == [r.seed for r in testbed]


def test_condition_round_trips_through_a_dict(design):
    for run in spec.expand(design, "smoke"):
        assert spec.Condition.from_dict(run.to_dict()) == run


def test_other_designs_can_stagger_n_flows_with_udp_and_a_buffer(design):
    design["criteria"] = {"three-flows": {
        "grid": {"v": ["bic", "cubic"], "rtt_ms": [10], "drop": [0], "buffer_bytes": [1_000_000]},
        "flows": [{"variant": "{v}"}, {"variant": "reno", "start_s": 5},
                  {"variant": "cubic", "start_fraction": 0.5},
                  {"protocol": "udp", "rate_bps": 1e8}]}}
    design["campaigns"] = {"mine": {"duration_s": 60, "repetitions": 2}}
    spec.validate_design(design)
    runs = spec.expand(design, "mine")
    assert len(runs) == 4
    assert [f.start_s for f in runs[0].flows] == [0, 5, 30, 0]
    assert runs[0].buffer_bytes == 1_000_000 and runs[0].flows[3].protocol == "udp"


# ---------------------------------------------------------------- bad input

def _error(design):
    with pytest.raises(spec.SpecError) as err:
        spec.validate_design(design)
    return str(err.value)


def test_unknown_variant_names_field_and_allowed_values(design):
    design["criteria"]["responsiveness"]["grid"]["variant"] = ["reno", "vegas"]
    msg = _error(design)
    assert "criteria/responsiveness/grid/variant" in msg and "'vegas'" in msg and "cubic" in msg


def test_a_name_that_is_no_algorithm_name_in_the_variant_list(design):
    design["variants"].append("BBR 2")
    msg = _error(design)
    assert "variants/6" in msg and "does not match" in msg


def test_negative_rtt_is_rejected(design):
    design["criteria"]["fairness"]["grid"]["rtt_ms"] = [-1]
    msg = _error(design)
    assert "criteria/fairness/grid/rtt_ms/0" in msg and ">= 0" in msg


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_drop_rate_outside_unit_interval_is_rejected(design, p):
    design["criteria"]["responsiveness"]["grid"]["drop"] = [0, p]
    msg = _error(design)
    assert "criteria/responsiveness/grid/drop/1" in msg and "out of range" in msg


def test_zero_repetitions_is_rejected(design):
    design["campaigns"]["quick"]["repetitions"] = 0
    msg = _error(design)
    assert "campaigns/quick/repetitions" in msg and ">= 1" in msg


def test_unknown_criterion_in_a_campaign_is_rejected(design):
    design["campaigns"]["smoke"]["criteria"]["latency"] = {"duration_s": 3}
    msg = _error(design)
    assert "campaigns/smoke/criteria" in msg and "'latency'" in msg and "responsiveness" in msg


def test_unknown_criterion_requested_is_rejected(design):
    with pytest.raises(spec.SpecError, match="unknown criterion 'latency'.*allowed values: responsiveness"):
        spec.expand(design, "paper", criteria=["latency"])


def test_typo_in_a_key_suggests_the_right_one(design):
    design["defaults"]["duraton_s"] = 10
    msg = _error(design)
    assert "unknown key 'duraton_s'" in msg and "did you mean 'duration_s'" in msg


def test_typo_in_a_top_level_key(design):
    design["campaings"] = design.pop("campaigns")
    msg = _error(design)
    assert "campaings" in msg


def test_unknown_campaign_suggests_nearest(design):
    with pytest.raises(spec.SpecError, match="unknown campaign 'papr' \\(did you mean 'paper'\\?\\)"):
        spec.expand(design, "papr")


def test_selection_outside_the_grid_is_rejected(design):
    design["campaigns"]["smoke"]["criteria"]["responsiveness"]["select"]["rtt_ms"] = [7.0]
    msg = _error(design)
    assert "campaigns/smoke/criteria/responsiveness/select/rtt_ms" in msg and "[7.0]" in msg


def test_placeholder_without_grid_key_is_rejected(design):
    design["criteria"]["compatibility"]["flows"][1]["variant"] = "{legacy}"
    assert "placeholder {legacy} names no grid key" in _error(design)


def test_broken_yaml_names_the_file(tmp_path):
    bad = tmp_path / "design.yaml"
    bad.write_text("criteria: [unclosed\n")
    with pytest.raises(spec.SpecError, match=f"{bad}.*not valid YAML"):
        spec.load_design(bad)


def test_invalid_design_file_is_reported_with_its_path(tmp_path, design):
    design["defaults"]["repetitions"] = 0
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(design))
    with pytest.raises(spec.SpecError, match=f"{path} is invalid"):
        spec.load_design(path)


@pytest.mark.parametrize("kwargs, field", [
    ({"variants": ["Vegas!"]}, r"flows\[0\]\.variant"), ({"rtt_ms": -1}, "rtt_ms"), ({"drop": 2}, "drop"),
    ({"duration_s": 0}, "duration_s"), ({"variants": ["bic"], "starts": [0, 1]}, "start"),
    ({"starts": [5]}, r"flows\[0\]\.start_s"), ({"stops": [9]}, r"flows\[0\]\.stop_s"),
])
def test_adhoc_condition_errors_name_the_field(kwargs, field):
    args = dict(variants=["bic"], rtt_ms=6.2, drop=1e-5, duration_s=5)
    args.update(kwargs)
    with pytest.raises(spec.SpecError, match=f"^{field}:"):
        spec.adhoc_condition(**args)


# ------------------------------------------------------------- the validation campaign

def test_validation_criteria_do_not_change_the_papers_campaigns():
    design = spec.load_design()
    for campaign, total in (("paper", 1280), ("quick", 256), ("smoke", 33)):
        runs = spec.expand(design, campaign)
        assert len(runs) == total, campaign
        assert not {r.criterion for r in runs} & {"mathis", "mathis_native"}


def test_validation_campaign_runs_reno_port_and_native_long_enough_for_100_loss_events():
    from tcpeval import mathis

    design = spec.load_design()
    runs = spec.expand(design, "validation")
    assert spec.counts_by_criterion(runs) == {"mathis": 48, "mathis_native": 48}
    assert {r.flows[0].impl for r in runs if r.criterion == "mathis"} == {"port"}
    assert {r.flows[0].impl for r in runs if r.criterion == "mathis_native"} == {"native"}
    assert {r.drop for r in runs} == {1e-5, 1e-4, 1e-3, 1e-2}
    for r in runs:
        assert r.duration_s * mathis.loss_events_per_s(r.rtt_ms, r.drop, 9.5e9) >= 100, r
        assert r.duration_s >= 20
    longest = max(runs, key=lambda r: r.duration_s)
    assert (longest.rtt_ms, longest.drop, longest.duration_s) == (24.2, 1e-5, 884.0)
    # the two criteria keep their runs apart, and every path reads back to its condition
    assert len({paths.run_dir(r) for r in runs}) == len(runs)
    for r in runs:
        assert spec.Condition.from_dict(run_index.resolve_path(paths.run_dir(r), design=design).to_dict()) == r


def test_a_criterion_naming_an_unknown_campaign_or_a_loss_rule_at_p_zero_is_refused():
    design = copy.deepcopy(spec.load_design())
    design["criteria"]["mathis"]["campaigns"] = ["validaton"]
    design["criteria"]["mathis_native"]["grid"]["drop"] = [0, 1e-3]
    del design["criteria"]["mathis_native"]["duration_for_loss_events"]["min_s"]
    with pytest.raises(spec.SpecError) as err:
        spec.validate_design(design)
    assert "criteria/mathis/campaigns: unknown campaign 'validaton'" in str(err.value)
    assert "criteria/mathis_native/duration_for_loss_events: the grid has drop 0" in str(err.value)


def test_a_loss_event_rule_runs_its_minimum_without_loss_and_stops_at_its_maximum():
    rule = {"events": 500, "link_bps": 9.5e9, "min_s": 30, "max_s": 900}
    assert spec.point_duration(rule, {}, 6.2, 0.0) == 30
    assert spec.point_duration(rule, {}, 0.2, 1e-4) == 30            # hundreds of events per second
    assert spec.point_duration(rule, {}, 24.2, 1e-7) == 900          # days of traffic, capped
    at_6_2 = spec.point_duration(rule, {}, 6.2, 1e-4)                # by hand: 500 events / Mathis rate
    assert at_6_2 == math.ceil(500 / mathis.loss_events_per_s(6.2, 1e-4, 9.5e9))
    assert spec.point_duration(None, {"duration_s": 20}, 6.2, 1e-4) == 20


def test_a_link_bound_point_may_run_to_the_maximum_where_a_stopping_rule_ends_it(design):
    rule = {"events": 500, "link_bps": 9.5e9, "min_s": 30, "max_s": 300, "link_bound": "max_s"}
    # where the link, not loss, limits the flow: no loss, or loss too rare to matter
    assert spec.point_duration(rule, {}, 12.2, 0.0) == 300
    assert spec.point_duration(rule, {}, 0.2, 1e-5) == 300
    # where loss sets the rate the loss events decide, as before
    assert spec.point_duration(rule, {}, 0.2, 1e-2) == spec.point_duration({**rule, "link_bound": "min_s"}, {},
                                                                           0.2, 1e-2)
    # the findings' link-bound cells: up to 300 s, stopped by the precision rule, which
    # asks them no loss events (0.2 ms at 1e-7 drops a packet every 12 s); where loss sets
    # the rate the floor stays
    single = [r for r in spec.expand(design, "findings") if len(r.flows) == 1]
    bound = [r for r in single if r.drop == 0 or (r.rtt_ms == 0.2 and r.drop <= 1e-5)]
    assert {r.drop for r in bound} == {0, 1e-7, 1e-6, 1e-5}
    assert {r.duration_s for r in bound} == {300} and {r.stop.min_loss_events for r in bound} == {0}
    lossy = [r for r in single if r.drop >= 1e-3]
    assert lossy and {r.stop.min_loss_events for r in lossy} == {100}
    # without a stopping rule a link-bound run would last the maximum: refused, by name
    design["campaigns"]["findings-low-loss"]["criteria"]["responsiveness"].pop("stop")
    with pytest.raises(spec.SpecError, match=r"campaigns/findings-low-loss/criteria/responsiveness/"
                                             r"duration_for_loss_events/link_bound: max_s needs"):
        spec.validate_design(design)


def test_a_cycle_rule_runs_a_pair_for_its_sawtooth_cycle_within_its_bounds():
    # a Reno pair's cycle on a 9.85-Gbit/s link (mathis.reno_pair_cycle_s): 46.9 s at
    # 6.2 ms, 181.6 s at 12.2 ms, 714.4 s at 24.2 ms; whole seconds, whatever the loss
    rule = {"cycles": 1, "link_bps": 9.85e9, "min_s": 60, "max_s": 900}
    assert spec.point_duration(rule, {}, 0.2, 0.0) == 60               # 49 ms: the floor
    assert spec.point_duration(rule, {}, 6.2, 0.0) == 60
    assert spec.point_duration(rule, {}, 12.2, 0.0) == 182
    assert spec.point_duration({**rule, "cycles": 2}, {}, 12.2, 0.0) == 364
    assert spec.point_duration(rule, {}, 24.2, 0.0) == 715
    assert spec.point_duration({**rule, "max_s": 300}, {}, 24.2, 0.0) == 300   # capped
    assert spec.beyond_budget({**rule, "max_s": 60, "over_max": "skip"}, 12.2, 0.0)
    assert not spec.beyond_budget({**rule, "max_s": 60, "over_max": "skip"}, 6.2, 0.0)


def test_the_findings_pairs_beyond_their_cycle_are_planned_and_their_slice_runs_them_for_it(design):
    # the campaign runs its pairs at 0.2 and 6.2 ms for 60 s; those at 12.2 and 24.2 ms
    # would hold a third of the cycle or less: planned, not run, and named with their need
    pairs = [r for r in spec.expand(design, "findings") if r.criterion in ("fairness", "compatibility")]
    assert {(r.rtt_ms, r.duration_s) for r in pairs} == {(0.2, 60), (6.2, 60)}
    planned = [c for c in spec.not_run(design, "findings") if c["criterion"] in ("fairness", "compatibility")]
    assert {(c["rtt_ms"], c["needed_s"], c["max_s"]) for c in planned} == {(12.2, 182, 60), (24.2, 715, 60)}
    # findings-long-rtt-pairs runs them, each for its cycle (the original's 15 min at most)
    long_pairs = spec.expand(design, "findings-long-rtt-pairs")
    assert {(r.rtt_ms, r.duration_s) for r in long_pairs} == {(6.2, 60), (12.2, 182), (24.2, 715)}
    in_slices, nowhere = spec.family_cells(design, "findings")
    assert {spec.cell_key(c) for c in planned} <= {spec.cell_key(spec.cell_of(r)) for r in in_slices}
    assert not [c for c in nowhere if c["criterion"] in ("fairness", "compatibility")]


def test_two_length_rules_in_one_place_are_refused_by_name(design):
    design["campaigns"]["findings"]["criteria"]["fairness"]["duration_for_loss_events"] = {
        "events": 500, "link_bps": 9.85e9, "min_s": 30}
    with pytest.raises(spec.SpecError, match=r"campaigns/findings/criteria/fairness: duration_for_loss_events "
                                             r"and duration_for_cycles are two length rules"):
        spec.validate_design(design)


# --------------------------------------------------------------------- time dilation
def test_the_paper_campaign_asks_for_the_papers_rate_and_lets_dilation_choose(design):
    runs = spec.expand(design, "paper")
    assert {r.rate_bps for r in runs} == {9.85e9} and {r.dilation for r in runs} == {"auto"}
    # smoke and quick stay at the host's calibrated rate: minutes, not days
    assert {r.rate_bps for r in spec.expand(design, "smoke")} == {None}


def test_two_flow_runs_lose_the_rings_packets_on_the_paths_that_cross_it(design):
    # Sec. IV: about 2.2e-8 of the packets on the ring; the 0.2-ms path crosses none
    for campaign in ("paper", "findings", "smoke"):
        runs = spec.expand(design, campaign)
        pairs = {(r.rtt_ms, r.background_loss) for r in runs if len(r.flows) == 2}
        assert pairs <= {(0.2, 0.0), (6.2, 2.2e-8), (12.2, 2.2e-8), (24.2, 2.2e-8)} and (6.2, 2.2e-8) in pairs
        # single flows compare the drop rates set, or no loss at all
        assert {r.background_loss for r in runs if len(r.flows) == 1} == {0.0}


def test_a_background_loss_per_rtt_must_give_every_rtt_the_grid_runs(design):
    design["campaigns"]["smoke"]["background_loss"] = {0.2: 0.0}
    with pytest.raises(spec.SpecError, match=r"campaigns/smoke/criteria/\w+/background_loss: no probability "
                                             r"for rtt_ms 6.2; it gives one for 0.2 ms"):
        spec.expand(design, "smoke")
    design["campaigns"]["smoke"]["background_loss"] = {0.2: 1.5}
    assert "background_loss" in _error(design)


def test_a_campaign_can_force_or_forbid_dilation_and_the_path_stays(design):
    design["campaigns"]["smoke"]["dilation"] = 4
    forced = spec.expand(design, "smoke")
    design["campaigns"]["smoke"]["dilation"] = 1
    forbidden = spec.expand(design, "smoke")
    assert {r.dilation for r in forced} == {4} and {r.dilation for r in forbidden} == {1}
    # how a condition is realised is not part of it: the same run paths
    assert [paths.run_dir(r) for r in forced] == [paths.run_dir(r) for r in forbidden]


@pytest.mark.parametrize("value", [0, 65, "fast", 2.5])
def test_a_bad_dilation_setting_names_the_field(design, value):
    design["campaigns"]["smoke"]["dilation"] = value
    msg = _error(design)
    assert "campaigns/smoke/dilation" in msg, msg


def test_adhoc_dilation_is_checked_and_kept_through_a_dict():
    cond = spec.adhoc_condition(["bic"], 6.2, 1e-5, 5, dilation="8")
    assert cond.dilation == 8
    assert spec.Condition.from_dict(cond.to_dict()).dilation == 8
    with pytest.raises(spec.SpecError, match="^dilation:"):
        spec.adhoc_condition(["bic"], 6.2, 1e-5, 5, dilation=0)


def test_the_dilation_campaigns_differ_only_in_the_factor_and_share_drop_seeds(design):
    runs = spec.expand(design, "dilation")
    assert spec.counts_by_criterion(runs) == {"dilation_k1": 108, "dilation_k2": 108, "dilation_k4": 108}
    # 0.2 Gbps, below the VM's calibrated faithful 0.3: k = 1 is a sound reference there
    assert {r.rate_bps for r in runs} == {2e8}
    by_k = {}
    for r in runs:
        by_k.setdefault(r.criterion, {})[(r.flows[0].variant, r.rtt_ms, r.drop, r.rep)] = r
    assert {r.dilation for r in by_k["dilation_k2"].values()} == {2}
    for key, ref in by_k["dilation_k1"].items():
        assert ref.dilation == 1
        # repetition r meets the same drop sequence at every factor (seed_from)
        assert by_k["dilation_k2"][key].seed == by_k["dilation_k4"][key].seed == ref.seed
    # ... while repetitions and conditions still differ from each other
    assert len({r.seed for r in by_k["dilation_k1"].values()}) == 108
    quick = spec.expand(design, "dilation-quick")
    assert len(quick) == 72 and {r.rtt_ms for r in quick} == {6.2} and {r.drop for r in quick} == {0, 1e-4}
    assert {r.rate_bps for r in quick} == {2e8}
    # not part of the paper's matrix
    assert not {r.criterion for r in spec.expand(design, "paper")} & {"dilation_k1", "dilation_k2", "dilation_k4"}


def test_seed_from_must_name_a_criterion(design):
    design["criteria"]["dilation_k2"]["seed_from"] = "dilation_k0"
    assert "criteria/dilation_k2/seed_from: unknown criterion 'dilation_k0'" in _error(design)


def test_one_rule_judges_a_condition_wherever_it_comes_from():
    # the design, an ad-hoc run and both backends ask Condition.problems: a flow that stops
    # after the run is refused by each in the same words
    from tcpeval.backends.base import ConditionError
    from tcpeval.backends.emulated.plan import check_condition
    from tcpeval.condition import Condition, Flow
    late = Condition(backend="emulated", campaign="c", criterion="x", flows=(Flow("reno", stop_s=9.0),),
                     rtt_ms=2.0, drop=0.0, rep=1, duration_s=5.0)
    rule = "flows[0].stop_s: the flow stops at 9 s"
    assert late.problems()[0].startswith(rule)
    with pytest.raises(spec.SpecError, match=re.escape(rule)):
        spec.adhoc_condition(["reno"], 2.0, 0.0, 5.0, stops=[9.0])
    with pytest.raises(ConditionError, match=re.escape("condition." + rule)):
        check_condition(late)

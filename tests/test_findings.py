"""The findings' cells: one meaning of a claim's selection, for the checks and for the
campaign that runs exactly those cells."""
import copy

import pytest

from tcpeval import findings, spec
from tcpeval.spec import REPO_ROOT

CELL = {"criterion": "convergence", "variant": "bic", "second": "reno", "rtt_ms": 12.2, "drop": 0.0}


@pytest.mark.parametrize("where, hit", [
    ({}, True),
    ({"criterion": "convergence", "variant": ["cubic", "bic"]}, True),
    ({"variant": "cubic"}, False),
    ({"second": "reno", "rtt_min": 6.2, "rtt_max": 12.2}, True),
    ({"rtt_min": 12.3}, False),
    ({"rtt_ms": [0.2, 12.2], "drop": 0}, True),
    ({"drop_max": 1.0e-6}, True),
    ({"drop_min": 1.0e-7}, False),
    ({"same_variant": True}, False),
    ({"same_variant": False}, True),
])
def test_a_cell_lies_in_a_selection_by_name_value_and_range(where, hit):
    assert findings.matches(CELL, where) is hit


def test_a_selection_key_no_rule_knows_is_refused_when_the_claims_load(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n  - {id: x, section: V, paper: p, check: {type: best, where: {colour: 1}}}\n")
    with pytest.raises(findings.ClaimError, match="claim x: unknown selection key 'colour'"):
        findings.load_claims(path)


def test_a_comparison_reads_both_of_its_selections():
    claim = {"check": {"where": {"criterion": "fairness", "rtt_min": 6.2},
                       "a": {"variant": "bic"}, "b": {"criterion": "compatibility"}}}
    assert findings.selections(claim) == [{"criterion": "fairness", "rtt_min": 6.2, "variant": "bic"},
                                          {"criterion": "compatibility", "rtt_min": 6.2}]


def test_the_findings_campaign_runs_exactly_the_cells_the_claims_read(design):
    claims = findings.load_claims(REPO_ROOT / "paper" / "claims.yaml")
    runs = spec.expand(design, "findings")
    cells = {(r.criterion, r.flows[0].variant, r.flows[1].variant if len(r.flows) > 1 else "", r.rtt_ms, r.drop)
             for r in runs}
    # every run is read by a finding, and every finding's cell of the paper's matrix is run or named
    assert all(findings.needed(dict(zip(("criterion", "variant", "second", "rtt_ms", "drop"), c)), claims)
               for c in cells)
    unrun = {(c["criterion"], c["variant"], c["second"], c["rtt_ms"], c["drop"])
             for c in spec.not_run(design, "findings")}
    paper = {(r.criterion, r.flows[0].variant, r.flows[1].variant if len(r.flows) > 1 else "", r.rtt_ms, r.drop)
             for r in spec.expand(design, "paper")}
    read = {c for c in paper
            if findings.needed(dict(zip(("criterion", "variant", "second", "rtt_ms", "drop"), c)), claims)}
    assert read == cells | unrun and not cells & unrun
    assert ("responsiveness", "reno", "", 24.2, 1e-4) not in read        # no finding reads it
    # on the paper's link (9.85 Gbit/s of frames, 9.5 of payload); the loss-event rule sets
    # the length, the link-limited cells run 30 s at least
    assert {r.rate_bps for r in runs} == {9.85e9}
    resp = {(r.rtt_ms, r.drop): r.duration_s for r in runs if r.criterion == "responsiveness"}
    # (up to max_s where the link limits them: the rule ends them once precise, link_bound)
    assert resp[(0.2, 1e-7)] == 300 and resp[(0.2, 0.0)] == 300 and 30 < resp[(24.2, 1e-2)] <= 300
    assert all(c["needed_s"] > c["max_s"] for c in spec.not_run(design, "findings"))


def test_the_capping_slices_run_exactly_the_cells_the_campaign_leaves_out(design):
    """findings-low-loss (single flows beyond their max_s) and findings-long-rtt-pairs
    (pairs whose sawtooth cycle exceeds the campaign's horizon) cap, rather than skip, the
    cells the campaign leaves out: together the slices leave no cell of the findings
    unplanned, and run none of them twice."""
    unrun = {spec.cell_key(c) for c in spec.not_run(design, "findings")}
    single = {key for key in unrun if key[0] == "responsiveness"}
    pairs = unrun - single
    low = spec.expand(design, "findings-low-loss")
    first = [r for r in low if r.rep == 1]
    assert {spec.cell_key(spec.cell_of(r)) for r in first} == single and len(first) == len(single) == 14
    assert {r.duration_s for r in low} == {300.0} and {r.stop.max_s for r in low} == {300.0}
    # the pairs at 12.2 and 24.2 ms: one cycle each, in the pairs' slice
    assert {key[3] for key in pairs} == {12.2, 24.2} and len(pairs) == 21
    long_pairs = {spec.cell_key(spec.cell_of(r)): r.duration_s for r in spec.expand(design, "findings-long-rtt-pairs")}
    assert pairs <= set(long_pairs) and {long_pairs[key] for key in pairs} == {182.0, 715.0}
    extra, nowhere = spec.family_cells(design, "findings")
    assert {spec.cell_key(spec.cell_of(r)) for r in extra} == unrun and nowhere == []
    # the other slices run only cells of the campaign's own, each in one slice
    others = [name for name in spec.slices(design, "findings") if name != "findings-low-loss"]
    own = [spec.cell_key(spec.cell_of(r)) for name in others for r in spec.expand(design, name) if r.rep == 1]
    assert len(own) == len(set(own)) and set(own) - pairs == {spec.cell_key(spec.cell_of(r))
                                                              for r in spec.expand(design, "findings") if r.rep == 1}
    # without the slices, the cells are nowhere run again
    alone = copy.deepcopy(design)
    del alone["campaigns"]["findings-low-loss"]
    del alone["campaigns"]["findings-long-rtt-pairs"]
    assert {spec.cell_key(c) for c in spec.family_cells(alone, "findings")[1]} == unrun


def test_a_findings_file_that_does_not_load_or_names_an_unknown_criterion_is_refused(design):
    broken = copy.deepcopy(design)
    broken["campaigns"]["findings"]["cells_from_claims"] = "paper/no-such-claims.yaml"
    with pytest.raises(spec.SpecError, match="campaigns/findings/cells_from_claims: .*no-such-claims"):
        spec.validate_design(broken)
    renamed = copy.deepcopy(design)
    renamed["criteria"]["fair"] = renamed["criteria"].pop("fairness")
    with pytest.raises(spec.SpecError, match="a finding reads criterion 'fairness', which the design lacks"):
        spec.validate_design(renamed)


def test_the_findings_runs_stop_when_precise_within_their_loss_event_length(design):
    runs = [r for r in spec.expand(design, "findings") if r.criterion == "responsiveness"]
    assert all(r.stop is not None and r.stop.max_s == r.duration_s and r.stop.half_width == 0.05 for r in runs)
    # the mean to +-5 % too, but where a finding asks for more (a within check's cells: drop 0)
    assert {r.stop.mean_half_width for r in runs if r.drop > 0} == {None}
    assert {r.stop.mean_half_width for r in runs if r.drop == 0} == {0.05 * findings.WITHIN_PRECISION_SHARE}
    # nothing to count without loss, nor to wait for where the link, not loss, limits the
    # flow (0.2 ms up to 1e-5: spec.needed_duration None)
    link_bound = [r for r in runs if r.drop == 0 or (r.rtt_ms == 0.2 and r.drop <= 1e-5)]
    assert {r.stop.min_loss_events for r in link_bound} == {0}
    assert {r.stop.min_loss_events for r in runs if r not in link_bound} == {100}
    assert all(r.stop is None for r in spec.expand(design, "findings") if r.criterion != "responsiveness")


def test_a_findings_ask_never_loosens_a_mean_target_the_design_sets_tighter(design):
    tight = copy.deepcopy(design)
    stop = tight["campaigns"]["findings"]["criteria"]["responsiveness"]["stop"]
    tight["campaigns"]["findings"]["criteria"]["responsiveness"]["stop"] = {**stop, "mean_half_width": 0.004}
    runs = [r for r in spec.expand(tight, "findings") if r.criterion == "responsiveness"]
    assert {r.stop.mean_half_width for r in runs} == {0.004}   # 0.004 < the within check's 0.005


def test_a_within_check_asks_its_cells_for_a_tenth_of_its_tolerance_and_the_tightest_ask_wins():
    within = {"id": "w", "check": {"type": "within", "tolerance": 0.05, "where": {"drop": 0}}}
    tighter = {"id": "t", "check": {"type": "within", "tolerance": 0.02, "where": {"variant": "bic"}}}
    ranking = {"id": "r", "check": {"type": "best", "expect": "bic", "where": {}}}
    assert findings.precision_needed(CELL, [within]) == pytest.approx(0.005)
    assert findings.precision_needed(CELL, [within, tighter, ranking]) == pytest.approx(0.002)
    assert findings.precision_needed({**CELL, "drop": 1e-4}, [within, ranking]) is None   # not its cell
    assert findings.precision_needed(CELL, [ranking]) is None                             # no precision of its own
    # decided for a gap up to 80 % of the tolerance: two tenth-intervals on it reach the tolerance
    assert 0.04 + 2 * 0.05 * findings.WITHIN_PRECISION_SHARE == pytest.approx(0.05)


def test_the_findings_campaign_runs_one_repetition_first_and_the_others_on_demand(design):
    runs = spec.expand(design, "findings")
    assert spec.initial_repetitions(design, "findings") == 1
    assert {r.rep for r in runs} == {1, 2, 3, 4, 5}
    deferred = spec.deferred_cells(design, "findings")
    assert [r.rep for r in runs if not spec.on_demand(design, "findings", r)] == [1] * (len(runs) // 5 - len(deferred))
    assert spec.initial_repetitions(design, "smoke") is None
    assert not any(spec.on_demand(design, "smoke", r) for r in spec.expand(design, "smoke"))


def test_initial_repetitions_outside_a_findings_campaign_is_refused(design):
    design["campaigns"]["smoke"]["initial_repetitions"] = 1
    with pytest.raises(spec.SpecError, match="campaigns/smoke/initial_repetitions: only a campaign of the findings"):
        spec.validate_design(design)


def test_a_runs_cell_is_what_the_findings_select():
    runs = spec.expand(spec.load_design(REPO_ROOT / "config" / "design.yaml"), "findings")
    pair = next(r for r in runs if r.criterion == "compatibility")
    assert spec.cell_of(pair) == {"criterion": "compatibility", "variant": pair.flows[0].variant,
                                  "second": pair.flows[1].variant, "rtt_ms": pair.rtt_ms, "drop": pair.drop}
    claims = findings.load_claims(REPO_ROOT / "paper" / "claims.yaml")
    assert all(findings.needed(spec.cell_of(r), claims) for r in runs)


def _ranked_cells(means: dict, rtt_ms=12.2, drop=1e-5):
    return [{"criterion": "responsiveness", "variant": v, "second": "", "rtt_ms": rtt_ms, "drop": drop}
            for v in means]


@pytest.mark.parametrize("kind, expect, means, first", [
    # the named variant and the rival the model puts on top; the rest wait
    ("best", "bic", {"reno": 1.0, "scalable": 6.5, "highspeed": 3.0, "bic": 1.8}, {"bic", "scalable"}),
    # every rival within RIVAL_TIE (10 %) of the strongest runs too: the model may be off
    ("best", "bic", {"reno": 1.0, "scalable": 6.5, "highspeed": 6.0, "bic": 1.8}, {"bic", "scalable", "highspeed"}),
    ("worst", "reno", {"reno": 5.6, "cubic": 8.0, "htcp": 8.5, "bic": 9.5}, {"reno", "cubic", "htcp"}),
    ("worst", ["reno", "cubic"], {"reno": 9.2, "cubic": 9.3, "htcp": 9.5, "bic": 9.5}, {"reno", "cubic", "htcp", "bic"}),
])
def test_a_rankings_first_round_is_its_named_variant_and_the_rivals_the_model_puts_near_it(kind, expect, means, first):
    claim = {"check": {"type": kind, "metric": "mean_gbps", "expect": expect,
                       "where": {"criterion": "responsiveness", "rtt_ms": 12.2, "drop": 1e-5}}}
    cells = _ranked_cells(means) + _ranked_cells(means, drop=1e-6)   # cells it does not read
    picked = findings.contenders(claim, cells, lambda cell: means[cell["variant"]])
    assert {c["variant"] for c in picked} == first and {c["drop"] for c in picked} == {1e-5}


def test_a_ranking_per_rtt_picks_its_rivals_in_each_group_and_one_the_model_cannot_rank_runs_whole():
    claim = {"check": {"type": "best", "metric": "mean_gbps", "expect": "bic", "per": ["rtt_ms"],
                       "where": {"criterion": "responsiveness", "drop": 1e-2}}}
    at = {0.2: {"bic": 1.0, "scalable": 1.3, "reno": 0.5}, 6.2: {"bic": 0.1, "scalable": 0.05, "htcp": 0.11}}
    cells = [c for rtt, means in at.items() for c in _ranked_cells(means, rtt_ms=rtt, drop=1e-2)]
    picked = findings.contenders(claim, cells, lambda cell: at[cell["rtt_ms"]][cell["variant"]])
    assert {(c["rtt_ms"], c["variant"]) for c in picked} == {(0.2, "bic"), (0.2, "scalable"), (6.2, "bic"), (6.2, "htcp")}
    # no model for a rival (a variant it does not know): every cell it reads
    assert findings.contenders(claim, cells, lambda cell: None if cell["variant"] == "reno" else 1.0) is None
    # a finding that is no ranking of means reads all its cells
    assert findings.contenders({"check": {"type": "greater", "metric": "mean_gbps"}}, cells, lambda c: 1.0) is None
    assert findings.contenders({"check": {**claim["check"], "metric": "jain"}}, cells, lambda c: 1.0) is None


def test_the_first_round_defers_only_the_rivals_the_model_ranks_behind_a_rankings_contenders(design):
    """findings-low-loss, first_round: contenders (inherited from findings): at 12.2 ms,
    1e-5 BIC and the model's Scalable run first, at 6.2 ms, 1e-7 Reno and the two the
    model puts lowest after it; H-TCP against CUBIC is a comparison: both."""
    low = "findings-low-loss"
    runs = spec.expand(design, low)
    first = {(r.flows[0].variant, r.rtt_ms, r.drop) for r in runs if not spec.on_demand(design, low, r)}
    assert first == {("bic", 12.2, 1e-5), ("scalable", 12.2, 1e-5), ("htcp", 12.2, 1e-6), ("cubic", 12.2, 1e-6),
                     ("reno", 6.2, 1e-7), ("cubic", 6.2, 1e-7), ("htcp", 6.2, 1e-7)}
    assert all(r.rep == 1 for r in runs if not spec.on_demand(design, low, r))
    # every deferred cell of the whole campaign is read by best/worst findings alone
    claims = findings.load_claims(REPO_ROOT / "paper" / "claims.yaml")
    deferred = spec.deferred_cells(design, "findings")
    assert len(deferred) == 24
    for run in spec.expand(design, "findings"):
        cell = spec.cell_of(run)
        if spec.cell_key(cell) in deferred:
            assert {c["check"]["type"] for c in claims if findings.needed(cell, [c])} <= {"best", "worst"}
    # first_round: all defers nothing
    for name in ("findings", low):
        design["campaigns"][name]["first_round"] = "all"
    assert spec.deferred_cells(design, low) == frozenset()


def test_a_first_round_outside_a_sequential_campaign_is_refused(design):
    design["campaigns"]["smoke"]["first_round"] = "contenders"
    with pytest.raises(spec.SpecError, match="campaigns/smoke/first_round: only a sequential campaign"):
        spec.validate_design(design)

"""Run identity: every condition has one path, and the path names the condition."""
import pytest

from tcpeval import paths, run_index, spec


def test_every_paper_run_round_trips_path_to_condition_to_path(design):
    runs = spec.expand(design, "paper")
    assert len({paths.run_dir(r) for r in runs}) == len(runs)
    index = run_index.RunIndex(design, "paper", runs=runs)
    for run in runs:
        path = paths.trace_path(run)
        assert index.resolve(path) == run
        assert paths.trace_path(index.resolve(path)) == path
    assert run_index.resolve_path(paths.trace_path(runs[-1]), design) == runs[-1]  # the index built from the path


def test_path_reads_as_the_condition(design):
    run = next(r for r in spec.expand(design, "paper")
               if r.criterion == "convergence" and r.variants == ("cubic", "reno")
               and r.rtt_ms == 24.2 and r.rep == 3)
    assert paths.trace_path(run) == "data/raw/emulated/paper/convergence/cubic+reno/rtt24.2/drop0/rep3/trace.json"


@pytest.mark.parametrize("value, text", [(0, "0"), (1e-7, "1e-07"), (1e-2, "1e-02"), (2.5e-5, "2.5e-05"), (1, "1e+00")])
def test_drop_is_written_in_one_canonical_form(value, text):
    assert paths.format_drop(value) == text
    assert float(text) == value


@pytest.mark.parametrize("value, text", [(0.2, "0.2"), (24.2, "24.2"), (6, "6"), (0.05, "0.05")])
def test_rtt_is_written_as_shortest_decimal(value, text):
    assert paths.format_rtt(value) == text


def test_path_without_trace_name_and_with_other_raw_dir(design):
    run = spec.expand(design, "smoke")[0]
    d = paths.run_dir(run, "/tmp/raw")
    assert run_index.resolve_path(d, design, raw_dir="/tmp/raw") == run


def test_unknown_run_shows_grammar_and_nearest_path(design):
    bad = "data/raw/emulated/paper/responsiveness/bic/rtt6.3/drop1e-05/rep1/trace.json"
    with pytest.raises(spec.SpecError) as err:
        run_index.resolve_path(bad, design)
    msg = str(err.value)
    assert "<backend>[/<design>]/<campaign>/<criterion>" in msg
    assert "nearest valid path: data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep1/trace.json" in msg


def test_non_canonical_number_points_to_the_canonical_path(design):
    with pytest.raises(spec.SpecError, match="drop1e-05/rep1/trace.json"):
        run_index.resolve_path("data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-5/rep1/trace.json", design)


def test_garbage_path_shows_grammar(design):
    with pytest.raises(spec.SpecError, match="is not a run path; expected"):
        run_index.resolve_path("results/foo.json", design)


def test_repetition_beyond_campaign_is_unknown(design):
    with pytest.raises(spec.SpecError, match="names no run of campaign 'smoke'"):
        run_index.resolve_path("data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop0/rep2", design)


def test_wildcard_constraints_accept_every_path(design):
    import re
    pattern = ("data/raw/(?P<backend>{backend})/(?P<campaign>{campaign})/(?P<criterion>{criterion})/"
               "(?P<variants>{variants})/rtt(?P<rtt>{rtt})/drop(?P<drop>{drop})/rep(?P<rep>{rep})"
               ).format(**paths.WILDCARD_CONSTRAINTS)
    for run in spec.expand(design, "paper"):
        assert re.fullmatch(pattern, paths.run_dir(run)), paths.run_dir(run)


# The Snakemake patterns (workflow/rules/common.smk) are the grammar's: their wildcards,
# under WILDCARD_CONSTRAINTS, take every run directory apart into split_run_id's parts.
def _pattern_regex(pattern):
    import re
    parts = re.split(r"\{(scope|rest)\}", pattern)
    return "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>{paths.WILDCARD_CONSTRAINTS[p]})"
                   for i, p in enumerate(parts))


@pytest.mark.parametrize("design_file, campaign", [(None, "paper"), ("buffer-sweep.yaml", "full"),
                                                   ("bbr-vs-cubic.yaml", "full")])
def test_run_and_metrics_patterns_match_every_run_dir(design, design_file, campaign):
    import re
    from pathlib import Path
    if design_file:
        design = spec.load_design(Path(__file__).resolve().parents[1] / "config" / "designs" / design_file)
    run_re = _pattern_regex(paths.run_pattern("data/raw"))
    metrics_re = _pattern_regex(paths.metrics_pattern("results"))
    for run in spec.expand(design, campaign):
        d = paths.run_dir(run, "data/raw")
        scope, rest = paths.split_run_id(d.removeprefix("data/raw/"))
        m = re.fullmatch(run_re, d)
        assert m and (m["scope"], m["rest"]) == (scope, rest), d
        out = paths.metrics_dir(d, "data/raw", "results")
        assert out == f"results/{scope}/runs/{rest}"
        m = re.fullmatch(metrics_re, out)
        assert m and (m["scope"], m["rest"]) == (scope, rest), out


def test_patterns_write_their_roots_as_run_dir_does(design):
    run = spec.expand(design, "smoke")[0]
    assert paths.run_pattern() == "data/raw/{scope}/{rest}"
    assert paths.run_pattern("./data/raw/") == "data/raw/{scope}/{rest}"
    assert paths.run_pattern("/tmp/x/raw") == "/tmp/x/raw/{scope}/{rest}"
    assert paths.metrics_pattern("results/") == "results/{scope}/runs/{rest}"
    d = paths.run_dir(run, "./data/raw/")
    assert d.startswith("data/raw/")
    scope, rest = paths.split_run_id(d.removeprefix("data/raw/"))
    assert paths.run_pattern("./data/raw/").format(scope=scope, rest=rest) == d
    assert paths.metrics_dir(d, "./data/raw/", "/tmp/res") == f"/tmp/res/{scope}/runs/{rest}"
    assert paths.metrics_dir(paths.run_dir(run, "/tmp/raw"), "/tmp/raw/", "results") == f"results/{scope}/runs/{rest}"


def test_metrics_dir_refuses_a_path_outside_the_raw_dir(design):
    run = spec.expand(design, "smoke")[0]
    with pytest.raises(spec.SpecError, match="not a run directory below data/raw"):
        paths.metrics_dir(paths.run_dir(run, "elsewhere"), "data/raw", "results")
    with pytest.raises(spec.SpecError, match="is not a run path"):
        paths.metrics_dir("data/raw/emulated/smoke/nothing", "data/raw", "results")

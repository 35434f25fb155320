"""Run identity: every condition has one path, and the path names the condition."""
import pytest

from tcpeval import paths, spec


def test_every_paper_run_round_trips_path_to_condition_to_path(design):
    runs = spec.expand(design, "paper")
    assert len({paths.run_dir(r) for r in runs}) == len(runs)
    index = paths.make_index(runs)
    for run in runs:
        path = paths.trace_path(run)
        assert spec.resolve_path(path, design, index=index) == run
        assert paths.trace_path(spec.resolve_path(path, design, index=index)) == path


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
    assert spec.resolve_path(d, design, raw_dir="/tmp/raw") == run


def test_unknown_run_shows_grammar_and_nearest_path(design):
    bad = "data/raw/emulated/paper/responsiveness/bic/rtt6.3/drop1e-05/rep1/trace.json"
    with pytest.raises(spec.SpecError) as err:
        spec.resolve_path(bad, design)
    msg = str(err.value)
    assert "<backend>[/<design>]/<campaign>/<criterion>" in msg
    assert "nearest valid path: data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep1/trace.json" in msg


def test_non_canonical_number_points_to_the_canonical_path(design):
    with pytest.raises(spec.SpecError, match="drop1e-05/rep1/trace.json"):
        spec.resolve_path("data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-5/rep1/trace.json", design)


def test_garbage_path_shows_grammar(design):
    with pytest.raises(spec.SpecError, match="is not a run path; expected"):
        spec.resolve_path("results/foo.json", design)


def test_repetition_beyond_campaign_is_unknown(design):
    with pytest.raises(spec.SpecError, match="names no run of campaign 'smoke'"):
        spec.resolve_path("data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop0/rep2", design)


def test_wildcard_constraints_accept_every_path(design):
    import re
    pattern = ("data/raw/(?P<backend>{backend})/(?P<campaign>{campaign})/(?P<criterion>{criterion})/"
               "(?P<variants>{variants})/rtt(?P<rtt>{rtt})/drop(?P<drop>{drop})/rep(?P<rep>{rep})"
               ).format(**paths.WILDCARD_CONSTRAINTS)
    for run in spec.expand(design, "paper"):
        assert re.fullmatch(pattern, paths.run_dir(run)), paths.run_dir(run)

"""Other studies' designs (config/designs/): numbers with units, flows that stop, any
algorithm, a path segment for every factor that varies, designs kept apart in the path."""
import re
from pathlib import Path

import pytest

from tcpeval import paths, quantity, run_index, spec
from tcpeval.backends import algorithms

DESIGNS = sorted((spec.REPO_ROOT / "config" / "designs").glob("*.yaml"))


def _design(tmp_path, text: str) -> dict:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    return spec.load_design(path)


BASE = """
name: mine
defaults: {duration_s: 30, interval_s: 0.1, repetitions: 1}
campaigns: {short: {}}
criteria:
  c:
    grid: {rtt_ms: [10], drop: [0]}
    flows:
"""


def test_the_five_designs_are_there():
    assert {p.stem for p in DESIGNS} >= {"staggered", "udp-burst", "buffer-sweep", "parallel-lossy", "bbr-vs-cubic"}


@pytest.mark.parametrize("path", DESIGNS, ids=lambda p: p.stem)
def test_every_run_of_every_design_round_trips_path_to_condition_to_path(path):
    design = spec.load_design(path)
    for campaign in spec.campaign_names(design):
        runs = spec.expand(design, campaign)
        dirs = [paths.run_dir(r) for r in runs]
        assert len(set(dirs)) == len(runs), campaign
        index = run_index.RunIndex(design, campaign, runs=runs)
        for run, d in zip(runs, dirs):
            assert d.startswith(f"data/raw/emulated/{design['name']}/{campaign}/")
            assert index.resolve(d + "/trace.json") == run and index.path_of(run) == d
            assert paths.run_dir_from_parts(paths.parse(d)) == d


def test_the_designs_runs_are_valid_for_the_emulated_backend():
    for path in DESIGNS:
        design = spec.load_design(path)
        for campaign in spec.campaign_names(design):
            assert algorithms.problems(spec.expand(design, campaign), "emulated") == [], (path, campaign)


@pytest.mark.parametrize("run_dir, parts", [
    ("data/raw/emulated/buffer-sweep/short/sweep/cubic/rtt20/drop0/buf125k/rep1",
     {"design": "buffer-sweep", "factors": (("buffer_bytes", 125000.0),)}),
    ("data/raw/emulated/x/c/k/reno/rtt10/drop0/rate9.5G/rep2", {"factors": (("rate_bps", 9.5e9),), "rep": 2}),
    ("data/raw/emulated/parallel-lossy/short/parallel/10xcubic/rtt512/drop3e-01/n_flows10/rep1",
     {"variants": ("cubic",) * 10, "drop": 0.3, "factors": (("n_flows", 10.0),)}),
    ("data/raw/emulated/bbr-vs-cubic/short/head-to-head/bbr-native+cubic/rtt40/drop0/rep1",
     {"variants": ("bbr-native", "cubic"), "rtt_ms": 40.0}),
    ("data/raw/testbed/udp-burst/short/burst/reno+udp/rtt20/drop0/rep1", {"backend": "testbed", "variants": ("reno", "udp")}),
    ("data/raw/emulated/d/c/k/mycc-bpf+reno+reno/rtt0.2/drop1e-05/stop_at12.5/rep1",
     {"variants": ("mycc-bpf", "reno", "reno"), "factors": (("stop_at", 12.5),)}),
    # the paper's paths: no design segment, as before designs had their own
    ("data/raw/emulated/paper/convergence/cubic+reno/rtt24.2/drop0/rep3",
     {"design": None, "campaign": "paper", "variants": ("cubic", "reno")}),
])
def test_each_new_segment_parses_and_formats_back(run_dir, parts):
    got = paths.parse(run_dir)
    for key, value in parts.items():
        assert got[key] == value, key
    assert paths.run_dir_from_parts(got) == run_dir


@pytest.mark.parametrize("value, text", [(1e9, "1G"), (9.5e9, "9.5G"), (2e8, "200M"), (123456789, "123456789"),
                                         (1.5e6, "1.5M"), (800, "800")])
def test_rates_are_written_with_an_exact_si_suffix(value, text):
    assert quantity.format_rate(value) == text
    assert quantity.parse_si(text) == value


def test_two_designs_with_the_same_campaign_name_never_share_a_path(tmp_path):
    one = _design(tmp_path, BASE + "      - {variant: reno}\n")
    two = dict(one, name="theirs")
    a = {paths.run_dir(r) for r in spec.expand(one, "short")}
    b = {paths.run_dir(r) for r in spec.expand(two, "short")}
    assert a and b and not a & b


def test_a_path_of_another_design_is_refused_by_name(tmp_path):
    design = _design(tmp_path, BASE + "      - {variant: reno}\n")
    with pytest.raises(spec.SpecError, match="run of design 'other'"):
        run_index.resolve_path("data/raw/emulated/other/short/c/reno/rtt10/drop0/rep1", design)


@pytest.mark.parametrize("written", ["1e9", "1.0e9", "10G", "9.5gbit", "100Mbps", "1000000000"])
def test_rates_in_every_common_form_are_accepted(tmp_path, written):
    design = _design(tmp_path, BASE.replace("repetitions: 1}", f"repetitions: 1, rate_bps: {written}}}")
                     + "      - {variant: reno}\n")
    want = {"1e9": 1e9, "1.0e9": 1e9, "10G": 1e10, "9.5gbit": 9.5e9, "100Mbps": 1e8, "1000000000": 1e9}[written]
    assert spec.expand(design, "short")[0].rate_bps == want


def test_a_rate_that_is_not_one_shows_the_accepted_forms(tmp_path):
    with pytest.raises(spec.SpecError) as err:
        _design(tmp_path, BASE.replace("repetitions: 1}", "repetitions: 1, rate_bps: fast}") + "      - {variant: reno}\n")
    assert "defaults/rate_bps" in str(err.value) and "10G" in str(err.value) and "9.5gbit" in str(err.value)


def test_flows_stop_on_time_and_a_udp_flow_needs_no_variant(tmp_path):
    design = _design(tmp_path, BASE + "      - {variant: cubic}\n"
                     "      - {variant: reno, start_s: 5, stop_fraction: 0.5}\n"
                     "      - {protocol: udp, rate_bps: 50M, start_fraction: 0.25, stop_s: 20}\n")
    run = spec.expand(design, "short")[0]
    assert [(f.start_s, f.stop_s, f.label) for f in run.flows] == [(0, None, "cubic"), (5, 15, "reno"),
                                                                    (7.5, 20, "udp")]
    assert run.flows[2].rate_bps == 5e7
    assert paths.run_dir(run).endswith("/c/cubic+reno+udp/rtt10/drop0/rep1")


def test_a_stop_before_its_start_is_refused(tmp_path):
    with pytest.raises(spec.SpecError, match=r"flows/1/stop_s: the flow stops at 4 s; a flow stops after its start \(5 s\)"):
        _design(tmp_path, BASE + "      - {variant: cubic}\n      - {variant: reno, start_s: 5, stop_s: 4}\n")


def test_a_flow_template_and_a_runs_flow_are_refused_by_the_same_rule_in_the_same_words(tmp_path):
    # one owner of a flow's rules (condition.flow_rule_problems): the design applies them
    # to its templates' literal values before any condition exists
    from tcpeval.condition import Flow
    for template, flow in (("{variant: reno, start_s: 5, stop_s: 4}", Flow("reno", start_s=5.0, stop_s=4.0)),
                           ("{protocol: udp}", Flow("udp", protocol="udp")),
                           ("{protocol: udp, rate_bps: 1M, ecn: true}", Flow("udp", protocol="udp", rate_bps=1e6,
                                                                             ecn=True)),
                           ("{variant: reno, impl: bpf}", Flow("reno", impl="bpf"))):
        why = flow.problems(30.0)[0].split(": ", 1)[1].split(" and at the latest")[0]
        with pytest.raises(spec.SpecError, match=re.escape(why)):
            _design(tmp_path, BASE + f"      - {template}\n")


def test_a_stop_after_the_run_is_refused_naming_the_grid_point(tmp_path):
    design = _design(tmp_path, BASE + "      - {variant: reno, stop_s: 40}\n")
    with pytest.raises(spec.SpecError, match=r"criteria/c/flows/0 .*stops at 40 s"):
        spec.expand(design, "short")


def test_a_udp_flow_without_a_rate_is_refused(tmp_path):
    with pytest.raises(spec.SpecError, match="flows/0/rate_bps: a UDP cross-traffic flow needs a rate"):
        _design(tmp_path, BASE + "      - {protocol: udp}\n")


def test_an_unknown_algorithm_is_refused_with_what_the_backend_offers(tmp_path):
    design = _design(tmp_path, BASE + "      - {variant: vegaz}\n")
    found = algorithms.problems(spec.expand(design, "short"), "emulated")
    assert len(found) == 1
    assert "no port algorithm 'vegaz'" in found[0] and "port: reno, scalable" in found[0] and "native: " in found[0]
    design = _design(tmp_path, BASE + "      - {variant: bbrx, impl: native}\n")
    assert "no native algorithm 'bbrx'" in algorithms.problems(spec.expand(design, "short"), "emulated")[0]


def test_a_native_algorithm_of_the_host_is_accepted_and_named_in_the_path(tmp_path):
    native = algorithms.native_here()[0]
    design = _design(tmp_path, BASE + f"      - {{variant: {native}, impl: native}}\n")
    runs = spec.expand(design, "short")
    assert algorithms.problems(runs, "emulated") == []
    assert f"/{native}-native/" in paths.run_dir(runs[0])


def test_a_bpf_object_must_exist(tmp_path):
    design = _design(tmp_path, BASE + "      - {variant: mycc, impl: bpf, object: nowhere/mycc.bpf.o}\n")
    assert "object 'nowhere/mycc.bpf.o' does not exist" in algorithms.problems(spec.expand(design, "short"), "emulated")[0]
    with pytest.raises(spec.SpecError, match="impl bpf and object"):
        _design(tmp_path, BASE + "      - {variant: mycc, impl: bpf}\n")


def test_parallel_flows_come_from_a_count_that_a_grid_key_sets(tmp_path):
    design = _design(tmp_path, BASE.replace("drop: [0]}", "drop: [0], n: [1, 3]}") + "      - {variant: reno, count: '{n}'}\n")
    runs = spec.expand(design, "short")
    assert [len(r.flows) for r in runs] == [1, 3]
    assert [paths.run_dir(r).split("/")[-3:-1] for r in runs] == [["drop0", "n1"], ["drop0", "n3"]]
    assert paths.run_dir(runs[1]).split("/")[-5] == "3xreno"


def test_a_placeholder_that_names_no_numeric_grid_key_is_refused(tmp_path):
    with pytest.raises(spec.SpecError, match=r"flows/0/start_s: placeholder \{late\} names no numeric grid key"):
        _design(tmp_path, BASE + "      - {variant: reno, start_s: '{late}'}\n")


def test_flow_timing_from_the_grid_gets_its_own_segment(tmp_path):
    design = _design(tmp_path, BASE.replace("drop: [0]}", "drop: [0], join: [5, 10]}")
                     + "      - {variant: cubic}\n      - {variant: reno, start_s: '{join}'}\n")
    runs = spec.expand(design, "short")
    assert [r.flows[1].start_s for r in runs] == [5, 10]
    assert [paths.run_dir(r).rsplit("/", 2)[1] for r in runs] == ["join5", "join10"]


def test_the_paper_design_keeps_its_paths_and_seeds(design):
    run = next(r for r in spec.expand(design, "paper") if r.criterion == "fairness" and r.variants == ("bic", "bic")
               and r.rtt_ms == 6.2 and r.rep == 1)
    assert paths.run_dir(run) == "data/raw/emulated/paper/fairness/bic+bic/rtt6.2/drop0/rep1"
    assert run.design is None and run.factors == ()
    assert run.seed == spec._seed_for("paper", "fairness", ("bic", "bic"), 6.2, 0.0, 1)


def test_the_command_line_refuses_an_unknown_native_algorithm_listing_the_hosts(tmp_path):
    import subprocess
    import sys
    tcpeval = str(Path(sys.executable).with_name("tcpeval"))
    proc = subprocess.run([tcpeval, "run", "--variant", "bbrx", "--impl", "native", "--rtt", "5", "--drop", "0",
                           "--duration", "1", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "no native algorithm 'bbrx'" in proc.stderr and f"native: {algorithms.native_here()[0]}" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_ports_as_kernel_modules_are_refused_where_the_kernel_loads_none(tmp_path, monkeypatch):
    from tcpeval import cc
    design = _design(tmp_path, BASE + "      - {variant: reno}\n")
    runs = spec.expand(design, "short")
    monkeypatch.setenv("TCPEVAL_PORT_AS", "kmod")
    monkeypatch.setattr(cc, "kmod_missing", lambda: "loadable-module support (kernel 6.18 was built without it)")
    found = algorithms.problems(runs, "emulated")
    assert len(found) == 1 and "TCPEVAL_PORT_AS=kmod" in found[0] and "loadable-module support" in found[0]
    monkeypatch.setenv("TCPEVAL_PORT_AS", "kmodule")
    with pytest.raises(algorithms.BackendError, match="TCPEVAL_PORT_AS='kmodule': expected struct_ops or kmod"):
        algorithms.problems(runs, "emulated")
    monkeypatch.delenv("TCPEVAL_PORT_AS")
    assert algorithms.problems(runs, "emulated") == []

"""ecn_queues in a design: 2 asks for a second, drop-tail queue beside the marking one; it
needs ECN marking, names its own path segment when a grid varies it, and is kept out of
the condition (as before it existed) when unset."""
import pytest

from tcpeval import paths, spec
from tcpeval.condition import Condition

BASE = """
name: mine
defaults: {{duration_s: 10, interval_s: 0.1, repetitions: 1{extra}}}
campaigns: {{short: {{}}}}
criteria:
  c:
    grid: {{rtt_ms: [2], drop: [0]{grid}}}
    flows:
      - {{variant: dctcp}}
      - {{variant: cubic, impl: native}}
"""


def _runs(tmp_path, extra: str = "", grid: str = "") -> list[Condition]:
    path = tmp_path / "d.yaml"
    path.write_text(BASE.format(extra=extra, grid=grid))
    return spec.expand(spec.load_design(path), "short")


def test_a_grid_of_one_and_two_queues_names_each_in_the_path_and_round_trips(tmp_path):
    runs = _runs(tmp_path, grid=", ecn_threshold_bytes: [30k], ecn_queues: [1, 2]")
    dirs = [paths.run_dir(r) for r in runs]
    assert [d.split("/")[-2] for d in dirs] == ["ecn_queues1", "ecn_queues2"]
    assert [r.ecn_queues for r in runs] == [1, 2] and {r.ecn_threshold_bytes for r in runs} == {30_000}
    for cond in runs:
        assert Condition.from_dict(cond.to_dict()) == cond


def test_a_run_setting_of_two_queues_reaches_the_condition(tmp_path):
    (cond,) = _runs(tmp_path, extra=", ecn_threshold_bytes: 30k, ecn_queues: 2")
    assert cond.ecn_queues == 2 and cond.to_dict()["ecn_queues"] == 2


def test_unset_it_stays_out_of_the_condition(tmp_path):
    (cond,) = _runs(tmp_path, extra=", ecn_threshold_bytes: 30k")
    assert cond.ecn_queues is None and "ecn_queues" not in cond.to_dict()


def test_a_second_queue_without_marking_is_refused_naming_the_field(tmp_path):
    with pytest.raises(spec.SpecError, match=r"ecn_queues: a second queue .* needs ECN marking in the first "
                                             r"\(ecn_threshold_bytes\)"):
        _runs(tmp_path, extra=", ecn_queues: 2")


def test_three_queues_are_refused_naming_the_field(tmp_path):
    with pytest.raises(spec.SpecError, match=r"ecn_queues"):
        _runs(tmp_path, extra=", ecn_threshold_bytes: 30k, ecn_queues: 3")


def test_a_flow_told_not_to_ask_for_ecn_says_so_in_its_path_and_condition(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(BASE.format(extra=", ecn_threshold_bytes: 30k", grid="").replace(
        "{variant: cubic, impl: native}", "{variant: cubic, impl: native, ecn: false}"))
    (cond,) = spec.expand(spec.load_design(path), "short")
    assert cond.flows[1].ecn is False and cond.flow_labels == ("dctcp", "cubic-native-noecn")
    assert "/dctcp+cubic-native-noecn/" in paths.run_dir(cond)
    assert cond.to_dict()["flows"][1]["ecn"] is False and "ecn" not in cond.to_dict()["flows"][0]
    assert Condition.from_dict(cond.to_dict()) == cond


def test_ecn_on_a_udp_flow_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(BASE.format(extra=", ecn_threshold_bytes: 30k", grid="").replace(
        "{variant: cubic, impl: native}", "{protocol: udp, rate_bps: 10M, ecn: true}"))
    with pytest.raises(spec.SpecError, match=r"flows/1/ecn: a UDP flow's frames are never ECN-capable"):
        spec.expand(spec.load_design(path), "short")


def test_with_two_queues_a_flow_goes_where_it_negotiates_ecn():
    from tcpeval.backends.emulated.plan import flow_queue, flow_stacks
    from tcpeval.condition import Flow
    flows = [Flow("dctcp"), Flow("cubic", impl="native"), Flow("reno", ecn=True), Flow("bbr", impl="native"),
             Flow("udp", protocol="udp", rate_bps=1e7), Flow("dctcp", protocol="rpc", request_bytes=100,
                                                            response_bytes=10_000)]
    assert [flow_queue(f) for f in flows] == ["marking", "drop_tail", "marking", "drop_tail", "drop_tail", "marking"]
    cond = Condition(backend="emulated", campaign="c", criterion="c", flows=tuple(flows), rtt_ms=2.0, drop=0.0,
                     rep=1, duration_s=10.0)
    assert flow_stacks(cond) == [{}, {}, {"net.ipv4.tcp_ecn": 1}, {}, {}, {}]
    # two queues: DCTCP's endpoints accept its ECT SYN (tcp_ecn 1), the rest keep the default
    two = Condition(backend="emulated", campaign="c", criterion="c", flows=tuple(flows), rtt_ms=2.0, drop=0.0,
                    rep=1, duration_s=10.0, ecn_threshold_bytes=30_000, ecn_queues=2)
    ask = {"net.ipv4.tcp_ecn": 1}
    assert flow_stacks(two) == [ask, {}, ask, {}, {}, ask]
    assert flow_stacks(Condition(backend="emulated", campaign="c", criterion="c", flows=(Flow("reno"),),
                                 rtt_ms=2.0, drop=0.0, rep=1, duration_s=10.0)) is None

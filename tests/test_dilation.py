"""Time dilation: the factor a run gets, and a dilated trace read in virtual units."""
import copy
import re
from pathlib import Path

import pytest

from tcpeval import dilation


@pytest.mark.parametrize("value, want", [("auto", "auto"), (None, "auto"), (1, 1), ("4", 4), (64, 64)])
def test_parse_accepts_auto_and_integer_factors(value, want):
    assert dilation.parse(value) == want


@pytest.mark.parametrize("value", [0, 65, "x", 2.5, "2.5", True, -3])
def test_parse_names_the_setting_it_refuses(value):
    with pytest.raises(dilation.DilationError, match="dilation"):
        dilation.parse(value)


def test_auto_picks_the_smallest_factor_that_fits_the_faithful_rate():
    assert dilation.choose("auto", 9.5e9, 0.3e9) == 32      # 9.5 / 32 = 0.297 <= 0.3
    assert dilation.choose("auto", 9.5e9, 2.9e9) == 4
    assert dilation.choose("auto", 1e9, 1e9) == 1            # exactly at the ceiling
    assert dilation.choose("auto", None, 0.3e9) == 1         # calibrated default rate
    assert dilation.choose("auto", 1e9, None) == 1


def test_a_forced_factor_is_kept_and_one_forbids_dilation():
    assert dilation.choose(4, 1e9, 10e9) == 4
    assert dilation.choose(1, 9.5e9, 0.3e9) == 1


def test_a_rate_beyond_the_largest_factor_is_refused_with_the_numbers():
    with pytest.raises(dilation.DilationError, match="needs a factor of 100"):
        dilation.choose("auto", 10e9, 0.1e9)


def _record(k):
    """A physical trace of a virtual 1 Gbps, 10 ms, 2 s path run k times slower."""
    return {
        "condition": {"rtt_ms": 10.0, "duration_s": 2.0, "rate_bps": 1e9, "dilation": "auto"},
        "mechanisms": {"drop": "bpf-tc", "delay": "delayline", "rate": "tbf",
                       "dilation": {"factor": k, "setting": "auto"}},
        "flows": [{"id": 0, "start_s": 0.5 * k,
                   "samples": {"t_s": [0.1 * k, 0.2 * k], "bytes": [12.5e6, 12.5e6],
                               "throughput_bps": [1e9 / k, 1e9 / k], "cwnd_bytes": [1e6, 1.1e6],
                               "rtt_us": [10_000.0 * k, None], "retransmits": [0, 1]},
                   "summary": {"bytes": 25e6, "mean_throughput_bps": 1e9 / k, "min_rtt_us": 10_000 * k,
                               "max_cwnd_bytes": 1.1e6, "throughput_side": "receiver",
                               "retransmits": 1}}],
        "measured": {"rtt_ms": 10.0 * k, "base_rtt_ms": 0.1 * k, "bottleneck_rate_bps": 1e9 / k,
                     "drop": {"seen": 100, "dropped": 1}},
    }


@pytest.mark.parametrize("k", [2, 32])
def test_to_virtual_gives_the_virtual_paths_trace(k):
    virtual, reference = dilation.to_virtual(_record(k)), _record(1)
    f, r = virtual["flows"][0], reference["flows"][0]
    assert f["start_s"] == pytest.approx(r["start_s"])
    for name in ("t_s", "bytes", "throughput_bps", "cwnd_bytes", "retransmits"):
        assert f["samples"][name] == pytest.approx(r["samples"][name]), name
    assert f["samples"]["rtt_us"][0] == pytest.approx(10_000) and f["samples"]["rtt_us"][1] is None
    for name in ("mean_throughput_bps", "min_rtt_us", "max_cwnd_bytes", "bytes", "retransmits"):
        assert f["summary"][name] == pytest.approx(r["summary"][name]), name
    assert f["summary"]["throughput_side"] == "receiver"
    for name in ("rtt_ms", "base_rtt_ms", "bottleneck_rate_bps"):
        assert virtual["measured"][name] == pytest.approx(reference["measured"][name]), name
    assert virtual["measured"]["drop"] == reference["measured"]["drop"]
    assert virtual["condition"] == reference["condition"]
    assert virtual["mechanisms"]["dilation"]["units"] == "virtual"


def test_to_virtual_leaves_the_physical_trace_alone():
    rec = _record(4)
    before = copy.deepcopy(rec)
    dilation.to_virtual(rec)
    assert rec == before
    assert dilation.to_virtual(_record(1)) == _record(1)
    assert dilation.factor({"mechanisms": {}}) == 1


def test_sender_frames_hold_the_same_virtual_time_at_every_factor():
    from tcpeval.backends.emulated.topology import (
        SENDER_BURST_S,
        WIRE_FRAME_BYTES,
        sender_gso_max_segs,
    )

    def segs(rate_bps):
        return sender_gso_max_segs(rate_bps, WIRE_FRAME_BYTES)
    wire_bits = 8 * WIRE_FRAME_BYTES
    # the paper's 9.5 Gb/s: 7 segments (9.7 us at 9.5 Gb/s), whatever k slows it to
    assert segs(9.5e9) == 7
    assert 7 * wire_bits / 9.5e9 <= SENDER_BURST_S < 8 * wire_bits / 9.5e9
    # a slow bottleneck gets the pair one ACK releases anyway; a fast one a 64 KB frame
    assert segs(0.3e9) == segs(1) == 2
    assert segs(100e9) == 44


# ---- units: one declaration per field (the trace schema's x-dilation) ----------------

DOC = Path(__file__).resolve().parents[1] / "docs" / "trace-format.md"
# the documented sections whose fields a dilated run records, and where they sit
SECTIONS = {"## flows": ("flows", "[]"), "### flows[].samples": ("flows", "[]", "samples"),
            "### flows[].summary": ("flows", "[]", "summary"), "## measured": ("measured",)}
PATH_UNITS = {"s", "ms", "us", "bit/s"}  # a time or a rate: what dilation changes


def _documented_path_fields() -> list[tuple]:
    """Every field docs/trace-format.md documents with a time or rate unit in the flow,
    sample, summary and measured tables, as a path (an object's own fields: the
    backquoted ``*_s`` names of its meaning)."""
    found, prefix = [], None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            prefix = SECTIONS.get(line.strip())
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if prefix is None or len(cells) < 4 or not cells[0].startswith("`") or cells[2] not in PATH_UNITS:
            continue
        names = re.findall(r"`([a-z0-9_]+)`", cells[0])
        if cells[1].startswith("object"):
            inner = re.findall(r"`([a-z0-9_]+_s)`", cells[-1])
            found += [(*prefix, names[0], n) for n in inner]
        else:
            found += [(*prefix, n) for n in names]
    return found


def test_every_time_and_rate_the_format_documents_has_a_declared_unit():
    documented = _documented_path_fields()
    assert ("flows", "[]", "stop_s") in documented and ("flows", "[]", "actual", "stop_s") in documented
    assert ("measured", "rtt_ms") in documented and len(documented) >= 15
    table = dilation.unit_table()
    missing = [".".join(p) for p in documented if p not in table]
    assert not missing, f"documented with a unit but no x-dilation in the trace schema: {missing}"


@pytest.mark.parametrize("k", [3, 24])
def test_to_virtual_converts_each_declared_field_as_the_table_says(k):
    # a dilated record holding every field the table knows (flows as a list of one)
    record = {"mechanisms": {"dilation": {"factor": k}}}
    table = dilation.unit_table()
    for path in table:
        value = [10.0, None] if path[-2:-1] == ("samples",) else 10.0
        node = record
        for key, nxt in zip(path, path[1:]):
            if key == "[]":
                continue
            node = node.setdefault(key, [{}] if nxt == "[]" else {})
            if nxt == "[]":
                node = node[0]
        node[path[-1]] = copy.deepcopy(value)
    virtual = dilation.to_virtual(record)
    flow, vflow = record["flows"][0], virtual["flows"][0]
    for path, kind in table.items():
        src, got = (flow, vflow) if path[0] == "flows" else (record, virtual)
        for key in path[2:] if path[0] == "flows" else path:
            key = 0 if key == "[]" else key  # a list in the record holds one item here
            src, got = src[key], got[key]
        want = {"time": 10.0 / k, "rate": 10.0 * k}.get(kind)
        if want is None:
            assert got == src, path
        elif isinstance(got, list):
            assert got == [pytest.approx(want), None], path
        else:
            assert got == pytest.approx(want), path


def test_a_dilated_runs_stopping_flow_is_analysed_in_virtual_time():
    # a virtual 10-s run whose second flow runs from 2.5 s to 7.5 s (staggered), recorded
    # physically at k = 4; the analysis must see the same window as the undilated run
    from tcpeval.analysis import extract, synthetic
    from tcpeval.condition import Condition

    base = synthetic.make_record(Condition.from_dict(_two_flow_condition()))
    base["flows"][1]["stop_s"] = 7.5
    base["flows"][1]["actual"] = {"start_s": 2.5, "stop_s": 7.5}
    k = 4
    physical = copy.deepcopy(base)
    physical["mechanisms"]["dilation"] = {"factor": k, "setting": "auto"}
    for path, kind in dilation.unit_table().items():
        if kind in ("time", "rate"):
            undo = {"time": lambda v, k: v * k, "rate": lambda v, k: v / k}[kind]
            dilation._scale_at(physical, path, undo, k)
    assert physical["flows"][1]["stop_s"] == 30.0
    row, flows, _ = extract.summarise(physical)
    want_row, want_flows, _ = extract.summarise(base)
    assert row["disturbance_stop_s"] == pytest.approx(7.5) == pytest.approx(want_row["disturbance_stop_s"])
    assert [f["stop_s"] for f in flows][1] == pytest.approx(7.5)
    assert row["recovery_ratio"] == pytest.approx(want_row["recovery_ratio"], nan_ok=True)


def _two_flow_condition() -> dict:
    return {"backend": "emulated", "campaign": "smoke", "criterion": "staggered", "design": "paper",
            "flows": [{"variant": "reno", "impl": "port", "start_s": 0.0},
                      {"variant": "cubic", "impl": "port", "start_s": 2.5, "stop_s": 7.5}],
            "rtt_ms": 10.0, "drop": 0.0, "rep": 1, "duration_s": 10.0, "interval_s": 0.5, "seed": 1,
            "rate_bps": 1e9}


def _condition(drop, rtt_ms=24.2, flows=("reno",)):
    from tcpeval.spec import adhoc_condition
    return adhoc_condition(list(flows), rtt_ms, drop, 30, rate_bps=9.85e9, seed=1)


def test_where_loss_bounds_the_flows_below_the_link_the_factor_is_chosen_for_that_bound():
    # by hand: 10 / 1e-2 = 1,000 frames of 1,514 bytes a round trip of 24.2 ms: 0.50 Gbit/s
    bound = dilation.carried_bound_bps(_condition(1e-2))
    assert bound == pytest.approx(1000 * 1514 * 8 / 0.0242)
    assert dilation.rate_for_factor(_condition(1e-2), 9.85e9) == bound
    # two flows: twice that; a host that carries 2 Gbit/s runs either undilated
    two = _condition(1e-2, flows=("reno", "bic"))
    assert dilation.carried_bound_bps(two) == pytest.approx(2 * bound)
    assert dilation.choose("auto", dilation.rate_for_factor(two, 9.85e9), 2e9) == 1
    # where the bound lies above the link, and without loss, the link's rate decides
    assert dilation.rate_for_factor(_condition(1e-4), 9.85e9) == 9.85e9      # 49.5 Gbit/s bound
    assert dilation.carried_bound_bps(_condition(0)) is None
    assert dilation.rate_for_factor(_condition(0), 9.85e9) == 9.85e9
    assert dilation.rate_for_factor(_condition(1e-2), None) is None          # the host's default rate


def test_a_udp_flow_is_not_bounded_by_loss():
    from dataclasses import replace
    cond = _condition(1e-2, flows=("reno", "reno"))
    udp = replace(cond, flows=(cond.flows[0], replace(cond.flows[1], protocol="udp", variant="udp",
                                                       rate_bps=1e9)))
    assert dilation.carried_bound_bps(udp) is None

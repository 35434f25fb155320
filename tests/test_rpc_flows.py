"""RPC flows (protocol: rpc) in a design: their rules, their paths, their metrics."""
from __future__ import annotations

import math

import pytest

from tcpeval import paths, quantity, run_index, spec
from tcpeval.analysis import extract
from tcpeval.analysis import metrics as M
from tcpeval.condition import Flow
from tcpeval.report import design_report

RPC_DESIGN = "config/designs/rpc-beside-streams.yaml"


def _design(flows: list[dict], grid: dict | None = None) -> dict:
    return {"name": "mine", "defaults": {"duration_s": 10, "interval_s": 0.1, "repetitions": 1},
            "criteria": {"c": {"grid": grid or {"rtt_ms": [10], "drop": [0]}, "flows": flows}},
            "campaigns": {"one": {}}}


def _error(design: dict) -> str:
    with pytest.raises(spec.SpecError) as err:
        spec.validate_design(spec.normalise_numbers(design))
    return str(err.value)


def test_an_rpc_flow_expands_with_its_sizes_and_a_path_that_names_them():
    design = _design([{"variant": "cubic"},
                      {"variant": "reno", "protocol": "rpc", "request_bytes": 100, "response_bytes": "1M",
                       "rpcs_per_s": 500, "start_s": 2}])
    spec.validate_design(spec.normalise_numbers(design))
    (run,) = spec.expand(design, "one")
    rpc = run.flows[1]
    assert (rpc.protocol, rpc.request_bytes, rpc.response_bytes, rpc.rpcs_per_s) == ("rpc", 100, 1_000_000, 500.0)
    path = str(paths.trace_path(run))
    assert "/cubic+reno-rpc1m-r500/" in path
    assert run_index.resolve_path(path, design) == run


def test_the_rpc_design_expands_to_unique_paths_that_resolve_back():
    design = spec.load_design(RPC_DESIGN)
    runs = spec.expand(design, "full")
    names = [str(paths.trace_path(r)) for r in runs]
    assert len(set(names)) == len(runs) == 12
    assert any("/cubic+cubic-rpc10k/" in n for n in names) and any("/reno+reno-rpc1m/" in n for n in names)
    for r, n in zip(runs, names):
        assert run_index.resolve_path(n, design) == r


@pytest.mark.parametrize("missing", ["request_bytes", "response_bytes"])
def test_an_rpc_flow_without_sizes_is_refused_naming_the_size(missing):
    flow = {"variant": "cubic", "protocol": "rpc", "request_bytes": 100, "response_bytes": 10000}
    del flow[missing]
    msg = _error(_design([flow]))
    assert f"criteria/c/flows/0/{missing}" in msg and "an RPC flow needs" in msg


def test_a_request_too_small_for_its_header_is_refused():
    msg = _error(_design([{"variant": "cubic", "protocol": "rpc", "request_bytes": 4, "response_bytes": 10}]))
    assert "flows/0/request_bytes" in msg and ">= 8" in msg


def test_rpc_fields_on_a_stream_are_refused():
    msg = _error(_design([{"variant": "cubic", "response_bytes": 10000}]))
    assert "flows/0/response_bytes" in msg and "only an RPC flow" in msg


def test_an_rpc_flow_needs_a_variant():
    msg = _error(_design([{"protocol": "rpc", "request_bytes": 100, "response_bytes": 10}]))
    assert "criteria/c/flows/0" in msg and "RPC flow needs a variant" in msg


def test_an_rpc_rate_of_zero_is_refused():
    msg = _error(_design([{"variant": "cubic", "protocol": "rpc", "request_bytes": 100,
                           "response_bytes": 10, "rpcs_per_s": 0}]))
    assert "rpcs_per_s" in msg


def test_flow_labels_of_rpc_flows():
    base = dict(variant="cubic", protocol="rpc", request_bytes=100)
    assert Flow(**base, response_bytes=10_000).label == "cubic-rpc10k"
    assert Flow(**base, response_bytes=1500, impl="native").label == "cubic-native-rpc1500"
    assert Flow(**base, response_bytes=10**6, rpcs_per_s=0.5).label == "cubic-rpc1m-r0p5"
    assert quantity.size("1M") == 10**6


# ------------------------------------------------------------------ metrics

def test_latency_percentiles_are_nearest_rank_by_hand():
    lat = [7, 1, 9, 3, 5, 2, 10, 4, 8, 6]  # 1..10 us
    s = M.rpc_latency_summary(lat)
    assert (s["count"], s["min"], s["max"], s["mean"]) == (10, 1, 10, 5.5)
    # nearest rank: x[ceil(p n) - 1]: p50 -> x[4] = 5, p90 -> x[8] = 9, p99 -> x[9] = 10
    assert (s["p50"], s["p90"], s["p99"], s["p999"]) == (5, 9, 10, 10)
    thousand = M.rpc_latency_summary(range(1, 1001))
    assert (thousand["p50"], thousand["p90"], thousand["p99"], thousand["p999"]) == (500, 900, 990, 999)


def test_latency_summary_of_no_rpcs_is_empty_not_zero():
    s = M.rpc_latency_summary([])
    assert s["count"] == 0 and math.isnan(s["p99"]) and math.isnan(s["mean"])


def test_latency_cdf_keeps_the_tail():
    cdf = M.rpc_latency_cdf(range(1, 10001))
    probs = M.RPC_CDF_PROBS
    assert len(cdf) == len(probs) and cdf[0] == 1 and cdf[-1] == 10000
    assert cdf[probs.index(0.5)] == 5000 and cdf[probs.index(0.999)] == 9990


def test_rpc_columns_of_the_flows_table_by_hand():
    rpc = {"request_bytes": 100, "response_bytes": 10000, "rpcs_per_s": None, "issued": 4, "completed": 4,
           "start_s": [0.0, 0.5, 1.0, 1.5], "latency_us": [100.0, 200.0, 300.0, 500_000.0]}
    cols = extract._rpc_columns(rpc)
    assert cols["rpc_completed"] == 4 and cols["rpc_per_s"] == pytest.approx(4 / 2.0)  # last ends at 2.0 s
    assert (cols["rpc_lat_min_us"], cols["rpc_lat_p50_us"], cols["rpc_lat_max_us"]) == (100, 200, 500_000)
    assert cols["rpc_lat_mean_us"] == pytest.approx((100 + 200 + 300 + 500_000) / 4)
    assert extract._rpc_columns(None) == {}


def test_flow_labels_in_the_report_say_what_an_rpc_flow_asks():
    import pandas as pd
    row = pd.Series({"flow": 1, "variant": "cubic", "impl": "port", "protocol": "rpc",
                     "rpc_request_bytes": 100.0, "rpc_response_bytes": 1e6, "rpc_rate_setting": math.nan})
    assert design_report._flow_label(row) == "1: cubic, RPC 100 B/1 MB back to back"

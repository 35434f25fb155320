"""The trace contract: validation names the field, writes are atomic and never overwrite."""
import copy
import os

import pytest

from tcpeval import spec, trace


def make_record(samples=5):
    cond = spec.adhoc_condition(["bic", "reno"], rtt_ms=6.2, drop=1e-5, duration_s=5, starts=[0, 1])
    t = [round(0.1 * (i + 1), 1) for i in range(samples)]
    flow = lambda i, v: {
        "id": i, "variant": v, "impl": "port", "protocol": "tcp", "start_s": cond.flows[i].start_s,
        "cc": {"requested": f"{v}316", "verified": f"{v}316", "object_sha256": "ab" * 32,
               "source_sha256": "cd" * 32, "hz": 250},
        "samples": {"t_s": t, "bytes": [1e8] * samples, "throughput_bps": [8e9] * samples,
                    "cwnd_bytes": [1e6] * samples, "rtt_us": [6200.0] * samples, "retransmits": [0] * samples},
        "summary": {"bytes": 1e8 * samples, "mean_throughput_bps": 8e9, "retransmits": 0},
        "raw_files": [f"flow{i}.iperf3.json"],
    }
    return {
        "schema_version": 1,
        "run": {"path": "out", "backend": "emulated", "campaign": "adhoc", "criterion": "adhoc", "rep": 1},
        "condition": cond.to_dict(),
        "environment": {"hostname": "h", "kernel": "6.18", "cpus": 2, "tools": {"iperf3": "3.12"},
                        "tcpeval_version": "0.1.0", "git_revision": None},
        "mechanisms": {"drop": "bpf-tc", "delay": "delayline", "rate": "htb"},
        "flows": [flow(0, "bic"), flow(1, "reno")],
        "measured": {"base_rtt_ms": 0.05, "rtt_ms": 6.21,
                     "drop": {"seen": 1_000_000, "dropped": 11, "rate": 1.1e-5, "ci95": [5e-6, 2e-5]},
                     "bottleneck_rate_bps": 5e9, "host_capacity_bps": 5.8e9},
        "fidelity": {"verdict": "ok", "reasons": [], "tolerances": {}},
        "started_at": "2026-11-22T05:00:00+00:00", "finished_at": "2026-11-22T05:00:07+00:00",
    }


def test_a_complete_record_is_valid():
    trace.validate(make_record())


@pytest.mark.parametrize("mutate, where", [
    (lambda r: r["condition"].pop("rtt_ms"), "condition: 'rtt_ms' is a required property"),
    (lambda r: r["condition"].__setitem__("drop", 1.5), "condition/drop"),
    (lambda r: r["flows"][1].__setitem__("impl", "kernel"), "flows/1/impl"),
    (lambda r: r["fidelity"].__setitem__("verdict", "flagged"), "fidelity/reasons"),
    (lambda r: r["measured"]["drop"].__setitem__("dropped", 2_000_000), "measured/drop: dropped exceeds seen"),
    (lambda r: r["flows"][0]["samples"]["bytes"].pop(), "flows/0/samples: columns differ in length"),
    (lambda r: r["flows"][0]["samples"]["t_s"].reverse(), "flows/0/samples/t_s: times must increase"),
    (lambda r: r.__setitem__("extra", 1), "Additional properties"),
])
def test_contract_violations_name_the_field(mutate, where):
    record = make_record()
    mutate(record)
    with pytest.raises(trace.TraceError) as err:
        trace.validate(record, source="run-x/trace.json")
    assert where in str(err.value) and "run-x/trace.json" in str(err.value)


def test_write_then_read_round_trips(tmp_path):
    record = make_record()
    path = trace.write_trace(tmp_path / "run", record)
    assert path.name == "trace.json"
    assert trace.read_trace(tmp_path / "run") == record
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["trace.json"]  # no temp file left


def test_existing_trace_is_never_overwritten_without_force(tmp_path):
    first = make_record()
    trace.write_trace(tmp_path, first)
    second = copy.deepcopy(first)
    second["notes"] = ["second"]
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        trace.write_trace(tmp_path, second)
    assert trace.read_trace(tmp_path) == first
    trace.write_trace(tmp_path, second, force=True)
    assert trace.read_trace(tmp_path)["notes"] == ["second"]


def test_invalid_record_writes_nothing(tmp_path):
    record = make_record()
    record["fidelity"]["verdict"] = "great"
    with pytest.raises(trace.TraceError):
        trace.write_trace(tmp_path / "run", record)
    assert not (tmp_path / "run" / "trace.json").exists()


def test_failure_while_writing_leaves_no_partial_file(tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        trace.write_trace(tmp_path, make_record())
    assert list(tmp_path.iterdir()) == []


def test_missing_and_corrupt_traces_name_the_run(tmp_path):
    with pytest.raises(trace.TraceError, match=f"{tmp_path}/trace.json: no trace"):
        trace.read_trace(tmp_path)
    (tmp_path / "trace.json").write_text('{"schema_version": 1, "run": ')
    with pytest.raises(trace.TraceError, match=f"{tmp_path}/trace.json: unreadable trace"):
        trace.read_trace(tmp_path)


def test_nan_is_refused_because_json_has_none(tmp_path):
    record = make_record()
    record["measured"]["rtt_ms"] = float("nan")
    with pytest.raises(ValueError):
        trace.write_trace(tmp_path, record)
    assert not (tmp_path / "trace.json").exists()

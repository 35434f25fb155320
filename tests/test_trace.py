"""The trace contract: validation names the field, writes are atomic and never overwrite."""
import copy
import json
import os
import shutil
from pathlib import Path

import pytest

from tcpeval import spec, trace


def make_record(samples=5):
    cond = spec.adhoc_condition(["bic", "reno"], rtt_ms=6.2, drop=1e-5, duration_s=5, starts=[0, 1])
    t = [round(0.1 * (i + 1), 1) for i in range(samples)]
    def flow(i, v):
        return {
            "id": i, "variant": v, "impl": "port", "protocol": "tcp", "start_s": cond.flows[i].start_s,
            "cc": {"requested": f"{v}316", "verified": f"{v}316", "object_sha256": "ab" * 32,
                   "source_sha256": "cd" * 32, "hz": 250},
            # no two intervals alike, as real ones (a repeated last one is version 3's fault)
            "samples": {"t_s": t, "bytes": [1e8 + i for i in range(samples)],
                        "throughput_bps": [8e9 + 80 * i for i in range(samples)],
                        "cwnd_bytes": [1e6] * samples, "rtt_us": [6200.0] * samples, "retransmits": [0] * samples},
            "summary": {"bytes": 1e8 * samples, "mean_throughput_bps": 8e9, "retransmits": 0},
            "raw_files": [f"flow{i}.iperf3.json"],
        }
    return {
        "schema_version": trace.SCHEMA_VERSION,
        "run": {"path": "out", "backend": "emulated", "campaign": "adhoc", "criterion": "adhoc", "rep": 1},
        "condition": cond.to_dict(),
        "environment": {"hostname": "h", "kernel": "6.18", "cpus": 2, "tools": {"iperf3": "3.12"},
                        "tcpeval_version": "0.1.0", "git_revision": None},
        "mechanisms": {"drop": "bpf-tc", "delay": "delayline", "rate": "htb"},
        "flows": [flow(0, "bic"), flow(1, "reno")],
        "measured": {"base_rtt_ms": 0.05, "rtt_ms": 6.21,
                     "drop": {"seen": 1_000_000, "dropped": 11, "rate": 1.1e-5, "ci95": [5e-6, 2e-5]},
                     "bottleneck_rate_bps": 5e9, "host_capacity_bps": 5.8e9},
        "fidelity": {"verdict": "ok", "reasons": [], "findings": [], "tolerances": {}},
        "started_at": "2026-11-22T05:00:00+00:00", "finished_at": "2026-11-22T05:00:07+00:00",
    }


def test_a_complete_record_is_valid():
    trace.validate(make_record())


def test_a_flagged_record_carries_its_findings_fields():
    from tcpeval.backends import fidelity
    record = make_record()
    findings = [fidelity.switch_input_check(3, 1000).record()]
    record["fidelity"].update(verdict="flagged", reasons=[f["text"] for f in findings], findings=findings)
    trace.validate(record)
    assert findings[0]["input_backlog"] and findings[0]["fell_behind"]


@pytest.mark.parametrize("mutate, where", [
    (lambda r: r["condition"].pop("rtt_ms"), "condition: 'rtt_ms' is a required property"),
    (lambda r: r["condition"].__setitem__("drop", 1.5), "condition/drop"),
    (lambda r: r["flows"][1].__setitem__("impl", "kernel"), "flows/1/impl"),
    (lambda r: r["fidelity"].__setitem__("verdict", "flagged"), "fidelity/reasons"),
    (lambda r: r["fidelity"].__setitem__("reasons", ["drop: 3 packets dropped with p = 0"]),
     "fidelity/reasons: not the findings' sentences"),
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


# --- format versions: upgrade, read, the CLI -------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"
V1_EMULATED = FIXTURES / "trace-v1-emulated.json"  # a real version-1 trace, cut short


def _leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, node


def _as_v1_testbed_dilated(record):
    """A version-1 record as the backends wrote it, from a current one: the prose added."""
    old = copy.deepcopy(record)
    old["schema_version"] = 1
    old["mechanisms"]["dilation"] = {
        "factor": 4, "setting": 4, "units": "physical (testbed: no dilation)",
        "scaled": {"physical_rate_bps": 1e8, "port_clocks": "cc_dilation = 4: emulated jiffies ...",
                   "rto_min": "net.ipv4.tcp_rto_min_us = 800000 on every endpoint"},
        "not_scaled": {"buffer_bytes": "kept in bytes", "drop_probability": "kept (per packet)",
                       "delayed_ack_timer": "...", "initial_rto": "...", "tso_autosizing": "...",
                       "rtt_based_timers": "..."}}
    old["measured"]["rtt_probe_method"] = "UDP echo, paced probes, median"
    old["fidelity"]["tolerances"] = {"ack_clock": {"min_acks": 1000, "over": "the second half",
                                                   "excludes": "out-of-order segments"}}
    return old


def test_the_schema_describes_the_current_version():
    assert trace.schema()["properties"]["schema_version"] == {
        **trace.schema()["properties"]["schema_version"], "const": trace.SCHEMA_VERSION}


def test_a_real_version_1_trace_upgrades_to_a_valid_current_one_with_the_same_facts():
    old = json.loads(V1_EMULATED.read_text())
    assert old["schema_version"] == 1 and trace.prose_keys(old)
    with pytest.raises(trace.TraceError, match="schema_version"):
        trace.validate(old)  # the schema is the current version's
    before = copy.deepcopy(old)
    new = trace.upgrade(old)
    assert old == before  # the argument is left alone
    trace.validate(new)
    assert new["schema_version"] == trace.SCHEMA_VERSION == 4 and trace.prose_keys(new) == []
    new_leaves = dict(_leaves(new))
    for path, value in _leaves(old):
        if path in trace.V1_PROSE:
            assert path not in new_leaves
        elif path in trace.V1_NAMES:
            assert new_leaves[path] == trace.V1_NAMES[path][value]
        elif path != ("schema_version",):
            assert new_leaves[path] == value, path  # every fact kept as it was
    added = set(new_leaves) - {p for p, _ in _leaves(old)}
    assert added == {("mechanisms", "switch", "program"), ("fidelity", "findings")}
    assert new["fidelity"]["findings"] == []  # an ok run's: none
    assert new["mechanisms"]["switch"]["mechanism"] == "bpf-tc-clone-redirect"
    assert new["mechanisms"]["traffic"]["pacing"] == "none"
    assert new["mechanisms"]["delay_detail"]["delay_ns"] == old["mechanisms"]["delay_detail"]["delay_ns"]
    assert new["flows"][0]["samples"] is old["flows"][0]["samples"]  # shared, not copied
    assert trace.upgrade(new) is new  # current: nothing to do


def test_a_version_1_testbed_or_dilated_record_upgrades_to_what_version_2_writes():
    current = make_record()
    current["mechanisms"]["dilation"] = {"factor": 4, "setting": 4,
                                         "scaled": {"physical_rate_bps": 1e8,
                                                    "rto_min": "net.ipv4.tcp_rto_min_us = 800000 on every endpoint"},
                                         "not_scaled": {}}
    current["fidelity"]["tolerances"] = {"ack_clock": {"min_acks": 1000}}
    assert trace.upgrade(_as_v1_testbed_dilated(current)) == current


def test_read_trace_upgrades_in_memory_and_leaves_the_old_file_as_it_is(tmp_path):
    from tcpeval.analysis import extract

    run = tmp_path / "run"
    run.mkdir()
    target = run / "trace.json"
    shutil.copy(V1_EMULATED, target)
    raw, stat = target.read_bytes(), target.stat()
    record = trace.read_trace(run)
    assert record == trace.upgrade(json.loads(raw))
    assert extract.load(run) == record  # the analysis reads it the same way
    assert target.read_bytes() == raw and target.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in run.iterdir()) == ["trace.json"]


@pytest.mark.parametrize("version, message", [
    (5, "trace format version 5 is newer than this tcpeval reads (versions 1 to 4)"),
    (None, "no schema_version"),
    ("2", "schema_version '2' is not a trace format version"),
    (0, "schema_version 0 is not a trace format version"),
    (True, "schema_version True is not a trace format version"),
])
def test_a_missing_unknown_or_newer_version_is_a_clear_error(tmp_path, version, message):
    from tcpeval.analysis import extract

    record = make_record()
    if version is None:
        del record["schema_version"]
    else:
        record["schema_version"] = version
    (tmp_path / "trace.json").write_text(json.dumps(record))
    for read in (trace.read_trace, extract.load):
        with pytest.raises(trace.TraceError) as err:
            read(tmp_path)
        assert message in str(err.value) and f"{tmp_path}/trace.json" in str(err.value)


def test_writes_are_in_the_current_version_without_prose(tmp_path):
    old = json.loads(V1_EMULATED.read_text())
    with pytest.raises(trace.TraceError, match="schema_version"):
        trace.write_trace(tmp_path / "a", old)
    record = make_record()
    record["measured"]["rtt_probe_method"] = "UDP echo, paced probes, median"
    with pytest.raises(trace.TraceError, match="prose .* measured/rtt_probe_method"):
        trace.write_trace(tmp_path / "b", record)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_new_version_is_one_registered_step(monkeypatch):
    monkeypatch.setattr(trace, "SCHEMA_VERSION", 5)
    monkeypatch.setitem(trace._UPGRADES, 4, lambda r: {**r, "schema_version": 5, "notes": ["v5"]})
    new = trace.upgrade(json.loads(V1_EMULATED.read_text()))
    assert new["schema_version"] == 5 and new["notes"] == ["v5"] and trace.prose_keys(new) == []


def _as_v3_interrupted(record, repeat=True):
    """A version-3 record of a run that stopped early (make_record's intervals all differ)
    and, with ``repeat``, whose last sample is the iperf3 server's repeated last interval,
    as version 3 matched it to the client's partial one."""
    old = copy.deepcopy(record)
    old["schema_version"] = 3
    if repeat:
        for flow in old["flows"]:
            s = flow["samples"]
            s["bytes"][-1], s["throughput_bps"][-1] = s["bytes"][-2], s["throughput_bps"][-2]
    return old


def test_a_version_3_trace_loses_the_iperf3_servers_repeated_last_interval_and_nothing_else():
    old = _as_v3_interrupted(make_record(samples=6))
    before = copy.deepcopy(old)
    new = trace.upgrade(old)
    assert old == before
    trace.validate(new)
    for was, now in zip(old["flows"], new["flows"]):
        assert now["samples"] == {k: v[:5] for k, v in was["samples"].items()}  # every column, one sample less
        assert now["summary"] == was["summary"]
    assert {k: v for k, v in new.items() if k not in ("flows", "schema_version")} == {
        k: v for k, v in old.items() if k not in ("flows", "schema_version")}


def test_a_version_3_trace_without_a_repeat_keeps_every_sample():
    distinct = _as_v3_interrupted(make_record(samples=6), repeat=False)
    assert trace.upgrade(distinct)["flows"] == distinct["flows"]
    # a flow that carried nothing in its last two intervals repeats no interval of data
    stalled = _as_v3_interrupted(make_record(samples=6))
    for flow in stalled["flows"]:
        flow["samples"]["bytes"][-2:] = [0, 0]
        flow["samples"]["throughput_bps"][-2:] = [0.0, 0.0]
    assert trace.upgrade(stalled)["flows"] == stalled["flows"]


def test_a_version_2_trace_gets_its_findings_from_its_sentences_with_the_retry_policy_they_had():
    reasons = ["delay line: 900/33447 frames held back 2 ms or more (max 15 ms)",
               "rtt: measured 5.6 ms, setting 6.2 ms, tolerance +-0.186 ms",
               "rtt: the path's base RTT 1.1 ms exceeds the setting 0.2 ms",
               "cc: flow bic asked for the 3.16 port; ran the host's native cubic (tcpeval.cc unavailable)",
               "cc: the host ran congestion-control hooks without the port's program ...",
               "drop: 3 packets dropped with p = 0"]
    old = make_record()
    old["schema_version"] = 2
    old["fidelity"] = {"verdict": "flagged", "reasons": reasons, "tolerances": {},
                       "earlier_attempts": [{"reasons": reasons[:1], "mean_throughput_bps": [1e9]}]}
    new = trace.upgrade(old)
    trace.validate(new)
    assert [(f["check"], f["transient"]) for f in new["fidelity"]["findings"]] == [
        ("delay line", True), ("rtt", True), ("rtt", False), ("cc", False), ("cc", True), ("drop", False)]
    assert [f["text"] for f in new["fidelity"]["findings"]] == reasons
    assert new["fidelity"]["earlier_attempts"][0]["findings"][0]["check"] == "delay line"


def _cli(*args):
    from tcpeval.cli import main

    return main(["trace", "upgrade", *map(str, args)])


def test_cli_dry_run_prints_the_changes_and_rewrites_nothing(tmp_path, capsys):
    for name in ("r1", "r2"):
        (tmp_path / name).mkdir()
        shutil.copy(V1_EMULATED, tmp_path / name / "trace.json")
    trace.write_trace(tmp_path / "r3", make_record())
    before = {p: p.read_bytes() for p in tmp_path.rglob("trace.json")}
    assert _cli(tmp_path) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path}/r1/trace.json: would upgrade version 1 -> 4" in out
    assert "- measured/rtt_probe_method" in out and "- mechanisms/segment_mark/why" in out
    assert '~ mechanisms/traffic/pacing: "none: ' in out and "+ mechanisms/switch/program" in out
    assert f"the same changes as {tmp_path}/r1/trace.json" in out
    assert "2 of 3 traces in an older version, 1 current; nothing rewritten" in out
    assert {p: p.read_bytes() for p in tmp_path.rglob("trace.json")} == before


def test_cli_in_place_rewrites_old_traces_atomically(tmp_path, capsys):
    target = tmp_path / "run" / "trace.json"
    target.parent.mkdir()
    shutil.copy(V1_EMULATED, target)
    assert _cli(target, "--in-place") == 0
    assert f"{target}: upgraded version 1 -> 4" in capsys.readouterr().out
    on_disk = json.loads(target.read_text())
    assert on_disk == trace.upgrade(json.loads(V1_EMULATED.read_text()))
    assert trace.read_trace(target) == on_disk
    assert sorted(p.name for p in target.parent.iterdir()) == ["trace.json"]  # no temp file left
    assert _cli(target.parent, "--in-place") == 0
    assert "0 of 1 traces in an older version, 1 current" in capsys.readouterr().out


def test_cli_refuses_everything_if_one_trace_is_too_new(tmp_path, capsys):
    old = tmp_path / "old" / "trace.json"
    old.parent.mkdir()
    shutil.copy(V1_EMULATED, old)
    newer = tmp_path / "newer" / "trace.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps({**make_record(), "schema_version": 7}))
    assert _cli(old, newer, "--in-place") == 2
    err = capsys.readouterr().err
    assert f"{newer}: trace format version 7 is newer than this tcpeval reads (versions 1 to 4)" in err
    assert "nothing was rewritten" in err
    assert old.read_bytes() == V1_EMULATED.read_bytes()

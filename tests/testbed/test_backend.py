"""The testbed backend end to end: real OpenSSH hosts, real iperf3 and kernel TCP, the
drop module's registers programmed over SSH, a valid trace."""
import pytest

from tcpeval import spec, trace
from tcpeval.backends.base import BackendError
from tcpeval.backends.testbed import (
    TestbedBackend,
    TestbedConfigError,
    load_description,
)


def condition(rtt_ms, variant="reno", impl="native", drop=1e-3, duration=3, background_loss=0.0):
    return spec.adhoc_condition([variant], rtt_ms=rtt_ms, drop=drop, duration_s=duration,
                                backend="testbed", impl=impl, interval_s=0.2, seed=7,
                                background_loss=background_loss)


@pytest.mark.root
def test_a_run_over_ssh_writes_a_valid_trace_with_the_drop_rate_realised(testbed_lab, tmp_path):
    lab, path = testbed_lab
    rtt = round(path.rtt_ms(), 3)
    record = TestbedBackend(description=path.description(rtt)).run(condition(rtt), tmp_path / "run")
    trace.validate(record)
    assert trace.read_trace(tmp_path / "run") == record
    (flow,) = record["flows"]
    assert flow["cc"] == {**flow["cc"], "requested": "reno", "verified": "reno"}
    assert len(flow["samples"]["t_s"]) >= 10 and flow["summary"]["mean_throughput_bps"] > 1e7
    drop = record["measured"]["drop"]
    assert drop["seen"] * 1e-3 >= 10, "too few packets to test the drop rate"
    assert drop["ci95"][0] <= 1e-3 <= drop["ci95"][1]
    assert record["mechanisms"]["drop"] == "netfpga-registers"
    assert record["fidelity"]["verdict"] == "ok", record["fidelity"]["reasons"]
    assert (tmp_path / "run" / "iperf3-flow0.json").exists() and (tmp_path / "run" / "run.log").exists()
    assert "net.ipv4.tcp_timestamps" in record["environment"]["sysctls"]["endpoints"]["s1"]
    # the sender's connections start under a default that does not pace (3.16 did not)
    assert record["environment"]["sysctls"]["endpoints"]["s1"]["net.ipv4.tcp_congestion_control"] == "reno"


@pytest.mark.root
def test_a_port_registered_on_the_sender_is_used_and_verified(testbed_lab, tmp_path):
    from tcpeval import cc

    lab, path = testbed_lab
    rtt = round(path.rtt_ms(), 3)
    with cc.loaded("bic"):
        record = TestbedBackend(description=path.description(rtt)).run(
            condition(rtt, "bic", "port", drop=0, duration=2, background_loss=2.2e-8), tmp_path / "run")
    assert record["flows"][0]["cc"]["verified"] == "bic316"
    assert record["measured"]["drop"]["dropped"] == 0
    # the ring's losses are the emulator's stand-in; a testbed's path has its own, and says so
    assert record["condition"]["background_loss"] == 2.2e-8 and record["mechanisms"]["background_loss"] is None
    assert "background loss 2.2e-08 of the condition: not emulated here" in (tmp_path / "run" / "run.log").read_text()


@pytest.mark.root
def test_a_flow_stops_on_time_and_its_actual_start_and_stop_are_recorded(testbed_lab, tmp_path):
    lab, path = testbed_lab
    rtt = round(path.rtt_ms(), 3)
    cond = spec.adhoc_condition(["reno"], rtt_ms=rtt, drop=0, duration_s=3, backend="testbed", impl="native",
                                interval_s=0.2, seed=7, stops=[2.0])
    record = TestbedBackend(description=path.description(rtt)).run(cond, tmp_path / "run")
    (flow,) = record["flows"]
    assert flow["stop_s"] == 2.0 and flow["samples"]["t_s"][-1] <= 2.05
    assert flow["actual"]["start_s"] < 0.5 and 1.9 < flow["actual"]["stop_s"] < 3.0, flow["actual"]


@pytest.mark.root
def test_a_condition_for_another_rtt_than_the_patched_path_is_refused(testbed_lab, tmp_path):
    lab, path = testbed_lab
    with pytest.raises(BackendError, match=r"condition.rtt_ms = 24.2: the testbed path is patched for 6.2 ms"):
        TestbedBackend(description=path.description(6.2)).run(condition(24.2), tmp_path / "run")
    assert not (tmp_path / "run" / "trace.json").exists()


@pytest.mark.root
def test_ecn_marking_and_a_flows_ecn_are_refused_naming_the_field(testbed_lab, tmp_path):
    from dataclasses import replace
    lab, path = testbed_lab
    rtt = round(path.rtt_ms(), 3)
    backend = TestbedBackend(description=path.description(rtt))
    marked = replace(condition(rtt), ecn_threshold_bytes=30_000)
    with pytest.raises(BackendError, match=r"condition.ecn_threshold_bytes: ECN marking .* dropper drops only"):
        backend.run(marked, tmp_path / "marked")
    told = replace(condition(rtt), flows=(replace(condition(rtt).flows[0], ecn=True),))
    with pytest.raises(BackendError, match=r"condition.flows\[\].ecn: a flow's ECN setting"):
        backend.run(told, tmp_path / "told")
    assert not (tmp_path / "marked" / "trace.json").exists() and not (tmp_path / "told" / "trace.json").exists()


@pytest.mark.root
def test_an_algorithm_missing_on_the_sender_is_named(testbed_lab, tmp_path):
    lab, path = testbed_lab
    rtt = round(path.rtt_ms(), 3)
    with pytest.raises(BackendError, match=r"s1: congestion control 'htcp316' .* is not available"):
        TestbedBackend(description=path.description(rtt)).run(condition(rtt, "htcp", "port"), tmp_path / "run")
    assert "run failed" in (tmp_path / "run" / "run.log").read_text()


def test_missing_description_says_how_to_make_one(tmp_path):
    with pytest.raises(TestbedConfigError, match="copy config/testbed.example.yaml"):
        load_description(tmp_path / "testbed.yaml")


def test_the_example_description_is_valid_and_names_missing_fields(tmp_path):
    from pathlib import Path

    import yaml

    example = Path(__file__).resolve().parents[2] / "config" / "testbed.example.yaml"
    desc = load_description(example)
    assert [h["name"] for h in desc["senders"]] == ["s1", "s2"]
    broken = yaml.safe_load(example.read_text())
    del broken["receivers"][1]["data_ip"]
    broken["dropper"]["write"] = "wraxi {address:#x}"
    path = tmp_path / "testbed.yaml"
    path.write_text(yaml.safe_dump(broken))
    with pytest.raises(TestbedConfigError) as err:
        load_description(path)
    assert "receivers[1].data_ip: required" in str(err.value)
    assert "dropper.write: the template must contain {address}, {value}" in str(err.value)


def test_both_backends_share_one_record_skeleton(tmp_path):
    # backends/record.py: the trace format's version from tcpeval.trace, the verdict's
    # internal checks left out, notes only where a backend keeps them
    from tcpeval.backends import fidelity, record

    cond = condition(6.2)
    v = fidelity.verdict(fidelity.Setting(drop=cond.drop, rtt_ms=6.2),
                         fidelity.PathMeasurements(seen=0, dropped=0, rtt_ms=6.2))
    rec = record.build(condition=cond, run_dir=tmp_path, backend="testbed", environment={}, mechanisms={},
                       flows=[], measured={"drop": record.drop_measurement(0, 0)}, verdict=v,
                       started_at="t0")
    assert rec["schema_version"] == trace.SCHEMA_VERSION
    assert list(rec) == ["schema_version", "run", "condition", "environment", "mechanisms", "flows",
                         "measured", "fidelity", "started_at", "finished_at"]
    assert set(rec["fidelity"]) == {"verdict", "reasons", "findings", "tolerances"} and "checks" in v
    assert rec["measured"]["drop"] == {"seen": 0, "dropped": 0, "rate": None, "ci95": [0.0, 1.0],
                                       "interval": "wilson"}
    assert "notes" in record.build(condition=cond, run_dir=tmp_path, backend="emulated", environment={},
                                   mechanisms={}, flows=[], measured={}, verdict=v, started_at="t0", notes=[])
    with pytest.raises(BackendError, match="refusing to overwrite"):
        (tmp_path / trace.TRACE_FILE).write_text("{}")
        record.refuse_overwrite(tmp_path, force=False)

"""Trace -> per-run Parquet -> gathered tables: errors name the run, gather is incremental."""
import copy
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from tcpeval import paths, trace
from tcpeval.analysis import extract, metrics, tables, tidy
from tcpeval.analysis.cli import per_run_dir
from tcpeval.cli import main


def _trace(raw, cond):
    return raw / paths.run_dir(cond, ".") / "trace.json"


def test_synthetic_traces_are_schema_valid(smoke_raw, smoke_conditions):
    for cond in smoke_conditions[:: max(1, len(smoke_conditions) // 6)]:
        trace.validate(json.loads(_trace(smoke_raw, cond).read_text()))  # the full contract


def test_summary_matches_metrics(smoke_raw, smoke_conditions):
    cond = next(c for c in smoke_conditions if c.criterion == "convergence")
    record = extract.load(_trace(smoke_raw, cond))
    row, flows, samples = extract.summarise(record)
    assert row["run"] == paths.run_dir(cond, ".")
    new = max(record["flows"], key=lambda f: f["start_s"])
    t, b = np.array(new["samples"]["t_s"]), np.array(new["samples"]["bytes"])
    end = cond.duration_s - new["start_s"]
    c = metrics.convergence(t, b, end_s=end)
    assert row["conv_applicable"] and row["conv_time_s"] == pytest.approx(c.time_s)
    assert row["spread_bps"] == pytest.approx(c.spread_bps)
    assert row["jain"] == pytest.approx(metrics.jain_index([row["flow1_bps"], row["flow2_bps"]]))
    assert row["utilisation_bps"] == pytest.approx(row["flow1_bps"] + row["flow2_bps"])
    assert len(samples["t_s"]) == sum(len(f["samples"]["t_s"]) for f in record["flows"])


def test_a_run_records_its_condition_s_background_loss_and_what_its_droppers_drew(smoke_raw, smoke_conditions):
    cond = next(c for c in smoke_conditions if c.criterion == "convergence" and c.rtt_ms == 6.2)
    record = extract.load(_trace(smoke_raw, cond))
    # the counters as the emulated backend records them (one dropper per receiver's link)
    record["measured"]["background_drop"] = [{"seen": 31874149, "dropped": 1}, {"seen": 13760371, "dropped": 0}]
    row = extract.summarise(record)[0]
    assert row["background_loss"] == cond.background_loss == 2.2e-8 and row["background_dropped"] == 1
    record["measured"]["background_drop"] = None
    assert extract.summarise(record)[0]["background_dropped"] is None


def test_corrupt_and_missing_trace_name_the_run(smoke_raw, smoke_conditions, tmp_path, capsys):
    cond = smoke_conditions[0]
    path = _trace(smoke_raw, cond)
    path.write_text(path.read_text()[:500])
    run_dir = paths.run_dir(cond, ".")
    with pytest.raises(extract.BadTrace, match=run_dir):
        tidy.write_run(path, tmp_path / "o")
    assert main(["metrics", "run", str(path), str(tmp_path / "o")]) == 2
    assert run_dir in capsys.readouterr().err
    missing = _trace(smoke_raw, smoke_conditions[1])
    missing.unlink()
    with pytest.raises(extract.BadTrace, match="no trace"):
        tidy.write_run(missing, tmp_path / "o2")


def test_contract_violation_in_samples_is_caught(smoke_raw, smoke_conditions, tmp_path):
    path = _trace(smoke_raw, smoke_conditions[2])
    rec = json.loads(path.read_text())
    rec["flows"][0]["samples"]["bytes"][5] = "lots"
    path.write_text(json.dumps(rec))
    with pytest.raises(extract.BadTrace, match="samples/bytes"):
        tidy.write_run(path, tmp_path / "o")
    rec["flows"][0]["samples"]["bytes"][5] = 1.0
    rec["flows"][0]["samples"]["t_s"][7] = 0.0
    path.write_text(json.dumps(rec))
    with pytest.raises(extract.BadTrace, match="increase strictly"):
        tidy.write_run(path, tmp_path / "o")


def test_skip_bad_lists_the_run(smoke_raw, smoke_conditions, tmp_path):
    bad = _trace(smoke_raw, smoke_conditions[0])
    bad.write_text("{not json")
    good = _trace(smoke_raw, smoke_conditions[1])
    outs = []
    for i, p in enumerate((bad, good)):
        tidy.write_run(p, tmp_path / f"r{i}", skip_bad=True)
        outs.append(tmp_path / f"r{i}")
    with pytest.raises(extract.BadTrace, match=paths.run_dir(smoke_conditions[0], ".")):
        tidy.gather(outs, tmp_path / "g")
    res = tidy.gather(outs, tmp_path / "g", skip_bad=True)
    assert [b["run"] for b in res["bad"]] == [paths.run_dir(smoke_conditions[0], ".")]
    listed = json.loads((tmp_path / "g" / tidy.BAD_LIST).read_text())
    assert listed[0]["run"] == paths.run_dir(smoke_conditions[0], ".")


def test_incremental_gather_does_not_reread_traces(smoke_raw, smoke_conditions, tmp_path):
    res = tmp_path / "results"
    conds = smoke_conditions[:4]
    outs = []
    for c in conds[:3]:
        out = per_run_dir(str(res), paths.run_dir(c, "."))
        tidy.write_run(_trace(smoke_raw, c), out)
        outs.append(out)
        _trace(smoke_raw, c).unlink()   # gone: the gather must not need it
    target = res / "emulated" / "smoke"
    tidy.gather(outs, target)
    assert pq.read_table(target / tidy.RUNS_TABLE).num_rows == 3
    n3 = pq.read_table(target / tidy.SAMPLES_TABLE).num_rows
    new = per_run_dir(str(res), paths.run_dir(conds[3], "."))
    tidy.write_run(_trace(smoke_raw, conds[3]), new)
    tidy.gather(outs + [new], target)
    runs = pq.read_table(target / tidy.RUNS_TABLE).to_pandas()
    assert list(runs["run"]) == [paths.run_dir(c, ".") for c in conds]
    added = pq.read_table(new + "/" + tidy.SAMPLES_FILE).num_rows
    assert pq.read_table(target / tidy.SAMPLES_TABLE).num_rows == n3 + added


def test_flagged_runs_are_excluded_and_counted(smoke_raw, design, tmp_path, capsys):
    assert main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res"),
                 "--campaign", "smoke"]) == 0
    results = tmp_path / "res" / "emulated" / "smoke"
    runs = tidy.read_runs(results)
    n_flagged = int((runs["verdict"] == "flagged").sum())
    assert n_flagged > 0
    ds = tables.load(results, design, "smoke", "emulated")
    assert len(ds.runs) == len(runs) - n_flagged and ds.n_flagged_excluded == n_flagged
    assert f"{n_flagged} run(s) with fidelity verdict" in ds.note()
    assert len(ds.missing) == 0 and len(ds.absent) == n_flagged  # excluded: an empty cell, not missing
    ds_all = tables.load(results, design, "smoke", "emulated", include_flagged=True)
    assert len(ds_all.runs) == len(runs) and ds_all.n_flagged_included == n_flagged
    assert len(ds_all.missing) == 0 and len(ds_all.absent) == 0
    # second build recomputes nothing
    main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res"),
          "--campaign", "smoke"])
    assert "(0 recomputed)" in capsys.readouterr().out
    # a per-run table written before a column was added is recomputed, not read as null
    one = next((tmp_path / "res").rglob(tidy.RUN_FILE))
    pq.write_table(pq.read_table(one).drop(["background_loss"]), one)
    main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res"),
          "--campaign", "smoke"])
    assert "(1 recomputed)" in capsys.readouterr().out and tidy.run_table_current(one)


def test_a_trace_of_another_condition_than_the_designs_is_left_out_and_named(smoke_raw, design, tmp_path, capsys):
    # the design now gives every smoke run at 6.2 ms a background loss its trace ran without
    assert main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res"),
                 "--campaign", "smoke"]) == 0
    results = tmp_path / "res" / "emulated" / "smoke"
    design = copy.deepcopy(design)   # the session's design stays as it is
    design["campaigns"]["smoke"]["background_loss"] = {6.2: 1e-6, 12.2: 0.0}
    ds = tables.load(results, design, "smoke", "emulated", include_flagged=True)
    expected = tables.expected_runs(design, "smoke", "emulated")
    at_6_2 = set(expected["run"][expected["rtt_ms"] == 6.2])
    assert at_6_2 and {r["run"] for r in ds.stale} == at_6_2
    assert {r["reason"] for r in ds.stale} == {"background_loss 0 in its trace, 1e-06 in the design",
                                               "background_loss 2.2e-08 in its trace, 1e-06 in the design"}
    assert not set(ds.runs["run"]) & at_6_2 and set(ds.missing["run"]) == at_6_2   # its cells are empty
    assert f"{len(at_6_2)} trace(s) of another condition than the design's left out" in ds.note()
    # and `tcpeval claims` names each
    design_file = tmp_path / "design.yaml"
    design_file.write_text(yaml.safe_dump(design))
    capsys.readouterr()
    assert main(["claims", "--results", str(results), "--design", str(design_file), "--claims", "paper/claims.yaml",
                 "--out-tex", str(tmp_path / "claims.tex")]) == 0
    err = capsys.readouterr().err
    assert f"{len(at_6_2)} trace(s) left out, run under another condition than the design now gives" in err
    assert all(f"  {run}: background_loss" in err for run in at_6_2)


def test_aggregates(smoke_raw, design, tmp_path):
    main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res")])
    ds = tables.load(tmp_path / "res" / "emulated" / "smoke", design, "smoke", "emulated", include_flagged=True)
    resp = tables.responsiveness(ds)
    one = ds.criterion("responsiveness").iloc[0]
    cell = resp[(resp["variant"] == one["variant"]) & (resp["rtt_ms"] == one["rtt_ms"]) & (resp["drop"] == one["drop"])]
    assert cell["mean"].iloc[0] == pytest.approx(one["mean_bps"]) and cell["n"].iloc[0] == 1
    eff = tables.efficiency(ds)
    assert set(eff.columns) >= {"q25", "q50", "q75"}
    assert (eff["q25"] <= eff["q50"]).all() and (eff["q50"] <= eff["q75"]).all()
    ecell = eff[(eff["variant"] == one["variant"]) & (eff["rtt_ms"] == one["rtt_ms"]) & (eff["drop"] == one["drop"])]
    pooled = tidy.read_samples(ds.results, runs=[one["run"]])["throughput_bps"].to_numpy()
    assert ecell["q50"].iloc[0] == pytest.approx(np.quantile(pooled.astype(float), 0.5))
    assert ecell["n"].iloc[0] == len(pooled)
    conv = tables.convergence(ds)
    assert len(conv) == 4 and (conv["n"] == 1).all()
    assert tables.efficiency_drop(ds, 12.2) == (1e-4, False)   # 1e-6 absent in smoke
    t2 = tables.table2(design, "paper", "emulated")
    assert t2["runs"].sum() == 1280


def _precision_record(cond, metrics_span: str, cut_s: float) -> dict:
    """A single-flow trace at 1 Gbit/s for its first cut_s seconds (a warm-up), 3 Gbit/s
    after, with a precision-driven run's record whose warm-up cut lies at cut_s."""
    from tcpeval.analysis import synthetic
    record = synthetic.make_record(cond)
    dt = cond.interval_s
    t = np.round(np.arange(1, round(cond.duration_s / dt) + 1) * dt, 9)
    rate = np.where(t <= cut_s + 1e-9, 1e9, 3e9) * (1 + 0.1 * np.sin(t * 7))
    samples = record["flows"][0]["samples"]
    samples.update(t_s=t.tolist(), bytes=(rate * dt / 8).tolist(),
                   throughput_bps=rate.tolist(), cwnd_bytes=[None] * t.size,
                   rtt_us=[None] * t.size, retransmits=[0] * t.size)
    record["measured"]["precision"] = {
        "rule": {"half_width": 0.05, "max_s": cond.duration_s, "metrics": metrics_span},
        "precision_reached": True, "stopped_early": True, "stopped_at_s": 19.5, "why": "precision reached",
        "warmup": {"cut_index": round(cut_s / dt), "cut_s": cut_s, "method": "MSER-5"}}
    return record


def test_a_precision_driven_runs_metrics_start_after_its_warmup_cut(design):
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    after, _, _ = extract.summarise(_precision_record(cond, "after_warmup", 8.0))
    whole, _, _ = extract.summarise(_precision_record(cond, "whole_run", 8.0))
    assert after["metrics_from_s"] == 8.0 and whole["metrics_from_s"] == 0.0
    assert after["precision_reached"] and after["stopped_early"]
    assert after["ran_s"] == 19.5                     # where it stopped, not its maximum
    # after the cut: the 3 Gbit/s part alone (the sine averages out to within 1 %)
    assert after["mean_bps"] == pytest.approx(3e9, rel=0.01)
    assert after["q25_bps"] > 2.6e9
    # the whole run: 40 % at 1 Gbit/s pulls the mean to 2.2 and Q25 into the warm-up
    assert whole["mean_bps"] == pytest.approx(0.4 * 1e9 + 0.6 * 3e9, rel=0.01)
    assert whole["q25_bps"] < 1.2e9
    # the run's own intervals of its mean and quartiles, over the part they describe
    for key in ("mean_hw_bps", "q25_hw_bps", "q50_hw_bps", "q75_hw_bps"):
        assert 0 < after[key] < 0.05 * after["mean_bps"], key


def test_a_run_of_fixed_length_takes_every_interval(smoke_raw, smoke_conditions):
    cond = next(c for c in smoke_conditions if c.criterion == "responsiveness")
    row, flows, _ = extract.summarise(extract.load(_trace(smoke_raw, cond)))
    assert row["metrics_from_s"] == 0.0 and row["precision_reached"] is None
    assert row["ran_s"] == cond.duration_s
    assert row["mean_bps"] == pytest.approx(flows[0]["mean_bps"])


def test_a_run_records_its_wall_time_and_the_attempts_it_took(design):
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    record = synthetic.make_record(cond)
    record["started_at"], record["finished_at"] = "2026-11-26T14:37:14.500+00:00", "2026-11-26T14:37:58.250+00:00"
    record["fidelity"]["earlier_attempts"] = [{"reasons": ["cc: ..."]}, {"reasons": ["cc: ..."]}]
    row, _, _ = extract.summarise(record)
    assert row["wall_s"] == pytest.approx(43.75) and row["attempts"] == 3
    del record["finished_at"], record["fidelity"]["earlier_attempts"]
    row, _, _ = extract.summarise(record)
    assert np.isnan(row["wall_s"]) and row["attempts"] == 1


def _end_with_part(record: dict, length_s: float, rate_bps: float) -> None:
    """Appends to the first flow's samples a last interval of length_s at rate_bps (the other
    columns as the interval before it)."""
    s = record["flows"][0]["samples"]
    for key in s:
        s[key] = s[key] + [s[key][-1]]
    s["t_s"][-1] = s["t_s"][-2] + length_s
    s["bytes"][-1] = rate_bps * length_s / 8
    s["throughput_bps"][-1] = rate_bps


def test_a_stopped_runs_last_fragment_of_an_interval_is_no_interval_throughput(design):
    # the run stopped 3 ms into an interval: that fragment's rate (tens of Gbit/s of bytes
    # from the buffers) would swell the run's intervals, and its bytes, most of which
    # arrived after the stop, the mean
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    record = synthetic.make_record(cond)
    plain, _, _ = extract.summarise(record)
    _end_with_part(record, 0.003, 5e7 * 8 / 0.003)    # 5e7 bytes: 133 Gbit/s over 3 ms
    row, _, _ = extract.summarise(record)
    assert row["mean_hw_bps"] == pytest.approx(plain["mean_hw_bps"])
    assert row["q75_bps"] == pytest.approx(plain["q75_bps"])
    assert row["mean_bps"] == pytest.approx(plain["mean_bps"])


def test_a_stopped_runs_last_part_of_an_interval_holds_what_arrived_after_the_stop_and_is_left_out(design):
    # as Scalable at 6.2 ms, drop 0 (x10) ran: stopped 0.686 into an interval, which the
    # receiver's interval matched with it filled with what was in flight at the stop too,
    # 10.9 Gbit/s over the part on a link that carries 9.5; counted, it lifted the mean
    # above the link's payload ceiling
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    record = _precision_record(cond, "after_warmup", 8.0)
    plain, _, _ = extract.summarise(record)
    _end_with_part(record, 0.686 * cond.interval_s, 10.9e9)
    row, _, _ = extract.summarise(record)
    assert row["mean_bps"] == pytest.approx(plain["mean_bps"])
    assert row["q75_bps"] == pytest.approx(plain["q75_bps"])
    assert row["mean_hw_bps"] == pytest.approx(plain["mean_hw_bps"])
    # a run that ran its length keeps its last interval, however long: it ends at the
    # run's end, and what was in flight then arrives in the receiver's next one
    record["measured"]["precision"]["stopped_early"] = False
    whole, _, _ = extract.summarise(record)
    assert whole["mean_bps"] > plain["mean_bps"]


def _watched_record(cond, k: int = 1) -> tuple[dict, object]:
    """A run stopped by its rule, recorded as the emulated backend records one dilated k-fold
    (physical units): the first flow's receiver socket read every interval at a steady 1.2
    Gbit/s with small read jitter (the series the rule decided on), and iperf3's intervals
    of the same flow with the server's late reads (an interval with nothing read, the next
    with two intervals' bytes, every seventh). The decision as the watch made it."""
    from tcpeval import precision
    from tcpeval.analysis import synthetic
    record = synthetic.make_record(cond)
    rng = np.random.default_rng(3)
    dt = cond.interval_s * k
    n = 120
    t = np.cumsum(dt * (1 + 0.002 * rng.standard_normal(n)))          # the reads' own times
    got = np.cumsum(np.round(1.2e9 / 8 * np.diff(t, prepend=0) * (1 + 0.001 * rng.standard_normal(n))))
    rates = 8 * np.diff(got) / np.diff(t)
    rule = precision.StopRule(half_width=0.05, max_s=cond.duration_s * k, mean_half_width=0.0125,
                              check_independence=False)     # white noise: not what is tested
    decision = precision.decide(rule, t[1:], rates, 0, float(t[-1]))
    assert decision.precision_reached
    iperf = np.full(n, 1.2e9)
    iperf[14::7], iperf[15::7] = 0.0, 2.4e9
    tt = np.arange(1, n + 1) * dt
    samples = record["flows"][0]["samples"]
    samples.update(t_s=tt.tolist(), bytes=(iperf * dt / 8).tolist(), throughput_bps=iperf.tolist(),
                   cwnd_bytes=[None] * n, rtt_us=[None] * n, retransmits=[0] * n)
    record["measured"]["precision"] = {
        **decision.record(), "stopped_early": True, "stopped_at_s": float(t[-1]), "sample_s": dt,
        "series": {"t_s": t.tolist(), "bytes": [int(b) for b in got]}}
    if k > 1:
        record["mechanisms"]["dilation"] = {**(record["mechanisms"].get("dilation") or {}), "factor": k}
    return record, decision


def test_a_precision_driven_run_reports_the_interval_its_rule_stopped_on_not_iperf3s(design):
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    record, decision = _watched_record(cond)
    trace.validate(record)
    row, _, _ = extract.summarise(record)
    assert row["steady_from"] == extract.FROM_RULE_SERIES
    assert row["mean_bps"] == pytest.approx(decision.mean.estimate)
    assert row["mean_hw_bps"] == pytest.approx(decision.mean.half_width)
    assert row["mean_hw_bps"] / row["mean_bps"] <= 0.0125
    for q, interval in decision.quantiles.items():
        assert row[f"q{round(100 * q)}_bps"] == pytest.approx(interval.estimate)
        assert row[f"q{round(100 * q)}_hw_bps"] == pytest.approx(interval.half_width)
    # without the series (a trace from before 2026-12-06) the figures are iperf3's, whose
    # late reads make the mean's interval several times as wide
    del record["measured"]["precision"]["series"]
    old, _, _ = extract.summarise(record)
    assert old["steady_from"] == extract.FROM_IPERF3
    assert old["mean_bps"] == pytest.approx(row["mean_bps"], rel=0.01)
    assert old["mean_hw_bps"] > 3 * row["mean_hw_bps"]


def test_a_run_its_cap_stopped_on_a_window_still_growing_has_a_mean_but_no_interval(design):
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    record, _ = _watched_record(cond)
    prec = record["measured"]["precision"]
    # Reno's congestion avoidance after a slow start that left it at half the path (12.2 ms,
    # drop 0): the rate climbs all run long, a little noise on it
    t = np.asarray(prec["series"]["t_s"])
    rng = np.random.default_rng(5)
    rates = np.linspace(0.6e9, 0.7e9, len(t)) * (1 + 0.002 * rng.standard_normal(len(t)))
    got = np.cumsum(rates * np.diff(t, prepend=0) / 8)
    prec["series"]["bytes"] = [int(b) for b in got]
    prec["rule"] = {**prec["rule"], "check_independence": True, "mean_half_width": 0.005}
    prec.update(stopped_early=False, precision_reached=False)
    row, _, _ = extract.summarise(record)
    assert row["steady_from"] == extract.FROM_RULE_SERIES_UNSTEADY
    assert 0.6e9 < row["mean_bps"] < 0.7e9
    assert math.isnan(row["mean_hw_bps"]) and all(math.isnan(row[f"q{q}_hw_bps"]) for q in (25, 50, 75))
    # the same series steady (noise alone) keeps its interval
    prec["series"]["bytes"] = [int(b) for b in np.cumsum(0.65e9 * (1 + 0.002 * rng.standard_normal(len(t)))
                                                        * np.diff(t, prepend=0) / 8)]
    steady, _, _ = extract.summarise(record)
    assert steady["steady_from"] == extract.FROM_RULE_SERIES and steady["mean_hw_bps"] < 0.01 * steady["mean_bps"]


def test_a_dilated_runs_rule_series_is_read_in_the_virtual_paths_units(design):
    from tcpeval.analysis import synthetic
    cond = next(c for c in synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=20.0)
                if c.criterion == "responsiveness")
    plain, _, _ = extract.summarise(_watched_record(cond)[0])
    record, decision = _watched_record(cond, k=8)
    row, _, _ = extract.summarise(record)
    assert row["steady_from"] == extract.FROM_RULE_SERIES
    assert row["mean_bps"] == pytest.approx(8 * decision.mean.estimate) == pytest.approx(9.6e9, rel=0.01)
    assert row["mean_hw_bps"] / row["mean_bps"] == pytest.approx(decision.mean.relative_half_width)
    assert row["metrics_from_s"] == pytest.approx(decision.warmup_cut_s / 8)


def test_a_trace_of_another_length_than_the_designs_is_left_out_and_named(smoke_raw, design, tmp_path):
    # a pair's horizon is not in its path: a cycle rule now sets smoke's fairness and
    # compatibility pairs at 8 s, their traces ran 3 (docs/precision.md, "one cycle at
    # least")
    assert main(["metrics", "build", "--raw-dir", str(smoke_raw), "--results-dir", str(tmp_path / "res"),
                 "--campaign", "smoke"]) == 0
    results = tmp_path / "res" / "emulated" / "smoke"
    design = copy.deepcopy(design)
    before = tables.expected_runs(design, "smoke", "emulated")
    pairs = before[before["criterion"].isin(["fairness", "compatibility"])]
    assert len(pairs)
    min_s = 8.0
    for criterion in set(pairs["criterion"]):
        design["campaigns"]["smoke"]["criteria"][criterion]["duration_for_cycles"] = {
            "cycles": 1, "link_bps": 9.85e9, "min_s": min_s, "max_s": min_s}
    ds = tables.load(results, design, "smoke", "emulated", include_flagged=True)
    stale = {r["run"]: r["reason"] for r in ds.stale}
    assert set(stale) == set(pairs["run"])
    assert set(stale.values()) == {f"a pair's horizon of 3 virtual s in its trace, {min_s:g} s in the design"}
    assert not set(ds.runs["run"]) & set(pairs["run"])

"""A precision-driven run ends by itself once its estimates are precise enough: the
receiver's bytes read during the run, the rule applied, every flow interrupted, and the
trace says when and why (root only)."""
from __future__ import annotations

import json

import pytest

from tcpeval import dilation, trace
from tcpeval.analysis import extract
from tcpeval.precision import LINK_NOT_MET, StopRule
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

MAX_S = 40.0


def _precision_run(variant: str, rtt_ms: float, drop: float, rule: StopRule, rate: float, out) -> dict:
    """One precision-driven run of `variant` at the test rate, undilated; its trace record."""
    from tcpeval.backends import get_backend

    backend = get_backend("emulated", progress=False, lock_timeout_s=900)
    cond = adhoc_condition([variant], rtt_ms, drop, rule.max_s, rate_bps=rate, seed=1, dilation=1, stop=rule)
    return backend.run(cond, out)


def test_a_run_stops_once_its_mean_and_quartiles_are_precise_and_records_why(rate, tmp_path):
    # reno at 2.2 ms, 1e-3: a loss event every few RTTs, so +-10 % in well under MAX_S
    rule = StopRule(half_width=0.1, max_s=MAX_S, min_loss_events=50)
    record = _precision_run("reno", 2.2, 1e-3, rule, rate, tmp_path / "run")
    p = record["measured"]["precision"]
    assert p["stopped_early"] and p["precision_reached"] and p["why"] == "precision reached", p
    assert p["stopped_at_s"] < MAX_S and p["loss_events"] >= 50
    assert p["link_met"] is None and "link_met_samples" not in p   # a lossy path: not asked
    assert p["mean"]["relative_half_width"] <= 0.1
    assert all(q["relative_half_width"] <= 0.1 for q in p["quantiles"])
    # the samples end where the run did, and come from the receiver
    flow = record["flows"][0]
    assert flow["samples"]["t_s"][-1] <= p["stopped_at_s"] + 1.0
    assert flow["summary"]["throughput_side"] == "receiver" and flow["summary"]["mean_throughput_bps"] > 0
    assert "iperf3-flow0.server.json" in flow["raw_files"]
    # the delay line counts the ACKs it could not send at each snapshot; the verdict judges
    # those after its last count before the warm-up cut the metrics make (all without one)
    unsent, cut = record["measured"]["unsent_acks"], p["warmup"]["cut_s"]
    assert unsent["total"] == record["measured"]["delay_line"]["send_errors"]
    assert unsent["metrics_from_s"] == (pytest.approx(cut) if cut else None)
    assert unsent["judged_from_s"] is None or unsent["judged_from_s"] <= cut
    if record["mechanisms"]["rate"] == "tevlink":  # its engine answers the snapshots
        # (every attempt's snapshots, appended: the last attempt's end the file)
        counts = [json.loads(line)["acks_not_sent"]
                  for line in (tmp_path / "run" / "delayline.json.snap").read_text().splitlines()]
        assert counts and all(n >= 0 for n in counts) and counts[-1] <= unsent["total"]
    # the condition keeps its rule; the trace reads back and converts
    assert record["condition"]["stop"]["half_width"] == 0.1
    back = trace.read_trace(tmp_path / "run")
    assert dilation.to_virtual(back)["measured"]["precision"]["stopped_at_s"] == p["stopped_at_s"]
    # the reads the rule decided on are kept, one per sample and one before them, and the
    # analysis reports the interval the rule met, not one of iperf3's intervals
    series = p["series"]
    assert len(series["t_s"]) == len(series["bytes"]) == p["samples"] + 1
    assert series["t_s"] == sorted(series["t_s"]) and series["bytes"] == sorted(series["bytes"])
    row = extract.summarise(back)[0]
    assert row["steady_from"] == extract.FROM_RULE_SERIES
    assert row["mean_bps"] == pytest.approx(p["mean"]["estimate"])
    assert row["mean_hw_bps"] == pytest.approx(p["mean"]["half_width"])


def test_a_run_that_is_precise_within_seconds_still_has_its_second_half(rate, tmp_path):
    # bic at 0.2 ms, 1e-2: hundreds of loss events a second; +-5 % mostly in a few seconds
    # (6 s at 0.5 Gbps: the run then failed, no counter snapshot lying before its middle),
    # later where timeouts left intervals empty (7-23 s in five runs, once 40 s: a cap of
    # MAX_S made that run end at its cap, not early). The mean alone: the quartiles there
    # are slower still (once Q25 was +-7.7 % at 60 s), and the early stop is what is tested.
    # The tail is long: once (2026-12-03, make test) the run reached its 60-s cap with its
    # warm-up not over ("MSER-5 cut at the end of its search"); a second run is allowed
    # then, as a second draw from the same condition
    rule = StopRule(half_width=0.05, max_s=1.5 * MAX_S, min_loss_events=100, quantiles=())
    for attempt in range(2):
        record = _precision_run("bic", 0.2, 1e-2, rule, rate, tmp_path / f"run{attempt}")
        p = record["measured"]["precision"]
        if p["stopped_early"]:
            break
    assert p["stopped_early"] and p["stopped_at_s"] < rule.max_s, p["why"]
    steady = record["measured"]["link_steady"]
    assert steady["from_s"] <= p["stopped_at_s"] / 2 < steady["to_s"]


def _series_shown(record: dict) -> str:
    """The rule's samples as shares of the link, and which met it: what a failure prints."""
    p, rate = record["measured"]["precision"], record["condition"]["rate_bps"]
    t, b = p["series"]["t_s"], p["series"]["bytes"]
    shares = [8 * (b1 - b0) / (t1 - t0) / rate for t0, t1, b0, b1 in zip(t, t[1:], b, b[1:])]
    met = "".join("1" if m else "0" for m in p["series"].get("link_met", []))
    return (f"{p['why']}; warm-up cut {p['warmup']['cut_s']} s; shares of the link "
            f"{' '.join(f'{x:.2f}' for x in shares)}; met {met}; "
            f"link_steady {record['measured'].get('link_steady')}; verdict {record['fidelity']['reasons']}")


def test_a_run_stopped_on_a_long_path_reads_its_servers_report_once_written(rate_on, backend, tmp_path):
    # The interrupted client exits at once; its server writes the receiver's intervals only
    # once the client's end of the test has crossed a full queue on the path. At 24.2 ms x6
    # (145 ms and a 30-MB queue) every precision-stopped run failed reading an empty server
    # JSON; here a 193.6-ms path with its one-BDP queue, filled within seconds at drop 0.
    # The rate is what the link carries faithfully at that RTT: a host that carries less
    # leaves the flow below 95 % of the link, which the rule reads as a window still
    # growing (CI, 2026-12-06: max_s reached, the link never met; the cause was not kept).
    # Reno's slow start here ends in some 16,000 retransmissions (three runs: the link met
    # from 5 s on); should a recovery end below the path's BDP, the window creeps up a
    # packet an RTT, which no 40-s cap waits out: a second draw is allowed then
    rule = StopRule(half_width=0.05, max_s=MAX_S, min_loss_events=0)
    link_rate = rate_on(backend.calibrate(force=False)["link"], 193.6)
    for attempt in range(2):
        record = _precision_run("reno", 193.6, 0.0, rule, link_rate, tmp_path / f"run{attempt}")
        p = record["measured"]["precision"]
        if p["stopped_early"] or p["why"] != f"max_s reached: precision not reached ({LINK_NOT_MET})":
            break
    assert p["stopped_early"] and p["stopped_at_s"] < MAX_S, _series_shown(record)
    # nothing dropped at random: the watch read the bottleneck, and stopped only once the
    # flow had met it after its warm-up
    assert p["link_met"] is True and p["link_met_samples"] >= 1 and "bottleneck" in p["link_met_from"]
    flow = record["flows"][0]
    assert flow["summary"]["throughput_side"] == "receiver" and flow["summary"]["mean_throughput_bps"] > 0
    # the samples run to the stop, less iperf3's set-up: its clock starts once its control
    # and data connections are up, about five RTTs after the run's (0.97-0.98 s here; a
    # slow CI host's 1.000 s failed a bound of 1 s), and one sampling interval
    setup_s = 6 * record["condition"]["rtt_ms"] / 1e3
    assert flow["samples"]["t_s"][-1] >= p["stopped_at_s"] - setup_s - record["condition"]["interval_s"]

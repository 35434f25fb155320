"""One trace -> one run row, its flow rows and its per-interval samples (columnar).

This is the only place that reads trace.json for the analysis. Metrics follow the paper's
Sec. III-B (see `tcpeval.analysis.metrics`); the per-run choices made here:

* Single-flow runs (responsiveness/efficiency): mean throughput over the whole flow and
  the quantiles of its per-interval throughput (all intervals, slow start included: the
  paper does not exclude any). A precision-driven run (measured.precision) whose rule
  says `metrics: after_warmup` takes them over the intervals after the rule's warm-up cut
  instead, the part its intervals describe (`metrics_from_s` says where that begins).
* Runs with two or more flows (fairness, downward compatibility, convergence): each flow's
  mean throughput over the period all flows run (from the latest start to the earliest
  end, in absolute time); Jain's index over those means; link utilisation = their sum.
* Convergence is computed for the flow that starts last (the "new" flow, Sec. III-B),
  only when the start times differ; u_bar is its mean over the period both flows run.
"""
from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from tcpeval import dilation, paths, precision
from tcpeval import trace as trace_mod
from tcpeval.analysis import metrics as M
from tcpeval.condition import Condition, payload_ceiling_bps

try:  # orjson parses the large sample arrays several times faster; json is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None

# Schmeiser (1982): 10-30 batches; the fewest, so a short run still has an interval
WITHIN_RUN_BATCHES = 10
SAMPLE_COLUMNS = ("t_s", "bytes", "throughput_bps", "cwnd_bytes", "rtt_us", "retransmits")
NULLABLE = ("cwnd_bytes", "rtt_us", "retransmits")


class BadTrace(trace_mod.TraceError):
    """A trace that is missing, unreadable or breaks the contract; names the run."""


def run_id_of(condition: dict) -> str:
    """The run's identity: its path below the raw directory (path grammar, tcpeval.paths)."""
    return paths.run_dir(Condition.from_dict(condition), raw_dir=".")


def load(path: str | Path) -> dict:
    """Read a trace in the current format version (tcpeval.trace.upgrade) and validate it;
    BadTrace names the run path on any problem."""
    path = Path(path)
    if path.is_dir():
        path = path / trace_mod.TRACE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadTrace(f"{path}: no trace (the run is missing or has not completed)") from None
    except OSError as err:
        raise BadTrace(f"{path}: unreadable trace: {err}") from None
    try:
        record = _orjson.loads(raw) if _orjson else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise BadTrace(f"{path}: corrupt trace (not valid JSON): {err}") from None
    try:  # an older format version is read in the current one (the file is left as it is)
        record = trace_mod.upgrade(record, str(path))
    except trace_mod.TraceError as err:
        raise BadTrace(str(err)) from None
    validate_fast(record, str(path))
    return record


def validate_fast(record: Any, source: str) -> None:
    """The trace contract (tcpeval.trace.validate), with the long sample arrays checked
    vectorised: jsonschema walks every array item in Python, which dominates at paper
    scale (9,000 samples x 6 columns per flow). The schema check runs on a copy whose
    columns are cut to their first item; lengths, types and time order are checked here."""
    if not isinstance(record, dict) or not isinstance(record.get("flows"), list):
        try:
            trace_mod.validate(record, source)
        except trace_mod.TraceError as err:
            raise BadTrace(str(err)) from None
        raise BadTrace(f"{source} breaks the trace contract")
    head = dict(record)
    head["flows"] = []
    problems = []
    for flow in record["flows"]:
        if isinstance(flow, dict) and isinstance(flow.get("samples"), dict):
            samples = flow["samples"]
            short = {k: (v[:1] if isinstance(v, list) else v) for k, v in samples.items()}
            head["flows"].append(dict(flow, samples=short))
            problems += _column_problems(flow.get("id"), samples)
        else:
            head["flows"].append(flow)
    try:
        trace_mod.validate(head, source)
    except trace_mod.TraceError as err:
        raise BadTrace(str(err)) from None
    if problems:
        raise BadTrace(f"{source} breaks the trace contract:\n  " + "\n  ".join(problems[:20]))


def _column_problems(fid, samples: dict) -> list[str]:
    problems, lengths = [], {}
    for name in SAMPLE_COLUMNS:
        col = samples.get(name)
        if col is None:
            continue
        if not isinstance(col, list):
            continue  # the schema check reports it
        lengths[name] = len(col)
        arr = np.array(col)
        if arr.dtype.kind in "fiu":
            bad = not np.all(np.isfinite(arr)) if arr.dtype.kind == "f" else False
        elif arr.dtype.kind == "O" and name in NULLABLE:
            bad = not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in col)
        elif arr.size == 0:
            bad = False
        else:
            bad = True
        if bad:
            problems.append(f"flows/{fid}/samples/{name}: every item must be a number")
    if len(set(lengths.values())) > 1:
        problems.append(f"flows/{fid}/samples: columns differ in length {lengths}")
    t = samples.get("t_s")
    if isinstance(t, list) and len(t) > 1:
        tt = np.asarray(t, dtype=np.float64) if not problems else None
        if tt is not None and np.any(np.diff(tt) <= 0):
            problems.append(f"flows/{fid}/samples/t_s: times must increase strictly")
    return problems


def _col(samples: dict, name: str, n: int) -> np.ndarray:
    col = samples.get(name)
    if col is None:
        return np.full(n, np.nan)
    return np.array(col, dtype=np.float64)  # None -> NaN


def _link_rate(record: dict) -> float:
    # The bottleneck's nominal rate: the condition's, else the rate the backend configured
    # (emulated, rate_bps null: a share of the calibrated faithful rate -- not the host's
    # capacity, against which the smoke campaign's loss-free 0.6 Gbit/s runs read as 52 %
    # of their link), else what the host carried (older traces, the testbed's path).
    rate = record["condition"].get("rate_bps")
    if rate is None:
        rate = record["measured"].get("configured_rate_bps") or record["measured"].get("host_capacity_bps")
    return float(rate) if rate else math.nan


def link_late_share(record: dict, k: int) -> float:
    """The share of the link engine's data frames that left later than the path's RTT
    tolerance (the verdict's: tolerances.rtt, abs_ms virtual or rel of the RTT), from the
    engine's per-microsecond histogram of departure lateness, which stays physical (so the
    limit is k times the virtual one); NaN without one. A frame that late moves its RTT by
    more than a measured RTT may move. Recorded, not judged: on the 0.2-ms findings slice
    (x3) the runs with 1.3-12 % of their frames that late carried 2-5 % less than the same
    cells' runs under 1 %, every verdict ok (docs/precision.md)."""
    link = ((record["measured"].get("delay_line") or {}).get("link") or {})
    hist, tol = link.get("late_us_histogram"), (record["fidelity"].get("tolerances") or {}).get("rtt")
    if not hist or not tol:
        return math.nan
    rtt_ms = float(record["condition"]["rtt_ms"])     # the setting, virtual
    limit_us = k * 1000 * max(float(tol["abs_ms"]), float(tol["rel"]) * rtt_ms)
    total = sum(hist.values())
    # bin b counts frames late by [b, b + 1) us (tevdelay.c link_stats)
    return sum(n for b, n in hist.items() if int(b) >= limit_us) / total if total else math.nan


def _finite_or_nan(value: float) -> float:
    return float(value) if math.isfinite(value) else math.nan


def _quantile_half_widths(rates: np.ndarray) -> list[float]:
    """The 95 % half-widths of the run's interval-throughput quartiles, from its own
    samples (batched quantiles, WITHIN_RUN_BATCHES batches; NaN with too few)."""
    finite = rates[np.isfinite(rates)]
    if finite.size == 0:
        return [math.nan] * len(M.EFFICIENCY_QUANTILES)
    found = precision.quantile_intervals(finite, M.EFFICIENCY_QUANTILES, batches=WITHIN_RUN_BATCHES)
    return [_finite_or_nan(found[q].half_width) for q in M.EFFICIENCY_QUANTILES]


# where a run's steady-state mean and quartiles come from (runs table `steady_from`)
FROM_RULE_SERIES = "receiver socket (the rule's samples)"
FROM_RULE_SERIES_UNSTEADY = "receiver socket (the rule's samples; not steady at its cap: no interval)"
FROM_IPERF3 = "iperf3 intervals"


def rule_steady_state(prec: dict | None) -> dict | None:
    """A precision-driven run's steady-state mean and quartiles, with their intervals, from
    the samples its rule decided on (measured.precision.series: the first flow's receiver
    socket), computed as the rule computed them (precision.steady_state: its warm-up cut,
    batches and confidence): the interval the run reports is the one it stopped on.

    iperf3's intervals are no substitute: the server reads the socket late at times (a
    0.8-s interval with nothing read, the next with two intervals' bytes, Scalable at 24.2
    ms, drop 0, while the socket's own count ran at the link's rate), and batch means over
    them came out twice as wide as the rule's (+-1.9 % against +-0.98 %). None where the
    run has no such samples (fixed length, or recorded before 2026-12-06) or its rule takes
    its metrics over the whole run; then the figures come from iperf3's intervals."""
    series = (prec or {}).get("series")
    if not series or (prec.get("rule") or {}).get("metrics", "after_warmup") != "after_warmup":
        return None
    t = np.asarray(series["t_s"], dtype=float)
    b = np.asarray(series["bytes"], dtype=float)
    if t.size < 3 or not np.all(np.diff(t) > 0):
        return None
    rates = 8.0 * np.diff(b) / np.diff(t)
    rule = precision.StopRule(**{**prec["rule"], "quantiles": tuple(M.EFFICIENCY_QUANTILES)})
    steady = precision.steady_state(rule, rates)
    if steady.mean.note:
        return None
    quartiles = [steady.quantiles[q] for q in M.EFFICIENCY_QUANTILES]
    # A run its cap stopped while the rule would still have held it back for a series not
    # yet steady (precision.SteadyState.settled) has a mean but no interval: batch means of
    # a moving series understate its error (Reno at 12.2 ms, drop 0, its window still
    # growing at its 30-s cap: +-1.3 % on batch means of von Neumann 0.98, 5.6 Gbit/s where
    # the link's 9.5 was still to come).

    def hw(interval: precision.Interval) -> float:
        return _finite_or_nan(interval.half_width) if steady.settled else math.nan
    return {"mean_bps": steady.mean.estimate, "mean_hw_bps": hw(steady.mean),
            **{f"q{round(100 * q)}_bps": i.estimate for q, i in zip(M.EFFICIENCY_QUANTILES, quartiles)},
            **{f"q{round(100 * q)}_hw_bps": hw(i) for q, i in zip(M.EFFICIENCY_QUANTILES, quartiles)},
            "steady_from": FROM_RULE_SERIES if steady.settled else FROM_RULE_SERIES_UNSTEADY}


def _wall_s(record: dict) -> float:
    """Seconds from the kept attempt's start to its end (NaN where the trace lacks either)."""
    try:
        start = datetime.datetime.fromisoformat(record["started_at"])
        return (datetime.datetime.fromisoformat(record["finished_at"]) - start).total_seconds()
    except (KeyError, TypeError, ValueError):
        return math.nan


def within_run_half_width(rates: np.ndarray) -> float:
    """The 95 % half-width of a run's mean throughput from its own interval throughputs
    (batch means, WITHIN_RUN_BATCHES batches; tcpeval.precision): what the claims use for
    a cell of one run. NaN when the run has too few intervals."""
    hw = precision.batch_means(rates, batches=WITHIN_RUN_BATCHES).half_width if len(rates) else math.inf
    return _finite_or_nan(hw)


def spread_half_width(distances: np.ndarray) -> float:
    """The 95 % half-width of a convergence run's spread (the mean of |u_bar - u(t)| from
    t_c on) from its own samples: batch means of those distances, WITHIN_RUN_BATCHES of them,
    as the mean's. NaN -- no interval of its own, so a cell falls back on its repetitions --
    with fewer than two samples a batch, or where the batch means are correlated (von
    Neumann), as a slow sawtooth (Reno's at long RTTs) makes them."""
    independence = precision.batch_means_independence(distances, WITHIN_RUN_BATCHES)
    if independence is None or not independence.passed:
        return math.nan
    return within_run_half_width(distances)


# a last interval shorter than this share of the sampling interval is a part of one
# (iperf3's own intervals vary by well under 1 %)
WHOLE_INTERVAL_SHARE = 0.98


def _end_partial(t_s: np.ndarray, interval_s: float, stopped_early: bool) -> np.ndarray:
    """The last interval where it is only part of one: shorter than half the sampling
    interval (a fragment, in any run), or, in a run its precision rule stopped, shorter than
    a whole one. The stop ends the sender in mid-interval, and the receiver's interval it is
    matched with holds what was in flight then too (BDP and queue), which arrived after the
    stop: those bytes over the part's time made a stopped run's mean up to 0.5 % higher
    than its link carries (Scalable at 6.2 ms, drop 0: 9.548 Gbit/s of a 9.499 ceiling, its
    last part 0.686 of an interval at 10.9 Gbit/s)."""
    out = np.zeros(t_s.size, dtype=bool)
    if t_s.size >= 2 and interval_s > 0:
        last = t_s[-1] - t_s[-2]
        out[-1] = last < 0.5 * interval_s or (stopped_early and last < WHOLE_INTERVAL_SHARE * interval_s)
    return out


def _two_flow_half_widths(per_flow: list[dict], interval_s: float, means_common: list[float]) -> dict:
    """The 95 % half-widths of a two-flow run's Jain index, utilisation and first flow's
    share from its own samples, for the claims as the mean's are: the cells of the common
    grid where every flow is active, in WITHIN_RUN_BATCHES consecutive batches; each batch's
    flow means give its index, sum and share, and each interval is the sectioning one about
    the run's own figure (precision.sectioning_half_width). NaN -- no interval of its own,
    so a cell falls back on its repetitions -- with too few cells, or for a metric whose
    batches are correlated (von Neumann, each metric's batches on their own), as flows
    that trade shares slowly make all three. Each is tested apart: a pair that splits the
    link evenly while the sum drifts by 0.2 % (H-TCP at 0.2 ms, 9.46 to 9.44 Gbit/s) has
    a Jain index as steady as any, which the sums' test took from it."""
    out = {"jain_hw": math.nan, "utilisation_hw_bps": math.nan, "share_first_hw": math.nan}
    total = float(np.sum(means_common))
    if len(per_flow) < 2 or not interval_s > 0 or not total > 0:
        return out
    _, nb, active = M._grid([(p["start"], p["t"], p["b"]) for p in per_flow], interval_s)
    rates = 8.0 * nb[:, active.all(axis=0)] / interval_s              # flows x common cells
    size = rates.shape[1] // WITHIN_RUN_BATCHES
    if size < 2:
        return out
    kept = rates[:, rates.shape[1] - size * WITHIN_RUN_BATCHES:]    # the earliest remainder left out
    means = kept.reshape(len(per_flow), WITHIN_RUN_BATCHES, size).mean(axis=2)   # flows x batches
    sums = means.sum(axis=0)
    jains = np.array([M.jain_index(batch) for batch in means.T])
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = means[0] / sums
    if not (np.all(np.isfinite(jains)) and np.all(np.isfinite(shares))):
        return out
    for name, figure, batches in (("jain_hw", M.jain_index(means_common), jains),
                                  ("utilisation_hw_bps", total, sums),
                                  ("share_first_hw", means_common[0] / total, shares)):
        if precision.means_independence(batches).passed:
            out[name] = precision.sectioning_half_width(figure, batches)
    return out


def summarise(record: dict, trace_path: str = "", lam: float = M.DEFAULT_LAMBDA,
              eps: float = M.DEFAULT_EPSILON) -> tuple[dict, list[dict], dict]:
    """(run row, flow rows, samples columns) of one validated trace, in the units of the
    condition (a time-dilated run's physical measurements are turned virtual first)."""
    k = dilation.factor(record)
    record = dilation.to_virtual(record)
    cond = record["condition"]
    run_id = run_id_of(cond)
    env, mech, meas = record["environment"], record["mechanisms"], record["measured"]
    flows_in = sorted(record["flows"], key=lambda f: (f["start_s"], f["id"]))
    link = _link_rate(record)

    per_flow = []
    for f in flows_in:
        s = f["samples"]
        t = np.array(s["t_s"], dtype=np.float64)
        n = t.size
        b = np.array(s["bytes"], dtype=np.float64)
        rates = M.interval_rates(t, b)
        per_flow.append(dict(flow=f, t=t, b=b, rates=rates, n=n,
                             start=float(f["start_s"]), end=float(f["start_s"]) + (float(t[-1]) if n else 0.0),
                             u=M.short_term_throughput(rates, lam) if n else rates))

    common_start = max(p["start"] for p in per_flow)
    common_end = min(p["end"] for p in per_flow)

    flow_rows = []
    for rank, p in enumerate(per_flow):
        f = p["flow"]
        abs_end = p["start"] + p["t"]
        in_common = (abs_end > common_start + 1e-9) & (abs_end <= common_end + 1e-9)
        retr = _col(f["samples"], "retransmits", p["n"])
        flow_rows.append({
            "run": run_id, "flow": int(f["id"]), "order": rank, "variant": f["variant"],
            "impl": f["impl"], "start_s": p["start"], "end_s": p["end"],
            "bytes": float(p["b"].sum()),
            "mean_bps": M.mean_throughput(p["t"], p["b"]) if p["n"] else math.nan,
            "mean_common_bps": M.mean_throughput(p["t"], p["b"], in_common) if in_common.any() else math.nan,
            "retransmits": float(np.nansum(retr)) if p["n"] else math.nan,
            "cc_requested": f["cc"].get("requested"), "cc_verified": f["cc"].get("verified"),
            "protocol": f.get("protocol", "tcp"),
            "stop_s": _num(f.get("stop_s")),
            "retrans_rate": (M.retransmission_rate(p["b"], retr) if p["n"] and f.get("protocol", "tcp") != "udp"
                             else math.nan),
            "min_bps": float(p["rates"].min()) if p["n"] else math.nan,
            "max_bps": float(p["rates"].max()) if p["n"] else math.nan,
            **_rpc_columns(f.get("rpc")),
            **{f"ecn_{k}": (f["cc"].get("ecn") or {}).get(k) for k in ("negotiated", "response", "queue")},
        })

    first = per_flow[0]
    prec = meas.get("precision")
    from_s = precision.metrics_from_s(prec)
    steady = first["t"] > from_s + 1e-9          # every interval unless a warm-up is cut
    # a run stopped by its precision rule ends with a part of an interval (3 ms after 18 s:
    # 148 Gbit/s of bytes that left the buffers), whose rate is no interval throughput (it
    # inflated the run's intervals of the mean to +-38 %) and whose bytes arrived partly
    # after the stop: the metrics are of the whole intervals
    partial = _end_partial(first["t"], float(cond["interval_s"]), bool(prec and prec.get("stopped_early")))
    sampled = steady & ~partial
    first_rates = first["rates"][sampled]
    q = M.throughput_quantiles(first_rates)
    q_hw = _quantile_half_widths(first_rates)
    means_common = [r["mean_common_bps"] for r in flow_rows]
    multi = len(per_flow) > 1
    row = {
        "run": run_id, "trace": str(trace_path), "status": "ok", "error": None,
        "backend": cond["backend"], "campaign": cond["campaign"], "criterion": cond["criterion"],
        "variants": "+".join(f["variant"] for f in cond["flows"]),
        "variant": cond["flows"][0]["variant"],
        "second": cond["flows"][1]["variant"] if len(cond["flows"]) > 1 else None,
        "rtt_ms": float(cond["rtt_ms"]), "drop": float(cond["drop"]), "rep": int(cond["rep"]),
        "duration_s": float(cond["duration_s"]), "interval_s": float(cond["interval_s"]),
        "background_loss": float(cond.get("background_loss", 0.0)),
        "n_flows": len(per_flow),
        "verdict": record["fidelity"]["verdict"],
        "flag_reasons": "; ".join(record["fidelity"].get("reasons", [])),
        # the checks that flagged it, each once, in the verdict's order (fidelity.findings)
        "flag_checks": "; ".join(dict.fromkeys(f["check"] for f in record["fidelity"].get("findings", []))),
        "link_rate_bps": link,
        # what the link carries as payload at most: the fractions below are of it, as the
        # original's "of the 9.5 Gbit/s available" were of its NICs' payload ceiling
        "payload_ceiling_bps": payload_ceiling_bps(link),
        "measured_rtt_ms": _num(meas.get("rtt_ms")),
        "measured_drop": _num(meas["drop"].get("rate")),
        "dropped_packets": _count(meas["drop"].get("dropped")),
        # what the background droppers (the ring's losses) drew; None without them
        "background_dropped": _background_dropped(meas.get("background_drop")),
        "hostname": env.get("hostname"), "kernel": env.get("kernel"),
        "git_revision": env.get("git_revision"), "tcpeval_version": env.get("tcpeval_version"),
        "mech_drop": mech.get("drop"), "mech_delay": mech.get("delay"), "mech_rate": mech.get("rate"),
        "dilation": k,
        "started_at": record.get("started_at"),
        # what the run cost the host: the kept attempt's wall time, and how many attempts
        # the runner made (flagged attempts for host trouble are run again)
        "wall_s": _wall_s(record),
        # host lateness the verdict does not judge yet (link_late_share)
        "link_late_share": link_late_share(record, k),
        "attempts": 1 + len(record["fidelity"].get("earlier_attempts") or []),
        # Sec. III-B responsiveness and efficiency (flow that starts first; single-flow runs)
        "mean_bps": (M.mean_throughput(first["t"], first["b"], sampled) if (from_s > 0 or partial.any())
                     and sampled.any() else flow_rows[0]["mean_bps"]),
        # the run's own 95 % intervals: batch means (batched quantiles) of its interval throughputs
        "mean_hw_bps": within_run_half_width(first_rates),
        "q25_bps": float(q[0]), "q50_bps": float(q[1]), "q75_bps": float(q[2]),
        "q25_hw_bps": q_hw[0], "q50_hw_bps": q_hw[1], "q75_hw_bps": q_hw[2],
        # a precision-driven run: where its metrics begin, whether it met its rule
        "metrics_from_s": from_s,
        "precision_reached": bool(prec["precision_reached"]) if prec else None,
        "stopped_early": bool(prec.get("stopped_early")) if prec else None,
        # how long the traffic ran: a precision-driven run's stop, else the condition's length
        "ran_s": (float(prec["stopped_at_s"]) if prec and prec.get("stopped_early") and prec.get("stopped_at_s")
                  else float(cond["duration_s"])),
        # Sec. III-B fairness / downward compatibility
        "flow1_bps": means_common[0] if multi else math.nan,
        "flow2_bps": means_common[1] if multi else math.nan,
        "jain": M.jain_index(means_common) if multi else math.nan,
        "utilisation_bps": float(np.sum(means_common)) if multi else math.nan,
        # and their 95 % intervals from the run's own samples (NaN: none of its own)
        **_two_flow_half_widths(per_flow, float(cond["interval_s"]), means_common if multi else []),
        # Sec. III-B convergence of the new flow
        "conv_applicable": False, "converged": False,
        "conv_time_s": math.nan, "spread_bps": math.nan, "spread_hw_bps": math.nan, "ubar_bps": math.nan,
        "lambda": lam, "epsilon": eps,
    }
    from_rule = rule_steady_state(prec)
    row["steady_from"] = FROM_IPERF3
    if from_rule is not None:
        row.update(from_rule)
    ceiling = row["payload_ceiling_bps"]
    row["utilisation_frac"] = row["utilisation_bps"] / ceiling if multi and ceiling == ceiling else math.nan
    row["mean_frac"] = row["mean_bps"] / ceiling if ceiling == ceiling else math.nan
    if multi and per_flow[-1]["start"] > per_flow[0]["start"]:
        new = per_flow[-1]
        c = M.convergence(new["t"], new["b"], end_s=common_end - new["start"], lam=lam, eps=eps, u=new["u"])
        row.update(conv_applicable=True, converged=c.converged, conv_time_s=c.time_s,
                   spread_bps=c.spread_bps, spread_hw_bps=spread_half_width(c.distances), ubar_bps=c.ubar_bps)

    row.update(_other_studies(per_flow, float(cond["duration_s"]), float(cond["interval_s"])))
    ecn = meas.get("ecn") or {}
    row.update({"ecn_threshold_bytes": _num(ecn.get("threshold_bytes")), "ecn_ce_marked": _num(ecn.get("ce_marked")),
                "ecn_marked_share": ecn["ce_marked"] / ecn["ect_frames"] if ecn.get("ect_frames") else math.nan})
    row.update(design=cond.get("design"), factors=json.dumps(cond.get("factors") or {}, sort_keys=True),
               rate_setting_bps=_num(cond.get("rate_bps")), buffer_setting_bytes=_num(cond.get("buffer_bytes")),
               flows_label=paths.format_flows(Condition.from_dict(cond).flow_labels))
    samples = _samples(run_id, per_flow, flows_in)
    return row, flow_rows, samples


def _rpc_columns(rpc: dict | None) -> dict:
    """An RPC flow's columns of the flows table (virtual units): sizes, RPCs completed and
    their rate, latency percentiles and CDF (metrics.rpc_latency_*); none for other flows."""
    if not rpc:
        return {}
    lat = rpc["latency_us"]
    summary = M.rpc_latency_summary(lat)
    span = (rpc["start_s"][-1] + lat[-1] / 1e6) if lat else 0.0
    return {"rpc_request_bytes": rpc["request_bytes"], "rpc_response_bytes": rpc["response_bytes"],
            "rpc_rate_setting": rpc.get("rpcs_per_s"), "rpc_issued": rpc["issued"], "rpc_completed": rpc["completed"],
            "rpc_per_s": rpc["completed"] / span if span > 0 else math.nan,
            **{f"rpc_lat_{k}_us": summary[k] for k in ("min", "mean", "max", "p50", "p90", "p99", "p999")},
            "rpc_lat_cdf_us": M.rpc_latency_cdf(lat) or None}


def disturbance_window(per_flow: list[dict], duration_s: float) -> tuple[float, float] | None:
    """The window the recovery metric measures around: the lifetime of the first UDP flow,
    else of the first flow that joins late or leaves early (a competitor that comes and
    goes); None if every flow runs the whole run."""
    tol = 1e-6
    partial = [p for p in per_flow if p["start"] > tol or p["end"] < duration_s - max(tol, 2 * _dt(p))]
    udp = [p for p in partial if p["flow"].get("protocol") == "udp"]
    chosen = (udp or partial or [None])[0]
    if chosen is None:
        return None
    stop = chosen["flow"].get("stop_s")
    return chosen["start"], float(stop) if stop is not None else chosen["end"]


def _dt(p: dict) -> float:
    return float(np.median(np.diff(p["t"]))) if p["n"] > 1 else 0.0


def _other_studies(per_flow: list[dict], duration_s: float, interval_s: float) -> dict:
    """Metrics beyond the paper's (issue 12): aggregate throughput, Jain's index over the
    intervals where two or more TCP flows are active, and the recovery of the first TCP
    flow that runs throughout from a disturbance window."""
    tcp = [p for p in per_flow if p["flow"].get("protocol", "tcp") == "tcp"]
    total_bytes = sum(float(p["b"].sum()) for p in tcp)
    out = {"n_tcp": len(tcp), "tcp_total_bps": 8.0 * total_bytes / duration_s if duration_s > 0 else math.nan,
           "jain_overlap": math.nan, "overlap_s": 0.0,
           "disturbance_start_s": math.nan, "disturbance_stop_s": math.nan,
           "pre_bps": math.nan, "during_bps": math.nan, "post_bps": math.nan,
           "recovery_ratio": math.nan, "recovered": False, "recovery_time_s": math.nan}
    if len(tcp) > 1:
        cells = M.jain_per_cell([(p["start"], p["t"], p["b"]) for p in tcp], interval_s)
        out["jain_overlap"] = cells.mean
        out["overlap_s"] = float(len(cells.t_s) * interval_s)
    window = disturbance_window(per_flow, duration_s)
    whole = [p for p in tcp if p["start"] <= 1e-6 and (window is None or p["end"] >= window[1])]
    if window is not None and whole:
        p = whole[0]
        rec = M.throughput_recovery(p["start"] + p["t"], p["b"], window[0], window[1], start_s=p["start"])
        out.update(disturbance_start_s=window[0], disturbance_stop_s=window[1], pre_bps=rec.pre_bps,
                   during_bps=rec.during_bps, post_bps=rec.post_bps, recovery_ratio=rec.ratio,
                   recovered=rec.recovered, recovery_time_s=rec.time_to_recover_s)
    return out


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def _count(v) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _background_dropped(counters) -> int | None:
    """Packets the background droppers dropped, over all of them (measured.background_drop)."""
    counts = [_count(c.get("dropped")) for c in counters or [] if isinstance(c, dict)]
    return sum(counts) if counts and None not in counts else None


def _samples(run_id: str, per_flow: list[dict], flows_in: list[dict]) -> dict:
    cols: dict[str, list[np.ndarray]] = {k: [] for k in
                                         ("flow", "t_s", "abs_t_s", "bytes", "throughput_bps", "u_bps",
                                          "cwnd_bytes", "rtt_us", "retransmits")}
    for p, f in zip(per_flow, flows_in):
        n = p["n"]
        s = f["samples"]
        cols["flow"].append(np.full(n, int(f["id"]), dtype=np.int16))
        cols["t_s"].append(p["t"])
        cols["abs_t_s"].append(p["start"] + p["t"])
        cols["bytes"].append(p["b"])
        cols["throughput_bps"].append(p["rates"])
        cols["u_bps"].append(p["u"])
        for name in ("cwnd_bytes", "rtt_us", "retransmits"):
            cols[name].append(_col(s, name, n))
    out = {k: np.concatenate(v) if v else np.array([]) for k, v in cols.items()}
    out["run"] = run_id
    return out

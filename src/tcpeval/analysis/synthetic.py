"""Synthetic, schema-valid traces for tests, benchmarks and dry runs of the pipeline.

NOT measurements: a crude loss/RTT throughput model (window ~ k / p^e packets per RTT,
capped by the link) with sawtooth and noise, so that figures, tables and claims have
something plausible to chew on. Every record says so: hostname ``synthetic``, mechanisms
``synthetic``, and a note.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Iterable

import numpy as np

from tcpeval import mathis, paths, spec, trace
from tcpeval.condition import Condition, payload_ceiling_bps

# The paper's link (frames: its payload ceiling is its NICs' limit), used when the condition leaves the rate open, and its RTTs.
LINK_BPS = float(spec.load_design()["levels"]["link_bps"])
PAPER_RTTS_MS = spec.load_design()["levels"]["rtt_ms"]
# Link utilisation of two long flows at each of the paper's RTTs, shortest first.
UTILISATION_BY_RTT = (0.985, 0.93, 0.55, 0.42)
MSS_BITS = 1448 * 8
# (k, e): window ~ k / p^e packets per RTT; ordering loosely follows the algorithms' response functions.
RESPONSE = {"reno": (1.22, 0.5), "cubic": (1.4, 0.55), "highspeed": (0.15, 0.82),
            "htcp": (0.3, 0.75), "scalable": (0.08, 0.97), "bic": (0.45, 0.9)}
VALIDATION_CRITERIA = ("mathis", "mathis_native")
# Share a high-speed flow takes from a Reno flow at RTT > 1 ms (downward compatibility).
AGGRESSION = {"reno": 0.0, "cubic": 0.08, "htcp": 0.15, "highspeed": 0.22, "scalable": 0.3, "bic": 0.35}


def _mean_rate(variant: str, rtt_ms: float, drop: float, link: float, k: float | None = None) -> float:
    if drop <= 0:
        return 0.995 * link
    k, e = (k, 0.5) if k is not None else RESPONSE.get(variant, RESPONSE["reno"])
    rtt = max(rtt_ms, 0.05) / 1000.0
    x = k / drop ** e * MSS_BITS / rtt
    return float(link * (1 - np.exp(-x / link)))  # smooth cap at the link rate


def _utilisation(rtt_ms: float) -> float:
    return float(np.interp(rtt_ms, PAPER_RTTS_MS, UTILISATION_BY_RTT))


def _series(rng, mean: float, n: int, dt: float, drop: float, link: float) -> np.ndarray:
    t = np.arange(1, n + 1) * dt
    amp = min(0.45, 0.02 + 40 * drop ** 0.5) if drop > 0 else 0.01
    period = max(5, int(20 + rng.integers(0, 20)))
    saw = (np.arange(n) % period) / period - 0.5
    x = mean * (1 + amp * saw + 0.02 * rng.standard_normal(n))
    ramp = 1 - np.exp(-t / 0.3)            # slow start
    return np.clip(x * ramp, 0, link)


def make_record(cond: Condition, raw_dir: str = paths.DEFAULT_RAW_DIR, *, flagged: bool = False) -> dict:
    rng = np.random.default_rng(cond.seed)
    link = float(cond.rate_bps or LINK_BPS)
    payload = payload_ceiling_bps(link)   # what the flows carry at most (the link counts frames)
    dt = cond.interval_s
    rates: list[np.ndarray] = []
    flows = cond.flows
    if len(flows) == 1:
        n = int(round(cond.duration_s / dt))
        # the validation campaign's Reno: the 3.16 port counts ACKs (Mathis constant with
        # delayed ACKs), the kernel's counts packets (without)
        k = ({"port": mathis.constant(2), "native": mathis.constant(1)}[flows[0].impl]
             if cond.criterion in VALIDATION_CRITERIA else None)
        rates.append(_series(rng, _mean_rate(flows[0].variant, cond.rtt_ms, cond.drop, payload, k), n, dt,
                             cond.drop, payload))
    else:
        util = _utilisation(cond.rtt_ms) * payload
        a, b = flows[0].variant, flows[1].variant
        gap = AGGRESSION[a] - AGGRESSION[b] if cond.rtt_ms > 1 else 0.0
        share = [0.5 + gap, 0.5 - gap]
        start2 = flows[1].start_s
        n1 = int(round(cond.duration_s / dt))
        n2 = int(round((cond.duration_s - start2) / dt))
        t1 = np.arange(1, n1 + 1) * dt
        t2 = np.arange(1, n2 + 1) * dt
        tau = 0.2 + cond.rtt_ms / 10 * (1.5 if b == "reno" else 0.7)
        x2 = share[1] * util * (1 - np.exp(-t2 / tau)) * (1 + 0.03 * rng.standard_normal(n2))
        x1 = np.full(n1, util * (1 if start2 > 0 else share[0]))
        x1 = x1 * (1 - np.exp(-t1 / 0.3)) * (1 + 0.03 * rng.standard_normal(n1))
        if start2 > 0:  # the first flow yields to the newcomer once it arrives
            later = t1 > start2
            x1[later] = np.maximum(util - x2[: later.sum()] * (1 + 0.05 * rng.standard_normal(later.sum())), 0)
        rates += [np.clip(x1, 0, payload), np.clip(x2, 0, payload)]
    flow_records = []
    rtt_us = cond.rtt_ms * 1000 + 30
    for i, (f, x) in enumerate(zip(flows, rates)):
        n = x.size
        t = np.round(np.arange(1, n + 1) * dt, 9)
        nbytes = np.round(x * dt / 8)
        pkts = nbytes / 1448
        retr = rng.poisson(pkts * cond.drop) if cond.drop > 0 else np.zeros(n, dtype=int)
        flow_records.append({
            "id": i, "variant": f.variant, "impl": f.impl, "protocol": "tcp", "start_s": f.start_s,
            "cc": {"requested": f"{f.variant}316", "verified": f"{f.variant}316"},
            "samples": {
                "t_s": t.tolist(), "bytes": nbytes.tolist(),
                "throughput_bps": (nbytes * 8 / dt).tolist(),
                "cwnd_bytes": np.round(x * (rtt_us / 1e6) / 8).tolist(),
                "rtt_us": np.round(rtt_us + 5 * rng.random(n), 1).tolist(),
                "retransmits": retr.astype(float).tolist(),
            },
            "summary": {"bytes": float(nbytes.sum()),
                        "mean_throughput_bps": float(nbytes.sum() * 8 / (n * dt)) if n else 0.0,
                        "retransmits": float(retr.sum())},
            "raw_files": [],
        })
    seen = int(sum(fr["summary"]["bytes"] for fr in flow_records) / 1448)
    dropped = int(round(seen * cond.drop))
    now = _dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc)
    return {
        "schema_version": trace.SCHEMA_VERSION,
        "run": {"path": paths.run_dir(cond, raw_dir), "backend": cond.backend, "campaign": cond.campaign,
                "criterion": cond.criterion, "rep": cond.rep},
        "condition": cond.to_dict(),
        "environment": {"hostname": "synthetic", "kernel": "synthetic", "cpus": 1, "tools": {},
                        "tcpeval_version": "synthetic", "git_revision": None},
        "mechanisms": {"drop": "synthetic", "delay": "synthetic", "rate": "synthetic"},
        "flows": flow_records,
        "measured": {"base_rtt_ms": 0.03, "rtt_ms": cond.rtt_ms + 0.03,
                     "drop": {"seen": seen, "dropped": dropped, "rate": dropped / seen if seen else None,
                              "ci95": [0.0, 0.0]},
                     "bottleneck_rate_bps": float(sum(x.mean() for x in rates)), "host_capacity_bps": link},
        "fidelity": {"verdict": "flagged" if flagged else "ok",
                     "reasons": ["synthetic: a flag for tests"] if flagged else [],
                     "findings": [{"check": "synthetic", "transient": False, "text": "synthetic: a flag for tests",
                                   "measured": None, "limit": None}] if flagged else []},
        "started_at": now.isoformat(), "finished_at": (now + _dt.timedelta(seconds=cond.duration_s)).isoformat(),
        "notes": ["synthetic trace (tcpeval.analysis.synthetic): not a measurement"],
    }


def _dumps(record: dict) -> bytes:
    try:
        import orjson
    except ImportError:  # pragma: no cover
        return json.dumps(record, separators=(",", ":")).encode()
    return orjson.dumps(record)


def write_traces(conditions: Iterable[Condition], raw_dir: str | Path, *, flag_every: int = 0,
                 fast: bool = False) -> list[Path]:
    """Write one synthetic trace per condition under ``raw_dir`` (path grammar).
    ``flag_every=k`` flags every k-th run; ``fast`` skips the full jsonschema pass (bench:
    the first trace is still validated in full) and writes compact JSON."""
    out = []
    for i, cond in enumerate(conditions):
        record = make_record(cond, str(raw_dir), flagged=bool(flag_every) and i % flag_every == flag_every - 1)
        run_dir = Path(paths.run_dir(cond, str(raw_dir)))
        if fast:
            if i == 0:
                trace.validate(record, str(run_dir))
            run_dir.mkdir(parents=True, exist_ok=True)
            target = run_dir / trace.TRACE_FILE
            target.write_bytes(_dumps(record))
        else:
            target = trace.write_trace(run_dir, record, force=True)
        out.append(target)
    return out


def campaign_conditions(design: dict, campaign: str, backend: str = "emulated", *,
                        duration_s: float | None = None) -> list[Condition]:
    """A campaign's conditions, optionally shortened (keeps the relative start and stop offsets)."""
    runs = spec.expand(design, campaign, backend)
    if duration_s is None:
        return runs
    out = []
    for c in runs:
        scale = duration_s / c.duration_s
        flows = tuple(replace(f, start_s=f.start_s * scale,
                              stop_s=f.stop_s * scale if f.stop_s is not None else None) for f in c.flows)
        out.append(replace(c, duration_s=duration_s, flows=flows))
    return out

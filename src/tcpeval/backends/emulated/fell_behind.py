"""Where this host fell behind a run's frame rate: the physical paths (flow count, RTT,
rate) at which an attempt with an `auto` time-dilation factor was spoiled by the host
alone with frames released late (fidelity.fell_behind_in_time), under the calibration in
force. A later run whose factor would put it on such a path again -- as many flows, the
same physical RTT, as fast or faster -- starts one factor slower instead of spending an
attempt to learn it again (plan.for_condition). Kept beside the calibration; a new
calibration starts it afresh.

Why: the envelope is measured on 4-s runs of native CUBIC in steady state, and a slow
start's overshoot with the 3.16 ports asks more of the host. On the AMD EPYC VM of
2026-12-03 the first attempt fell behind at half the 0.2-ms pairs (x6 -> x7) and at every
Scalable/Reno pair at 6.2 and 12.2 ms; each such attempt costs a whole run, where one
factor more costs 1/k of one (docs/fidelity.md, "A host that fell behind once").
Frames a CPU's full input backlog refused are left out: they come in a burst a higher
factor need not shrink (a Scalable pair at 12.2 ms lost some entering the switch at each of
x8-x12), and an entry for them would slow every later run on the path for nothing; the
finding names net.core.netdev_max_backlog, the host's cure.
Nor does an attempt ended early as doomed (measured.ended_doomed): its stump is judged over
seconds, often two slow starts at once, where an entry speaks for whole runs (Reno/Reno at
24.2 ms, 2026-12-05: a 10-s stump with 6.7 % of its frames late was noted at x6).

$TCPEVAL_FELL_BEHIND: the record's path, or `off` (runs neither read nor write one; the
test suite's runs, whose conditions would teach the host's record nothing)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tcpeval import dilation
from tcpeval.backends import common, fidelity
from tcpeval.backends.emulated import calibrate

OFF = "off"
# the same physical RTT: the delay line's own steps are far finer; factors of one virtual
# RTT differ by a whole virtual RTT
RTT_MATCH = 0.01


def path() -> Path | None:
    """The record's file, or None where $TCPEVAL_FELL_BEHIND is `off`."""
    given = os.environ.get("TCPEVAL_FELL_BEHIND")
    if given == OFF:
        return None
    if given:
        return Path(given)
    return calibrate.cache_dir() / "emulated-fell-behind.json"  # beside the calibration


def _calibration_id(cal: dict) -> dict:
    return {"key": cal.get("key"), "measured_at": cal.get("measured_at")}


def entries(cal: dict | None) -> list[dict]:
    """What the host fell behind under this calibration (none without one, or a record)."""
    where = path()
    if cal is None or where is None:
        return []
    try:
        data = json.loads(where.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    if data.get("calibration") != _calibration_id(cal):
        return []
    return list(data.get("entries") or [])


def known(behind: list[dict], flows: int, rtt_ms: float, rate_bps: float) -> dict | None:
    """The entry of ``behind`` (entries(cal), read once by the caller) that says a
    physical path of ``flows`` flows at ``rtt_ms`` and ``rate_bps`` (or slower) fell
    behind, or None."""
    for e in behind:
        if (e["flows"] == flows and abs(e["rtt_ms"] - rtt_ms) <= RTT_MATCH * e["rtt_ms"]
                and rate_bps >= e["rate_bps"] * (1 - 1e-9)):
            return e
    return None


def note(plan, condition, record: dict, run_path: str) -> dict | None:
    """Remember the attempt `record` of ``plan`` if the host fell behind it on its own, with
    frames released late (fidelity.fell_behind_in_time: not only frames a full input backlog
    refused, which a higher factor need not cure), at a factor the condition left to the
    host, over the attempt's whole length (not ended early as doomed); returns the entry
    (None: nothing to remember).
    Written whole and atomically: a run holds the host's lock, and a reader (`tcpeval
    plan`) sees the record before or after, never half of it."""
    where = path()
    cal = plan.calibration
    if (where is None or cal is None or dilation.parse(condition.dilation) != dilation.AUTO
            or record.get("measured", {}).get("ended_doomed")
            or not fidelity.fell_behind_in_time(record["fidelity"]["findings"])):
        return None
    entry = {"flows": len(plan.flows), "rtt_ms": plan.rtt_ms,
             "rate_bps": plan.carried_bound_bps or plan.rate_bps, "factor": plan.dilation,
             "variants": [f.variant for f in condition.flows], "virtual_rtt_ms": condition.rtt_ms,
             "drop": condition.drop, "run": run_path, "at": common.now_iso(),
             "reasons": record["fidelity"].get("reasons", [])[:3]}
    kept = entries(cal)
    data = {"calibration": _calibration_id(cal), "entries": [*kept, entry]}
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = where.with_name(where.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, where)
    return entry

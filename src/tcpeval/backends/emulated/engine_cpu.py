"""The link engine's CPU for the engine alone: for the span of a run every other task that
may run there (and elsewhere) is moved off it, and put back afterwards.

Why: the engine spins at nice -20 (tevdelay.c), yet the fair scheduler still lets a task
that wakes on its CPU run first, and on a kernel without preemption (PREEMPT_NONE, this
VM's) a kernel thread then keeps that CPU until it yields or the next tick: 4 ms at HZ =
250. Traced with a BPF program on sched_switch (docs/fidelity.md, "What the engine waited
for"), every wait of 2 ms or more on the engine's run queue was ksoftirqd followed by
DAMON's kdamond, and with kdamond moved off the CPU four runs had none. Per-CPU kernel
threads (ksoftirqd/N, kworker/N:M) cannot move and stay; unbound workqueue workers follow
the workqueue cpumask, which is set too. A task that started during the run from a moved
one inherited its mask and is given the CPU back with the others.

What was moved is written to a state file first (host.STATE_DIR), so that a run killed
midway is put back by `tcpeval cleanup` (host.remove_run). TCPEVAL_ENGINE_CPU_ALONE=0
leaves the host's tasks where they are (a shared host); the trace says which.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from tcpeval.backends.emulated.host import pid_start

WORKQUEUE_MASK = Path("/sys/devices/virtual/workqueue/cpumask")
OPT_OUT = "TCPEVAL_ENGINE_CPU_ALONE"
STATE_SUFFIX = ".cpus"  # beside host.STATE_DIR's <run_id>.json, not read as a run's state
NAMES_RECORDED = 12  # the most frequent names of moved tasks a trace keeps


def _name(tid: int) -> str:
    try:
        return Path(f"/proc/{tid}/comm").read_text().strip()
    except OSError:
        return "?"


def _tids() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
    return out


def _mask_hex(cpus) -> str:
    return format(sum(1 << c for c in cpus), "x")


def _uptime_ticks() -> int:
    """Now, in the unit of a task's start time (clock ticks since boot)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _set_workqueue_mask(cpus) -> str | None:
    """The unbound workqueues' CPUs set to ``cpus``; returns the mask before (None: not
    settable here, e.g. a container without the host's /sys)."""
    try:
        before = WORKQUEUE_MASK.read_text().strip()
        WORKQUEUE_MASK.write_text(_mask_hex(cpus) + "\n")
        return before
    except OSError:
        return None


def clear(cpu: int, others: list[int], state_file: Path) -> dict:
    """Move every task allowed on ``cpu`` and on some other CPU off ``cpu``; a task pinned
    to ``cpu`` alone stays (a per-CPU kernel thread), and the unbound workqueues get
    ``others``. Returns the record of what happened (completed by restore())."""
    if os.environ.get(OPT_OUT, "1") == "0":
        return {"cpu": cpu, "cleared": False, "why": f"{OPT_OUT}=0"}
    moved, names, not_movable, pinned = [], Counter(), set(), set()
    plan = []
    for tid in _tids():
        try:
            mask = os.sched_getaffinity(tid)
        except OSError:
            continue
        if cpu not in mask:
            continue
        if mask == {cpu}:
            pinned.add(_name(tid))
            continue
        plan.append((tid, pid_start(tid), sorted(mask)))
    wq_before = _set_workqueue_mask(others)
    # written before anything moves: a run killed midway is put back from it
    state_file.write_text(json.dumps({"cpu": cpu, "moved": plan, "workqueue_cpumask": wq_before,
                                      "since": _uptime_ticks()}))
    for tid, start, mask in plan:
        try:
            os.sched_setaffinity(tid, set(mask) - {cpu})
        except OSError:  # gone, or a kernel thread that may not move (PF_NO_SETAFFINITY)
            if pid_start(tid) == start:
                not_movable.add(_name(tid))
            continue
        moved.append(tid)
        names[_name(tid)] += 1
    return {"cpu": cpu, "cleared": True, "moved": len(moved),
            "moved_names": dict(names.most_common(NAMES_RECORDED)),
            "not_movable": sorted(not_movable), "left_pinned": sorted(pinned),
            "workqueue_cpumask": None if wq_before is None
            else {"before": wq_before, "during": _mask_hex(others)}}


def restore(state_file: Path, record: dict | None = None) -> dict:
    """Every task clear() moved gets its CPUs back, and so does every task that started
    since with a moved task's mask (it inherited it); the workqueue mask too. The state
    file goes. Returns (and adds to ``record``) the counts."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, json.JSONDecodeError):
        return record or {}
    cpu, restored, given_back = state["cpu"], 0, 0
    moved_masks = {tuple(sorted(set(m) - {cpu})) for _, _, m in state["moved"]}
    for tid, start, mask in state["moved"]:
        if pid_start(tid) != start:
            continue
        try:
            os.sched_setaffinity(tid, mask)
            restored += 1
        except OSError:
            pass
    since = state.get("since") or 0
    for tid in _tids():
        start = pid_start(tid)
        try:
            if start is None or int(start) < since:
                continue
            mask = os.sched_getaffinity(tid)
            if cpu not in mask and tuple(sorted(mask)) in moved_masks:
                os.sched_setaffinity(tid, mask | {cpu})
                given_back += 1
        except OSError:
            continue
    if state.get("workqueue_cpumask"):
        try:
            WORKQUEUE_MASK.write_text(state["workqueue_cpumask"] + "\n")
        except OSError:
            pass
    state_file.unlink(missing_ok=True)
    out = record if record is not None else {}
    out.update({"restored": restored, "given_back": given_back})
    return out

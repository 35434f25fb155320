"""The host-fault guard's counters of a registered port (cc/include/cc316.h, "host-fault
guard"): how many window reductions the port made, and how many the stack made or
changed behind its back, which the port then repaired.

They live in the BPF object's .bss (cc316_guard_stats), one set per registration; a run
reads them before and after its traffic and keeps the difference (runs are serialised
by the host lock, so the difference is the run's own).
"""
from __future__ import annotations

import json
import shutil
import subprocess

from ._common import CCError

FIELDS = ("reductions", "missed_reductions", "missed_states", "foreign_ssthresh",
          "foreign_cwnd", "acked_seen", "acked_delivered", "sent_over", "max_allowed_cwnd",
          "drained", "drained_ms")
# fields that hold a maximum over the registration, not a count: a run keeps their value
# after its traffic (a port is registered for one run), not a difference
GUARD_MAXIMA = frozenset({"max_allowed_cwnd"})


def guard_stats(handle) -> dict | None:
    """The counters of `handle`'s registration, or None for a native algorithm (it has
    none) or a loader that did not report its .bss map."""
    if handle.impl != "port" or not handle.guard_map_id:
        return None
    if shutil.which("bpftool") is None:
        raise CCError("reading the guard counters needs bpftool")
    proc = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(handle.guard_map_id)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise CCError(f"bpftool map dump id {handle.guard_map_id} failed: "
                      f"{proc.stderr.strip()}")
    return parse_bss_dump(proc.stdout)


def parse_bss_dump(text: str) -> dict:
    """cc316_guard_stats out of `bpftool -j map dump` of a port's .bss."""
    for entry in json.loads(text):
        for section in entry.get("formatted", entry).get("value", {}).values():
            for var in section:
                if "cc316_guard_stats" in var:
                    stats = var["cc316_guard_stats"]
                    return {k: int(stats[k]) for k in FIELDS if k in stats}
    raise CCError("the .bss map holds no cc316_guard_stats (an object built before the guard?)")


"""Time-dilated emulation: the factor of a run, and its trace in virtual units.

A virtual path of rate R, RTT T, duration D and start offsets s runs as a physical path
of rate R/k, RTT k*T, duration k*D and offsets k*s, with the same buffer in bytes and the
same drop probability, while every clock the congestion control reads runs k times
slower (cc/include/cc316.h, cc_dilation). Packets, windows in segments, the queue in
packets and the loss sequence are then those of the virtual path; only the wall clock
runs k times slower (after Gupta et al., "To Infinity and Beyond: Time-Warped Network
Emulation", NSDI 2006).

The trace stores what was measured, in physical units, with the factor under
``mechanisms.dilation``; ``to_virtual`` turns a record into the virtual path's units,
and the analysis reads nothing else.
"""
from __future__ import annotations

import copy
import math
from functools import lru_cache

from tcpeval import trace

MAX_FACTOR = 64
AUTO = "auto"


class DilationError(ValueError):
    """A dilation setting or a run that cannot be dilated, named in the message."""


def parse(value) -> str | int:
    """'auto' or an integer factor in [1, MAX_FACTOR] (from a design, a condition or the CLI)."""
    if value is None or value == AUTO:
        return AUTO
    if isinstance(value, bool):
        raise DilationError(f"dilation: {value!r} is neither 'auto' nor an integer factor")
    try:
        k = int(value)
    except (TypeError, ValueError):
        raise DilationError(f"dilation: {value!r} is neither 'auto' nor an integer factor") from None
    if k != value and str(k) != str(value).strip():
        raise DilationError(f"dilation: {value!r} is not an integer factor")
    if not 1 <= k <= MAX_FACTOR:
        raise DilationError(f"dilation: {k} is out of range; must be in [1, {MAX_FACTOR}]")
    return k


# A loss-based TCP flow under random loss at rate p never holds a window of
# WINDOW_BOUND_LOSSES / p segments: to get there it must send such a window's worth (twice
# that in slow start) without a drop, which happens with probability e^-10 or less, and
# any drop cuts the window. So the most its flows can carry at once is that window per
# round trip, per flow: for p = 1e-2 at 6.2 ms 1.95 Gbit/s of frames (Reno carried 14
# Mbit/s there, Scalable, the fastest of the six, 43), where the paper's link is 9.85.
# The verdict checks what the flows carried against it (tcpeval.backends.fidelity).
WINDOW_BOUND_LOSSES = 10


def carried_bound_bps(condition) -> float | None:
    """The most the condition's flows can carry at once, in frames per second of the
    virtual path, where loss bounds their windows (every flow TCP, p > 0); None where it
    does not (p = 0, a UDP flow): then only the link bounds them."""
    from tcpeval.condition import HEADER_BYTES, MSS_BYTES, UDP
    if condition.drop <= 0 or condition.rtt_ms <= 0 or any(f.protocol == UDP for f in condition.flows):
        return None
    window_bits = WINDOW_BOUND_LOSSES / condition.drop * (MSS_BYTES + HEADER_BYTES) * 8
    return len(condition.flows) * window_bits / (condition.rtt_ms / 1e3)


def rate_for_factor(condition, rate_bps: float | None) -> float | None:
    """The rate a run's factor is chosen for: the link's, or less where loss bounds what
    the flows can carry below it (carried_bound_bps): a 9.85 Gbit/s link that carries at
    most 0.5 Gbit/s (24.2 ms, p = 1e-2) needs no slowing down on a host that carries 2."""
    bound = carried_bound_bps(condition)
    if not rate_bps or bound is None:
        return rate_bps
    return min(rate_bps, bound)


def choose(setting, rate_bps: float | None, faithful_bps) -> int:
    """The factor of a run: a forced one as given; 'auto' the smallest integer k with
    rate / k within what the host carries faithfully (1 without a rate or a ceiling).
    ``faithful_bps`` is one rate, or a function of k: what the host carries at the
    physical path of factor k (its RTT is k times longer; an envelope, calibrate.py)."""
    setting = parse(setting)
    if setting != AUTO:
        return setting
    if not rate_bps or not faithful_bps:
        return 1
    at = faithful_bps if callable(faithful_bps) else (lambda k: faithful_bps)
    for k in range(1, MAX_FACTOR + 1):
        if rate_bps / k <= at(k) * (1 + 1e-9):
            return k
    if not callable(faithful_bps):
        raise DilationError(
            f"dilation: {rate_bps / 1e9:.3g} Gbps needs a factor of {math.ceil(rate_bps / faithful_bps - 1e-9)} "
            f"on this host (it carries {faithful_bps / 1e9:.3g} Gbps faithfully), above the maximum {MAX_FACTOR}")
    raise DilationError(
        f"dilation: {rate_bps / 1e9:.3g} Gbps needs a factor above the maximum {MAX_FACTOR} on this "
        f"host (it carries {at(MAX_FACTOR) / 1e9:.3g} Gbps faithfully at that factor's path)")


# The stall floor (stall_floor): a factor is taken where the host's stalls of that many
# physical round trips come at most STALL_FLOOR_SHARE of the verdict's limit a virtual
# second -- headroom -- in the host's usual state: the calibration's runs, less the worst
# of them up to SPELL_SHARE of its time. A VM's long stalls come in spells (the calibration
# of 2026-12-06: 16 of 221 stalls were 16.5-100 ms, in a few runs; the rest ~3.3 and
# ~6.55 ms), and a floor set by a spell would put every 0.2-ms run at x46; a run that meets
# one is the verdict's to flag, and is run again.
STALL_FLOOR_SHARE = 0.5
SPELL_SHARE = 0.1


def stall_floor(host_stalls: dict | None, rtt_ms: float, *, round_trips: float,
                verdict_per_virtual_s: float) -> dict | None:
    """The least factor k at which the host's stalls, as its calibration met them
    (``host_stalls``: by_run, each run's [watched s, [stall lengths ms]]), keep a run at
    ``rtt_ms`` (virtual) clear of the verdict's stall check: stalls of ``round_trips``
    physical round trips (k x rtt_ms) or more at most STALL_FLOOR_SHARE x
    ``verdict_per_virtual_s`` a virtual second (k times as many as a wall second), counted
    over the runs left when those with the most such stalls, up to SPELL_SHARE of the
    watched time, are set aside. None without such a record, or where no factor up to
    MAX_FACTOR meets the limit (a path so short that the host's stalls are many of its round
    trips at any factor): no floor, since a higher factor would only cost time there, and
    the verdict judges the run as it is."""
    runs = (host_stalls or {}).get("by_run") or []
    total_s = sum(s for s, _ in runs)
    if not total_s or rtt_ms <= 0:
        return None
    limit = STALL_FLOOR_SHARE * verdict_per_virtual_s
    for k in range(1, MAX_FACTOR + 1):
        longer_ms = round_trips * k * rtt_ms
        counts = sorted(((sum(ms >= longer_ms for ms in lengths), s) for s, lengths in runs),
                        key=lambda c: c[0] / c[1] if c[1] else 0.0, reverse=True)
        set_aside_s, kept_n, kept_s = 0.0, 0, 0.0
        for n, s in counts:
            if n and set_aside_s + s <= SPELL_SHARE * total_s:
                set_aside_s += s
                continue
            kept_n, kept_s = kept_n + n, kept_s + s
        per_s = k * kept_n / kept_s if kept_s else 0.0
        if per_s <= limit:
            return {"factor": k, "stalls_from_ms": round(longer_ms, 3), "per_virtual_s": per_s,
                    "limit_per_virtual_s": limit, "calibrated_over_s": total_s,
                    "set_aside_s": set_aside_s, "runs": len(runs)}
    return None


def native_flow(condition):
    """(index, flow) of the condition's first TCP flow of the host kernel's own algorithm,
    which reads the kernel's clock and so cannot be slowed by time dilation; None where
    every flow can be."""
    for i, flow in enumerate(condition.flows):
        if flow.protocol != "udp" and flow.impl == "native":
            return i, flow
    return None


def factor_for(condition, rate_bps: float | None, faithful_bps) -> int:
    """The factor a condition runs with (``choose``); a flow of the host kernel's own
    algorithm cannot be slowed, so a condition that needs k > 1 with one is refused."""
    k = choose(condition.dilation, rate_bps, faithful_bps)
    if k > 1:
        native = native_flow(condition)
        if native:
            i, flow = native
            raise DilationError(
                f"flows[{i}] ({flow.variant}, impl native): the run needs time dilation x{k} "
                f"({rate_bps / 1e9:.3g} Gbps on a host that carries "
                f"{(faithful_bps(k) if callable(faithful_bps) else faithful_bps or 0) / 1e9:.3g} "
                f"Gbps faithfully), and the host kernel's own "
                f"algorithm cannot be slowed: it reads the kernel's clock. Use impl 'port' "
                f"(the 3.16 port, whose clocks are dilated) or a rate the host carries")
    return k


def factor(record: dict) -> int:
    """The factor a trace was run with (1 for traces without dilation)."""
    d = (record.get("mechanisms") or {}).get("dilation") or {}
    return int(d.get("factor") or 1)


# How a field of a dilated run reads in virtual units: declared once, beside each field, in
# the trace schema ("x-dilation"); these are the kinds that change.
SCALES = {"time": lambda v, k: v / k, "rate": lambda v, k: v * k}
UNIT_KINDS = (*SCALES, "physical")


@lru_cache(maxsize=1)
def unit_table() -> dict[tuple, str]:
    """{path: kind} for every field the trace schema declares an x-dilation for. A path
    is a tuple of keys, "[]" standing for every item of an array: ("flows", "[]",
    "actual", "stop_s") -> "time"."""
    root = trace.schema()
    table = {}

    def walk(node: dict, path: tuple) -> None:
        if "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        if "x-dilation" in node:
            if node["x-dilation"] not in UNIT_KINDS:
                raise ValueError(f"trace schema: x-dilation {node['x-dilation']!r} at "
                                 f"{'.'.join(path)} is not one of {', '.join(UNIT_KINDS)}")
            table[path] = node["x-dilation"]
            return
        for key, child in (node.get("properties") or {}).items():
            walk(child, (*path, key))
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*path, "[]"))

    walk(root, ())
    return table


def _scale_at(node, path: tuple, scale, k: int):
    """``node`` with the value at ``path`` scaled (numbers, or each number of a list;
    None and absent fields stay as they are)."""
    if not path:
        if isinstance(node, list):
            return [_scale_at(v, (), scale, k) for v in node]
        if isinstance(node, (int, float)) and not isinstance(node, bool):
            return scale(node, k)
        return node
    head, rest = path[0], path[1:]
    if head == "[]":
        if isinstance(node, list):
            return [_scale_at(v, rest, scale, k) for v in node]
        return node
    if isinstance(node, dict) and head in node:
        node[head] = _scale_at(node[head], rest, scale, k)
    return node


def to_virtual(record: dict) -> dict:
    """A copy of the record in the virtual path's units (itself when k = 1): every field
    the trace schema declares a time of the path divided by k, every rate multiplied by
    k (``unit_table``); bytes, windows, packets, counts and the host's own figures
    unchanged. The condition is already virtual; ``mechanisms.dilation.units`` says
    'virtual' after."""
    k = factor(record)
    if k == 1:
        return record
    out = copy.deepcopy(record)
    for path, kind in unit_table().items():
        if kind in SCALES:
            _scale_at(out, path, SCALES[kind], k)
    out["mechanisms"]["dilation"]["units"] = "virtual"
    return out

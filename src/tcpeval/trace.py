"""The trace contract: the per-run record every backend writes and the analysis reads.

The format is documented field by field in ``docs/trace-format.md``; the schema is
``tcpeval/schemas/trace.schema.json``. Writes are atomic (temporary file in the same
directory, fsync, rename) and never replace an existing trace unless forced, so a crash
leaves either the old trace, the new one, or none, but never a partial file.

Format versions: every trace carries ``schema_version``. The schema describes the current
version (``SCHEMA_VERSION``) only; ``upgrade`` brings an older record up to it, one
registered step per version (``_UPGRADES``), and ``read_trace`` applies it in memory, so an
old trace on disk is read as it is and never rewritten (``tcpeval trace upgrade --in-place``
does that, when asked). A new version is one function: bump ``SCHEMA_VERSION`` (and the
schema's ``const``) and register ``@_step(n)`` turning a version-n record into n + 1.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

TRACE_FILE = "trace.json"
SCHEMA_VERSION = 4


class TraceError(ValueError):
    """A trace is missing, unreadable or breaks the contract; the message names where."""


# --- format versions -------------------------------------------------------------------

# Version 1 -> 2: traces stop explaining themselves in English. The keys below held prose,
# the same sentences in every run (what a mechanism does, why, how); docs/trace-format.md
# holds them now. Paths are keys from the record's top level (all inside objects).
V1_PROSE = (
    ("mechanisms", "drop_detail", "hook"),
    ("mechanisms", "drop_detail", "concurrency"),
    ("mechanisms", "drop_detail", "wire_sized_packets", "offloads"),
    ("mechanisms", "delay_detail", "placement"),
    ("mechanisms", "switch", "fallback"),
    ("mechanisms", "segment_mark", "what"),
    ("mechanisms", "segment_mark", "why"),
    ("mechanisms", "push_flag", "what"),
    ("mechanisms", "push_flag", "why"),
    ("mechanisms", "dilation", "units"),
    ("mechanisms", "dilation", "scaled", "port_clocks"),
    ("mechanisms", "dilation", "not_scaled", "buffer_bytes"),
    ("mechanisms", "dilation", "not_scaled", "drop_probability"),
    ("mechanisms", "dilation", "not_scaled", "delayed_ack_timer"),
    ("mechanisms", "dilation", "not_scaled", "initial_rto"),
    ("mechanisms", "dilation", "not_scaled", "tso_autosizing"),
    ("mechanisms", "dilation", "not_scaled", "rtt_based_timers"),
    ("mechanisms", "keep_awake", "why"),
    ("mechanisms", "keep_awake", "cpu_busy"),
    ("mechanisms", "receive_window", "how"),
    ("mechanisms", "receive_window", "why"),
    ("mechanisms", "traffic", "affinity"),
    ("measured", "rtt_probe_method"),
    ("fidelity", "tolerances", "dilation", "physical_time_tolerances"),
    ("fidelity", "tolerances", "ack_clock", "over"),
    ("fidelity", "tolerances", "ack_clock", "excludes"),
)

# Version 1 -> 2: values that named a mechanism inside a sentence become the name alone
# (path -> {version-1 value: version-2 value}); other values are kept as they are.
V1_NAMES = {
    ("mechanisms", "switch", "mechanism"): {
        "bpf-tc clone redirect (tev_l2fwd), L2 forwarding at the ports' tc ingress; the "
        "forwarded clone belongs to no socket (TCP small queues end at the switch, as at a "
        "sender's NIC)": "bpf-tc-clone-redirect"},
    ("mechanisms", "keep_awake", "mechanism"): {
        "tevdelay awake (SCHED_IDLE loop per CPU)": "tevdelay-awake"},
    ("mechanisms", "traffic", "pacing"): {
        "none: connections start under a default that does not pace (common.STACK_316), as "
        "3.16 without fq": "none",
        "tcp-internal (see fidelity)": "tcp-internal"},
}

# Version 1 -> 2: facts a V1_NAMES sentence held besides the name, added beside it where
# the sentence was found (path of the name -> {key: value}).
V1_ADDED = {("mechanisms", "switch", "mechanism"): {"program": "tev_l2fwd"}}

_UPGRADES: dict[int, Callable[[dict], dict]] = {}


def _step(from_version: int):
    """Register the function that turns a version-``from_version`` record into the next."""
    def register(func: Callable[[dict], dict]) -> Callable[[dict], dict]:
        _UPGRADES[from_version] = func
        return func
    return register


_MISSING = object()


def _get(record: dict, path: tuple) -> Any:
    node = record
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _set(record: dict, path: tuple, value: Any = _MISSING) -> dict:
    """A copy of ``record`` with ``path`` set to ``value`` (or removed when _MISSING). Only
    the objects along the path are copied: the argument is never modified, and the large
    sample arrays are shared, not copied."""
    head, rest = path[0], path[1:]
    out = dict(record)
    if not rest:
        if value is _MISSING:
            out.pop(head, None)
        else:
            out[head] = value
    elif isinstance(out.get(head), dict):
        out[head] = _set(out[head], rest, value)
    return out


@_step(1)
def _v1_to_v2(record: dict) -> dict:
    """Drop the prose (V1_PROSE); keep the mechanism's name of a sentence (V1_NAMES)."""
    for path in V1_PROSE:
        if _get(record, path) is not _MISSING:
            record = _set(record, path, _MISSING)
    for path, names in V1_NAMES.items():
        value = _get(record, path)
        if isinstance(value, str) and value in names:
            record = _set(record, path, names[value])
            for key, fact in V1_ADDED.get(path, {}).items():
                record = _set(record, (*path[:-1], key), fact)
    return _set(record, ("schema_version",), 2)


# Version 2 -> 3: the verdict's findings, read from the sentences of a version-2 trace
# (the only place a sentence is parsed): (prefix, check, transient), first match wins.
# Transient as the retry policy of version 2 read it, but for the fallback to a native
# algorithm ("cc: flow ..."), which no attempt can cure.
V2_FINDINGS = (("delay line:", "delay line", True), ("link:", "link", True), ("loaded RTT:", "loaded RTT", True),
               ("cc: flow ", "cc", False), ("cc:", "cc", True), ("window:", "window", True),
               ("receiver rate:", "receiver rate", True), ("ACK clock:", "ACK clock", True),
               ("rtt: measured", "rtt", True), ("run failed:", "run failed", False))


def _v2_finding(text: str) -> dict:
    # drop:, rtt: (base, unmeasured), rate:, pacing:, ...: settings, not host trouble
    check, transient = next(((c, t) for prefix, c, t in V2_FINDINGS if text.startswith(prefix)),
                            (text.split(":", 1)[0] if ":" in text else "unknown", False))
    return {"check": check, "transient": transient, "text": text, "measured": None, "limit": None}


@_step(2)
def _v2_to_v3(record: dict) -> dict:
    """fidelity.findings (and each earlier attempt's) from the reasons' sentences."""
    fid = dict(record.get("fidelity") or {})
    if "reasons" in fid:
        fid["findings"] = [_v2_finding(r) for r in fid["reasons"]]
    if isinstance(fid.get("earlier_attempts"), list):
        fid["earlier_attempts"] = [{**a, "findings": [_v2_finding(r) for r in a.get("reasons", [])]}
                                   if isinstance(a, dict) else a for a in fid["earlier_attempts"]]
    return _set(_set(record, ("fidelity",), fid), ("schema_version",), 3)


def _ends_in_a_repeat(samples: dict) -> bool:
    """Whether a flow's last sample repeats the one before it, bytes and rate alike: the
    fingerprint of an iperf3 server's repeated last interval. Two real intervals of a
    paced flow may agree on both (equal blocks in equal microseconds); dropping the second
    of them leaves the flow's mean all but unchanged: it is the paced rate."""
    got, rate = samples.get("bytes"), samples.get("throughput_bps")
    return (isinstance(got, list) and isinstance(rate, list) and len(got) >= 2 and len(rate) == len(got)
            and bool(got[-1]) and got[-1] == got[-2] and rate[-1] == rate[-2])


@_step(3)
def _v3_to_v4(record: dict) -> dict:
    """Drop a flow's last sample where it is the iperf3 server's repeated last interval:
    version 3 matched it to the client's partial last interval when a precision-driven
    run interrupted its flows (backends.common.without_repeats)."""
    flows = []
    for flow in record.get("flows") or []:
        samples = flow.get("samples") if isinstance(flow, dict) else None
        if isinstance(samples, dict) and _ends_in_a_repeat(samples):
            flow = {**flow, "samples": {k: v[:-1] if isinstance(v, list) else v for k, v in samples.items()}}
        flows.append(flow)
    if "flows" in record:
        record = _set(record, ("flows",), flows)
    return _set(record, ("schema_version",), 4)


def version_of(record: Any, source: str = "trace") -> int:
    """The record's format version; TraceError if it has none this code knows."""
    if not isinstance(record, dict) or "schema_version" not in record:
        raise TraceError(f"{source}: no schema_version: not a tcpeval trace")
    version = record["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TraceError(f"{source}: schema_version {version!r} is not a trace format version "
                         f"(an integer from 1 to {SCHEMA_VERSION})")
    if version > SCHEMA_VERSION:
        raise TraceError(f"{source}: trace format version {version} is newer than this tcpeval "
                         f"reads (versions 1 to {SCHEMA_VERSION}); update tcpeval to read it")
    return version


def upgrade(record: dict, source: str = "trace") -> dict:
    """``record`` in the current format version (itself if it is current), through every
    registered step from its version on. The argument is never modified. TraceError names
    ``source`` for a missing, unknown or newer version."""
    version = version_of(record, source)
    while version < SCHEMA_VERSION:
        if version not in _UPGRADES:
            raise TraceError(f"{source}: no upgrade from trace format version {version}")
        record = _UPGRADES[version](record)
        version += 1
        if record.get("schema_version") != version:
            raise AssertionError(f"upgrade step from version {version - 1} did not set schema_version {version}")
    return record


def prose_keys(record: dict) -> list[str]:
    """The keys of ``record`` that held prose in version 1 and have no place in later ones."""
    return ["/".join(path) for path in V1_PROSE if _get(record, path) is not _MISSING]


@lru_cache(maxsize=1)
def schema() -> dict:
    text = resources.files("tcpeval").joinpath("schemas/trace.schema.json").read_text()
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema())
    return cls(schema(), format_checker=cls.FORMAT_CHECKER)


def _where(error: jsonschema.ValidationError) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "(top level)"


def validate(record: Any, source: str = "trace") -> None:
    """Raise TraceError naming every field that breaks the contract."""
    errors = sorted(_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    problems = [f"{_where(e)}: {e.message}" for e in errors]
    problems += _series_problems(record) if not errors else []
    if problems:
        listed = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise TraceError(f"{source} breaks the trace contract:\n  {listed}{more}")


def _series_problems(record: dict) -> list[str]:
    """Checks JSON Schema cannot express: columnar arrays of one length, time increasing."""
    problems = []
    for flow in record["flows"]:
        samples = flow["samples"]
        lengths = {name: len(values) for name, values in samples.items() if isinstance(values, list)}
        if len(set(lengths.values())) > 1:
            problems.append(f"flows/{flow['id']}/samples: columns differ in length {lengths}")
        times = samples["t_s"]
        if any(b <= a for a, b in zip(times, times[1:])):
            problems.append(f"flows/{flow['id']}/samples/t_s: times must increase strictly")
    drop = record["measured"]["drop"]
    if drop["dropped"] > drop["seen"]:
        problems.append("measured/drop: dropped exceeds seen")
    fid = record["fidelity"]
    for where, item in [("fidelity", fid)] + [(f"fidelity/earlier_attempts/{i}", a)
                                              for i, a in enumerate(fid.get("earlier_attempts", []))]:
        if item["reasons"] != [f["text"] for f in item["findings"]]:
            problems.append(f"{where}/reasons: not the findings' sentences, in their order")
    return problems


def write_trace(run_dir: str | os.PathLike, record: dict, *, force: bool = False) -> Path:
    """Validate ``record`` and write ``run_dir/trace.json`` atomically.

    A record is written in the current format version only, without the prose keys of
    version 1 (``V1_PROSE``). Refuses to replace an existing trace unless ``force``: raw results are never
    overwritten by accident.
    """
    run_dir = Path(run_dir)
    target = run_dir / TRACE_FILE
    validate(record, source=str(target))
    prose = prose_keys(record)
    if prose:
        raise TraceError(f"{target}: the record carries prose that format version {SCHEMA_VERSION} "
                         f"leaves to docs/trace-format.md: {', '.join(prose)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; refusing to overwrite a raw trace (use --force)")
    fd, tmp = tempfile.mkstemp(prefix=".trace.", suffix=".tmp", dir=run_dir)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, indent=1, sort_keys=False, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            os.replace(tmp, target)
        else:
            # link() fails if the target appeared meanwhile: no silent overwrite even in a race.
            os.link(tmp, target)
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(run_dir)
    return target


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_trace(path: str | os.PathLike, *, check: bool = True) -> dict:
    """Read a trace (a file or a run directory) in the current format version: an older
    one is upgraded in memory (``upgrade``), the file is left as it is. TraceError names the
    run on any problem, a missing, unknown or newer format version included."""
    path = Path(path)
    if path.is_dir():
        path = path / TRACE_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"{path}: no trace (the run has not completed)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceError(f"{path}: unreadable trace: {err}") from None
    record = upgrade(record, source=str(path))
    if check:
        validate(record, source=str(path))
    return record

"""The trace contract: the per-run record every backend writes and the analysis reads.

The schema is ``tcpeval/schemas/trace.schema.json``. Writes are atomic (temporary file in
the same directory, fsync, rename) and never replace an existing trace unless forced, so
a crash leaves either the old trace, the new one, or none, but never a partial file.
"""
from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

TRACE_FILE = "trace.json"
SCHEMA_VERSION = 1


class TraceError(ValueError):
    """A trace is missing, unreadable or breaks the contract; the message names where."""


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
    return problems


def write_trace(run_dir: str | os.PathLike, record: dict, *, force: bool = False) -> Path:
    """Validate ``record`` and write ``run_dir/trace.json`` atomically.

    Refuses to replace an existing trace unless ``force``: raw results are never
    overwritten by accident.
    """
    run_dir = Path(run_dir)
    target = run_dir / TRACE_FILE
    validate(record, source=str(target))
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
    """Read a trace (a file or a run directory); TraceError names the run on any problem."""
    path = Path(path)
    if path.is_dir():
        path = path / TRACE_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraceError(f"{path}: no trace (the run has not completed)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceError(f"{path}: unreadable trace: {err}") from None
    if check:
        validate(record, source=str(path))
    return record

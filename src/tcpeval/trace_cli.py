"""`tcpeval trace upgrade`: bring traces written in an older format version to the current one.

Without ``--in-place`` it only reads and prints what would change. With it, each old trace
is rewritten atomically (``tcpeval.trace.write_trace(..., force=True)``), and only after
every given trace has been read and upgraded without error: one bad trace leaves all of
them as they were. Reading never needs this (``read_trace`` upgrades in memory); it is for
keeping raw data in one format. See docs/trace-format.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tcpeval import trace
from tcpeval.errors import UserError


def _trace_files(paths: list[str]) -> list[Path]:
    """A file as given; a run directory's trace.json; else every trace.json below a directory."""
    files = []
    for name in paths:
        p = Path(name)
        if p.is_dir():
            found = [p / trace.TRACE_FILE] if (p / trace.TRACE_FILE).is_file() else sorted(p.rglob(trace.TRACE_FILE))
            if not found:
                raise trace.TraceError(f"{p}: no {trace.TRACE_FILE} in or below this directory")
            files += found
        else:
            files.append(p)
    return files


def changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """What turns ``old`` into ``new``, one line per removed, added or changed leaf."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in old:
            where = f"{prefix}/{key}" if prefix else str(key)
            out += changes(old[key], new[key], where) if key in new else [f"- {where}"]
        out += [f"+ {prefix}/{key}" if prefix else f"+ {key}" for key in new if key not in old]
        return out
    if old == new:
        return []
    return [f"~ {prefix}: {json.dumps(old)[:60]} -> {json.dumps(new)[:60]}"]


def cmd_upgrade(args) -> int:
    try:
        files = _trace_files(args.paths)
    except trace.TraceError as err:
        raise UserError(str(err)) from None
    plans, errors = [], []
    for path in files:
        try:
            old = json.loads(path.read_text())
            version = trace.version_of(old, str(path))
            new = trace.upgrade(old, str(path))
            trace.validate(new, str(path))
            if args.in_place and version < trace.SCHEMA_VERSION and path.name != trace.TRACE_FILE:
                raise trace.TraceError(f"{path}: --in-place rewrites files named {trace.TRACE_FILE} only")
        except FileNotFoundError:
            errors.append(f"{path}: no such file")
            continue
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            errors.append(f"{path}: unreadable trace: {err}")
            continue
        except trace.TraceError as err:
            errors.append(str(err))
            continue
        plans.append((path, version, old, new))
    for message in errors:
        print(f"tcpeval: error: {message}", file=sys.stderr)
    if errors:
        raise UserError(f"{len(errors)} of {len(files)} traces cannot be upgraded; nothing was rewritten")
    old_ones = [p for p in plans if p[1] < trace.SCHEMA_VERSION]
    shown: dict[tuple, Path] = {}  # each distinct list of changes is printed once
    for path, version, old, new in plans:
        if version == trace.SCHEMA_VERSION:
            if args.verbose:
                print(f"{path}: version {version}, current")
            continue
        verb = "upgraded" if args.in_place else "would upgrade"
        print(f"{path}: {verb} version {version} -> {trace.SCHEMA_VERSION}")
        if not args.in_place or args.verbose:
            lines = tuple(changes(old, new))
            if lines in shown:
                print(f"  the same changes as {shown[lines]}")
            else:
                shown[lines] = path
                for line in lines:
                    print(f"  {line}")
        if args.in_place:
            trace.write_trace(path.parent, new, force=True)
    current = len(plans) - len(old_ones)
    summary = f"{len(old_ones)} of {len(plans)} traces in an older version, {current} current"
    if old_ones and not args.in_place:
        summary += "; nothing rewritten (--in-place rewrites them)"
    elif old_ones:
        summary += f"; rewritten in version {trace.SCHEMA_VERSION}"
    print(summary)
    return 0


def add_parsers(sub) -> None:
    tr = sub.add_parser("trace", help="trace files: upgrade old format versions (docs/trace-format.md)")
    tsub = tr.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    p = tsub.add_parser("upgrade", help="show (or, with --in-place, make) the upgrade of old traces "
                                        f"to format version {trace.SCHEMA_VERSION}")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="trace.json, a run directory, or a directory searched for trace.json files")
    p.add_argument("--in-place", action="store_true",
                   help="rewrite each old trace atomically (default: only print what would change)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list current traces (and, with "
                                                                "--in-place, the changes)")
    p.set_defaults(func=cmd_upgrade)

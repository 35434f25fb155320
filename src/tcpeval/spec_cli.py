"""`tcpeval design ...`: check the design, list a campaign's runs, resolve a run path."""
from __future__ import annotations

import json
import sys

from tcpeval import paths, run_index, spec
from tcpeval.errors import UserError


def _load(args):
    try:
        return spec.load_design(args.design)
    except spec.SpecError as err:
        raise UserError(str(err)) from None


def cmd_check(args) -> int:
    """Schema, cross-field rules, every campaign's expansion (unique paths), and the
    algorithms against what the backend offers."""
    from tcpeval.backends import algorithms

    design = _load(args)
    problems = []
    try:
        for name in spec.campaign_names(design):
            runs = spec.expand(design, name, args.backend)
            total = sum(r.duration_s for r in runs)
            print(f"{name:8s} {len(runs):5d} runs  {total / 3600:8.2f} h of traffic  "
                  + "  ".join(f"{k}={v}" for k, v in spec.counts_by_criterion(runs).items()))
            problems += [p for p in algorithms.problems(runs, args.backend) if p not in problems]
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    if problems:
        raise UserError(f"{args.design or spec.DEFAULT_DESIGN}: algorithms the {args.backend} backend "
                        "cannot run:\n  " + "\n  ".join(problems))
    print(f"{args.design or spec.DEFAULT_DESIGN}: valid (backend {args.backend})")
    return 0


def cmd_runs(args) -> int:
    design = _load(args)
    try:
        runs = spec.expand(design, args.campaign, args.backend,
                           criteria=args.criterion or None)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    if args.count:
        counts = spec.counts_by_criterion(runs)
        for name, n in counts.items():
            print(f"{name}\t{n}")
        print(f"total\t{len(runs)}")
    elif args.json:
        json.dump([dict(c.to_dict(), path=paths.run_dir(c, args.raw_dir)) for c in runs], sys.stdout, indent=1)
        print()
    else:
        for cond in runs:
            print(paths.trace_path(cond, args.raw_dir))
    return 0


def cmd_resolve(args) -> int:
    design = _load(args)
    try:
        cond = run_index.resolve_path(args.path, design, args.raw_dir)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    json.dump(cond.to_dict(), sys.stdout, indent=1)
    print()
    return 0


def _run_seconds(trace_file) -> tuple[float | None, str]:
    """Wall time and verdict of a finished run, from its trace."""
    from datetime import datetime
    try:
        record = json.loads(trace_file.read_text())
        start = datetime.fromisoformat(record["started_at"])
        end = datetime.fromisoformat(record["finished_at"])
        return (end - start).total_seconds(), record["fidelity"]["verdict"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, "unreadable"


def cmd_status(args) -> int:
    """Runs done / total per criterion, flagged runs, and an ETA from the runs so far."""
    from pathlib import Path
    design = _load(args)
    try:
        runs = spec.expand(design, args.campaign, args.backend)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    from tcpeval.backends import planning
    ceil = planning.ceiling(args.backend)
    rows, walls, planned_left, planned_done, on_demand = {}, [], 0.0, 0.0, 0
    for cond in runs:
        trace_file = Path(paths.trace_path(cond, args.raw_dir))
        if spec.on_demand(design, args.campaign, cond) and not trace_file.exists():
            on_demand += 1   # runs only if an undecided finding asks for it (tcpeval next-runs)
            continue
        # physical traffic time: a time-dilated run takes its factor times longer
        plan = planning.plan_run(cond, ceil)
        physical_s = plan.traffic_s * (plan.factor or 1)
        row = rows.setdefault(cond.criterion, {"done": 0, "total": 0, "flagged": 0})
        row["total"] += 1
        if trace_file.exists():
            seconds, verdict = _run_seconds(trace_file)
            row["done"] += 1
            row["flagged"] += verdict != "ok"
            if seconds:
                walls.append(seconds)
                planned_done += physical_s
        else:
            planned_left += physical_s
    print(f"campaign {args.campaign} on backend {args.backend}")
    for name, row in rows.items():
        print(f"  {name:16s} {row['done']:5d} / {row['total']:5d} done   {row['flagged']} flagged")
    done, total = sum(r["done"] for r in rows.values()), sum(r["total"] for r in rows.values())
    print(f"  {'total':16s} {done:5d} / {total:5d} done ({100 * done / max(total, 1):.0f} %)")
    if on_demand:
        print(f"  and up to {on_demand} run(s) on demand: repetitions beyond the first, and the cells the "
              "first round defers, for the findings they keep undecided (`tcpeval next-runs`)")
    if planned_left:
        # Wall time scales with run duration plus a fixed overhead; estimate both from the runs so far.
        ratio = sum(walls) / planned_done if planned_done else None
        eta = planned_left * ratio if ratio else planned_left
        label = "ETA" if ratio else "at least (traffic time alone)"
        print(f"  {label}: {eta / 3600:.1f} h")
    return 0


def add_parsers(sub) -> None:
    design = sub.add_parser("design", help="check the experiment design; list or resolve runs")
    dsub = design.add_subparsers(dest="design_command", required=True, metavar="ACTION")

    def common(p):
        p.add_argument("--design", help=f"design file (default {spec.DEFAULT_DESIGN.relative_to(spec.REPO_ROOT)})")
        p.add_argument("--raw-dir", default=paths.DEFAULT_RAW_DIR, help="root of the raw traces")

    p = dsub.add_parser("check", help="validate the design and print each campaign's size")
    common(p)
    p.add_argument("--backend", default="emulated", help="check the algorithms against this backend")
    p.set_defaults(func=cmd_check)

    p = dsub.add_parser("runs", help="list the runs (trace paths) of a campaign")
    common(p)
    p.add_argument("--campaign", default="smoke")
    p.add_argument("--backend", default="emulated", choices=spec.BACKENDS)
    p.add_argument("--criterion", action="append", help="only this criterion (repeatable)")
    p.add_argument("--count", action="store_true", help="counts per criterion instead of paths")
    p.add_argument("--json", action="store_true", help="full conditions as JSON")
    p.set_defaults(func=cmd_runs)

    p = dsub.add_parser("status", help="runs done / total per criterion, flagged runs, ETA")
    common(p)
    p.add_argument("--campaign", default="smoke")
    p.add_argument("--backend", default="emulated", choices=spec.BACKENDS)
    p.set_defaults(func=cmd_status)

    p = dsub.add_parser("resolve", help="print the condition a run path names")
    common(p)
    p.add_argument("path")
    p.set_defaults(func=cmd_resolve)

"""`tcpeval metrics ...` and `tcpeval synthetic`: traces -> tidy Parquet tables.

    tcpeval metrics run TRACE OUT_DIR          one trace -> OUT_DIR/{run,flows,samples}.parquet
    tcpeval metrics gather OUT RUN_OUT_DIR...  per-run outputs -> OUT/{runs,flows,samples}.parquet
    tcpeval metrics build --campaign C ...     by hand: every trace present -> per-run -> gather
    tcpeval synthetic RAW_DIR --campaign C     schema-valid synthetic traces (tests, dry runs)

Heavy imports stay inside the commands: every `tcpeval` invocation builds all parsers.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tcpeval import paths, spec
from tcpeval.analysis.metrics import DEFAULT_EPSILON, DEFAULT_LAMBDA
from tcpeval.errors import UserError
from tcpeval.trace import TRACE_FILE


def per_run_dir(results_dir: str, run_id: str) -> str:
    """results/<backend>[/<design>]/<campaign>/runs/<criterion>/<flows>/rtt../drop../rep..
    for the run id <backend>[/<design>]/<campaign>/<criterion>/... (the path grammar)."""
    scope, rest = paths.split_run_id(run_id)
    return paths.metrics_pattern(results_dir).format(scope=scope, rest=rest)


def _metric_kw(args) -> dict:
    return {"lam": args.lam, "eps": args.eps}


def cmd_run(args) -> int:
    from tcpeval.analysis import extract, tidy

    try:
        row = tidy.write_run(args.trace, args.out_dir, skip_bad=args.skip_bad, **_metric_kw(args))
    except extract.BadTrace as err:
        raise UserError(str(err)) from None
    except ValueError as err:
        raise UserError(str(err)) from None
    if row["status"] != "ok":
        print(f"tcpeval: skipped bad trace {args.trace}: {row['error']}", file=sys.stderr)
    return 0


def cmd_gather(args) -> int:
    from tcpeval.analysis import extract, tidy

    dirs = list(args.run_dirs)
    if args.list:
        dirs += [line.strip() for line in Path(args.list).read_text().splitlines() if line.strip()]
    try:
        result = tidy.gather(dirs, args.out, skip_bad=args.skip_bad)
    except extract.BadTrace as err:
        raise UserError(str(err)) from None
    print(f"gathered {result['runs']} run(s) into {args.out}")
    for b in result["bad"]:
        print(f"  skipped (bad trace): {b['run']}: {b['error'].splitlines()[0]}")
    return 0


def cmd_build(args) -> int:
    """Render from what exists: per-run outputs for every trace present (only those
    older than their trace, or without a column this version writes, are recomputed),
    then gather. Runs nothing."""
    from tcpeval.analysis import extract, tables, tidy

    try:
        design = spec.load_design(args.design)
        expected = tables.expected_runs(design, args.campaign, args.backend)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    raw = Path(args.raw_dir)
    out_dirs, recomputed, missing = [], 0, 0
    for run_id in expected["run"]:
        trace_path = raw / run_id / TRACE_FILE
        if not trace_path.exists():
            missing += 1
            continue
        out = Path(per_run_dir(args.results_dir, run_id))
        fresh = ((out / tidy.RUN_FILE).exists() and (out / tidy.RUN_FILE).stat().st_mtime >= trace_path.stat().st_mtime
                 and tidy.run_table_current(out / tidy.RUN_FILE))
        if args.force or not fresh:
            try:
                tidy.write_run(trace_path, out, skip_bad=args.skip_bad, **_metric_kw(args))
            except extract.BadTrace as err:
                raise UserError(str(err)) from None
            recomputed += 1
        out_dirs.append(out)
    target = Path(args.results_dir) / args.backend / args.campaign
    try:
        result = tidy.gather(out_dirs, target, skip_bad=args.skip_bad)
    except extract.BadTrace as err:
        raise UserError(str(err)) from None
    print(f"{len(out_dirs)} trace(s) present ({recomputed} recomputed), {missing} of {len(expected)} "
          f"missing; tables in {target}")
    for b in result["bad"]:
        print(f"  skipped (bad trace): {b['run']}")
    return 0


def cmd_synthetic(args) -> int:
    from tcpeval.analysis import synthetic

    try:
        design = spec.load_design(args.design)
        conds = synthetic.campaign_conditions(design, args.campaign, args.backend, duration_s=args.duration)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    if args.fraction < 1:
        step = max(1, round(1 / args.fraction))
        conds = conds[::step]
    written = synthetic.write_traces(conds, args.raw_dir, flag_every=args.flag_every)
    print(f"wrote {len(written)} synthetic trace(s) under {args.raw_dir} (NOT measurements)")
    return 0


def add_parsers(sub) -> None:

    def metric_opts(p):
        p.add_argument("--lambda", dest="lam", type=float, default=DEFAULT_LAMBDA,
                       help=f"EWMA weight of the short-term throughput (default {DEFAULT_LAMBDA}, Sec. V)")
        p.add_argument("--epsilon", dest="eps", type=float, default=DEFAULT_EPSILON,
                       help=f"convergence threshold as a fraction of the long-term mean (default {DEFAULT_EPSILON})")

    def skip(p):
        p.add_argument("--skip-bad", action="store_true",
                       help="list and skip corrupt or missing traces instead of stopping")

    m = sub.add_parser("metrics", help="traces -> tidy per-run / per-sample Parquet tables")
    msub = m.add_subparsers(dest="metrics_command", required=True, metavar="ACTION")

    p = msub.add_parser("run", help="one trace -> OUT_DIR/{run,flows,samples}.parquet")
    p.add_argument("trace", help="trace.json (or its run directory)")
    p.add_argument("out_dir")
    metric_opts(p)
    skip(p)
    p.set_defaults(func=cmd_run)

    p = msub.add_parser("gather", help="concatenate per-run outputs into OUT/{runs,flows,samples}.parquet")
    p.add_argument("out", help="output directory, e.g. results/emulated/smoke")
    p.add_argument("run_dirs", nargs="*", help="per-run output directories")
    p.add_argument("--list", help="file with one per-run output directory per line")
    skip(p)
    p.set_defaults(func=cmd_gather)

    p = msub.add_parser("build", help="by hand: per-run + gather over the traces present (runs nothing)")
    p.add_argument("--design")
    p.add_argument("--campaign", default="smoke")
    p.add_argument("--backend", default="emulated")
    p.add_argument("--raw-dir", default="data/raw")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--force", action="store_true", help="recompute every per-run output")
    metric_opts(p)
    skip(p)
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("synthetic", help="write synthetic schema-valid traces (tests, dry runs; not measurements)")
    p.add_argument("raw_dir")
    p.add_argument("--design")
    p.add_argument("--campaign", default="smoke")
    p.add_argument("--backend", default="emulated")
    p.add_argument("--duration", type=float, help="shorten every run to this many seconds")
    p.add_argument("--fraction", type=float, default=1.0, help="write only about this fraction of the runs")
    p.add_argument("--flag-every", type=int, default=0, help="give every k-th run the verdict 'flagged'")
    p.set_defaults(func=cmd_synthetic)

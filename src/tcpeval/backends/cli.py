"""`tcpeval run`, `tcpeval calibrate`, `tcpeval cleanup`: the backends on the command line.

    tcpeval run data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop1e-04/rep1/trace.json
    tcpeval run --backend emulated --variant bic --rtt 6.2 --drop 1e-5 --duration 5 --out DIR
    tcpeval run --flows bic,reno --start 0,10 --rtt 24.2 --drop 0 --duration 30 --out DIR

A backend's own modules (emulated: namespaces, BPF; testbed: SSH) are imported by the
commands that use them: every `tcpeval` invocation builds all parsers.
"""
from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from tcpeval import dilation, findings, quantity, run_index, spec, trace
from tcpeval.backends import algorithms, common, get_backend, planning
from tcpeval.backends.base import (
    RETRY_PAUSES_S,
    RUN_ATTEMPTS,
    BackendError,
    ConditionError,
    TraceExistsError,
)
from tcpeval.condition import Condition
from tcpeval.errors import SpecError, UserError
from tcpeval.precision import StopRule


def parse_rate(text: str) -> float:
    """--rate: '5G', '9.5gbit', '500M', '2.5e9' -> bits per second (tcpeval.quantity's
    grammar, as in a design)."""
    try:
        value = quantity.rate(text, "--rate")
    except quantity.QuantityError as err:
        raise UserError(str(err)) from None
    if value <= 0:
        raise UserError(f"--rate: {text!r} must be > 0")
    return value


def parse_bytes(text: str) -> int | None:
    """--buffer: '4M', '16MiB', '65536', or 'bdp' (one bandwidth-delay product: None) ->
    bytes (tcpeval.quantity's grammar, as in a design)."""
    if text.strip().lower() == "bdp":
        return None
    try:
        return quantity.size(text, "--buffer")
    except quantity.QuantityError as err:
        raise UserError(f"{err} (or bdp)") from None


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{what}: {text!r} is not a comma-separated list of numbers") from None


def _condition(args):

    if args.target:
        if args.variant or args.flows:
            raise UserError("give either a run path or --variant/--flows, not both")
        try:
            design = spec.load_design(args.design)
            condition = run_index.resolve_path(args.target, design, args.raw_dir)
        except spec.SpecError as err:
            raise UserError(str(err)) from None
        target = Path(args.target)
        run_dir = target.parent if target.name == trace.TRACE_FILE else target
        if args.dilation is not None:
            condition = replace(condition, dilation=_dilation_arg(args.dilation))
        return condition, run_dir
    variants = list(args.variant or [])
    if args.flows:
        variants += [v.strip() for v in args.flows.split(",") if v.strip()]
    if not variants:
        raise UserError("name a run path, or the flows with --variant (repeatable) or --flows a,b")
    missing = [name for name, value in (("--rtt", args.rtt), ("--drop", args.drop),
                                         ("--duration", args.duration), ("--out", args.out)) if value is None]
    if missing:
        raise UserError(f"an ad-hoc run needs {', '.join(missing)}")
    stack = {}
    for item in args.stack or []:
        if "=" not in item:
            raise UserError(f"--stack: {item!r} is not NAME=VALUE")
        k, v = item.split("=", 1)
        stack[k.strip()] = int(v) if v.strip().lstrip("-").isdigit() else v.strip()
    try:
        condition = spec.adhoc_condition(
            variants, args.rtt, args.drop, args.duration, backend=args.backend,
            starts=_floats(args.start, "--start") if args.start else None, impl=args.impl,
            stops=_stops(args.stop) if args.stop else None, object_path=args.object,
            interval_s=args.interval, rate_bps=parse_rate(args.rate) if args.rate else None,
            buffer_bytes=parse_bytes(args.buffer) if args.buffer else None,
            background_loss=args.background_loss, hz=args.hz, seed=args.seed,
            dilation=_dilation_arg(args.dilation) if args.dilation is not None else "auto",
            stop=_stop_rule(args))
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    if stack:
        condition = replace(condition, stack=stack)
    if args.ecn is not None or args.ecn_queues is not None:
        try:
            k = quantity.size(args.ecn, "--ecn") if args.ecn is not None else None
        except quantity.QuantityError as err:
            raise UserError(str(err)) from None
        condition = replace(condition, ecn_threshold_bytes=k, ecn_queues=args.ecn_queues)
        problems = [p for p in condition.problems() if p.startswith("ecn")]
        if problems:
            raise UserError("; ".join(p.replace("ecn_threshold_bytes", "--ecn").replace("ecn_queues", "--ecn-queues")
                                      for p in problems))
    return condition, Path(args.out)


def _stop_rule(args):
    """--precision H [--min-loss-events N] [--min-duration S]: a precision-driven run whose
    --duration is its maximum (tcpeval.precision.StopRule), else None."""
    if args.precision is None:
        if args.min_loss_events is not None or args.min_duration is not None:
            raise UserError("--min-loss-events and --min-duration go with --precision")
        return None
    fields = {"half_width": args.precision, "max_s": args.duration}
    if args.min_loss_events is not None:
        fields["min_loss_events"] = args.min_loss_events
    if args.min_duration is not None:
        fields["min_s"] = args.min_duration
    names = {"half_width": "--precision", "max_s": "--duration", "min_loss_events": "--min-loss-events",
             "min_s": "--min-duration"}
    try:
        return StopRule.from_design(fields, "stop")
    except SpecError as err:  # the rule's field names, as the options that set them
        text = str(err)
        for field, option in names.items():
            text = text.replace(f"stop.{field}", option)
        raise UserError(text) from None


def _stops(text: str) -> list[float | None]:
    """--stop 0,20: per flow, 0 or '-' for 'runs to the end'."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if item in ("", "-", "0"):
            out.append(None)
        else:
            out.append(_floats(item, "--stop")[0])
    return out


def _dilation_arg(text: str):

    try:
        return dilation.parse(text.strip())
    except dilation.DilationError as err:
        raise UserError(f"--{err}") from None


def _backend(name: str, args):

    options = {"progress": not args.quiet, "lock_timeout_s": args.lock_timeout}
    if name == "testbed":
        options["description"] = getattr(args, "testbed", None)
    elif getattr(args, "attempts", None) is not None:
        options["attempts"] = args.attempts
    try:
        return get_backend(name, **options)
    except ValueError as err:
        raise UserError(str(err)) from None


def cmd_run(args) -> int:
    from tcpeval.backends.emulated.host import PreflightError

    _port_as(args)
    condition, run_dir = _condition(args)
    if args.keep_existing:
        if args.force:
            raise UserError("--keep-existing and --force contradict each other: keep the trace, or replace it")
        kept = kept_trace_note(run_dir, condition)
        if kept:
            print(kept)
            return 0

    found = algorithms.problems([condition], condition.backend)
    if found:
        raise UserError("; ".join(found))
    backend = _backend(condition.backend, args)
    try:
        record = backend.run(condition, run_dir, force=args.force)
    except PreflightError as err:
        raise UserError(str(err)) from None
    except BackendError as err:
        from tcpeval.backends.testbed import TestbedConfigError
        if isinstance(err, (ConditionError, TraceExistsError, TestbedConfigError)):  # the user's to fix
            raise UserError(str(err)) from None
        print(f"tcpeval: run failed ({run_dir}): {err}\n  details: {run_dir / 'run.log'}", file=sys.stderr)
        return 1

    k = dilation.factor(record)
    virtual = dilation.to_virtual(record)  # what the condition asked for, in its units
    fid = record["fidelity"]
    flows = ", ".join(f"{f['variant']} {f['summary']['mean_throughput_bps'] / 1e9:.2f} Gbps"
                      for f in virtual["flows"])
    print(f"{run_dir / 'trace.json'}: {flows}; RTT {virtual['measured']['rtt_ms']:.3f} ms; "
          f"drops {record['measured']['drop']['dropped']}/{record['measured']['drop']['seen']}; "
          + (f"time-dilated x{k} (virtual units); " if k > 1 else "")
          + f"fidelity {fid['verdict']}" + (f" ({'; '.join(fid['reasons'])})" if fid["reasons"] else ""))
    return 0


def condition_differences(recorded: dict, wanted: dict) -> list[str]:
    """Each field a trace's recorded condition has other than the one asked for, as
    "field: recorded -> wanted" (a stopping rule by its settings)."""
    out = []
    for key in sorted(set(recorded) | set(wanted)):
        have, want = recorded.get(key), wanted.get(key)
        if have == want:
            continue
        if isinstance(have, dict) and isinstance(want, dict):
            out += [f"{key}.{k}: {have.get(k)!r} -> {want.get(k)!r}" for k in sorted(set(have) | set(want))
                    if have.get(k) != want.get(k)]
        else:
            out.append(f"{key}: {have!r} -> {want!r}")
    return out


def kept_trace_note(run_dir: Path, condition: Condition | None = None) -> str | None:
    """With --keep-existing: the line saying the run's trace is kept, or None when it has no
    trace. A trace is written whole or not at all (``trace.write_trace``), so one that exists
    is a complete run; the workflow's rule passes this flag because Snakemake reruns a job it
    saw interrupted (rerun-incomplete) or was told to force, even when the trace was written,
    and would otherwise remove the trace before the job starts (it did, 2026-12-04). A trace
    that does not read back is an error, not a reason to run over it; so is one recorded
    under another condition than ``condition`` (the design changed it since, e.g. a
    finding asked its cells for a tighter stopping rule; the workflow reruns the job then,
    its params carry the condition): it is not the design's run, and not ours to remove."""
    target = Path(run_dir) / trace.TRACE_FILE
    if not target.exists():
        return None
    try:
        record = trace.read_trace(target)
    except trace.TraceError as err:
        raise UserError(f"{err}; it is left as it is: move it away to run the condition again") from None
    differing = condition_differences(record.get("condition") or {}, condition.to_dict()) if condition else []
    if differing:
        raise UserError(f"{target}: recorded under another condition than the design's now ("
                        + "; ".join(differing) + "); it is left as it is: move it away to run the "
                        f"condition again (or replace it: tcpeval run --force {target})")
    return (f"{target}: kept: it exists, and a trace is written whole or not at all; "
            f"to run the condition again: tcpeval run --force {target}")


def _port_as(args) -> None:
    """--port-as, for this process and the runs it starts."""
    if getattr(args, "port_as", None):
        os.environ[common.PORT_AS_ENV] = args.port_as


def cmd_calibrate(args) -> int:
    from tcpeval.backends.emulated import build, calibrate
    from tcpeval.backends.emulated.host import PreflightError

    _port_as(args)
    if args.show:
        data = calibrate.load(build.ensure_built().hashes)
        if data is None:
            raise UserError("no calibration for this host, kernel and build yet: run `tcpeval calibrate`")
        print(json.dumps(data, indent=1))
        return 0
    backend = _backend("emulated", args)
    try:
        design = spec.load_design(args.design) if args.design else None
        data = backend.calibrate(duration_s=args.duration, force=not args.if_missing, design=design)
    except PreflightError as err:
        raise UserError(str(err)) from None
    except BackendError as err:
        print(f"tcpeval: calibration failed: {err}", file=sys.stderr)
        return 1
    print(envelope_table(data))
    print(f"default bottleneck rate {_gbps(data['default_rate_bps'])} Gbps ({data['link']}); "
          f"cached in {data.get('cache_file') or calibrate.cache_path(data['key'])}")
    return 0


def _gbps(rate_bps: float) -> str:
    """0.1 Gbps steps as they were (1.5), a slow host's finer ones in full (0.003)."""
    text = f"{rate_bps / 1e9:.1f}"
    return text if abs(float(text) * 1e9 - rate_bps) < 1 else f"{rate_bps / 1e9:.3g}"


def envelope_table(cal: dict) -> str:
    """The calibration's envelope: per (flows, physical RTT) the raw and the faithful rate
    of each link mechanism, and the 3.16 ports' ceiling below it where one was measured
    ("faithful/ports"), in Gbps."""
    links = cal.get("links") or []

    def cell(found: dict) -> str:
        rate = found.get("rate_bps")
        text = "-" if rate is None else _gbps(rate)
        if "ports_rate_bps" in found:
            ports = found["ports_rate_bps"]
            text += "/" + ("-" if ports is None else _gbps(ports))
        return text
    lines = [f"{'flows':>5} {'RTT ms':>7} {'raw':>6} " + " ".join(f"{name:>9}" for name in links)
             + "   (Gbps; faithful per link mechanism / the 3.16 ports' ceiling)"]
    for p in cal["points"]:
        lines.append(f"{p['flows']:>5} {p['rtt_ms']:>7g} {p['throughput_bps'] / 1e9:>6.2f} "
                     + " ".join(f"{cell(p['faithful'].get(name) or {}):>9}" for name in links))
    return "\n".join(lines)


def cmd_cleanup(args) -> int:
    from tcpeval.backends.emulated import host

    try:
        host.preflight()
    except host.PreflightError as err:
        raise UserError(str(err)) from None
    if args.dry_run:
        print(json.dumps(host.leftovers(), indent=1))
        return 0
    log = (lambda m: print(f"tcpeval: {m}", file=sys.stderr)) if not args.quiet else None
    try:
        with host.HostLock(args.lock_timeout, log=log):
            removed = host.cleanup_stale(holding_lock=True, log=log)
    except BackendError:
        # someone is mid-run: still remove what belongs to dead owners
        removed = host.cleanup_stale(holding_lock=False, log=log)
    print(f"removed {len(removed)} namespace(s)" + (f": {', '.join(removed)}" if removed else ""))
    return 0


# The kernel's default input backlog, at which a pair's slow start at 6.2 ms or more spoils
# attempts (docs/fidelity.md, "The input backlog")
DEFAULT_INPUT_BACKLOG = 1000


def _input_backlog_note(ceil, runs: list) -> str:
    """A line for `tcpeval plan` where the calibrated host keeps the kernel's default input
    backlog and the campaign has runs of several flows: on 2026-12-07 every one of seven
    spoiled attempts of a 1.2-h findings sitting (25 min) had frames dropped entering the
    switch so. The backend never changes a host-wide setting: the reviewer may."""
    backlog = ((ceil.calibration or {}).get("key") or {}).get("netdev_max_backlog")
    several = sum(len(run.flows) > 1 for run in runs)
    if backlog is None or backlog > DEFAULT_INPUT_BACKLOG or not several:
        return ""
    return (f"  note: this host's net.core.netdev_max_backlog is {backlog}; {several} run(s) of several flows may "
            "lose frames entering the switch in a slow start and run again (docs/fidelity.md, 'The input "
            "backlog'). `sysctl -w net.core.netdev_max_backlog=10000`, then `make calibrate`, avoids that")


def cmd_plan(args) -> int:
    """Runs, traffic time and wall time of a campaign on this host, with the time-dilation
    factors its runs would get; the cells a campaign plans but does not run."""
    try:
        design = spec.load_design(args.design)
        runs = spec.expand(design, args.campaign, args.backend)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    if args.faithful_rate is not None:
        try:
            ceil = planning.given_ceiling(args.faithful_rate)
        except ValueError as err:
            raise UserError(str(err)) from None
    else:
        ceil = planning.ceiling(args.backend)
    if any(n < 1 for n in args.nodes):
        raise UserError(f"--nodes: each count must be at least 1, got {args.nodes}")
    if args.paths and not args.by_finding:
        raise UserError("--paths: only with --by-finding (the first round's run paths, finding by finding)")
    if args.hours is not None and not args.by_finding:
        raise UserError("--hours: only with --by-finding (the findings whose runs fit in that wall time)")
    if args.hours is not None and args.hours <= 0:
        raise UserError(f"--hours: a wall time in hours above 0, got {args.hours:g}")
    if args.by_finding:
        return _plan_by_finding(args, design, runs, ceil)
    rows: dict[str, dict] = {}
    walls, longest, demand_walls = [], [], []
    for cond in runs:
        p = planning.plan_run(cond, ceil)
        if spec.on_demand(design, args.campaign, cond):
            demand_walls.append(p.max_wall_s)   # only if an undecided finding asks (tcpeval next-runs)
            continue
        walls.append(p.wall_s)
        longest.append(p.max_wall_s)
        row = rows.setdefault(cond.criterion, {"runs": 0, "traffic": 0.0, "wall": 0.0, "stopping": 0,
                                                "factors": Counter(), "refused": Counter()})
        row["runs"] += 1
        row["traffic"] += p.traffic_s
        row["wall"] += p.wall_s
        row["stopping"] += cond.stop is not None
        if p.factor is None:
            row["refused"][p.refused] += 1
        else:
            row["factors"][p.factor] += 1
    print(f"campaign {args.campaign} on backend {args.backend}; {ceil.source}")
    if note := _input_backlog_note(ceil, runs):
        print(note)
    if ceil.calibration:
        from tcpeval.backends.emulated import fell_behind
        behind = fell_behind.entries(ceil.calibration)
        if behind:
            paths = sorted({(e["flows"], e["rtt_ms"], e["factor"]) for e in behind})
            print(f"  this host fell behind on {len(paths)} physical path(s) under this calibration "
                  f"({', '.join(f'{n} flow(s) at {r:g} ms, x{k}' for n, r, k in paths)}): runs there "
                  f"start a factor slower, as planned here ({fell_behind.path()})")
    print(f"  {'criterion':16s} {'runs':>5s} {'traffic h':>10s} {'wall h':>9s}  factors (runs)")
    for name, row in rows.items():
        factors = ", ".join(f"x{k}: {n}" for k, n in sorted(row["factors"].items()))
        print(f"  {name:16s} {row['runs']:5d} {row['traffic'] / 3600:10.2f} {row['wall'] / 3600:9.2f}  {factors}")
        for why, n in row["refused"].items():
            print(f"  {'':16s} {n} run(s) refused: {why}")
    total_traffic = sum(r["traffic"] for r in rows.values())
    total_wall = sum(r["wall"] for r in rows.values())
    print(f"  {'total':16s} {len(walls):5d} {total_traffic / 3600:10.2f} {total_wall / 3600:9.2f}  "
          f"(wall: traffic x factor + ~{planning.RUN_OVERHEAD_S:.0f} s per run)")
    stopping = sum(r["stopping"] for r in rows.values())
    if stopping:
        print(f"  {stopping} precision-driven run(s) planned at the length their rule is expected to need "
              f"(at least {planning.STOP_FLOOR_S:g} virtual s, the Mathis rate's time for their loss events), "
              "at most their duration: docs/precision.md")
    if demand_walls:
        print(f"  {'on demand':16s} {len(demand_walls):5d} {'':>10s} {sum(demand_walls) / 3600:9.2f}  at most: the "
              "repetitions beyond the first, for the cells that keep a finding undecided (tcpeval next-runs)")
        deferred = spec.deferred_cells(design, args.campaign, args.backend)
        if deferred:
            print(f"  {'':16s} {'':5s} {'':>10s} {'':>9s}  and {len(deferred)} cell(s) the first round defers: "
                  "rivals the response model ranks behind the contenders of a best/worst finding (first_round)")
    show_most = bool(demand_walls) or longest != walls
    print("  wall time of the network runs on N nodes (one run per node at a time; analysis not included):")
    print(f"  {'nodes':>7s} {'wall h':>9s} {'days':>7s}" + (f" {'at most h':>10s}" if show_most else ""))
    for n in args.nodes:
        h = planning.makespan_s(walls, n) / 3600
        most = (f" {(planning.makespan_s(longest, n) + planning.makespan_s(demand_walls, n)) / 3600:10.2f}"
                if show_most else "")
        print(f"  {n:7d} {h:9.2f} {h / 24:7.2f}{most}")
    unrun = spec.not_run(design, args.campaign)
    if unrun:
        print(f"  planned, not run: {len(unrun)} cell(s) whose run-length rule needs more than its max_s "
              "(the claims that read them are undecided at this budget, unless a slice runs them capped):")
        # a slice may run them after all (findings-low-loss: each for at most max_s)
        in_slice = {spec.cell_key(spec.cell_of(run)): run.campaign
                    for run in spec.family_cells(design, args.campaign, args.backend)[0]}
        for c in unrun:
            pair = c["variant"] + (f"+{c['second']}" if c["second"] else "")
            where = in_slice.get(spec.cell_key(c))
            print(f"    {c['criterion']} {pair} rtt {c['rtt_ms']:g} ms drop {c['drop']:g}: "
                  f"needs {c['needed_s'] / 60:.0f} min, max {c['max_s'] / 60:.0f}"
                  + (f"; slice {where} runs it capped" if where else ""))
    return 0


def _plan_by_finding(args, design: dict, runs: list, ceil) -> int:
    """`tcpeval plan --by-finding`: the first round finding by finding, the cheapest first
    (planning.by_finding), with the wall time on one node when each finding's cells have all
    run; with --paths, only the run paths still to run, a finding's on one line (what
    `make findings FINDINGS_HOURS=H` runs, line by line, until its hours are spent)."""
    from tcpeval import paths

    claims = spec.claims_of(design, args.campaign)
    if not claims:
        raise UserError(f"--by-finding: campaign {args.campaign!r} has no findings (cells_from_claims); "
                        "it runs a grid, not the findings' cells")
    first = [run for run in runs if not spec.on_demand(design, args.campaign, run)]
    plans = {id(run): planning.plan_run(run, ceil) for run in first}
    refused = [run for run in first if plans[id(run)].factor is None]
    if refused:
        raise UserError(f"run {paths.run_dir(refused[0], args.raw_dir)}: refused on this host "
                        f"({plans[id(refused[0])].refused}); --by-finding plans runs this host can run")
    not_run = spec.not_run(design, args.campaign)
    blocked_claims = [c for c in claims if any(findings.needed(cell, [c]) for cell in not_run)]
    blocked = frozenset(c["id"] for c in blocked_claims)
    one_way = frozenset(c["id"] for c in blocked_claims if findings.only_failure_decidable(c))
    ran = {id(run) for run in first if Path(paths.trace_path(run, args.raw_dir)).exists()}
    steps = planning.by_finding(claims, first, lambda run: plans[id(run)].wall_s, spec.cell_of,
                                lambda run: id(run) in ran, blocked)
    budget_s = math.inf if args.hours is None else args.hours * 3600
    fits = [step for step in steps if step.by_s <= budget_s]
    if args.paths:
        for step in fits:
            if step.runs:
                print(" ".join(paths.trace_path(run, args.raw_dir) for run in step.runs))
        if len(fits) < len(steps):
            print(f"tcpeval plan: {len(fits)} of {len(steps)} findings' runs fit in {args.hours:g} h "
                  f"({ceil.source})", file=sys.stderr)
        return 0
    print(f"campaign {args.campaign} on backend {args.backend}; {ceil.source}")
    if note := _input_backlog_note(ceil, first):
        print(note)
    print(f"  the first round finding by finding, cheapest first: {len(first)} runs, {len(ran)} already run "
          f"({args.raw_dir}); 'by h' is the wall time on one node when every cell the finding reads has "
          "run once (some need further repetitions to be decided: tcpeval next-runs)")
    print(f"  {'finding':34s} {'cells':>5s} {'new runs':>8s} {'wall h':>7s} {'by h':>6s}")
    for step in steps:
        mark = ""
        if step.claim in one_way:
            mark = "  reads cells planned, not run: at this budget it can only be found not to hold"
        elif step.blocked:
            mark = "  reads cells planned, not run: undecided at this budget"
        over = "  (beyond --hours)" if step.by_s > budget_s else ""
        print(f"  {step.claim:34s} {step.cells:5d} {len(step.runs):8d} {step.wall_s / 3600:7.2f} "
              f"{step.by_s / 3600:6.2f}{mark}{over}")
    if args.hours is not None:
        print(f"  in {args.hours:g} h: {len(fits)} of {len(steps)} findings have all their cells run once")
    ordered = {step.claim for step in steps}
    left = [c["id"] for c in claims if c["id"] not in ordered]
    if left and spec.slice_of(design, args.campaign):
        print(f"  left out: {len(left)} findings that read none of this slice's first-round runs")
    elif left:
        print(f"  left out, no first-round run reads them: {', '.join(left)} (their cells are planned, "
              "not run: `tcpeval plan` lists them)")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("plan", help="a campaign's runs, traffic and wall time on this host, "
                                    "with the time-dilation factors its runs get")
    p.add_argument("--campaign", default="smoke")
    p.add_argument("--backend", default="emulated", choices=["emulated", "testbed"])
    p.add_argument("--design", default=None, help="design file (default config/design.yaml)")
    p.add_argument("--nodes", type=int, nargs="+", default=[1], metavar="N",
                   help="node counts to plan for, e.g. --nodes 1 8 64 (default 1)")
    p.add_argument("--faithful-rate", default=None, metavar="RATE",
                   help="plan for nodes that carry RATE faithfully (e.g. 10G) instead of this host's calibration")
    p.add_argument("--by-finding", action="store_true",
                   help="a findings campaign's first round finding by finding, the cheapest first, with the "
                        "wall time when each finding's cells have all run (one node)")
    p.add_argument("--hours", type=float, default=None, metavar="H",
                   help="with --by-finding: the findings whose cells have all run within H hours of wall time")
    p.add_argument("--paths", action="store_true",
                   help="with --by-finding: print only the run paths still to run, one finding's per line")
    p.add_argument("--raw-dir", default="data/raw", help="root of the run paths (default data/raw)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="perform one run (a design run path, or an ad-hoc condition)",
                       description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", help="run path data/raw/<backend>/.../trace.json (from the design)")
    p.add_argument("--design", default=None, help="design file (default config/design.yaml)")
    p.add_argument("--raw-dir", default="data/raw", help="root of the run paths (default data/raw)")
    p.add_argument("--backend", default="emulated", help="emulated | testbed (ad-hoc runs)")
    p.add_argument("--variant", action="append", help="a flow's variant (repeat for a second flow)")
    p.add_argument("--flows", help="flows as a comma-separated list, e.g. bic,reno")
    p.add_argument("--start", help="start offsets in s per flow, e.g. 0,10")
    p.add_argument("--rtt", type=float, help="RTT setting in ms (e.g. 6.2)")
    p.add_argument("--drop", type=float, help="per-packet drop probability (e.g. 1e-5)")
    p.add_argument("--duration", type=float, help="run duration in s")
    p.add_argument("--out", help="run directory of an ad-hoc run")
    p.add_argument("--precision", type=float, default=None, metavar="H",
                   help="end the run once the 95 %% intervals of its mean and quartile throughput "
                        "are within H of them (e.g. 0.05; tcpeval.precision), at the latest after "
                        "--duration s")
    p.add_argument("--min-loss-events", type=int, default=None, metavar="N",
                   help="with --precision: not before N loss events")
    p.add_argument("--min-duration", type=float, default=None, metavar="S",
                   help="with --precision: not before S s")
    p.add_argument("--rate", help="bottleneck rate (5G, 9.5gbit, 500M); default: calibrated host rate")
    p.add_argument("--buffer", help="bottleneck buffer (4M, 16MiB, bytes, or 'bdp' = one BDP, the default)")
    p.add_argument("--ecn", metavar="K", help="emulated: mark CE on ECN-capable frames that find K bytes queued "
                                               "(30k; the link engine; endpoints ask for ECN)")
    p.add_argument("--ecn-queues", type=int, choices=[1, 2], default=None,
                   help="with --ecn: 2 gives the flows without ECN a drop-tail queue of their own (DRR between)")
    p.add_argument("--stop", help="stop times in s per flow, e.g. -,20 ('-': to the end)")
    p.add_argument("--impl", default="port", choices=["port", "native", "bpf"],
                   help="port: the 3.16 port; native: the host kernel's (e.g. bbr); bpf: your own --object")
    p.add_argument("--object", help="impl bpf: a BPF struct_ops object (.bpf.o); --variant is its .name")
    p.add_argument("--seed", type=lambda s: int(s, 0), default=None, help="drop generator seed")
    p.add_argument("--interval", type=float, default=0.1, help="sample interval in s (default 0.1)")
    p.add_argument("--background-loss", type=float, default=0.0,
                   help="independent background loss per packet (the paper's ring: ~2.2e-8)")
    p.add_argument("--hz", type=int, default=250, help="jiffies rate emulated by the ports")
    p.add_argument("--port-as", choices=["struct_ops", "kmod"], default=None,
                   help="emulated: load the 3.16 ports as BPF struct_ops (the default) or as kernel "
                        "modules (kernels that load modules; sets $TCPEVAL_PORT_AS)")
    p.add_argument("--dilation", default=None, metavar="auto|K",
                   help="time dilation (emulated): auto (default) runs a rate above what the host "
                        "carries faithfully k times slower, with the smallest k that fits; K forces "
                        "a factor, 1 forbids dilation (testbed: ignored, k = 1)")
    p.add_argument("--stack", action="append", metavar="NAME=VALUE",
                   help="endpoint sysctl override, e.g. net.ipv4.tcp_recovery=1")
    p.add_argument("--force", action="store_true", help="replace an existing trace")
    p.add_argument("--keep-existing", action="store_true",
                   help="if the run's trace exists, keep it and exit 0 (it is complete: traces are "
                        "written whole or not at all); the workflow's rule runs this way")
    p.add_argument("--testbed", help="testbed description (backend testbed; default config/testbed.yaml "
                                     "or $TCPEVAL_TESTBED)")
    p.add_argument("--lock-timeout", type=float, default=common.LOCK_TIMEOUT_S, help="wait this long for the host lock")
    p.add_argument("--attempts", type=int, default=None,
                   help="emulated: run a condition again when the host (not the setting) spoiled "
                        "it -- stalled ACK path, skipped congestion-control hooks -- up to this "
                        f"many attempts in all, pausing {', '.join(f'{pause:g}' for pause in RETRY_PAUSES_S)} s "
                        f"between them (default {RUN_ATTEMPTS}; every attempt is in the trace)")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("calibrate", help="measure what this host carries on the emulated path (cached)")
    p.add_argument("--duration", type=float, default=4.0, help="seconds per calibration point")
    p.add_argument("--design", help="measure at the RTTs of this design's responsiveness criterion "
                                    "(default config/design.yaml)")
    p.add_argument("--show", action="store_true", help="print the cached calibration")
    p.add_argument("--if-missing", action="store_true",
                   help="measure only when no calibration of this host, kernel and build is cached")
    p.add_argument("--lock-timeout", type=float, default=common.LOCK_TIMEOUT_S)
    p.add_argument("--port-as", choices=["struct_ops", "kmod"], default=None,
                   help="how the runs that measure the ports' ceiling load them (sets $TCPEVAL_PORT_AS)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("cleanup", help="remove leftovers (tev* namespaces, processes) of dead runs")
    p.add_argument("-n", "--dry-run", action="store_true", help="only list what exists")
    p.add_argument("--lock-timeout", type=float, default=5.0)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_cleanup)

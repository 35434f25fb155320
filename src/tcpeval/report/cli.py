"""`tcpeval figure|table|macros|claims|paper`: tidy tables -> figures, LaTeX, the manuscript.

    tcpeval figure NAME --results results/emulated/smoke [--rtt 6.2] [--out-dir DIR]
    tcpeval table table1 --cc-params cc_params.json --out table1.tex
    tcpeval table table2 --results R --out table2.tex
    tcpeval claims --results R [--claims paper/claims.yaml] --out-tex claims.tex --out-json claims.json
    tcpeval macros --results R --claims-json claims.json --out macros.tex
    tcpeval validation --results results/emulated/validation --fig-dir D --out-tex T
    tcpeval dilation-check --results results/emulated/dilation --fig-dir D --out-tex T [--table --strict]
    tcpeval stopping-check --results results/emulated/stopping --fig-dir D --out-tex T [--table --strict]
    tcpeval paper build --results R [--paper-dir paper]

The campaign and backend default to the last two parts of --results
(results/<backend>/<campaign>). Flagged runs are left out unless --include-flagged.

Heavy imports (pandas, matplotlib) stay inside the commands: every `tcpeval` invocation
builds all parsers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tcpeval import spec
from tcpeval.errors import UserError
from tcpeval.report import latex

FIGURE_NAMES = ("responsiveness", "utilisation", "convergence", "flows")


def _context(args):
    """(dataset, design, campaign, backend) from the common options."""
    from tcpeval.analysis import tables

    results = Path(args.results)
    backend = args.backend or results.parent.name
    campaign = args.campaign or results.name
    try:
        design = spec.load_design(args.design)
        ds = tables.load(results, design, campaign, backend, include_flagged=args.include_flagged)
    except spec.SpecError as err:
        raise UserError(str(err)) from None
    except FileNotFoundError as err:
        raise UserError(str(err)) from None
    warn_stale(ds, results)
    return ds, design, campaign, backend


def warn_stale(ds, results) -> None:
    """Name the traces left out for holding another condition than the design's."""
    if ds.stale:
        print(f"tcpeval: {results}: {len(ds.stale)} trace(s) left out, run under another condition than the "
              "design now gives their path; run each again (tcpeval run --force <its trace>) or restore the "
              "design:", file=sys.stderr)
        for r in ds.stale:
            print(f"  {r['run']}: {r['reason']}", file=sys.stderr)


def _dataset_if_run(args):
    """The dataset of --results (_context), or None where its campaign has no tables yet."""
    return _context(args)[0] if (Path(args.results) / "runs.parquet").exists() else None


def cmd_figure(args) -> int:
    from tcpeval.report import figures

    ds, design, campaign, backend = _context(args)
    out_dir = Path(args.out_dir or Path(args.results) / "figures")
    names = FIGURE_NAMES if args.name == "all" else (args.name,)
    for name in names:
        if name == "responsiveness":
            rtts = [args.rtt] if args.rtt is not None else sorted(ds.expected_in("responsiveness")["rtt_ms"].unique())
            for rtt in rtts:
                res = figures.draw(name, ds, out_dir, rtt_ms=float(rtt))
                print(" ".join(str(f) for f in res["files"]))
        else:
            res = figures.draw(name, ds, out_dir)
            print(" ".join(str(f) for f in res["files"]))
    return 0


def cmd_table(args) -> int:
    from tcpeval.analysis import tables as T

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.which == "table1":
        if not args.cc_params:
            raise UserError("table1 needs --cc-params (the output of `tcpeval cc params --json`)")
        try:
            data = json.loads(Path(args.cc_params).read_text())
            # the design's own algorithms (the paper's six), not every port the project has
            out.write_text(latex.table1(data, T.VARIANT_LABELS, only=spec.load_design(args.design).get("variants")))
        except spec.SpecError as err:
            raise UserError(str(err)) from None
        except (OSError, ValueError) as err:
            raise UserError(f"{args.cc_params}: {err}") from None
    else:
        ds, design, campaign, backend = _context(args)
        used = ds.runs.groupby("criterion").size().to_dict() if len(ds.runs) else {}
        out.write_text(latex.table2(T.table2(design, "paper", backend), T.table2(design, campaign, backend),
                                    campaign, used, T.VARIANT_LABELS, T.CRITERION_LABELS))
    print(out)
    return 0


def cmd_claims(args) -> int:
    from tcpeval.analysis import tables
    from tcpeval.report import claims as C

    ds, design, campaign, backend = _context(args)
    try:
        claims = C.load_claims(args.claims)
        verdicts = C.check_all(claims, ds, spec.not_run(design, campaign))
    except (OSError, C.ClaimError) as err:
        raise UserError(str(err)) from None
    def load(name: str):
        """Another campaign's results beside these (None where it has none)."""
        where = Path(args.results).parent / name
        if not (where / "runs.parquet").exists():
            return None
        try:
            other = tables.load(where, design, name, backend, include_flagged=args.include_flagged)
            warn_stale(other, where)
            return other
        except spec.SpecError as err:
            raise UserError(f"{where}: {err}") from None

    # the other campaigns' verdicts (--also), where they have results
    columns, absent, at_scale = {campaign: verdicts}, [], {campaign: C.at_paper_scale(ds, claims)}
    scales, datasets = {campaign: C.campaign_scale(ds)}, {campaign: ds}
    for other in args.also or []:
        other_ds = load(other)
        if other_ds is None:
            absent.append(other)
            continue
        try:
            columns[other] = C.check_all(claims, other_ds, spec.not_run(design, other))
        except C.ClaimError as err:
            raise UserError(f"{Path(args.results).parent / other}: {err}") from None
        at_scale[other] = C.at_paper_scale(other_ds, claims)
        scales[other] = C.campaign_scale(other_ds)
        datasets[other] = other_ds
    # and the slices of a findings campaign found beside them, judged together
    pooled = _pool_slices(claims, design, backend, datasets, columns, at_scale, scales, load)
    absent = [name for name in absent if name not in pooled]
    # the campaigns at the paper's scale lead, the findings campaigns first among them (a
    # findings campaign judged on its slices' runs before each slice); the manuscript's
    # verdict of a finding is the first of them that has its cells
    order = sorted(columns, key=lambda name: (not at_scale[name], not name.startswith("findings"),
                                              name not in pooled))
    scaled = [n for n in order if at_scale[n]]
    lead = C.lead(columns, campaign, scaled)
    Path(args.out_tex).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out_tex).write_text(C.table(lead, C.scale_note(ds, claims), built=campaign))
    if args.out_campaigns_tex:
        # a slice's verdicts are in its findings campaign's column (the note names the
        # slices; the scale table keeps a row each): one column a campaign fits the page
        sliced = {name for parent, parts in pooled.items() for name in parts if name != parent}
        shown = [n for n in order if n not in sliced]
        Path(args.out_campaigns_tex).write_text(C.by_campaign({n: columns[n] for n in shown}, absent,
                                                              [n for n in scaled if n in shown],
                                                              {n: scales[n] for n in order}, pooled))
    if args.out_json:
        Path(args.out_json).write_text(json.dumps([v.__dict__ for v in lead], indent=1) + "\n")
    print(C.budget_table(lead), end="")
    return 0


def _pool_slices(claims, design, backend, datasets, columns, at_scale, scales, load=None) -> dict[str, list[str]]:
    """A findings campaign with slices (`slice_of`) that have results gets the column of
    its verdicts so far: every finding judged on the runs of all its slices (and its own)
    together, against its whole matrix, so a finding that reads a cell no slice has run
    holds nowhere. A slice not among ``datasets`` is read with ``load(name)`` (None: no
    results). Fills the column in; returns {campaign: the campaigns pooled}."""
    from tcpeval.analysis import tables
    from tcpeval.report import claims as C

    pooled = {}
    for parent in dict.fromkeys(spec.slice_of(design, name) for name in list(datasets)):
        if parent is None:
            continue
        family = [parent, *spec.slices(design, parent)]
        for name in family:
            if name not in datasets and load is not None and (found := load(name)) is not None:
                datasets[name] = found
        parts = [name for name in family if name in datasets]
        if parts == [parent]:
            continue
        in_slices, nowhere = spec.family_cells(design, parent, backend)
        ds = tables.pool([datasets[name] for name in parts], tables.expected_runs(design, parent, backend, also=in_slices))
        columns[parent] = C.check_all(claims, ds, nowhere)
        at_scale[parent] = C.at_paper_scale(ds, claims)
        scales[parent] = C.campaign_scale(ds)
        pooled[parent] = parts
    return pooled


def cmd_next_runs(args) -> int:
    """A sequential campaign's next round: the run paths (trace.json) of the next repetition
    of every cell an open finding reads, one per line on stdout; what is open on stderr."""
    from tcpeval import paths
    from tcpeval.report import claims as C

    ds, design, campaign, backend = _context(args)
    try:
        claims = C.load_claims(args.claims)
        runs = spec.expand(design, campaign, backend)
        not_run = spec.not_run(design, campaign)
        verdicts = C.check_all(claims, ds, not_run)
    except (OSError, C.ClaimError, spec.SpecError) as err:
        raise UserError(str(err)) from None

    nxt = C.next_round(claims, verdicts, runs, lambda run: Path(paths.trace_path(run, args.raw_dir)).exists(),
                       not_run)
    still = [v for v in verdicts if v.verdict in C.OPEN]
    print(f"{campaign}: {len(verdicts) - len(still)} of {len(verdicts)} findings decided on {len(ds.runs)} runs; "
          f"{len(still)} open; next round: {len(nxt)} run(s)"
          + (f" (repetition {', '.join(str(r) for r in sorted({run.rep for run in nxt}))})" if nxt else ""),
          file=sys.stderr)
    for run in nxt:
        print(paths.trace_path(run, args.raw_dir))
    return 0


def cmd_response(args) -> int:
    from tcpeval import quantity, response
    from tcpeval.report import claims as C

    try:
        link_bps = quantity.rate(args.rate, "--rate")
    except ValueError as err:
        raise UserError(str(err)) from None
    if args.claims:
        try:
            claims = C.load_claims(args.claims)
            design = spec.load_design(args.design)
            conditions = spec.expand(design, args.campaign, "emulated")
        except (OSError, C.ClaimError, spec.SpecError) as err:
            raise UserError(str(err)) from None
        for cid, verdict, text in C.model_verdicts(claims, C.grid_cells(conditions, link_bps / 1e9)):
            plain = text.replace("\\,", " ").replace("$\\pm$", "+-").replace("\\%", "%")
            print(f"{verdict:24s} {cid}: {plain}")
        return 0
    if args.rtt is None or args.drop is None:
        raise UserError("give --rtt and --drop (one condition), or --claims (every finding)")
    for variant in args.variant or response.VARIANTS:
        try:
            r = response.response(variant, args.rtt, args.drop, link_bps)
        except ValueError as err:
            raise UserError(str(err)) from None
        limit = "link-limited" if r.link_limited else f"{r.loss_events} loss events"
        print(f"{variant:10s} {r.throughput_bps / 1e9:6.2f} Gbit/s  mean window {r.mean_window:9.1f} segments  ({limit})")
    return 0


def cmd_macros(args) -> int:
    from tcpeval.report import claims as C
    from tcpeval.report import macros

    ds, design, campaign, backend = _context(args)
    verdicts = None
    if args.claims_json:
        verdicts = [C.Verdict(**v) for v in json.loads(Path(args.claims_json).read_text())]
    m = macros.build(ds, design, campaign, backend, verdicts, revision=args.revision)
    print(m.write(args.out))
    return 0


def cmd_validation(args) -> int:
    from tcpeval.report import validation

    s = validation.write(_dataset_if_run(args), Path(args.fig_dir), Path(args.out_tex))
    print(json.dumps(s, default=str))
    return 0


def _method_check(args, module, not_run: str, failed, **write_kw) -> int:
    """A method check of the manuscript (dilation, stopping): its figure, paragraph and
    comparisons; --table prints them, --strict exits 1 where failed(summary) says so and
    fails when the campaign has no tables (not_run: what to run)."""
    results = Path(args.results)
    campaign = args.campaign or results.name
    ds = _dataset_if_run(args)
    if ds is None and args.strict:
        raise UserError(f"{results / 'runs.parquet'}: {not_run}")
    out = module.write(ds, campaign if ds is not None else None, Path(args.fig_dir),
                       Path(args.out_tex), Path(args.out_json) if args.out_json else None, **write_kw)
    s = out["summary"]
    if args.table:
        print(module.table(out["results"]))
        if out.get("replays"):
            print("\n" + module.replay_table(out["replays"]))
        print(f"\n{s['agree']} of {s['judged']} judged comparisons agree ({s['not_judged']} not judged); "
              f"{args.out_tex}")
    else:
        print(json.dumps(s, default=str))
    return 1 if args.strict and (failed(s) or not s["judged"]) else 0


def cmd_dilation_check(args) -> int:
    from tcpeval.report import dilation_check

    return _method_check(args, dilation_check,
                         "no tables of the cross-validation; run `make validate-dilation` "
                         "(campaign dilation, dilation-quick or dilation-long)",
                         lambda s: s["agree"] < s["judged"])


def cmd_stopping_check(args) -> int:
    from tcpeval.report import stopping_check

    return _method_check(args, stopping_check,
                         "no tables of the stopping check; run `make validate-stopping` "
                         "(campaign stopping or stopping-quick)", _stopping_failed,
                         design=spec.load_design(args.design))


def _stopping_failed(s: dict) -> bool:
    """Every rule run against its long run, and the replayed coverage not clearly below
    the rule's (its Wilson interval reaching 95 %)."""
    replay = s.get("replay") or {}
    short = [c for c in replay.values() if c["judged"] and c["share_high"] < 0.95]
    return s["agree"] < s["judged"] or s["not_judged"] > 0 or bool(short)


def cmd_paper(args) -> int:
    from tcpeval.report import paper

    try:
        pdf = paper.build(Path(args.results), Path(args.paper_dir), latex=not args.stage_only)
    except paper.PaperError as err:
        raise UserError(str(err)) from None
    print(pdf)
    return 0


def cmd_report(args) -> int:
    """The report of any design's campaign: HTML and PDF from the gathered tables."""
    from tcpeval.report import design_report

    try:
        design = spec.load_design(args.design)
        out = design_report.write(design, args.campaign, args.backend, Path(args.results),
                                  Path(args.out_dir or Path(args.results) / "report"),
                                  include_flagged=args.include_flagged)
    except (spec.SpecError, FileNotFoundError) as err:
        raise UserError(str(err)) from None
    print(" ".join(str(p) for p in out))
    return 0


def _method_check_arguments(p, stem: str, strict_when: str) -> None:
    """What the method checks (dilation-check, stopping-check) take alike."""
    p.add_argument("--fig-dir", required=True, help=f"where {stem}.{{pdf,png,tex}} go")
    p.add_argument("--out-tex", required=True, help="the manuscript's paragraph")
    p.add_argument("--out-json", help="every comparison and the summary")
    p.add_argument("--table", action="store_true", help="print the comparisons as a table")
    p.add_argument("--strict", action="store_true", help=f"exit 1 unless {strict_when}")


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help="HTML + PDF report of any design's campaign (tables per criterion, "
                                      "bar plots per factor, a timeline per condition)")
    p.add_argument("--design", required=True, help="the design file")
    p.add_argument("--campaign", required=True)
    p.add_argument("--backend", default="emulated")
    p.add_argument("--results", required=True, help="the campaign's gathered tables (results/<backend>/<design>/<campaign>)")
    p.add_argument("--out-dir", help="default RESULTS/report")
    p.add_argument("--include-flagged", action="store_true", help="use runs whose fidelity verdict is not ok")
    p.set_defaults(func=cmd_report)

    def common(p):
        p.add_argument("--results", required=True, help="campaign results, e.g. results/emulated/smoke")
        p.add_argument("--design", help="design file (default config/design.yaml)")
        p.add_argument("--campaign", help="default: last part of --results")
        p.add_argument("--backend", help="default: second-to-last part of --results")
        p.add_argument("--include-flagged", action="store_true",
                       help="use runs whose fidelity verdict is not ok (default: exclude and count)")

    p = sub.add_parser("figure", help="draw a figure (PDF + PNG + LaTeX snippet) from the tidy tables")
    p.add_argument("name", choices=FIGURE_NAMES + ("all",))
    p.add_argument("--rtt", type=float, help="responsiveness: only this RTT (ms); default every RTT of the campaign")
    p.add_argument("--out-dir", help="default RESULTS/figures")
    common(p)
    p.set_defaults(func=cmd_figure)

    p = sub.add_parser("validation", help="the validation campaign's figure and paragraph (Reno vs the "
                                          "Mathis model and the kernel's Reno); 'not run' without results")
    p.add_argument("--fig-dir", required=True, help="where validation.{pdf,png,tex} go")
    p.add_argument("--out-tex", required=True, help="the manuscript's paragraph")
    common(p)
    p.set_defaults(func=cmd_validation)

    p = sub.add_parser("dilation-check", help="the cross-validation of time dilation (campaign dilation, "
                                              "dilation-quick or dilation-long): figure, paragraph, comparisons; 'not run' "
                                              "without results")
    _method_check_arguments(p, "dilation-check", "every judged comparison agrees (and at least one is judged)")
    common(p)
    p.set_defaults(func=cmd_dilation_check)

    p = sub.add_parser("stopping-check", help="a precision-driven run's interval against an independent run "
                                              "five times longer (campaign stopping or stopping-quick): "
                                              "figure, paragraph, comparisons; 'not run' without results")
    _method_check_arguments(p, "stopping-check", "every condition is judged and every comparison agrees")
    common(p)
    p.set_defaults(func=cmd_stopping_check)

    p = sub.add_parser("table", help="LaTeX Table I (CC parameters) or Table II (test overview)")
    p.add_argument("which", choices=("table1", "table2"))
    p.add_argument("--out", required=True)
    p.add_argument("--cc-params", help="table1: JSON from `tcpeval cc params --json`")
    p.add_argument("--results", help="table2: campaign results directory")
    p.add_argument("--design")
    p.add_argument("--campaign")
    p.add_argument("--backend")
    p.add_argument("--include-flagged", action="store_true")
    p.set_defaults(func=cmd_table)

    p = sub.add_parser("claims", help="check the original study's findings on our data")
    common(p)
    p.add_argument("--claims", default="paper/claims.yaml")
    p.add_argument("--out-tex", required=True)
    p.add_argument("--out-json")
    p.add_argument("--also", action="append", metavar="CAMPAIGN",
                   help="another campaign (results beside --results) to check the claims on")
    p.add_argument("--out-campaigns-tex", help="the verdict of each claim per campaign (--also)")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("next-runs", help="a sequential campaign's next round (initial_repetitions): the run "
                                         "paths of one more repetition of each cell an undecided finding reads")
    common(p)
    p.add_argument("--claims", default="paper/claims.yaml")
    p.add_argument("--raw-dir", default="data/raw", help="root of the run paths (default data/raw)")
    p.set_defaults(func=cmd_next_runs)

    p = sub.add_parser("response", help="what the six 3.16 algorithms' response model gives: at one "
                                        "condition, or each finding's verdict at a campaign's grid")
    p.add_argument("--variant", action="append", help="one variant (repeatable; default: the six)")
    p.add_argument("--rtt", type=float, help="RTT in ms (one condition)")
    p.add_argument("--drop", type=float, help="per-packet drop probability (one condition)")
    p.add_argument("--rate", default="9.85G",
                   help="link rate in frames, e.g. 9.85G (default: the paper's, 9.5 Gbit/s of payload); with --claims only where a "
                        "condition of the campaign has none of its own")
    p.add_argument("--claims", help="check each finding on the model at --campaign's grid instead")
    p.add_argument("--campaign", default="paper", help="with --claims: whose grid (default: paper)")
    p.add_argument("--design", help="with --claims: the design (default: config/design.yaml)")
    p.set_defaults(func=cmd_response)

    p = sub.add_parser("macros", help="write the LaTeX macro file every number in the manuscript comes from")
    common(p)
    p.add_argument("--claims-json", help="verdicts from `tcpeval claims --out-json` (claim counts)")
    p.add_argument("--revision", help="override the analysis git revision printed in the PDF")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_macros)

    p = sub.add_parser("paper", help="stage the generated files into the paper and build the PDF")
    psub = p.add_subparsers(dest="paper_command", required=True, metavar="ACTION")
    b = psub.add_parser("build", help="copy RESULTS/{macros,tables,figures} into PAPER/generated, run latexmk")
    b.add_argument("--results", required=True)
    b.add_argument("--paper-dir", default="paper")
    b.add_argument("--stage-only", action="store_true", help="copy the generated files, do not run LaTeX")
    b.set_defaults(func=cmd_paper)

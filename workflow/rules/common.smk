# Configuration, the design, the campaign's runs, and the paths, constants and input
# functions the rule files share (those hold rules only).
import hashlib
import json
import os
import sys
from glob import glob
from pathlib import Path, PurePosixPath

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from tcpeval import paths, provenance, run_index, snakemake_signals, spec, trace
from tcpeval.report import paper as paper_stage

min_version("9.0")


configfile: "config/config.yaml"


# The schema holds every default (allow_missing, skip_bad, include_flagged, metrics, ...):
# validate() fills in what config.yaml and --config leave out, so rules read config[key].
validate(config, "../schemas/config.schema.yaml")


# Rules call the `tcpeval` CLI installed beside the Python that runs Snakemake (.venv/bin),
# whether or not that environment is activated.
envvars:
    "PATH",


os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


# `kill` stops the matrix after the running runs, whenever it arrives: Snakemake's own
# SIGTERM handler can deadlock on the main thread (tcpeval.snakemake_signals).
onstart:
    snakemake_signals.sigterm_handler_off_main_thread()


try:
    DESIGN = spec.load_design(config["design"])
    RUNS = spec.expand(DESIGN, config["campaign"], config["backend"])
except spec.SpecError as err:
    raise WorkflowError(str(err))

# what the backend can run, before anything runs
from tcpeval.backends import algorithms, planning  # noqa: E402

if algorithms.problems(RUNS, config["backend"]):
    raise WorkflowError("\n".join(algorithms.problems(RUNS, config["backend"])))


def code_hash() -> str:
    """Content hash of the code a trace's numbers pass through on their way to the paper
    (tcpeval's own modules, its analysis and its report; not the backends): every rule from
    the per-run metrics on passes it as a param, so that Snakemake's params trigger reruns
    them after a change of that code, as a changed input would (a manuscript rebuilt after
    every change is the new code's, never a mix)."""
    modules = ("*.py", "analysis/*.py", "report/*.py")
    return provenance.sources_hash(Path(spec.__file__).parent, modules)[:16]


CODE = code_hash()
BACKEND = config["backend"]
CAMPAIGN = config["campaign"]
RAW_DIR = config["raw_dir"]


def planned(run):
    """Whether the campaign runs this run: every run, except in a sequential campaign
    (initial_repetitions) a repetition beyond the first ones that `tcpeval next-runs` has
    not asked for (its trace does not exist). Any run path stays a valid target."""
    if not spec.on_demand(DESIGN, CAMPAIGN, run):
        return True
    return os.path.exists(paths.trace_path(run, RAW_DIR))


RUN_DIRS = [paths.run_dir(run, RAW_DIR) for run in RUNS if planned(run)]
TRACES = [f"{d}/{trace.TRACE_FILE}" for d in RUN_DIRS]
# The paper's design keeps results/<backend>/<campaign>; any other design's results live
# under its name, as its raw traces do (tcpeval.paths).
DESIGN_LABEL = spec.design_label(DESIGN)
SCOPE = "/".join(x for x in (BACKEND, DESIGN_LABEL, CAMPAIGN) if x)
RESULTS = f"{config['results_dir']}/{SCOPE}"
PAPER_DIR = config["paper_dir"]
PAPER_PDF = f"{PAPER_DIR}/main.pdf"
# The paper's design builds its manuscript; any other design its report (report.smk).
FINAL_TARGET = PAPER_PDF if DESIGN_LABEL is None else f"{RESULTS}/report/report.html"


# The path grammar (tcpeval.paths) doubles as the wildcard constraints.
wildcard_constraints:
    **paths.WILDCARD_CONSTRAINTS,


# ---- runs.smk: one job per run --------------------------------------------------------
# {scope}: <backend>[/<design>]/<campaign>;
# {rest}: <criterion>/<flows>/rtt../drop..[/factors]/rep<k> (tcpeval.paths.GRAMMAR)
RUN_PATTERN = paths.run_pattern(RAW_DIR)
RUN_INDEX = run_index.RunIndex(DESIGN, CAMPAIGN, BACKEND, RAW_DIR, runs=RUNS)
NODE_CEILING = planning.node_ceiling(config["node_faithful_rate"])


# An emulated run takes every local core (the total Snakemake was given); on a cluster,
# where Snakemake has no total, the job owns its node instead (profile slurm: --exclusive).
def _local_cores():
    """The cores Snakemake was given (workflow.cores), or 1 where it has no total (a
    cluster profile: there the job owns its node)."""
    try:
        return workflow.cores
    except WorkflowError:
        return 1


RUN_THREADS = _local_cores() if BACKEND == "emulated" else 1
TESTBED_OPT = f"--testbed {config['testbed']}" if BACKEND == "testbed" else ""


def condition_of_run(wildcards):
    """The condition a run job's path names: from the configured campaign's runs, else
    read back from the path (a run of another campaign, a target typed by its path;
    about 30 ms), None where the path names no run of the design."""
    run_dir = RUN_PATTERN.format(scope=wildcards.scope, rest=wildcards.rest)
    cond = RUN_INDEX.get(run_dir)
    if cond is not None:
        return cond
    try:
        return run_index.resolve_path(run_dir, DESIGN, RAW_DIR)
    except spec.SpecError:
        return None


def condition_digest(wildcards):
    """A short digest of the condition a run job's path names (its params: Snakemake reruns
    the job when the design changes the condition); "none" where the path names no run.
    """
    cond = condition_of_run(wildcards)
    if cond is None:
        return "none"
    return hashlib.sha256(
        json.dumps(cond.to_dict(), sort_keys=True).encode()
    ).hexdigest()[:16]


def run_time_limit_min(wildcards):
    """A cluster job's time limit (SLURM --time): the run's expected wall time with its
    time dilation, with a margin for retries (tcpeval.backends.planning). A path that
    names no run gets the shortest limit: its job fails at once, naming the nearest."""
    cond = condition_of_run(wildcards)
    return (
        planning.time_limit_min(cond, NODE_CEILING)
        if cond
        else planning.TIME_LIMIT_MIN_MIN
    )


def raw_dir_of(wildcards, output):
    """The raw directory a run's trace lands in: its path less <scope>/<rest>/trace.json."""
    depth = len(PurePosixPath(wildcards.scope, wildcards.rest).parts)
    return str(PurePosixPath(output.trace).parents[depth])


# ---- analysis.smk: traces -> tidy tables ----------------------------------------------
METRICS_PATTERN = paths.metrics_pattern(config["results_dir"])
SKIP_BAD = "--skip-bad" if config["skip_bad"] else ""
METRIC_OPTS = " ".join(f"--{key} {value}" for key, value in config["metrics"].items())
FLAGGED = "--include-flagged" if config["include_flagged"] else ""
# The campaign's tidy tables (metrics_gather), read by the figures, tables and reports.
TABLE_NAMES = ("runs", "flows", "samples")
TABLES = {name: f"{RESULTS}/{name}.parquet" for name in TABLE_NAMES}


def built(path):
    """Whether an output another invocation built exists: the one place the DAG reads
    the file system. The manuscript uses the other campaigns' tables, the validation and
    the dilation check where their own `make` targets built them, and declares them as
    inputs then, so a rebuilt one rebuilds what reads it; missing, they are not asked for
    (the text says that campaign has not been run). With allow_missing, the gather takes
    the traces that exist instead of running the rest."""
    return os.path.exists(path)


def gathered_run_dirs(wildcards=None):
    """The per-run output directories the gather concatenates: every run's (allow_missing
    false: the missing runs are run first), or those whose trace exists (true)."""
    dirs = RUN_DIRS
    if config["allow_missing"]:
        dirs = [d for d in RUN_DIRS if built(f"{d}/{trace.TRACE_FILE}")]
    return [paths.metrics_dir(d, RAW_DIR, config["results_dir"]) for d in dirs]


def gathered_tables(wildcards):
    """Named input of the gather: runs, flows, samples -> the per-run Parquet files."""
    dirs = gathered_run_dirs()
    return {
        "runs": [f"{d}/run.parquet" for d in dirs],
        "flows": [f"{d}/flows.parquet" for d in dirs],
        "samples": [f"{d}/samples.parquet" for d in dirs],
    }


def results_of(wildcards, input):
    """The campaign's results directory (--results): where its tables (input.runs) are."""
    return os.path.dirname(input.runs)


def dir_of(name):
    """A params function: the directory of output `name` (--out-dir, --fig-dir)."""
    return lambda wildcards, output: os.path.dirname(output[name])


# ---- figures.smk: tidy tables -> figures ----------------------------------------------
# Figs. 4-7 of the paper: one responsiveness/efficiency figure per RTT of the campaign
# (responsiveness-rtt<ms>); Figs. 8-10: one figure each.
FIG_DIR = f"{RESULTS}/figures"
RESP_RTTS = sorted(
    {paths.format_rtt(r.rtt_ms) for r in RUNS if r.criterion == "responsiveness"},
    key=float,
)
FIGURE_SUBCATEGORIES = {
    "responsiveness": "Responsiveness and efficiency",
    "utilisation": "Fairness",
    "convergence": "Convergence",
    "flows": "Fairness",
}
FIGURE_NAMES = [f"responsiveness-rtt{r}" for r in RESP_RTTS] + [
    "utilisation",
    "convergence",
    "flows",
]
FIGURE_FILES = [
    f"{FIG_DIR}/{name}.{ext}" for name in FIGURE_NAMES for ext in ("pdf", "tex")
]
# {figure}: responsiveness-rtt<ms> (any RTT of the grammar) or one of the other figures
FIGURE_CONSTRAINT = "|".join(
    [f"responsiveness-rtt(?:{paths.WILDCARD_CONSTRAINTS['rtt']})"]
    + [kind for kind in FIGURE_SUBCATEGORIES if kind != "responsiveness"]
)


def figure_kind(wildcards):
    """responsiveness-rtt6.2 -> responsiveness; utilisation -> utilisation."""
    return wildcards.figure.partition("-rtt")[0]


def figure_args(wildcards):
    """`tcpeval figure` arguments of one figure: its name, and --rtt for responsiveness."""
    kind, _, rtt = wildcards.figure.partition("-rtt")
    return f"{kind} --rtt {rtt}" if rtt else kind


def figure_subcategory(wildcards):
    """The report's subcategory of a figure."""
    return FIGURE_SUBCATEGORIES[figure_kind(wildcards)]


# ---- paper.smk: tables, macros, the reproduction check, the manuscript ----------------
PAPER_OUT = f"{RESULTS}/paper"
CC_SOURCES = sorted(glob("cc/src/*.c"))
# The other campaigns of the paper's matrix (those running its first criterion, and every
# slice of the findings campaign, whose runs its column pools): the reproduction section
# says which finding holds at which of them, from their tables where they exist (their
# own `make paper CAMPAIGN=...` builds them).
OTHER_CAMPAIGNS = [
    c
    for c in spec.campaign_names(DESIGN)
    if c != CAMPAIGN
    and ("responsiveness" in spec.criteria_of(DESIGN, c) or spec.slice_of(DESIGN, c))
]
VALIDATION_RESULTS = f"{config['results_dir']}/{BACKEND}/validation"


def other_campaign_tables(wildcards):
    """The tables `tcpeval claims --also` reads (the other campaigns' own results, beside
    this one's), where they exist: declared, so a rebuilt one rebuilds the claims."""
    tables = []
    for campaign in OTHER_CAMPAIGNS:
        results = PurePosixPath(RESULTS).parent / campaign
        if built(results / "runs.parquet"):
            tables += [str(results / f"{name}.parquet") for name in TABLE_NAMES]
    return tables


# The cross-validation of time dilation (`make validate-dilation`): the full campaign's
# tables where they exist, else the quick one's, else the long path's, else none (the
# paragraph then says so).
DILATION_CAMPAIGNS = ("dilation", "dilation-quick", "dilation-long")


def validation_tables(wildcards):
    """The validation campaign's tables when they exist (`make validation`), else none:
    the manuscript then says that campaign has not been run."""
    table = f"{VALIDATION_RESULTS}/runs.parquet"
    return [table] if CAMPAIGN == "validation" or built(table) else []


def first_results(campaigns):
    """The results directory of the first of these campaigns that is the current one or
    has its tables, else None (the method check's paragraph then says it was not run).
    """
    for name in campaigns:
        results = f"{config['results_dir']}/{BACKEND}/{name}"
        if CAMPAIGN == name or built(f"{results}/runs.parquet"):
            return results
    return None


def results_arg(campaigns):
    """--results of a method check: the first such campaign's results, or where the
    first campaign's would be."""
    return (
        first_results(campaigns) or f"{config['results_dir']}/{BACKEND}/{campaigns[0]}"
    )


def dilation_tables(wildcards):
    results = first_results(DILATION_CAMPAIGNS)
    return [f"{results}/runs.parquet", f"{results}/samples.parquet"] if results else []


# Stopped early is not stopped wrong (`make validate-stopping`): the full campaign's tables
# where they exist, else the quick one's, else none (the paragraph then says so).
STOPPING_CAMPAIGNS = ("stopping", "stopping-quick")


def stopping_tables(wildcards):
    results = first_results(STOPPING_CAMPAIGNS)
    return [f"{results}/runs.parquet", f"{results}/samples.parquet"] if results else []


def paper_dir_of(wildcards, input):
    """The manuscript's directory (input.main is its main.tex)."""
    return os.path.dirname(input.main)

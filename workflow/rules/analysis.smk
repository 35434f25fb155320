# Traces -> tidy tables, incrementally: one `metrics_run` job per trace writes small
# per-run Parquet files; `metrics_gather` concatenates them (it never opens a trace), so a
# new run costs one trace read plus a concatenation.
#
# allow_missing (config): true  -> the gather takes only the traces that exist when the
#                                  DAG is built; nothing is run, missing runs are marked
#                                  n/a and counted in the figures and the PDF.
#                         false -> the gather needs every trace of the campaign, so
#                                  Snakemake runs the missing ones first (rule `run`).
# skip_bad (config, default false): a corrupt trace is listed and skipped instead of
# stopping the workflow (without it the job fails with a message naming the run path).
# metrics: {lambda, epsilon} (config, optional): convergence parameters (0.1, 0.8).
import os

METRICS_DIR = f"{config['results_dir']}/{{scope}}/runs/{{rest}}"
SKIP_BAD = "--skip-bad" if config.get("skip_bad", False) else ""
METRIC_OPTS = "--lambda {} --epsilon {}".format(
    config.get("metrics", {}).get("lambda", 0.1), config.get("metrics", {}).get("epsilon", 0.8))
FLAGGED = "--include-flagged" if config.get("include_flagged", False) else ""


def metrics_dir(run_dir):
    """data/raw/<scope>/<rest> -> results/<scope>/runs/<rest> (scope: <backend>[/<design>]/<campaign>)"""
    scope, rest = paths.split_run_id(run_dir[len(RAW_DIR) + 1:])
    return f"{config['results_dir']}/{scope}/runs/{rest}"


def gathered_run_dirs(wildcards=None):
    dirs = RUN_DIRS
    if config.get("allow_missing", True):
        dirs = [d for d in RUN_DIRS if os.path.exists(f"{d}/trace.json")]
    return [metrics_dir(d) for d in dirs]


rule metrics_run:
    """One trace -> its per-run metrics and samples."""
    input:
        trace=f"{RUN_PATTERN}/trace.json",
    output:
        run=METRICS_DIR + "/run.parquet",
        flows=METRICS_DIR + "/flows.parquet",
        samples=METRICS_DIR + "/samples.parquet",
    log:
        "logs/metrics/{scope}/{rest}.log",
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.run),
        skip=SKIP_BAD,
        opts=METRIC_OPTS,
    shell:
        "tcpeval metrics run {input.trace:q} {params.out_dir:q} {params.opts} {params.skip} > {log:q} 2>&1"


rule metrics_gather:
    """Per-run outputs -> the campaign's runs / flows / samples tables."""
    input:
        runs=lambda wc: [f"{d}/run.parquet" for d in gathered_run_dirs()],
        flows=lambda wc: [f"{d}/flows.parquet" for d in gathered_run_dirs()],
        samples=lambda wc: [f"{d}/samples.parquet" for d in gathered_run_dirs()],
    output:
        runs=f"{RESULTS}/runs.parquet",
        flows=f"{RESULTS}/flows.parquet",
        samples=f"{RESULTS}/samples.parquet",
        skipped=f"{RESULTS}/skipped_runs.json",
    log:
        f"logs/analysis/{SCOPE}/gather.log",
    params:
        dirs=lambda wc: gathered_run_dirs(),
        out=RESULTS,
        skip=SKIP_BAD,
    shell:
        "tcpeval metrics gather {params.out:q} {params.dirs:q} {params.skip} > {log:q} 2>&1"


rule analysis:
    """The campaign's tidy tables (no figures, no paper)."""
    input:
        rules.metrics_gather.output,

# Traces -> tidy tables, incrementally: one `metrics_run` job per trace writes small
# per-run Parquet files; `metrics_gather` concatenates them (it never opens a trace), so a
# new run costs one trace read plus a concatenation.
#
# allow_missing (config): true  -> the gather takes only the traces that exist when the
#                                  DAG is built; nothing is run, missing runs are marked
#                                  n/a and counted in the figures and the PDF.
#                         false -> the gather needs every trace of the campaign, so
#                                  Snakemake runs the missing ones first (rule `run`).
# skip_bad (config): a corrupt trace is listed and skipped instead of stopping the
# workflow (without it the job fails with a message naming the run path).
# metrics: {lambda, epsilon} (config): convergence parameters.
# Their defaults are the schema's (workflow/schemas/config.schema.yaml).


rule metrics_run:
    """One trace -> its per-run metrics and samples."""
    input:
        trace=f"{RUN_PATTERN}/trace.json",
    output:
        run=f"{METRICS_PATTERN}/run.parquet",
        flows=f"{METRICS_PATTERN}/flows.parquet",
        samples=f"{METRICS_PATTERN}/samples.parquet",
    log:
        f"{paths.run_pattern('logs/metrics')}.log",
    params:
        code=CODE,
        out_dir=dir_of("run"),
        skip=SKIP_BAD,
        opts=METRIC_OPTS,
    shell:
        "tcpeval metrics run {input.trace:q} {params.out_dir:q} {params.opts} {params.skip} > {log:q} 2>&1"


rule metrics_gather:
    """Per-run outputs -> the campaign's runs / flows / samples tables."""
    input:
        unpack(gathered_tables),
    output:
        runs=TABLES["runs"],
        flows=TABLES["flows"],
        samples=TABLES["samples"],
        skipped=f"{RESULTS}/skipped_runs.json",
    log:
        f"logs/analysis/{SCOPE}/gather.log",
    params:
        code=CODE,
        dirs=gathered_run_dirs,
        out=dir_of("runs"),
        skip=SKIP_BAD,
    shell:
        "tcpeval metrics gather {params.out:q} {params.dirs:q} {params.skip} > {log:q} 2>&1"


rule analysis:
    """The campaign's tidy tables (no figures, no paper)."""
    input:
        tables=rules.metrics_gather.output,

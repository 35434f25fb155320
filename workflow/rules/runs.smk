# One job per run: the condition is read back from the path, so any run path of the
# design is a valid target (snakemake data/raw/<backend>/<campaign>/.../trace.json).
# Network runs hold the `net` resource; the default profile has one, which serialises
# them. An emulated run also claims every local core: its traffic, delay line and
# switch share this host's CPUs, so an analysis job beside it would distort the
# measurement. Testbed runs only drive remote hosts and leave the cores to the analysis.
# The run reads the design but deliberately does not list it as an input: a trace is
# named by its path, and editing the design must not put every trace of the campaign
# out of date (days of runs); every rule after the runs lists it. What the job does carry
# is its condition (params: condition_digest): where an edit changes a run's condition (a
# finding asks its cells for a tighter stopping rule) Snakemake reruns that job alone, and
# tcpeval run refuses to keep a trace recorded under another condition, naming the fields.
# A trace that exists is kept: `update` stops Snakemake from removing it before a job it
# reruns (one it saw interrupted, rerun-incomplete, even when the trace was written; or one
# forced), and --keep-existing makes that job keep it (traces are written whole or not at
# all). To run a condition again: tcpeval run --force <its trace path>.


rule run:
    output:
        trace=update(f"{RUN_PATTERN}/trace.json"),
    log:
        f"{paths.run_pattern('logs')}/run.log",
    threads: RUN_THREADS
    resources:
        net=1,
        runtime=run_time_limit_min,
    params:
        design=config["design"],
        raw_dir=raw_dir_of,
        testbed=TESTBED_OPT,
        condition=condition_digest,
    shell:
        "tcpeval run {output.trace:q} --keep-existing --design {params.design:q} --raw-dir {params.raw_dir:q}"
        " {params.testbed}"
        " > {log:q} 2>&1"


rule runs:
    """All raw traces of the campaign (no analysis)."""
    input:
        traces=TRACES,

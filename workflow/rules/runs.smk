# One job per run: the condition is read back from the path, so any run path of the
# design is a valid target (snakemake data/raw/<backend>/<campaign>/.../trace.json).
# Network runs hold the `net` resource; the default profile has one, which serialises
# them. An emulated run also claims every local core: its traffic, delay line and
# switch share this host's CPUs, so an analysis job beside it would distort the
# measurement. Testbed runs only drive remote hosts and leave the cores to the analysis.

# {scope}: <backend>[/<design>]/<campaign>; {rest}: <criterion>/<flows>/rtt../drop..[/factors]/rep<k>
RUN_PATTERN = f"{RAW_DIR}/{{scope}}/{{rest}}"
RUN_INDEX = paths.make_index(RUNS, RAW_DIR)
NODE_CEILING = planning.node_ceiling(config.get("node_faithful_rate"))


# An emulated run takes every local core (the total Snakemake was given); on a cluster,
# where Snakemake has no total, the job owns its node instead (profile slurm: --exclusive).
RUN_THREADS = (workflow._cores or 1) if BACKEND == "emulated" else 1


def run_time_limit_min(wildcards):
    """A cluster job's time limit (SLURM --time): the run's expected wall time with its
    time dilation, with a margin for retries (tcpeval.backends.planning)."""
    cond = RUN_INDEX.get(f"{RAW_DIR}/{wildcards.scope}/{wildcards.rest}")
    return planning.time_limit_min(cond, NODE_CEILING) if cond else planning.TIME_LIMIT_MIN_MIN


rule run:
    output:
        trace=f"{RUN_PATTERN}/trace.json",
    log:
        "logs/" + RUN_PATTERN.removeprefix(f"{RAW_DIR}/") + "/run.log",
    params:
        design=config["design"],
        raw_dir=RAW_DIR,
        testbed=f"--testbed {config['testbed']}" if BACKEND == "testbed" else "",
    threads: RUN_THREADS
    resources:
        net=1,
        runtime=run_time_limit_min,
    shell:
        "tcpeval run {output.trace:q} --design {params.design:q} --raw-dir {params.raw_dir:q} {params.testbed}"
        " > {log:q} 2>&1"


rule runs:
    """All raw traces of the campaign (no analysis)."""
    input:
        TRACES,

# One job per run: the condition is read back from the path, so any run path of the
# design is a valid target (snakemake data/raw/<backend>/<campaign>/.../trace.json).
# Network runs hold the `net` resource; the default profile has one, which serialises
# them. An emulated run also claims every local core: its traffic, delay line and
# switch share this host's CPUs, so an analysis job beside it would distort the
# measurement. Testbed runs only drive remote hosts and leave the cores to the analysis.

# {scope}: <backend>[/<design>]/<campaign>; {rest}: <criterion>/<flows>/rtt../drop..[/factors]/rep<k>
RUN_PATTERN = f"{RAW_DIR}/{{scope}}/{{rest}}"


rule run:
    output:
        trace=f"{RUN_PATTERN}/trace.json",
    log:
        "logs/" + RUN_PATTERN.removeprefix(f"{RAW_DIR}/") + "/run.log",
    params:
        design=config["design"],
        raw_dir=RAW_DIR,
        testbed=f"--testbed {config['testbed']}" if BACKEND == "testbed" else "",
    threads: workflow.cores if BACKEND == "emulated" else 1
    resources:
        net=1,
    shell:
        "tcpeval run {output.trace:q} --design {params.design:q} --raw-dir {params.raw_dir:q} {params.testbed}"
        " > {log:q} 2>&1"


rule runs:
    """All raw traces of the campaign (no analysis)."""
    input:
        TRACES,

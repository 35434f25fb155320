# tcpeval: the paper's experiment matrix, from runs to the manuscript.
#   snakemake --config campaign=smoke          (campaigns: smoke | quick | paper)
#   snakemake data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop1e-04/rep1/trace.json
#   snakemake report --config design=config/designs/udp-burst.yaml campaign=short
# Execution settings (cores, serialised network runs, cluster) live in workflow/profiles/.
# Configuration, paths and input functions: workflow/rules/common.smk.


include: "workflow/rules/common.smk"


# The paper's design builds its manuscript; any other design its report (report.smk).
rule all:
    default_target: True
    input:
        final=FINAL_TARGET,


include: "workflow/rules/runs.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/report.smk"

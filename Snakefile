# tcpeval: the paper's experiment matrix, from runs to the manuscript.
#   snakemake --config campaign=smoke          (campaigns: smoke | quick | paper)
#   snakemake data/raw/emulated/smoke/responsiveness/bic/rtt6.2/drop1e-04/rep1/trace.json
# Execution settings (cores, serialised network runs, cluster) live in workflow/profiles/.

include: "workflow/rules/common.smk"


rule all:
    input:
        PAPER_PDF,
    default_target: True


include: "workflow/rules/runs.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"

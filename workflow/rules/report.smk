# The report of any design's campaign (HTML + PDF): `make report DESIGN=... CAMPAIGN=...`.
# The paper's design has its manuscript instead (paper.smk); this works for it too.


rule design_report:
    """Tables per criterion, bar plots per factor, a timeline per condition."""
    input:
        runs=rules.metrics_gather.output.runs,
        flows=rules.metrics_gather.output.flows,
        samples=rules.metrics_gather.output.samples,
        skipped=rules.metrics_gather.output.skipped,
        design=config["design"],
    output:
        html=f"{RESULTS}/report/report.html",
        pdf=f"{RESULTS}/report/report.pdf",
    log:
        f"logs/report/{SCOPE}.log",
    params:
        code=CODE,
        campaign=CAMPAIGN,
        backend=BACKEND,
        results=results_of,
        out_dir=dir_of("html"),
        flagged=FLAGGED,
    shell:
        "tcpeval report --design {input.design:q} --campaign {params.campaign} --backend {params.backend}"
        " --results {params.results:q} --out-dir {params.out_dir:q} {params.flagged} > {log:q} 2>&1"


rule report:
    """The design's report (HTML and PDF)."""
    input:
        html=rules.design_report.output.html,
        pdf=rules.design_report.output.pdf,

# The report of any design's campaign (HTML + PDF): `make report DESIGN=... CAMPAIGN=...`.
# The paper's design has its manuscript instead (paper.smk); this works for it too.

REPORT_DIR = f"{RESULTS}/report"


rule design_report:
    """Tables per criterion, bar plots per factor, a timeline per condition."""
    input:
        rules.metrics_gather.output,
    output:
        html=f"{REPORT_DIR}/report.html",
        pdf=f"{REPORT_DIR}/report.pdf",
    log:
        f"logs/report/{SCOPE}.log",
    params:
        design=config["design"],
        results=RESULTS,
        flagged=FLAGGED,
    shell:
        "tcpeval report --design {params.design:q} --campaign {CAMPAIGN} --backend {BACKEND}"
        " --results {params.results:q} --out-dir {REPORT_DIR:q} {params.flagged} > {log:q} 2>&1"


rule report:
    """The design's report (HTML and PDF)."""
    input:
        rules.design_report.output,

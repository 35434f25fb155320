# Tidy tables -> figures (PDF + PNG + a LaTeX snippet with the generated caption).
# Figs. 4-7 of the paper: one responsiveness/efficiency figure per RTT of the campaign.
FIG_DIR = f"{RESULTS}/figures"
RESP_RTTS = sorted({paths.format_rtt(r.rtt_ms) for r in RUNS if r.criterion == "responsiveness"}, key=float)
TABLES = [f"{RESULTS}/runs.parquet", f"{RESULTS}/flows.parquet", f"{RESULTS}/samples.parquet"]
FIGURE_FILES = [f"{FIG_DIR}/responsiveness-rtt{r}.{ext}" for r in RESP_RTTS for ext in ("pdf", "tex")] + [
    f"{FIG_DIR}/{name}.{ext}" for name in ("utilisation", "convergence", "flows") for ext in ("pdf", "tex")]


rule figure_responsiveness:
    """Figs. 4-7: responsiveness (mean throughput vs drop) and efficiency at one RTT."""
    input:
        TABLES,
    output:
        pdf=report(f"{FIG_DIR}/responsiveness-rtt{{rtt}}.pdf", caption="../report/responsiveness.rst",
                   category="Figures", subcategory="Responsiveness and efficiency"),
        png=report(f"{FIG_DIR}/responsiveness-rtt{{rtt}}.png", caption="../report/responsiveness.rst",
                   category="Figures", subcategory="Responsiveness and efficiency"),
        tex=f"{FIG_DIR}/responsiveness-rtt{{rtt}}.tex",
    log:
        f"logs/figures/{BACKEND}/{CAMPAIGN}/responsiveness-rtt{{rtt}}.log",
    params:
        results=RESULTS,
        design=config["design"],
        flagged=FLAGGED,
    shell:
        "tcpeval figure responsiveness --rtt {wildcards.rtt} --results {params.results:q}"
        " --design {params.design:q} --out-dir {FIG_DIR:q} {params.flagged} > {log:q} 2>&1"


rule figure_utilisation:
    """Fig. 8: link utilisation of the two-flow runs, same variant and against Reno."""
    input:
        TABLES,
    output:
        pdf=report(f"{FIG_DIR}/utilisation.pdf", caption="../report/utilisation.rst", category="Figures",
                   subcategory="Fairness"),
        png=report(f"{FIG_DIR}/utilisation.png", caption="../report/utilisation.rst", category="Figures",
                   subcategory="Fairness"),
        tex=f"{FIG_DIR}/utilisation.tex",
    log:
        f"logs/figures/{BACKEND}/{CAMPAIGN}/utilisation.log",
    params:
        results=RESULTS,
        design=config["design"],
        flagged=FLAGGED,
    shell:
        "tcpeval figure utilisation --results {params.results:q} --design {params.design:q}"
        " --out-dir {FIG_DIR:q} {params.flagged} > {log:q} 2>&1"


rule figure_convergence:
    """Fig. 9: convergence time (bars) and spread (points) per pairing and RTT."""
    input:
        TABLES,
    output:
        pdf=report(f"{FIG_DIR}/convergence.pdf", caption="../report/convergence.rst", category="Figures",
                   subcategory="Convergence"),
        png=report(f"{FIG_DIR}/convergence.png", caption="../report/convergence.rst", category="Figures",
                   subcategory="Convergence"),
        tex=f"{FIG_DIR}/convergence.tex",
    log:
        f"logs/figures/{BACKEND}/{CAMPAIGN}/convergence.log",
    params:
        results=RESULTS,
        design=config["design"],
        flagged=FLAGGED,
    shell:
        "tcpeval figure convergence --results {params.results:q} --design {params.design:q}"
        " --out-dir {FIG_DIR:q} {params.flagged} > {log:q} 2>&1"


rule figure_flows:
    """Fig. 10: per-flow throughput of the two-flow runs (fairness at a glance)."""
    input:
        TABLES,
    output:
        pdf=report(f"{FIG_DIR}/flows.pdf", caption="../report/flows.rst", category="Figures",
                   subcategory="Fairness"),
        png=report(f"{FIG_DIR}/flows.png", caption="../report/flows.rst", category="Figures",
                   subcategory="Fairness"),
        tex=f"{FIG_DIR}/flows.tex",
    log:
        f"logs/figures/{BACKEND}/{CAMPAIGN}/flows.log",
    params:
        results=RESULTS,
        design=config["design"],
        flagged=FLAGGED,
    shell:
        "tcpeval figure flows --results {params.results:q} --design {params.design:q}"
        " --out-dir {FIG_DIR:q} {params.flagged} > {log:q} 2>&1"


rule figures:
    """Every figure of the campaign."""
    input:
        FIGURE_FILES,

# Tidy tables -> figures (PDF + PNG + a LaTeX snippet with the generated caption), one
# rule for all of them: {figure} is responsiveness-rtt<ms> (Figs. 4-7, one per RTT of
# the campaign), utilisation (Fig. 8), convergence (Fig. 9) or flows (Fig. 10).


rule figure:
    """One figure of the campaign (`tcpeval figure`)."""
    input:
        runs=TABLES["runs"],
        flows=TABLES["flows"],
        samples=TABLES["samples"],
        design=config["design"],
    output:
        pdf=report(
            f"{FIG_DIR}/{{figure}}.pdf",
            caption="../report/figure.rst",
            category="Figures",
            subcategory=figure_subcategory,
        ),
        png=report(
            f"{FIG_DIR}/{{figure}}.png",
            caption="../report/figure.rst",
            category="Figures",
            subcategory=figure_subcategory,
        ),
        tex=f"{FIG_DIR}/{{figure}}.tex",
    log:
        f"logs/figures/{BACKEND}/{CAMPAIGN}/{{figure}}.log",
    wildcard_constraints:
        figure=FIGURE_CONSTRAINT,
    params:
        code=CODE,
        figure=figure_args,
        results=results_of,
        out_dir=dir_of("pdf"),
        flagged=FLAGGED,
    shell:
        "tcpeval figure {params.figure} --results {params.results:q} --design {input.design:q}"
        " --out-dir {params.out_dir:q} {params.flagged} > {log:q} 2>&1"


rule figures:
    """Every figure of the campaign."""
    input:
        figures=FIGURE_FILES,

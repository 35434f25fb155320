# Tables, macros, the reproduction check and the manuscript (final target: paper/main.pdf).


rule cc_params:
    """Table I's data, read from the CC implementations' C sources by tcpeval.cc."""
    input:
        sources=CC_SOURCES,
    output:
        json=f"{RESULTS}/cc_params.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/cc_params.log",
    params:
        code=CODE,
    shell:
        "tcpeval cc params --json > {output.json:q} 2> {log:q}"


rule table1:
    """Table I: the CC parameters of each variant of the design."""
    input:
        params=rules.cc_params.output.json,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/table1.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/table1.log",
    params:
        code=CODE,
    shell:
        "tcpeval table table1 --cc-params {input.params:q} --design {input.design:q} --out {output.tex:q} > {log:q} 2>&1"


rule table2:
    """Table II: the test overview from the design, with the campaign's counts."""
    input:
        runs=TABLES["runs"],
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/table2.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/table2.log",
    params:
        code=CODE,
        results=results_of,
        flagged=FLAGGED,
    shell:
        "tcpeval table table2 --results {params.results:q} --design {input.design:q} --out {output.tex:q}"
        " {params.flagged} > {log:q} 2>&1"


rule claims:
    """The original study's findings (paper/claims.yaml) checked on our data."""
    input:
        runs=TABLES["runs"],
        flows=TABLES["flows"],
        samples=TABLES["samples"],
        claims=f"{PAPER_DIR}/claims.yaml",
        design=config["design"],
        others=other_campaign_tables,
    output:
        tex=f"{PAPER_OUT}/claims.tex",
        campaigns=f"{PAPER_OUT}/claims-campaigns.tex",
        json=f"{PAPER_OUT}/claims.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/claims.log",
    params:
        code=CODE,
        results=results_of,
        flagged=FLAGGED,
        also=" ".join(f"--also {c}" for c in OTHER_CAMPAIGNS),
    shell:
        "tcpeval claims --results {params.results:q} --design {input.design:q} --claims {input.claims:q}"
        " --out-tex {output.tex:q} --out-json {output.json:q} --out-campaigns-tex {output.campaigns:q}"
        " {params.also} {params.flagged} > {log:q} 2>&1"


rule validation:
    """Reno 3.16 against the Mathis model and the kernel's Reno: figure and paragraph."""
    input:
        tables=validation_tables,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/validation.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/validation.log",
    params:
        code=CODE,
        results=VALIDATION_RESULTS,
        fig_dir=FIG_DIR,
        flagged=FLAGGED,
    shell:
        "tcpeval validation --results {params.results:q} --design {input.design:q} --campaign validation"
        " --fig-dir {params.fig_dir:q} --out-tex {output.tex:q} {params.flagged} > {log:q} 2>&1"


rule dilation_check:
    """Time-dilated runs against undilated ones: figure, paragraph and the comparisons."""
    input:
        tables=dilation_tables,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/dilation-check.tex",
        json=f"{PAPER_OUT}/dilation-check.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/dilation-check.log",
    params:
        code=CODE,
        results=lambda wildcards: results_arg(DILATION_CAMPAIGNS),
        fig_dir=FIG_DIR,
        flagged=FLAGGED,
    shell:
        "tcpeval dilation-check --results {params.results:q} --design {input.design:q}"
        " --fig-dir {params.fig_dir:q} --out-tex {output.tex:q} --out-json {output.json:q}"
        " {params.flagged} > {log:q} 2>&1"


rule stopping_check:
    """Precision-driven runs against runs five times longer: figure, paragraph, comparisons."""
    input:
        tables=stopping_tables,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/stopping-check.tex",
        json=f"{PAPER_OUT}/stopping-check.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/stopping-check.log",
    params:
        code=CODE,
        results=lambda wildcards: results_arg(STOPPING_CAMPAIGNS),
        fig_dir=FIG_DIR,
        flagged=FLAGGED,
    shell:
        "tcpeval stopping-check --results {params.results:q} --design {input.design:q}"
        " --fig-dir {params.fig_dir:q} --out-tex {output.tex:q} --out-json {output.json:q}"
        " {params.flagged} > {log:q} 2>&1"


rule macros:
    """Every number the manuscript prints."""
    input:
        runs=TABLES["runs"],
        flows=TABLES["flows"],
        samples=TABLES["samples"],
        claims=rules.claims.output.json,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/macros.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/macros.log",
    params:
        code=CODE,
        results=results_of,
        flagged=FLAGGED,
    shell:
        "tcpeval macros --results {params.results:q} --design {input.design:q} --claims-json {input.claims:q}"
        " --out {output.tex:q} {params.flagged} > {log:q} 2>&1"


rule paper:
    """Stage the generated files into paper/generated and build paper/main.pdf (latexmk)."""
    input:
        runs=TABLES["runs"],
        figures=FIGURE_FILES,
        # what `tcpeval paper build` stages, from its own list (the rules above make them)
        generated=[f"{PAPER_OUT}/{name}" for name in paper_stage.GENERATED],
        main=f"{PAPER_DIR}/main.tex",
    output:
        pdf=PAPER_PDF,
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/latexmk.log",
    params:
        code=CODE,
        results=results_of,
        paper_dir=paper_dir_of,
    shell:
        # on failure the log (missing TeX file, its Debian package, the fix) goes to the console too
        "tcpeval paper build --results {params.results:q} --paper-dir {params.paper_dir:q} > {log:q} 2>&1"
        " || {{ cat {log:q} >&2; exit 1; }}"

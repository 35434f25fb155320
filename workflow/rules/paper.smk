# Tables, macros, the reproduction check and the manuscript (final target: paper/main.pdf).
from glob import glob

PAPER_OUT = f"{RESULTS}/paper"
PAPER_DIR = config["paper_dir"]


rule cc_params:
    """Table I's data, read from the CC implementations' C sources by tcpeval.cc."""
    input:
        sorted(glob("cc/src/*.c")),
    output:
        f"{RESULTS}/cc_params.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/cc_params.log",
    shell:
        "tcpeval cc params --json > {output:q} 2> {log:q}"


rule table1:
    input:
        params=rules.cc_params.output,
    output:
        f"{PAPER_OUT}/table1.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/table1.log",
    shell:
        "tcpeval table table1 --cc-params {input.params:q} --out {output:q} > {log:q} 2>&1"


rule table2:
    """Table II: the test overview from the design, with the campaign's counts."""
    input:
        runs=f"{RESULTS}/runs.parquet",
        design=config["design"],
    output:
        f"{PAPER_OUT}/table2.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/table2.log",
    params:
        results=RESULTS,
        flagged=FLAGGED,
    shell:
        "tcpeval table table2 --results {params.results:q} --design {input.design:q} --out {output:q}"
        " {params.flagged} > {log:q} 2>&1"


rule claims:
    """The original study's findings (paper/claims.yaml) checked on our data."""
    input:
        TABLES,
        claims=f"{PAPER_DIR}/claims.yaml",
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/claims.tex",
        json=f"{PAPER_OUT}/claims.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/claims.log",
    params:
        results=RESULTS,
        flagged=FLAGGED,
    shell:
        "tcpeval claims --results {params.results:q} --design {input.design:q} --claims {input.claims:q}"
        " --out-tex {output.tex:q} --out-json {output.json:q} {params.flagged} > {log:q} 2>&1"


rule macros:
    """Every number the manuscript prints."""
    input:
        TABLES,
        claims=rules.claims.output.json,
        design=config["design"],
    output:
        f"{PAPER_OUT}/macros.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/macros.log",
    params:
        results=RESULTS,
        flagged=FLAGGED,
    shell:
        "tcpeval macros --results {params.results:q} --design {input.design:q} --claims-json {input.claims:q}"
        " --out {output:q} {params.flagged} > {log:q} 2>&1"


rule paper:
    """Stage the generated files into paper/generated and build paper/main.pdf (latexmk)."""
    input:
        FIGURE_FILES,
        rules.table1.output,
        rules.table2.output,
        rules.claims.output.tex,
        rules.macros.output,
        main=f"{PAPER_DIR}/main.tex",
    output:
        PAPER_PDF,
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/latexmk.log",
    params:
        results=RESULTS,
        paper_dir=PAPER_DIR,
    shell:
        "tcpeval paper build --results {params.results:q} --paper-dir {params.paper_dir:q} > {log:q} 2>&1"

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
    params:
        design=config["design"],
    shell:
        "tcpeval table table1 --cc-params {input.params:q} --design {params.design:q} --out {output:q} > {log:q} 2>&1"


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


# The other campaigns of the paper's matrix (those running its first criterion): the
# reproduction section says which finding holds at which of them, from their tables
# where they exist (their own `make paper CAMPAIGN=...` builds them).
OTHER_CAMPAIGNS = [c for c in spec.campaign_names(DESIGN)
                   if c != CAMPAIGN and "responsiveness" in spec.criteria_of(DESIGN, c)]


rule claims:
    """The original study's findings (paper/claims.yaml) checked on our data."""
    input:
        TABLES,
        claims=f"{PAPER_DIR}/claims.yaml",
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/claims.tex",
        campaigns=f"{PAPER_OUT}/claims-campaigns.tex",
        json=f"{PAPER_OUT}/claims.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/claims.log",
    params:
        results=RESULTS,
        flagged=FLAGGED,
        also=" ".join(f"--also {c}" for c in OTHER_CAMPAIGNS),
    shell:
        "tcpeval claims --results {params.results:q} --design {input.design:q} --claims {input.claims:q}"
        " --out-tex {output.tex:q} --out-json {output.json:q} --out-campaigns-tex {output.campaigns:q}"
        " {params.also} {params.flagged} > {log:q} 2>&1"


VALIDATION_RESULTS = f"{config['results_dir']}/{BACKEND}/validation"


def validation_tables(wildcards):
    """The validation campaign's tables when they exist (`make validation`), else none:
    the manuscript then says that campaign has not been run."""
    table = f"{VALIDATION_RESULTS}/runs.parquet"
    return [table] if CAMPAIGN == "validation" or os.path.exists(table) else []


rule validation:
    """Reno 3.16 against the Mathis model and the kernel's Reno: figure and paragraph."""
    input:
        validation_tables,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/validation.tex",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/validation.log",
    params:
        results=VALIDATION_RESULTS,
        fig_dir=FIG_DIR,
        flagged=FLAGGED,
    shell:
        "tcpeval validation --results {params.results:q} --design {input.design:q} --campaign validation"
        " --fig-dir {params.fig_dir:q} --out-tex {output.tex:q} {params.flagged} > {log:q} 2>&1"


# The cross-validation of time dilation (`make validate-dilation`): the full campaign's
# tables where they exist, else the quick one's, else none (the paragraph then says so).
DILATION_CAMPAIGNS = ("dilation", "dilation-quick")


def dilation_results():
    for name in DILATION_CAMPAIGNS:
        results = f"{config['results_dir']}/{BACKEND}/{name}"
        if CAMPAIGN == name or os.path.exists(f"{results}/runs.parquet"):
            return results
    return None


def dilation_tables(wildcards):
    results = dilation_results()
    return [f"{results}/runs.parquet", f"{results}/samples.parquet"] if results else []


rule dilation_check:
    """Time-dilated runs against undilated ones: figure, paragraph and the comparisons."""
    input:
        dilation_tables,
        design=config["design"],
    output:
        tex=f"{PAPER_OUT}/dilation-check.tex",
        json=f"{PAPER_OUT}/dilation-check.json",
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/dilation-check.log",
    params:
        results=lambda wildcards: dilation_results() or f"{config['results_dir']}/{BACKEND}/dilation",
        fig_dir=FIG_DIR,
        flagged=FLAGGED,
    shell:
        "tcpeval dilation-check --results {params.results:q} --design {input.design:q}"
        " --fig-dir {params.fig_dir:q} --out-tex {output.tex:q} --out-json {output.json:q}"
        " {params.flagged} > {log:q} 2>&1"


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
        rules.claims.output.campaigns,
        rules.macros.output,
        rules.validation.output.tex,
        rules.dilation_check.output.tex,
        main=f"{PAPER_DIR}/main.tex",
    output:
        PAPER_PDF,
    log:
        f"logs/paper/{BACKEND}/{CAMPAIGN}/latexmk.log",
    params:
        results=RESULTS,
        paper_dir=PAPER_DIR,
    shell:
        # on failure the log (missing TeX file, its Debian package, the fix) goes to the console too
        "tcpeval paper build --results {params.results:q} --paper-dir {params.paper_dir:q} > {log:q} 2>&1"
        " || {{ cat {log:q} >&2; exit 1; }}"

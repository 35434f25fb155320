# tcpeval: the two commands a reviewer needs are `make paper` and `make test`.
# Both bootstrap what is missing (Debian packages, .venv) and are idempotent.

CAMPAIGN ?= smoke
BACKEND ?= emulated
PROFILE ?= workflow/profiles/default
SNAKEMAKE_ARGS ?=
CONFIG_ARGS ?=
PYTEST_ARGS ?=
FINDINGS ?= findings

VENV := .venv/bin
# Targets go before --config, which takes every name=value after it (a target after it is
# refused as a config entry); CONFIG_ARGS adds entries, e.g. CONFIG_ARGS=include_flagged=True (Snakemake reads True/False as booleans).
SNAKEMAKE := $(VENV)/snakemake --profile $(PROFILE)
CONFIG = --config campaign=$(CAMPAIGN) backend=$(BACKEND) $(CONFIG_ARGS)
# where the workflow writes tables and traces, for the targets that read them after it:
# config/config.yaml's defaults, or CONFIG_ARGS' results_dir= / raw_dir=
config_arg = $(or $(patsubst $(1)=%,%,$(lastword $(filter $(1)=%,$(CONFIG_ARGS)))),$(2))
RESULTS_DIR := $(call config_arg,results_dir,results)
RAW_DIR := $(call config_arg,raw_dir,data/raw)

.PHONY: bootstrap image paper findings validation validate-dilation validate-stopping runs dry-run report snakemake-report calibrate test test-all lint bench status design data-push data-pull cleanup clean help

help:
	@echo "make paper  [CAMPAIGN=smoke|quick|paper] [BACKEND=emulated|testbed]  runs -> paper/main.pdf"
	@echo "make findings [FINDINGS=findings|findings-short-rtt|findings-long-rtt-{responsiveness,pairs,convergence}|findings-low-loss] [FINDINGS_HOURS=H]  the cells the published findings read (or a slice of them), on the paper's link, then the paper; with H, the findings that fit in H hours, cheapest first"
	@echo "make validation                the validation campaign (Reno vs Mathis model, ~4 h), then the paper"
	@echo "make calibrate                 measure what this host carries faithfully, unless cached (~20 min; the first run does it otherwise)"
	@echo "make test                      the default test suite (well under 30 min once calibrated)"
	@echo "make test-all                  including slow tests"
	@echo "make lint                      ruff, snakefmt --check, snakemake --lint (paper's and a non-paper design)"
	@echo "make bench                     benchmarks (throughput of the emulator, analysis speed)"
	@echo "make validate-dilation [DILATION_CAMPAIGN=dilation|dilation-quick|dilation-long]  time-dilated runs against undilated ones (7.7 h | 45 min | 1.2 h)"
	@echo "make validate-stopping [STOPPING_CAMPAIGN=stopping|stopping-quick]  precision-driven runs against runs five times longer, the rule replayed on 60-s runs (1.4-3 h | 0.5-1 h)"
	@echo "make runs     CAMPAIGN=...     only the raw traces"
	@echo "make status   CAMPAIGN=...     runs done / total, flagged runs, ETA"
	@echo "make dry-run  CAMPAIGN=paper   list the jobs (1,280 runs for the paper campaign)"
	@echo "make report DESIGN=config/designs/x.yaml CAMPAIGN=short   any design: runs what is missing, then an HTML + PDF report"
	@echo "make snakemake-report          snakemake --report of the paper's campaign (figures with captions, HTML)"
	@echo "make data-push CAMPAIGN=...   version the campaign's raw traces with DVC and push them"
	@echo "make data-pull CAMPAIGN=...   fetch a campaign's raw traces from the DVC remote"
	@echo "  (the remote: TCPEVAL_DVC_REMOTE=ssh://user@host/path or a DVC remote's name; default: store)"
	@echo "make image                     the container image (podman, rootful; tools/container-image.sh)"
	@echo "make cleanup                   remove leftovers of killed runs (namespaces, struct_ops)"

bootstrap:
	@tools/bootstrap.sh

# The container image localhost/tcpeval:<revision> (and :latest) from the Dockerfile, with
# podman on a Debian 12 base made here; IMAGE_ARGS=--rebuild-base makes the base anew.
IMAGE_ARGS ?=
image:
	tools/container-image.sh build $(IMAGE_ARGS)

paper: bootstrap
	$(SNAKEMAKE) $(SNAKEMAKE_ARGS) $(CONFIG)

# The findings campaign (the cells paper/claims.yaml reads, on the paper's link; its
# cost: `tcpeval plan --campaign findings --nodes 1 16`), then the manuscript of CAMPAIGN,
# whose reproduction table then has its column.
# It is sequential (initial_repetitions): every cell's first repetition, then a round of one
# more repetition for the cells that keep a finding undecided (`tcpeval next-runs`),
# until none is open or the campaign's repetitions are spent (each round ends the loop
# when it asks for nothing, or for the same runs again: they failed).
# FINDINGS_HOURS=H (a reviewer's budget of wall time): the first round finding by finding,
# the cheapest first (`tcpeval plan --by-finding`), only the findings whose cells fit in H
# hours as planned, then the rounds as above, one run at a time; no findings run starts
# once H hours are spent, and the analysis reads the traces that exist (allow_missing).
FINDINGS_HOURS ?=
FINDINGS_CONFIG = --config campaign=$(FINDINGS) backend=$(BACKEND) $(CONFIG_ARGS)
FINDINGS_RESULTS = $(RESULTS_DIR)/$(BACKEND)/$(FINDINGS)
FINDINGS_ANALYSIS = $(SNAKEMAKE) analysis $(SNAKEMAKE_ARGS) $(FINDINGS_CONFIG) $(if $(FINDINGS_HOURS),allow_missing=True)
# $(1): run paths, each to Snakemake alone while the shell's $deadline is ahead
findings_one_by_one = for one in $(1); do \
	    [ "$$(date +%s)" -lt "$$deadline" ] || break; \
	    $(SNAKEMAKE) $(SNAKEMAKE_ARGS) --keep-going $$one $(FINDINGS_CONFIG) || true; \
	  done
FINDINGS_DEADLINE = $(if $(FINDINGS_HOURS),$$($(VENV)/python -c "import time; print(int(time.time() + 3600 * float('$(FINDINGS_HOURS)')))"),9999999999)
findings: bootstrap
	set -e; deadline=$(FINDINGS_DEADLINE); \
	if [ -n "$(FINDINGS_HOURS)" ]; then \
	  $(VENV)/tcpeval plan --campaign $(FINDINGS) --backend $(BACKEND) --raw-dir $(RAW_DIR) --by-finding --hours $(FINDINGS_HOURS); \
	  order=$$($(VENV)/tcpeval plan --campaign $(FINDINGS) --backend $(BACKEND) --raw-dir $(RAW_DIR) --by-finding --paths --hours $(FINDINGS_HOURS)); \
	  $(call findings_one_by_one,$$order); \
	fi; \
	$(FINDINGS_ANALYSIS); \
	asked=; while [ "$$(date +%s)" -lt "$$deadline" ] \
	    && next=$$($(VENV)/tcpeval next-runs --results $(FINDINGS_RESULTS) --raw-dir $(RAW_DIR)) \
	    && [ -n "$$next" ] && [ "$$next" != "$$asked" ]; do \
	  if [ -n "$(FINDINGS_HOURS)" ]; then $(call findings_one_by_one,$$next); \
	  else $(SNAKEMAKE) $(SNAKEMAKE_ARGS) --keep-going $$next $(FINDINGS_CONFIG) || true; fi; \
	  $(FINDINGS_ANALYSIS); \
	  asked=$$next; \
	done
	$(SNAKEMAKE) $(SNAKEMAKE_ARGS) $(CONFIG)

# The validation campaign (Reno vs the Mathis model and the kernel's Reno, about 4 h of
# traffic), then the manuscript of CAMPAIGN, which now shows it.
validation: bootstrap
	$(SNAKEMAKE) analysis $(SNAKEMAKE_ARGS) --config campaign=validation backend=$(BACKEND) $(CONFIG_ARGS)
	$(SNAKEMAKE) $(SNAKEMAKE_ARGS) $(CONFIG)

runs: bootstrap
	$(SNAKEMAKE) runs $(SNAKEMAKE_ARGS) $(CONFIG)

dry-run: bootstrap
	$(SNAKEMAKE) -n -q rules $(SNAKEMAKE_ARGS) $(CONFIG)

# Any design's campaign: the missing runs, then results/<backend>/<design>/<campaign>/report/report.{html,pdf}
DESIGN ?= config/design.yaml
report: bootstrap
	$(SNAKEMAKE) report $(SNAKEMAKE_ARGS) $(CONFIG) design=$(DESIGN)

snakemake-report: bootstrap
	$(SNAKEMAKE) --report results/report-$(BACKEND)-$(CAMPAIGN).html $(SNAKEMAKE_ARGS) $(CONFIG)

status: bootstrap
	$(VENV)/tcpeval design status --campaign $(CAMPAIGN) --backend $(BACKEND)

design: bootstrap
	$(VENV)/tcpeval design check

# The emulated backend's calibration of this host (tcpeval.backends.emulated.calibrate),
# once per host, kernel and build: the root tests and the first run need it; CI measures
# it before the tests so that their time is their own.
calibrate: bootstrap
	$(VENV)/tcpeval calibrate --if-missing

test: bootstrap
	$(VENV)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: bootstrap
	$(VENV)/python -m pytest $(PYTEST_ARGS)

# The house style: ruff (pyproject.toml [tool.ruff]), snakefmt, and snakemake --lint of the
# workflow for the paper's design and a non-paper one, where any finding but the advice to
# give each rule a conda environment or container fails (tools/lint-workflow.sh).
LINT_DESIGN ?= config/designs/udp-burst.yaml
LINT_CAMPAIGN ?= short
lint: bootstrap
	$(VENV)/ruff check src tests tools bench hw
	$(VENV)/snakefmt --check Snakefile workflow/
	tools/lint-workflow.sh $(VENV)/snakemake "" "campaign=$(LINT_CAMPAIGN) design=$(LINT_DESIGN)"

# The cross-validation of time dilation: the campaign DILATION_CAMPAIGN (dilation: every
# port at 2 RTTs x 3 drop rates, k = 1, 2 and 4, about 7.7 h; dilation-quick: about 45 min;
# dilation-long: 24.2 ms, k = 1 and 4, about 1.2 h),
# the manuscript of CAMPAIGN (which now shows it), then the comparisons as a table; the
# exit status is 1 unless every judged comparison agrees.
# Every run of the comparison on one link mechanism (DILATION_LINK, passed as TCPEVAL_LINK): left
# to choose, a run at k = 1 may take TBF and its k = 4 twin the link engine, and the
# comparison would be of the mechanisms (dilation_check refuses to judge such a pair).
DILATION_CAMPAIGN ?= dilation
DILATION_LINK ?= tevlink
DILATION_RESULTS := $(RESULTS_DIR)/emulated/$(DILATION_CAMPAIGN)
validate-dilation: bootstrap
	TCPEVAL_LINK=$(DILATION_LINK) $(SNAKEMAKE) analysis $(SNAKEMAKE_ARGS) --config campaign=$(DILATION_CAMPAIGN) backend=emulated $(CONFIG_ARGS)
	$(SNAKEMAKE) $(SNAKEMAKE_ARGS) $(CONFIG)
	$(VENV)/tcpeval dilation-check --results $(DILATION_RESULTS) --fig-dir $(DILATION_RESULTS)/figures \
	  --out-tex $(DILATION_RESULTS)/dilation-check.tex --out-json $(DILATION_RESULTS)/dilation-check.json --table --strict

# Stopped early is not stopped wrong: precision-driven runs against independent runs five
# times longer, and the rule replayed on runs of its longest length (campaign stopping:
# Reno, CUBIC, BIC at 0.2 ms, p = 1e-4, on the paper's link, 1.4 h at x3 to about 3 h at
# x6 here; STOPPING_CAMPAIGN=stopping-quick: Reno alone, 0.5-1 h).
STOPPING_CAMPAIGN ?= stopping
STOPPING_RESULTS := $(RESULTS_DIR)/emulated/$(STOPPING_CAMPAIGN)
validate-stopping: bootstrap
	$(SNAKEMAKE) analysis $(SNAKEMAKE_ARGS) --config campaign=$(STOPPING_CAMPAIGN) backend=emulated $(CONFIG_ARGS)
	$(VENV)/tcpeval stopping-check --results $(STOPPING_RESULTS) --fig-dir $(STOPPING_RESULTS)/figures \
	  --out-tex $(STOPPING_RESULTS)/stopping-check.tex --out-json $(STOPPING_RESULTS)/stopping-check.json --table --strict

bench: bootstrap
	@set -e; for b in bench/bench_*.py; do echo "== $$b"; $(VENV)/python $$b; done

# The remote: TCPEVAL_DVC_REMOTE (from the environment or make's command line, which make
# passes on), else .dvc/config's default `store` (tcpeval.datastore).
data-push: bootstrap
	$(VENV)/tcpeval data push --campaign $(CAMPAIGN) --backend $(BACKEND)

data-pull: bootstrap
	$(VENV)/tcpeval data pull --campaign $(CAMPAIGN) --backend $(BACKEND)

cleanup: bootstrap
	$(VENV)/tcpeval cleanup

clean:
	rm -rf build .snakemake/incomplete

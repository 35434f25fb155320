# Configuration, the design and the campaign's run list, shared by every rule file.
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from tcpeval import paths, spec

min_version("9.0")

# Rules call the `tcpeval` CLI installed beside the Python that runs Snakemake (.venv/bin),
# whether or not that environment is activated.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


configfile: "config/config.yaml"


validate(config, "../schemas/config.schema.yaml")

try:
    DESIGN = spec.load_design(config["design"])
    RUNS = spec.expand(DESIGN, config["campaign"], config["backend"])
except spec.SpecError as err:
    raise WorkflowError(str(err))

BACKEND = config["backend"]
CAMPAIGN = config["campaign"]
RAW_DIR = config["raw_dir"]
RUN_DIRS = [paths.run_dir(run, RAW_DIR) for run in RUNS]
TRACES = [f"{d}/trace.json" for d in RUN_DIRS]
RESULTS = f"{config['results_dir']}/{BACKEND}/{CAMPAIGN}"
PAPER_PDF = f"{config['paper_dir']}/main.pdf"

# The path grammar (tcpeval.paths) doubles as the wildcard constraints.
wildcard_constraints:
    **paths.WILDCARD_CONSTRAINTS,

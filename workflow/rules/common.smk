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

from tcpeval.backends import algorithms, planning  # noqa: E402  (what the backend can run, before anything runs)

if algorithms.problems(RUNS, config["backend"]):
    raise WorkflowError("\n".join(algorithms.problems(RUNS, config["backend"])))

BACKEND = config["backend"]
CAMPAIGN = config["campaign"]
RAW_DIR = config["raw_dir"]
RUN_DIRS = [paths.run_dir(run, RAW_DIR) for run in RUNS]
TRACES = [f"{d}/trace.json" for d in RUN_DIRS]
# The paper's design keeps results/<backend>/<campaign>; any other design's results live
# under its name, as its raw traces do (tcpeval.paths).
DESIGN_LABEL = spec.design_label(DESIGN)
SCOPE = "/".join(x for x in (BACKEND, DESIGN_LABEL, CAMPAIGN) if x)
RESULTS = f"{config['results_dir']}/{SCOPE}"
PAPER_PDF = f"{config['paper_dir']}/main.pdf"

# The path grammar (tcpeval.paths) doubles as the wildcard constraints.
wildcard_constraints:
    **paths.WILDCARD_CONSTRAINTS,

"""The Snakemake workflow: the DAG of each campaign, the rule per run, config validation,
and one real execution from traces to the PDF."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/default"]
DESIGN = str(REPO / "config" / "design.yaml")


def dry_run(*args):
    proc = subprocess.run([*SNAKEMAKE, "-n", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def job_counts(output):
    """The 'Job stats' table Snakemake prints before it runs (or lists) the jobs: rule ->
    count, up to and including the total."""
    table = re.search(r"Job stats:\n(.*?^total\s+\d+$)", output, re.S | re.M).group(1)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.parametrize("campaign, runs", [("paper", 1280), ("quick", 256), ("smoke", 33)])
def test_dry_run_lists_every_run_of_the_campaign(campaign, runs, tmp_path):
    code, out = dry_run("--config", f"campaign={campaign}", f"raw_dir={tmp_path}/raw",
                        f"results_dir={tmp_path}/results", "-q", "rules")
    assert code == 0, out
    counts = job_counts(out)
    assert counts["run"] == runs
    assert counts["all"] == 1
    assert len(counts) > 3  # analysis, figures and paper jobs follow the runs


def test_a_sequential_campaign_plans_its_first_repetitions_and_the_others_once_asked_for(tmp_path):
    # findings-short-rtt: 48 cells, one repetition each of the 36 its first round runs (12
    # rivals of the rankings wait, spec.deferred_cells); a second repetition's run joins the
    # analysis once `tcpeval next-runs` asked for it and its trace exists
    config = ("--config", "campaign=findings-short-rtt", f"raw_dir={tmp_path}/raw",
              f"results_dir={tmp_path}/results", "-q", "rules")
    code, out = dry_run("analysis", *config)
    assert code == 0, out
    assert job_counts(out)["run"] == 36 and job_counts(out)["metrics_run"] == 36
    second = tmp_path / "raw/emulated/findings-short-rtt/responsiveness/bic/rtt0.2/drop1e-04/rep2/trace.json"
    second.parent.mkdir(parents=True)
    second.write_text("{}")
    code, out = dry_run("analysis", *config)
    assert code == 0, out
    assert job_counts(out)["run"] == 36 and job_counts(out)["metrics_run"] == 37


def test_a_run_typed_by_its_path_gets_its_own_time_limit_in_any_campaign(tmp_path):
    # a findings-low-loss run typed by its path while the configured campaign is smoke: its
    # job asks a cluster for the run's time (300 virtual s, dilated), not the shortest limit
    # (2026-12-04: runtime=10 for a run of 25 min, since only the smoke campaign was looked up)
    from tcpeval import run_index, spec
    from tcpeval.backends import planning
    raw = f"{tmp_path}/raw"
    target = f"{raw}/emulated/findings-low-loss/responsiveness/reno/rtt6.2/drop1e-07/rep1/trace.json"
    code, out = dry_run(target, "--config", f"raw_dir={raw}", "node_faithful_rate=2G")
    assert code == 0, out
    cond = run_index.resolve_path(target, spec.load_design(DESIGN), raw_dir=raw)
    want = planning.time_limit_min(cond, planning.node_ceiling("2G"))
    assert want > planning.TIME_LIMIT_MIN_MIN and re.search(rf"runtime={want}\b", out), (want, out[-2000:])


def test_one_run_path_is_a_target_of_its_own(tmp_path):
    target = f"{tmp_path}/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep3/trace.json"
    code, out = dry_run(target, "--config", "campaign=paper", f"raw_dir={tmp_path}/raw")
    assert code == 0, out
    assert job_counts(out) == {"run": 1, "total": 1}
    assert "tcpeval run" in out and "rtt6.2/drop1e-05/rep3" in out


def test_the_claims_declare_the_other_campaigns_tables_they_read(tmp_path):
    # `tcpeval claims --also quick` reads quick's tables: declared inputs, so a rebuilt
    # quick campaign rebuilds smoke's claims (where quick has no tables, none are asked for)
    quick = tmp_path / "results" / "emulated" / "quick"
    quick.mkdir(parents=True)
    for name in ("runs", "flows", "samples"):
        (quick / f"{name}.parquet").write_bytes(b"")
    code, out = dry_run("--config", "campaign=smoke", f"raw_dir={tmp_path}/raw",
                        f"results_dir={tmp_path}/results")
    assert code == 0, out
    claims = re.search(r"rule claims:\n(.*?)\n\n", out, re.S).group(1)
    assert f"{quick}/runs.parquet" in claims and f"{quick}/samples.parquet" in claims
    assert "validation/runs.parquet" not in claims


def test_invalid_config_value_stops_before_any_job():
    code, out = dry_run("--config", "backend=simulated")
    assert code != 0
    assert "backend" in out and "simulated" in out


def test_unknown_campaign_stops_with_allowed_values():
    code, out = dry_run("--config", "campaign=full")
    assert code != 0
    assert "unknown campaign 'full'" in out and "paper, findings, findings-short-rtt, findings-long-rtt-responsiveness, findings-long-rtt-pairs, findings-long-rtt-convergence, findings-low-loss, quick, validation, dilation, dilation-quick, dilation-long, stopping, stopping-quick, smoke" in out


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
@pytest.mark.parametrize("target, campaign, runs", [("runs", "smoke", 33), ("validation", "validation", 96),
                                                    ("validate-dilation", "dilation-quick", 72)])
def test_make_targets_hand_snakemake_their_target_and_config(target, campaign, runs, tmp_path):
    # --config takes every name=value after it: a Snakemake target behind it was refused
    # ("Config entries have to be defined as name=value pairs") -- make runs, make validation
    cfg = f"raw_dir={tmp_path}/raw results_dir={tmp_path}/results"
    proc = subprocess.run(["make", target, "SNAKEMAKE_ARGS=-n -q rules", f"CONFIG_ARGS={cfg}",
                           "DILATION_CAMPAIGN=dilation-quick", f"DILATION_RESULTS={tmp_path}/results/emulated/dilation-quick",
                           f"VENV={Path(sys.executable).parent}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert "Config entries have to be defined" not in out
    counts = job_counts(out)
    assert counts["run"] == runs, out
    if target == "validate-dilation":  # the dry run leaves no tables: the check says what to run
        assert proc.returncode != 0 and "make validate-dilation" in out
    else:
        assert proc.returncode == 0, out


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_findings_asks_for_the_next_round_where_config_args_put_the_campaign(tmp_path):
    # the rounds' loop reads the tables and traces where the workflow writes them: a
    # CONFIG_ARGS results_dir= / raw_dir= moves both (it had read results/ and data/raw/)
    cfg = f"raw_dir={tmp_path}/raw results_dir={tmp_path}/results"
    proc = subprocess.run(["make", "findings", "FINDINGS=findings-short-rtt", "SNAKEMAKE_ARGS=-n -q rules",
                           f"CONFIG_ARGS={cfg}", f"VENV={Path(sys.executable).parent}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (f"next-runs --results {tmp_path}/results/emulated/findings-short-rtt --raw-dir {tmp_path}/raw"
            in out), out
    # a dry run writes no tables: next-runs says so, and the loop ends
    assert f"{tmp_path}/results/emulated/findings-short-rtt/runs.parquet: no runs table" in out


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_findings_with_hours_runs_the_cheapest_findings_cells_then_analyses_what_exists(tmp_path):
    # FINDINGS_HOURS: the first round finding by finding (tcpeval plan --by-finding), one
    # run at a time, then the analysis of the traces that exist -- whose allow_missing had
    # been handed over as the string 'true', which the config's schema refuses
    cfg = f"raw_dir={tmp_path}/raw results_dir={tmp_path}/results"
    proc = subprocess.run(["make", "findings", "FINDINGS=findings-short-rtt", "FINDINGS_HOURS=0.05",
                           "SNAKEMAKE_ARGS=-n -q rules", f"CONFIG_ARGS={cfg}", f"VENV={Path(sys.executable).parent}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert re.search(r"in 0\.05 h: [1-9]\d* of \d+ findings have all their cells run once", out), out
    assert "On instance['allow_missing']" not in out, out
    # each fitting run was handed to Snakemake alone (a dry run lists it as one run job)
    assert job_counts(out)["run"] == 1, out


def _tiny_campaign(root: Path, duration: str | None = "2") -> list[Path]:
    """A work directory with the workflow's config and manuscript, and synthetic traces for
    a quarter of the smoke campaign (every fourth flagged), `duration` s long (2: shorter
    than the design's runs, which only a rerun `run` job would notice; None: as long as
    the design's); returns the traces."""
    from tcpeval.cli import main

    (root / "config").mkdir()
    shutil.copy2(REPO / "config" / "config.yaml", root / "config" / "config.yaml")
    shutil.copy2(DESIGN, root / "config" / "design.yaml")  # the workflow's design (config.yaml)
    (root / "paper").mkdir()
    for name in ("main.tex", "claims.yaml"):
        shutil.copy2(REPO / "paper" / name, root / "paper" / name)
    assert main(["synthetic", str(root / "data" / "raw"), "--design", DESIGN,
                 *(["--duration", duration] if duration else []),
                 "--fraction", "0.25", "--flag-every", "4"]) == 0
    return sorted((root / "data" / "raw").rglob("trace.json"))


def _snakemake(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-c2", "--config", "allow_missing=True",
                           *args], cwd=root, capture_output=True, text=True, timeout=600)


def test_snakemake_takes_a_tiny_campaign_from_traces_to_the_pdf(tmp_path):
    """The workflow itself, every rule from metrics_run to paper, without the network:
    synthetic traces stand in for runs, and allow_missing analyses what exists, so no
    `run` job (no emulation) is scheduled."""
    traces = _tiny_campaign(tmp_path)
    proc = _snakemake(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    counts = job_counts(out)
    assert counts["metrics_run"] == len(traces) > 4
    assert "run" not in counts and counts["paper"] == counts["metrics_gather"] == counts["all"] == 1
    assert counts["figure"] == 2 + 3  # responsiveness at the smoke campaign's two RTTs, figs. 8-10
    pdf = tmp_path / "paper" / "main.pdf"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1)) >= 4
    text = " ".join(subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                                   check=True).stdout.split())
    assert "synthetic" in text and "campaign smoke" in text and "??" not in text
    verdicts = [json.loads(t.read_text())["fidelity"]["verdict"] for t in traces]
    assert "flagged" in verdicts  # flagged runs are left out, and counted
    assert f"({verdicts.count('ok')} of 33 runs used)" in text
    assert f"{verdicts.count('flagged')} run(s) with fidelity verdict" in text
    _snakemake_report_is_whole_in_a_browser(tmp_path)
    # every system file the build read (fonts too) comes from tools/apt-packages.txt
    sys.path.insert(0, str(REPO / "tests" / "deps"))
    import deps_check
    problems = deps_check.latex_input_problems(tmp_path / "paper" / "build" / "main.fls",
                                               REPO / "tools" / "apt-packages.txt")
    assert not problems, "\n".join(problems)
    # the design is an input of every rule after the runs: editing it rebuilds the figures,
    # tables, numbers and the PDF, and neither a run nor a trace's metrics
    # (a new mtime alone is not enough: Snakemake reruns only when the content changed)
    with open(tmp_path / "config" / "design.yaml", "a") as f:
        f.write("# edited\n")
    proc = _snakemake(tmp_path, "-n", "-q", "rules")
    counts = job_counts(proc.stdout + proc.stderr)
    assert proc.returncode == 0 and "run" not in counts and "metrics_run" not in counts, proc.stdout
    assert "metrics_gather" not in counts and counts["figure"] == 5
    assert all(counts[r] == 1 for r in ("table1", "table2", "claims", "macros", "validation", "dilation_check"))


def _snakemake_report_is_whole_in_a_browser(root: Path) -> None:
    """`snakemake --report` of the campaign just built: each figure with its caption, and
    the page as Chromium shows it -- its app renders without a script error, every figure
    it carries decodes, nothing scrolls sideways (screenshot beside the test's files)."""
    from browser_check import open_page, problems

    report = _snakemake(root, "--report", "report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    html = (root / "report.html").read_text(errors="replace")
    for name in ("responsiveness-rtt6.2.png", "utilisation.png", "convergence.png", "flows.png"):
        assert name in html
    # one caption file, the text of each figure's kind (workflow/report/figure.rst)
    for caption in ("Responsiveness and efficiency at one RTT", "Link utilisation (Fig. 8)",
                    "Convergence (Fig. 9)", "Per-flow mean throughput"):
        assert caption in html
    seen = open_page(root / "report.html", root / "snakemake-report.png")
    assert not problems(seen), problems(seen)
    assert {"Workflow", "Statistics", "Results"} <= set(seen["text"].split()), seen["text"][:2000]  # the app ran
    # the five figures (and Snakemake's logo), each decoded at its drawn size
    assert sum(i["ok"] and i["width"] > 900 for i in seen["embedded"]) >= 5, seen["embedded"]


def test_config_defaults_are_the_schemas(tmp_path):
    """A config.yaml without the optional keys takes the schema's defaults (validate() fills
    them in): allow_missing false (the missing runs are run first), no --skip-bad, no
    --include-flagged, and no convergence parameters (the metrics command's own, the
    paper's); a config that sets them passes them on."""
    (tmp_path / "config").mkdir()
    optional = ("include_flagged:", "allow_missing:", "skip_bad:", "metrics:")
    text = (REPO / "config" / "config.yaml").read_text()
    (tmp_path / "config" / "config.yaml").write_text(
        "".join(line for line in text.splitlines(keepends=True) if not line.startswith(optional)))
    (tmp_path / "paper").mkdir()
    for name in ("main.tex", "claims.yaml"):
        shutil.copy2(REPO / "paper" / name, tmp_path / "paper" / name)
    proc = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-n", "-p", "--config", f"design={DESIGN}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    counts = job_counts(out)
    assert counts["run"] == counts["metrics_run"] == 33
    assert "--lambda" not in out and "--epsilon" not in out
    assert "--skip-bad" not in out and "--include-flagged" not in out
    (tmp_path / "metrics.yaml").write_text("metrics: {lambda: 0.2, epsilon: 0.9}\n")
    proc = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-n", "-p", "--configfile", "metrics.yaml",
                           "--config", f"design={DESIGN}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "--lambda 0.2 --epsilon 0.9" in proc.stdout + proc.stderr


@pytest.mark.parametrize("figure, command", [
    ("responsiveness-rtt6.2", "tcpeval figure responsiveness --rtt 6.2 --results"),
    ("utilisation", "tcpeval figure utilisation --results"),
    ("convergence", "tcpeval figure convergence --results"),
    ("flows", "tcpeval figure flows --results")])
def test_one_rule_draws_every_figure(figure, command, tmp_path):
    target = f"{tmp_path}/results/emulated/smoke/figures/{figure}.pdf"
    code, out = dry_run(target, "-p", "--config", "allow_missing=True", f"raw_dir={tmp_path}/raw",
                        f"results_dir={tmp_path}/results")
    assert code == 0, out
    assert job_counts(out)["figure"] == 1
    assert command in out and f"--design config/design.yaml --out-dir {tmp_path}/results/emulated/smoke/figures" in out
    assert f"logs/figures/emulated/smoke/{figure}.log" in out


@pytest.mark.parametrize("figure", ["bogus", "responsiveness", "responsiveness-rttx", "flows-rtt6.2"])
def test_figure_names_outside_the_known_ones_have_no_rule(figure, tmp_path):
    code, out = dry_run(f"{tmp_path}/results/emulated/smoke/figures/{figure}.pdf", "--config",
                        f"raw_dir={tmp_path}/raw", f"results_dir={tmp_path}/results")
    assert code != 0 and "MissingRuleException" in out, out


LINT = REPO / "tools" / "lint-workflow.sh"


def _bin(name):
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} not installed beside {sys.executable}")
    return str(path)


def test_snakemake_lint_finds_nothing_but_the_conda_advice():
    """make lint: the paper's design and a non-paper one (tools/lint-workflow.sh)."""
    proc = subprocess.run([str(LINT), _bin("snakemake"), "", "campaign=short design=config/designs/udp-burst.yaml"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("clean (but for the conda/container advice)") == 2


def test_lint_script_fails_on_any_other_finding_and_on_a_broken_workflow(tmp_path):
    (tmp_path / "tools").mkdir()
    shutil.copy2(LINT, tmp_path / "tools")
    (tmp_path / "Snakefile").write_text('rule a:\n    output:\n        "/tmp/a"\n    log:\n        "a.log"\n'
                                        '    shell:\n        "touch {output} 2> {log}"\n')
    proc = subprocess.run([str(tmp_path / "tools" / LINT.name), _bin("snakemake")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 1 and 'Absolute path "/tmp/a"' in proc.stderr, proc.stdout + proc.stderr
    assert "conda environment" not in proc.stderr  # the advice is not shown as a finding
    (tmp_path / "Snakefile").write_text("rule a:\n    output: undefined_name\n")
    proc = subprocess.run([str(tmp_path / "tools" / LINT.name), _bin("snakemake")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 1 and "failed" in proc.stderr, proc.stdout + proc.stderr


def test_workflow_is_snakefmt_formatted():
    proc = subprocess.run([_bin("snakefmt"), "--check", "Snakefile", "workflow/"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_rule_from_the_metrics_to_the_pdf_reruns_when_the_code_changes():
    # Snakemake's triggers see files and params, not the package: each rule that turns
    # traces into numbers, figures or the PDF takes the code's content hash as a param
    # (common.smk code_hash); the runs themselves never rerun for it.
    for name in ("analysis", "figures", "paper", "report"):
        text = (REPO / "workflow" / "rules" / f"{name}.smk").read_text()
        for rule in re.split(r"\n(?=rule )", text)[1:]:
            if "    shell:" in rule:
                assert "        code=CODE," in rule, rule.splitlines()[0]
    assert "code=CODE" not in (REPO / "workflow" / "rules" / "runs.smk").read_text()


def _mark_incomplete_as_snakemake_does(root: Path, target: str) -> None:
    """What Snakemake leaves for a job it saw interrupted (its file persistence: the output's
    path, urlsafe-base64, under .snakemake/incomplete), as after a stop that came while
    `tcpeval run` wrote the trace (2026-12-04: the next invocation removed a complete trace)."""
    from base64 import urlsafe_b64encode
    marker = root / ".snakemake" / "incomplete" / urlsafe_b64encode(target.encode()).decode()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"external_jobid": None}))


@pytest.mark.parametrize("how", ["interrupted", "forced"])
def test_a_trace_that_exists_survives_a_job_snakemake_reruns(how, tmp_path):
    """A trace is written whole or not at all, so one that exists is complete: a `run` job
    Snakemake reruns (the profile's rerun-incomplete, or --forcerun) keeps it byte for byte,
    says so in its log, and starts no emulation."""
    trace = _tiny_campaign(tmp_path, duration=None)[0]   # recorded under the design's condition
    target = str(trace.relative_to(tmp_path))
    before = trace.read_bytes()
    if how == "interrupted":
        _mark_incomplete_as_snakemake_does(tmp_path, target)
        extra = []
    else:
        extra = ["--forcerun", "run"]  # after the target: --forcerun takes every word that follows
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--profile", str(REPO / "workflow/profiles/default"),
                           "-s", str(REPO / "Snakefile"), target, *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert job_counts(out).get("run") == 1 and "Forced execution" in out  # the rerun did happen
    assert trace.read_bytes() == before
    log = tmp_path / target.replace("data/raw/", "logs/", 1).replace("trace.json", "run.log")
    assert f"{target}: kept: it exists" in log.read_text() and "tcpeval run --force" in log.read_text()
    again = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-n", target], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout


def test_a_run_whose_condition_the_design_changed_is_rerun_and_its_old_trace_refused_by_name(tmp_path):
    """The run job's params carry its condition: after the design changes it (here the
    smoke runs' length), Snakemake reruns that job, and the run refuses to keep the trace
    recorded under the old condition, naming the field, and leaves it byte for byte."""
    trace = _tiny_campaign(tmp_path, duration=None)[0]
    target = str(trace.relative_to(tmp_path))
    before = trace.read_bytes()
    first = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-c2", target, "--forcerun", "run"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]   # kept: its params are recorded
    design = tmp_path / "config" / "design.yaml"
    text = design.read_text()
    assert text.count("    duration_s: 4\n") == 1
    design.write_text(text.replace("    duration_s: 4\n", "    duration_s: 5\n"))
    dry = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-n", target], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert "params have changed" in (dry.stdout + dry.stderr).lower(), dry.stdout[-3000:]
    proc = subprocess.run([*SNAKEMAKE[:3], "-s", str(REPO / "Snakefile"), "-c2", target], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    log = tmp_path / target.replace("data/raw/", "logs/", 1).replace("trace.json", "run.log")
    assert "recorded under another condition than the design's now" in log.read_text()
    assert "duration_s: 4.0 -> 5.0" in log.read_text()
    assert trace.read_bytes() == before

"""End to end: synthetic smoke traces -> tidy tables -> figures, tables, macros, claims ->
paper/main.pdf with latexmk. The log must be free of undefined references and values,
and every figure must be included."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpeval.cli import main
from tcpeval.report import paper
from tcpeval.spec import REPO_ROOT

from report_helpers import build_results, copy_paper  # noqa: E402

needs_latex = pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")


def _generate(results: Path, paper_dir: Path, cc_params: Path) -> None:
    r = str(results)
    out = results / "paper"
    assert main(["figure", "all", "--results", r]) == 0
    assert main(["table", "table1", "--cc-params", str(cc_params), "--out", str(out / "table1.tex")]) == 0
    assert main(["table", "table2", "--results", r, "--out", str(out / "table2.tex")]) == 0
    assert main(["claims", "--results", r, "--claims", str(paper_dir / "claims.yaml"),
                 "--out-tex", str(out / "claims.tex"), "--out-json", str(out / "claims.json")]) == 0
    assert main(["macros", "--results", r, "--claims-json", str(out / "claims.json"),
                 "--out", str(out / "macros.tex")]) == 0


@needs_latex
def test_pdf_from_synthetic_smoke_traces(tmp_path, cc_params_file):
    results = build_results(tmp_path, flag_every=5)
    paper_dir = copy_paper(tmp_path)
    _generate(results, paper_dir, cc_params_file)
    assert main(["paper", "build", "--results", str(results), "--paper-dir", str(paper_dir)]) == 0
    pdf = paper_dir / "main.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    log = (paper_dir / "build" / "main.log").read_text(errors="replace")
    assert paper.log_problems(paper_dir / "build" / "main.log") == []
    assert "undefined" not in log.lower()
    figures = sorted((results / "figures").glob("*.pdf"))
    assert len(figures) == 5       # two RTTs in smoke + utilisation, convergence, flows
    flat = log.replace("\n", "")   # TeX wraps long lines in the log
    for fig in figures:
        assert f"generated/figures/{fig.name}" in flat, fig.name
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
        assert "emulated" in text and "smoke" in text and "synthetic" in text
        assert "??" not in text


@needs_latex
def test_undefined_value_fails_the_build(tmp_path, cc_params_file):
    results = build_results(tmp_path, flag_every=0)
    paper_dir = copy_paper(tmp_path)
    _generate(results, paper_dir, cc_params_file)
    main_tex = paper_dir / "main.tex"
    main_tex.write_text(main_tex.read_text().replace("\\end{document}", "\\tev{no/such/key}\n\\end{document}"))
    with pytest.raises(paper.PaperError, match="no/such/key"):
        paper.build(results, paper_dir)


@pytest.mark.slow
@needs_latex
def test_snakemake_builds_the_paper(tmp_path):
    """The workflow itself (rules metrics_run ... paper), on synthetic smoke traces."""
    root = tmp_path
    (root / "config").mkdir()
    shutil.copy2(REPO_ROOT / "config" / "config.yaml", root / "config" / "config.yaml")
    copy_paper(root)
    design = str(REPO_ROOT / "config" / "design.yaml")
    assert main(["synthetic", str(root / "data" / "raw"), "--design", design, "--duration", "3",
                 "--fraction", "0.5", "--flag-every", "4"]) == 0
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmd = [str(Path(sys.executable).parent / "snakemake"), "-s", str(REPO_ROOT / "Snakefile"), "-c2",
           "--config", f"design={design}", "allow_missing=True"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (root / "paper" / "main.pdf").exists()
    report = subprocess.run(cmd[:-3] + ["--config", f"design={design}", "--report", "report.html"],
                            cwd=root, env=env, capture_output=True, text=True)
    assert report.returncode == 0 and (root / "report.html").stat().st_size > 10000

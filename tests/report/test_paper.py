"""End to end: synthetic smoke traces -> tidy tables -> figures, tables, macros, claims ->
paper/main.pdf with latexmk. The log must be free of undefined references and values,
and every figure must be included."""
import shutil
import subprocess
from pathlib import Path

import pytest
from report_helpers import build_results, copy_paper  # noqa: E402

from tcpeval.cli import main
from tcpeval.report import paper

needs_latex = pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")


def _generate(results: Path, paper_dir: Path, cc_params: Path) -> None:
    r = str(results)
    out = results / "paper"
    assert main(["figure", "all", "--results", r]) == 0
    assert main(["table", "table1", "--cc-params", str(cc_params), "--out", str(out / "table1.tex")]) == 0
    assert main(["table", "table2", "--results", r, "--out", str(out / "table2.tex")]) == 0
    assert main(["claims", "--results", r, "--claims", str(paper_dir / "claims.yaml"),
                 "--out-tex", str(out / "claims.tex"), "--out-json", str(out / "claims.json"),
                 "--also", "quick", "--also", "paper",
                 "--out-campaigns-tex", str(out / "claims-campaigns.tex")]) == 0
    assert main(["validation", "--results", str(results.parent / "validation"),
                 "--fig-dir", str(results / "figures"), "--out-tex", str(out / "validation.tex")]) == 0
    assert main(["dilation-check", "--results", str(results.parent / "dilation"),
                 "--fig-dir", str(results / "figures"), "--out-tex", str(out / "dilation-check.tex")]) == 0
    assert main(["stopping-check", "--results", str(results.parent / "stopping"),
                 "--fig-dir", str(results / "figures"), "--out-tex", str(out / "stopping-check.tex")]) == 0
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
        assert "The validation campaign has not been run" in text
        assert "longer runs has not been run" in " ".join(text.split())
        assert "Campaigns without results for this backend: quick, paper" in text


@needs_latex
def test_undefined_value_fails_the_build(tmp_path, cc_params_file):
    results = build_results(tmp_path, flag_every=0)
    paper_dir = copy_paper(tmp_path)
    _generate(results, paper_dir, cc_params_file)
    main_tex = paper_dir / "main.tex"
    main_tex.write_text(main_tex.read_text().replace("\\end{document}", "\\tev{no/such/key}\n\\end{document}"))
    with pytest.raises(paper.PaperError, match="no/such/key"):
        paper.build(results, paper_dir)

"""A LaTeX build that fails for a missing TeX package names the file and the fix, and the
next build in the same build directory succeeds once the package is there (real latexmk
and pdflatex; the package is "installed" into a TeX search path of its own, as apt
would, without touching the document)."""
import shutil
import subprocess

import pytest

from tcpeval.report import latexmk, paper, texfiles

pytestmark = pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")

DOC = r"""\documentclass{article}
\usepackage{tevnosuchpkg}
\begin{document}
Recovered after the package arrived.
\end{document}
"""


def _paper_inputs(tmp_path):
    """The smallest inputs paper.build stages, and a manuscript needing a missing package."""
    results = tmp_path / "results"
    (results / "paper").mkdir(parents=True)
    (results / "figures").mkdir()
    for name in paper.GENERATED:
        (results / "paper" / name).write_text("% generated\n")
    for name in ("utilisation", "convergence", "flows"):
        (results / "figures" / f"{name}.tex").write_text("% generated\n")
    paper_dir = tmp_path / "paper"
    paper_dir.mkdir()
    (paper_dir / "main.tex").write_text(DOC)
    return results, paper_dir


def _install_package(tmp_path, monkeypatch):
    texmf = tmp_path / "texmf"
    texmf.mkdir()
    (texmf / "tevnosuchpkg.sty").write_text("\\ProvidesPackage{tevnosuchpkg}\n")
    monkeypatch.setenv("TEXINPUTS", f"{texmf}:")  # trailing ':' keeps the system tree


def test_missing_package_is_named_with_its_fix_and_the_next_build_recovers(tmp_path, monkeypatch):
    monkeypatch.delenv("TEXINPUTS", raising=False)
    results, paper_dir = _paper_inputs(tmp_path)
    with pytest.raises(paper.PaperError) as failed:
        paper.build(results, paper_dir)
    message = str(failed.value)
    assert "! LaTeX Error: File `tevnosuchpkg.sty' not found" in message
    assert "fix: tevnosuchpkg.sty is in no package this project knows" in message
    assert "apt-file search tevnosuchpkg.sty" in message and "tools/apt-packages.txt" in message
    assert "make bootstrap" in message
    assert not (paper_dir / "build" / "main.fdb_latexmk").exists()  # no state left to trust
    assert (paper_dir / "build" / "main.log").exists()              # the log stays to read

    _install_package(tmp_path, monkeypatch)
    pdf = paper.build(results, paper_dir)
    assert pdf == paper_dir / "main.pdf" and pdf.read_bytes().startswith(b"%PDF")
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Recovered after the package arrived." in " ".join(text.split())


def test_latexmk_on_its_own_would_answer_nothing_to_do(tmp_path, monkeypatch):
    """Why the build forgets latexmk's state: kept, it hides the fix (the trap above)."""
    monkeypatch.delenv("TEXINPUTS", raising=False)
    (tmp_path / "main.tex").write_text(DOC)
    cmd = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-outdir=build", "main.tex"]
    assert subprocess.run(cmd, cwd=tmp_path, capture_output=True).returncode != 0
    _install_package(tmp_path, monkeypatch)
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode != 0 and "Nothing to do" in again.stdout + again.stderr
    latexmk.forget_state(tmp_path / "build", "main")
    assert latexmk.compile_pdf(tmp_path).ok


def test_a_missing_file_of_the_manuscript_names_its_debian_package():
    log = "! LaTeX Error: File `lmodern.sty' not found.\n\nType X to quit\n! LaTeX Error: File `lmodern.sty' not found."
    assert texfiles.missing_files(log) == ["lmodern.sty"]
    fix = texfiles.fix_for("lmodern.sty")
    assert "Debian package 'lmodern'" in fix and "make bootstrap" in fix and "tools/apt-packages.txt" in fix

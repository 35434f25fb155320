"""Helpers of the report tests (imported by conftest.py and test modules)."""
import shutil
import subprocess
from pathlib import Path

from tcpeval import spec
from tcpeval.analysis import synthetic
from tcpeval.cli import main

REPO = Path(__file__).resolve().parents[2]
# Same shape as `tcpeval cc params --json` ({variant: {name: {value, description, kind}}}).
# A test fixture only: the workflow always reads the real one from tcpeval.cc.
CC_PARAMS_FIXTURE = {
    "reno": {"md_shift": {"value": 1, "description": "beta = 0.5", "kind": "param"}},
    "scalable": {"ai_cnt": {"value": 50, "description": "Low Window", "kind": "param"}},
    "highspeed": {"high_p": {"value": "1e-7", "description": "High P", "kind": "note"}},
    "htcp": {"delta_b_pct": {"value": 20, "description": "Delta_B", "kind": "param"}},
    "bic": {"beta": {"value": 819, "description": "beta/1024", "kind": "param"}},
    "cubic": {"beta": {"value": 717, "description": "beta/1024", "kind": "param"}},
}


def build_results(root: Path, *, fraction: float = 1.0, flag_every: int = 6) -> Path:
    """Synthetic smoke traces -> tidy tables under root/results/emulated/smoke."""
    raw = root / "raw"
    design = spec.load_design()
    conds = synthetic.campaign_conditions(design, "smoke", "emulated", duration_s=3.0)
    if fraction < 1:
        conds = conds[:: round(1 / fraction)]
    synthetic.write_traces(conds, raw, flag_every=flag_every)
    assert main(["metrics", "build", "--raw-dir", str(raw), "--results-dir", str(root / "results")]) == 0
    return root / "results" / "emulated" / "smoke"


def copy_paper(dest: Path) -> Path:
    paper = dest / "paper"
    paper.mkdir(parents=True)
    for name in ("main.tex", "claims.yaml"):
        shutil.copy2(REPO / "paper" / name, paper / name)
    return paper


def keep_drawn(monkeypatch, module) -> list:
    """Draw with the real figure code of ``module`` (its ``_save``) and keep each
    matplotlib figure to read back."""
    kept, save = [], module._save

    def keep(fig, prefix):
        kept.append(fig)
        return save(fig, prefix)

    monkeypatch.setattr(module, "_save", keep)
    return kept


def overlapping_texts(fig, text: str | None = None) -> list[tuple[str, str]]:
    """Pairs of texts (only those reading ``text``, if given) drawn in one axes whose
    boxes overlap as rendered."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)  # the figure was saved and closed: draw it again
    canvas.draw()
    renderer = canvas.get_renderer()
    pairs = []
    for ax in fig.axes:
        texts = [t for t in ax.texts if t.get_text().strip() and t.get_visible()
                 and (text is None or t.get_text() == text)]
        boxes = [t.get_window_extent(renderer) for t in texts]
        pairs += [(texts[i].get_text(), texts[j].get_text())
                  for i in range(len(texts)) for j in range(i + 1, len(texts)) if boxes[i].overlaps(boxes[j])]
    return pairs


def compile_paragraph(root: Path, snippet: str) -> None:
    """Compile root/main.tex that inputs generated/<snippet> (twice: the second pass
    resolves its figure reference); the log must have nothing undefined."""
    (root / "main.tex").write_text("\\documentclass{article}\\usepackage{graphicx}\n"
                                   f"\\begin{{document}}\n\\input{{generated/{snippet}}}\n"
                                   "\\end{document}\n")
    for _ in range(2):
        subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
                       cwd=root, capture_output=True, check=True, timeout=120)
    log = (root / "main.log").read_text(errors="replace")
    assert "undefined" not in log.lower() and (root / "main.pdf").stat().st_size > 5000

"""Stage the generated files into the paper and build it with latexmk (pdflatex).

RESULTS/paper/{macros,table1,table2,claims,claims-campaigns,validation,dilation-check,stopping-check}.tex and
RESULTS/figures/*.{pdf,tex} are copied into PAPER/generated/ (wiped first, so nothing stale survives); latexmk builds in
PAPER/build/ (tcpeval.report.latexmk: a failed build leaves no state that would stop the
next one) and the PDF is copied to PAPER/main.pdf. The log is then checked: an
undefined reference, citation or tcpeval value fails the build, and a missing TeX file
is named with the Debian package that ships it.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from tcpeval.report import latexmk, texfiles

BUILD_DIR = "build"
GENERATED = ("macros.tex", "table1.tex", "table2.tex", "claims.tex", "claims-campaigns.tex",
             "validation.tex", "dilation-check.tex", "stopping-check.tex")
LOG_PROBLEMS = (
    re.compile(r"Package tcpeval Warning: .*"),
    re.compile(r"LaTeX Warning: (Reference|Citation) .* undefined.*"),
    re.compile(r"LaTeX Warning: There were undefined references.*"),
    re.compile(r"! .*"),
)


class PaperError(RuntimeError):
    pass


def _rtt_of(path: Path) -> float:
    m = re.search(r"rtt([0-9.]+)$", path.stem)
    return float(m.group(1)) if m else float("inf")


def stage(results: Path, paper_dir: Path) -> Path:
    gen = paper_dir / "generated"
    if gen.exists():
        for item in gen.iterdir():
            if item.name == ".gitignore":
                continue
            shutil.rmtree(item) if item.is_dir() else item.unlink()
    (gen / "figures").mkdir(parents=True, exist_ok=True)
    for name in GENERATED:
        src = results / "paper" / name
        if not src.exists():
            raise PaperError(f"{src} is missing; build it first (snakemake {src})")
        shutil.copy2(src, gen / name)
    figdir = results / "figures"
    for src in sorted(figdir.glob("*.pdf")) + sorted(figdir.glob("*.tex")):
        shutil.copy2(src, gen / "figures" / src.name)
    for name in ("utilisation", "convergence", "flows"):
        if not (gen / "figures" / f"{name}.tex").exists():
            raise PaperError(f"{figdir}/{name}.tex is missing; run `tcpeval figure {name}`")
    resp = sorted((gen / "figures").glob("responsiveness-rtt*.tex"), key=_rtt_of)
    (gen / "figures-responsiveness.tex").write_text(
        "% generated: one figure per RTT of the campaign\n"
        + "".join(f"\\input{{generated/figures/{p.name}}}\n" for p in resp))
    return gen


def log_problems(log: Path) -> list[str]:
    text = log.read_text(errors="replace")
    found = []
    for pat in LOG_PROBLEMS:
        found += [m.group(0).strip() for m in pat.finditer(text)]
    return found


def build(results: Path, paper_dir: Path, latex: bool = True) -> Path:
    stage(results, paper_dir)
    if not latex:
        return paper_dir / "generated"
    try:
        run = latexmk.compile_pdf(paper_dir, "main.tex", BUILD_DIR)
    except latexmk.LatexmkMissing as err:
        raise PaperError(str(err)) from err
    log_text = run.log.read_text(errors="replace") if run.log.exists() else ""
    problems = log_problems(run.log) if log_text else []
    if not run.ok or problems:
        latexmk.forget_state(paper_dir / BUILD_DIR, "main")
        fixes = [f"fix: {texfiles.fix_for(name)}" for name in texfiles.missing_files(log_text)]
        tail = "\n".join(run.output.splitlines()[-15:])
        raise PaperError(f"LaTeX build failed in {paper_dir} (log: {run.log}):\n  "
                         + "\n  ".join(problems[:20] or ["latexmk exit status " + str(run.returncode)])
                         + "".join(f"\n{fix}" for fix in fixes)
                         + f"\n{tail}")
    pdf = paper_dir / "main.pdf"
    shutil.copy2(run.pdf, pdf)
    return pdf

"""Compile a LaTeX document with latexmk (pdflatex) in a build directory that a failed run
never poisons.

latexmk decides what to rerun from its database (<job>.fdb_latexmk): after a failure
whose cause lies outside the document (a TeX package installed since, a font map
rebuilt), it finds no changed input and answers "Nothing to do" forever. A failed run
therefore removes that database and the auxiliary file; the log stays for reading, and
the next run starts from the sources.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# latexmk's state: without these the next run compiles from scratch
STATE_SUFFIXES = (".fdb_latexmk", ".aux", ".fls")


@dataclass
class Result:
    ok: bool
    returncode: int
    log: Path
    pdf: Path
    output: str  # latexmk's stdout and stderr


class LatexmkMissing(RuntimeError):
    pass


def forget_state(build_dir: Path, job: str) -> None:
    for suffix in STATE_SUFFIXES:
        (build_dir / f"{job}{suffix}").unlink(missing_ok=True)


def compile_pdf(doc_dir: Path, main: str = "main.tex", build: str = "build") -> Result:
    """latexmk -pdf `main` in `doc_dir`, output in doc_dir/build. On failure (or an
    interruption) latexmk's state is forgotten, so the next call compiles again."""
    if shutil.which("latexmk") is None:
        raise LatexmkMissing("latexmk not found: run `make bootstrap` (it installs the Debian "
                             "packages in tools/apt-packages.txt, latexmk among them)")
    job = Path(main).stem
    build_dir = doc_dir / build
    cmd = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
           f"-outdir={build}", main]
    ok = False
    try:
        proc = subprocess.run(cmd, cwd=doc_dir, capture_output=True, text=True)
        ok = proc.returncode == 0
    finally:
        if not ok:
            forget_state(build_dir, job)
    return Result(ok, proc.returncode, build_dir / f"{job}.log", build_dir / f"{job}.pdf",
                  proc.stdout + proc.stderr)

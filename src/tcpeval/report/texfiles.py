"""Which Debian package ships a TeX file the manuscript loads, and the fix to print when
LaTeX cannot find one.

Where a file is installed, dpkg knows its package; this table answers for the files that
are not (Debian 12, TeX Live 2022), and tests/deps checks every entry against dpkg on a
machine where the file is installed.
"""
from __future__ import annotations

import re

APT_LIST = "tools/apt-packages.txt"
DEBIAN_PACKAGE = {
    "article.cls": "texlive-latex-base",
    "fontenc.sty": "texlive-latex-base",
    "t1enc.def": "texlive-latex-base",
    "lmodern.sty": "lmodern",
    "geometry.sty": "texlive-latex-base",
    "microtype.sty": "texlive-latex-recommended",
    "amsmath.sty": "texlive-latex-base",
    "graphicx.sty": "texlive-latex-base",
    "booktabs.sty": "texlive-latex-recommended",
    "longtable.sty": "texlive-latex-base",
    "array.sty": "texlive-latex-base",
    "caption.sty": "texlive-latex-recommended",
    "hyperref.sty": "texlive-latex-base",
}
MISSING_FILE = re.compile(r"! LaTeX Error: File `([^']+)' not found")


def missing_files(log_text: str) -> list[str]:
    """The files a LaTeX log says it could not find (in order, once each)."""
    return list(dict.fromkeys(MISSING_FILE.findall(log_text)))


def fix_for(name: str) -> str:
    """What to do about a missing TeX file, naming the Debian package when known."""
    package = DEBIAN_PACKAGE.get(name)
    if package:
        return (f"{name} is in the Debian package '{package}': run `make bootstrap` (it installs "
                f"{APT_LIST}); if that list has no line '{package}', add it first")
    return (f"{name} is in no package this project knows: find the Debian package that ships it "
            f"(apt-file search {name}), add it as a line to {APT_LIST}, then run `make bootstrap`")

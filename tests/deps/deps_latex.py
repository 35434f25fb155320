"""The TeX files the manuscript loads: its class, its packages (and font encodings), and
whatever the generated .tex files load (read from the strings of tcpeval.report, which
writes them: the generated files can only contain what those strings do)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

LOADS = re.compile(r"\\(documentclass|usepackage|RequirePackage)\s*(?:\[([^\]]*)\])?\s*\{([^}]+)\}")


def tex_files(text: str) -> list[str]:
    """File names a LaTeX source loads: article.cls, lmodern.sty, t1enc.def, ..."""
    text = re.sub(r"(?<!\\)%.*", "", text)
    files = []
    for kind, options, names in LOADS.findall(text):
        for name in (n.strip() for n in names.split(",")):
            if kind == "documentclass":
                files.append(f"{name}.cls")
                continue
            files.append(f"{name}.sty")
            if name == "fontenc":  # each encoding is a file of its own
                files += [f"{enc.strip().lower()}enc.def" for enc in (options or "OT1").split(",") if enc.strip()]
    return list(dict.fromkeys(files))


def generator_strings(path: Path) -> str:
    """Every string constant of a Python module (the LaTeX it can write)."""
    tree = ast.parse(path.read_text())
    return "\n".join(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str))


def manuscript_files(repo: Path) -> dict[str, list[str]]:
    """TeX file -> the sources that load it."""
    sources = {repo / "paper" / "main.tex": (repo / "paper" / "main.tex").read_text()}
    for module in sorted((repo / "src" / "tcpeval" / "report").glob("*.py")):
        sources[module] = generator_strings(module)
    found: dict[str, list[str]] = {}
    for path, text in sources.items():
        for name in tex_files(text):
            found.setdefault(name, []).append(str(path.relative_to(repo)))
    return found

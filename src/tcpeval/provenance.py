"""Where this checkout is and which revision of it runs: recorded in every trace and
printed in the manuscript."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

# src/tcpeval/provenance.py -> the repository (the package runs from its checkout).
REPO_ROOT = Path(__file__).resolve().parents[2]


def git_revision(*, short: bool = False) -> str | None:
    """The checkout's commit, '-dirty' when tracked files are modified; None outside git."""
    rev_parse = ["git", "-C", str(REPO_ROOT), "rev-parse", *(["--short=12"] if short else []), "HEAD"]
    try:
        rev = subprocess.run(rev_parse, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev.stdout.strip() + ("-dirty" if dirty else "")


def sources_hash(root: Path, patterns: tuple[str, ...]) -> str:
    """Content hash of the files under ``root`` that match ``patterns`` (each file's path
    relative to root, then its bytes): which code a result passed through, whatever its
    commit (a dirty checkout included)."""
    h = hashlib.sha256()
    for path in sorted(p for pattern in patterns for p in root.glob(pattern)):
        for part in (str(path.relative_to(root)).encode(), b"\0", path.read_bytes()):
            h.update(part)
    return h.hexdigest()

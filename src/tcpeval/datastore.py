"""Versioning of raw traces with DVC: one .dvc file per backend/campaign directory.

    tcpeval data push --campaign smoke     # dvc add data/raw/emulated/smoke; dvc push
    tcpeval data pull --campaign paper     # dvc pull data/raw/emulated/paper.dvc

The default remote (`store`, in .dvc/config) is a local directory; point it elsewhere with
`dvc remote modify store url s3://...` or pass --remote NAME.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tcpeval.errors import UserError


def _dvc() -> str:
    beside = Path(sys.executable).with_name("dvc")
    found = str(beside) if beside.exists() else shutil.which("dvc")
    if not found:
        raise UserError("dvc is not installed (make bootstrap installs it into .venv)")
    return found


def _call(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([_dvc(), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"dvc {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}".rstrip())
    return proc.stdout


def campaign_dir(raw_dir: str | Path, backend: str, campaign: str) -> Path:
    return Path(raw_dir) / backend / campaign


def push(repo: Path, raw_dir: str | Path, backend: str, campaign: str, remote: str | None = None) -> Path:
    """Snapshot a campaign's raw traces into the DVC cache and push them; returns the .dvc file."""
    target = campaign_dir(raw_dir, backend, campaign)
    if not (repo / target).is_dir():
        raise UserError(f"{target}: no raw traces for backend {backend!r}, campaign {campaign!r}")
    _call(["add", "--quiet", str(target)], repo)
    dvc_file = target.with_name(target.name + ".dvc")
    _call(["push", "--quiet", *(["-r", remote] if remote else []), str(dvc_file)], repo)
    return repo / dvc_file


def pull(repo: Path, raw_dir: str | Path, backend: str, campaign: str, remote: str | None = None) -> Path:
    """Fetch a campaign's raw traces recorded in its .dvc file."""
    target = campaign_dir(raw_dir, backend, campaign)
    dvc_file = target.with_name(target.name + ".dvc")
    if not (repo / dvc_file).exists():
        raise UserError(f"{dvc_file}: no snapshot of backend {backend!r}, campaign {campaign!r} "
                        "(create one with `tcpeval data push`)")
    _call(["pull", "--quiet", *(["-r", remote] if remote else []), str(dvc_file)], repo)
    return repo / target


def add_parsers(sub) -> None:
    data = sub.add_parser("data", help="version raw traces with DVC (push / pull a campaign)")
    dsub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    for name, func, text in (("push", push, "snapshot and push a campaign's raw traces"),
                             ("pull", pull, "fetch a campaign's raw traces")):
        p = dsub.add_parser(name, help=text)
        p.add_argument("--campaign", required=True)
        p.add_argument("--backend", default="emulated")
        p.add_argument("--raw-dir", default="data/raw")
        p.add_argument("--remote", help="DVC remote name (default: the repository's default remote)")
        p.add_argument("--repo", default=".", help="repository root (default: current directory)")
        p.set_defaults(func=lambda a, f=func: print(f(Path(a.repo), a.raw_dir, a.backend, a.campaign, a.remote)))

"""Versioning of raw traces with DVC: one .dvc file per backend/campaign directory.

    tcpeval data push --campaign smoke     # dvc add data/raw/emulated/smoke; dvc push
    tcpeval data pull --campaign paper     # dvc pull data/raw/emulated/paper.dvc

The remote: --remote, else the environment variable TCPEVAL_DVC_REMOTE, else the
repository's default remote (`store`, in .dvc/config: a local directory). Either setting
is a DVC remote's name or a URL, e.g. ssh://user@host/path (the dvc-ssh plugin, pinned in
requirements.txt). A URL is recorded as the remote `tcpeval-url` in .dvc/config.local,
which git ignores: a user's server never lands in the committed .dvc/config.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tcpeval.errors import UserError


def _dvc() -> str:
    beside = Path(sys.executable).with_name("dvc")
    found = str(beside) if beside.exists() else shutil.which("dvc")
    if not found:
        raise UserError("dvc is not installed (make bootstrap installs it into .venv)")
    return found


REMOTE_ENV = "TCPEVAL_DVC_REMOTE"
URL_REMOTE = "tcpeval-url"  # the remote a URL setting is recorded as (.dvc/config.local)
SSH_URL_FORM = "ssh://[user@]host[:port]/path"


def _call(args: list[str], cwd: Path, *, remote: str = "") -> str:
    proc = subprocess.run([_dvc(), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        # dvc's own words, without its support banner
        said = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                         if line.strip() and not line.startswith("Having any troubles?"))
        where = f" ({remote})" if remote else ""
        hint = ""
        if "missing dependencies" in said and "ssh" in said:
            hint = "\nssh:// remotes need the dvc-ssh plugin (pinned in requirements.txt): run `make bootstrap`"
        raise UserError(f"dvc {' '.join(args)} failed{where}:\n{said}{hint}".rstrip())
    return proc.stdout


def _check_url(url: str, setting: str) -> None:
    """Refuse an ssh:// URL dvc-ssh would misread, naming the setting it came from."""
    parts = urlsplit(url)
    if parts.scheme != "ssh":
        return  # other schemes: dvc checks them (`dvc config` refuses an unknown one)
    try:
        port_ok = parts.port != 0  # urlsplit raises on a non-number or one above 65535
    except ValueError:
        port_ok = False
    if not port_ok:
        raise UserError(f"{setting}: the port is not a TCP port number (expected {SSH_URL_FORM})")
    if not parts.hostname:
        raise UserError(f"{setting}: no host (expected {SSH_URL_FORM})")
    if parts.path.strip("/") == "":
        raise UserError(f"{setting}: no directory on the server (expected {SSH_URL_FORM})")


def _remote_args(repo: Path, remote: str | None) -> tuple[list[str], str]:
    """dvc's `-r NAME` for the remote the user chose (--remote, else $TCPEVAL_DVC_REMOTE,
    else none: the repository's default), and which setting chose it, for dvc's errors."""
    if remote:
        setting = f"--remote {remote}"
    elif os.environ.get(REMOTE_ENV):
        remote = os.environ[REMOTE_ENV]
        setting = f"{REMOTE_ENV}={remote}"
    else:
        return [], f"the repository's default remote; choose one with --remote or {REMOTE_ENV}"
    if "://" in remote:
        _check_url(remote, setting)
        # only the url key: options the user added to this remote (keyfile, port) stay
        _call(["config", "--local", f"remote.{URL_REMOTE}.url", remote], repo, remote=f"remote set by {setting}")
        return ["-r", URL_REMOTE], f"remote set by {setting}"
    # `dvc config --list`, not `dvc remote list`: that one wraps long lines at 80 columns
    names = re.findall(r"^remote\.(.+)\.url=", _call(["config", "--list"], repo), re.M)
    if remote not in names:
        raise UserError(f"{setting}: no DVC remote of that name in {repo} (it has: {', '.join(names) or 'none'}); "
                        f"give a remote's name or a URL such as {SSH_URL_FORM}")
    return ["-r", remote], f"remote set by {setting}"


def campaign_dir(raw_dir: str | Path, backend: str, campaign: str) -> Path:
    return Path(raw_dir) / backend / campaign


def push(repo: Path, raw_dir: str | Path, backend: str, campaign: str, remote: str | None = None) -> Path:
    """Snapshot a campaign's raw traces into the DVC cache and push them; returns the .dvc file.
    ``remote``: a DVC remote's name or a URL (default: $TCPEVAL_DVC_REMOTE, else the
    repository's default remote)."""
    target = campaign_dir(raw_dir, backend, campaign)
    if not (repo / target).is_dir():
        raise UserError(f"{target}: no raw traces for backend {backend!r}, campaign {campaign!r}")
    remote_args, chosen_by = _remote_args(repo, remote)  # a wrong setting fails before anything is cached
    # no --quiet: it silences dvc's error messages too (the output is shown on failure only)
    _call(["add", str(target)], repo)
    dvc_file = target.with_name(target.name + ".dvc")
    _call(["push", *remote_args, str(dvc_file)], repo, remote=chosen_by)
    return repo / dvc_file


def pull(repo: Path, raw_dir: str | Path, backend: str, campaign: str, remote: str | None = None) -> Path:
    """Fetch a campaign's raw traces recorded in its .dvc file (``remote`` as for push)."""
    target = campaign_dir(raw_dir, backend, campaign)
    dvc_file = target.with_name(target.name + ".dvc")
    if not (repo / dvc_file).exists():
        raise UserError(f"{dvc_file}: no snapshot of backend {backend!r}, campaign {campaign!r} "
                        "(create one with `tcpeval data push`)")
    remote_args, chosen_by = _remote_args(repo, remote)
    _call(["pull", *remote_args, str(dvc_file)], repo, remote=chosen_by)
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
        p.add_argument("--remote", help=f"DVC remote: a name, or a URL such as {SSH_URL_FORM} "
                                        f"(default: ${REMOTE_ENV}, else the repository's default remote)")
        p.add_argument("--repo", default=".", help="repository root (default: current directory)")
        p.set_defaults(func=lambda a, f=func: print(f(Path(a.repo), a.raw_dir, a.backend, a.campaign, a.remote)))

"""The Nix flake's pin: flake.lock locks nixpkgs to one published revision, and the real
`nix` (Debian's nix-bin, in tools/apt-packages.txt, so CI has it) reads that pin without
network and without rewriting the lock; every Nix file parses.

The machine's Nix is left alone: nix runs with a private store, HOME, caches and config
directory under tmp_path, its settings on the command line, and every download sent to a
closed local port, so a read that needed GitHub fails here even on a machine online. The
flake is read from a copy (flake.nix, flake.lock, nix/) as a path: flake, so the check
does not depend on git. Evaluating or building the outputs needs the nixpkgs source
(GitHub or a binary cache) and is not tested here; see the README's Nix section.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NIX_FILES = ["flake.nix", *sorted(str(p.relative_to(REPO)) for p in (REPO / "nix").glob("*.nix"))]
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing answers, a download fails at once

needs_nix = pytest.mark.skipif(
    not (shutil.which("nix") and shutil.which("nix-instantiate")),
    reason="nix not installed (Debian package nix-bin, listed in tools/apt-packages.txt: make bootstrap)")


def _nix(tmp_path: Path, command: str, *args: str) -> subprocess.CompletedProcess:
    """Run nix (or nix-instantiate) on a private store, HOME and config dir, offline."""
    home = tmp_path / "home"
    (tmp_path / "conf").mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state"),
           "NIX_CONF_DIR": str(tmp_path / "conf"),
           "http_proxy": CLOSED, "https_proxy": CLOSED, "all_proxy": CLOSED, "no_proxy": ""}
    options = ["--store", str(tmp_path / "store"), "--option", "build-users-group", ""]
    if command == "nix":
        options += ["--extra-experimental-features", "nix-command flakes", "--offline",
                    "--option", "download-attempts", "1"]
    return subprocess.run([shutil.which(command), *options, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def _flake_copy(tmp_path: Path) -> Path:
    flake = tmp_path / "flake"
    flake.mkdir()
    for name in ("flake.nix", "flake.lock"):
        shutil.copy2(REPO / name, flake / name)
    shutil.copytree(REPO / "nix", flake / "nix")
    return flake


@needs_nix
@pytest.mark.parametrize("path", NIX_FILES)
def test_nix_expressions_parse(path, tmp_path):
    proc = _nix(tmp_path, "nix-instantiate", "--parse", path)
    assert proc.returncode == 0, proc.stderr


@needs_nix
def test_nix_reads_the_nixpkgs_pin_offline_and_leaves_the_lock_as_it_is(tmp_path):
    lock_text = (REPO / "flake.lock").read_text()
    lock = json.loads(lock_text)
    pin = lock["nodes"][lock["nodes"][lock["root"]]["inputs"]["nixpkgs"]]
    assert lock["version"] == 7
    assert {k: pin["locked"][k] for k in ("type", "owner", "repo")} == {
        "type": "github", "owner": "NixOS", "repo": "nixpkgs"}
    assert re.fullmatch(r"[0-9a-f]{40}", pin["locked"]["rev"]), pin
    assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", pin["locked"]["narHash"]), pin
    url = re.search(r'inputs\.nixpkgs\.url\s*=\s*"([^"]+)"', (REPO / "flake.nix").read_text()).group(1)
    original = pin["original"]
    assert url == f"github:{original['owner']}/{original['repo']}/{original['ref']}"

    flake = _flake_copy(tmp_path)
    proc = _nix(tmp_path, "nix", "flake", "metadata", "--json", "--no-update-lock-file", f"path:{flake}")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(proc.stdout)
    assert meta["locks"] == lock  # nix took the lock as it stands: no input re-resolved
    locked = meta["locks"]["nodes"]["nixpkgs"]["locked"]
    assert (locked["rev"], locked["narHash"], locked["lastModified"]) == (
        pin["locked"]["rev"], pin["locked"]["narHash"], pin["locked"]["lastModified"])
    assert (flake / "flake.lock").read_text() == lock_text
    assert (REPO / "flake.lock").read_text() == lock_text


@needs_nix
def test_a_lock_that_does_not_match_flake_nix_is_refused_offline(tmp_path):
    """The read above proves something: once flake.nix asks for another branch, nix must
    resolve it again (network) and, with --no-update-lock-file, never writes the lock."""
    flake = _flake_copy(tmp_path)
    ref = json.loads((flake / "flake.lock").read_text())["nodes"]["nixpkgs"]["original"]["ref"]
    text = (flake / "flake.nix").read_text()
    assert f"/{ref}\"" in text
    (flake / "flake.nix").write_text(text.replace(f"/{ref}\"", f"/{ref}-other\""))
    proc = _nix(tmp_path, "nix", "flake", "metadata", "--json", "--no-update-lock-file", f"path:{flake}")
    assert proc.returncode != 0, proc.stdout
    assert f"{ref}-other" in proc.stderr, proc.stderr
    assert (flake / "flake.lock").read_text() == (REPO / "flake.lock").read_text()


def test_flake_lock_is_tracked_by_git():
    """In a git checkout nix sees only the files git tracks: an untracked lock pins nothing."""
    proc = subprocess.run(["git", "-C", str(REPO), "ls-files", "--error-unmatch", "flake.lock"],
                          capture_output=True, text=True)
    if "not a git repository" in proc.stderr:
        pytest.skip("not a git checkout")
    assert proc.returncode == 0, proc.stderr

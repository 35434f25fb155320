"""Build the backend's BPF object and C helpers on demand (clang/gcc), into
``$TCPEVAL_BUILD`` or ``<repo>/build``; rebuilt when a source changes (content hash)."""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tcpeval.backends.base import BackendError
from tcpeval.provenance import REPO_ROOT

HERE = Path(__file__).resolve().parent
SOURCES = {
    "datapath.bpf.o": HERE / "bpf" / "datapath.bpf.c",
    "tevbpf": HERE / "bpf" / "tevbpf.c",
    "tevdelay": HERE / "delayline" / "tevdelay.c",
    "libtevrcv.so": HERE / "receiver" / "tevrcv.c",
    "tevrpc": HERE / "rpc" / "tevrpc.c",
}
INCLUDE = HERE / "include"  # headers shared by the BPF object and the helpers


@dataclass(frozen=True)
class Artifacts:
    datapath_obj: Path
    tevbpf: Path
    tevdelay: Path
    tevrcv: Path  # preloaded into the receivers' iperf3 servers (receiver/tevrcv.c)
    tevrpc: Path  # request/response flows (rpc/tevrpc.c)
    hashes: dict  # artifact -> sha256 of its source and the shared headers


def build_dir() -> Path:
    return Path(os.environ.get("TCPEVAL_BUILD") or REPO_ROOT / "build") / "emulated"


def _sha(path: Path) -> str:
    """Content hash of a source and of the shared headers it may include."""
    h = hashlib.sha256(path.read_bytes())
    for header in sorted(INCLUDE.glob("*.h")):
        h.update(header.name.encode() + b"\0" + header.read_bytes())
    return h.hexdigest()


def _multiarch() -> str:
    try:
        return subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "x86_64-linux-gnu"


def _command(name: str, src: Path, out: Path) -> list[str]:
    if name.endswith(".bpf.o"):
        return ["clang", "-O2", "-g", "-Wall", "-target", "bpf", f"-I{INCLUDE}",
                f"-I/usr/include/{_multiarch()}", "-c", str(src), "-o", str(out)]
    if name.endswith(".so"):
        return ["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(out), str(src), "-ldl"]
    libs = ["-lbpf"] if name == "tevbpf" else []
    return ["gcc", "-O2", "-Wall", f"-I{INCLUDE}", "-o", str(out), str(src), *libs]


def source_hashes() -> dict:
    """{artifact: content hash of its sources}: what a build of them is filed under (the
    calibration's key), known without building."""
    return {name: _sha(src) for name, src in SOURCES.items()}


def ensure_built(log=None) -> Artifacts:
    log = log or (lambda m: None)
    out_dir = build_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    hashes = source_hashes()
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel callers build once
        for name, src in SOURCES.items():
            digest = hashes[name]
            out, stamp = out_dir / name, out_dir / f"{name}.sha256"
            if out.exists() and stamp.exists() and stamp.read_text().strip() == digest:
                continue
            log(f"building {name}")
            tmp = out_dir / f".{name}.tmp"
            proc = subprocess.run(_command(name, src, tmp), capture_output=True, text=True)
            if proc.returncode != 0:
                raise BackendError(f"building {name} from {src} failed:\n{proc.stderr.strip()}")
            os.replace(tmp, out)
            stamp.write_text(digest + "\n")
    return Artifacts(out_dir / "datapath.bpf.o", out_dir / "tevbpf", out_dir / "tevdelay",
                     out_dir / "libtevrcv.so", out_dir / "tevrpc", hashes)

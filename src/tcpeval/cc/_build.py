"""Building the ports (BPF, host harness, kernel modules) and checking the host."""
from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from ._common import (
    CC_DIR,
    EXTRA_VARIANTS,
    VARIANTS,
    CCError,
    HostError,
    default_build_dir,
    kernel_name,
)

CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF = 12, 21, 39


@contextmanager
def _build_lock(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".build.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _make(out: Path, *targets: str, extra: tuple[str, ...] = ()) -> None:
    if shutil.which("make") is None:
        raise HostError("missing tool: make")
    cmd = ["make", "-s", "-C", str(CC_DIR), f"OUT={out}", *extra, *targets]
    with _build_lock(out):
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CCError(f"build failed ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")


def _out(out_dir) -> Path:
    return Path(out_dir).resolve() if out_dir else default_build_dir()


def build(out_dir: str | os.PathLike | None = None) -> Path:
    """Compile the BPF struct_ops objects (one per VARIANTS and EXTRA_VARIANTS entry) and
    the loader; returns the build dir.

    make's dependency tracking makes this idempotent and rebuilds on source change.
    Objects: <dir>/bpf/<kernel name>.bpf.o (bpf_object), loader: <dir>/tevcc-loader.
    """
    missing = [t for t in ("clang", "bpftool", "cc") if shutil.which(t) is None]
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        missing.append("libbpf headers (libbpf-dev)")
    if not Path("/sys/kernel/btf/vmlinux").exists():
        missing.append("kernel BTF (/sys/kernel/btf/vmlinux) for vmlinux.h")
    if missing:
        raise HostError("cannot build the BPF ports, missing: " + ", ".join(missing))
    out = _out(out_dir)
    _make(out, "bpf")
    return out


def build_probe(out_dir: str | os.PathLike | None = None) -> Path:
    """Compile the loss-event probe used by the kernel tests (BTF tracepoint
    tcp_cong_state_set): <dir>/probe/lossprobe.bpf.o and <dir>/tevcc-lossprobe."""
    build(out_dir)  # same prerequisites (clang, bpftool, libbpf, BTF)
    out = _out(out_dir)
    _make(out, "probe")
    return out


def build_host(out_dir: str | os.PathLike | None = None) -> Path:
    """Compile the userspace harness libraries <dir>/host/lib<kernel name>.so (VARIANTS
    and EXTRA_VARIANTS)."""
    if shutil.which("cc") is None:
        raise HostError("cannot build the host harness, missing: cc")
    out = _out(out_dir)
    _make(out, "host")
    return out


def kernel_headers() -> Path | None:
    """Debian's linux-headers-*-amd64 tree (the newest), if installed."""
    found = sorted(glob.glob("/usr/src/linux-headers-*-amd64"))
    return Path(found[-1]) if found else None


def build_modules(out_dir: str | os.PathLike | None = None,
                  kdir: str | os.PathLike | None = None, extra: bool = False) -> list[Path]:
    """Build the ports as out-of-tree kernel modules with kbuild.

    kdir defaults to Debian's linux-headers-*-amd64. Returns the .ko paths
    (<dir>/kmod/<variant>316.ko) of VARIANTS, with ``extra`` those of EXTRA_VARIANTS after
    them (<dir>/kmod/<kernel name>.ko; kbuild builds them either way). The running kernel
    here has no module support; the modules are for hosts that have it.
    """
    kd = Path(kdir) if kdir else kernel_headers()
    if kd is None or not (kd / "Makefile").exists():
        raise HostError("cannot build kernel modules, missing: kernel headers "
                        "(apt-get install linux-headers-amd64)")
    out = _out(out_dir)
    _make(out, "kmod", extra=(f"KDIR={kd}",))
    kos = [out / "kmod" / f"{kernel_name(v)}.ko" for v in VARIANTS + EXTRA_VARIANTS]
    absent = [str(k) for k in kos if not k.exists()]
    if absent:
        raise CCError(f"kbuild finished but did not produce: {', '.join(absent)}")
    return kos if extra else kos[:len(VARIANTS)]


def bpf_object(variant: str, out: Path) -> Path:
    return out / "bpf" / f"{kernel_name(variant)}.bpf.o"


def loader_path(out: Path) -> Path:
    return out / "tevcc-loader"


def _effective_caps() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


@lru_cache(maxsize=1)
def _btf_has_struct_ops() -> bool:
    try:
        data = Path("/sys/kernel/btf/vmlinux").read_bytes()
    except OSError:
        return False
    return b"bpf_struct_ops_tcp_congestion_ops" in data or (
        b"tcp_congestion_ops" in data and b"bpf_struct_ops" in data)


def host_status() -> dict[str, bool]:
    """What this host offers for loading ports (no exception)."""
    caps = _effective_caps()
    has = lambda bit: bool(caps >> bit & 1)  # noqa: E731
    return {
        "privileges": os.geteuid() == 0 or (has(CAP_NET_ADMIN) and (has(CAP_BPF) or has(CAP_SYS_ADMIN))),
        "btf": Path("/sys/kernel/btf/vmlinux").exists(),
        "struct_ops": _btf_has_struct_ops(),
        "clang": shutil.which("clang") is not None,
        "bpftool": shutil.which("bpftool") is not None,
        "libbpf": Path("/usr/include/bpf/bpf_helpers.h").exists(),
        "cc": shutil.which("cc") is not None,
    }


_WHAT = {
    "privileges": "root or CAP_BPF+CAP_NET_ADMIN",
    "btf": "kernel BTF (/sys/kernel/btf/vmlinux)",
    "struct_ops": "BPF struct_ops support for tcp_congestion_ops (kernel BTF lacks bpf_struct_ops_tcp_congestion_ops)",
    "clang": "clang",
    "bpftool": "bpftool",
    "libbpf": "libbpf headers (libbpf-dev)",
    "cc": "a C compiler (cc) for the loader",
}


def check_host() -> dict[str, bool]:
    """Raise HostError naming everything missing to build and load a port."""
    status = host_status()
    missing = [_WHAT[k] for k, ok in status.items() if not ok]
    if missing:
        raise HostError("this host cannot load the BPF ports; missing: " + "; ".join(missing))
    return status

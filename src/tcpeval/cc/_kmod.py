"""The ports as kernel modules (``loaded_as="kmod"``), on kernels that load modules.

The same C source as the BPF object (cc/src/<variant>316.c, CC_TARGET_KMOD), built with
kbuild against the running kernel's headers (/lib/modules/<release>/build) into
<build>/kmod-<release>/kmod/, inserted with its emulated HZ and time-dilation factor as
module parameters (cc_hz, cc_dilation) and removed when the last user is done. The
kernel calls a module's hooks itself, so the BPF host-fault guard has nothing to count
(its counters are None). Processes share a module inserted with the same object and
parameters, as they share a BPF registration: each holds the name's use lock shared, and
the process that inserted it takes it exclusively before removing it.
"""
from __future__ import annotations

import fcntl
import os
import platform
import subprocess
import time
from pathlib import Path

from ._build import _out, build_modules
from ._common import CCError, HostError, available_algorithms, kernel_name

PROC_MODULES = Path("/proc/modules")
SYS_MODULE = Path("/sys/module")
UNLOAD_WAIT_S = 10.0  # sockets closing after a run still hold the module for a moment


def missing() -> str | None:
    """What this host lacks to insert a port as a module (None: nothing)."""
    release = platform.release()
    if not PROC_MODULES.exists():
        return f"loadable-module support (kernel {release} was built without it)"
    if not (Path("/lib/modules") / release / "build" / "Makefile").exists():
        return (f"the headers of the running kernel {release} "
                f"(apt-get install linux-headers-{release})")
    if os.geteuid() != 0:
        return "root (insmod)"
    return None


def module_path(variant: str, out_dir=None) -> Path:
    """The variant's module for the running kernel, built if absent or stale."""
    why = missing()
    if why:
        raise HostError(f"cannot load {kernel_name(variant)} as a kernel module: this host lacks {why}")
    release = platform.release()
    out = _out(out_dir) / f"kmod-{release}"
    kos = build_modules(out, kdir=Path("/lib/modules") / release / "build")
    return next(k for k in kos if k.name == f"{kernel_name(variant)}.ko")


def _loaded_parameters(name: str) -> dict | None:
    """{cc_hz, cc_dilation, srcversion} of a module the kernel holds, None if not loaded."""
    base = SYS_MODULE / name
    if not (base / "parameters").is_dir():
        return None
    read = lambda p: (base / p).read_text().strip() if (base / p).exists() else None  # noqa: E731
    return {"cc_hz": read("parameters/cc_hz"), "cc_dilation": read("parameters/cc_dilation"),
            "srcversion": read("srcversion")}


def _srcversion(ko: Path) -> str | None:
    out = subprocess.run(["modinfo", "-F", "srcversion", str(ko)], capture_output=True, text=True)
    return out.stdout.strip() or None


def insert(variant: str, hz: int, dilation: int, use_fd: int) -> tuple[Path, bool]:
    """Insert the module (or find it inserted with the same object and parameters, which
    the caller then shares); returns (its file, whether this call inserted it)."""
    name = kernel_name(variant)
    ko = module_path(variant)
    want = {"cc_hz": str(hz), "cc_dilation": str(dilation), "srcversion": _srcversion(ko)}
    have = _loaded_parameters(name)
    if have is not None:
        if have == want:
            return ko, False
        raise CCError(f"module {name} is already loaded with {have}; the request ({want}) differs "
                      f"and it will not be touched")
    if name in available_algorithms():
        raise CCError(f"{name} is already registered on this host (a BPF struct_ops port?); "
                      f"cannot insert the module of the same name")
    proc = subprocess.run(["insmod", str(ko), f"cc_hz={hz}", f"cc_dilation={dilation}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise CCError(f"insmod {ko} failed: {proc.stderr.strip() or proc.stdout.strip()} "
                      f"(modinfo vermagic: {_vermagic(ko)}; running kernel {platform.release()})")
    if name not in available_algorithms():
        remove(name, use_fd)
        raise CCError(f"insmod {ko} succeeded but {name} is not in tcp_available_congestion_control")
    return ko, True


def _vermagic(ko: Path) -> str:
    return subprocess.run(["modinfo", "-F", "vermagic", str(ko)], capture_output=True, text=True).stdout.strip()


def remove(name: str, use_fd: int) -> None:
    """rmmod once no other process uses it (their shared use locks), waiting for the
    run's sockets to let go of it."""
    fcntl.flock(use_fd, fcntl.LOCK_EX)
    deadline = time.monotonic() + UNLOAD_WAIT_S
    while True:
        proc = subprocess.run(["rmmod", name], capture_output=True, text=True)
        if proc.returncode == 0 or _loaded_parameters(name) is None:
            return
        if time.monotonic() > deadline:
            raise CCError(f"rmmod {name} failed for {UNLOAD_WAIT_S:.0f} s: {proc.stderr.strip()}")
        time.sleep(0.2)

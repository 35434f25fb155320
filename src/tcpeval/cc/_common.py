"""Shared names, paths and errors of tcpeval.cc."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tcpeval.provenance import REPO_ROOT

VARIANTS = ("reno", "scalable", "highspeed", "htcp", "bic", "cubic", "hybla", "illinois", "lp", "vegas",
            "veno", "westwood", "yeah")
IMPLS = ("port", "native")
SUFFIX = "316"
# Algorithms built like the ports (one source on the shim, three targets) that are not
# Linux 3.16's: outside VARIANTS, so outside the paper's matrix, the 3.16 family and
# everything that lists VARIANTS (loaded(), `tcpeval cc list|params`, a backend's ports).
# variant -> the name the kernel knows, which is also the file stem (cc/src/<name>.c,
# bpf/<name>.bpf.o, host/lib<name>.so, kmod/<name>.ko): "_tev" (tcpeval), not "316", and
# not the plain name, which a kernel may have (Linux has had dctcp since 3.18).
EXTRA_KERNEL_NAMES = {"dctcp": "dctcp_tev", "nv": "nv_tev"}
EXTRA_VARIANTS = tuple(EXTRA_KERNEL_NAMES)

# How an algorithm answers a CE mark its receiver echoes (ECE), by kernel name. Every
# Linux algorithm that a mark reaches through the stack reduces as for a loss: the stack
# enters CWR and calls its ssthresh() once per window (RFC 3168). DCTCP reduces by the
# marked fraction instead. BBR (v1) ignores marks: it sets the window from its model
# (cong_control), which takes the place of the reduction CWR would make.
ECN_RESPONSES = ("as_loss", "marked_fraction", "ignores")
_ECN_RESPONSE = {"dctcp": "marked_fraction", "dctcp_tev": "marked_fraction", "bbr": "ignores"}


def ecn_response(kernel_name: str) -> str:
    """One of ECN_RESPONSES: what the algorithm known to the kernel as ``kernel_name`` does
    with an echoed CE mark."""
    return _ECN_RESPONSE.get(kernel_name, "as_loss")

CC_DIR = REPO_ROOT / "cc"
SHIM = CC_DIR / "include" / "cc316.h"


class CCError(RuntimeError):
    """Anything that prevents building, loading or verifying a port."""


class UnknownVariantError(CCError, ValueError):
    """A variant (or implementation) name outside the allowed set."""


class HostError(CCError):
    """The host lacks something a port needs (privileges, BTF, struct_ops, tools)."""


def check_variant(variant: str) -> str:
    """A variant the project builds: a 3.16 port or an EXTRA_VARIANTS entry."""
    if variant not in VARIANTS + EXTRA_VARIANTS:
        raise UnknownVariantError(
            f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS + EXTRA_VARIANTS)}")
    return variant


def check_impl(impl: str) -> str:
    if impl not in IMPLS:
        raise UnknownVariantError(f"unknown impl {impl!r}; allowed: {', '.join(IMPLS)}")
    return impl


def kernel_name(variant: str, impl: str = "port") -> str:
    """The name the kernel knows: 'bic316' for a port, the plain name for native;
    an EXTRA_VARIANTS entry's own name for its port ('dctcp_tev')."""
    if variant in EXTRA_KERNEL_NAMES:
        return EXTRA_KERNEL_NAMES[variant] if check_impl(impl) == "port" else variant
    check_variant(variant)
    return variant + SUFFIX if check_impl(impl) == "port" else variant


def source_path(variant: str) -> Path:
    """cc/src/<kernel name>.c, for VARIANTS and EXTRA_VARIANTS."""
    return CC_DIR / "src" / f"{kernel_name(variant)}.c"


def default_build_dir() -> Path:
    """build/cc under the repo root, or $TCPEVAL_BUILD/cc."""
    env = os.environ.get("TCPEVAL_BUILD")
    return (Path(env) if env else REPO_ROOT / "build") / "cc"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_sha256(variant: str) -> str:
    """Digest of everything a port is compiled from: the shim, then its source."""
    h = hashlib.sha256()
    for p in (SHIM, source_path(variant)):
        data = p.read_bytes()
        h.update(f"{p.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def available_algorithms() -> list[str]:
    """The host's tcp_available_congestion_control (namespaces share it)."""
    try:
        text = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
    except OSError as err:
        raise HostError(f"cannot read tcp_available_congestion_control: {err}") from err
    return text.split()


def struct_ops_map_ids(name: str) -> set[str]:
    """Ids of the struct_ops maps named ``name`` the kernel still holds (registered or not):
    a map outlives its registration while anything references it."""
    listing = subprocess.run(["bpftool", "struct_ops", "list"], capture_output=True, text=True).stdout
    return {line.split(":")[0] for line in listing.splitlines() if line.split()[1:2] == [name]}

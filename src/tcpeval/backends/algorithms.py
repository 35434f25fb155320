"""What congestion control a backend offers, checked before anything runs.

impl port: the project's Linux 3.16 ports (tcpeval.cc.VARIANTS) and the algorithms built
the same way beyond them (tcpeval.cc.EXTRA_VARIANTS: dctcp, nv); impl native: the host
kernel's algorithms (built in, or a module the kernel can autoload); impl bpf: a user's
own struct_ops object, named by its tcp_congestion_ops .name. The testbed's native
algorithms are its hosts', known only once connected: its backend checks them per run.
"""
from __future__ import annotations

import platform
from pathlib import Path

from tcpeval.backends import common
from tcpeval.backends.base import BackendError

MODULE_DIR = Path("/lib/modules")


def ports() -> list[str]:
    try:
        from tcpeval import cc
    except ImportError:
        return []
    return list(cc.VARIANTS + cc.EXTRA_VARIANTS)


def native_here() -> list[str]:
    """This host's algorithms: tcp_available_congestion_control, then the tcp_<name>
    modules of the running kernel the stack can autoload (none without module support)."""
    try:
        names = Path(common.AVAILABLE_CC_PATH).read_text().split()
    except OSError:
        names = []
    if Path("/proc/modules").exists():
        mod_dir = MODULE_DIR / platform.release() / "kernel" / "net" / "ipv4"
        for ko in sorted(mod_dir.glob("tcp_*.ko*")) if mod_dir.is_dir() else []:
            name = ko.name.split(".", 1)[0].removeprefix("tcp_")
            if name not in names and name not in ("diag",):
                names.append(name)
    return names


def _kmod_missing() -> str | None:
    """What the host lacks to load the ports as modules, when $TCPEVAL_PORT_AS asks for it."""
    if common.port_as() != "kmod":
        return None
    from tcpeval import cc
    return cc.kmod_missing()


def offered(backend: str) -> dict[str, list[str] | None]:
    """{impl: names, or None where any name may do until the run checks it}."""
    return {"port": ports(), "native": native_here() if backend == "emulated" else None, "bpf": None}


def problems(runs, backend: str) -> list[str]:
    """One line per distinct flow a backend cannot run, naming the run and what it offers."""
    offer = offered(backend)
    kmod_missing = _kmod_missing() if backend == "emulated" else None
    out, seen = [], set()
    for run in runs:
        for i, flow in enumerate(run.flows):
            if flow.protocol != "tcp":
                continue
            key = (flow.variant, flow.impl, flow.object)
            if key in seen:
                continue
            seen.add(key)
            where = f"{run.criterion}: flow {i} ({flow.label})"
            names = offer.get(flow.impl)
            if flow.impl == "bpf":
                if not flow.object or not Path(flow.object).is_file():
                    out.append(f"{where}: impl bpf object {flow.object!r} does not exist")
            elif names is not None and flow.variant not in names:
                others = [f"{impl}: {', '.join(n) if n else '(none)'}" for impl, n in offer.items()
                          if n is not None]
                out.append(f"{where}: the {backend} backend has no {flow.impl} algorithm "
                           f"{flow.variant!r}; it offers {'; '.join(others)}; impl bpf: your own object")
            if flow.impl == "port" and backend == "emulated" and kmod_missing:
                out.append(f"{where}: the ports are to be loaded as kernel modules "
                           f"(TCPEVAL_PORT_AS=kmod), and this host lacks {kmod_missing}")
            if flow.impl != "port" and isinstance(run.dilation, int) and run.dilation > 1:
                out.append(f"{where}: impl {flow.impl} cannot be time-dilated (dilation {run.dilation}); "
                           "only the 3.16 ports read a dilated clock")
    return out


def check(runs, backend: str) -> None:
    found = problems(runs, backend)
    if found:
        raise BackendError("algorithms the backend cannot run:\n  " + "\n  ".join(found))

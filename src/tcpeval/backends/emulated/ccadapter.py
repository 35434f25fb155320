"""Congestion control for the emulated backend's flows.

Uses ``tcpeval.cc.loaded(variant, impl=..., hz=...)`` (the Linux-3.16 ports, BPF
struct_ops) when that package provides it. Until then -- or for impl "native" -- the
host's built-in algorithm of the same name is used when it exists (reno, cubic); the
handle then says impl "native" and carries no object hash, so the trace never claims a
port that did not run.
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from pathlib import Path

from tcpeval.backends import common
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import topology


@dataclass(frozen=True)
class NativeHandle:
    variant: str
    impl: str
    kernel_name: str
    object_sha256: str | None = None
    source_sha256: str | None = None
    hz: int | None = None
    dilation: int | None = None


def available_native() -> list[str]:
    return Path(common.AVAILABLE_CC_PATH).read_text().split()


def cc_module():
    """tcpeval.cc when it offers ``loaded``, else None."""
    try:
        mod = importlib.import_module("tcpeval.cc")
    except ImportError:
        return None
    return mod if callable(getattr(mod, "loaded", None)) else None


@contextlib.contextmanager
def loaded(variant: str, impl: str = "port", hz: int = 250, dilation: int = 1, object_path: str | None = None):
    """Yield a handle with .variant .impl .kernel_name .object_sha256 .source_sha256 .hz
    .dilation (the factor the port's clocks are slowed by)."""
    if impl == "bpf":
        mod = cc_module()
        if dilation != 1:
            raise BackendError(f"flow variant {variant!r}: a user's BPF object cannot be time-dilated "
                               f"(x{dilation}); only the 3.16 ports read a dilated clock")
        if mod is None or not hasattr(mod, "loaded_object"):
            raise BackendError(f"flow variant {variant!r}: impl bpf needs tcpeval.cc")
        try:
            with mod.loaded_object(object_path, variant) as handle:
                yield handle
        except mod.CCError as err:
            raise BackendError(f"flow variant {variant!r}: {err}") from None
        return
    mod = cc_module() if impl == "port" else None
    if mod is None and dilation != 1:
        raise BackendError(f"flow variant {variant!r}: time dilation x{dilation} needs the 3.16 "
                           f"port (tcpeval.cc); a native algorithm cannot be dilated")
    if mod is not None:
        how = common.port_as()
        cm = mod.loaded(variant, impl=impl, hz=hz, dilation=dilation,
                        **({"loaded_as": how} if how != "struct_ops" else {}))
        try:
            handle = cm.__enter__()
        except Exception as err:  # tcpeval.cc.CCError and friends: name the flow
            raise BackendError(f"flow variant {variant!r} (impl {impl}, hz {hz}, dilation {dilation}"
                               + (f", as {how}" if how != "struct_ops" else "") + "): "
                               f"congestion control could not be loaded: {err}") from None
        try:
            yield handle
        except BaseException:
            if not cm.__exit__(*__import__("sys").exc_info()):
                raise
        else:
            cm.__exit__(None, None, None)
        return
    native = available_native()
    if variant not in native:
        why = ("tcpeval.cc is not available" if impl == "port" else "impl 'native' was asked for")
        raise BackendError(f"flow variant {variant!r}: {why} and the host has no built-in "
                           f"{variant!r} (available: {', '.join(native)})")
    yield NativeHandle(variant=variant, impl="native", kernel_name=variant)


def guard_stats(handle) -> dict | None:
    """The port's host-fault guard counters (tcpeval.cc.guard_stats), None without a port."""
    mod = cc_module()
    if mod is None or not hasattr(mod, "guard_stats"):
        return None
    return mod.guard_stats(handle)


def guard_difference(after: dict | None, before: dict | None) -> dict | None:
    """The run's own counts (after - before); a maximum (tcpeval.cc GUARD_MAXIMA) as it
    stands after the traffic: the port is registered for this run only."""
    if after is None or before is None:
        return None
    maxima = getattr(cc_module(), "GUARD_MAXIMA", frozenset())
    return {k: after[k] if k in maxima else after[k] - before.get(k, 0) for k in after}


ALLOWED_CC_PATH = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def load_flows(stack: contextlib.ExitStack, flows: list, hz: int, dilation: int = 1) -> list:
    """Each TCP (and RPC) flow's algorithm loaded for the rest of ``stack`` (None for UDP flows)."""
    return [stack.enter_context(loaded(flow.variant, flow.impl, hz, dilation=dilation, object_path=flow.object))
            if flow.protocol != "udp" else None for flow in flows]


def set_namespace_defaults(topo, flows: list) -> None:
    """Each sender namespace's default algorithm set to its flow's, so iperf3's control
    connection uses it too and every socket of the sender can be checked (FlowProc
    .default_cc_set says where that worked)."""
    allowed = Path(ALLOWED_CC_PATH).read_text().split()
    for fp in flows:
        # Only for algorithms a namespace may take as default (tcp_allowed_...): for
        # others the kernel answers EPERM and, in this kernel, keeps a reference to the
        # algorithm on that path, so an unregistered port's struct_ops map would linger
        # until reboot. Those keep the stack's default (reno, which never marks a socket
        # for pacing; common.STACK_316).
        if fp.kernel_name and fp.kernel_name in allowed:
            fp.default_cc_set = bool(topology.sysctl(
                topo.ns(f"s{fp.pair}"), {common.CC_SYSCTL: fp.kernel_name}, strict=False))


def port_handles(handles: list) -> dict:
    """{kernel name: handle} of the flows that run a 3.16 port (the guard's subjects)."""
    return {h.kernel_name: h for h in handles if h is not None and h.impl == "port"}

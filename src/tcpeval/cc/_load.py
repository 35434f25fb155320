"""Registering a port (BPF struct_ops link held by tevcc-loader) or using a native one."""
from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import _kmod
from ._build import bpf_object, build, check_host, loader_path
from ._common import (
    CCError,
    available_algorithms,
    check_impl,
    check_variant,
    kernel_name,
    sha256_file,
    source_sha256,
)

STATE_DIR = Path("/run/tcpeval-cc")
READY_TIMEOUT = 20.0


@dataclass(frozen=True)
class CCHandle:
    variant: str
    impl: str
    kernel_name: str
    object_sha256: str | None
    source_sha256: str | None
    hz: int | None
    owner_pid: int | None = None  # pid of the loader holding the registration
    shared: bool = False          # True: another tcpeval process registered it
    guard_map_id: int | None = None  # the object's .bss map (cc316_guard_stats), see guard_stats
    dilation: int = 1             # time-dilation factor of the port's clocks (cc316.h)
    loaded_as: str | None = None  # a port's delivery: "struct_ops" (BPF) or "kmod"; None otherwise

class _Registration:
    def __init__(self, handle: CCHandle, proc: subprocess.Popen | None, use_fd: int):
        self.handle = handle
        self.proc = proc
        self.count = 0
        self.use_fd = use_fd  # shared flock on the name's use lock while in use


def _use_lock(name: str) -> int:
    """A shared flock on /run/tcpeval-cc/<name>.lock, held by every process using the
    registration; the owner takes it exclusively before unregistering, so it never
    pulls the algorithm from under another process's sockets."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(STATE_DIR / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


_lock = threading.Lock()
_active: dict[str, _Registration] = {}  # kernel name -> registration made by this process


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state_file(name: str) -> Path:
    return STATE_DIR / f"{name}.json"


def _read_state(name: str) -> dict | None:
    try:
        return json.loads(_state_file(name).read_text())
    except (OSError, ValueError):
        return None


def _wait_gone(name: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while name in available_algorithms():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _start_loader(variant: str, hz: int, dilation: int = 1) -> _Registration:
    name = kernel_name(variant)
    for attempt in range(5):
        fd = _use_lock(name)
        try:
            return _start_loader_locked(variant, hz, dilation, fd)
        except _Raced:
            os.close(fd)
            time.sleep(0.2 * (attempt + 1))
        except BaseException:
            os.close(fd)
            raise
    raise CCError(f"registering {name} kept racing with another process")


class _Raced(Exception):
    """Another process registered or unregistered the name meanwhile: retry."""


def _start_loader_locked(variant: str, hz: int, dilation: int, use_fd: int) -> _Registration:
    name = kernel_name(variant)
    out = build()
    obj = bpf_object(variant, out)
    handle_kw = dict(variant=variant, impl="port", kernel_name=name,
                     object_sha256=sha256_file(obj), source_sha256=source_sha256(variant), hz=hz,
                     dilation=dilation, loaded_as="struct_ops")

    if name in available_algorithms():
        # Someone else registered it. Share it only if it is a live tcpeval loader of
        # the very same object, HZ and dilation; never touch it either way.
        st = _read_state(name)
        if (st and _pid_alive(st.get("pid", -1)) and st.get("hz") == hz
                and st.get("dilation", 1) == dilation
                and st.get("object_sha256") == handle_kw["object_sha256"]):
            # our shared lock keeps the owner from unregistering; it may have done
            # so just before we got the lock
            if name not in available_algorithms():
                raise _Raced()
            return _Registration(CCHandle(**handle_kw, owner_pid=st["pid"], shared=True,
                                          guard_map_id=st.get("guard_map_id")), None, use_fd)
        if st and st.get("pid") and not _pid_alive(st["pid"]) or (
                st is None and name not in available_algorithms()):
            raise _Raced()  # its loader just ended; the kernel is unregistering it
        detail = (f"by tcpeval loader pid {st.get('pid')} with hz={st.get('hz')}, "
                  f"dilation={st.get('dilation', 1)}, "
                  f"object {str(st.get('object_sha256'))[:12]}" if st else "by another program")
        raise CCError(f"{name} is already registered {detail}; it differs from the request "
                      f"(hz={hz}, dilation={dilation}, object {handle_kw['object_sha256'][:12]}) "
                      f"and will not be touched")

    # Own session: a terminal's SIGINT must not unregister behind our back; the
    # pipe on stdin ends the loader (and the registration) when we exit.
    proc = subprocess.Popen([str(loader_path(out)), str(obj), str(hz), str(dilation)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = b""
    if sel.select(timeout=READY_TIMEOUT):
        line = proc.stdout.readline()
    sel.close()
    if not line.startswith(b"ready "):
        _stop(proc)
        if proc.returncode == 3:  # EEXIST: another process registered it first
            raise _Raced()
        err = proc.stderr.read().decode(errors="replace").strip()
        raise CCError(f"registering {name} failed (loader exit {proc.returncode}): "
                      f"{err[-2000:] or 'no ready line within %.0f s' % READY_TIMEOUT}")
    fields = line.split()  # ready <name> <map_id> <link_id> <bss_map_id>
    guard_map_id = int(fields[4]) if len(fields) > 4 and int(fields[4]) else None
    reg = _Registration(CCHandle(**handle_kw, owner_pid=proc.pid, guard_map_id=guard_map_id),
                        proc, use_fd)
    try:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        _state_file(name).write_text(json.dumps(
            {"pid": proc.pid, "hz": hz, "dilation": dilation, "object_sha256": handle_kw["object_sha256"],
             "source_sha256": handle_kw["source_sha256"], "runner_pid": os.getpid(),
             "guard_map_id": guard_map_id}))
    except OSError:
        pass  # the state file only enables sharing; registration does not need it
    return reg


def _stop(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _release(reg: _Registration) -> None:
    name = reg.handle.kernel_name
    try:
        if reg.proc is None:
            return  # shared: not ours to unregister
        # wait until no other process uses it (they hold the lock shared)
        fcntl.flock(reg.use_fd, fcntl.LOCK_EX)
        _release_owned(reg, name)
    finally:
        os.close(reg.use_fd)


def _release_owned(reg: _Registration, name: str) -> None:
    _stop(reg.proc)
    st = _read_state(name)
    if st and st.get("pid") == reg.proc.pid:
        try:
            _state_file(name).unlink()
        except OSError:
            pass
    if not _wait_gone(name):
        raise CCError(f"{name} still listed in tcp_available_congestion_control after unload")


@contextmanager
def _sigterm_as_exit():
    """Turn SIGTERM into SystemExit so the finally clauses unregister."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def loaded(variant: str, impl: str = "port", hz: int = 250, dilation: int = 1,
           loaded_as: str = "struct_ops") -> Iterator[CCHandle]:
    """Make `variant` available to sockets for the duration of the block.

    impl="port": register <variant>316 (BPF struct_ops) with emulated HZ `hz`, its clocks
    slowed by the time-dilation factor `dilation` (cc/include/cc316.h);
    nested/repeated use in one process shares one registration (reference count);
    the registration ends when the last block exits, on exceptions, SIGINT and
    SIGTERM, and (via the loader's link fd) even if this process is killed.
    With loaded_as="kmod" the same port is inserted as a kernel module instead (_kmod;
    removed when the last block exits, not when the process is killed).
    impl="native": the host's own algorithm under its plain name, if available.
    """
    check_variant(variant)
    check_impl(impl)
    if impl == "native":
        avail = available_algorithms()
        if variant not in avail:
            raise CCError(f"native {variant!r} is not available on this host "
                          f"(tcp_available_congestion_control: {' '.join(avail)}); "
                          f"use impl='port' for {kernel_name(variant)}")
        if dilation != 1:
            raise CCError(f"native {variant!r} cannot be time-dilated (dilation={dilation}): "
                          "the host kernel's own algorithm reads the kernel's clock; "
                          f"use impl='port' for {kernel_name(variant)}")
        yield CCHandle(variant, "native", variant, None, None, None)
        return
    if not isinstance(hz, int) or isinstance(hz, bool) or not 1 <= hz <= 100000:
        raise CCError(f"hz must be an integer in [1, 100000], got {hz!r}")
    if not isinstance(dilation, int) or isinstance(dilation, bool) or not 1 <= dilation <= 1000:
        raise CCError(f"dilation must be an integer in [1, 1000], got {dilation!r}")
    if loaded_as not in LOADED_AS:
        raise CCError(f"a port is loaded as one of {', '.join(LOADED_AS)}, not {loaded_as!r}")
    if loaded_as == "kmod":
        with _sigterm_as_exit(), _module(variant, hz, dilation) as handle:
            yield handle
        return
    check_host()
    name = kernel_name(variant)
    with _sigterm_as_exit():
        with _lock:
            reg = _active.get(name)
            if reg is not None and (reg.handle.hz, reg.handle.dilation) != (hz, dilation):
                raise CCError(f"{name} is already loaded by this process with hz={reg.handle.hz}, "
                              f"dilation={reg.handle.dilation}; cannot load it with hz={hz}, "
                              f"dilation={dilation} at the same time")
            if reg is None:
                reg = _start_loader(variant, hz, dilation)
                _active[name] = reg
            reg.count += 1
        try:
            yield reg.handle
        finally:
            with _lock:
                reg.count -= 1
                if reg.count == 0:
                    del _active[name]
                    _release(reg)


LOADED_AS = ("struct_ops", "kmod")
_modules: dict[str, list] = {}  # kernel name -> [handle, blocks using it, inserted here, use fd]


@contextmanager
def _module(variant: str, hz: int, dilation: int) -> Iterator[CCHandle]:
    """The port as a kernel module for the block (reference-counted in this process)."""
    name = kernel_name(variant)
    with _lock:
        entry = _modules.get(name)
        if entry is not None and (entry[0].hz, entry[0].dilation) != (hz, dilation):
            raise CCError(f"module {name} is already in use by this process with hz={entry[0].hz}, "
                          f"dilation={entry[0].dilation}; cannot load it with hz={hz}, dilation={dilation}")
        if entry is None:
            fd = _use_lock(name)
            try:
                ko, inserted = _kmod.insert(variant, hz, dilation, fd)
            except BaseException:
                os.close(fd)
                raise
            handle = CCHandle(variant=variant, impl="port", kernel_name=name,
                              object_sha256=sha256_file(ko), source_sha256=source_sha256(variant),
                              hz=hz, dilation=dilation, shared=not inserted, loaded_as="kmod")
            entry = _modules[name] = [handle, 0, inserted, fd]
        entry[1] += 1
    try:
        yield entry[0]
    finally:
        with _lock:
            entry[1] -= 1
            if entry[1] == 0:
                del _modules[name]
                try:
                    if entry[2]:
                        _kmod.remove(name, entry[3])
                finally:
                    os.close(entry[3])


@contextmanager
def loaded_object(path: str | Path, name: str) -> Iterator[CCHandle]:
    """A user's own BPF struct_ops object (impl "bpf"), registered for the duration of
    the block under the algorithm name its tcp_congestion_ops gives, which must be `name`.
    Nothing in it is rewritten: it has no emulated HZ and cannot be time-dilated."""
    obj = Path(path)
    if not obj.is_file():
        raise CCError(f"impl bpf: object {obj} does not exist")
    if name in available_algorithms():
        raise CCError(f"impl bpf: {name!r} is already registered on this host (built in or by "
                      f"another program); give your algorithm its own name")
    check_host()
    out = build()
    with _sigterm_as_exit():
        proc = subprocess.Popen([str(loader_path(out)), str(obj), "-"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            line = proc.stdout.readline() if sel.select(timeout=READY_TIMEOUT) else b""
            sel.close()
            if not line.startswith(b"ready "):
                _stop(proc)
                err = proc.stderr.read().decode(errors="replace").strip()
                raise CCError(f"impl bpf: registering {obj} failed (loader exit {proc.returncode}): "
                              f"{err[-2000:] or 'no ready line'}")
            # the map's name is the C variable's; the kernel knows the algorithm by .name
            if name not in available_algorithms():
                raise CCError(f"impl bpf: {obj} registered, but not as {name!r} "
                              f"(tcp_available_congestion_control: {' '.join(available_algorithms())}); "
                              f"the design's variant must be the object's tcp_congestion_ops .name")
            yield CCHandle(variant=name, impl="bpf", kernel_name=name, object_sha256=sha256_file(obj),
                           source_sha256=None, hz=None, owner_pid=proc.pid)
        finally:
            _stop(proc)

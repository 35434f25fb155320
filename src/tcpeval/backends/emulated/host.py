"""Host-side plumbing for the emulated backend: commands, namespaces, the host lock,
run state files and cleanup of dead runs.

Everything a run creates lives inside network namespaces named ``tev<id>-<role>``; the
host's own namespace, routes and qdiscs are never touched. The owner of each run is
recorded in /run/tcpeval/<id>.json *before* anything is created, so a later run (or
``tcpeval cleanup``) can remove the leftovers of a run whose process is gone.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tcpeval.backends.base import BackendError

LOCK_PATH = Path("/run/lock/tcpeval-net.lock")
STATE_DIR = Path("/run/tcpeval")
PREFIX = "tev"
MAX_PAIRS = 16  # plan.MAX_FLOWS
ROLES = ("sw", *(f"{k}{i}" for i in range(1, MAX_PAIRS + 1) for k in ("s", "r")))
# Our namespace names: tev + 6 hex + '-' + role. Cleanup touches nothing else.
NS_RE = re.compile(rf"^{PREFIX}([0-9a-f]{{6}})-(?:{'|'.join(ROLES)})$")
REQUIRED_TOOLS = ("ip", "tc", "ethtool", "iperf3", "clang", "gcc", "bpftool")
# CAP_NET_ADMIN(12), CAP_SYS_ADMIN(21), CAP_BPF(39), CAP_PERFMON(38)
REQUIRED_CAPS = {"CAP_NET_ADMIN": 12, "CAP_SYS_ADMIN": 21, "CAP_BPF": 39}


class PreflightError(BackendError):
    """The host cannot run the emulated backend (not root, a missing capability or
    tool); raised before anything is created."""


def new_run_id() -> str:
    return secrets.token_hex(3)


def ns_name(run_id: str, role: str) -> str:
    return f"{PREFIX}{run_id}-{role}"


# ----------------------------------------------------------------------------- commands

def run(args: list[str], *, ns: str | None = None, check: bool = True, timeout: float = 60,
        input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command (inside namespace ``ns`` if given); BackendError names it on failure."""
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise BackendError(f"command timed out after {timeout:.0f} s: {' '.join(full)}") from None
    except FileNotFoundError:
        raise BackendError(f"command not found: {full[0]}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip()
        raise BackendError(f"command failed ({proc.returncode}): {' '.join(full)}: {msg}")
    return proc


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _child_setup(runner: int) -> None:  # runs in the child between fork and exec
    # Die with the runner, even on SIGKILL: no iperf3 or delay line outlives its run. The
    # runner's pid, not 1, tells whether it died before prctl: in a container it may be 1.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != runner:
        os._exit(1)


def spawn(args: list[str], *, ns: str | None = None, stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL, wrap=None) -> subprocess.Popen:
    """Start a child that dies with this process and ignores the terminal's Ctrl-C (the
    runner handles SIGINT and tears down in order). ``wrap`` (args -> args) wraps the whole
    command, `ip netns exec` included (which mounts a sysfs of its own: a cgroup is
    entered outside it)."""
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    if wrap:
        full = wrap(full)
    return subprocess.Popen(full, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                            preexec_fn=functools.partial(_child_setup, os.getpid()),
                            start_new_session=True)


def tool_version(cmd: list[str], pattern: str = r"(\d+\.\d+(?:\.\d+)?)") -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout + out.stderr).strip()
    first = text.splitlines()[0] if text else ""
    m = re.search(pattern, first)
    return first if not m else (first if len(first) < 80 else m.group(1))


# ----------------------------------------------------------------------------- preflight

def _effective_caps() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def preflight() -> None:
    """Fail clearly, before anything is created, when the host cannot run the backend."""
    if os.geteuid() != 0:
        raise PreflightError(
            "the emulated backend needs root (network namespaces, tc, BPF); "
            f"running as uid {os.geteuid()}: run it with sudo or as root")
    caps = _effective_caps()
    missing = [name for name, bit in REQUIRED_CAPS.items() if not caps >> bit & 1]
    if missing:
        raise PreflightError(f"the emulated backend needs capabilities {', '.join(missing)}, "
                             "which this process lacks (a restricted container?)")
    tools = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if tools:
        raise PreflightError(f"missing tools: {', '.join(tools)} "
                             "(Debian packages: see tools/apt-packages.txt)")


# ----------------------------------------------------------------------------- lock

class HostLock:
    """Exclusive flock on /run/lock/tcpeval-net.lock (docs/architecture.md); wait up to
    ``timeout`` seconds (0: fail at once), telling the user who holds it."""

    def __init__(self, timeout: float = 600.0, path: Path = LOCK_PATH, log=None):
        self.timeout, self.path, self.log = timeout, path, log or (lambda m: None)
        self.fd: int | None = None

    def __enter__(self) -> "HostLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + self.timeout
        told = False
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(self.fd)
                    self.fd = None
                    raise BackendError(
                        f"another experiment holds {self.path} ({describe_holders()}); "
                        f"gave up after {self.timeout:.0f} s (--lock-timeout)") from None
                if not told:
                    self.log(f"waiting for {self.path} ({describe_holders()}) ...")
                    told = True
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None


def describe_holders() -> str:
    live = [s for s in read_states() if pid_alive(s.get("pid"), s.get("pid_start"))]
    if not live:
        return "held by another process"
    return ", ".join(f"run {s['run_id']} pid {s['pid']}" for s in live)


# ----------------------------------------------------------------------------- state

def pid_start(pid: int) -> str | None:
    """The task's start time (clock ticks since boot): a reused pid or tid is another task."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22: start time in clock ticks


def pid_alive(pid, start=None) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    now = pid_start(pid)
    return now is not None and (start is None or now == start)


def write_state(run_id: str, **info) -> Path:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    path = STATE_DIR / f"{run_id}.json"
    data = {"run_id": run_id, "pid": os.getpid(), "pid_start": pid_start(os.getpid()),
            "created": time.time(), **info}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
    return path


def read_states() -> list[dict]:
    out = []
    for path in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            data["_path"] = str(path)
            out.append(data)
        except (OSError, json.JSONDecodeError):
            out.append({"run_id": path.stem, "_path": str(path), "pid": None})
    return out


def list_netns() -> list[str]:
    proc = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def remove_netns(ns: str) -> None:
    """Kill whatever runs inside ``ns`` (iperf3, the delay line), destroy its TCP sockets,
    then delete it; the veths, qdiscs and BPF programs inside go with it.

    Why destroy the sockets: a killed sender's connections live on as orphans that keep
    retransmitting their FIN, and they outlive the namespace (each holds a reference to
    it). With a time-dilated run's minimum RTO (k x 200 ms) that lasts minutes, and the
    orphans keep their congestion-control program, so a port's struct_ops map stays
    registered long after the run (seen after a stopped run at k = 48)."""
    pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    for pid in pids:  # reap-free wait: the processes may not be our children
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                break
            time.sleep(0.01)
    run(["ss", "--kill", "--tcp", "--all"], ns=ns, check=False)  # SOCK_DESTROY (INET_DIAG_DESTROY)
    proc = run(["ip", "netns", "delete", ns], check=False)
    if proc.returncode != 0 and ns in list_netns():
        raise BackendError(f"could not delete namespace {ns}: {proc.stderr.strip()}")


def remove_run(run_id: str) -> list[str]:
    removed = []
    for ns in list_netns():
        m = NS_RE.match(ns)
        if m and m.group(1) == run_id:
            remove_netns(ns)
            removed.append(ns)
    from tcpeval.backends.emulated import engine_cpu  # which imports this module

    engine_cpu.restore(STATE_DIR / f"{run_id}{engine_cpu.STATE_SUFFIX}")  # a run killed midway
    try:
        (STATE_DIR / f"{run_id}.json").unlink()
    except FileNotFoundError:
        pass
    return removed


def cleanup_stale(*, holding_lock: bool, log=None) -> list[str]:
    """Remove the leftovers of runs whose owner is gone. With the host lock held, our
    namespaces without any state file are leftovers too (state is written before any
    namespace exists, and nobody else can be mid-run)."""
    log = log or (lambda m: None)
    removed: list[str] = []
    owned: set[str] = set()
    for state in read_states():
        rid = state.get("run_id", "")
        if pid_alive(state.get("pid"), state.get("pid_start")) and state.get("pid") != os.getpid():
            owned.add(rid)
            continue
        gone = remove_run(rid)
        if gone:
            log(f"removed leftovers of dead run {rid} (pid {state.get('pid')}): {', '.join(gone)}")
        removed += gone
    if holding_lock:
        for ns in list_netns():
            m = NS_RE.match(ns)
            if m and m.group(1) not in owned:
                remove_netns(ns)
                log(f"removed orphan namespace {ns}")
                removed.append(ns)
    return removed


def leftovers() -> dict:
    """What of ours exists on the host right now (for tests and `tcpeval cleanup -n`)."""
    ns = [n for n in list_netns() if NS_RE.match(n)]
    procs = []
    for n in ns:
        procs += run(["ip", "netns", "pids", n], check=False).stdout.split()
    states = [s["run_id"] for s in read_states()]
    return {"namespaces": ns, "processes": procs, "state_files": states}

"""A user's BPF sock_ops program on the senders' sockets (condition.sock_ops): loaded with
bpftool and attached to a cgroup (v2) of the run's own, which every sender-side process
(iperf3 clients, tevrpc servers) enters before it execs, so the program sees the run's
sender sockets and nothing else on the host; detached and removed when the run ends.

Why a cgroup: sock_ops programs attach to cgroups, and a socket belongs to the cgroup of
the process that made it -- network namespaces do not scope them."""
from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

from tcpeval.backends.base import BackendError

PIN_DIR = Path("/sys/fs/bpf")


def cgroup2_root() -> Path:
    """Where the unified (v2) hierarchy is mounted: /sys/fs/cgroup, or
    /sys/fs/cgroup/unified on a host that keeps v1 beside it."""
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            return Path(parts[1])
    raise BackendError("sock_ops: no cgroup v2 hierarchy is mounted; a sock_ops program attaches to one")


def _bpftool(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["bpftool", *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise BackendError("sock_ops: bpftool is not installed (Debian: bpftool)") from None


class SockOps:
    def __init__(self, obj: str | Path, run_id: str):
        self.obj = Path(obj)
        self.name = f"tcpeval-{run_id}-senders"
        self.pin = PIN_DIR / f"tev{run_id}_sockops"
        self.cgroup: Path | None = None
        self.prog_id: int | None = None
        self.attached = False

    def start(self) -> None:
        """Load and attach; a program that does not load is refused naming the field and
        bpftool's words (the verifier's, for one it rejects)."""
        if not self.obj.is_file():
            raise BackendError(f"sock_ops: {self.obj} is not a file (the .bpf.o of a sock_ops program)")
        self.sha256 = hashlib.sha256(self.obj.read_bytes()).hexdigest()
        out = _bpftool("prog", "load", str(self.obj), str(self.pin), "type", "sockops")
        if out.returncode != 0:
            self.pin.unlink(missing_ok=True)
            detail = (out.stderr or out.stdout).strip().splitlines()
            raise BackendError(f"sock_ops: {self.obj} does not load as a sock_ops program: "
                               + " / ".join(detail[-4:]))
        shown = _bpftool("-j", "prog", "show", "pinned", str(self.pin))
        self.prog_id = json.loads(shown.stdout).get("id") if shown.returncode == 0 else None
        self.cgroup = cgroup2_root() / self.name
        self.cgroup.mkdir(exist_ok=True)
        out = _bpftool("cgroup", "attach", str(self.cgroup), "sock_ops", "pinned", str(self.pin))
        if out.returncode != 0:
            self.stop()
            raise BackendError(f"sock_ops: attaching {self.obj} to {self.cgroup} failed: {out.stderr.strip()}")
        self.attached = True

    def wrap(self, args: list) -> list:
        """``args`` run inside the run's cgroup (entered before exec: every socket they
        make is the program's)."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.cgroup), *map(str, args)]

    def stop(self) -> None:
        """Detach, unpin, and remove the cgroup once its processes are gone."""
        if self.attached:
            _bpftool("cgroup", "detach", str(self.cgroup), "sock_ops", "pinned", str(self.pin))
            self.attached = False
        self.pin.unlink(missing_ok=True)
        if self.cgroup is not None and self.cgroup.exists():
            for _ in range(50):  # the killed processes leave it a moment later
                try:
                    self.cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)

    def describe(self) -> dict:
        return {"object": str(self.obj), "sha256": self.sha256, "program_id": self.prog_id,
                "attached_to": "the senders' processes (a cgroup v2 of the run's own: iperf3 clients, "
                               "tevrpc servers)", "cgroup": self.name}

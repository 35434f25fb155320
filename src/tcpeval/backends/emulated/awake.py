"""Keep the host's vCPUs awake while a run lasts (`tevdelay awake`, one per CPU).

In a VM an idle vCPU halts, and the hypervisor may hand its core to someone else; the
timer or packet that should wake it then waits for the host: base RTTs several times
the setting, ACKs held back by a delay line that slept until its next frame was due, and
CPU time stolen in runs that kept the CPUs mostly idle. A SCHED_IDLE loop per CPU takes
only time nothing else wants, so a vCPU with work runs it as before and one without
never halts (the A/B measurement is in docs/fidelity.md).

The loops' CPU time is not the run's load: `ticks()` reports it so that the runner can
leave it out of `measured.cpu_busy`.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host

# Why (docs/trace-format.md, mechanisms.keep_awake): an idle vCPU halts and wakes late
# (hypervisor); timers, the delay line and RTT probes then run milliseconds late.


def root_cpu_group(pid: int | str = "self") -> tuple[str, Path | None]:
    """The cpu-controller cgroup of ``pid`` and, when that is not the root, the root's
    file that takes a process (None where the root is not mounted here).

    SCHED_IDLE yields only within the loop's own scheduling group: in a cgroup (a
    container, a Slurm job) that group competes with the host's kernel threads, ksoftirqd
    among them, as ordinary work, and their wakeups wait for the loop (in a privileged
    container native CUBIC then fell short of the calibrated rate; docs/fidelity.md). A
    privileged container with the host's /sys/fs/cgroup can
    put them there."""
    v1 = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        v1.update({c: path for c in controllers.split(",") if c})
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, fs = line.partition(" - ")
        root, mount = fields.split()[3:5]
        fstype, _, options = fs.split()[:3]
        if root != "/":
            continue  # a view of one cgroup (a container's own), not the hierarchy
        if fstype == "cgroup" and "cpu" in options.split(","):
            return v1.get("cpu", "/"), Path(mount) / "tasks"
        if fstype == "cgroup2" and "cpu" not in v1 and "cpu" in (Path(mount) / "cgroup.controllers").read_text().split():
            return v1.get("", "/"), Path(mount) / "cgroup.procs"
    return v1.get("cpu", v1.get("", "/")), None


def all_cpus() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


class KeepAwake:
    def __init__(self, tevdelay: Path, cpus: list[int] | None = None):
        self.tevdelay = tevdelay
        self.cpus = all_cpus() if cpus is None else list(cpus)
        self.procs: list[subprocess.Popen] = []
        self.cpu_cgroup: str | None = None  # where the loops run (cpu controller)

    def start(self) -> None:
        for cpu in self.cpus:
            proc = host.spawn([self.tevdelay, "awake", cpu], stdout=subprocess.PIPE)
            self.procs.append(proc)
            if proc.stdout.readline().strip() != b"ready":
                proc.wait(timeout=5)
                self.stop()
                raise BackendError(f"tevdelay awake {cpu} failed to start (exit {proc.returncode})")
            group, root = root_cpu_group(proc.pid)
            if group != "/" and root is not None:
                root.write_text(f"{proc.pid}\n")  # root_cpu_group says why
                group = root_cpu_group(proc.pid)[0]
            self.cpu_cgroup = group

    def ticks(self) -> int:
        """CPU time the loops used so far, in the USER_HZ ticks of /proc/stat."""
        total = 0
        for proc in self.procs:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total

    def stop(self) -> None:
        procs, self.procs = self.procs, []
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def describe(self) -> dict:
        return {"mechanism": "tevdelay-awake", "cpus": self.cpus, "cpu_cgroup": self.cpu_cgroup}

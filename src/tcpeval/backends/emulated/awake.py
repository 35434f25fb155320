"""Keep the host's vCPUs awake while a run lasts (`tevdelay awake`, one per CPU).

In a VM an idle vCPU halts, and the hypervisor may hand its core to someone else; the
timer or packet that should wake it then waits for the host. On the project's 2-core VM
that showed as base RTTs of 1-1.5 ms at a 0.2 ms setting, ACKs held back 10-15 ms by a
delay line that slept until its next frame was due, and 3-15 % of CPU time stolen in runs
that kept the CPUs only 10-30 % busy. A SCHED_IDLE loop per CPU takes only time nothing
else wants, so a vCPU with work runs it as before and one without never halts (A/B, same
conditions: stolen time 0.2-1 %, held-back ACKs down 10-50x, base RTT 0.16-0.28 ms).

The loops' CPU time is not the run's load: `ticks()` reports it so that the runner can
leave it out of `measured.cpu_busy`.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host

WHY = ("an idle vCPU halts and wakes late (hypervisor): timers, the delay line and RTT "
       "probes then run milliseconds late")


class KeepAwake:
    def __init__(self, tevdelay: Path, cpus: list[int] | None = None):
        self.tevdelay = tevdelay
        self.cpus = sorted(os.sched_getaffinity(0)) if cpus is None else list(cpus)
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        for cpu in self.cpus:
            proc = host.spawn([self.tevdelay, "awake", cpu], stdout=subprocess.PIPE)
            self.procs.append(proc)
            if proc.stdout.readline().strip() != b"ready":
                proc.wait(timeout=5)
                self.stop()
                raise BackendError(f"tevdelay awake {cpu} failed to start (exit {proc.returncode})")

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
        return {"mechanism": "tevdelay awake (SCHED_IDLE loop per CPU)", "cpus": self.cpus,
                "why": WHY, "cpu_busy": "excludes the loops' own CPU time"}

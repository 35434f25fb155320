"""Fixtures for tests/cc: the host harness, and a three-namespace dumbbell
(sender -- router with a tbf bottleneck -- receiver) named tevcc*, always removed."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
NET_LOCK = Path("/run/lock/tcpeval-net.lock")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


@contextmanager
def net_lock():
    """Exclusive host-wide lock while pushing traffic (docs/architecture.md)."""
    NET_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(NET_LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


EVENT_FIELDS = ("t_ns", "old", "new", "cwnd", "prior_cwnd", "ssthresh", "prior_ssthresh",
                "total_retrans", "p0", "p1", "p2", "p3")


class LossProbe:
    """Records the flow's congestion-state changes in the kernel, at the moment they
    happen (cc/probe/lossprobe.bpf.c), independent of any userspace sampling."""

    def __init__(self, daddr: str, dport: int):
        from tcpeval.cc._build import build_probe
        out = build_probe()
        self.proc = subprocess.Popen([str(out / "tevcc-lossprobe"),
                                      str(out / "probe" / "lossprobe.bpf.o"), daddr, str(dport)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"lossprobe failed: {line} {self.proc.stderr.read()}")

    def stop(self) -> list[dict]:
        """Detach, drain and return the events (dicts over EVENT_FIELDS + 'ca');
        self.misses: probe runs the kernel skipped (-1: unknown)."""
        try:
            out, err = self.proc.communicate(input="", timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        lines = out.splitlines()
        if self.proc.returncode != 0 or not lines or lines[-1] != "end":
            raise RuntimeError(f"lossprobe exit {self.proc.returncode}: {err}")
        events = []
        self.misses = None
        for ln in lines:
            if ln.startswith("misses "):
                self.misses = int(ln.split()[1])
            if ln.startswith("ev "):
                f = ln.split()
                ev = dict(zip(EVENT_FIELDS, map(int, f[1:13])))
                ev["ca"] = f[13]
                events.append(ev)
        return events


class Dumbbell:
    RATE = "100mbit"

    def __init__(self):
        i = uuid.uuid4().hex[:6]
        self.id = i
        self.S, self.M, self.D = f"tevccS{i}", f"tevccM{i}", f"tevccD{i}"
        self.s_if, self.m1_if, self.m2_if, self.d_if = (f"tevccs{i}", f"tevccm{i}",
                                                         f"tevccn{i}", f"tevccd{i}")
        self.net = 200 + int(i[:2], 16) % 50
        self.d_addr = f"10.{self.net}.2.2"
        self.port = 5201
        self.created: list[str] = []

    def setup(self):
        S, M, D, n = self.S, self.M, self.D, self.net
        for ns in (S, M, D):
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
        sh("ip", "-n", S, "link", "add", self.s_if, "type", "veth", "peer", "name", self.m1_if,
           "netns", M)
        sh("ip", "-n", M, "link", "add", self.m2_if, "type", "veth", "peer", "name", self.d_if,
           "netns", D)
        for ns, dev, addr in ((S, self.s_if, f"10.{n}.1.1/24"), (M, self.m1_if, f"10.{n}.1.2/24"),
                              (M, self.m2_if, f"10.{n}.2.1/24"), (D, self.d_if, f"10.{n}.2.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            # per-packet behaviour: no segmentation/aggregation offloads
            sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
               "gro", "off", check=False)
        for ns in (S, M, D):
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", M, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", D, "route", "add", "default", "via", f"10.{n}.2.1")
        for ns in (S, D):
            # paper host settings; no cached ssthresh between flows
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1",
               "net.ipv4.tcp_timestamps=0", "net.ipv4.tcp_sack=1")
        # the bottleneck: a rate limit with a queue long enough never to drop here
        sh("ip", "netns", "exec", M, "tc", "qdisc", "add", "dev", self.m2_if, "root", "tbf",
           "rate", self.RATE, "burst", "16k", "limit", "8mb")
        sh("ip", "-n", S, "route", "add", "default", "via", f"10.{n}.1.2")

    def drop_every(self, n: int | None, index: int | None = None):
        """Drop every n-th data packet arriving at the receiver (nft numgen); with
        `index`, only the data packet with that 0-based number in each n."""
        sh("ip", "netns", "exec", self.D, "nft", "delete", "table", "inet", "tevcc", check=False)
        if n:
            rules = (f"table inet tevcc {{\n chain tevin {{\n"
                     f"  type filter hook input priority 0;\n"
                     f"  tcp dport {self.port} meta length > 1000 numgen inc mod {n} == {n - 1 if index is None else index} "
                     f"counter drop\n }}\n}}\n")
            proc = subprocess.run(["ip", "netns", "exec", self.D, "nft", "-f", "-"],
                                  input=rules, capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"nft failed: {proc.stderr}")

    def host_faults(self) -> dict:
        """What the host, not the path, did to the dumbbell's flows so far: frames its
        devices dropped on their way in (a CPU's input backlog full: a loaded host behind
        a burst; the tbf queue itself never drops), the sender's retransmission timeouts
        (a stall longer than the RTO) and the recoveries the sender undid (the kernel found
        its retransmission spurious: the host reordered frames, as when a sender moves to
        the other CPU while its frames still wait in the first one's backlog; CI: one fast
        recovery at cwnd 2,975, undone, in a never-dropping dumbbell). Compare two readings
        around a flow."""
        from tcpeval.backends.emulated.counters import (
            UNDO_COUNTERS,
            input_drops,
            net_counters,
        )
        devs = [self.s_if, self.m1_if, self.m2_if, self.d_if]
        dropped = sum(sum(input_drops(ns, devs).values()) for ns in (self.S, self.M, self.D))
        sender = net_counters(self.S, {"TcpExt": ("TCPTimeouts",) + UNDO_COUNTERS})
        return {"input drops": dropped, "timeouts": sender.get("TCPTimeouts", 0),
                "undone recoveries": sum(sender.get(k, 0) for k in UNDO_COUNTERS)}

    def teardown(self):
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns, check=False)
        self.created.clear()

    def flow(self, algo: str, seconds: float, during=None, rcvbuf: int = 0,
             probe: bool = False) -> dict:
        """One sender->receiver flow with `algo`; returns the sender's JSON report.
        `during(self)` runs while the flow is active. With `probe`, the report gets
        "events": the kernel's congestion-state changes of this flow (LossProbe)."""
        py = sys.executable
        tool = str(HERE / "flowtool.py")
        with net_lock():
            lp = LossProbe(self.d_addr, self.port) if probe else None
            try:
                rep = self._flow(py, tool, algo, seconds, during, rcvbuf)
            finally:
                events = lp.stop() if lp else None
        if probe:
            rep["events"], rep["probe_misses"] = events, lp.misses
        return rep

    def _flow(self, py, tool, algo, seconds, during, rcvbuf) -> dict:
        sink = subprocess.Popen(["ip", "netns", "exec", self.D, py, tool, "sink",
                                 str(self.port), str(rcvbuf)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert sink.stdout.readline().strip() == "listening"
            sender = subprocess.Popen(["ip", "netns", "exec", self.S, py, tool, "send",
                                       self.d_addr, str(self.port), algo, str(seconds)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            try:
                if during:
                    time.sleep(min(0.4, seconds / 2))
                    during(self)
                out, err = sender.communicate(timeout=seconds + 30)
            finally:
                if sender.poll() is None:
                    sender.kill()
                    sender.wait()
            if sender.returncode != 0:
                raise RuntimeError(f"sender failed: {err}")
            sink.wait(timeout=10)
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.wait()
        return json.loads(out)


@pytest.fixture
def dumbbell():
    assert os.geteuid() == 0, "the dumbbell needs root: mark the test @pytest.mark.root"
    db = Dumbbell()
    try:
        db.setup()
        yield db
    finally:
        db.teardown()


@pytest.fixture(scope="session")
def host_build(tmp_path_factory):
    from tcpeval.cc import build_host
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler for the host harness")
    return build_host()

"""Propagation delay for the emulated dumbbell, and RTT probes.

Mechanism, chosen at run time:
- ``netem``: where the kernel has sch_netem, a netem qdisc on the switch's ports toward
  the senders (the ACK path), limit far above BDP + buffer.
- ``tevdelay-afpacket``: otherwise (a kernel without sch_netem, sch_fq or etf), the
  project's delay line (delayline/tevdelay.c) on the same ACK path: taps on the switch's
  ports from the receivers, re-injection toward the senders.

The whole delay sits on the reverse path: ACKs are few (one per ~2-6 data packets) and
small, so delaying them costs far less than delaying data, and what the algorithms see
-- the RTT -- is the same. The data path still crosses the bottleneck queue at once,
exactly like the paper's switch buffer in front of the ring.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host, topology
from tcpeval.backends.emulated.bottleneck import QUEUES
from tcpeval.backends.emulated.build import Artifacts

ECHO_PORT = 7
# The delay sits on the reverse (ACK) path: the switch ports toward the senders.


def netem_available(ns: str, dev: str) -> bool:
    """Probe sch_netem inside the run's own namespace (never the host's)."""
    proc = host.run(["tc", "qdisc", "add", "dev", dev, "root", "handle", "9:", "netem", "delay", "0"],
                    ns=ns, check=False)
    if proc.returncode == 0:
        host.run(["tc", "qdisc", "del", "dev", dev, "root"], ns=ns, check=False)
        return True
    return False


KERNEL_CONFIGS = (Path("/proc/config.gz"), Path("/boot") / f"config-{os.uname().release}")


def stall_accounting() -> tuple[bool, str]:
    """Whether the link engine can tell a host stall (the hypervisor took its vCPU) from its
    own overload, and why (tevdelay.c, "host stalls"): it reads a gap in its loop as stolen
    when it did not give up its CPU (no voluntary switch) and at least half the gap was
    neither its own CPU time nor a wait on the run queue (schedstat). That holds where the kernel leaves
    stolen time out of a thread's CPU time (CONFIG_PARAVIRT_TIME_ACCOUNTING) and counts the
    softirq work done in the thread's context as the thread's (no
    CONFIG_IRQ_TIME_ACCOUNTING: with it, a long softirq would read as stolen). Without
    steal accounting nothing reads as stolen, so the watch is harmless there; it is off
    where the kernel's configuration cannot be read."""
    for path in KERNEL_CONFIGS:
        try:
            with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
                text = f.read()
        except OSError:
            continue
        if "CONFIG_IRQ_TIME_ACCOUNTING=y" in text:
            return False, f"the kernel accounts IRQ time apart ({path}): softirq time would read as stolen"
        if "CONFIG_PARAVIRT_TIME_ACCOUNTING=y" not in text:
            return True, f"no steal accounting ({path}): no stall can be seen, none is counted"
        return True, f"stolen time is left out of thread CPU time, softirq time is not ({path})"
    return False, "the kernel's configuration is not readable (/proc/config.gz, /boot/config-*)"


RELEASE_ENV = "TCPEVAL_ACK_RELEASE"
RELEASES = ("batch", "each")


def release_rule() -> str:
    """How the delay line releases frames: "batch" (tevdelay.c; the default), or $TCPEVAL_ACK_RELEASE
    "each", the rule before 2026-11-26 that benchmarks compare against: every frame as soon as
    it is due within Q/2, Q = 1/200 of the delay, at most 50 us (each_quantum_ns)."""
    rule = os.environ.get(RELEASE_ENV) or "batch"
    if rule not in RELEASES:
        raise BackendError(f"{RELEASE_ENV}={rule!r}: expected one of {', '.join(RELEASES)}")
    return rule


def each_quantum_ns(delay_ns: int) -> int:
    """The quantum of the "each" rule: 1/200 of the delay, within [5, 50] us."""
    return int(min(50_000, max(5_000, delay_ns // 200)))


def quantum_ns(delay_ns: int) -> int:
    """Release quantum of the delay line: frames go out in batches that span at most Q of
    due times, at the middle of them, so each within Q/2 of its due time (tevdelay.c); 1/100 of the delay (the RTT but the hosts' own), within [5, 250]
    us: 14 us at 1.4 ms, 250 us at >= 25 ms. A batch costs the senders' CPU one interrupt:
    in this VM 14 us of its time, more than the ACKs' own processing, so a quantum of 50
    us (1/200, the cap before) left 1.58 Gbps at 37 ms with one interrupt per 2 ACKs and
    both CPUs saturated; at 250 us, one per 16 (docs/fidelity.md, "ACKs in batches")."""
    return int(min(250_000, max(5_000, delay_ns // 40)))


class DelayLine:
    mechanism = "tevdelay-afpacket"

    def __init__(self, art: Artifacts, topo: topology.Topology, run_dir: Path, *, rt_prio: int = 20,
                 cpu: int | None = None, held_ms: tuple = (), link: dict | None = None):
        # the link engine spins at nice -20 alone on its CPU, never SCHED_FIFO (tevdelay.c)
        self.art, self.topo, self.run_dir, self.rt_prio = art, topo, run_dir, 0 if link else rt_prio
        # the link engine's rate and buffer ({"rate_bps", "limit_bytes"}), or None: the
        # process is then the delay line alone (bottleneck.py says what the engine does)
        self.link = link
        # lateness thresholds the stats count frames against (ms, physical): the verdict's,
        # multiplied by a time-dilated run's factor (tcpeval.backends.fidelity.held_ms)
        self.held_ms = tuple(held_ms)
        # the senders' receive processing of the released ACKs (and the data they clock
        # out) is steered by RPS away from the line's CPU (topology.placement)
        self.cpu = cpu
        self.proc: subprocess.Popen | None = None
        self.delay_ns = 0
        self.release = release_rule()
        # host stalls counted apart by the spinning link engine, where the kernel's
        # accounting lets it tell them (stall_accounting)
        self.stall_watch, self.stall_watch_why = stall_accounting() if link else (False, "no link engine")
        self.stats_path = run_dir / "delayline.json"
        # The kernel's own copy of each reverse-path frame is discarded at the ports'
        # tc ingress (taps see the frame first), so frames travel only through the line.
        for port in topo.ack_ports():
            host.run([art.tevbpf, "attach", art.datapath_obj, "tev_steal", port, "ingress"], ns=topo.sw)

    def start(self, delay_ns: int) -> None:
        self.stop()
        self.delay_ns = max(0, int(delay_ns))
        t = self.topo
        args = [self.art.tevdelay, "line", "--delay-ns", self.delay_ns, "--quantum-ns", self.quantum_ns,
                "--release", self.release, "--stats", self.stats_path]
        if self.held_ms:
            args += ["--held-ms", ",".join(format(ms, "g") for ms in self.held_ms)]
        if self.rt_prio:
            args += ["--rt", self.rt_prio]
        if self.stall_watch:
            args += ["--stall-watch"]
        if self.cpu is not None:
            args += ["--cpu", self.cpu]
        for port in t.ack_ports():
            args += ["--in", port]
        for i in range(1, t.pairs + 1):
            args += ["--route", f"{topology.sender_ip(i)}={t.dev(f's{i}')},"
                                f"{t.mac(f's{i}', t.dev('ep'))},{t.mac('sw', t.dev(f's{i}'))}"]
        if self.link:
            args += ["--rate-bps", f"{self.link['rate_bps']:.0f}", "--buffer-bytes", self.link["limit_bytes"]]
            if self.link.get("ecn_threshold_bytes"):
                args += ["--ecn-threshold-bytes", self.link["ecn_threshold_bytes"]]
            queues = self.link.get("flow_queues")  # pair i carries flow i - 1
            if queues:
                args += ["--ecn-queues", 2]
            for port in t.sender_ports():
                args += ["--data-in", port]
            for i in range(1, t.pairs + 1):
                queue = f",{QUEUES.index(queues[i - 1])}" if queues else ""
                args += ["--data-route", f"{topology.receiver_ip(i)}={t.dev(f'r{i}')},"
                                         f"{t.mac(f'r{i}', t.dev('ep'))},{t.mac('sw', t.bottleneck_dev)}{queue}"]
        if self.stats_path.exists():
            self.stats_path.unlink()
        self.proc = host.spawn(args, ns=t.sw, stdout=subprocess.PIPE,
                               stderr=open(self.run_dir / "delayline.log", "ab"))
        line = self.proc.stdout.readline().strip()
        if line != b"ready":
            self.proc.wait(timeout=5)
            raise BackendError(f"delay line failed to start (exit {self.proc.returncode}); "
                               f"see {self.run_dir / 'delayline.log'}")

    def stop(self) -> dict | None:
        """Stop the line; its statistics (ring drops, lateness) or None."""
        if not self.proc:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif proc.returncode != 0:
            raise BackendError(f"the delay line died (exit {proc.returncode}) during the run; "
                               f"see {self.run_dir / 'delayline.log'}")
        try:
            return json.loads(self.stats_path.read_text())
        except (OSError, json.JSONDecodeError):
            return None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def link_counters(self, timeout_s: float = 2.0) -> dict | None:
        """The link engine's sent frames and bytes and its queue's drops now, with its
        monotonic time, and the ACKs the delay line forwarded and could not send so far: a
        SIGUSR1 makes it append them to <stats>.snap (tevdelay.c). None without an engine."""
        if not self.link or not self.alive():
            return None
        snap = self.stats_path.with_name(self.stats_path.name + ".snap")
        # only what is appended after the signal is read: a precision run at drop 0 asks at
        # every sample, and the whole file grows to thousands of lines
        start = snap.stat().st_size if snap.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # complete lines only: a line that straddles a page of the file can be read
            # half written (a 30-min run failed on one, 2026-11-30)
            if snap.exists():
                with snap.open("rb") as f:
                    f.seek(start)
                    # whole lines (a previous line's tail, were one still being written, is not)
                    lines = [line for line in f.read().split(b"\n")[:-1] if line.startswith(b'{"mono_ns"')]
                if lines:
                    last = json.loads(lines[-1])
                    return {"t_s": last["mono_ns"] / 1e9, "bytes": last["sent_bytes"], "frames": last["sent"],
                            "drops": last.get("tail_drops"), "acks_not_sent": last.get("acks_not_sent"),
                            "acks_forwarded": last.get("acks_forwarded")}
            time.sleep(0.002)
        return None

    @property
    def quantum_ns(self) -> int:
        return (each_quantum_ns if self.release == "each" else quantum_ns)(self.delay_ns)

    def describe(self) -> dict:
        return {"mechanism": self.mechanism,
                "delay_ns": self.delay_ns, "quantum_ns": self.quantum_ns, "release": self.release,
                "sched": f"SCHED_FIFO {self.rt_prio}" if self.rt_prio
                else "SCHED_OTHER nice -20" if self.link else "SCHED_OTHER",
                "cpu": self.cpu, "link_engine": bool(self.link),
                "host_stalls": {"watched": self.stall_watch, "why": self.stall_watch_why},
                "waits": "spins (the link engine never sleeps)" if self.link
                else "sleeps until the head frame's batch is due" if self.release == "batch"
                else "sleeps until the head frame is due"}


class Netem:
    mechanism = "netem"

    def __init__(self, topo: topology.Topology, limit_packets: int):
        self.topo, self.limit = topo, max(10000, int(limit_packets))
        self.delay_ns = 0

    def start(self, delay_ns: int) -> None:
        self.delay_ns = max(0, int(delay_ns))
        for port in self.topo.sender_ports():
            host.run(["tc", "qdisc", "replace", "dev", port, "root", "netem", "delay",
                      f"{self.delay_ns / 1000:.3f}us", "limit", self.limit], ns=self.topo.sw)

    def stop(self) -> dict | None:
        stats = {}
        for port in self.topo.sender_ports():
            out = host.run(["tc", "-s", "-j", "qdisc", "show", "dev", port], ns=self.topo.sw, check=False)
            try:
                stats[port] = json.loads(out.stdout)
            except json.JSONDecodeError:
                pass
        return {"netem": stats}

    def alive(self) -> bool:
        return True

    def link_counters(self) -> None:
        return None

    def describe(self) -> dict:
        return {"mechanism": self.mechanism, "delay_ns": self.delay_ns,
                "limit_packets": self.limit}


PROBE_RT_PRIO = 10  # below the delay line's priority


class Prober:
    """UDP echo RTT probes from sender 1 to receiver 1 across the whole path. Echo and
    probe run SCHED_FIFO: TCP answers in softirq, without a scheduler wakeup, so a
    time-shared echo would add the host's scheduling latency (up to milliseconds on a
    busy host) to what should be the path's RTT."""

    def __init__(self, art: Artifacts, topo: topology.Topology):
        self.art, self.topo = art, topo
        self.rt = ["chrt", "-f", str(PROBE_RT_PRIO)]
        self.echo = host.spawn([*self.rt, art.tevdelay, "echo", ECHO_PORT], ns=topo.ns("r1"),
                               stdout=subprocess.PIPE)
        if self.echo.stdout.readline().strip() != b"ready":
            raise BackendError("RTT echo responder failed to start")

    def measure(self, count: int = 20, interval_us: int = 1000, reply_wait_ms: float = 1000.0) -> dict:
        """reply_wait_ms: how long after the last probe its replies are awaited; more than
        the path's RTT (a time-dilated path's is k times the setting: over 1 s at k = 48)."""
        out = host.run([*self.rt, self.art.tevdelay, "probe", topology.receiver_ip(1), ECHO_PORT, count,
                        interval_us, int(reply_wait_ms * 1000)], ns=self.topo.ns("s1"),
                       timeout=30 + count * 1.2 + reply_wait_ms / 1000)
        data = json.loads(out.stdout)
        rtts = sorted(x / 1e6 for x in data["rtt_ns"])
        if not rtts:
            raise BackendError("RTT probes got no replies: the path is broken")
        return {"median_ms": statistics.median(rtts), "min_ms": rtts[0], "max_ms": rtts[-1],
                "count": len(rtts), "lost": data["lost"]}

    def close(self) -> None:
        if self.echo.poll() is None:
            self.echo.kill()
            self.echo.wait()


PROBES, PROBE_GAP_US = 41, 250  # idle-RTT probes per measurement (median), pacing
MAX_CORRECTIONS = 3
MAX_SELF_LATENCY_MS = 0.5  # the most the delay mechanism itself is trusted to add


def mechanism_for(art: Artifacts, topo: topology.Topology, run_dir: Path, *, rtt_ms: float,
                  rate_bps: float | None, buffer_bytes: int, rt_prio: int, cpu: int | None,
                  held_ms: tuple, link: dict | None = None):
    """The delay line when it is also the link (``link``: its rate and limit); else netem
    where the kernel has it, the delay line otherwise (not yet started)."""
    if link:
        return DelayLine(art, topo, run_dir, rt_prio=rt_prio, cpu=cpu, held_ms=held_ms, link=link)
    if netem_available(topo.sw, topo.sender_ports()[0]):
        rate = rate_bps or topology.UNSHAPED_RATE_BPS
        limit = int((rate / 8 * (rtt_ms / 1000) + buffer_bytes) / 64) * 2
        return Netem(topo, limit)
    return DelayLine(art, topo, run_dir, rt_prio=rt_prio, cpu=cpu, held_ms=held_ms)


@dataclass
class RttSetting:
    """The delay a run settled on: the path's base RTT, the delay added to reach the
    setting, the correction steps it took, and the last idle-RTT measurement."""
    base: dict
    added_ms: float
    corrections: int
    probe: dict

    @property
    def base_ms(self) -> float:
        return self.base["median_ms"]


def set_rtt(delayer, prober: Prober, rtt_ms: float, tol_ms: float, log) -> RttSetting:
    """Measure the path's base RTT, add the rest of the setting and correct for the
    mechanism's own latency, up to MAX_CORRECTIONS steps, until the idle RTT lies within
    a quarter of the tolerance ``tol_ms`` of the setting ``rtt_ms``. The delayer runs
    (at 0: the base RTT) and the prober's echo is up."""
    # replies awaited twice the (physical) RTT, at least 1 s
    probe_args = {"count": PROBES, "interval_us": PROBE_GAP_US, "reply_wait_ms": max(1000.0, 2 * rtt_ms)}
    base = prober.measure(**probe_args)
    # a base that leaves nothing to add may have caught a stall of the host (its 41 probes
    # span 10 ms: the suite here, 2026-12-07, 4.69 ms on a 2-ms path whose idle RTT then read 1.52 ms),
    # and nothing after it would notice: measured again, the least median kept (a stall
    # only lengthens); a path that is longer than the setting stays so
    for _ in range(MAX_CORRECTIONS):
        if base["median_ms"] < rtt_ms:
            break
        again = prober.measure(**probe_args)
        log(f"base RTT {base['median_ms']:.3f} ms, not below the {rtt_ms} ms setting: "
            f"measured again, {again['median_ms']:.3f} ms")
        base = min(base, again, key=lambda m: m["median_ms"])
    added_ms = max(0.0, rtt_ms - base["median_ms"])
    corrections = 0
    best = None  # (|error|, added) of the closest plausible measurement so far
    while True:
        delayer.start(int(added_ms * 1e6))
        probe = prober.measure(**probe_args)
        err = probe["median_ms"] - rtt_ms
        log(f"idle RTT {probe['median_ms']:.3f} ms with {added_ms:.3f} ms added")
        # beyond what the mechanism itself adds (wakeups, re-injection): a disturbed
        # measurement (a stall of the host), not a bias to correct. A stall only lengthens
        # an RTT, so one short of the setting means the base was measured long (Debian's
        # kernel under QEMU: a base of 8.9 ms, then 12-15 ms with 11.1 ms added): add it
        plausible = err < 0 or abs(err) <= max(MAX_SELF_LATENCY_MS, 0.2 * added_ms)
        if added_ms > 0 and plausible:
            best = min(best or (abs(err), added_ms), (abs(err), added_ms))
        if added_ms <= 0 or abs(err) <= tol_ms / 4 or corrections >= MAX_CORRECTIONS:
            break
        corrections += 1
        if plausible:
            # correct for the mechanism's own latency; repeated, since one median on a
            # busy host can be off itself (a disturbed one is measured again rather than
            # allowed to remove the delay)
            added_ms = max(0.0, added_ms - err)
    if best and abs(err) > tol_ms and best[0] < abs(err):
        # the corrections chased a noisy median: go back to the setting that measured
        # closest, and measure it once more with twice the probes
        added_ms = best[1]
        delayer.start(int(added_ms * 1e6))
        probe = prober.measure(**{**probe_args, "count": 2 * PROBES})
        log(f"idle RTT {probe['median_ms']:.3f} ms with {added_ms:.3f} ms added "
            f"(closest setting, {2 * PROBES} probes)")
    log(f"base RTT {base['median_ms']:.3f} ms; added {added_ms:.3f} ms ({delayer.mechanism}); "
        f"idle RTT {probe['median_ms']:.3f} ms")
    return RttSetting(base=base, added_ms=added_ms, corrections=corrections, probe=probe)

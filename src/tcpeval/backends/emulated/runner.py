"""The emulated backend: one run = one condition on the namespace dumbbell, one trace.

Order of a run (each step logged to run_dir/run.log):
  preflight (root, capabilities, tools) -> build helpers -> host lock -> clean up dead
  runs -> state file -> namespaces + links (offloads off but the senders' GSO) -> CPU
  placement (RPS, iperf3 -A) and the switch's L2 redirects -> endpoint sysctls ->
  bottleneck qdisc (rate, buffer) -> BPF dropper (programmed, disabled) -> delay
  (netem or the delay line) with base-RTT measurement and up to 3 correction steps ->
  congestion control loaded -> iperf3 servers -> dropper enabled -> clients at their
  start offsets -> dropper disabled, counters read -> teardown -> trace.json (atomic).
Any failure or signal tears everything down; run.log says why and no trace is written.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from tcpeval import dilation as dilation_mod
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import calibrate as calib
from tcpeval.backends import common, fidelity
from tcpeval.backends.emulated import awake, ccadapter, delay, host, topology, traffic
from tcpeval.backends.emulated.build import Artifacts, ensure_built
from tcpeval.backends.emulated.dropctl import BpfDropper

# Host-global: read and recorded, never changed (autotuning needs no rmem_max; iperf3
# is run without -w).
HOST_SYSCTLS = ["net.core.rmem_max", "net.core.wmem_max", "net.core.netdev_max_backlog",
                "net.core.default_qdisc"]
SWITCH_SYSCTLS = ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter",
                  "net.bridge.bridge-nf-call-iptables"]
FINISH_GRACE_S = 20.0    # flows end within this long after the duration, plus
FINISH_GRACE_RTTS = 120   # this many RTTs (more under loss: see _drive)
MAX_FLOWS = host.MAX_PAIRS  # sender/receiver pairs of the dumbbell (parallel-flow designs: 10)
LOCK_TIMEOUT_S = 900.0
ATTEMPTS = 3  # a run flagged only for transient host trouble is run again, up to this often
MIN_BUFFER_BYTES = 64 * 1024
PROBES, PROBE_GAP_US = 41, 250  # idle-RTT probes per measurement (median), pacing
MAX_CORRECTIONS = 3
MAX_SELF_LATENCY_MS = 0.5  # the most the delay mechanism itself is trusted to add
TBF_BURST_S = 200e-6
# The peak bucket holds one frame, so each frame waits until it has refilled: at 10x the
# rate that took about as long as a dequeue and every few frames waited for the qdisc
# watchdog (~20 us), capping any rate near 0.55 Gbps; at 100x a refill is shorter than any
# dequeue.
PEAK_FACTOR = 100
WIRE_FRAME_BYTES = 1514


class RunInterrupted(BaseException):
    """SIGTERM/SIGHUP during a run: unwinds like KeyboardInterrupt so teardown runs."""


@contextlib.contextmanager
def _signals_unwind():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise RunInterrupted(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _cpu_times() -> tuple[int, int, int]:
    """Host-wide CPU time: (total, idle, stolen by the hypervisor) in USER_HZ ticks."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts), idle, parts[7] if len(parts) > 7 else 0


def _qdisc_stats(ns: str, dev: str) -> dict:
    out = host.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], ns=ns, check=False).stdout
    try:
        qdiscs = json.loads(out)
    except json.JSONDecodeError:
        return {}
    root = next((q for q in qdiscs if q.get("root")), qdiscs[0] if qdiscs else {})
    return {k: root.get(k) for k in ("kind", "bytes", "packets", "drops", "overlimits", "requeues",
                                     "backlog", "qlen")}


def _net_counters(ns: str, wanted: dict) -> dict:
    """Counters of a namespace from /proc/net/snmp and /proc/net/netstat (pairs of a
    "Group: names" line and a "Group: values" line): {name: value} for the names in
    ``wanted`` ({group: names}) that the kernel has."""
    text = host.run(["cat", "/proc/net/snmp", "/proc/net/netstat"], ns=ns, check=False).stdout
    out, lines = {}, text.splitlines()
    for names, values in zip(lines, lines[1:]):
        group = names.split(":", 1)[0]
        if group not in wanted or not values.startswith(group + ":") or names == values:
            continue
        table = dict(zip(names.split()[1:], values.split()[1:]))
        for key in wanted[group]:
            if key in table and table[key].lstrip("-").isdigit():
                out[key] = int(table[key])
    return out


def _ip_forwarded(ns: str) -> int | None:
    """IP ForwDatagrams of a namespace: what took the routing fallback instead of the
    switch's L2 redirect."""
    return _net_counters(ns, {"Ip": ("ForwDatagrams",)}).get("ForwDatagrams")


TCP_COUNTERS = {"Tcp": ("InSegs", "OutSegs", "RetransSegs"),
                "TcpExt": ("TCPBacklogCoalesce", "DelayedACKs", "TCPAckCompressed", "TCPPureAcks",
                           "TCPHPAcks", "TCPBacklogDrop", "TCPRcvQDrop", "TCPOFOQueue",
                           # why a receiver might hold its ACKs back: a window it cannot
                           # advance (full receive queue, collapsing, memory pressure)
                           "PruneCalled", "TCPRcvCollapsed", "TCPMemoryPressures",
                           "TCPWantZeroWindowAdv", "TCPToZeroWindowAdv", "DelayedACKLocked")}


def _tcp_counters(ns: str) -> dict:
    """A namespace's TCP segment and ACK-processing counters."""
    return _net_counters(ns, TCP_COUNTERS)


def _in_order_ratio(before: dict, after: dict, pairs: int,
                    acks_per_retransmission: int = 0) -> tuple[float | None, int, int]:
    """(in-order segments per ACK, segments, ACKs) of the receivers between two counter
    snapshots. In-order leaves out what a loss makes a receiver ACK at once, one ACK per
    segment, whatever the ACK clock: out-of-order segments (TCPOFOQueue) and the
    retransmissions that fill the holes (the senders' RetransSegs)."""
    def d(role, key):
        return after[role].get(key, 0) - before[role].get(key, 0)
    rng = range(1, pairs + 1)
    rin = sum(d(f"r{i}", "InSegs") for i in rng)
    rout = sum(d(f"r{i}", "OutSegs") for i in rng)
    immediate = sum(d(f"r{i}", "TCPOFOQueue") + d(f"s{i}", "RetransSegs") for i in rng)
    acks = rout - immediate - acks_per_retransmission * sum(d(f"s{i}", "RetransSegs") for i in rng)
    return ((rin - immediate) / acks if acks > 0 else None), rin, rout


def _ack_record(before: dict, after: dict, pairs: int, midway: dict | None = None) -> dict:
    """Per-endpoint counter deltas and the receivers' data segments per ACK (3.16 with
    delayed ACKs: about 2; far more means stretch ACKs), over the whole run and, from the
    `midway` snapshot on, over its second half: the steady state the verdict judges (the
    first seconds, with the receive window still opening, run a little higher)."""
    delta = {role: {k: after[role].get(k, 0) - before[role].get(k, 0) for k in after[role]}
             for role in after}
    in_order, rin, rout = _in_order_ratio(before, after, pairs)
    steady, _, steady_acks = _in_order_ratio(midway, after, pairs) if midway else (None, 0, 0)
    lenient = (_in_order_ratio(midway, after, pairs, fidelity.HOLE_FILL_ACKS)[0] if midway else None)
    return {"endpoints": delta, "receiver_segments_per_ack": rin / rout if rout else None,
            "receiver_segments_per_ack_in_order": in_order,
            "receiver_segments_per_ack_steady": steady, "receiver_acks_steady": steady_acks,
            "receiver_segments_per_ack_steady_after_hole_fills": lenient,
            "backlog_coalesced": sum(d.get("TCPBacklogCoalesce", 0) for d in delta.values())}


def _softnet_drops() -> int:
    total = 0
    for line in Path("/proc/net/softnet_stat").read_text().splitlines():
        total += int(line.split()[1], 16)
    return total


def tool_versions() -> dict:
    return {
        "iperf3": host.tool_version(["iperf3", "--version"]),
        "tc": host.tool_version(["tc", "-V"]),
        "ip": host.tool_version(["ip", "-V"]),
        "clang": host.tool_version(["clang", "--version"]),
        "gcc": host.tool_version(["gcc", "--version"]),
        "bpftool": host.tool_version(["bpftool", "version"]),
        "ethtool": host.tool_version(["ethtool", "--version"]),
        "python": platform.python_version(),
    }


@dataclass
class Plan:
    """What a run will do, derived from the condition and the host's calibration."""
    rate_bps: float | None          # None: unshaped (calibration)
    buffer_bytes: int
    rtt_ms: float
    drop: float
    seed: int
    background_loss: float
    duration_s: float
    interval_s: float
    flows: list                      # tcpeval.spec.Flow
    stack: dict
    hz: int
    host_capacity_bps: float | None
    calibration: dict | None
    rate_source: str = "condition"
    notes: list = field(default_factory=list)
    dilation: int = 1                # time-dilation factor: every field above is physical


SS_FIRST_LOOK_S = 0.5  # ss -ti after a flow's start: this long plus SS_SETUP_RTTS RTTs
SS_SETUP_RTTS = 6
SS_TRIES = 10
RTO_MIN_SYSCTL = "net.ipv4.tcp_rto_min_us"  # per namespace, Linux >= 6.11
RTO_MIN_US = 200_000                        # TCP_RTO_MIN


def _sender_defaults(endpoint_sysctls: dict, pairs: int) -> dict:
    """Each sender's namespace default algorithm: what its connections start with."""
    return {f"s{i}": endpoint_sysctls.get(f"s{i}", {}).get("net.ipv4.tcp_congestion_control")
            for i in range(1, pairs + 1)}


def _dilation_record(condition, plan: "Plan", endpoint_sysctls: dict) -> dict:
    """mechanisms.dilation: the factor, what was scaled and what could not be."""
    k = plan.dilation
    rto = {role: v.get(RTO_MIN_SYSCTL) for role, v in endpoint_sysctls.items()}
    scaled = {"physical_rate_bps": plan.rate_bps, "physical_rtt_ms": plan.rtt_ms,
              "physical_duration_s": plan.duration_s, "physical_interval_s": plan.interval_s,
              "port_clocks": f"cc_dilation = {k}: emulated jiffies, the HyStart ms clock and the "
                             f"RTT samples the ports read are physical time / {k}"}
    not_scaled = {
        "buffer_bytes": "kept in bytes (the virtual BDP in bytes equals the physical one)",
        "drop_probability": "kept (per packet)",
        "delayed_ack_timer": "the receivers' delayed-ACK timeout (40-200 ms) is the kernel's; "
                             "it only fires for a lone unacknowledged segment, which bulk "
                             "transfer with ACKs every second segment rarely leaves",
        "initial_rto": "1 s before the first RTT sample (connection set-up only)",
        "tso_autosizing": f"TSO frames are sized to ~1 ms of the physical rate, but capped at "
                          f"{topology.SENDER_BURST_S * 1e6:g} us of the virtual bottleneck "
                          f"(gso_max_segs), so their size is the same at every k",
        "rtt_based_timers": "RTO, TLP and RACK follow the measured (physical) RTT, i.e. they "
                            "scale by themselves"}
    if k > 1:
        if rto and all(str(v) == str(RTO_MIN_US * k) for v in rto.values()):
            scaled["rto_min"] = f"{RTO_MIN_SYSCTL} = {RTO_MIN_US * k} on every endpoint"
        else:
            not_scaled["rto_min"] = (f"{RTO_MIN_SYSCTL} not available on this kernel "
                                     f"(endpoints: {rto}); the minimum RTO stayed 200 ms physical")
    return {"factor": k, "setting": condition.dilation,
            "units": "physical: measurements in this trace; the condition is virtual",
            "scaled": scaled if k > 1 else {}, "not_scaled": not_scaled if k > 1 else {}}


def check_condition(condition) -> None:
    """Reject what the emulated backend cannot realise, naming the field."""
    if condition.backend != "emulated":
        raise BackendError(f"condition.backend is {condition.backend!r}, expected 'emulated'")
    if not 1 <= len(condition.flows) <= MAX_FLOWS:
        raise BackendError(f"condition.flows: {len(condition.flows)} flows; the dumbbell has "
                           f"{MAX_FLOWS} sender/receiver pairs")
    for i, flow in enumerate(condition.flows):
        if flow.protocol not in ("tcp", "udp"):
            raise BackendError(f"condition.flows[{i}].protocol: {flow.protocol!r} is not tcp or udp")
        if not 0 <= flow.start_s < condition.duration_s:
            raise BackendError(f"condition.flows[{i}].start_s: {flow.start_s} must lie in "
                               f"[0, duration_s={condition.duration_s})")
        if flow.stop_s is not None and not flow.start_s < flow.stop_s <= condition.duration_s:
            raise BackendError(f"condition.flows[{i}].stop_s: {flow.stop_s} must lie after its start "
                               f"({flow.start_s}) and at the latest at duration_s={condition.duration_s}")
        if flow.protocol == "udp" and not flow.rate_bps:
            raise BackendError(f"condition.flows[{i}].rate_bps: a UDP cross-traffic flow needs a rate")
    for name in condition.stack or {}:
        if not name.startswith("net.ipv4."):
            raise BackendError(f"condition.stack: {name!r} is not a per-namespace net.ipv4.* "
                               "sysctl (host-global settings are never changed by a run)")
    if condition.rate_bps is not None and condition.rate_bps <= 0:
        raise BackendError(f"condition.rate_bps: {condition.rate_bps} must be > 0")


class EmulatedBackend:
    """``get_backend("emulated")``. Options: progress (stderr messages), lock_timeout_s,
    rt_prio (delay line SCHED_FIFO priority, 0 = off)."""

    name = "emulated"

    def __init__(self, *, progress: bool = False, lock_timeout_s: float = LOCK_TIMEOUT_S,
                 rt_prio: int = 20, attempts: int = ATTEMPTS):
        self.progress, self.lock_timeout_s, self.rt_prio = progress, lock_timeout_s, rt_prio
        if attempts < 1:
            raise BackendError(f"attempts must be at least 1, got {attempts}")
        self.attempts = attempts

    # ------------------------------------------------------------------ public API
    def run(self, condition, run_dir, *, force: bool = False) -> dict:
        from tcpeval import trace as trace_mod

        run_dir = Path(run_dir)
        host.preflight()  # first: not root / no capability -> clear error, nothing touched
        check_condition(condition)
        target = run_dir / trace_mod.TRACE_FILE
        if target.exists() and not force:
            raise BackendError(f"{target} exists; refusing to overwrite a raw trace (use --force)")
        run_dir.mkdir(parents=True, exist_ok=True)
        log = common.RunLog(run_dir / "run.log", self.progress, prefix=str(run_dir))
        try:
            with _signals_unwind():
                art = ensure_built(log)
                t_lock = time.monotonic()
                with host.HostLock(self.lock_timeout_s, log=log):
                    lock_wait_s = time.monotonic() - t_lock
                    host.cleanup_stale(holding_lock=True, log=log)
                    plan = self._plan(condition, art, log)
                    earlier = []
                    while True:
                        record = self._execute(condition, run_dir, plan, art, log)
                        reasons = record["fidelity"]["reasons"]
                        if (record["fidelity"]["verdict"] == "ok" or len(earlier) + 1 >= self.attempts
                                or not fidelity.transient_only(reasons)):
                            break
                        earlier.append({"reasons": reasons, "mean_throughput_bps":
                                        [f["summary"]["mean_throughput_bps"] for f in record["flows"]],
                                        "cpu_stolen": record["measured"].get("cpu_stolen")})
                        log(f"attempt {len(earlier)} flagged by the host, not the setting "
                            f"({'; '.join(reasons)}): running the condition again")
                    record["fidelity"]["earlier_attempts"] = earlier
                record["measured"]["lock_wait_s"] = lock_wait_s  # other experiments, not ours
                record["run"]["path"] = common.display_path(run_dir)
                if force and target.exists():
                    log(f"--force: replacing {target}")
                trace_mod.write_trace(run_dir, record, force=force)
                log(f"trace written: {target} (fidelity {record['fidelity']['verdict']})")
                return record
        except BaseException as err:
            kind = "interrupted" if isinstance(err, (KeyboardInterrupt, RunInterrupted)) else "failed"
            log(f"run {kind}: {type(err).__name__}: {err}")
            if not isinstance(err, (BackendError, KeyboardInterrupt, RunInterrupted)):
                log(traceback.format_exc())
            if isinstance(err, RunInterrupted):
                raise KeyboardInterrupt(str(err)) from None
            raise
        finally:
            log.close()

    def calibrate(self, *, duration_s: float = 4.0, force: bool = True) -> dict:
        host.preflight()
        log = _StderrLog(self.progress)
        art = ensure_built(log)
        if not force:
            cached = calib.load(art.hashes)
            if cached:
                return cached
        with _signals_unwind(), host.HostLock(self.lock_timeout_s, log=log):
            host.cleanup_stale(holding_lock=True, log=log)
            return self._calibrate_locked(art, log, duration_s)

    def unshaped(self, run_dir, *, rtt_ms: float, duration_s: float, flows: int = 1) -> dict:
        """One run without a rate limit (native CUBIC, p = 0, dropper and delay in place):
        what the host's per-packet path carries. Returns the record (no trace.json)."""
        host.preflight()
        log = _StderrLog(self.progress)
        art = ensure_built(log)
        with _signals_unwind(), host.HostLock(self.lock_timeout_s, log=log):
            host.cleanup_stale(holding_lock=True, log=log)
            return self._executor(art)(rtt_ms, duration_s, Path(run_dir), flows)

    def faithful(self, run_dir, *, rtt_ms: float, duration_s: float, flows: int = 1,
                 start_bps: float) -> dict:
        """The highest bottleneck rate, from start_bps down, at which runs come out with
        verdict ok (calibrate.faithful_rate)."""
        host.preflight()
        log = _StderrLog(self.progress)
        art = ensure_built(log)
        with _signals_unwind(), host.HostLock(self.lock_timeout_s, log=log):
            host.cleanup_stale(holding_lock=True, log=log)
            return calib.faithful_rate(self._executor(art), Path(run_dir), rtt_ms=rtt_ms,
                                       flows=flows, duration_s=duration_s, start_bps=start_bps,
                                       log=log)

    # ------------------------------------------------------------------ internals
    def _executor(self, art: Artifacts):
        """executor(rtt_ms, duration_s, run_dir, flows, rate_bps=None): one native-CUBIC run
        at p = 0 with the dropper and the delay in place -- unshaped (rate None: what the
        host carries at all) or at a bottleneck rate (what it carries faithfully, judged
        by the verdict). Returns the record; writes no trace.json."""
        from tcpeval.spec import adhoc_condition

        def executor(rtt_ms: float, dur: float, run_dir: Path, flows: int = 1,
                     rate_bps: float | None = None) -> dict:
            run_dir.mkdir(parents=True, exist_ok=True)
            cond = adhoc_condition(["cubic"] * flows, rtt_ms, 0.0, dur, impl="native", seed=1)
            shaped = rate_bps is not None
            plan = Plan(rate_bps=rate_bps,
                        buffer_bytes=max(MIN_BUFFER_BYTES, int(rate_bps * rtt_ms / 1e3 / 8)) if shaped else 0,
                        rtt_ms=rtt_ms, drop=0.0, seed=1, background_loss=0.0, duration_s=dur,
                        interval_s=0.5, flows=list(cond.flows), stack=self._stack(cond), hz=250,
                        host_capacity_bps=rate_bps, calibration=None,
                        rate_source="calibration (faithful rate search)" if shaped else "unshaped (calibration)")
            runlog = common.RunLog(run_dir / "run.log", False, "calibration")
            try:
                return self._execute(cond, run_dir, plan, art, runlog)
            finally:
                runlog.close()

        return executor

    def _calibrate_locked(self, art: Artifacts, log, duration_s: float = 4.0) -> dict:
        return calib.calibrate(self._executor(art), art.hashes, duration_s=duration_s, log=log)

    def _stack(self, condition, dilation: int = 1) -> dict:
        scaled = {}
        if dilation > 1:
            # the kernel's minimum RTO is a constant the ports do not own: k x 200 ms
            scaled[RTO_MIN_SYSCTL] = str(RTO_MIN_US * dilation)
        return {**common.PAPER_SYSCTLS, **common.STACK_316, **scaled, **(condition.stack or {})}

    def _plan(self, condition, art: Artifacts, log) -> Plan:
        cal = calib.load(art.hashes)
        if cal is None:
            log("no calibration for this host and build yet: calibrating first")
            cal = self._calibrate_locked(art, log)
        # what the host carries faithfully (calibrate.py); older caches knew only the raw figure
        capacity = cal.get("faithful_rate_bps") or cal["host_capacity_bps"]
        if condition.rate_bps is None:
            rate, source = cal["default_rate_bps"], "calibrated host default"
        else:
            rate, source = float(condition.rate_bps), "condition"
        rtt_s = condition.rtt_ms / 1000
        if condition.buffer_bytes is None:
            buffer = max(MIN_BUFFER_BYTES, int(rate * rtt_s / 8))  # one BDP
        else:
            buffer = int(condition.buffer_bytes)
        try:
            k = dilation_mod.factor_for(condition, rate, capacity)
        except dilation_mod.DilationError as err:
            raise BackendError(f"condition.{err}") from None
        if k > 1:
            log(f"time dilation x{k}: {rate / 1e9:.3g} Gbps at {condition.rtt_ms} ms runs as "
                f"{rate / k / 1e9:.3g} Gbps at {condition.rtt_ms * k:g} ms for "
                f"{condition.duration_s * k:g} s (this host carries {capacity / 1e9:.3g} Gbps faithfully)")
        # the virtual path as a physical one (tcpeval.dilation): rate / k, times x k; the
        # buffer in bytes, the drop probability and the seed stay
        flows = [replace(f, start_s=f.start_s * k, stop_s=f.stop_s * k if f.stop_s is not None else None,
                         rate_bps=f.rate_bps / k if f.rate_bps else f.rate_bps)
                 for f in condition.flows]
        return Plan(rate_bps=rate / k, buffer_bytes=buffer, rtt_ms=condition.rtt_ms * k,
                    drop=condition.drop, seed=condition.seed, background_loss=condition.background_loss,
                    duration_s=condition.duration_s * k, interval_s=condition.interval_s * k,
                    flows=flows, stack=self._stack(condition, k), hz=condition.hz,
                    host_capacity_bps=capacity, calibration=cal, rate_source=source, dilation=k)

    def _execute(self, condition, run_dir: Path, plan: Plan, art: Artifacts, log) -> dict:
        started_at = common.now_iso()
        run_id = host.new_run_id()
        pairs = len(plan.flows)
        topo = topology.Topology(run_id, pairs)
        log(f"run {run_id}: {'+'.join(f.variant for f in plan.flows)} rtt {plan.rtt_ms} ms "
            f"drop {plan.drop:g} rate {'unshaped' if plan.rate_bps is None else f'{plan.rate_bps / 1e9:.3g} Gbps'} "
            f"buffer {plan.buffer_bytes} B duration {plan.duration_s:g} s")
        host.write_state(run_id, namespaces=topo.namespaces(), run_dir=str(run_dir))
        t_setup = time.monotonic()
        flows: list[traffic.FlowProc] = []
        delayer = prober = None
        try:
            with contextlib.ExitStack() as stack:
                topo.create()
                place = topo.placement()
                place["rps_masks"] = topo.apply_placement(place)
                keep_awake = awake.KeepAwake(art.tevdelay)
                stack.callback(keep_awake.stop)
                keep_awake.start()
                switch_mech = topo.fast_path(art)
                log(f"namespaces {', '.join(topo.namespaces())} created; CPUs: senders "
                    f"{place['senders']}, receivers {place['receivers']}, delay line {place['line']}")
                endpoint_sysctls = {}
                newer = {k: v for k, v in plan.stack.items() if k in common.NEWER_KERNEL_KNOBS}
                for ns in topo.namespaces():
                    if ns != topo.sw:
                        topology.sysctl(ns, {k: v for k, v in plan.stack.items() if k not in newer},
                                        strict=True)
                        topology.sysctl(ns, newer, strict=False)
                rwin = topology.receive_window(plan.rate_bps, plan.rtt_ms, plan.buffer_bytes)
                topo.set_receive_window(rwin)
                # bottleneck: rate + buffer
                if plan.rate_bps is not None:
                    sender_segs = topology.sender_gso_max_segs(plan.rate_bps * plan.dilation, WIRE_FRAME_BYTES)
                    topo.cap_sender_frames(sender_segs)
                    rate_bytes = plan.rate_bps / 8
                    burst = max(2 * WIRE_FRAME_BYTES, int(rate_bytes * TBF_BURST_S))
                    # peak bucket of one wire frame: TBF then splits every TSO frame into
                    # wire packets as it enqueues them, so the buffer fills and overflows
                    # packet by packet, like the switch's; at PEAK_FACTOR x the rate it
                    # never holds a packet back (tests/emulated/test_runs.py pins the rate)
                    peak = int(plan.rate_bps * PEAK_FACTOR)
                    host.run(["tc", "qdisc", "replace", "dev", topo.bottleneck_dev, "root", "tbf",
                              "rate", f"{int(plan.rate_bps)}bit", "burst", burst,
                              "peakrate", f"{peak}bit", "mtu", WIRE_FRAME_BYTES,
                              "limit", max(plan.buffer_bytes, WIRE_FRAME_BYTES)], ns=topo.sw)
                    rate_mech = {"mechanism": "tbf", "device": topo.bottleneck_dev,
                                 "rate_bps": plan.rate_bps, "burst_bytes": burst,
                                 "peakrate_bps": peak, "mtu_bytes": WIRE_FRAME_BYTES,
                                 "limit_bytes": max(plan.buffer_bytes, WIRE_FRAME_BYTES),
                                 "sender_frame_segments": sender_segs}
                else:
                    rate_mech = {"mechanism": "none (unshaped calibration)"}
                # drop module
                links = topo.drop_stage_links()
                dropper = BpfDropper(art, *links[0], "ingress", program="tev_drop_stage", also=links[1:])
                threshold = dropper.program(plan.drop, plan.seed)
                bg_droppers = []
                if plan.background_loss > 0:
                    # the ring's own rare losses: independent of the drop module, behind it
                    # on each receiver's link (one instance per link)
                    for i, (ns, dev) in enumerate(links):
                        bg = BpfDropper(art, ns, dev, "ingress", prio=2)
                        bg.program(plan.background_loss, ((plan.seed ^ 0x5A5A5A5A) + i) & 0xFFFFFFFF)
                        bg_droppers.append(bg)
                # delay
                if delay.netem_available(topo.sw, topo.sender_ports()[0]):
                    rate = plan.rate_bps or 10e9
                    limit = int((rate / 8 * (plan.rtt_ms / 1000) + plan.buffer_bytes) / 64) * 2
                    delayer = delay.Netem(topo, limit)
                else:
                    delayer = delay.DelayLine(art, topo, run_dir, rt_prio=self.rt_prio, cpu=place["line"],
                                              held_ms=fidelity.held_ms(plan.dilation))
                stack.callback(lambda: delayer and delayer.stop())
                delayer.start(0)
                prober = delay.Prober(art, topo)
                stack.callback(prober.close)
                # replies awaited twice the (physical) RTT, at least 1 s
                probe_args = {"count": PROBES, "interval_us": PROBE_GAP_US,
                              "reply_wait_ms": max(1000.0, 2 * plan.rtt_ms)}
                base = prober.measure(**probe_args)
                base_ms = base["median_ms"]
                added_ms = max(0.0, plan.rtt_ms - base_ms)
                corrections = 0
                tol = fidelity.rtt_tolerance_ms(plan.rtt_ms, plan.dilation)
                best = None  # (|error|, added) of the closest plausible measurement so far
                while True:
                    delayer.start(int(added_ms * 1e6))
                    probe = prober.measure(**probe_args)
                    err = probe["median_ms"] - plan.rtt_ms
                    log(f"idle RTT {probe['median_ms']:.3f} ms with {added_ms:.3f} ms added")
                    # beyond what the mechanism itself adds (wakeups, re-injection): a
                    # disturbed measurement (a stall of the host), not a bias to correct
                    plausible = abs(err) <= max(MAX_SELF_LATENCY_MS, 0.2 * added_ms)
                    if added_ms > 0 and plausible:
                        best = min(best or (abs(err), added_ms), (abs(err), added_ms))
                    if added_ms <= 0 or abs(err) <= tol / 4 or corrections >= MAX_CORRECTIONS:
                        break
                    corrections += 1
                    if plausible:
                        # correct for the mechanism's own latency; repeated, since one
                        # median on a busy host can be off itself (a disturbed one is
                        # measured again rather than allowed to remove the delay)
                        added_ms = max(0.0, added_ms - err)
                if best and abs(err) > tol and best[0] < abs(err):
                    # the corrections chased a noisy median: go back to the setting that
                    # measured closest, and measure it once more with twice the probes
                    added_ms = best[1]
                    delayer.start(int(added_ms * 1e6))
                    probe = prober.measure(**{**probe_args, "count": 2 * PROBES})
                    log(f"idle RTT {probe['median_ms']:.3f} ms with {added_ms:.3f} ms added "
                        f"(closest setting, {2 * PROBES} probes)")
                log(f"base RTT {base_ms:.3f} ms; added {added_ms:.3f} ms ({delayer.mechanism}); "
                    f"idle RTT {probe['median_ms']:.3f} ms")
                prober.close()
                # congestion control
                handles = []
                for flow in plan.flows:
                    if flow.protocol == "tcp":
                        handles.append(stack.enter_context(ccadapter.loaded(
                            flow.variant, flow.impl, plan.hz, dilation=plan.dilation,
                            object_path=flow.object)))
                    else:
                        handles.append(None)
                for i, (flow, handle) in enumerate(zip(plan.flows, handles)):
                    flows.append(traffic.FlowProc(
                        index=i, kernel_name=handle.kernel_name if handle else None,
                        protocol=flow.protocol, start_s=flow.start_s, stop_s=flow.stop_s,
                        duration_s=flow.end_s(plan.duration_s) - flow.start_s, interval_s=plan.interval_s,
                        rate_bps=flow.rate_bps, out_path=run_dir / f"iperf3-flow{i}.json",
                        err_path=run_dir / f"iperf3-flow{i}.log",
                        sender_cpu=place["sender_apps"][i], receiver_cpu=place["receiver_apps"][i],
                        receiver_env=topology.receiver_env(rwin, art.tevrcv)))
                allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
                for fp in flows:
                    # The namespace default too, so iperf3's control connection uses the
                    # flow's algorithm and every socket of the sender can be checked. Only
                    # for algorithms a namespace may take as default (tcp_allowed_...): for
                    # others the kernel answers EPERM and, in this kernel, keeps a reference
                    # to the algorithm on that path, so an unregistered port's struct_ops map
                    # would linger until reboot. Those keep the stack's default (reno, which
                    # never marks a socket for pacing; common.STACK_316).
                    if fp.kernel_name and fp.kernel_name in allowed:
                        fp.default_cc_set = bool(topology.sysctl(
                            topo.ns(f"s{fp.pair}"), {"net.ipv4.tcp_congestion_control": fp.kernel_name},
                            strict=False))
                for i in range(1, pairs + 1):
                    endpoint_sysctls[f"s{i}"] = topology.read_sysctls(topo.ns(f"s{i}"), common.RECORDED_SYSCTLS)
                    endpoint_sysctls[f"r{i}"] = topology.read_sysctls(topo.ns(f"r{i}"), common.RECORDED_SYSCTLS)
                offloads = topo.offload_states()
                switch_sysctls = topology.read_sysctls(topo.sw, SWITCH_SYSCTLS)
                for f in flows:
                    stack.callback(f.stop)
                    f.start_server(topo)
                traffic.wait_listening(topo, [f.pair for f in flows])
                setup_s = time.monotonic() - t_setup
                # traffic
                q0, cpu0, sn0 = _qdisc_stats(topo.sw, topo.bottleneck_dev), _cpu_times(), _softnet_drops()
                awake0 = keep_awake.ticks()
                fw0 = _ip_forwarded(topo.sw)
                endpoints = [f"{k}{i}" for i in range(1, pairs + 1) for k in ("s", "r")]
                def tcp_snapshot():
                    return {role: _tcp_counters(topo.ns(role)) for role in endpoints}
                tcp0 = tcp_snapshot()
                ports = {h.kernel_name: h for h in handles if h is not None and h.impl == "port"}
                guard0 = {name: ccadapter.guard_stats(h) for name, h in ports.items()}
                dropper.enable()
                for bg in bg_droppers:
                    bg.enable()
                log(f"setup {setup_s:.2f} s; traffic for {plan.duration_s:g} s")
                t0 = time.monotonic()
                tcp_mid = {}
                self._drive(flows, topo, delayer, t0, plan, log,
                            midway=lambda: tcp_mid.update(tcp_snapshot()))
                traffic_s = time.monotonic() - t0
                dropper.disable()
                for bg in bg_droppers:
                    bg.disable()
                q1, cpu1, sn1 = _qdisc_stats(topo.sw, topo.bottleneck_dev), _cpu_times(), _softnet_drops()
                awake_ticks = keep_awake.ticks() - awake0
                fw1 = _ip_forwarded(topo.sw)
                acks = _ack_record(tcp0, tcp_snapshot(), pairs, midway=tcp_mid or None)
                cc_guard = {name: ccadapter.guard_difference(ccadapter.guard_stats(h), guard0[name])
                            for name, h in ports.items()}
                switch_mech["ip_forwarded_during_traffic"] = None if None in (fw0, fw1) else fw1 - fw0
                counters = dropper.read()
                bg_counters = [bg.read() for bg in bg_droppers]
                delay_desc = delayer.describe()
                delay_stats = delayer.stop()
                parsed = [traffic.parse(f) for f in flows]
            t_teardown = time.monotonic()
        finally:
            for f in flows:
                f.stop()
            topo.destroy()
            host.remove_run(run_id)
        teardown_s = time.monotonic() - t_teardown
        log(f"teardown {teardown_s:.2f} s")

        # -------------------------------------------------------------- the record
        for flow, fp, res in zip(plan.flows, flows, parsed):
            if flow.protocol == "tcp" and res["verified"] != fp.kernel_name:
                raise BackendError(
                    f"flow {fp.index} ({flow.variant}): asked for congestion control "
                    f"{fp.kernel_name!r}, the socket used {res['verified']!r}; run discarded")
        seen, dropped = counters["seen"], counters["dropped"]
        rate_obs = dropped / seen if seen else None
        ci = list(fidelity.wilson(dropped, seen)) if seen else [0.0, 1.0]
        total_cpu = cpu1[0] - cpu0[0]
        # the keep-awake loops' time is idle time as far as the run is concerned
        cpu_busy = (1 - (cpu1[1] - cpu0[1] + awake_ticks) / total_cpu) if total_cpu > 0 else None
        # a VM's vCPUs stall while the hypervisor runs something else: the delay line's
        # late frames and the ports' skipped hooks come with it on the development VM
        cpu_stolen = (cpu1[2] - cpu0[2]) / total_cpu if total_cpu > 0 else None
        active_s = plan.duration_s - min(f.start_s for f in plan.flows)
        bytes_through = (q1.get("bytes") or 0) - (q0.get("bytes") or 0)
        achieved = bytes_through * 8 / active_s if plan.rate_bps is not None and active_s > 0 else \
            sum(r["summary"]["mean_throughput_bps"] for r in parsed)
        # steady state: what all flows carried together in the second half of the run,
        # after slow start (flows may start and stop on their own schedules)
        half = plan.duration_s / 2
        late_bytes = sum(b for flow, res in zip(plan.flows, parsed)
                         for t, b in zip(res["samples"]["t_s"], res["samples"]["bytes"]) if t + flow.start_s > half)
        steady = 8.0 * late_bytes / (plan.duration_s - half)
        sender_defaults = _sender_defaults(endpoint_sysctls, pairs)
        # a sender whose default is its own flow's algorithm (native bbr) paces as that
        # algorithm does; only a foreign default's pacing is the stack's doing
        foreign_defaults = {who: cc for (who, cc), fp in zip(sender_defaults.items(), flows)
                            if cc != fp.kernel_name}
        extra = []
        for flow, handle in zip(plan.flows, handles):
            if handle is not None and flow.impl == "port" and handle.impl != "port":
                extra.append(f"cc: flow {flow.variant} asked for the 3.16 port; ran the host's "
                             f"native {handle.kernel_name} (tcpeval.cc unavailable)")
        verdict = fidelity.verdict(
            p=plan.drop, seen=seen, dropped=dropped, rtt_setting_ms=plan.rtt_ms, base_rtt_ms=base_ms,
            rtt_ms=probe["median_ms"], rate_bps=plan.rate_bps or 0.0,
            host_capacity_bps=plan.host_capacity_bps if plan.rate_bps is not None else None,
            achieved_bps=steady if plan.rate_bps is not None else achieved, cpu_busy=cpu_busy,
            delay_stats=delay_stats if delayer.mechanism != "netem" else None,
            max_cwnd_bytes=max((r["summary"].get("max_cwnd_bytes") or 0 for r in parsed), default=None),
            buffer_bytes=plan.buffer_bytes,
            segments_per_ack=acks["receiver_segments_per_ack_steady"],
            segments_per_ack_after_hole_fills=acks["receiver_segments_per_ack_steady_after_hole_fills"],
            receiver_acks=acks["receiver_acks_steady"],
            interval_bps=[b for r in parsed for b in r["samples"]["throughput_bps"]], interval_s=plan.interval_s,
            cc_guard=cc_guard, sender_defaults=foreign_defaults,
            extra_reasons=extra, dilation=plan.dilation)
        if plan.rate_bps is None:  # calibration: rate checks do not apply
            verdict["reasons"] = [r for r in verdict["reasons"] if not r.startswith("rate:")]
            verdict["verdict"] = "flagged" if verdict["reasons"] else "ok"

        flow_records = []
        for flow, fp, handle, res in zip(plan.flows, flows, handles, parsed):
            flow_records.append({
                "id": fp.index, "variant": flow.variant,
                "impl": handle.impl if handle else flow.impl, "protocol": flow.protocol,
                "start_s": flow.start_s, "stop_s": flow.stop_s,
                "actual": {"start_s": fp.started_at - t0 if fp.started_at else None,
                           "stop_s": fp.ended_at - t0 if fp.ended_at else None},
                "cc": {"requested": fp.kernel_name or "udp", "verified": res["verified"],
                       "kernel_name": fp.kernel_name,
                       "object_sha256": getattr(handle, "object_sha256", None),
                       "source_sha256": getattr(handle, "source_sha256", None),
                       "hz": getattr(handle, "hz", None),
                       "dilation": getattr(handle, "dilation", None) if handle else None,
                       "receiver": res["receiver_cc"],
                       "ss": fp.ss_algorithms},
                "samples": res["samples"], "summary": res["summary"],
                "raw_files": [fp.out_path.name, fp.err_path.name, fp.err_path.with_suffix(".server.log").name],
            })
        env = {
            "hostname": socket.gethostname(), "kernel": platform.release(),
            "kernel_version": platform.version(), "cpus": os.cpu_count() or 1,
            "tools": tool_versions(), "tcpeval_version": common.tcpeval_version(),
            "git_revision": common.git_revision(),
            "sysctls": {"endpoints": endpoint_sysctls,
                        "host_global": topology.read_sysctls_host(HOST_SYSCTLS),
                        "switch": switch_sysctls},
            "offloads": offloads, "build_sha256": art.hashes,
            "cc_provider": "tcpeval.cc" if ccadapter.cc_module() else "native fallback",
        }
        mechanisms = {
            "drop": dropper.mechanism, "delay": delayer.mechanism, "rate": rate_mech["mechanism"],
            "drop_detail": {"devices": [f"{ns.split('-', 1)[1]}:{dev}" for ns, dev in dropper.ports],
                            "hook": "tc clsact ingress of each receiver's link, after the bottleneck "
                                    "queue (one program, one register map)",
                            "program": dropper.program_name,
                            "threshold": threshold, "seed": plan.seed, "concurrency": dropper.concurrency,
                            "wire_sized_packets": {
                                "offloads": "TSO and GSO on at the senders' veths (the paper's NICs "
                                            f"did TSO), frames of at most {topology.SENDER_BURST_S * 1e6:g} us "
                                            "of the virtual bottleneck (gso_max_segs; the paper's senders "
                                            "sent at the bottleneck's rate, so bursts queued nowhere); off "
                                            "on every switch port, so TSO frames are "
                                            "split into wire packets by the bottleneck's TBF (or "
                                            "the port's transmit path) before the drop stage; "
                                            "GRO/LRO off everywhere",
                                "max_frame_bytes": counters.get("max_frame_bytes"),
                                "frames_over_mtu": counters.get("frames_over_mtu"),
                                "mtu_frame_bytes": WIRE_FRAME_BYTES}},
            "delay_detail": {**delay_desc, "base_rtt_ms": base_ms, "added_ms": added_ms,
                             "correction_steps": corrections},
            "rate_detail": rate_mech,
            "switch": switch_mech,
            "segment_mark": {"what": "lowest DSCP bit (TOS 0x04) = IP ID parity on every TCP "
                                     "segment the drop stage passes and every ACK the delay line "
                                     "(or, with netem, the switch) carries",
                             "why": "keeps the kernel from merging backlogged segments and ACKs "
                                    "(tcp_add_backlog, Linux >= 5.0); 3.16 processed each one"},
            "push_flag": {"what": "the drop stage clears PSH on full-sized (MTU) data segments",
                          "why": "receivers since Linux 6.6 ACK a full-sized PSH segment at once "
                                 "when their reader keeps up (ICSK_ACK_PUSHED); 3.16 receivers "
                                 "ACKed every second one",
                          "segments": counters.get("push_cleared")},
            "placement": place,
            "dilation": _dilation_record(condition, plan, endpoint_sysctls),
            "keep_awake": keep_awake.describe(),
            "receive_window": {k: v for k, v in rwin.items() if k != "sysctls"},
            "traffic": {"tool": "iperf3", "affinity": "-A: placement.sender_apps / receiver_apps",
                        "sender_default_cc": sender_defaults,
                        "pacing": ("tcp-internal (see fidelity)" if fidelity.pacing_check(sender_defaults)
                                   else "none: connections start under a default that does not "
                                        "pace (common.STACK_316), as 3.16 without fq")},
            "background_loss": {"mechanism": "bpf-tc", "probability": plan.background_loss,
                                "devices": [bg.dev for bg in bg_droppers]} if bg_droppers else None,
            "topology": {"namespaces": [n.split("-", 1)[1] for n in topo.namespaces()],
                         "bottleneck_device": topo.bottleneck_dev.split("-", 1)[1],
                         "bridged": topo.bridged, "run_id": run_id},
        }
        measured = {
            "base_rtt_ms": base_ms, "rtt_ms": probe["median_ms"], "rtt_probe_method": delay.Prober.method,
            "rtt_probe": probe, "base_rtt_probe": base,
            "drop": {"seen": seen, "dropped": dropped, "rate": rate_obs, "ci95": ci,
                     "interval": "wilson", "check": verdict["checks"]["drop"]},
            "bottleneck_rate_bps": achieved, "steady_throughput_bps": steady,
            "host_capacity_bps": plan.host_capacity_bps,
            "configured_rate_bps": plan.rate_bps, "rate_source": plan.rate_source,
            "buffer_bytes": plan.buffer_bytes,
            "bottleneck_qdisc": {"before": q0, "after": q1},
            "cpu_busy": cpu_busy, "cpu_stolen": cpu_stolen, "softnet_drops_host": sn1 - sn0,
            "delay_line": delay_stats,
            "acks": acks,
            "cc_guard": cc_guard or None,
            "background_drop": bg_counters or None,
            "setup_s": setup_s, "traffic_s": traffic_s, "teardown_s": teardown_s,
            "calibration": {k: plan.calibration.get(k) for k in ("measured_at", "host_capacity_bps",
                                                                  "faithful_rate_bps",
                                                                  "default_rate_bps", "points",
                                                                  "loadavg_before", "loadavg_after")}
            if plan.calibration else None,
        }
        verdict.pop("checks", None)
        cond = condition.to_dict()
        return {
            "schema_version": 1,
            "run": {"path": common.display_path(run_dir), "backend": "emulated",
                    "campaign": condition.campaign, "criterion": condition.criterion,
                    "rep": condition.rep},
            "condition": cond, "environment": env, "mechanisms": mechanisms,
            "flows": flow_records, "measured": measured, "fidelity": verdict,
            "started_at": started_at, "finished_at": common.now_iso(), "notes": plan.notes,
        }

    def _drive(self, flows, topo, delayer, t0: float, plan: Plan, log, midway=None) -> None:
        """Start clients at their offsets; watch every process; stop when all are done.
        midway(), if given, runs once at half the run's duration."""
        pending = sorted(flows, key=lambda f: f.start_s)
        # iperf3 ends a test over its control connection, which meets the path's losses and
        # retransmission timeouts too: on a long lossy path (512 ms, 30 %) that takes many RTTs
        grace_s = FINISH_GRACE_S + FINISH_GRACE_RTTS * plan.rtt_ms / 1000 / max(1e-3, 1 - plan.drop) ** 2
        deadline = t0 + plan.duration_s + grace_s
        next_note = t0 + 5.0
        # iperf3 opens the data socket a few round trips after the control one: on a long
        # (or time-dilated) path the first look may find the control socket alone
        ss_first_look_s = SS_FIRST_LOOK_S + SS_SETUP_RTTS * plan.rtt_ms / 1000
        while True:
            now = time.monotonic()
            if midway and now >= t0 + plan.duration_s / 2:
                midway()
                midway = None
            while pending and now >= t0 + pending[0].start_s:
                f = pending.pop(0)
                f.start_client(topo)
                log(f"flow {f.index} started ({f.kernel_name or 'udp'}) at {now - t0:.2f} s")
            for f in flows:
                # read the algorithm back from the live socket (ss -ti); retried while the
                # connection is not yet (or no longer) listed, judged once it is
                if (f.protocol == "tcp" and not f.ss_algorithms and f.ss_tries < SS_TRIES and f.started_at
                        and now - f.started_at > min(ss_first_look_s + 0.3 * f.ss_tries, f.duration_s / 2)):
                    f.ss_tries += 1
                    algs = [a for a in ccadapter.socket_algorithms(topo.ns(f"s{f.pair}"), traffic.PORT) if a]
                    if (not f.default_cc_set and f.kernel_name not in algs and len(algs) < 2
                            and f.ss_tries < SS_TRIES):
                        continue  # the control socket (namespace default) alone: look again
                    f.ss_algorithms = algs
                    wrong = [a for a in algs if a != f.kernel_name]
                    if not f.default_cc_set and f.kernel_name in algs:
                        wrong = []  # only the data socket carries -C; the control one has the default
                    if not f.default_cc_set and set(wrong) <= {common.STACK_316["net.ipv4.tcp_congestion_control"]}:
                        # the control socket alone (on a lossy path the data socket may not be
                        # up yet): no evidence against -C; iperf3's own report is checked after
                        wrong = []
                    if algs and wrong:
                        raise BackendError(f"flow {f.index}: ss -ti shows congestion control "
                                           f"{wrong} on its sockets, asked for {f.kernel_name!r}")
            for f in flows:
                if f.client is not None and f.client.poll() is not None and f.client.returncode != 0:
                    raise BackendError(f"flow {f.index}: iperf3 client {traffic.describe_exit(f.client)}; "
                                       f"see {f.err_path.name}")
                if f.server is not None and f.server.poll() is not None and f.server.returncode != 0:
                    raise BackendError(f"flow {f.index}: iperf3 server {traffic.describe_exit(f.server)}")
            if not delayer.alive():
                raise BackendError("the delay line died during the run; see delayline.log")
            for f in flows:
                if f.client is not None and f.ended_at is None and f.client.poll() is not None:
                    f.ended_at = now
                    if f.stop_s is not None:
                        log(f"flow {f.index} stopped at {now - t0:.2f} s")
            if not pending and all(f.client.poll() is not None for f in flows):
                return
            if now > deadline:
                raise BackendError(f"flows did not finish within duration + {grace_s:.0f} s")
            if now >= next_note:
                log(f"... {now - t0:.0f}/{plan.duration_s:g} s")
                next_note += 5.0
            time.sleep(0.05)


class _StderrLog:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, msg: str) -> None:
        if self.enabled:
            print(f"tcpeval: {msg}", file=sys.stderr, flush=True)

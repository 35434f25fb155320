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

Each step lives in the module that owns it: plan.py (condition -> physical plan),
topology.py (namespaces, links, placement, sysctls), bottleneck.py (TBF rate and
buffer), dropctl.py (drop stage, background loss), delay.py (delay mechanism, RTT
correction), ccadapter.py (congestion control), traffic.py (iperf3 flows, driving them),
counters.py (kernel counters, ACK record), record_parts.py (this backend's parts of the
trace record; backends/record.py builds it). This module runs them in order.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from pathlib import Path

from tcpeval import trace as trace_mod
from tcpeval.backends import common, fidelity
from tcpeval.backends.base import (
    RETRY_PAUSES_S,
    RUN_ATTEMPTS,
    BackendError,
    attempt_until_ok,
)
from tcpeval.backends.emulated import (
    awake,
    bottleneck,
    ccadapter,
    delay,
    engine_cpu,
    fell_behind,
    host,
    record_parts,
    sockops,
    topology,
    traffic,
)
from tcpeval.backends.emulated import calibrate as calib
from tcpeval.backends.emulated import plan as plans
from tcpeval.backends.emulated.build import Artifacts, ensure_built
from tcpeval.backends.emulated.counters import HostCounters, ack_record, tcp_counters
from tcpeval.backends.emulated.doomed import DoomedWatch, earliest_end_s
from tcpeval.backends.emulated.dropctl import DropStage
from tcpeval.backends.emulated.plan import Plan, check_condition
from tcpeval.backends.emulated.precision_watch import PrecisionWatch, steady_checkpoints
from tcpeval.backends.emulated.run_state import (
    DelayRecord,
    Dumbbell,
    PathSettings,
    Run,
    TrafficMeasurements,
)
from tcpeval.backends.record import refuse_overwrite, replacing, replacing_note
from tcpeval.spec import adhoc_condition


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


class EmulatedBackend:
    """``get_backend("emulated")``. Options: progress (stderr messages), lock_timeout_s,
    rt_prio (delay line SCHED_FIFO priority, 0 = off), attempts and retry_pauses_s (a run
    the host spoiled is run again, after a pause: base.RETRY_PAUSES_S)."""

    name = "emulated"

    def __init__(self, *, progress: bool = False, lock_timeout_s: float = common.LOCK_TIMEOUT_S,
                 rt_prio: int = 20, attempts: int = RUN_ATTEMPTS, retry_pauses_s: tuple = RETRY_PAUSES_S):
        self.progress, self.lock_timeout_s, self.rt_prio = progress, lock_timeout_s, rt_prio
        if attempts < 1:
            raise BackendError(f"attempts must be at least 1, got {attempts}")
        if any(p < 0 for p in retry_pauses_s):
            raise BackendError(f"retry pauses must not be negative, got {retry_pauses_s}")
        self.attempts, self.retry_pauses_s = attempts, tuple(retry_pauses_s)

    # ------------------------------------------------------------------ public API
    def run(self, condition, run_dir, *, force: bool = False) -> dict:
        run_dir = Path(run_dir)
        host.preflight()  # first: not root / no capability -> clear error, nothing touched
        check_condition(condition)
        target = refuse_overwrite(run_dir, force)
        with replacing(run_dir, force) as aside:
            return self._run_in(condition, run_dir, target, aside)

    def _run_in(self, condition, run_dir: Path, target: Path, aside: Path | None) -> dict:
        run_dir.mkdir(parents=True, exist_ok=True)
        log = common.RunLog(run_dir / "run.log", self.progress, prefix=str(run_dir))
        if aside:
            log(replacing_note(aside))
        try:
            with _signals_unwind():
                art = ensure_built(log)
                t_lock = time.monotonic()
                with host.HostLock(self.lock_timeout_s, log=log):
                    lock_wait_s = time.monotonic() - t_lock
                    host.cleanup_stale(holding_lock=True, log=log)
                    attempt = [self._plan(condition, art, log)]   # the next attempt's plan

                    def slow_down(spoiled: dict) -> None:
                        remember(spoiled)
                        attempt[0] = plans.slower(condition, attempt[0], spoiled, log) or attempt[0]

                    def remember(spoiled: dict) -> None:
                        # the next run on this physical path starts a factor slower
                        if fell_behind.note(attempt[0], condition, spoiled, common.display_path(run_dir)):
                            log(f"noted: this host fell behind at x{attempt[0].dilation} on this physical "
                                f"path ({fell_behind.path()})")

                    def execute(last: bool) -> dict:
                        # an attempt that may be run again ends where the host dooms it
                        return self._execute(condition, run_dir, attempt[0], art, log, end_if_doomed=not last)
                    record = attempt_until_ok(execute, self.attempts, self.retry_pauses_s, log,
                                              before_retry=slow_down)
                    if record["fidelity"]["verdict"] != "ok":
                        remember(record)
                record["measured"]["lock_wait_s"] = lock_wait_s  # other experiments, not ours
                record["run"]["path"] = common.display_path(run_dir)
                trace_mod.write_trace(run_dir, record)
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

    def calibrate(self, *, duration_s: float = 4.0, force: bool = True, design: dict | None = None) -> dict:
        host.preflight()
        log = _StderrLog(self.progress)
        art = ensure_built(log)
        if not force:
            cached = calib.load(art.hashes, self._links())
            if cached:
                return cached
        with _signals_unwind(), host.HostLock(self.lock_timeout_s, log=log):
            # once more with the lock held: a calibration it waited behind may have written one
            if not force and (cached := calib.load(art.hashes, self._links())):
                return cached
            host.cleanup_stale(holding_lock=True, log=log)
            return self._calibrate_locked(art, log, duration_s, design)

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
                 start_bps: float, link: str = "tbf") -> dict:
        """The highest bottleneck rate of link mechanism ``link``, from start_bps down, at
        which runs come out with verdict ok (calibrate.faithful_rate)."""
        host.preflight()
        log = _StderrLog(self.progress)
        art = ensure_built(log)
        with _signals_unwind(), host.HostLock(self.lock_timeout_s, log=log):
            host.cleanup_stale(holding_lock=True, log=log)
            return calib.faithful_rate(self._executor(art), Path(run_dir), rtt_ms=rtt_ms,
                                       flows=flows, duration_s=duration_s, start_bps=start_bps, link=link,
                                       log=log)

    # ------------------------------------------------------------------ internals
    def _executor(self, art: Artifacts):
        """executor(rtt_ms, duration_s, run_dir, flows, rate_bps=None, link=None, judged_at=1,
        ports=False): one native-CUBIC run at p = 0 with the dropper and the delay in place
        -- unshaped (rate None: what the host carries at all) or at a bottleneck rate (what
        it carries faithfully, judged by the verdict with the tolerances of a run dilated
        ``judged_at``-fold); with ``ports``, the flows run the 3.16 port of
        calib.PORTS_VARIANT instead (the ports' ceiling). Returns the record; writes no
        trace.json."""
        def executor(rtt_ms: float, dur: float, run_dir: Path, flows: int = 1,
                     rate_bps: float | None = None, link: str | None = None, judged_at: int = 1,
                     ports: bool = False) -> dict:
            run_dir.mkdir(parents=True, exist_ok=True)
            cond = adhoc_condition([calib.PORTS_VARIANT if ports else "cubic"] * flows, rtt_ms, 0.0, dur,
                                   impl="port" if ports else "native", seed=1)
            plan = plans.for_calibration(cond, rtt_ms, dur, rate_bps, link or bottleneck.forced_link() or "tbf",
                                         judged_at)
            runlog = common.RunLog(run_dir / "run.log", False, "calibration")
            try:
                return self._execute(cond, run_dir, plan, art, runlog)
            finally:
                runlog.close()

        return executor

    def _calibrate_locked(self, art: Artifacts, log, duration_s: float = 4.0, design: dict | None = None) -> dict:
        """The envelope over ``design``'s RTTs (default: config/design.yaml), for every link
        mechanism, or for $TCPEVAL_LINK alone when that forces one."""
        return calib.calibrate(self._executor(art), art.hashes, duration_s=duration_s, log=log,
                               design=design, links=self._links())

    @staticmethod
    def _links() -> tuple:
        """The link mechanisms runs may take: $TCPEVAL_LINK alone, or every one."""
        forced = bottleneck.forced_link()
        return (forced,) if forced else calib.LINKS

    def _plan(self, condition, art: Artifacts, log) -> Plan:
        cal = calib.load(art.hashes, self._links())
        if cal is None:
            log("no calibration for this host, build and link mechanisms yet: calibrating first")
            cal = self._calibrate_locked(art, log)
        return plans.for_condition(condition, cal, log)

    def _execute(self, condition, run_dir: Path, plan: Plan, art: Artifacts, log,
                 end_if_doomed: bool = False) -> dict:
        """One attempt: set up the path step by step, drive the traffic, tear down, and
        build the record from what the steps collected. With ``end_if_doomed`` the traffic
        ends at the first fault that flags the attempt whatever follows (doomed.py)."""
        started_at = common.now_iso()
        run_id = host.new_run_id()
        run = Run(run_id=run_id, plan=plan, art=art, run_dir=run_dir,
                  topo=topology.Topology(run_id, len(plan.flows)))
        log(f"run {run_id}: {'+'.join(f.variant for f in plan.flows)} rtt {plan.rtt_ms} ms "
            f"drop {plan.drop:g}{f' background loss {plan.background_loss:g}' if plan.background_loss else ''} "
            f"rate {'unshaped' if plan.rate_bps is None else f'{plan.rate_bps / 1e9:.3g} Gbps'} "
            f"buffer {plan.buffer_bytes} B duration {plan.duration_s:g} s")
        host.write_state(run_id, namespaces=run.topo.namespaces(), run_dir=str(run_dir))
        t_setup = time.monotonic()
        try:
            with contextlib.ExitStack() as stack:
                run.dumbbell = self._build_dumbbell(run, stack, log)
                run.rate_mech = bottleneck.shape(run.topo, plan.rate_bps, plan.buffer_bytes, plan.dilation,
                                                 plan.link, art, plan.ecn_threshold_bytes, plan.flow_queues)
                if run.rate_mech["mechanism"] == "tevlink":  # the data never reach the redirect
                    run.dumbbell.switch["data_path"] = (f"{' '.join(run.topo.sender_ports())} ingress -> "
                                                        f"link engine -> {' '.join(run.topo.ack_ports())} egress")
                run.drop = DropStage(art, run.topo.drop_stage_links(), plan.drop, plan.seed, plan.background_loss)
                self._set_delay(run, stack, log)
                run.handles = ccadapter.load_flows(stack, plan.flows, plan.hz, plan.dilation)
                run.flows = traffic.flow_procs(plan, run.handles, run_dir, run.dumbbell.place,
                                               topology.receiver_env(run.dumbbell.rwin, art.tevrcv),
                                               tevrpc=art.tevrpc)
                if condition.sock_ops:
                    run.sock_ops = sockops.SockOps(condition.sock_ops, run_id)
                    stack.callback(run.sock_ops.stop)  # after the flows' processes are gone
                    run.sock_ops.start()
                    for f in run.flows:
                        f.sender_wrap = run.sock_ops.wrap
                ccadapter.set_namespace_defaults(run.topo, run.flows)
                run.settings = PathSettings(*record_parts.read_settings(run.topo))
                traffic.start_servers(run.topo, run.flows, stack)
                run.setup_s = time.monotonic() - t_setup
                run.traffic = self._traffic(run, log, end_if_doomed)
                if run.traffic.stopped_at_s is not None:  # the plan as it ran: shorter
                    run.plan = replace(run.plan, duration_s=run.traffic.stopped_at_s)
                described = run.delayer.describe()
                run.delay = DelayRecord(describe=described, stats=run.delayer.stop())
                run.parsed = [traffic.parse(f) for f in run.flows]
            t_teardown = time.monotonic()
        finally:
            for f in run.flows:
                f.stop()
            run.topo.destroy()
            host.remove_run(run_id)
        run.teardown_s = time.monotonic() - t_teardown
        log(f"teardown {run.teardown_s:.2f} s")
        return record_parts.build(condition, run, started_at)

    def _build_dumbbell(self, run: Run, stack: contextlib.ExitStack, log) -> Dumbbell:
        """Namespaces and links, CPU placement, the keep-awake loops, the switch's L2
        redirects, the endpoints' sysctls and the receivers' window."""
        topo, plan = run.topo, run.plan
        topo.create()
        engine = plan.link == "tevlink" and plan.rate_bps is not None
        place = topo.placement(engine=engine)
        place["rps_masks"] = topo.apply_placement(place)
        # the engine's CPU runs nothing else: a runnable loop there, even SCHED_IDLE, is
        # what the kernel's fair server gives time to by stopping the engine
        own = awake.all_cpus()
        cpus = [c for c in own if not (engine and c == place["line"])]
        if engine and cpus:
            # nor this process and what it starts (ss, tc, iperf3): a task that wakes there
            # waits behind the engine until the fair server stops it (50 ms)
            os.sched_setaffinity(0, cpus)
            stack.callback(os.sched_setaffinity, 0, own)
            # nor the host's other tasks that may move (engine_cpu says why)
            cleared = host.STATE_DIR / f"{run.run_id}{engine_cpu.STATE_SUFFIX}"
            place["engine_cpu"] = engine_cpu.clear(place["line"], cpus, cleared)
            stack.callback(engine_cpu.restore, cleared, place["engine_cpu"])
        keep_awake = awake.KeepAwake(run.art.tevdelay, cpus)
        stack.callback(keep_awake.stop)
        keep_awake.start()
        switch = topo.fast_path(run.art)
        log(f"namespaces {', '.join(topo.namespaces())} created; CPUs: senders "
            f"{place['senders']}, receivers {place['receivers']}, delay line {place['line']}")
        topology.set_stack(topo, plan.stack, plan.flow_stacks)
        # the loss both drop stages apply to the data (DropStage): independent, one behind the other
        loss = 1 - (1 - plan.drop) * (1 - plan.background_loss)
        rwin = topology.receive_window(plan.rate_bps, plan.rtt_ms, plan.buffer_bytes, loss)
        topo.set_receive_window(rwin)
        return Dumbbell(place=place, keep_awake=keep_awake, switch=switch, rwin=rwin)

    def _set_delay(self, run: Run, stack: contextlib.ExitStack, log) -> None:
        """The delay mechanism in place, the path's RTT measured and the delay set to the
        plan's RTT (delay.set_rtt)."""
        plan = run.plan
        run.delayer = delay.mechanism_for(
            run.art, run.topo, run.run_dir, rtt_ms=plan.rtt_ms, rate_bps=plan.rate_bps,
            buffer_bytes=plan.buffer_bytes, rt_prio=self.rt_prio, cpu=run.dumbbell.place["line"],
            held_ms=fidelity.held_ms(plan.verdict_dilation),
            link=run.rate_mech if run.rate_mech.get("mechanism") == "tevlink" else None)
        stack.callback(lambda: run.delayer and run.delayer.stop())
        run.delayer.start(0)
        prober = delay.Prober(run.art, run.topo)
        stack.callback(prober.close)
        run.rtt = delay.set_rtt(run.delayer, prober, plan.rtt_ms,
                                fidelity.rtt_tolerance_ms(plan.rtt_ms, plan.verdict_dilation), log)
        prober.close()

    def _traffic(self, run: Run, log, end_if_doomed: bool = False) -> TrafficMeasurements:
        """Counters read, the drop stage enabled, the flows driven to their end (TCP
        counters read again at half time; with ``end_if_doomed``, to the first fault that
        dooms the attempt), the drop stage disabled, counters read."""
        topo, plan, keep_awake = run.topo, run.plan, run.dumbbell.keep_awake
        endpoints = [f"{k}{i}" for i in range(1, len(plan.flows) + 1) for k in ("s", "r")]

        def tcp_snapshot():
            return {role: tcp_counters(topo.ns(role)) for role in endpoints}

        before = HostCounters.read(topo, keep_awake)
        tcp0 = tcp_snapshot()
        ports = ccadapter.port_handles(run.handles)
        guard0 = {name: ccadapter.guard_stats(h) for name, h in ports.items()}
        run.drop.enable()
        log(f"setup {run.setup_s:.2f} s; traffic for {plan.duration_s:g} s"
            + (f" at most, until +-{100 * plan.stop.half_width:g} %" if plan.stop else ""))
        t0 = time.monotonic()
        snapshots = []  # (when it was due, s after t0; the link's byte counts; TCP counters)

        def snapshot(mark: float):
            snapshots.append((mark, self._link_counters(run), tcp_snapshot()))

        end_edge = []
        watch = None
        if plan.stop:
            first = plan.flows[0]
            # where nothing is dropped at random, the flow's steady state is the link: the
            # watch reads the bottleneck too (precision.decide's link_met)
            lossless = plan.drop == 0 and plan.rate_bps is not None
            watch = PrecisionWatch(plan.stop, plan.dilation, topo.ns("r1"), first.start_s,
                                   lambda: run.drop.module.read()["dropped"], plan.interval_s, log,
                                   link=(lambda: self._link_counters(run)) if lossless else None,
                                   link_rate_bps=plan.rate_bps if lossless else None)
        doomed = (DoomedWatch(topo.sw, topo.sender_ports() + topo.ack_ports(), before.switch_input_drops,
                              calib.input_backlog(), earliest_end_s([f.start_s for f in run.flows]), log)
                  if end_if_doomed else None)
        stopped_at = traffic.drive(run.flows, topo, run.delayer, t0, plan, log, midway=snapshot,
                                   at_end=lambda: end_edge.append(self._link_counters(run)),
                                   checkpoints_s=steady_checkpoints(plan) if plan.stop else (), watch=watch,
                                   doomed=doomed)
        ended_doomed = doomed.record() if doomed else None
        traffic_s = time.monotonic() - t0
        ended_s = stopped_at if stopped_at is not None else plan.duration_s
        # the second half of the run as it ran: from the last snapshot due at or before its
        # middle (a run of fixed length: the one due at its middle)
        mid = max((snap for snap in snapshots if snap[0] <= ended_s / 2), default=None,
                  key=lambda snap: snap[0])
        link_steady = record_parts.link_steady([mid[1] if mid else None, *end_edge[:1]], t0)
        tcp_mid = mid[2] if mid else {}
        if watch:
            if stopped_at is None or ended_doomed:
                watch.final(ended_s)
            precision = watch.record(None if ended_doomed else stopped_at)
            watch.close()
        else:
            precision = None
        run.drop.disable()
        after = HostCounters.read(topo, keep_awake)
        acks = ack_record(tcp0, tcp_snapshot(), len(plan.flows), midway=tcp_mid or None)
        cc_guard = {name: ccadapter.guard_difference(ccadapter.guard_stats(h), guard0[name])
                    for name, h in ports.items()}
        fw0, fw1 = before.forwarded, after.forwarded
        run.dumbbell.switch["ip_forwarded_during_traffic"] = None if None in (fw0, fw1) else fw1 - fw0
        drop_counters, background_counters = run.drop.read()
        if background_counters:
            log(f"background loss: {sum(c['dropped'] for c in background_counters)} of "
                f"{sum(c['seen'] for c in background_counters)} packets dropped")
        return TrafficMeasurements(t0=t0, traffic_s=traffic_s, before=before, after=after, acks=acks,
                                   cc_guard=cc_guard, drop_counters=drop_counters,
                                   background_counters=background_counters, link_steady=link_steady,
                                   stopped_at_s=stopped_at, precision=precision, ended_doomed=ended_doomed,
                                   unsent_acks_at=tuple((c["t_s"] - t0, c["acks_not_sent"], c["acks_forwarded"])
                                                        for _, c, _ in snapshots
                                                        if c and c.get("acks_not_sent") is not None))

    @staticmethod
    def _link_counters(run: Run) -> dict | None:
        """What the bottleneck has sent (and dropped from its queue) so far: the link
        engine's counters, or the TBF qdisc's (time taken around the read); None unshaped."""
        if run.plan.rate_bps is None:
            return None
        counted = run.delayer.link_counters()
        if counted:
            return {**counted, "source": "link engine"}
        t_a = time.monotonic()
        q = bottleneck.qdisc_stats(run.topo.sw, run.topo.bottleneck_dev)
        if q.get("bytes") is None:
            return None
        return {"t_s": (t_a + time.monotonic()) / 2, "bytes": q["bytes"], "frames": q.get("packets"),
                "drops": q.get("drops"), "source": "qdisc"}


class _StderrLog:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, msg: str) -> None:
        if self.enabled:
            print(f"tcpeval: {msg}", file=sys.stderr, flush=True)

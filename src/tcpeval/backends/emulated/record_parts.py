"""The emulated backend's parts of a run's trace record (backends/record.py holds the
skeleton both backends share): its environment, mechanisms, measurements, flows and
the fidelity verdict's inputs, from the parts of a run (run_state.Run) its steps produced."""
from __future__ import annotations

import platform

from tcpeval import cc as cc_module
from tcpeval import precision
from tcpeval.backends import common, fidelity, record
from tcpeval.backends.emulated import calibrate, ccadapter, host, topology
from tcpeval.backends.emulated.counters import cpu_shares, switch_input_drops
from tcpeval.backends.emulated.plan import RTO_MIN_SYSCTL, RTO_MIN_US
from tcpeval.backends.emulated.run_state import Run
from tcpeval.backends.emulated.topology import WIRE_FRAME_BYTES
from tcpeval.condition import MSS_BYTES

# Host-global: read and recorded, never changed (autotuning needs no rmem_max; iperf3
# is run without -w).
HOST_SYSCTLS = ["net.core.rmem_max", "net.core.wmem_max", "net.core.netdev_max_backlog",
                "net.core.default_qdisc"]
SWITCH_SYSCTLS = ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter",
                  "net.bridge.bridge-nf-call-iptables"]
CALIBRATION_FIELDS = ("measured_at", "host_capacity_bps", "faithful_rate_bps", "default_rate_bps", "link",
                      "links", "faithful_by_link_bps", "points", "loadavg_before", "loadavg_after")


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


def read_settings(topo: topology.Topology) -> tuple[dict, dict, dict]:
    """(each endpoint's sysctls, the offloads, the switch's sysctls) as the run has them."""
    endpoint_sysctls = {}
    for i in range(1, topo.pairs + 1):
        endpoint_sysctls[f"s{i}"] = topology.read_sysctls(topo.ns(f"s{i}"), common.RECORDED_SYSCTLS)
        endpoint_sysctls[f"r{i}"] = topology.read_sysctls(topo.ns(f"r{i}"), common.RECORDED_SYSCTLS)
    return endpoint_sysctls, topo.offload_states(), topology.read_sysctls(topo.sw, SWITCH_SYSCTLS)


def sender_defaults(endpoint_sysctls: dict, pairs: int) -> dict:
    """Each sender's namespace default algorithm: what its connections start with."""
    return {f"s{i}": endpoint_sysctls.get(f"s{i}", {}).get(common.CC_SYSCTL) for i in range(1, pairs + 1)}


def throughput(run: Run) -> tuple[float, float]:
    """(what the bottleneck carried while flows were active -- the flows' own mean without
    a bottleneck --, what all flows carried together in the run's second half)."""
    plan, parsed = run.plan, run.parsed
    active_s = plan.duration_s - min(f.start_s for f in plan.flows)
    link = (run.delay.stats or {}).get("link")
    if link:  # the link engine counts what it sent (its life: the traffic and the last RTT probes)
        bytes_through = link["sent_bytes"]
    else:
        bytes_through = (run.traffic.after.qdisc.get("bytes") or 0) - (run.traffic.before.qdisc.get("bytes") or 0)
    achieved = bytes_through * 8 / active_s if plan.rate_bps is not None and active_s > 0 else \
        sum(r["summary"]["mean_throughput_bps"] for r in parsed)
    # steady state: after slow start (flows may start and stop on their own schedules)
    half = plan.duration_s / 2
    late_bytes = sum(bytes_between(res["samples"]["t_s"], res["samples"]["bytes"], flow.start_s,
                                   half, plan.duration_s)
                     for flow, res in zip(plan.flows, parsed))
    return achieved, 8.0 * late_bytes / (plan.duration_s - half)


def link_steady(edges: list, t0: float) -> dict | None:
    """What the bottleneck sent in the run's second half, from its own byte counts read at
    both edges (runner: at half the duration and at its end): wire bytes, the span between
    the two reads, and the rate. None without both reads (unshaped)."""
    if len(edges) != 2 or None in edges:
        return None
    a, b = edges
    span = b["t_s"] - a["t_s"]
    if span <= 0:
        return None
    return {"bps": 8.0 * (b["bytes"] - a["bytes"]) / span, "bytes": b["bytes"] - a["bytes"],
            "frames": None if None in (a.get("frames"), b.get("frames")) else b["frames"] - a["frames"],
            "from_s": a["t_s"] - t0, "to_s": b["t_s"] - t0, "source": a["source"]}


def bytes_between(t_s: list, nbytes: list, start_s: float, lo_s: float, hi_s: float) -> float:
    """The bytes of one flow's samples that fall in (lo_s, hi_s] of the run's time. Sample i
    covers (t_s[i-1], t_s[i]] of the flow's time (the first from 0; analysis/metrics.py reads
    them so too), shifted by the flow's start; an interval that straddles an edge counts for
    the share it overlaps. Counted whole, the interval ending a millisecond after the
    midpoint of a 4-s run with 0.5-s samples put 2.5 s of bytes over 2 s (+25 %)."""
    total, begin = 0.0, start_s
    for t, b in zip(t_s, nbytes):
        end = start_s + t
        overlap = min(end, hi_s) - max(begin, lo_s)
        if overlap > 0:
            total += b * overlap / (end - begin)
        begin = end
    return total


def loaded_rtts(run: Run) -> dict:
    """Each TCP flow's loaded RTT (fidelity.loaded_rtt) from its samples in the run's
    second half, keyed "<index>:<variant>"; physical ms."""
    plan, out = run.plan, {}
    half = plan.duration_s / 2
    for i, (flow, res) in enumerate(zip(plan.flows, run.parsed), start=1):
        if flow.protocol != "tcp":
            continue
        smp = res["samples"]
        steady = [(r, c) for t, r, c in zip(smp["t_s"], smp["rtt_us"], smp["cwnd_bytes"])
                  if flow.start_s + t > half]
        out[f"{i}:{flow.variant}"] = fidelity.loaded_rtt(steady, MSS_BYTES)
    return out


def judged_window_bytes(run: Run) -> float | None:
    """The largest congestion window the window check judges: a port's own -- the largest
    its guard let stand (max_allowed_cwnd) -- and every other flow's largest sample. A
    port's sample may catch the garbage window a skipped hook left until the guard's next
    check replaced it (a two-flow reno316 run at 0.2 ms sampled one of ~10^8 segments in
    three attempts of three); what that window let the stack send is the guard check's to
    judge (sent_over), and the window check keeps judging what the port itself did."""
    guard = run.traffic.cc_guard or {}
    windows = []
    for handle, res in zip(run.handles, run.parsed):
        own = (guard.get(handle.kernel_name) or {}).get("max_allowed_cwnd") if handle is not None \
            and handle.impl == "port" else None
        windows.append(own * MSS_BYTES if own is not None else res["summary"].get("max_cwnd_bytes") or 0)
    return max(windows, default=None)


def port_flow_seconds(run: Run) -> dict:
    """Per port: the physical seconds its flows ran (the guard's drained time is judged
    against them)."""
    out: dict = {}
    for fp, handle in zip(run.flows, run.handles):
        if handle is not None and handle.impl == "port" and fp.started_at and fp.ended_at:
            out[handle.kernel_name] = out.get(handle.kernel_name, 0.0) + fp.ended_at - fp.started_at
    return out


def delay_line_stats(run: Run) -> dict | None:
    """The delay line's own counters; netem keeps none."""
    return run.delay.stats if run.delayer.mechanism != "netem" else None


def unsent_acks(run: Run) -> dict | None:
    """The ACKs the delay line could not send, and those the verdict judges
    (fidelity.unsent_acks): of a precision-driven run whose metrics leave out a warm-up,
    those after its cut (s after its first flow's start)."""
    stats = delay_line_stats(run)
    if not stats:
        return None
    cut_s = precision.metrics_from_s(run.traffic.precision)
    return fidelity.unsent_acks(stats.get("send_errors", 0), stats.get("forwarded", 0), run.traffic.unsent_acks_at,
                                run.plan.flows[0].start_s + cut_s if cut_s > 0 else None)


def verdict(run: Run, achieved: float, steady: float, cpu_busy: float | None, loaded: dict,
            unsent: dict | None) -> dict:
    plan, parsed = run.plan, run.parsed
    # a sender whose default is its own flow's algorithm (native bbr) paces as that
    # algorithm does; only a foreign default's pacing is the stack's doing
    defaults = sender_defaults(run.settings.endpoint_sysctls, len(plan.flows))
    foreign_defaults = {who: cc for (who, cc), fp in zip(defaults.items(), run.flows) if cc != fp.kernel_name}
    # not the host's passing trouble: every attempt would run the native algorithm again
    extra = [fidelity.Finding("cc", f"flow {flow.variant} asked for the 3.16 port; ran the host's native "
                                    f"{handle.kernel_name} (tcpeval.cc unavailable)", transient=False)
             for flow, handle in zip(plan.flows, run.handles)
             if handle is not None and flow.impl == "port" and handle.impl != "port"]
    shaped = plan.rate_bps is not None
    return fidelity.verdict(
        fidelity.Setting(drop=plan.drop, rtt_ms=plan.rtt_ms, rate_bps=plan.rate_bps,
                         buffer_bytes=plan.path_buffer_bytes, interval_s=plan.interval_s,
                         dilation=plan.verdict_dilation, carried_bound_bps=plan.carried_bound_bps,
                         busy_from_s=fidelity.busy_link_from_s(plan.drop, plan.background_loss, plan.rate_bps,
                                                               plan.rtt_ms, plan.path_buffer_bytes, plan.flows,
                                                               plan.ecn_threshold_bytes,
                                                               sock_ops=run.sock_ops is not None)),
        fidelity.PathMeasurements(seen=run.traffic.drop_counters["seen"], dropped=run.traffic.drop_counters["dropped"],
                                  rtt_ms=run.rtt.probe["median_ms"], base_rtt_ms=run.rtt.base_ms,
                                  loaded_rtts=loaded if shaped else None),
        fidelity.HostMeasurements(
            capacity_bps=plan.host_capacity_bps if shaped else None,
            achieved_bps=steady if shaped else achieved, cpu_busy=cpu_busy,
            delay_stats=delay_line_stats(run),
            link_stats=(run.delay.stats or {}).get("link"),
            switch_input_drops=sum(switch_input_drops(run.traffic.before, run.traffic.after).values()),
            input_backlog=calibrate.input_backlog(), unsent_acks=unsent, link_steady=run.traffic.link_steady),
        fidelity.FlowMeasurements(
            max_cwnd_bytes=judged_window_bytes(run),
            segments_per_ack=run.traffic.acks["receiver_segments_per_ack_steady"],
            segments_per_ack_after_hole_fills=run.traffic.acks["receiver_segments_per_ack_steady_after_hole_fills"],
            receiver_acks=run.traffic.acks["receiver_acks_steady"],
            interval_bps=[r["samples"]["throughput_bps"] for r in parsed],
            receiver_holds_bytes=run.dumbbell.rwin["buffer_bytes"], cc_guard=run.traffic.cc_guard,
            loss_bound_clamp_bytes=(run.dumbbell.rwin["window_clamp_bytes"]
                                    if run.dumbbell.rwin.get("bound_by") == "loss" else None),
            port_flow_s=port_flow_seconds(run), sender_defaults=foreign_defaults),
        extra=extra)


def flows(run: Run) -> list[dict]:
    out = []
    for flow, fp, handle, res in zip(run.plan.flows, run.flows, run.handles, run.parsed):
        out.append(record.flow_record(
            fp.index, flow, impl=handle.impl if handle else flow.impl,
            actual=(fp.started_at - run.traffic.t0 if fp.started_at else None,
                    fp.ended_at - run.traffic.t0 if fp.ended_at else None),
            cc={"requested": fp.kernel_name or "udp", "verified": res["verified"],
                "kernel_name": fp.kernel_name,
                "object_sha256": getattr(handle, "object_sha256", None),
                "source_sha256": getattr(handle, "source_sha256", None),
                "hz": getattr(handle, "hz", None),
                "dilation": getattr(handle, "dilation", None) if handle else None,
                "loaded_as": getattr(handle, "loaded_as", None),
                "receiver": res["receiver_cc"] or fp.receiver_cc,
                "ss": fp.ss_algorithms, **flow_ecn(run.plan, fp, res)},
            parsed=res,
            raw_files=[fp.out_path.name, fp.err_path.name, fp.err_path.with_suffix(".server.log").name,
                       fp.server_path.name]))
    return out


def flow_ecn(plan, fp, res: dict) -> dict:
    """Where the link marks: whether the flow negotiated ECN (ss -ti on its socket; tevrpc's
    TCP_INFO for an RPC flow; never for UDP) and how its algorithm answers a mark -- a run
    may give ECN to an algorithm that ignores it, and says so here."""
    if not plan.ecn_threshold_bytes:
        return {}
    queue = {"queue": plan.flow_queues[fp.index]} if plan.flow_queues else {}
    if fp.protocol == "udp":
        return {"ecn": {"negotiated": False, "response": None, **queue}}
    negotiated = res.get("ecn") if fp.protocol == "rpc" else fp.ss_ecn
    return {"ecn": {"negotiated": negotiated, "response": cc_module.ecn_response(fp.kernel_name), **queue}}


def environment(run: Run) -> dict:
    return record.environment(
        kernel=platform.release(), kernel_version=platform.version(), tools=tool_versions(),
        sysctls={"endpoints": run.settings.endpoint_sysctls, "host_global": topology.read_sysctls_host(HOST_SYSCTLS),
                 "switch": run.settings.switch_sysctls},
        offloads=run.settings.offloads, build_sha256=run.art.hashes,
        cc_provider="tcpeval.cc" if ccadapter.cc_module() else "native fallback")


def dilation_record(condition, plan, endpoint_sysctls: dict, route_rto_min_ms: dict | None = None) -> dict:
    """mechanisms.dilation: the factor, what was scaled and what could not be (the
    minimum RTO: by sysctl, or where the kernel has none on each endpoint's default route,
    ``route_rto_min_ms``)."""
    k = plan.dilation
    rto = {role: v.get(RTO_MIN_SYSCTL) for role, v in endpoint_sysctls.items()}
    scaled = {"physical_rate_bps": plan.rate_bps, "physical_rtt_ms": plan.rtt_ms,
              "physical_duration_s": plan.duration_s, "physical_interval_s": plan.interval_s}
    # What scales and what cannot (port clocks, delayed-ACK timer, initial RTO, TSO
    # autosizing, RTT-based timers): docs/trace-format.md, mechanisms.dilation.
    not_scaled = {}
    if k > 1:
        routes = route_rto_min_ms or {}
        if rto and all(str(v) == str(RTO_MIN_US * k) for v in rto.values()):
            scaled["rto_min"] = f"{RTO_MIN_SYSCTL} = {RTO_MIN_US * k} on every endpoint"
        elif rto and all(routes.get(role) == RTO_MIN_US * k / 1000 for role in rto):
            scaled["rto_min"] = (f"rto_min {RTO_MIN_US * k / 1000:g} ms on every endpoint's default route "
                                 f"(this kernel has no {RTO_MIN_SYSCTL})")
        else:
            not_scaled["rto_min"] = (f"{RTO_MIN_SYSCTL} not available on this kernel "
                                     f"(endpoints: {rto}); the minimum RTO stayed 200 ms physical")
    # the rate the factor was chosen for: the link's, or the flows' most under the loss rate
    # (virtual; tcpeval.dilation.carried_bound_bps)
    chosen_for = ({"rate_bps": plan.carried_bound_bps * k, "from": "loss bound (dilation.carried_bound_bps)"}
                  if plan.carried_bound_bps is not None else
                  {"rate_bps": plan.rate_bps * k if plan.rate_bps else None, "from": "link rate"})
    return {"factor": k, "setting": condition.dilation, "chosen_for": chosen_for,
            "skipped": plan.skipped_factors,
            # the least factor the host's stalls allowed, where it raised the envelope's
            **({"stall_floor": plan.stall_floor} if plan.stall_floor else {}),
            "scaled": scaled if k > 1 else {}, "not_scaled": not_scaled if k > 1 else {}}


def mechanisms(condition, run: Run) -> dict:
    topo, plan = run.topo, run.plan
    defaults = sender_defaults(run.settings.endpoint_sysctls, len(plan.flows))
    return {
        "drop": run.drop.module.mechanism, "delay": run.delayer.mechanism, "rate": run.rate_mech["mechanism"],
        "drop_detail": run.drop.describe(run.traffic.drop_counters, WIRE_FRAME_BYTES),
        "delay_detail": {**run.delay.describe, "base_rtt_ms": run.rtt.base_ms, "added_ms": run.rtt.added_ms,
                         "correction_steps": run.rtt.corrections},
        "rate_detail": run.rate_mech,
        "switch": run.dumbbell.switch,
        # both in place on every run; what they do and why: docs/trace-format.md
        "segment_mark": {},
        "push_flag": {"segments": run.traffic.drop_counters.get("push_cleared")},
        "placement": run.dumbbell.place,
        "dilation": dilation_record(condition, plan, run.settings.endpoint_sysctls, topo.route_rto_min_ms),
        "keep_awake": run.dumbbell.keep_awake.describe(),
        "receive_window": {k: v for k, v in run.dumbbell.rwin.items() if k != "sysctls"},
        "traffic": {"tool": "iperf3", "sender_default_cc": defaults,
                    "pacing": "tcp-internal" if fidelity.pacing_check(defaults) else "none"},
        "background_loss": run.drop.describe_background(),
        **({"sock_ops": run.sock_ops.describe()} if run.sock_ops else {}),
        "topology": {"namespaces": [n.split("-", 1)[1] for n in topo.namespaces()],
                     "bottleneck_device": topo.bottleneck_dev.split("-", 1)[1],
                     "bridged": topo.bridged, "run_id": run.run_id},
    }


def measured(run: Run, verdict: dict, achieved: float, steady: float, cpu: tuple, loaded: dict,
             unsent: dict | None) -> dict:
    plan, c = run.plan, run.traffic.drop_counters
    return {
        "base_rtt_ms": run.rtt.base_ms, "rtt_ms": run.rtt.probe["median_ms"],
        "rtt_probe": run.rtt.probe, "base_rtt_probe": run.rtt.base,
        "drop": record.drop_measurement(c["seen"], c["dropped"], check=verdict["checks"]["drop"]),
        "bottleneck_rate_bps": achieved, "steady_throughput_bps": steady,
        "link_steady": run.traffic.link_steady,
        "host_capacity_bps": plan.host_capacity_bps,
        "configured_rate_bps": plan.rate_bps, "rate_source": plan.rate_source,
        "buffer_bytes": plan.buffer_bytes,
        "bottleneck_qdisc": {"before": run.traffic.before.qdisc, "after": run.traffic.after.qdisc},
        "cpu_busy": cpu[0], "cpu_stolen": cpu[1], "softnet_drops_host": run.traffic.after.softnet - run.traffic.before.softnet,
        "switch_input_drops": switch_input_drops(run.traffic.before, run.traffic.after),
        "delay_line": run.delay.stats,
        "unsent_acks": unsent,
        **({"ecn": ecn} if (ecn := ((run.delay.stats or {}).get("link") or {}).get("ecn")) else {}),
        "loaded_rtt": {"flows": loaded,
                       "bound_ms": fidelity.loaded_rtt_bound_ms(plan.rtt_ms, plan.path_buffer_bytes, plan.rate_bps,
                                                                plan.verdict_dilation) if plan.rate_bps else None},
        "acks": run.traffic.acks,
        "precision": run.traffic.precision,
        **({"ended_doomed": run.traffic.ended_doomed} if run.traffic.ended_doomed else {}),
        "cc_guard": run.traffic.cc_guard or None,
        "background_drop": run.traffic.background_counters or None,
        "setup_s": run.setup_s, "traffic_s": run.traffic.traffic_s, "teardown_s": run.teardown_s,
        "calibration": {k: plan.calibration.get(k) for k in CALIBRATION_FIELDS} if plan.calibration else None,
    }


def build(condition, run: Run, started_at: str) -> dict:
    """The run's trace record: every TCP flow's algorithm checked, the verdict, the parts."""
    for flow, fp, res in zip(run.plan.flows, run.flows, run.parsed):
        if flow.protocol != "udp":
            record.check_verified_cc(fp.index, flow.variant, fp.kernel_name, res["verified"])
    achieved, steady = throughput(run)
    loaded = loaded_rtts(run)
    cpu = cpu_shares(run.traffic.before, run.traffic.after)
    unsent = unsent_acks(run)
    v = verdict(run, achieved, steady, cpu[0], loaded, unsent)
    return record.build(condition=condition, run_dir=run.run_dir, backend="emulated", started_at=started_at,
                        environment=environment(run), mechanisms=mechanisms(condition, run), flows=flows(run),
                        measured=measured(run, v, achieved, steady, cpu, loaded, unsent), verdict=v, notes=run.plan.notes)

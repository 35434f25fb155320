"""What one attempt at an emulated run holds, in the parts its steps produce: the runner
(runner.py) runs the steps in order and each returns its part; record_parts.py builds
the trace record from them."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tcpeval.backends.emulated import awake, delay, topology
from tcpeval.backends.emulated.build import Artifacts
from tcpeval.backends.emulated.counters import HostCounters
from tcpeval.backends.emulated.dropctl import DropStage
from tcpeval.backends.emulated.plan import Plan


@dataclass
class Dumbbell:
    """Beside the namespaces and links: where each task runs, the loops that keep the
    vCPUs awake, how the switch forwards, and the receivers' window."""
    place: dict                  # CPUs of senders, receivers, delay line; RPS masks
    keep_awake: awake.KeepAwake
    switch: dict                 # the switch's forwarding (topology.fast_path), as recorded
    rwin: dict                   # topology.receive_window


@dataclass
class PathSettings:
    """The settings the run had, read back from the kernel for the record."""
    endpoint_sysctls: dict       # per endpoint ("s1", "r1", ...)
    offloads: dict               # per device
    switch_sysctls: dict


@dataclass
class TrafficMeasurements:
    """What the traffic step counted: the host before and after, the receivers' ACKs,
    the ports' guard, the drop stage, and the link's own byte counts in the second half."""
    t0: float                    # monotonic time the flows' clock starts at
    traffic_s: float
    before: HostCounters
    after: HostCounters
    acks: dict                   # counters.ack_record
    cc_guard: dict               # per port: what its guard counted during the traffic
    drop_counters: dict
    background_counters: list
    link_steady: dict | None     # record_parts.link_steady
    stopped_at_s: float | None = None  # a run that ended early (its precision, or doomed): when (after t0)
    precision: dict | None = None      # its watch's record (precision_watch), physical
    unsent_acks_at: tuple = ()         # (s after t0, the delay line's ACKs not sent, forwarded by then): its snapshots
    ended_doomed: dict | None = None   # an attempt ended at a fault that flags it (doomed.DoomedWatch.record)


@dataclass
class DelayRecord:
    """The delay mechanism as it ran (describe()) and its counters (stop())."""
    describe: dict
    stats: dict | None


@dataclass
class Run:
    """One attempt at a run: the plan, what the set-up steps put in place, and what the
    traffic and the delay mechanism measured."""
    run_id: str
    plan: Plan
    art: Artifacts
    run_dir: Path
    topo: topology.Topology
    # set up, in this order
    dumbbell: Dumbbell | None = None
    rate_mech: dict | None = None               # bottleneck.shape
    drop: DropStage | None = None
    delayer: object = None                      # delay.Netem or delay.DelayLine
    rtt: delay.RttSetting | None = None
    handles: list = field(default_factory=list)  # ccadapter handles, one per flow
    flows: list = field(default_factory=list)    # traffic.FlowProc, one per flow
    sock_ops: object = None                     # sockops.SockOps (condition.sock_ops)
    settings: PathSettings | None = None
    setup_s: float = 0.0
    # measured
    traffic: TrafficMeasurements | None = None
    delay: DelayRecord | None = None
    parsed: list | None = None                  # traffic.parse, one per flow
    teardown_s: float = 0.0

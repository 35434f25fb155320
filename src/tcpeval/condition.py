"""One run's condition as a value: its flows and settings (`Condition`, `Flow`), and what
makes one valid (`flow_rule_problems`, `Flow.problems`, `Condition.problems`): the design
(on its flow templates too), an ad-hoc run and both backends ask these, and add only what
is theirs (a design's placeholders and variants, a backend's hardware).

A leaf of the package: the design (tcpeval.spec) makes conditions, the path grammar
(tcpeval.paths) names them, backends run them and the analysis reads them back from
traces.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from tcpeval.precision import StopRule

BACKENDS = ("emulated", "testbed")
# port: the project's 3.16 port; native: the host kernel's algorithm of that name; bpf: a
# user's own BPF struct_ops object (`object: path/to/x.bpf.o`).
IMPLS = ("port", "native", "bpf")
VARIANT_NAME = r"^[a-z][a-z0-9_]*$"
UDP = "udp"  # the variant name of a UDP cross-traffic flow
# A request/response flow (tevrpc): RPCs of request_bytes, answered with response_bytes,
# back to back or rpcs_per_s a second, on one connection of its variant's algorithm.
RPC = "rpc"
PROTOCOLS = ("tcp", UDP, RPC)
RPC_HEADER_BYTES = 8  # a request carries the response size in its first bytes
# The paper's segment: a 1500-byte MTU less 20 (IP) and 20 (TCP), timestamps off (its
# Sec. IV: they were deactivated to leave the bytes to payload).
MSS_BYTES = 1460
# What a frame carries besides the segment's payload, as the link counts it: Ethernet,
# IPv4 and TCP headers without options. A link rate counts frames (the emulated links
# shape them, as a NIC's line rate less preamble and gap does), a throughput counts
# payload: a flow carries at most PAYLOAD_SHARE of its link.
HEADER_BYTES = 14 + 20 + 20
PAYLOAD_SHARE = MSS_BYTES / (MSS_BYTES + HEADER_BYTES)


def payload_ceiling_bps(link_bps: float) -> float:
    """The most payload a link of ``link_bps`` (frames) carries: what the original's
    "9.5 Gbit/s available" was (its NICs' most without jumbo frames), and what the
    fractions of the link the analysis reports are of."""
    return link_bps * PAYLOAD_SHARE


def flow_rule_problems(*, protocol: str = "tcp", variant: str | None = None, rate_given: bool | None = None,
                       impl: str | None = None, object_given: bool | None = None, start: float | None = None,
                       stop: float | None = None, end: float | None = None,
                       fields: tuple[str, str] = ("start_s", "stop_s"), unit: str = " s",
                       rpc: dict | None = None, ecn_given: bool | None = None) -> list[tuple[str, str]]:
    """The rules of one flow, as (field, why) pairs, on what is known of it: a value that
    is None (a design's placeholder, a run length not known yet) skips the rules that
    need it. Flow.problems asks with every value, a design's flow template with its
    literal ones (start and stop may be fractions of the run there: ``fields``, ``unit``).
    ``rpc``: an RPC flow's request_bytes, response_bytes and rpcs_per_s as known (a key
    absent: not given; None: a placeholder). ``ecn_given``: whether the flow says ecn."""
    out = []
    if protocol not in PROTOCOLS:
        out.append(("protocol", f"{protocol!r} is not one of {', '.join(PROTOCOLS)}"))
    elif protocol == UDP and rate_given is False:
        out.append(("rate_bps", "a UDP cross-traffic flow needs a rate (e.g. rate_bps: 2G)"))
    elif protocol != UDP and variant is not None and not re.match(VARIANT_NAME, variant):
        out.append(("variant", f"{variant!r} is not an algorithm name (lower-case letters, digits, _)"))
    if protocol == RPC and rpc is not None:
        out += _rpc_problems(rpc)
    elif protocol != RPC and rpc:
        out.append((next(iter(rpc)), f"only an RPC flow (protocol: rpc) has {next(iter(rpc))}"))
    if protocol == UDP and ecn_given:
        out.append(("ecn", "a UDP flow's frames are never ECN-capable (iperf3 sets no ECT)"))
    if impl is not None and impl not in IMPLS:
        out.append(("impl", f"{impl!r} is not allowed; allowed values: {', '.join(IMPLS)}"))
    elif impl is not None and object_given is not None and (impl == "bpf") != object_given:
        out.append(("impl", "impl bpf and object (the .bpf.o path) go together"))
    start_field, stop_field = fields
    if start is not None and end is not None and not 0 <= start < end:
        out.append((start_field, f"the flow starts at {start:g}{unit}, outside the run [0, {end:g}){unit}"))
    elif start is not None and stop is not None and not (start < stop and (end is None or stop <= end)):
        at_the_latest = f" and at the latest at the end of the run ({end:g}{unit})" if end is not None else ""
        out.append((stop_field, f"the flow stops at {stop:g}{unit}; a flow stops after its start "
                                f"({start:g}{unit}){at_the_latest}"))
    return out


def _rpc_problems(rpc: dict) -> list[tuple[str, str]]:
    """An RPC flow's sizes (both required) and rate (optional: back to back without)."""
    out = []
    for key, least in (("request_bytes", RPC_HEADER_BYTES), ("response_bytes", 1)):
        if key not in rpc:
            out.append((key, f"an RPC flow needs {key} (e.g. request_bytes: 100, response_bytes: 1M)"))
        elif rpc[key] is not None and not (float(rpc[key]).is_integer() and rpc[key] >= least):
            out.append((key, f"{rpc[key]!r} is not a whole number of bytes >= {least}"
                             + (" (a request carries the response size in its first 8 bytes)"
                                if key == "request_bytes" else "")))
    rate = rpc.get("rpcs_per_s")
    if rate is not None and not rate > 0:
        out.append(("rpcs_per_s", f"{rate!r}: RPCs per second must be above 0 (leave it out for back to back)"))
    return out


@dataclass(frozen=True)
class Flow:
    variant: str
    impl: str = "port"
    start_s: float = 0.0
    protocol: str = "tcp"
    rate_bps: float | None = None
    stop_s: float | None = None   # None: runs to the end of the run
    object: str | None = None     # impl "bpf": the struct_ops object (.bpf.o)
    request_bytes: int | None = None   # protocol rpc: each request's size
    response_bytes: int | None = None  # protocol rpc: each response's size
    rpcs_per_s: float | None = None    # protocol rpc: open loop at this rate; None: back to back
    ecn: bool | None = None            # its endpoints ask for ECN (True) or not (False); None: the run's default

    def to_dict(self) -> dict:
        out = {"variant": self.variant, "impl": self.impl, "start_s": self.start_s,
               "protocol": self.protocol}
        for key in ("rate_bps", "stop_s", "object", "request_bytes", "response_bytes", "rpcs_per_s", "ecn"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def end_s(self, duration_s: float) -> float:
        return duration_s if self.stop_s is None else self.stop_s

    def problems(self, duration_s: float) -> list[str]:
        """What makes this flow of a run lasting ``duration_s`` invalid, each as
        '<field>: <why>'; empty if nothing does."""
        return [f"{name}: {why}" for name, why in flow_rule_problems(
            protocol=self.protocol, variant=self.variant, rate_given=bool(self.rate_bps and self.rate_bps > 0),
            impl=self.impl, object_given=self.object is not None, start=self.start_s, stop=self.stop_s,
            end=duration_s, rpc=self.rpc_settings(), ecn_given=self.ecn is not None)]

    def rpc_settings(self) -> dict:
        """The RPC fields given (all of them for an RPC flow, whose rules need them)."""
        keys = ("request_bytes", "response_bytes", "rpcs_per_s")
        if self.protocol == RPC:
            return {k: getattr(self, k) for k in keys if getattr(self, k) is not None or k == "rpcs_per_s"}
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    @property
    def label(self) -> str:
        """The flow in a run path: its variant, and its implementation where that is not
        the 3.16 port ('bbr-native', 'mycc-bpf'); a UDP flow is 'udp'; an RPC flow adds
        its response size and, open loop, its rate ('cubic-native-rpc10k', 'reno-rpc1m-r500');
        a flow whose endpoints are told to ask for ECN or not adds '-ecn' or '-noecn'."""
        if self.protocol == "udp":
            return UDP
        name = self.variant if self.impl == "port" else f"{self.variant}-{self.impl}"
        if self.protocol == RPC:
            name += f"-rpc{_size_label(self.response_bytes)}"
            if self.rpcs_per_s is not None:
                name += "-r" + f"{self.rpcs_per_s:g}".replace("+", "").replace(".", "p")
        if self.ecn is not None:
            name += "-ecn" if self.ecn else "-noecn"
        return name


def _size_label(nbytes: int | None) -> str:
    """A size in a path (lower case, as the path grammar has it): 10k, 1m, 1500."""
    for suffix, unit in (("g", 10**9), ("m", 10**6), ("k", 10**3)):
        if nbytes and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


@dataclass(frozen=True)
class Condition:
    """Everything that defines one run. Two runs with equal conditions are repetitions
    only if their `rep` differs; the path (tcpeval.paths) names a condition completely."""

    backend: str
    campaign: str
    criterion: str
    flows: tuple[Flow, ...]
    rtt_ms: float
    drop: float
    rep: int
    duration_s: float
    interval_s: float = 0.1
    rate_bps: float | None = None
    buffer_bytes: int | None = None
    # ECN at the bottleneck: ECN-capable frames that find this many bytes queued are marked
    # CE (DCTCP's K); None: drop-tail only
    ecn_threshold_bytes: int | None = None
    # 2: the bottleneck has a second, drop-tail queue for the flows that do not use ECN, a
    # deficit round robin sharing the rate between the two (needs ecn_threshold_bytes);
    # None (or 1): one queue for all
    ecn_queues: int | None = None
    # a BPF sock_ops program (.bpf.o) attached to the senders' sockets; None: none
    sock_ops: str | None = None
    background_loss: float = 0.0
    hz: int = 250
    seed: int = 0
    # 'auto' or a time-dilation factor k (tcpeval.dilation): how the emulated backend
    # realises the condition, not part of it; runs with different settings share a path
    dilation: str | int = field(default="auto", compare=False)
    stack: dict = field(default_factory=dict, compare=False, hash=False)
    # A precision-driven run (tcpeval.precision): it ends when its estimates are precise
    # enough, at the latest at duration_s (= the rule's max_s). How long the condition is
    # measured, not part of it: runs with different rules share a path.
    stop: StopRule | None = field(default=None, compare=False)
    # The design the run belongs to (its `name`); None for the paper's design, whose paths
    # carry no design segment (tcpeval.paths).
    design: str | None = None
    # Grid keys that vary within the criterion, other than rtt_ms and drop, with this
    # run's values, in grid order: each names a path segment (tcpeval.paths).
    factors: tuple[tuple[str, float], ...] = ()

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(f.variant for f in self.flows)

    def problems(self) -> list[str]:
        """What makes this condition invalid on any backend, each as '<field>: <why>'
        (flows[i].<field> for a flow); empty if nothing does."""
        out = []
        if self.backend not in BACKENDS:
            out.append(f"backend: unknown backend {self.backend!r}; allowed values: {', '.join(BACKENDS)}")
        if not self.flows:
            out.append("flows: at least one flow is needed")
        ranges = [("rtt_ms", self.rtt_ms >= 0, ">= 0 ms"), ("drop", 0 <= self.drop <= 1, "in [0, 1]"),
                  ("duration_s", self.duration_s > 0, "> 0 s"), ("interval_s", self.interval_s > 0, "> 0 s"),
                  ("background_loss", 0 <= self.background_loss <= 1, "in [0, 1]"), ("rep", self.rep >= 1, ">= 1"),
                  ("rate_bps", self.rate_bps is None or self.rate_bps > 0, "> 0 (or unset)"),
                  ("buffer_bytes", self.buffer_bytes is None or self.buffer_bytes > 0, "> 0 (or unset)"),
                  ("ecn_threshold_bytes", self.ecn_threshold_bytes is None or self.ecn_threshold_bytes > 0,
                   "> 0 (or unset)"),
                  ("ecn_queues", self.ecn_queues in (None, 1, 2), "1 or 2 (or unset)")]
        out += [f"{name}: {getattr(self, name)!r} is out of range; must be {rule}" for name, ok, rule in ranges
                if not ok]
        if self.ecn_queues == 2 and not self.ecn_threshold_bytes:
            out.append("ecn_queues: a second queue for the traffic that does not use ECN needs "
                       "ECN marking in the first (ecn_threshold_bytes)")
        for i, flow in enumerate(self.flows):
            out += [f"flows[{i}].{p}" for p in flow.problems(self.duration_s)]
        return out

    @property
    def flow_labels(self) -> tuple[str, ...]:
        return tuple(f.label for f in self.flows)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["flows"] = [f.to_dict() for f in self.flows]
        if self.design is None:
            del out["design"]
        if self.factors:
            out["factors"] = dict(self.factors)
        else:
            del out["factors"]
        for key in ("ecn_threshold_bytes", "ecn_queues", "sock_ops"):  # unset: as conditions were before them
            if out[key] is None:
                del out[key]
        if self.stop is None:
            del out["stop"]
        else:
            out["stop"] = self.stop.settings()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Condition":
        data = dict(data)
        data["flows"] = tuple(Flow(**f) for f in data["flows"])
        data["factors"] = tuple((k, v) for k, v in (data.get("factors") or {}).items())
        if data.get("stop") is not None:
            data["stop"] = StopRule(**data["stop"])
        return cls(**data)

"""One run's condition as a value: its flows and settings (`Condition`, `Flow`).

A leaf of the package (it imports only tcpeval.errors): the design (tcpeval.spec) makes
conditions, the path grammar (tcpeval.paths) names them, backends run them and the
analysis reads them back from traces.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

BACKENDS = ("emulated", "testbed")
# port: the project's 3.16 port; native: the host kernel's algorithm of that name; bpf: a
# user's own BPF struct_ops object (`object: path/to/x.bpf.o`).
IMPLS = ("port", "native", "bpf")
VARIANT_NAME = r"^[a-z][a-z0-9_]*$"
UDP = "udp"  # the variant name of a UDP cross-traffic flow
# The paper's segment: a 1500-byte MTU less 20 (IP) and 20 (TCP), timestamps off (its
# Sec. IV: they were deactivated to leave the bytes to payload).
MSS_BYTES = 1460


@dataclass(frozen=True)
class Flow:
    variant: str
    impl: str = "port"
    start_s: float = 0.0
    protocol: str = "tcp"
    rate_bps: float | None = None
    stop_s: float | None = None   # None: runs to the end of the run
    object: str | None = None     # impl "bpf": the struct_ops object (.bpf.o)

    def to_dict(self) -> dict:
        out = {"variant": self.variant, "impl": self.impl, "start_s": self.start_s,
               "protocol": self.protocol}
        for key in ("rate_bps", "stop_s", "object"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def end_s(self, duration_s: float) -> float:
        return duration_s if self.stop_s is None else self.stop_s

    @property
    def label(self) -> str:
        """The flow in a run path: its variant, and its implementation where that is not
        the 3.16 port ('bbr-native', 'mycc-bpf'); a UDP flow is 'udp'."""
        if self.protocol == "udp":
            return UDP
        return self.variant if self.impl == "port" else f"{self.variant}-{self.impl}"


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
    background_loss: float = 0.0
    hz: int = 250
    seed: int = 0
    # 'auto' or a time-dilation factor k (tcpeval.dilation): how the emulated backend
    # realises the condition, not part of it; runs with different settings share a path
    dilation: str | int = field(default="auto", compare=False)
    stack: dict = field(default_factory=dict, compare=False, hash=False)
    # The design the run belongs to (its `name`); None for the paper's design, whose paths
    # carry no design segment (tcpeval.paths).
    design: str | None = None
    # Grid keys that vary within the criterion, other than rtt_ms and drop, with this
    # run's values, in grid order: each names a path segment (tcpeval.paths).
    factors: tuple[tuple[str, float], ...] = ()

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(f.variant for f in self.flows)

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
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Condition":
        data = dict(data)
        data["flows"] = tuple(Flow(**f) for f in data["flows"])
        data["factors"] = tuple((k, v) for k, v in (data.get("factors") or {}).items())
        return cls(**data)

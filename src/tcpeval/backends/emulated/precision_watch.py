"""A precision-driven run's watch: while the traffic runs, whether the first flow's
throughput estimates are precise enough to stop (tcpeval.precision.decide).

It samples what the first flow's receiver has received (`ss -ti` bytes_received on the
receiver's data socket: the receiver side, exact, without waiting for iperf3's report)
every SAMPLE_VIRTUAL_S virtual seconds, and the drop stage's drops as the loss events
(at the low drop rates where the rule's floor matters each drop is a loss event of its
own; at 1e-2 several share one reduction, and the floor is met early either way). The
rule is applied in physical units -- its min_s and max_s times the dilation factor --
which leaves every relative half-width and the warm-up cut as they are in virtual ones.
"""
from __future__ import annotations

import re
import time
from dataclasses import replace

from tcpeval.backends import common
from tcpeval.backends.emulated import host
from tcpeval.precision import Decision, StopRule, decide

SAMPLE_VIRTUAL_S = 0.5       # one receiver reading per half virtual second
DECIDE_EVERY_SAMPLES = 4     # decide every 2 virtual seconds: a decision costs a drop read
_BYTES_RECEIVED = re.compile(r"bytes_received:(\d+)")


def steady_checkpoints(plan) -> list[float]:
    """When (s after t0) a precision-driven run snapshots its counters, besides its middle:
    from 10 virtual seconds on, 20 % apart, so that wherever it stops, a snapshot lies at
    most 20 % before its middle (the steady state then starts there)."""
    out, t = [], plan.flows[0].start_s + 10.0 * plan.dilation
    while t < plan.duration_s / 2:
        out.append(t)
        t *= 1.2
    return out


def physical_rule(rule: StopRule, k: int) -> StopRule:
    """The rule for a run dilated k-fold, in its physical seconds."""
    return replace(rule, max_s=rule.max_s * k, min_s=rule.min_s * k if rule.min_s is not None else None)


def received_bytes(ns: str, port: int = common.IPERF3_PORT) -> int | None:
    """What the receiver in ``ns`` has received on its iperf3 data socket (the one that
    received most: the control socket carries a few hundred bytes)."""
    out = host.run(["ss", "-Htin", "state", "established", f"sport = :{port}"], ns=ns, check=False).stdout
    counts = [int(m) for m in _BYTES_RECEIVED.findall(out)]
    return max(counts) if counts else None


class PrecisionWatch:
    """Samples and decisions of one run; ``check(elapsed)`` returns the decision once the
    rule is met (stop now), else None; at max_s the run ends by itself (``final``)."""

    def __init__(self, rule: StopRule, k: int, receiver_ns: str, flow_start_s: float, drops,
                 log=None):
        self.rule = physical_rule(rule, k)
        self.k = k
        self.receiver_ns, self.flow_start_s, self.drops = receiver_ns, flow_start_s, drops
        self.sample_s = SAMPLE_VIRTUAL_S * k
        self.log = log or (lambda m: None)
        self.t_s: list[float] = []          # physical, from the flow's start
        self.bytes: list[int] = []
        self.rates: list[float] = []        # physical bit/s per sampling interval
        self.decision: Decision | None = None
        self.decisions = 0
        self.next_at: float | None = None   # relative to t0

    def due(self, elapsed_s: float) -> bool:
        if elapsed_s < self.flow_start_s:
            return False
        if self.next_at is None:
            self.next_at = self.flow_start_s + self.sample_s
        return elapsed_s >= self.next_at

    def check(self, elapsed_s: float) -> Decision | None:
        """Take a sample; every DECIDE_EVERY_SAMPLES samples, decide. The decision, if it
        says stop; else None."""
        self.next_at = (self.next_at or elapsed_s) + self.sample_s
        got = received_bytes(self.receiver_ns)
        t = time.monotonic()
        if got is None:
            return None
        t_flow = elapsed_s - self.flow_start_s
        if self.t_s and t_flow > self.t_s[-1]:
            self.rates.append(8.0 * (got - self.bytes[-1]) / (t_flow - self.t_s[-1]))
        self.t_s.append(t_flow)
        self.bytes.append(got)
        if len(self.rates) < 2 or len(self.rates) % DECIDE_EVERY_SAMPLES:
            return None
        self.decision = decide(self.rule, self.t_s[1:], self.rates, int(self.drops()), t_flow)
        self.decisions += 1
        if self.decision.precision_reached:  # at max_s the run ends by itself
            self.log(f"precision: {self.decision.why} at {t_flow / self.k:.1f} virtual s "
                     f"(mean +-{100 * self.decision.mean.relative_half_width:.1f} %, "
                     f"{self.decision.loss_events} loss events; {time.monotonic() - t:.2f} s to decide)")
            return self.decision
        return None

    def final(self, elapsed_s: float) -> None:
        """The decision at the run's end (max_s: precision reached or not), on every sample."""
        if len(self.rates) >= 2:
            self.decision = decide(self.rule, self.t_s[1:], self.rates, int(self.drops()),
                                   max(elapsed_s - self.flow_start_s, self.t_s[-1]))
            self.decisions += 1

    def record(self, stopped_at_s: float | None) -> dict:
        """measured.precision: the last decision (physical units, as every measurement),
        where the run stopped and how often it was asked."""
        out = self.decision.record() if self.decision else {"rule": self.rule.settings(), "stopped": False,
                                                             "precision_reached": False,
                                                             "why": "no decision: too few samples"}
        out.update({"stopped_early": stopped_at_s is not None, "stopped_at_s": stopped_at_s,
                    "samples": len(self.rates), "sample_s": self.sample_s, "decisions": self.decisions,
                    "loss_events_from": "the drop stage's dropped packets",
                    "throughput_from": "the first flow's receiver socket (ss -ti bytes_received)"})
        return out

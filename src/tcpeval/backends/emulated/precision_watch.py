"""A precision-driven run's watch: while the traffic runs, whether the first flow's
throughput estimates are precise enough to stop (tcpeval.precision.decide).

It samples what the first flow's receiver has received (tcp_info's bytes_received of the
receiver's data socket, through sock_diag: the receiver side, exact, without waiting for
iperf3's report) once per reporting interval of the condition -- so the rule's quartiles
are those of the interval throughput the metrics take theirs from -- and takes the drop
stage's drops as the loss events (at the low drop rates where the rule's floor matters
each drop is a loss event of its own; at 1e-2 several share one reduction, and the floor
is met early either way). Where the path drops nothing at random it also reads the
bottleneck (the link engine's or the qdisc's sent bytes and queue drops) at each sample:
there the flow's steady state is the link, and the rule waits until a sample after the
warm-up has met it (precision.decide's link_met). The rule is applied in physical units -- its min_s and max_s
times the dilation factor -- which leaves every relative half-width and the warm-up cut
as they are in virtual ones.
"""
from __future__ import annotations

import time
from dataclasses import replace

from tcpeval.backends import common
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import record_parts
from tcpeval.backends.emulated.sockdiag import ReceivedBytes, SockDiagError
from tcpeval.precision import DECIDE_EVERY_S, Decision, StopRule, decide

# a sample's interval met the link when the bottleneck dropped from its queue or sent at
# this fraction of its rate or more (a flow at the link sends at it but for the counters'
# timing; one still on its way up, well below: 58 % in the case that asked for this)
LINK_MET_FRACTION = 0.95


def link_met_between(before: dict | None, after: dict | None, rate_bps: float) -> bool:
    """Whether the bottleneck was met between two of its readings (runner._link_counters:
    {t_s, bytes, drops, source}):
    it dropped from its queue, or sent at LINK_MET_FRACTION of its rate or more. False
    when either reading is missing (the run waits rather than guess)."""
    sent = record_parts.link_steady([before, after], 0.0)
    if sent is None:
        return False
    if after.get("drops") is not None and before.get("drops") is not None and after["drops"] > before["drops"]:
        return True
    return sent["bps"] >= LINK_MET_FRACTION * rate_bps


def steady_checkpoints(plan) -> list[float]:
    """When (s after t0) a precision-driven run snapshots its counters, besides its middle:
    from 1 virtual second on, 20 % apart, so that wherever it stops, a snapshot lies at
    most 20 % before its middle (the steady state then starts there). The first comes at
    half the earliest stop (the first decision, DECIDE_EVERY_S): bic at 0.2 ms and
    1e-2 met +-5 % after 6 virtual s, and with the first snapshot at 10 s its run had no
    steady state to record."""
    out, t = [], plan.flows[0].start_s + DECIDE_EVERY_S / 2 * plan.dilation
    while t < plan.duration_s / 2:
        out.append(t)
        t *= 1.2
    return out


def physical_rule(rule: StopRule, k: int) -> StopRule:
    """The rule for a run dilated k-fold, in its physical seconds."""
    return replace(rule, max_s=rule.max_s * k, min_s=rule.min_s * k if rule.min_s is not None else None)


class PrecisionWatch:
    """Samples and decisions of one run; ``check(elapsed)`` returns the decision once the
    rule is met (stop now), else None; at max_s the run ends by itself (``final``)."""

    def __init__(self, rule: StopRule, k: int, receiver_ns: str, flow_start_s: float, drops,
                 sample_s: float, log=None, link=None, link_rate_bps: float | None = None):
        """sample_s: the condition's reporting interval in physical seconds (x k). link: on
        a path that drops nothing at random, a reading of the bottleneck ({t_s, bytes,
        drops}, or None) and link_rate_bps its physical rate; None elsewhere."""
        if link is not None and not link_rate_bps:
            raise ValueError("a precision watch that reads the link needs its rate")
        self.rule = physical_rule(rule, k)
        self.k = k
        try:
            self.receiver = ReceivedBytes(receiver_ns)
        except SockDiagError as err:   # a kernel without inet_diag: say what is missing
            raise BackendError(f"a precision-driven run reads the receiver through sock_diag "
                               f"(CONFIG_INET_DIAG, tcp_diag): {err}") from None
        self.flow_start_s, self.drops = flow_start_s, drops
        self.sample_s = sample_s
        self.decide_every = max(1, round(DECIDE_EVERY_S * k / sample_s))
        self.log = log or (lambda m: None)
        self.t_s: list[float] = []          # physical, from the flow's start
        self.bytes: list[int] = []
        self.rates: list[float] = []        # physical bit/s per sampling interval
        self.link, self.link_rate_bps = link, link_rate_bps
        self.link_reading: dict | None = None
        self.link_met: list[bool] | None = [] if link is not None else None  # one per rate
        self.decision: Decision | None = None
        self.decisions = 0
        self.next_at: float | None = None   # relative to t0

    def due(self, elapsed_s: float) -> bool:
        if elapsed_s < self.flow_start_s:
            return False
        if self.next_at is None:
            self.next_at = self.flow_start_s + self.sample_s
        return elapsed_s >= self.next_at

    def check(self, t0: float) -> Decision | None:
        """Take a sample, timed at its read (seconds after t0, on time.monotonic's clock);
        every 2 virtual seconds' samples, decide. The decision, if it says stop; else None.

        The traffic loop reaches the watch late at times (after a snapshot of the counters,
        a look at the sockets): a sample timed at the loop's turn instead carried bytes
        that arrived after it, and the next one too few, a spike and a dip that the rate
        never had."""
        got = self.receiver.read(common.IPERF3_PORT)
        t = time.monotonic()
        elapsed_s = t - t0
        self.next_at = (self.next_at or elapsed_s) + self.sample_s
        if got is None or (self.bytes and got < self.bytes[-1]):
            # none yet, or the count went back: the data socket has left ESTABLISHED (the
            # sender's end, at max_s) and the read found iperf3's control socket. Not a
            # sample: one such read made a run's recorded mean -54 kbit/s (BIC, 12.2 ms, 1e-2)
            return None
        t_flow = elapsed_s - self.flow_start_s
        reading = self.link() if self.link is not None else None
        if self.t_s and t_flow > self.t_s[-1]:
            self.rates.append(8.0 * (got - self.bytes[-1]) / (t_flow - self.t_s[-1]))
            if self.link_met is not None:
                self.link_met.append(link_met_between(self.link_reading, reading, self.link_rate_bps))
        if self.link is not None:
            self.link_reading = reading
        self.t_s.append(t_flow)
        self.bytes.append(got)
        if len(self.rates) < 2 or len(self.rates) % self.decide_every:
            return None
        self.decision = decide(self.rule, self.t_s[1:], self.rates, int(self.drops()), t_flow, self.link_met)
        self.decisions += 1
        if self.decision.precision_reached:  # at max_s the run ends by itself
            self.log(f"precision: {self.decision.why} at {t_flow / self.k:.1f} virtual s "
                     f"(mean +-{100 * self.decision.mean.relative_half_width:.1f} %, "
                     f"{self.decision.loss_events} loss events; {time.monotonic() - t:.2f} s to decide)")
            return self.decision
        return None

    def progress(self) -> str:
        """How far the run is from its rule, by the last decision (physical seconds after
        t0, as the run's log counts them); empty before the first decision."""
        return self.decision.progress(self.flow_start_s) if self.decision else ""

    def wake_at(self) -> float | None:
        """When (s after t0) the next sample is due, for the traffic loop's sleep."""
        return self.next_at

    def close(self) -> None:
        self.receiver.close()

    def final(self, elapsed_s: float) -> None:
        """The decision at the run's end (max_s: precision reached or not), on every sample."""
        if len(self.rates) >= 2:
            self.decision = decide(self.rule, self.t_s[1:], self.rates, int(self.drops()),
                                   max(elapsed_s - self.flow_start_s, self.t_s[-1]), self.link_met)
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
                    "throughput_from": "the first flow's receiver socket (sock_diag tcp_info bytes_received)",
                    # what the rule decided on: a reader can decide again, and the analysis
                    # takes the run's steady-state figures from it (precision.steady_state)
                    "series": {"t_s": list(self.t_s), "bytes": list(self.bytes),
                                **({"link_met": list(self.link_met)} if self.link_met is not None else {})}})
        if self.link_met is not None:
            out.update({"link_met_samples": sum(self.link_met),
                        "link_met_from": f"the bottleneck's queue drops, or its sent bytes at >= "
                                         f"{100 * LINK_MET_FRACTION:g} % of its rate, per sample"})
        return out

"""A doomed attempt ends early: while the traffic runs, whether the host has already
spoiled the attempt in a way its verdict flags whatever follows.

Frames the hosts sent that never entered the switch are such a fault: any one flags the
run (fidelity.switch_input_check), and a flagged attempt is run again
(base.attempt_until_ok), so its remaining traffic buys a record of which only the reasons
survive (fidelity.earlier_attempts). The watch reads the switch ports' input drops -- the
counter the verdict reads at the end -- every few seconds and, on the first, has the
attempt end there. On the findings campaign's low-loss cells the first attempt lost frames
so and ran on for its whole length (BIC at 6.2 ms, 1e-7: 30 min at x6 for 1,960 frames);
Scalable/Reno pairs at 6.2 ms lost them in all three attempts (docs/findings-runs.md).

Only an attempt that will be run again ends early: the last one runs its course, since its
trace is the one kept.
"""
from __future__ import annotations

from tcpeval.backends import fidelity
from tcpeval.backends.emulated.counters import input_drops, input_drops_since

# how often (physical seconds) the switch's counters are read: one `ip -s link` in the
# switch's namespace, which the run's 5-s progress line already takes its turn with
CHECK_EVERY_S = 5.0


class DoomedWatch:
    """``check(elapsed_s)``: whether the switch has dropped a frame from the hosts since
    ``before`` (counters.HostCounters.switch_input_drops, read as the traffic started);
    then ``finding`` holds the verdict's own finding and ``at_s`` when it was seen."""

    def __init__(self, switch_ns: str, ports: list[str], before: dict, backlog: int | None):
        self.switch_ns, self.ports, self.before, self.backlog = switch_ns, ports, dict(before), backlog
        self.finding: fidelity.Finding | None = None
        self.at_s: float | None = None
        self.next_at = CHECK_EVERY_S

    def due(self, elapsed_s: float) -> bool:
        return self.finding is None and elapsed_s >= self.next_at

    def check(self, elapsed_s: float) -> bool:
        self.next_at = elapsed_s + CHECK_EVERY_S
        dropped = sum(input_drops_since(self.before, input_drops(self.switch_ns, self.ports)).values())
        self.finding = fidelity.switch_input_check(dropped, self.backlog)
        if self.finding is not None:
            self.at_s = elapsed_s
        return self.finding is not None

    def record(self) -> dict | None:
        """measured.ended_doomed: when (seconds after the traffic's start, physical as
        every measurement) and why the attempt was ended before its length; None if it
        was not."""
        if self.finding is None:
            return None
        return {"at_s": self.at_s, "why": str(self.finding), "check": self.finding.check}

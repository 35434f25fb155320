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
trace is the one kept. Nor does an attempt end before every flow has started and run a
check's interval: the record reads each flow's report (a convergence pair doomed 5 s into
its first flow, before its second began at half time, failed for want of the second's).
A flow still waiting for its time when the attempt is doomed starts at once instead
(``seen``: the caller starts it): the attempt's record is spent on its reasons, so the
flows' schedule no longer matters, and waiting for it cost a convergence pair at 24.2 ms
(x6), doomed in its first flow's slow start, three minutes of the six its attempt was
planned for. So a doomed attempt ends a check's interval after the drop was seen at the
latest, or when its last flow has run one if that is sooner.
"""
from __future__ import annotations

from tcpeval.backends import fidelity
from tcpeval.backends.emulated.counters import input_drops, input_drops_since

# how often (physical seconds) the switch's counters are read: one `ip -s link` in the
# switch's namespace, which the run's 5-s progress line already takes its turn with
CHECK_EVERY_S = 5.0


class DoomedWatch:
    """``check(elapsed_s)``: whether the attempt ends now. The switch's first drop of a
    frame from the hosts since ``before`` (counters.HostCounters.switch_input_drops, read
    as the traffic started) dooms it: ``finding`` then holds the verdict's own finding and
    ``at_s`` when it was seen. From then on (``seen``) the flows still due start at once
    (the caller starts them), and the attempt ends at ``not_before_s`` (physical s after
    the traffic's start: every flow started and run a check's interval), brought forward
    to a check's interval after the drop."""

    def __init__(self, switch_ns: str, ports: list[str], before: dict, backlog: int | None,
                 not_before_s: float = 0.0, log=lambda message: None):
        self.switch_ns, self.ports, self.before, self.backlog = switch_ns, ports, dict(before), backlog
        self.not_before_s, self.log = not_before_s, log
        self.finding: fidelity.Finding | None = None
        self.at_s: float | None = None
        self.ended_s: float | None = None
        self.next_at = CHECK_EVERY_S

    @property
    def seen(self) -> bool:
        """Doomed and not yet ended: the flows still due start now (doomed.py)."""
        return self.finding is not None and self.ended_s is None

    def due(self, elapsed_s: float) -> bool:
        if self.finding is None:
            return elapsed_s >= self.next_at
        return self.ended_s is None and elapsed_s >= self.not_before_s

    def check(self, elapsed_s: float) -> bool:
        if self.finding is None:
            self.next_at = elapsed_s + CHECK_EVERY_S
            dropped = sum(input_drops_since(self.before, input_drops(self.switch_ns, self.ports)).values())
            self.finding = fidelity.switch_input_check(dropped, self.backlog)
            if self.finding is None:
                return False
            self.at_s = elapsed_s
            # the flows still due start now (the caller): one check's interval suffices
            self.not_before_s = min(self.not_before_s, elapsed_s + CHECK_EVERY_S)
            if elapsed_s < self.not_before_s:
                self.log(f"attempt doomed at {elapsed_s:.0f} s ({self.finding}); it ends at "
                         f"{self.not_before_s:.0f} s, once every flow has run")
        if elapsed_s < self.not_before_s:
            return False
        self.ended_s = elapsed_s
        return True

    def record(self) -> dict | None:
        """measured.ended_doomed: when the fault was seen (at_s) and the attempt ended
        (ended_s; seconds after the traffic's start, physical as every measurement) and
        why; None if it was not ended so."""
        if self.ended_s is None:
            return None
        return {"at_s": self.at_s, "ended_s": self.ended_s, "why": str(self.finding), "check": self.finding.check}


def earliest_end_s(flow_starts_s: list[float]) -> float:
    """The earliest an attempt of flows starting at these times (physical s after the
    traffic's start) may end: the last one started and run a check's interval."""
    return max(flow_starts_s, default=0.0) + CHECK_EVERY_S

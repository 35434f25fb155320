"""The backend interface (docs/architecture.md, "Backend interface")."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

from tcpeval import dilation
from tcpeval.backends.fidelity import transient_only
from tcpeval.condition import Condition

# A run flagged only for transient host trouble (fidelity.transient_only) is run again,
# up to this many attempts in all (the emulated backend; planning's time limits allow it).
RUN_ATTEMPTS = 3

# ... each after a pause (seconds, by the attempt that was flagged; the last repeats): host
# trouble comes in spells, and an attempt straight after a spoiled one meets the same spell
# (CI, 2026-11-29: three neighbouring test files' runs flagged in all five back-to-back
# attempts, each for a stall of 8-58 ms, where this VM's runs pass at the first). Small
# beside a campaign's runs of minutes (20 s in all for RUN_ATTEMPTS).
RETRY_PAUSES_S = (5.0, 15.0, 30.0, 60.0)


def retry_pause_s(flagged_attempts: int, pauses: tuple = RETRY_PAUSES_S) -> float:
    """The pause before the next attempt, after `flagged_attempts` (>= 1) spoiled ones."""
    if not pauses:
        return 0.0
    return float(pauses[min(flagged_attempts, len(pauses)) - 1])


def attempt_until_ok(execute: Callable[[bool], dict], attempts: int, pauses: tuple = RETRY_PAUSES_S,
                     log: Callable[[str], None] = lambda m: None, sleep: Callable[[float], None] = time.sleep,
                     before_retry: Callable[[dict], None] = lambda record: None) -> dict:
    """Run one condition (`execute(last)` returns its trace record; `last`: no attempt
    follows this one, whatever its verdict) until its verdict is ok, a finding is not
    transient host trouble, or `attempts` are spent; pause between attempts,
    and hand each spoiled attempt's record to `before_retry` before the next (the emulated
    backend runs the next attempt slower where the host fell behind this one's frame rate).
    The record kept is the last; fidelity.earlier_attempts lists the spoiled ones (their
    reasons, findings, means, stolen CPU, time-dilation factor, where one the host doomed
    was ended, and the pause that followed). An attempt the backend ended early because
    the host had doomed it (measured.ended_doomed: it may do so unless `last`) is run again
    whatever else its shortened traffic gave the verdict to say."""
    earlier: list[dict] = []
    while True:
        record = execute(len(earlier) + 1 >= attempts)
        verdict = record["fidelity"]
        doomed = record["measured"].get("ended_doomed")
        if (verdict["verdict"] == "ok" or len(earlier) + 1 >= attempts
                or not (doomed or transient_only(verdict["findings"]))):
            break
        pause_s = retry_pause_s(len(earlier) + 1, pauses)
        earlier.append({"reasons": verdict["reasons"], "findings": verdict["findings"],
                        "mean_throughput_bps": [f["summary"]["mean_throughput_bps"] for f in record["flows"]],
                        "cpu_stolen": record["measured"].get("cpu_stolen"), "dilation": dilation.factor(record),
                        **({"ended_doomed": doomed} if doomed else {}), "then_paused_s": pause_s})
        log(f"attempt {len(earlier)} flagged by the host, not the setting "
            f"({'; '.join(verdict['reasons'])}): running the condition again in {pause_s:g} s")
        before_retry(record)
        sleep(pause_s)  # the caller holds the host's lock: the spell is the host's own
    record["fidelity"]["earlier_attempts"] = earlier
    return record


class BackendError(RuntimeError):
    """A run could not be performed; the message names the run and the step."""


class ConditionError(BackendError):
    """The condition asks for what this backend cannot realise; the message names the
    field (``condition.<field>``). The user's to change, not a failed run."""


def refuse_condition(problems: list[str]) -> None:
    """Raise one ConditionError naming each problem ('<field>: <why>') as condition.<field>,
    if there is any."""
    if problems:
        raise ConditionError("; ".join(f"condition.{p}" for p in problems))


class TraceExistsError(BackendError):
    """The run's trace exists and overwriting it was not asked for (--force)."""


@runtime_checkable
class Backend(Protocol):
    name: str  # "emulated" | "testbed"

    def run(self, condition: Condition, run_dir: Path, *, force: bool = False) -> dict:
        """Perform one run, write raw files and (last, atomically) run_dir/trace.json;
        return the record. Refuses to overwrite a trace unless ``force``. On failure:
        run_dir/run.log says why, and there is no trace.json."""
        ...

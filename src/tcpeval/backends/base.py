"""The backend interface (docs/architecture.md, "Backend interface")."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from tcpeval.condition import Condition

# A run flagged only for transient host trouble (fidelity.transient_only) is run again,
# up to this many attempts in all (the emulated backend; planning's time limits allow it).
RUN_ATTEMPTS = 3


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

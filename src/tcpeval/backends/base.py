"""The backend interface (docs/architecture.md, "Backend interface")."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from tcpeval.condition import Condition


class BackendError(RuntimeError):
    """A run could not be performed; the message names the run and the step."""


@runtime_checkable
class Backend(Protocol):
    name: str  # "emulated" | "testbed"

    def run(self, condition: Condition, run_dir: Path, *, force: bool = False) -> dict:
        """Perform one run, write raw files and (last, atomically) run_dir/trace.json;
        return the record. Refuses to overwrite a trace unless ``force``. On failure:
        run_dir/run.log says why, and there is no trace.json."""
        ...

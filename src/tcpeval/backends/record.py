"""The trace record of a run, one skeleton for both backends.

A backend measures; this module puts what it measured where the trace format
(schemas/trace.schema.json) wants it: run, condition, environment, mechanisms, flows,
measured, fidelity, started/finished. What only one backend has (the emulated
backend's delay line and counters, the testbed's description) it passes in as its own
parts; the skeleton and the fields both share are written here once.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
from pathlib import Path

from tcpeval import provenance
from tcpeval.backends import common, fidelity
from tcpeval.backends.base import BackendError, TraceExistsError
from tcpeval.trace import SCHEMA_VERSION, TRACE_FILE


def refuse_overwrite(run_dir: Path, force: bool) -> Path:
    """run_dir/trace.json; an error if it exists and ``force`` is not given."""
    target = Path(run_dir) / TRACE_FILE
    if target.exists() and not force:
        raise TraceExistsError(f"{target} exists; refusing to overwrite a raw trace (use --force)")
    return target


# A forced run over an existing trace sets the old run's directory aside here (beside it,
# hidden from the campaign's listings) until the new trace is written.
REPLACED_SUFFIX = ".replaced"
FAILED_LOG = "run.log.failed"


@contextlib.contextmanager
def replacing(run_dir: Path, force: bool):
    """Around a run: with ``force`` over an existing trace, the old run (its trace, raw files
    and log) is moved aside (the path yielded; else None) and the run gets a fresh
    directory. The old run is removed once the block ends normally (the new trace
    written), and put back if it raises (a failed or interrupted rerun), with the failed
    run's log beside it as run.log.failed. Without a trace to replace, nothing is moved.
    Nothing of a kept run is ever half-overwritten (an interrupted forced rerun had left a
    trace whose iperf3 and delay-line files were the rerun's empty ones, 2026-11-30)."""
    run_dir = Path(run_dir)
    if not (force and (run_dir / TRACE_FILE).exists()):
        yield None
        return
    aside = run_dir.with_name(f".{run_dir.name}{REPLACED_SUFFIX}")
    if aside.exists():
        raise BackendError(f"{aside} exists: an earlier forced rerun of {run_dir} did not finish; "
                           f"keep one of the two (the trace in {run_dir} or the one set aside) and "
                           f"remove the other")
    os.rename(run_dir, aside)
    try:
        yield aside
    except BaseException:
        failed_log = run_dir / "run.log"
        if failed_log.exists():
            os.replace(failed_log, aside / FAILED_LOG)
        shutil.rmtree(run_dir, ignore_errors=True)
        os.rename(aside, run_dir)
        raise
    shutil.rmtree(aside)


def replacing_note(aside: Path) -> str:
    """The run log's line for a forced run whose predecessor waits in ``aside``."""
    return f"--force: the run this one replaces waits in {aside} until this trace is written (put back if this run fails)"


def check_verified_cc(index: int, variant: str, requested: str | None, verified: str | None) -> None:
    """A TCP flow whose socket ran another algorithm than asked for is no measurement."""
    if verified != requested:
        raise BackendError(f"flow {index} ({variant}): asked for congestion control "
                           f"{requested!r}, the socket used {verified!r}; run discarded")


def environment(*, kernel: str, tools: dict, sysctls: dict, offloads, kernel_version: str | None = None,
                **own) -> dict:
    """environment: the controlling host, the tools and the settings; ``own`` adds a
    backend's own fields after the shared ones."""
    env = {"hostname": socket.gethostname(), "kernel": kernel}
    if kernel_version is not None:
        env["kernel_version"] = kernel_version
    env.update({"cpus": os.cpu_count() or 1, "tools": tools, "tcpeval_version": common.tcpeval_version(),
                "git_revision": provenance.git_revision(), "sysctls": sysctls, "offloads": offloads})
    return {**env, **own}


def drop_measurement(seen: int, dropped: int, **own) -> dict:
    """measured.drop: the drop stage's counters, the rate and its Wilson 95 % interval."""
    return {"seen": seen, "dropped": dropped, "rate": dropped / seen if seen else None,
            "ci95": list(fidelity.wilson(dropped, seen)) if seen else [0.0, 1.0],
            "interval": "wilson", **own}


def flow_record(index: int, flow, *, impl: str, actual: tuple, cc: dict, parsed: dict,
                raw_files: list[str]) -> dict:
    """One entry of flows: the condition's flow, what happened to it (actual start and
    stop in run seconds), its congestion control and its samples."""
    return {"id": index, "variant": flow.variant, "impl": impl, "protocol": flow.protocol,
            "start_s": flow.start_s, "stop_s": flow.stop_s,
            "actual": {"start_s": actual[0], "stop_s": actual[1]},
            "cc": cc, "samples": parsed["samples"], "summary": parsed["summary"], "raw_files": raw_files,
            **({"rpc": parsed["rpc"]} if parsed.get("rpc") is not None else {})}


def build(*, condition, run_dir: Path, backend: str, environment: dict, mechanisms: dict, flows: list,
          measured: dict, verdict: dict, started_at: str, notes: list | None = None) -> dict:
    """The whole record. ``verdict`` is fidelity.verdict's answer (its internal checks are
    left out); ``notes`` only where the backend keeps any."""
    record = {
        "schema_version": SCHEMA_VERSION,
        "run": {"path": common.display_path(Path(run_dir)), "backend": backend,
                "campaign": condition.campaign, "criterion": condition.criterion, "rep": condition.rep},
        "condition": condition.to_dict(), "environment": environment, "mechanisms": mechanisms,
        "flows": flows, "measured": measured,
        "fidelity": {k: v for k, v in verdict.items() if k != "checks"},
        "started_at": started_at, "finished_at": common.now_iso(),
    }
    if notes is not None:
        record["notes"] = notes
    return record

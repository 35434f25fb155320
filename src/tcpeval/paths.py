"""Run identity: a condition <-> the path that names it.

    <raw_dir>/<backend>/<campaign>/<criterion>/<variants>/rtt<ms>/drop<p>/rep<k>/trace.json

    data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep3/trace.json
    data/raw/testbed/paper/convergence/cubic+reno/rtt24.2/drop0/rep1/trace.json

Numbers are written in one canonical form (RTT: shortest decimal; drop: 0 or shortest
scientific notation), so each condition has exactly one path and a reviewer can type it.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path, PurePosixPath

from tcpeval.spec import BACKENDS, Condition, SpecError, expand

DEFAULT_RAW_DIR = "data/raw"
TRACE_NAME = "trace.json"

GRAMMAR = ("<raw_dir>/<backend>/<campaign>/<criterion>/<variants>/rtt<ms>/drop<p>/rep<k>[/trace.json]\n"
           "  backend: emulated | testbed; variants: flows' variants in start order joined by '+';\n"
           "  ms: RTT setting, shortest decimal (0.2, 24.2); p: 0 or shortest scientific form (1e-05);\n"
           "  k: repetition from 1")

_RUN_RE = re.compile(
    r"(?P<backend>[^/]+)/(?P<campaign>[^/]+)/(?P<criterion>[^/]+)/(?P<variants>[^/]+)/"
    r"rtt(?P<rtt>[^/]+)/drop(?P<drop>[^/]+)/rep(?P<rep>[^/]+)$")

# Snakemake wildcard constraints, kept beside the grammar they implement.
WILDCARD_CONSTRAINTS = {
    "backend": "|".join(BACKENDS),
    "campaign": r"[a-z][a-z0-9_-]*",
    "criterion": r"[a-z][a-z0-9_-]*",
    "variants": r"[a-z0-9]+(\+[a-z0-9]+)*",
    "rtt": r"[0-9]+(\.[0-9]+)?",
    "drop": r"0|[0-9](\.[0-9]+)?e[-+][0-9]+",
    "rep": r"[1-9][0-9]*",
}


def format_rtt(rtt_ms: float) -> str:
    value = float(rtt_ms)
    return str(int(value)) if value.is_integer() else repr(value)


def format_drop(p: float) -> str:
    if p == 0:
        return "0"
    mantissa, exponent = f"{float(p):.12e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent[0]}{exponent[1:].zfill(2)}"


def run_dir(condition: Condition, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    """The run directory of a condition, relative to the repository (POSIX form)."""
    parts = [raw_dir, condition.backend, condition.campaign, condition.criterion,
             "+".join(condition.variants), f"rtt{format_rtt(condition.rtt_ms)}",
             f"drop{format_drop(condition.drop)}", f"rep{condition.rep}"]
    return str(PurePosixPath(*parts))


def trace_path(condition: Condition, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    return f"{run_dir(condition, raw_dir)}/{TRACE_NAME}"


def parse(path: str | Path, raw_dir: str = DEFAULT_RAW_DIR) -> dict:
    """Split a run path into its named parts (no design needed)."""
    text = str(PurePosixPath(str(path)))
    if text.endswith("/" + TRACE_NAME):
        text = text[: -len(TRACE_NAME) - 1]
    prefix = str(PurePosixPath(raw_dir)) + "/"
    rel = text[len(prefix):] if text.startswith(prefix) else text
    match = _RUN_RE.search(rel)
    if not match or match.start() != 0:
        raise SpecError(f"{path!s} is not a run path; expected\n  {GRAMMAR}")
    parts = match.groupdict()
    try:
        parts["rtt_ms"] = float(parts.pop("rtt"))
        parts["drop"] = float(parts.pop("drop"))
        parts["rep"] = int(parts["rep"])
    except ValueError:
        raise SpecError(f"{path!s}: rtt, drop or rep is not a number; expected\n  {GRAMMAR}") from None
    parts["variants"] = tuple(parts["variants"].split("+"))
    return parts


def resolve(path: str | Path, design: dict, raw_dir: str = DEFAULT_RAW_DIR,
            index: dict[str, Condition] | None = None) -> Condition:
    """The condition a run path names in a design, or an error showing the nearest valid path.

    ``index``: `index(runs)` of the campaign, when the caller resolves many paths of one campaign."""
    parts = parse(path, raw_dir)
    if parts["backend"] not in BACKENDS:
        raise SpecError(f"{path!s}: unknown backend {parts['backend']!r}; allowed values: {', '.join(BACKENDS)}")
    try:
        if index is None:
            index = make_index(expand(design, parts["campaign"], parts["backend"]), raw_dir)
    except SpecError as err:
        raise SpecError(f"{path!s}: {err}") from None
    wanted = run_dir_from_parts(parts, raw_dir)
    given = str(PurePosixPath(str(path)))
    given = given[: -len(TRACE_NAME) - 1] if given.endswith("/" + TRACE_NAME) else given
    if not given.endswith(wanted[len(str(PurePosixPath(raw_dir))):]):
        raise SpecError(f"{path!s} is not in canonical form; the run is {wanted}/{TRACE_NAME}")
    if wanted in index:
        return index[wanted]
    near = difflib.get_close_matches(wanted, list(index), n=1, cutoff=0.0)
    hint = f"\nnearest valid path: {near[0]}/{TRACE_NAME}" if near else ""
    raise SpecError(f"{path!s} names no run of campaign {parts['campaign']!r}.\n"
                    f"grammar: {GRAMMAR}{hint}")


def make_index(runs: list[Condition], raw_dir: str = DEFAULT_RAW_DIR) -> dict[str, Condition]:
    """Run directory -> condition, for resolving many paths of one campaign."""
    return {run_dir(c, raw_dir): c for c in runs}


def run_dir_from_parts(parts: dict, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    return str(PurePosixPath(raw_dir, parts["backend"], parts["campaign"], parts["criterion"],
                             "+".join(parts["variants"]), f"rtt{format_rtt(parts['rtt_ms'])}",
                             f"drop{format_drop(parts['drop'])}", f"rep{parts['rep']}"))

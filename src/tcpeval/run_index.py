"""A campaign's runs by path, and back: the one owner of "run path -> condition" and
"condition -> run path" for a design.

A path resolves top-down: read its segments (tcpeval.paths.parse), check that it names
this design and a known backend, expand that campaign (tcpeval.spec.expand) and look the
canonical run directory up among its runs; an unknown one gets the nearest valid path.
"""
from __future__ import annotations

import difflib
from pathlib import Path, PurePosixPath

from tcpeval import paths, spec, trace
from tcpeval.condition import BACKENDS, Condition
from tcpeval.errors import SpecError


class RunIndex:
    """The runs of one campaign of one design on one backend, by run directory below
    ``raw_dir`` (``runs``: the campaign's runs, when the caller expanded them already)."""

    def __init__(self, design: dict, campaign: str, backend: str = "emulated",
                 raw_dir: str = paths.DEFAULT_RAW_DIR, runs: list[Condition] | None = None):
        self.design, self.campaign, self.backend, self.raw_dir = design, campaign, backend, raw_dir
        self.runs = list(runs) if runs is not None else spec.expand(design, campaign, backend)
        self._by_dir = {paths.run_dir(c, raw_dir): c for c in self.runs}

    def path_of(self, condition: Condition) -> str:
        """The run directory of a condition."""
        return paths.run_dir(condition, self.raw_dir)

    def get(self, run_dir: str) -> Condition | None:
        """The condition of a canonical run directory, None if it names no run here."""
        return self._by_dir.get(run_dir)

    def resolve(self, path: str | Path) -> Condition:
        """The condition a run path (its directory or trace.json) names, or an error that
        says why it does not: not canonical, or no run of the campaign (with the nearest)."""
        parts = _parts(path, self.raw_dir)
        wanted = paths.run_dir_from_parts(parts, self.raw_dir)
        given = str(PurePosixPath(str(path)))
        given = given[: -len(trace.TRACE_FILE) - 1] if given.endswith("/" + trace.TRACE_FILE) else given
        if not given.endswith(wanted[len(str(PurePosixPath(self.raw_dir))):]):
            raise SpecError(f"{path!s} is not in canonical form; the run is {wanted}/{trace.TRACE_FILE}")
        if wanted in self._by_dir:
            return self._by_dir[wanted]
        near = difflib.get_close_matches(wanted, list(self._by_dir), n=1, cutoff=0.0)
        hint = f"\nnearest valid path: {near[0]}/{trace.TRACE_FILE}" if near else ""
        raise SpecError(f"{path!s} names no run of campaign {self.campaign!r}.\n"
                        f"grammar: {paths.GRAMMAR}{hint}")


def _parts(path: str | Path, raw_dir: str) -> dict:
    parts = paths.parse(path, raw_dir)
    if parts["backend"] not in BACKENDS:
        raise SpecError(f"{path!s}: unknown backend {parts['backend']!r}; allowed values: {', '.join(BACKENDS)}")
    return parts


def resolve_path(path: str | Path, design: dict, raw_dir: str = paths.DEFAULT_RAW_DIR) -> Condition:
    """The condition a run path names in a design (the campaign and backend its segments
    name), or an error showing the nearest valid path."""
    parts = _parts(path, raw_dir)
    label = spec.design_label(design)
    if parts["design"] != label:
        have = f"design {parts['design']!r}" if parts["design"] else "the paper's design (no design segment)"
        want = f"design {label!r} (segment after the backend)" if label else "the paper's design (no design segment)"
        raise SpecError(f"{path!s} is a run of {have}; the design given is {want}")
    try:
        index = RunIndex(design, parts["campaign"], parts["backend"], raw_dir)
    except SpecError as err:
        raise SpecError(f"{path!s}: {err}") from None
    return index.resolve(path)

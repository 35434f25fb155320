"""The published findings (paper/claims.yaml) and the cells each one reads.

One meaning of a finding's selection (its check's `where`, and `a` / `b` where it compares
two selections) for both of its readers: the checks on our tables
(tcpeval.report.claims) and the campaign that runs exactly the cells the findings need
(a campaign's `cells_from_claims`, tcpeval.spec). A leaf of the package, like
tcpeval.condition: it reads YAML and compares numbers, nothing else.

A cell is a condition without its repetition: criterion, variant (the first flow's),
second (the second flow's, "" for none), rtt_ms, drop.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

SELECTION_KEYS = ("criterion", "variant", "second", "rtt_ms", "rtt_min", "rtt_max", "drop", "drop_min",
                  "drop_max", "same_variant")
_TOL = 1e-12  # settings written in decimal: 1.0e-7 in YAML and in a path are the same number


class ClaimError(ValueError):
    pass


def load_claims(path: str | Path) -> list[dict]:
    """The claims of a findings file, each with its id, section, paper and check; every
    selection's keys checked (ClaimError names the claim and the key)."""
    data = yaml.safe_load(Path(path).read_text())
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, list):
        raise ClaimError(f"{path}: expected a top-level 'claims' list")
    ids = set()
    for c in claims:
        for key in ("id", "section", "paper", "check"):
            if key not in c:
                raise ClaimError(f"{path}: claim {c.get('id', '?')} lacks {key!r}")
        if c["id"] in ids:
            raise ClaimError(f"{path}: duplicate claim id {c['id']!r}")
        ids.add(c["id"])
        for sel in selections(c):
            unknown = [k for k in sel if k not in SELECTION_KEYS]
            if unknown:
                raise ClaimError(f"{path}: claim {c['id']}: unknown selection key {unknown[0]!r}; "
                                 f"allowed values: {', '.join(SELECTION_KEYS)}")
    return claims


def selections(claim: dict) -> list[dict]:
    """The selections a claim's check reads: `where`, merged with `a` and with `b` where
    the check compares two."""
    check = claim["check"]
    where = dict(check.get("where", {}))
    parts = [check[k] for k in ("a", "b") if k in check]
    return [{**where, **part} for part in parts] if parts else [where]


def _one_of(value, wanted) -> bool:
    return value in (wanted if isinstance(wanted, list) else [wanted])


def _same(x: float, wanted) -> bool:
    return any(abs(float(x) - float(w)) <= _TOL * max(1.0, abs(float(w)))
               for w in (wanted if isinstance(wanted, list) else [wanted]))


def matches(cell: Mapping, where: Mapping) -> bool:
    """Whether a cell lies in a selection: criterion, variant and second by name (one or a
    list), rtt_ms and drop by value (one or a list), rtt_min/rtt_max and drop_min/drop_max
    inclusive, same_variant whether the two flows run the same variant."""
    for key, wanted in where.items():
        if key in ("criterion", "variant", "second"):
            ok = _one_of(cell[key] or "", wanted)
        elif key in ("rtt_ms", "drop"):
            ok = _same(cell[key], wanted)
        elif key in ("rtt_min", "drop_min"):
            ok = float(cell["rtt_ms" if key == "rtt_min" else "drop"]) >= float(wanted) - _TOL
        elif key in ("rtt_max", "drop_max"):
            ok = float(cell["rtt_ms" if key == "rtt_max" else "drop"]) <= float(wanted) + _TOL
        elif key == "same_variant":
            ok = (cell["variant"] == cell["second"]) == bool(wanted)
        else:
            raise ClaimError(f"unknown selection key {key!r}; allowed values: {', '.join(SELECTION_KEYS)}")
        if not ok:
            return False
    return True


def needed(cell: Mapping, claims: list[dict]) -> list[str]:
    """The ids of the claims that read this cell."""
    return [c["id"] for c in claims if any(matches(cell, sel) for sel in selections(c))]


# Checks whose verdict a cell without data can overturn either way: each side is a mean
# over its cells. Every other check quantifies over its cells (every cell, every group, the
# highest of all), so a cell without data -- failed, flagged, or planned and not run -- can
# only overturn a verdict that it holds: one that does not hold on the cells present stands.
EITHER_WAY = ("greater", "close")


def only_failure_decidable(claim: dict) -> bool:
    """Whether, with some of its cells left without data, the claim can still be decided
    -- as not holding (EITHER_WAY)."""
    return claim["check"]["type"] not in EITHER_WAY


# A within check (every mean within `tolerance` of the top one) puts two cells' intervals
# on the gap it measures, the widest apart: with runs known to a tenth of the tolerance it
# is decided for any gap up to 80 % of it. On runs stopped at +-5 % a 2.1 % gap at drop 0
# stayed open against a 5 % tolerance, and there repetitions replay (2026-12-06); with a
# quarter (gaps to half of it), 0.2 ms stayed open on a 4.1 % gap (BIC +-0.4 %, Reno
# +-1.2 %). Reno, the slowest to settle there, needs about a minute of virtual time for it.
WITHIN_PRECISION_SHARE = 0.1


def precision_needed(cell: Mapping, claims: list[dict]) -> float | None:
    """The relative half-width the claims reading this cell ask of each of its runs, where
    one asks for a precision of its own (a within check: a share of its tolerance), the
    smallest; None where none does (the campaign's stopping rule decides)."""
    asked = [float(c["check"]["tolerance"]) * WITHIN_PRECISION_SHARE for c in claims
             if c["check"].get("type") == "within" and any(matches(cell, sel) for sel in selections(c))]
    return min(asked) if asked else None


# A ranking's rivals the model puts within this share of the strongest one run with it: the
# model's means are a model's (BIC at 12.2 ms, 1e-5 ran 27 % above its model), so a rival
# it calls close may be the real one; a wrong pick costs a round, never the verdict.
RIVAL_TIE = 0.10


def contenders(claim: dict, cells: list[Mapping], mean) -> list[Mapping] | None:
    """The cells a best/worst finding needs first, of the campaign's ``cells`` it reads: in
    each group it ranks (its check's `per` keys), the expected variants' cells and the
    strongest rival's by ``mean(cell)`` (the response model's mean, or None where it has
    none), with every rival within RIVAL_TIE of that one. If a rival beats the expected
    variants, no other cell can change that ("does not hold"); if they beat it, the other
    cells run in the next round (tcpeval next-runs asks for cells a finding lacks). None for
    a finding that is no ranking of means, or a group the model cannot rank: all its cells."""
    check = claim["check"]
    if check.get("type") not in ("best", "worst") or not str(check.get("metric", "")).startswith("mean"):
        return None
    expect = check["expect"] if isinstance(check["expect"], list) else [check["expect"]]
    read = [cell for cell in cells if any(matches(cell, sel) for sel in selections(claim))]
    groups: dict[tuple, list[Mapping]] = {}
    for cell in read:
        groups.setdefault(tuple(cell[k] for k in check.get("per", [])), []).append(cell)
    first = []
    for group in groups.values():
        rivals = [(mean(cell), cell) for cell in group if cell["variant"] not in expect]
        if any(m is None for m, _ in rivals):
            return None
        first += [cell for cell in group if cell["variant"] in expect]
        if not rivals:
            continue
        sign = 1 if check["type"] == "best" else -1
        top = max(sign * m for m, _ in rivals)
        first += [cell for m, cell in rivals if sign * m >= top - RIVAL_TIE * abs(top)]
    return first

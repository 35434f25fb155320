"""The experiment design as data: load, validate, and expand a campaign into run conditions.

design (config/design.yaml) -> campaign (a named scale) -> runs (Condition) -> paths
(tcpeval.paths). Every run the project performs is derived here; nothing else loops over
the paper's numbers.
"""
from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import string
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml

from tcpeval import dilation as dilation_mod
from tcpeval import findings, mathis, paths, quantity, response
from tcpeval.condition import (
    BACKENDS,
    UDP,
    Condition,
    Flow,
    flow_rule_problems,
)
from tcpeval.errors import SpecError
from tcpeval.precision import StopRule
from tcpeval.provenance import REPO_ROOT

# Grid keys that set the condition rather than fill a flow template.
# The bottleneck's settings a grid may vary beside rtt_ms and drop (each names a path
# segment when it does, tcpeval.paths.FACTOR_LABELS or <key><value>).
LINK_KEYS = ("rate_bps", "buffer_bytes", "ecn_threshold_bytes", "ecn_queues")
CONDITION_KEYS = ("rtt_ms", "drop", *LINK_KEYS)
# Flow-template fields that take a number (or a "{grid-key}" placeholder for one).
FLOW_NUMBERS = ("start_s", "start_fraction", "stop_s", "stop_fraction", "rate_bps", "count",
                "request_bytes", "response_bytes", "rpcs_per_s")
RPC_FIELDS = ("request_bytes", "response_bytes", "rpcs_per_s")
RUN_SETTINGS = ("duration_s", "interval_s", "repetitions", "rate_bps", "buffer_bytes", "ecn_threshold_bytes",
                "ecn_queues", "sock_ops",
                "background_loss", "hz", "impl", "dilation", "stop")

DEFAULT_DESIGN = REPO_ROOT / "config" / "design.yaml"
DESIGN_SCHEMA = REPO_ROOT / "workflow" / "schemas" / "design.schema.yaml"


def _int_or_none(value) -> int | None:
    return None if value is None else int(value)


def background_loss_at(value, rtt_ms: float, where: str) -> float:
    """A run's background loss: one probability for every path, or one per RTT (the
    paper's ring lost packets only on the paths that cross it, 6.2 ms and longer)."""
    if not isinstance(value, dict):
        return float(value)
    for rtt, p in value.items():
        if float(rtt) == rtt_ms:
            return float(p)
    raise SpecError(f"{where}/background_loss: no probability for rtt_ms {rtt_ms:g}; it gives one for "
                    f"{', '.join(f'{float(r):g}' for r in value)} ms")


def _dilation_setting(value) -> str | int:
    try:
        return dilation_mod.parse(value)
    except dilation_mod.DilationError as err:
        raise SpecError(str(err)) from None


# ---------------------------------------------------------------------------- loading

@lru_cache(maxsize=1)
def _design_schema() -> dict:
    return yaml.safe_load(DESIGN_SCHEMA.read_text())


def _describe_error(error: jsonschema.ValidationError) -> str | None:
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        allowed = _allowed_keys(error.schema)
        unknown = [k for k in error.instance if allowed and k not in allowed]
        hints = []
        for key in unknown:
            near = difflib.get_close_matches(key, allowed, n=1)
            hints.append(f"unknown key '{key}'" + (f" (did you mean '{near[0]}'?)" if near else ""))
        if hints:
            return f"{where}: {'; '.join(hints)}; allowed keys: {', '.join(sorted(allowed))}"
        if allowed:
            return None  # known keys that failed their own checks: those errors say why
    if error.validator == "enum":
        return f"{where}: {error.instance!r} is not allowed; allowed values: {', '.join(map(str, error.validator_value))}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        bound = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[error.validator]
        return f"{where}: {error.instance!r} is out of range; must be {bound} {error.validator_value}"
    return f"{where}: {error.message}"


def _allowed_keys(schema: dict) -> list[str]:
    keys = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        ref = part.get("$ref")
        if ref:
            part = _design_schema()["$defs"][ref.rsplit("/", 1)[-1]]
        keys |= set(part.get("properties", {}))
    return sorted(keys)


def validate_design(design: Any, source: str = "design") -> None:
    """Schema check, then the cross-field rules; SpecError lists every problem."""
    validator = jsonschema.Draft202012Validator(_design_schema())
    errors = sorted(validator.iter_errors(design), key=lambda e: list(e.absolute_path))
    if errors:
        # The most specific error per location reads best.
        seen, problems = set(), []
        for err in errors:
            best = jsonschema.exceptions.best_match([err])
            text = _describe_error(best)
            if text and text not in seen:
                seen.add(text)
                problems.append(text)
        raise SpecError(f"{source} is invalid:\n  " + "\n  ".join(problems))
    problems = _cross_field_problems(design)
    if problems:
        raise SpecError(f"{source} is invalid:\n  " + "\n  ".join(problems))


def _placeholders(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def _variant_problem(where: str, value: str, variants: list[str] | None) -> str | None:
    """A literal variant name the design does not declare (designs that list `variants`),
    or one that is no algorithm name at all; what a backend offers is checked later
    (tcpeval.backends.algorithms)."""
    if variants is not None and value not in variants:
        return f"{where}: unknown variant {value!r}; allowed values: {', '.join(variants)}"
    named = flow_rule_problems(variant=value)
    return f"{where}: {named[0][1]}" if named else None


def _claims_problems(campaign: str, path: str, criteria: dict) -> list[str]:
    where = f"campaigns/{campaign}/cells_from_claims"
    try:
        claims = _load_claims(str(REPO_ROOT / path))
    except (OSError, findings.ClaimError, yaml.YAMLError) as err:
        return [f"{where}: {err}"]
    named = {sel.get("criterion") for c in claims for sel in findings.selections(c)} - {None}
    return [f"{where}: a finding reads criterion {name!r}, which the design lacks; allowed values: "
            f"{', '.join(criteria)}" for name in sorted(named - set(criteria))]


def _numeric_keys(grid: dict) -> list[str]:
    return [k for k, vs in grid.items() if k not in CONDITION_KEYS
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs)]


def _cross_field_problems(design: dict) -> list[str]:
    problems = []
    criteria = design["criteria"]
    variants = design.get("variants")
    for name, crit in criteria.items():
        grid = crit["grid"]
        numeric = _numeric_keys(grid)
        for i, flow in enumerate(crit["flows"]):
            where = f"criteria/{name}/flows/{i}"
            udp = flow.get("protocol") == "udp"
            if "variant" not in flow and not udp:
                problems.append(f"{where}: a {flow.get('protocol', 'tcp').upper()} flow needs a variant "
                                f"(only a UDP flow has none)")
            if "variant" in flow:
                for key in _placeholders(flow["variant"]):
                    if key not in grid:
                        problems.append(f"{where}/variant: placeholder {{{key}}} names no grid key; "
                                        f"grid keys: {', '.join(grid)}")
                if not _placeholders(flow["variant"]):
                    problem = _variant_problem(f"{where}/variant", flow["variant"], variants)
                    if problem:
                        problems.append(problem)
            for key in FLOW_NUMBERS:
                value = flow.get(key)
                if isinstance(value, str):
                    ref = _placeholders(value)[0]
                    if ref not in numeric:
                        problems.append(f"{where}/{key}: placeholder {{{ref}}} names no numeric grid key; "
                                        f"numeric grid keys: {', '.join(numeric) or 'none'}")
            for a, b in (("start_s", "start_fraction"), ("stop_s", "stop_fraction")):
                if a in flow and b in flow:
                    problems.append(f"{where}: give {a} or {b}, not both")
            if udp and ("variant" in flow or "impl" in flow):
                problems.append(f"{where}: a UDP flow has no congestion control; drop variant and impl")
            # the rules of a flow (tcpeval.condition) on the template's literal values
            rules = [("start_s", "stop_s", " s"), ("start_fraction", "stop_fraction", "")]
            for start_key, stop_key, unit in rules:
                start, stop = flow.get(start_key, 0), flow.get(stop_key)
                known = [v if isinstance(v, (int, float)) else None for v in (start, stop)]
                first = start_key == "start_s"  # the other rules once
                problems += [f"{where}/{field}: {why}" for field, why in flow_rule_problems(
                    protocol=flow.get("protocol", "tcp"),
                    rate_given=("rate_bps" in flow) if first else None,
                    impl=flow.get("impl", "port") if first else None,
                    object_given=("object" in flow) if first else None,
                    start=known[0], stop=known[1], fields=(start_key, stop_key), unit=unit,
                    rpc=({k: flow[k] if isinstance(flow[k], (int, float)) else None
                          for k in RPC_FIELDS if k in flow} if first else None),
                    ecn_given=("ecn" in flow) if first else None)]
        # Grid keys other than the condition's own and the numeric ones name variants (or templates of them).
        for key, values in grid.items():
            if key in CONDITION_KEYS or key in numeric:
                continue
            for value in values:
                if not isinstance(value, str):
                    problems.append(f"criteria/{name}/grid/{key}: mixes numbers and names ({values})")
                    break
                missing = [p for p in _placeholders(value) if p not in grid]
                if missing:
                    problems.append(f"criteria/{name}/grid/{key}: placeholder {{{missing[0]}}} names no grid key")
                elif not _placeholders(value):
                    problem = _variant_problem(f"criteria/{name}/grid/{key}", value, variants)
                    if problem:
                        problems.append(problem)
    for name, crit in criteria.items():
        for cname in crit.get("campaigns", []):
            if cname not in design["campaigns"]:
                problems.append(f"criteria/{name}/campaigns: unknown campaign {cname!r}; allowed values: "
                                f"{', '.join(design['campaigns'])}")
        if "seed_from" in crit and crit["seed_from"] not in criteria:
            problems.append(f"criteria/{name}/seed_from: unknown criterion {crit['seed_from']!r}; "
                            f"allowed values: {', '.join(criteria)}")
    layers = [("defaults", design["defaults"])] + [(f"criteria/{n}", c) for n, c in criteria.items()]
    layers += [(f"campaigns/{n}", c) for n, c in design["campaigns"].items()]
    layers += [(f"campaigns/{n}/criteria/{cn}", o) for n, c in design["campaigns"].items()
               for cn, o in c.get("criteria", {}).items()]
    for where, layer in layers:
        if all(layer.get(key) for key in LENGTH_RULES):
            problems.append(f"{where}: duration_for_loss_events and duration_for_cycles are two length rules; "
                            "give one")
        rule = layer.get("duration_for_loss_events")
        crit = criteria.get(where.rsplit("/", 1)[-1]) if where != "defaults" else None
        if rule and crit and 0 in crit["grid"]["drop"] and not rule.get("min_s"):
            problems.append(f"{where}/duration_for_loss_events: the grid has drop 0, where no loss event "
                            "occurs; give such a criterion a duration_s or the rule a min_s")
        if rule and rule.get("link_bound") == "max_s" and not (rule.get("max_s") and layer.get("stop")):
            problems.append(f"{where}/duration_for_loss_events/link_bound: max_s needs the rule's max_s and a "
                            f"stopping rule (stop) beside it; without one a link-bound run would last max_s")
        if layer.get("stop"):
            try:
                StopRule.from_design(layer["stop"], f"{where}/stop")
            except SpecError as err:
                problems.append(str(err))
    for cname, campaign in design["campaigns"].items():
        if "cells_from_claims" in campaign:
            problems += _claims_problems(cname, campaign["cells_from_claims"], criteria)
        elif "initial_repetitions" in campaign:
            problems.append(f"campaigns/{cname}/initial_repetitions: only a campaign of the findings' cells "
                            "(cells_from_claims) adds repetitions where its findings are undecided")
        if "first_round" in campaign and "initial_repetitions" not in campaign:
            problems.append(f"campaigns/{cname}/first_round: only a sequential campaign (initial_repetitions) "
                            "defers cells to later rounds")
        if "slice_of" in campaign:
            problems += _slice_problems(design, cname, campaign["slice_of"])
        for crit in campaign.get("only", []):
            if crit not in criteria:
                problems.append(f"campaigns/{cname}/only: unknown criterion {crit!r}; allowed values: {', '.join(criteria)}")
        for crit, override in campaign.get("criteria", {}).items():
            if crit not in criteria:
                problems.append(f"campaigns/{cname}/criteria: unknown criterion {crit!r}; allowed values: {', '.join(criteria)}")
                continue
            grid = criteria[crit]["grid"]
            for key, chosen in override.get("select", {}).items():
                if key not in grid:
                    problems.append(f"campaigns/{cname}/criteria/{crit}/select: unknown grid key {key!r}; allowed values: {', '.join(grid)}")
                    continue
                extra = [v for v in chosen if v not in grid[key]]
                if extra:
                    problems.append(f"campaigns/{cname}/criteria/{crit}/select/{key}: {extra} not in the grid; allowed values: {grid[key]}")
    return problems


# Fields that hold a rate or a size, and how to read one written with a unit.
_QUANTITIES = {"rate_bps": quantity.rate, "buffer_bytes": quantity.size, "link_bps": quantity.rate,
               "request_bytes": quantity.size, "response_bytes": quantity.size,
               "ecn_threshold_bytes": quantity.size}


def normalise_numbers(design: Any, source: str = "design") -> Any:
    """Rates and sizes written with units (10G, 9.5gbit, 64KiB) as numbers, in place; a
    value that is neither a number nor an accepted form raises SpecError naming its field.
    Anything else that is wrong (a missing field, a null in a list) is the schema's to name."""
    if not isinstance(design, dict):
        return design
    problems = []

    def fix(container, index, key: str, where: str) -> None:
        value = container[index]
        if key not in _QUANTITIES or value is None or (isinstance(value, str) and _placeholders(value)):
            return  # ecn_queues is a count, the schema's to check
        try:
            container[index] = _QUANTITIES[key](value, where)
        except quantity.QuantityError as err:
            problems.append(str(err))

    def fix_fields(layer, where: str, keys=LINK_KEYS) -> None:
        for key in keys:
            if isinstance(layer, dict) and key in layer:
                fix(layer, key, key, f"{where}/{key}")

    def fix_lists(mapping, where: str) -> None:
        """A grid's or a selection's lists of rates and sizes."""
        for key in LINK_KEYS:
            values = mapping.get(key) if isinstance(mapping, dict) else None
            for i in range(len(values) if isinstance(values, list) else 0):
                fix(values, i, key, f"{where}/{key}/{i}")

    fix_fields(design.get("defaults"), "defaults")
    for name, crit in (design.get("criteria") or {}).items():
        if not isinstance(crit, dict):
            continue
        fix_fields(crit, f"criteria/{name}")
        fix_lists(crit.get("grid"), f"criteria/{name}/grid")
        for i, flow in enumerate(crit.get("flows") or []):
            fix_fields(flow, f"criteria/{name}/flows/{i}", keys=("rate_bps", "request_bytes", "response_bytes"))
        fix_fields(crit.get("duration_for_loss_events"), f"criteria/{name}/duration_for_loss_events",
                   keys=("link_bps",))
    for name, camp in (design.get("campaigns") or {}).items():
        fix_fields(camp, f"campaigns/{name}")
        overrides = camp.get("criteria") if isinstance(camp, dict) else None
        for crit, override in (overrides or {}).items():
            fix_lists((override or {}).get("select"), f"campaigns/{name}/criteria/{crit}/select")
    if problems:
        raise SpecError(f"{source} is invalid:\n  " + "\n  ".join(problems))
    return design


def load_design(path: str | Path | None = None) -> dict:
    path = Path(path) if path else DEFAULT_DESIGN
    try:
        design = quantity.yaml_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"design file {path} does not exist") from None
    except yaml.YAMLError as err:
        raise SpecError(f"design file {path} is not valid YAML: {err}") from None
    normalise_numbers(design, source=str(path))
    validate_design(design, source=str(path))
    return design


# ---------------------------------------------------------------------------- expansion

def campaign_names(design: dict) -> list[str]:
    return list(design["campaigns"])


def _campaign(design: dict, name: str) -> dict:
    if name not in design["campaigns"]:
        near = difflib.get_close_matches(name, design["campaigns"], n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise SpecError(f"campaign: unknown campaign {name!r}{hint}; allowed values: {', '.join(design['campaigns'])}")
    return design["campaigns"][name]


def criterion_settings(design: dict, campaign: str, criterion: str) -> dict:
    """Run settings for one criterion in one campaign: defaults < criterion < campaign <
    the campaign's per-criterion override."""
    camp = _campaign(design, campaign)
    crit = design["criteria"][criterion]
    override = camp.get("criteria", {}).get(criterion, {})
    settings = {k: None for k in RUN_SETTINGS}
    settings.update({"interval_s": 0.1, "background_loss": 0.0, "hz": 250, "impl": "port",
                     "dilation": "auto"})
    for layer in (design["defaults"], crit, camp, override):
        settings.update({k: layer[k] for k in RUN_SETTINGS if k in layer})
    return settings


def criteria_of(design: dict, campaign: str) -> list[str]:
    """The criteria a campaign runs: its `only` list; else, for a campaign of the findings'
    cells, the criteria the findings read; else every criterion that does not name its
    own campaigns (`campaigns:`), plus those that name this one."""
    camp = _campaign(design, campaign)
    if "only" in camp:
        return list(camp["only"])
    if "cells_from_claims" in camp:
        named = {sel.get("criterion") for c in claims_of(design, campaign) for sel in findings.selections(c)}
        return [name for name in design["criteria"] if name in named or None in named]
    return [name for name, crit in design["criteria"].items()
            if "campaigns" not in crit or campaign in crit["campaigns"]]


def initial_repetitions(design: dict, campaign: str) -> int | None:
    """A sequential campaign's first repetitions of every cell (its `initial_repetitions`;
    None: every repetition of every cell is planned). The rest run where `tcpeval
    next-runs` asks for them."""
    value = _campaign(design, campaign).get("initial_repetitions")
    return int(value) if value is not None else None


def on_demand(design: dict, campaign: str, cond: Condition) -> bool:
    """Whether a run of the campaign runs only if an undecided finding asks for it: a
    repetition beyond a sequential campaign's initial ones, or any run of a cell its first
    round defers (deferred_cells)."""
    first = initial_repetitions(design, campaign)
    if first is None:
        return False
    return cond.rep > first or cell_key(cell_of(cond)) in deferred_cells(design, campaign, cond.backend)


_deferred_memo: dict[tuple, frozenset] = {}


def deferred_cells(design: dict, campaign: str, backend: str = "emulated") -> frozenset:
    """The cells (cell_key) a sequential campaign's first round leaves to later rounds: with
    `first_round: contenders`, those that only best/worst findings read and that are not
    among their contenders -- the expected variants and the strongest rivals by the response
    model (tcpeval.response) at the cell's condition (findings.contenders). They run when
    a finding still lacks them (tcpeval next-runs); none with `first_round: all`."""
    if _campaign(design, campaign).get("first_round", "all") != "contenders":
        return frozenset()
    key = (campaign, backend, repr(design))
    if key not in _deferred_memo:
        _deferred_memo[key] = _deferred(design, campaign, backend)
    return _deferred_memo[key]


def _deferred(design: dict, campaign: str, backend: str) -> frozenset:
    runs = {cell_key(cell_of(run)): run for run in expand(design, campaign, backend)}
    cells = {key: cell_of(run) for key, run in runs.items()}

    def mean(cell: dict) -> float | None:
        run = runs[cell_key(cell)]
        if cell["second"] or not run.rate_bps:
            return None
        try:
            return response.response(cell["variant"], cell["rtt_ms"], cell["drop"], run.rate_bps).throughput_bps
        except ValueError:  # no model of this variant
            return None

    read, first = set(), set()
    for claim in claims_of(design, campaign):
        mine = [cell for cell in cells.values() if findings.needed(cell, [claim])]
        read |= {cell_key(cell) for cell in mine}
        ranked = findings.contenders(claim, mine, mean)
        first |= {cell_key(cell) for cell in (mine if ranked is None else ranked)}
    return frozenset(read - first)


def _slice_problems(design: dict, name: str, parent: str) -> list[str]:
    where = f"campaigns/{name}/slice_of"
    if parent not in design["campaigns"] or parent == name:
        return [f"{where}: {parent!r} is not another campaign; allowed values: "
                + ", ".join(c for c in design["campaigns"] if c != name)]
    if "cells_from_claims" not in design["campaigns"][parent]:
        return [f"{where}: {parent!r} is not a campaign of the findings' cells (cells_from_claims): "
                "only their verdicts are pooled over slices"]
    return []


def slice_of(design: dict, campaign: str) -> str | None:
    """The findings campaign a campaign is a slice of (its `slice_of`): some of its cells,
    run with its settings, whose runs its verdicts pool with the other slices'."""
    return _campaign(design, campaign).get("slice_of")


def slices(design: dict, parent: str) -> list[str]:
    """The campaigns that are slices of ``parent``, in the design's order."""
    return [name for name, camp in design["campaigns"].items() if camp.get("slice_of") == parent]


def claims_of(design: dict, campaign: str) -> list[dict]:
    """The findings whose cells a campaign runs (its `cells_from_claims`), else none."""
    path = _campaign(design, campaign).get("cells_from_claims")
    return _load_claims(str(REPO_ROOT / path)) if path else []


@lru_cache(maxsize=8)
def _load_claims(path: str) -> list[dict]:
    return findings.load_claims(path)


# A criterion's run-length rules: so many expected loss events (single flows), or so many
# cycles of a Reno pair's sawtooth (two-flow criteria, whose index, share or sum is
# averaged over the run's horizon: a run shorter than one cycle reads a phase of it).
LENGTH_RULES = ("duration_for_loss_events", "duration_for_cycles")


def length_rule(design: dict, campaign: str, criterion: str) -> dict | None:
    """The run-length rule of a criterion in a campaign (the campaign's override, else the
    criterion's own; LENGTH_RULES), or None: the settings' duration_s."""
    override = _campaign(design, campaign).get("criteria", {}).get(criterion, {})
    for layer in (override, design["criteria"][criterion]):
        for key in LENGTH_RULES:
            if layer.get(key):
                return layer[key]
    return None


def point_duration(rule: dict | None, settings: dict, rtt_ms: float, drop: float) -> float:
    """A grid point's run length: the loss-event rule where there is one (enough traffic
    for N expected loss events, tcpeval.mathis, within [min_s, max_s]; where the link, not
    loss, limits the flow, min_s, or max_s with link_bound: max_s -- a precision-driven
    run's longest), else the settings' duration."""
    if not rule:
        return float(settings["duration_s"])
    needed = needed_duration(rule, rtt_ms, drop)
    if needed is None:
        return float(rule[rule.get("link_bound", "min_s")])
    return min(needed, float(rule.get("max_s", math.inf)))


def needed_duration(rule: dict | None, rtt_ms: float, drop: float) -> float | None:
    """What a point's length rule asks for before its max_s caps it: None without a rule,
    and where a loss-event rule finds no loss, or too little to matter -- the link, not
    loss, sets the rate there, and the run lasts the rule's min_s (the run-length model:
    0.2 ms up to 1e-6 reaches +-2 % within 30 s); a cycle rule's cycles at the point's RTT."""
    if rule and "cycles" in rule:  # duration_for_cycles: the pair's sawtooth, whatever the loss
        return mathis.duration_for_cycles(rule["cycles"], rtt_ms, rule["link_bps"], min_s=rule.get("min_s", 0.0))
    if not rule or drop == 0 or mathis.throughput_bps(rtt_ms, drop) >= rule["link_bps"]:
        return None
    return mathis.duration_for_loss_events(rule["events"], rtt_ms, drop, rule["link_bps"],
                                           min_s=rule.get("min_s", 0.0))


def beyond_budget(rule: dict | None, rtt_ms: float, drop: float) -> bool:
    """Whether the rule leaves this point out (over_max: skip) because it needs more
    than max_s: planned, not run (not_run lists them)."""
    needed = needed_duration(rule, rtt_ms, drop)
    return bool(rule and rule.get("over_max") == "skip" and needed is not None
                and needed > float(rule.get("max_s", math.inf)))


def not_run(design: dict, campaign: str) -> list[dict]:
    """The cells a campaign plans but does not run: its length rule needs more than its
    max_s there (over_max: skip). Each: criterion, variant, second, rtt_ms, drop,
    needed_s, max_s."""
    out = []
    camp, claims = _campaign(design, campaign), claims_of(design, campaign)
    for name in criteria_of(design, campaign):
        crit, rule = design["criteria"][name], length_rule(design, campaign, name)
        settings = criterion_settings(design, campaign, name)
        select = camp.get("criteria", {}).get(name, {}).get("select", {})
        for point in _grid_points(crit, select):
            rtt, drop = float(point["rtt_ms"]), float(point["drop"])
            if not beyond_budget(rule, rtt, drop):
                continue
            cell = _cell(name, _flows_of(crit, name, point, settings, float(rule["max_s"])), point)
            if claims and not findings.needed(cell, claims):
                continue
            out.append({**cell, "needed_s": needed_duration(rule, rtt, drop), "max_s": float(rule["max_s"])})
    return out


def cell_key(cell: dict) -> tuple:
    """A cell (_cell, not_run) as a hashable key: criterion, variant, second, RTT, drop."""
    return (cell["criterion"], cell["variant"], cell["second"], round(cell["rtt_ms"], 6), cell["drop"])


def family_cells(design: dict, campaign: str, backend: str = "emulated") -> tuple[list[Condition], list[dict]]:
    """A findings campaign and its slices as one matrix: the runs of the slices in cells
    that the campaign itself leaves out (a slice whose rule caps, rather than skips, the
    cells beyond max_s: findings-low-loss), and the cells that neither it nor any slice
    runs (its not_run less those)."""
    own = {cell_key(cell_of(run)) for run in expand(design, campaign, backend)}
    extra = [run for name in slices(design, campaign) for run in expand(design, name, backend)
             if cell_key(cell_of(run)) not in own]
    ran = {cell_key(cell_of(run)) for run in extra}
    return extra, [cell for cell in not_run(design, campaign) if cell_key(cell) not in ran]


def _render(template: str, values: dict[str, str]) -> str:
    # Values may themselves be templates ("second: '{variant}'"): render to a fixed point.
    for _ in range(4):
        if not _placeholders(template):
            return template
        template = template.format_map(values)
    raise SpecError(f"template {template!r} does not resolve (circular placeholders?)")


def _grid_points(crit: dict, select: dict) -> Iterable[dict]:
    keys = list(crit["grid"])
    lists = [select.get(k, crit["grid"][k]) for k in keys]
    for combo in itertools.product(*lists):
        yield dict(zip(keys, combo))


def _seed_for(campaign: str, criterion: str, variants: tuple[str, ...], rtt_ms: float,
              drop: float, rep: int, extra: str = "") -> int:
    # Backend-independent, so the emulated and testbed runs of one condition share a drop
    # sequence. `extra` (design and factor segments) is empty for the paper's runs.
    key = f"{campaign}/{criterion}/{'+'.join(variants)}/{rtt_ms!r}/{drop!r}/{rep}{extra}"
    return zlib.crc32(key.encode()) or 1


@lru_cache(maxsize=1)
def paper_design_name() -> str:
    return quantity.yaml_load(DEFAULT_DESIGN.read_text())["name"]


def design_label(design: dict) -> str | None:
    """The design's path segment: None for the paper's design (its paths predate designs
    of their own), else its name."""
    return None if design["name"] == paper_design_name() else design["name"]


def varying_factors(crit: dict) -> list[str]:
    """Grid keys that vary within the criterion and name a path segment: every numeric
    key (rate_bps, buffer_bytes, and keys the flows' numbers refer to) with more than one
    value. Variant-valued keys are named by the flows segment; rtt_ms and drop always are."""
    grid = crit["grid"]
    keys = [k for k in LINK_KEYS if k in grid] + _numeric_keys(grid)
    return [k for k in grid if k in keys and len(grid[k]) > 1]


def _number(tmpl: dict, key: str, point: dict):
    """A flow template's number, or the grid value its "{key}" placeholder names."""
    value = tmpl.get(key)
    if isinstance(value, str):
        value = point[_placeholders(value)[0]]
    return value


def _flows_of(crit: dict, name: str, point: dict, settings: dict, duration: float) -> list[Flow]:
    labels = {k: str(v) for k, v in point.items() if k not in CONDITION_KEYS}
    flows = []
    for i, tmpl in enumerate(crit["flows"]):
        where = f"criteria/{name}/flows/{i} (grid point {point})"
        num = {key: _number(tmpl, key, point) for key in FLOW_NUMBERS}
        start = num["start_fraction"] * duration if num["start_fraction"] is not None else float(num["start_s"] or 0.0)
        stop = (num["stop_fraction"] * duration if num["stop_fraction"] is not None
                else (float(num["stop_s"]) if num["stop_s"] is not None else None))
        udp = tmpl.get("protocol") == "udp"
        count = int(num["count"] or 1)
        flow = Flow(variant=UDP if udp else _render(tmpl["variant"], labels),
                    impl=tmpl.get("impl", settings["impl"]) if not udp else "native",
                    start_s=float(start), stop_s=None if stop == duration else stop,  # None: to the end
                    protocol=tmpl.get("protocol", "tcp"),
                    rate_bps=float(num["rate_bps"]) if num["rate_bps"] is not None else None,
                    object=tmpl.get("object"),
                    request_bytes=int(num["request_bytes"]) if num["request_bytes"] is not None else None,
                    response_bytes=int(num["response_bytes"]) if num["response_bytes"] is not None else None,
                    rpcs_per_s=float(num["rpcs_per_s"]) if num["rpcs_per_s"] is not None else None,
                    ecn=tmpl.get("ecn"))
        problems = flow.problems(duration)
        if problems:
            raise SpecError(f"{where}: " + "; ".join(problems))
        flows.extend([flow] * count)
    return flows


def expand(design: dict, campaign: str, backend: str = "emulated",
           criteria: Iterable[str] | None = None) -> list[Condition]:
    """All runs of a campaign, in design order, each once."""
    if backend not in BACKENDS:
        raise SpecError(f"backend: unknown backend {backend!r}; allowed values: {', '.join(BACKENDS)}")
    camp = _campaign(design, campaign)
    wanted = list(criteria) if criteria else criteria_of(design, campaign)
    for name in wanted:
        if name not in design["criteria"]:
            raise SpecError(f"criterion: unknown criterion {name!r}; allowed values: {', '.join(design['criteria'])}")
    label = design_label(design)
    declared = design.get("variants")
    runs: list[Condition] = []
    seen: dict[str, tuple] = {}
    for name in wanted:
        crit = design["criteria"][name]
        settings = criterion_settings(design, campaign, name)
        select = camp.get("criteria", {}).get(name, {}).get("select", {})
        rule = length_rule(design, campaign, name)
        claims = claims_of(design, campaign)
        factor_keys = varying_factors(crit)
        stop = StopRule.from_design(settings["stop"], f"campaigns/{campaign}/criteria/{name}/stop") \
            if settings["stop"] else None
        for point in _grid_points(crit, select):
            if beyond_budget(rule, float(point["rtt_ms"]), float(point["drop"])):
                continue  # planned, not run (not_run)
            # a precision-driven run lasts at most its rule's max_s, or what the point's
            # loss-event rule gives it where there is one
            duration = point_duration(rule, settings, float(point["rtt_ms"]), float(point["drop"]))
            if stop and not rule:
                duration = stop.max_s
            flows = _flows_of(crit, name, point, settings, duration)
            cell = _cell(name, flows, point)
            if claims and not findings.needed(cell, claims):
                continue  # a cell no finding reads
            point_stop = None
            if stop:
                # no loss events where nothing is dropped: the floor is for points loss
                # limits (where the loss-event rule says the link does -- 0.2 ms up to 1e-5
                # -- a drop every few seconds leaves the flow at the link: 1e-7 ran its 30 s
                # with none); a finding that needs its cells' means more precise than the
                # rule does asks so
                loss_limited = (needed_duration(rule, float(point["rtt_ms"]), float(point["drop"])) is not None
                                if rule else bool(point["drop"]))
                asked = findings.precision_needed(cell, claims)
                tighter = asked is not None and asked < stop.target("mean")
                point_stop = dataclasses.replace(stop, max_s=duration,
                                                 min_s=min(stop.min_s, duration) if stop.min_s else None,
                                                 min_loss_events=stop.min_loss_events if loss_limited else 0,
                                                 mean_half_width=asked if tighter else stop.mean_half_width)
            for flow in flows:
                if declared is not None and flow.protocol != "udp" and flow.variant not in declared:
                    raise SpecError(f"criteria/{name}/flows: variant {flow.variant!r} (grid point {point}) "
                                    f"is unknown; allowed values: {', '.join(declared)}")
            factors = tuple((k, float(point[k])) for k in factor_keys)
            extra = "".join(f"/{k}={v!r}" for k, v in factors) + (f"@{label}" if label else "")
            for rep in range(1, settings["repetitions"] + 1):
                variants = tuple(f.label for f in flows)
                cond = Condition(
                    backend=backend, campaign=campaign, criterion=name, flows=tuple(flows),
                    rtt_ms=float(point["rtt_ms"]), drop=float(point["drop"]), rep=rep,
                    duration_s=duration, interval_s=float(settings["interval_s"]),
                    rate_bps=point.get("rate_bps", settings["rate_bps"]),
                    buffer_bytes=point.get("buffer_bytes", settings["buffer_bytes"]),
                    ecn_threshold_bytes=point.get("ecn_threshold_bytes", settings["ecn_threshold_bytes"]),
                    ecn_queues=_int_or_none(point.get("ecn_queues", settings["ecn_queues"])),
                    sock_ops=settings["sock_ops"],
                    background_loss=background_loss_at(settings["background_loss"], float(point["rtt_ms"]),
                                                       f"campaigns/{campaign}/criteria/{name}"),
                    hz=int(settings["hz"]),
                    dilation=_dilation_setting(settings["dilation"]), stop=point_stop,
                    seed=_seed_for(campaign, crit.get("seed_from", name), variants, float(point["rtt_ms"]),
                                   float(point["drop"]), rep, extra),
                    design=label, factors=factors,
                )
                if rep == 1 and (problems := cond.problems()):
                    raise SpecError(f"criteria/{name} (grid point {point}): " + "; ".join(problems))
                path = paths.run_dir(cond)
                identity = (cond.flows, cond.rate_bps, cond.buffer_bytes, cond.ecn_threshold_bytes, cond.ecn_queues,
                            cond.sock_ops)
                if path in seen:
                    if seen[path] == identity:
                        continue  # the same condition reached twice (e.g. reno then reno)
                    raise SpecError(f"criteria/{name}: two different conditions share the run path {path}; "
                                    "a setting the path does not name differs (a flow's start or stop "
                                    "from a grid key with one value?): split it into criteria of their own")
                seen[path] = identity
                runs.append(cond)
    return runs


def cell_of(cond: Condition) -> dict:
    """The cell a run belongs to, as the findings select it (tcpeval.findings)."""
    return _cell(cond.criterion, list(cond.flows), {"rtt_ms": cond.rtt_ms, "drop": cond.drop})


def _cell(criterion: str, flows: list[Flow], point: dict) -> dict:
    """A grid point as the findings select it (tcpeval.findings)."""
    return {"criterion": criterion, "variant": flows[0].variant,
            "second": flows[1].variant if len(flows) > 1 else "",
            "rtt_ms": float(point["rtt_ms"]), "drop": float(point["drop"])}


def counts_by_criterion(runs: Iterable[Condition]) -> dict[str, int]:
    out: dict[str, int] = {}
    for run in runs:
        out[run.criterion] = out.get(run.criterion, 0) + 1
    return out


def adhoc_condition(variants: list[str], rtt_ms: float, drop: float, duration_s: float, *,
                    backend: str = "emulated", starts: list[float] | None = None,
                    stops: list[float | None] | None = None,
                    impl: str = "port", interval_s: float = 0.1, rate_bps: float | None = None,
                    buffer_bytes: int | None = None, background_loss: float = 0.0, hz: int = 250,
                    seed: int | None = None, rep: int = 1, dilation: str | int = "auto",
                    object_path: str | None = None, stop: StopRule | None = None) -> Condition:
    """A condition outside any design (`tcpeval run --variant ...`), validated as every
    condition is (Condition.problems). Whether the backend offers the algorithms is its
    own check (backends.algorithms)."""
    starts = list(starts or [0.0] * len(variants))
    stops = list(stops or [None] * len(variants))
    if len(starts) != len(variants):
        raise SpecError(f"start: {len(starts)} start offsets for {len(variants)} flows")
    if len(stops) != len(variants):
        raise SpecError(f"stop: {len(stops)} stop times for {len(variants)} flows")
    flows = tuple(Flow(variant=v, impl=impl, start_s=float(s),
                       stop_s=float(e) if e is not None and e != duration_s else None, object=object_path)
                  for v, s, e in zip(variants, starts, stops))
    cond = Condition(backend=backend, campaign="adhoc", criterion="adhoc", flows=flows,
                     rtt_ms=float(rtt_ms), drop=float(drop), rep=rep, duration_s=float(duration_s),
                     interval_s=float(interval_s), rate_bps=rate_bps, buffer_bytes=buffer_bytes,
                     background_loss=float(background_loss), hz=hz,
                     dilation=_dilation_setting(dilation), stop=stop,
                     seed=seed if seed is not None else _seed_for(
                         "adhoc", "adhoc", tuple(f.label for f in flows), rtt_ms, drop, rep))
    problems = cond.problems()
    if problems:
        raise SpecError("; ".join(problems))
    return cond

"""The experiment design as data: load, validate, and expand a campaign into run conditions.

design (config/design.yaml) -> campaign (a named scale) -> runs (Condition) -> paths
(tcpeval.paths). Every run the project performs is derived here; nothing else loops over
the paper's numbers.
"""
from __future__ import annotations

import difflib
import itertools
import string
import zlib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml

from tcpeval import dilation as dilation_mod

# The six algorithms of the paper (tcpeval.cc builds a Linux-3.16 port of each).
KNOWN_VARIANTS = ("reno", "scalable", "highspeed", "htcp", "bic", "cubic")
BACKENDS = ("emulated", "testbed")
IMPLS = ("port", "native")
# Grid keys that set the condition rather than fill a flow template.
CONDITION_KEYS = ("rtt_ms", "drop", "rate_bps", "buffer_bytes")
RUN_SETTINGS = ("duration_s", "interval_s", "repetitions", "rate_bps", "buffer_bytes",
                "background_loss", "hz", "impl", "dilation")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DESIGN = REPO_ROOT / "config" / "design.yaml"
DESIGN_SCHEMA = REPO_ROOT / "workflow" / "schemas" / "design.schema.yaml"


class SpecError(ValueError):
    """The design, a campaign or a requested run is invalid; the message names the field."""


def _dilation_setting(value) -> str | int:
    try:
        return dilation_mod.parse(value)
    except dilation_mod.DilationError as err:
        raise SpecError(str(err)) from None


@dataclass(frozen=True)
class Flow:
    variant: str
    impl: str = "port"
    start_s: float = 0.0
    protocol: str = "tcp"
    rate_bps: float | None = None

    def to_dict(self) -> dict:
        out = {"variant": self.variant, "impl": self.impl, "start_s": self.start_s,
               "protocol": self.protocol}
        if self.rate_bps is not None:
            out["rate_bps"] = self.rate_bps
        return out


@dataclass(frozen=True)
class Condition:
    """Everything that defines one run. Two runs with equal conditions are repetitions
    only if their `rep` differs; the path (tcpeval.paths) names a condition completely."""

    backend: str
    campaign: str
    criterion: str
    flows: tuple[Flow, ...]
    rtt_ms: float
    drop: float
    rep: int
    duration_s: float
    interval_s: float = 0.1
    rate_bps: float | None = None
    buffer_bytes: int | None = None
    background_loss: float = 0.0
    hz: int = 250
    seed: int = 0
    # 'auto' or a time-dilation factor k (tcpeval.dilation): how the emulated backend
    # realises the condition, not part of it; runs with different settings share a path
    dilation: str | int = field(default="auto", compare=False)
    stack: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(f.variant for f in self.flows)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["flows"] = [f.to_dict() for f in self.flows]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Condition":
        data = dict(data)
        data["flows"] = tuple(Flow(**f) for f in data["flows"])
        return cls(**data)


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


def _cross_field_problems(design: dict) -> list[str]:
    problems = []
    criteria = design["criteria"]
    variants = design["variants"]
    for name, crit in criteria.items():
        grid = crit["grid"]
        for i, flow in enumerate(crit["flows"]):
            where = f"criteria/{name}/flows/{i}/variant"
            for key in _placeholders(flow["variant"]):
                if key not in grid:
                    problems.append(f"{where}: placeholder {{{key}}} names no grid key; grid keys: {', '.join(grid)}")
            if not _placeholders(flow["variant"]) and flow["variant"] not in variants:
                problems.append(f"{where}: unknown variant {flow['variant']!r}; allowed values: {', '.join(variants)}")
            if "start_s" in flow and "start_fraction" in flow:
                problems.append(f"criteria/{name}/flows/{i}: give start_s or start_fraction, not both")
        # Grid keys other than the condition's own name variants (or templates of them).
        for key, values in grid.items():
            if key in CONDITION_KEYS:
                continue
            for value in values:
                missing = [p for p in _placeholders(value) if p not in grid]
                if missing:
                    problems.append(f"criteria/{name}/grid/{key}: placeholder {{{missing[0]}}} names no grid key")
                elif not _placeholders(value) and value not in variants:
                    problems.append(f"criteria/{name}/grid/{key}: unknown variant {value!r}; allowed values: {', '.join(variants)}")
    for name, crit in criteria.items():
        for cname in crit.get("campaigns", []):
            if cname not in design["campaigns"]:
                problems.append(f"criteria/{name}/campaigns: unknown campaign {cname!r}; allowed values: "
                                f"{', '.join(design['campaigns'])}")
        if "seed_from" in crit and crit["seed_from"] not in criteria:
            problems.append(f"criteria/{name}/seed_from: unknown criterion {crit['seed_from']!r}; "
                            f"allowed values: {', '.join(criteria)}")
        if "duration_for_loss_events" in crit and 0 in crit["grid"]["drop"]:
            problems.append(f"criteria/{name}/duration_for_loss_events: the grid has drop 0, where no "
                            "loss event occurs; give such a criterion a duration_s")
    for cname, campaign in design["campaigns"].items():
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


def load_design(path: str | Path | None = None) -> dict:
    path = Path(path) if path else DEFAULT_DESIGN
    try:
        design = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"design file {path} does not exist") from None
    except yaml.YAMLError as err:
        raise SpecError(f"design file {path} is not valid YAML: {err}") from None
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
    """The criteria a campaign runs: its `only` list, else every criterion that does not
    name its own campaigns (`campaigns:`), plus those that name this one."""
    camp = _campaign(design, campaign)
    if "only" in camp:
        return list(camp["only"])
    return [name for name, crit in design["criteria"].items()
            if "campaigns" not in crit or campaign in crit["campaigns"]]


def point_duration(crit: dict, settings: dict, rtt_ms: float, drop: float) -> float:
    """A grid point's run length: the criterion's loss-event rule where it has one (enough
    traffic for N expected loss events, tcpeval.mathis), else the settings' duration."""
    rule = crit.get("duration_for_loss_events")
    if not rule:
        return float(settings["duration_s"])
    from tcpeval import mathis

    return mathis.duration_for_loss_events(rule["events"], rtt_ms, drop, rule["link_bps"],
                                           min_s=rule.get("min_s", 0.0))


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
              drop: float, rep: int) -> int:
    # Backend-independent, so the emulated and testbed runs of one condition share a drop sequence.
    key = f"{campaign}/{criterion}/{'+'.join(variants)}/{rtt_ms!r}/{drop!r}/{rep}"
    return zlib.crc32(key.encode()) or 1


def expand(design: dict, campaign: str, backend: str = "emulated",
           criteria: Iterable[str] | None = None) -> list[Condition]:
    """All runs of a campaign, in design order, each once."""
    from tcpeval import paths  # local: paths depends on this module's types

    if backend not in BACKENDS:
        raise SpecError(f"backend: unknown backend {backend!r}; allowed values: {', '.join(BACKENDS)}")
    camp = _campaign(design, campaign)
    wanted = list(criteria) if criteria else criteria_of(design, campaign)
    for name in wanted:
        if name not in design["criteria"]:
            raise SpecError(f"criterion: unknown criterion {name!r}; allowed values: {', '.join(design['criteria'])}")
    runs: list[Condition] = []
    seen: dict[str, tuple] = {}
    for name in wanted:
        crit = design["criteria"][name]
        settings = criterion_settings(design, campaign, name)
        select = camp.get("criteria", {}).get(name, {}).get("select", {})
        for point in _grid_points(crit, select):
            labels = {k: str(v) for k, v in point.items() if k not in CONDITION_KEYS}
            duration = point_duration(crit, settings, float(point["rtt_ms"]), float(point["drop"]))
            flows = []
            for tmpl in crit["flows"]:
                if "start_fraction" in tmpl:
                    start = tmpl["start_fraction"] * duration
                else:
                    start = float(tmpl.get("start_s", 0.0))
                flows.append(Flow(variant=_render(tmpl["variant"], labels),
                                  impl=tmpl.get("impl", settings["impl"]),
                                  start_s=start,
                                  protocol=tmpl.get("protocol", "tcp"),
                                  rate_bps=tmpl.get("rate_bps")))
            for flow in flows:
                if flow.variant not in design["variants"]:
                    raise SpecError(f"criteria/{name}/flows: variant {flow.variant!r} (grid point {point}) "
                                    f"is unknown; allowed values: {', '.join(design['variants'])}")
            for rep in range(1, settings["repetitions"] + 1):
                variants = tuple(f.variant for f in flows)
                cond = Condition(
                    backend=backend, campaign=campaign, criterion=name, flows=tuple(flows),
                    rtt_ms=float(point["rtt_ms"]), drop=float(point["drop"]), rep=rep,
                    duration_s=duration, interval_s=float(settings["interval_s"]),
                    rate_bps=point.get("rate_bps", settings["rate_bps"]),
                    buffer_bytes=point.get("buffer_bytes", settings["buffer_bytes"]),
                    background_loss=float(settings["background_loss"]), hz=int(settings["hz"]),
                    dilation=_dilation_setting(settings["dilation"]),
                    seed=_seed_for(campaign, crit.get("seed_from", name), variants, float(point["rtt_ms"]),
                                   float(point["drop"]), rep),
                )
                path = paths.run_dir(cond)
                identity = (cond.flows, cond.rate_bps, cond.buffer_bytes)
                if path in seen:
                    if seen[path] == identity:
                        continue  # the same condition reached twice (e.g. reno then reno)
                    raise SpecError(f"criteria/{name}: two different conditions share the run path {path}; "
                                    "a grid key the path does not name varies (rate_bps, buffer_bytes): "
                                    "split it into criteria of their own")
                seen[path] = identity
                runs.append(cond)
    return runs


def counts_by_criterion(runs: Iterable[Condition]) -> dict[str, int]:
    out: dict[str, int] = {}
    for run in runs:
        out[run.criterion] = out.get(run.criterion, 0) + 1
    return out


def adhoc_condition(variants: list[str], rtt_ms: float, drop: float, duration_s: float, *,
                    backend: str = "emulated", starts: list[float] | None = None,
                    impl: str = "port", interval_s: float = 0.1, rate_bps: float | None = None,
                    buffer_bytes: int | None = None, background_loss: float = 0.0, hz: int = 250,
                    seed: int | None = None, rep: int = 1, dilation: str | int = "auto") -> Condition:
    """A condition outside any design (`tcpeval run --variant ...`), validated like one."""
    if not variants:
        raise SpecError("variant: at least one flow is needed")
    for v in variants:
        if v not in KNOWN_VARIANTS:
            near = difflib.get_close_matches(v, KNOWN_VARIANTS, n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise SpecError(f"variant: unknown variant {v!r}{hint}; allowed values: {', '.join(KNOWN_VARIANTS)}")
    if impl not in IMPLS:
        raise SpecError(f"impl: {impl!r} is not allowed; allowed values: {', '.join(IMPLS)}")
    if backend not in BACKENDS:
        raise SpecError(f"backend: unknown backend {backend!r}; allowed values: {', '.join(BACKENDS)}")
    checks = [("rtt", rtt_ms, rtt_ms >= 0, ">= 0 ms"), ("drop", drop, 0 <= drop <= 1, "in [0, 1]"),
              ("duration", duration_s, duration_s > 0, "> 0 s"), ("interval", interval_s, interval_s > 0, "> 0 s"),
              ("background_loss", background_loss, 0 <= background_loss <= 1, "in [0, 1]"),
              ("rep", rep, rep >= 1, ">= 1")]
    for name, value, ok, rule in checks:
        if not ok:
            raise SpecError(f"{name}: {value!r} is out of range; must be {rule}")
    starts = list(starts or [0.0] * len(variants))
    if len(starts) != len(variants):
        raise SpecError(f"start: {len(starts)} start offsets for {len(variants)} flows")
    if any(s < 0 or s >= duration_s for s in starts):
        raise SpecError(f"start: offsets {starts} must lie in [0, duration)")
    flows = tuple(Flow(variant=v, impl=impl, start_s=float(s)) for v, s in zip(variants, starts))
    return Condition(backend=backend, campaign="adhoc", criterion="adhoc", flows=flows,
                     rtt_ms=float(rtt_ms), drop=float(drop), rep=rep, duration_s=float(duration_s),
                     interval_s=float(interval_s), rate_bps=rate_bps, buffer_bytes=buffer_bytes,
                     background_loss=float(background_loss), hz=hz,
                     dilation=_dilation_setting(dilation),
                     seed=seed if seed is not None else _seed_for("adhoc", "adhoc", tuple(variants), rtt_ms, drop, rep))

"""Run identity: a condition <-> the path that names it.

    <raw_dir>/<backend>[/<design>]/<campaign>/<criterion>/<flows>/rtt<ms>/drop<p>[/<factor><v>...]/rep<k>/trace.json

    data/raw/emulated/paper/responsiveness/bic/rtt6.2/drop1e-05/rep3/trace.json
    data/raw/testbed/paper/convergence/cubic+reno/rtt24.2/drop0/rep1/trace.json
    data/raw/emulated/buffer-sweep/quick/sweep/cubic/rtt24.2/drop0/buf100k/rep1/trace.json
    data/raw/emulated/bbr-vs-cubic/quick/pair/bbr-native+cubic/rtt12.2/drop0/rep2/trace.json

The paper's design has no design segment (its paths predate other designs); every other
design's runs live under its name, so two designs' campaigns never collide. <flows>: the
flows' labels in order joined by '+': the variant, with '-native' / '-bpf' where the
implementation is not the 3.16 port, 'udp' for UDP cross traffic; an RPC flow adds
'-rpc<response size>' and, at a set rate, '-r<RPCs per second>' (cubic-rpc10k,
reno-native-rpc1m-r500). A factor segment
appears for each grid key that varies within the criterion besides rtt_ms and drop:
rate_bps as rate<R> (10G, 200M), buffer_bytes as buf<B> (100k, 65536),
ecn_threshold_bytes as ecn<K> (30k), any other key as
<key><value> (n_flows4, stop_at30).

Numbers are written in one canonical form (RTT and factors: shortest decimal; drop: 0 or
shortest scientific notation; rates and sizes with an SI suffix where exact), so each
condition has exactly one path and a reviewer can type it.
"""
from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from tcpeval import quantity
from tcpeval.condition import BACKENDS, Condition
from tcpeval.errors import SpecError
from tcpeval.trace import TRACE_FILE

DEFAULT_RAW_DIR = "data/raw"

GRAMMAR = ("<raw_dir>/<backend>[/<design>]/<campaign>/<criterion>/<flows>/rtt<ms>/drop<p>"
           "[/<factor><value>...]/rep<k>[/trace.json]\n"
           "  backend: emulated | testbed; design: the design's name (none for the paper's design);\n"
           "  flows: the flows' variants in order joined by '+' ('-native'/'-bpf' where not the 3.16 port, 'udp';\n"
           "    an RPC flow: '-rpc<response size>[-r<RPCs per second>]');\n"
           "  ms: RTT setting, shortest decimal (0.2, 24.2); p: 0 or shortest scientific form (1e-05);\n"
           "  factors (grid keys that vary within the criterion): rate<R> (10G), buf<B> (100k), <key><value>;\n"
           "  k: repetition from 1")

_FACTOR = r"[a-z][a-z_]*[0-9][^/]*"
_RUN_RE = re.compile(
    rf"(?P<backend>{'|'.join(BACKENDS)})/(?:(?P<design>[^/]+)/)?(?P<campaign>[^/]+)/(?P<criterion>[^/]+)/(?P<variants>[^/]+)/"
    rf"rtt(?P<rtt>[^/]+)/drop(?P<drop>[^/]+)(?P<factors>(?:/{_FACTOR})*)/rep(?P<rep>[^/]+)$")
# Path labels of the factors the grammar names specially; any other key is its own label.
FACTOR_LABELS = {"rate_bps": "rate", "buffer_bytes": "buf", "ecn_threshold_bytes": "ecn"}
_LABEL_KEYS = {v: k for k, v in FACTOR_LABELS.items()}

# Snakemake wildcard constraints, kept beside the grammar they implement.
WILDCARD_CONSTRAINTS = {
    "backend": "|".join(BACKENDS),
    "campaign": r"[a-z][a-z0-9_-]*",
    "criterion": r"[a-z][a-z0-9_-]*",
    "variants": r"[a-z0-9_-]+(\+[a-z0-9_-]+)*",
    "rtt": r"[0-9]+(\.[0-9]+)?",
    "drop": r"0|[0-9](\.[0-9]+)?e[-+][0-9]+",
    "rep": r"[1-9][0-9]*",
    # a run directory below the raw (or results) root: scope + rest (workflow/rules)
    "scope": rf"({'|'.join(BACKENDS)})(/[^/]+){{1,2}}",
    "rest": rf"[a-z][a-z0-9_-]*/[a-z0-9_+-]+/rtt[0-9.]+/drop[^/]+(/{_FACTOR})*/rep[1-9][0-9]*",
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


def format_factor(key: str, value: float) -> str:
    """One factor segment: rate_bps -> rate10G, buffer_bytes -> buf100k, key -> key<value>."""
    if key == "rate_bps":
        return "rate" + quantity.format_rate(value)
    if key in ("buffer_bytes", "ecn_threshold_bytes"):
        return FACTOR_LABELS[key] + quantity.format_size(value)
    return key + format_rtt(value)


def parse_factor(segment: str) -> tuple[str, float]:
    m = re.fullmatch(r"([a-z][a-z_]*?)([0-9][^/]*)", segment)
    if not m:
        raise SpecError(f"{segment!r} is not a factor segment (<key><number>)")
    label, text = m.groups()
    key = _LABEL_KEYS.get(label, label)
    try:
        value = quantity.parse_si(text) if key in FACTOR_LABELS else float(text)
    except (quantity.QuantityError, ValueError):
        raise SpecError(f"{segment!r}: {text!r} is not a number") from None
    return key, value


def format_flows(labels) -> str:
    """Flow labels joined by '+'; a run of three or more equal labels as <n>x<label>
    (10 parallel CUBIC flows: 10xcubic), so the segment stays readable."""
    out, i = [], 0
    labels = list(labels)
    while i < len(labels):
        j = i
        while j < len(labels) and labels[j] == labels[i]:
            j += 1
        n = j - i
        out += [f"{n}x{labels[i]}"] if n >= 3 else labels[i:j]
        i = j
    return "+".join(out)


def parse_flows(text: str) -> tuple[str, ...]:
    out = []
    for item in text.split("+"):
        m = re.fullmatch(r"([0-9]+)x([a-z].*)", item)
        out += [m[2]] * int(m[1]) if m else [item]
    return tuple(out)


def _segments(backend, design, campaign, criterion, labels, rtt_ms, drop, factors, rep) -> list[str]:
    return [backend, *([design] if design else []), campaign, criterion, format_flows(labels),
            f"rtt{format_rtt(rtt_ms)}", f"drop{format_drop(drop)}",
            *(format_factor(k, v) for k, v in factors), f"rep{rep}"]


def run_dir(condition: Condition, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    """The run directory of a condition, relative to the repository (POSIX form)."""
    return str(PurePosixPath(raw_dir, *_segments(
        condition.backend, condition.design, condition.campaign, condition.criterion,
        condition.flow_labels, condition.rtt_ms, condition.drop, condition.factors, condition.rep)))


def trace_path(condition: Condition, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    return f"{run_dir(condition, raw_dir)}/{TRACE_FILE}"


def parse(path: str | Path, raw_dir: str = DEFAULT_RAW_DIR) -> dict:
    """Split a run path into its named parts (no design needed)."""
    text = str(PurePosixPath(str(path)))
    if text.endswith("/" + TRACE_FILE):
        text = text[: -len(TRACE_FILE) - 1]
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
    parts["variants"] = parse_flows(parts["variants"])
    parts["factors"] = tuple(parse_factor(seg) for seg in parts["factors"].split("/") if seg)
    return parts


def split_run_id(run_id: str) -> tuple[str, str]:
    """('<backend>[/<design>]/<campaign>', '<criterion>/.../rep<k>') of a run id (a run
    path below the raw directory): where a campaign's results live, and the run within."""
    parts = parse(run_id.removeprefix("./"), raw_dir=".")
    scope = "/".join(x for x in (parts["backend"], parts["design"], parts["campaign"]) if x)
    rest = run_id.removeprefix("./")[len(scope) + 1:]
    return scope, rest


def run_dir_from_parts(parts: dict, raw_dir: str = DEFAULT_RAW_DIR) -> str:
    return str(PurePosixPath(raw_dir, *_segments(
        parts["backend"], parts.get("design"), parts["campaign"], parts["criterion"], parts["variants"],
        parts["rtt_ms"], parts["drop"], parts.get("factors", ()), parts["rep"])))


# The grammar as Snakemake patterns (workflow/rules/common.smk): a run directory below a
# root is <root>/{scope}/{rest}, the two wildcards WILDCARD_CONSTRAINTS constrains; scope
# is split_run_id's first part, rest its second. The roots are written as run_dir writes
# them (normalised), so a pattern's paths and run_dir's are the same strings.
def run_pattern(root: str = DEFAULT_RAW_DIR) -> str:
    """<root>/{scope}/{rest}: the run directories below root (a raw directory, or a log
    directory mirroring it), as a Snakemake pattern."""
    return f"{PurePosixPath(root)}/{{scope}}/{{rest}}"


def metrics_pattern(results_dir: str) -> str:
    """<results_dir>/{scope}/runs/{rest}: where a run's per-run tables live, as a Snakemake
    pattern (beside the campaign's gathered tables in <results_dir>/<scope>)."""
    return f"{PurePosixPath(results_dir)}/{{scope}}/runs/{{rest}}"


def metrics_dir(run_dir: str, raw_dir: str = DEFAULT_RAW_DIR, results_dir: str = "results") -> str:
    """A run directory's per-run output directory: <raw_dir>/<scope>/<rest> ->
    <results_dir>/<scope>/runs/<rest> (metrics_pattern filled in)."""
    raw, text = str(PurePosixPath(raw_dir)), str(PurePosixPath(run_dir))
    if not text.startswith(raw + "/"):
        raise SpecError(f"{run_dir}: not a run directory below {raw}; expected\n  {GRAMMAR}")
    scope, rest = split_run_id(text[len(raw) + 1:])
    return metrics_pattern(results_dir).format(scope=scope, rest=rest)

"""Table I parameters, parsed from the CC_PARAM / CC_NOTE declarations in cc/src."""
from __future__ import annotations

import re

from ._common import EXTRA_VARIANTS, VARIANTS, CCError, source_path

_PARAM = re.compile(r'^CC_PARAM\(\s*(\w+)\s*,\s*(-?\d+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\);', re.M)
_NOTE = re.compile(r'^CC_NOTE\(\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*\);', re.M)
_ANY = re.compile(r"^CC_(PARAM|NOTE)\(", re.M)


def _parse(variant: str) -> dict[str, dict]:
    path = source_path(variant)
    text = path.read_text()
    found: list[tuple[int, str, dict]] = []
    for m in _PARAM.finditer(text):
        found.append((m.start(), m.group(1),
                      {"value": int(m.group(2)), "description": m.group(3), "kind": "param"}))
    for m in _NOTE.finditer(text):
        found.append((m.start(), m.group(1),
                      {"value": m.group(2), "description": m.group(3), "kind": "note"}))
    # Every declaration must parse, or the table would silently miss a value.
    if len(found) != len(_ANY.findall(text)):
        raise CCError(f"{path}: a CC_PARAM/CC_NOTE line does not match "
                      "CC_PARAM(name, <integer>, \"description\"); / "
                      "CC_NOTE(name, \"value\", \"description\");")
    out: dict[str, dict] = {}
    for _, name, rec in sorted(found, key=lambda item: item[0]):
        if name in out:
            raise CCError(f"{path}: parameter {name!r} declared twice")
        out[name] = rec
    return out


def parameters(extra: bool = False) -> dict[str, dict[str, dict]]:
    """{variant: {name: {"value", "description", "kind"}}} in declaration order, for
    VARIANTS (Table I's); with ``extra``, EXTRA_VARIANTS' after them.

    kind "param": an integer the C code uses; kind "note": a documented constant
    the code does not use directly (HS-TCP's High P etc., implicit in its table).
    """
    return {v: _parse(v) for v in VARIANTS + (EXTRA_VARIANTS if extra else ())}

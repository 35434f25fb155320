"""Numbers as people write them in a design: 1e9, 1.0e9, 10G, 9.5gbit, 64KiB.

YAML 1.1 (PyYAML) reads `1e9` and `1.0e9` as strings (it wants `1.0e+9`); a design is
read with `yaml_load`, whose resolver takes the YAML 1.2 float forms. Rates and sizes may
also carry a unit; `rate()` and `size()` turn them into bit/s and bytes, or raise
QuantityError with the accepted forms.
"""
from __future__ import annotations

import re

import yaml

RATE_FORMS = "a number of bit/s (1e9, 1.0e9, 9500000000) or a number with a unit: 10G, 9.5gbit, 100Mbps, 500k, 1.5Gbit/s"
SIZE_FORMS = "a number of bytes (262144, 1e6) or a number with a unit: 64k, 1.5M, 256KiB, 1MiB, 2MB"

_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?"
_RATE_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[kKmMgGtT]?)(?:bit|b)?(?:ps|/s)?\s*$")
_SIZE_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[kKmMgG]?)(?P<bin>i?)(?:B|bytes?)?\s*$")
_SI = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


class QuantityError(ValueError):
    pass


def rate(value, where: str = "rate") -> float:
    """bit/s from a number or a string with an optional SI unit (bits, never bytes)."""
    if isinstance(value, bool):
        raise QuantityError(f"{where}: {value!r} is not a rate; accepted: {RATE_FORMS}")
    if isinstance(value, (int, float)):
        return float(value)
    m = _RATE_RE.match(str(value)) if isinstance(value, str) else None
    if not m or "B" in str(value).replace("bit", "").replace("bps", ""):
        raise QuantityError(f"{where}: {value!r} is not a rate; accepted: {RATE_FORMS}")
    return float(m["num"]) * _SI[m["unit"].lower()]


def size(value, where: str = "size") -> int:
    """Bytes from a number or a string with an optional unit (k/M/G decimal, KiB/MiB binary)."""
    if isinstance(value, bool):
        raise QuantityError(f"{where}: {value!r} is not a size; accepted: {SIZE_FORMS}")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        m = _SIZE_RE.match(str(value)) if isinstance(value, str) else None
        if not m:
            raise QuantityError(f"{where}: {value!r} is not a size; accepted: {SIZE_FORMS}")
        scale = (1024 ** ("kmg".index(m["unit"].lower()) + 1)) if m["bin"] and m["unit"] else _SI[m["unit"].lower()]
        number = float(m["num"]) * scale
    if number != int(number):
        raise QuantityError(f"{where}: {value!r} is not a whole number of bytes")
    return int(number)


class DesignLoader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats (1e9, 1.0e9, .5) as numbers."""


DesignLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def yaml_load(text: str):
    return yaml.load(text, Loader=DesignLoader)  # noqa: S506 (a SafeLoader subclass)


# ---------------------------------------------------------------- canonical text (paths)

def format_rate(bps: float) -> str:
    """Shortest exact form with an SI unit: 1e9 -> '1G', 9.5e9 -> '9.5G', 2e8 -> '200M'."""
    return _format_si(float(bps), (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)))


def format_size(nbytes: int) -> str:
    """Shortest exact form: 100000 -> '100k', 1500000 -> '1.5M', 65536 -> '65536'."""
    return _format_si(float(nbytes), (("G", 1e9), ("M", 1e6), ("k", 1e3)))


def _format_si(value: float, units) -> str:
    for suffix, scale in units:
        if value >= scale:
            scaled = value / scale
            text = _shortest(scaled)
            if float(text) * scale == value and len(text) <= 6:
                return text + suffix
    return _shortest(value)


def _shortest(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_si(text: str) -> float:
    """Inverse of format_rate / format_size."""
    m = re.fullmatch(rf"({_NUMBER})([kMGT]?)", text)
    if not m:
        raise QuantityError(f"{text!r} is not a number with an optional k/M/G/T suffix")
    return float(m[1]) * _SI[m[2].lower()]

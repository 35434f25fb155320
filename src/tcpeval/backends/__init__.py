"""Backends: one interface (condition in, trace out), see docs/architecture.md."""
from __future__ import annotations

import difflib
import importlib

from tcpeval.backends.base import Backend, BackendError

# name -> "module:factory"; imported lazily so `tcpeval` starts fast and a backend's
# dependencies are only needed when it is used.
_BACKENDS = {
    "emulated": "tcpeval.backends.emulated:EmulatedBackend",
    "testbed": "tcpeval.backends.testbed:TestbedBackend",
}


def available() -> list[str]:
    return sorted(_BACKENDS)


def get_backend(name: str, **options) -> Backend:
    """The backend called ``name`` (options go to its constructor)."""
    if name not in _BACKENDS:
        near = difflib.get_close_matches(name, _BACKENDS, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise ValueError(f"backend: unknown backend {name!r}{hint}; allowed values: {', '.join(available())}")
    module, factory = _BACKENDS[name].split(":")
    try:
        cls = getattr(importlib.import_module(module), factory)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"backend: {name!r} is not available in this installation ({err})") from None
    return cls(**options)


__all__ = ["Backend", "BackendError", "available", "get_backend"]

"""The emulated backend: the paper's dumbbell in network namespaces on one Linux host."""
from __future__ import annotations


def __getattr__(name):  # lazy: importing the package must not need root or tools
    if name == "EmulatedBackend":
        from tcpeval.backends.emulated.runner import EmulatedBackend
        return EmulatedBackend
    raise AttributeError(name)

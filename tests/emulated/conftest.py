"""Emulated-backend tests: real namespaces, real kernel TCP, real iperf3 (those that need
root carry @pytest.mark.root; tests/root_gate.py skips them without root)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def art():
    from tcpeval.backends.emulated.build import ensure_built
    return ensure_built()


@pytest.fixture(scope="session")
def backend():
    from tcpeval.backends import get_backend
    return get_backend("emulated", progress=False, lock_timeout_s=900)



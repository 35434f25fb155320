"""Emulated-backend tests: real namespaces, real kernel TCP, real iperf3 (root only)."""
from __future__ import annotations

import os
import shutil

import pytest



def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc, BPF)"
    for tool in ("ip", "tc", "iperf3", "clang", "gcc", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    for item in items:
        if "emulated" in str(item.fspath) and "root" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def art():
    from tcpeval.backends.emulated.build import ensure_built
    return ensure_built()


@pytest.fixture(scope="session")
def backend():
    from tcpeval.backends import get_backend
    return get_backend("emulated", progress=False, lock_timeout_s=900)



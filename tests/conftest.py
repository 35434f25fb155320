"""Shared fixtures; the gate for root-only tests is tests/root_gate.py."""
import copy
import os
from pathlib import Path

import pytest

from root_gate import (  # noqa: F401 (hooks)
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
)
from tcpeval import spec

# DVC's usage reports leave their JSON files in /tmp (one per command class); the tests'
# DVC commands send none and leave nothing behind.
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# The tests' runs neither read nor write the host's record of paths it fell behind on
# (backends/emulated/fell_behind.py): their factors stay the envelope's, and a test run
# that fell behind teaches a reviewer's next campaign nothing.
os.environ.setdefault("TCPEVAL_FELL_BEHIND", "off")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def design_pristine():
    return spec.load_design(REPO / "config" / "design.yaml")


@pytest.fixture
def design(design_pristine):
    """A private copy of the paper's design, free to mutate."""
    return copy.deepcopy(design_pristine)

"""The real testbed over SSH (see backend.py)."""
from tcpeval.backends.testbed.backend import (
    TestbedBackend,
    TestbedConfigError,
    load_description,
)

__all__ = ["TestbedBackend", "TestbedConfigError", "load_description"]

"""The one gate for root-only tests (a pytest plugin; tests/conftest.py loads its hooks).

A test that needs root (network namespaces, qdiscs, BPF) carries @pytest.mark.root and
nothing else decides: without root it is skipped, in every folder alike. With
--require-root (CI, which runs as root) a root-marked test that does not run, for any
reason, fails instead: a skipped root test there would hide a broken host.
"""
import os

import pytest

NOT_ROOT = "needs root (network namespaces, qdiscs, BPF): run as root"


def pytest_addoption(parser):
    parser.addoption("--require-root", action="store_true",
                     help="fail (instead of skip) every root-marked test that does not run; "
                          "refuse to start without root")


def pytest_configure(config):
    if config.getoption("require_root") and os.geteuid() != 0:
        raise pytest.UsageError(f"--require-root: running as uid {os.geteuid()}, not root; "
                                "run as root or drop --require-root")


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason=NOT_ROOT)
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.config.getoption("require_root") and item.get_closest_marker("root"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"root-only test did not run under --require-root: {reason}"

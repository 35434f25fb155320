"""Whether the link engine may excuse lateness as host stalls depends on how the kernel
accounts CPU time (backends/emulated/delay.stall_accounting): stolen time must be left
out of a thread's CPU time and softirq time must not, or a long softirq in the engine's
context would read as the hypervisor's."""
from __future__ import annotations

import gzip

import pytest

from tcpeval.backends.emulated import delay


def _config(tmp_path, text: str, gz: bool = True):
    path = tmp_path / ("config.gz" if gz else "config-6.1.0-56-amd64")
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return path


def test_a_kernel_with_steal_accounting_and_no_irq_time_accounting_is_watched(tmp_path, monkeypatch):
    path = _config(tmp_path, "CONFIG_PARAVIRT_TIME_ACCOUNTING=y\n# CONFIG_IRQ_TIME_ACCOUNTING is not set\n")
    monkeypatch.setattr(delay, "KERNEL_CONFIGS", (path,))
    watched, why = delay.stall_accounting()
    assert watched and "softirq time is not" in why


def test_a_kernel_that_accounts_irq_time_apart_is_not_watched(tmp_path, monkeypatch):
    # Debian's /boot/config-* form, read when /proc/config.gz is missing
    path = _config(tmp_path, "CONFIG_PARAVIRT_TIME_ACCOUNTING=y\nCONFIG_IRQ_TIME_ACCOUNTING=y\n", gz=False)
    monkeypatch.setattr(delay, "KERNEL_CONFIGS", (tmp_path / "missing.gz", path))
    watched, why = delay.stall_accounting()
    assert not watched and "IRQ time apart" in why and str(path) in why


def test_without_a_readable_configuration_nothing_is_excused(tmp_path, monkeypatch):
    monkeypatch.setattr(delay, "KERNEL_CONFIGS", (tmp_path / "none.gz", tmp_path / "none"))
    assert delay.stall_accounting() == (
        False, "the kernel's configuration is not readable (/proc/config.gz, /boot/config-*)")


def test_this_hosts_kernel_is_read_as_its_configuration_says():
    readable = [p for p in delay.KERNEL_CONFIGS if p.exists()]
    if not readable:
        pytest.skip("no kernel configuration on this host")
    opener = gzip.open if readable[0].suffix == ".gz" else open
    with opener(readable[0], "rt") as f:
        irq_apart = "CONFIG_IRQ_TIME_ACCOUNTING=y" in f.read()
    watched, why = delay.stall_accounting()
    assert watched is not irq_apart and str(readable[0]) in why

"""Removing a run's namespace also ends its TCP connections (root only): a killed
sender's connections would otherwise live on as orphans retransmitting their FIN, outlive
the namespace and keep their congestion-control program registered."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcpeval.backends.emulated import host

pytestmark = pytest.mark.root

# In the namespace: a loopback connection whose ends are closed with data unsent while
# the loopback is down, so both ends become orphans in FIN-WAIT-1.
ORPHANS = """
import socket, subprocess
srv = socket.socket(); srv.bind(("127.0.0.1", 5999)); srv.listen()
cli = socket.create_connection(("127.0.0.1", 5999)); peer, _ = srv.accept()
subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
cli.setblocking(False)
cli.send(b"x" * 100_000)
cli.close(); peer.close()
"""


def tcp_orphans() -> int:
    # the orphan count in /proc/net/sockstat is host-wide (every namespace)
    m = re.search(r"^TCP: .*\borphan (\d+)", Path("/proc/net/sockstat").read_text(), re.M)
    return int(m.group(1))


def test_removing_a_namespace_destroys_its_orphaned_connections():
    ns = host.ns_name(f"{time.time_ns() % 16**6:06x}", "s1")  # a run id: leftovers get removed
    before = tcp_orphans()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", ORPHANS], check=True)
        assert tcp_orphans() >= before + 2  # the two ends, orphaned, retransmitting
    finally:
        host.remove_netns(ns)
    assert ns not in host.list_netns()
    # at most what was there before (other orphans may have timed out meanwhile)
    assert tcp_orphans() <= before

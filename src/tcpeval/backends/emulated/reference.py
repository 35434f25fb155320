"""What this host carries without the emulator: the yardsticks for the benchmark.

Two plain set-ups, offloads off as on the emulated path (no TSO, GSO or GRO), one
native-CUBIC iperf3 flow each, nothing else in the way:

- ``direct``: two namespaces joined by one veth pair;
- ``forwarding``: the same through a third namespace doing IPv4 forwarding.

A shared virtual machine carries less on some days than on others (other tenants of the
physical host), so an absolute throughput says little about the emulator unless these two
are measured beside it, minutes apart.
Names carry the backend's prefix and a state file, so `tcpeval cleanup` removes what a
killed measurement leaves.
"""
from __future__ import annotations

import json
import time

from tcpeval.backends import common
from tcpeval.backends.emulated import host

PORT = 5299


def _flow_bps(client_ns: str, server_ns: str, server_ip: str, duration_s: float) -> float:
    server = host.spawn(["iperf3", "-s", "-1", "-p", PORT], ns=server_ns)
    try:
        for _ in range(100):  # until it listens
            out = host.run(["ss", "-Hltn", f"sport = :{PORT}"], ns=server_ns, check=False).stdout
            if out.strip():
                break
            time.sleep(0.05)
        out = host.run(["iperf3", "-c", server_ip, "-p", PORT, "-t", f"{duration_s:g}", "-J"],
                       ns=client_ns, timeout=duration_s + 30).stdout
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"])
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def _bring_up(ns: str, dev: str, addr: str) -> None:
    """Address, link up, offloads off (as on the emulated path)."""
    host.run(["ip", "-n", ns, "addr", "add", addr, "dev", dev])
    host.run(["ip", "-n", ns, "link", "set", dev, "up"])
    host.run(["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], ns=ns)


def measure(duration_s: float = 6.0, lock_timeout_s: float = common.LOCK_TIMEOUT_S) -> dict:
    """{"direct_bps", "forwarding_bps", "duration_s", "method"}; needs root."""
    host.preflight()
    with host.HostLock(lock_timeout_s):
        host.cleanup_stale(holding_lock=True)
        run_id = host.new_run_id()
        host.write_state(run_id, kind="host reference")
        a, b, fwd = (host.ns_name(run_id, r) for r in ("s1", "r1", "sw"))
        try:
            for ns in (a, b, fwd):
                host.run(["ip", "netns", "add", ns])
                host.run(["ip", "-n", ns, "link", "set", "lo", "up"])
            va, vb = f"{host.PREFIX}{run_id}-a", f"{host.PREFIX}{run_id}-b"
            # direct: a <-> b
            host.run(["ip", "-n", a, "link", "add", va, "type", "veth", "peer", "name", vb, "netns", b])
            for ns, dev, addr in ((a, va, "10.78.0.1/24"), (b, vb, "10.78.0.2/24")):
                _bring_up(ns, dev, addr)
            direct = _flow_bps(a, b, "10.78.0.2", duration_s)
            host.run(["ip", "-n", a, "link", "del", va])
            # forwarding: a <-> fwd <-> b
            fa, fb = f"{host.PREFIX}{run_id}-fa", f"{host.PREFIX}{run_id}-fb"
            host.run(["ip", "-n", a, "link", "add", va, "type", "veth", "peer", "name", fa, "netns", fwd])
            host.run(["ip", "-n", b, "link", "add", vb, "type", "veth", "peer", "name", fb, "netns", fwd])
            for ns, dev, addr in ((a, va, "10.78.1.2/24"), (fwd, fa, "10.78.1.1/24"),
                                  (fwd, fb, "10.78.2.1/24"), (b, vb, "10.78.2.2/24")):
                _bring_up(ns, dev, addr)
            host.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"], ns=fwd)
            host.run(["ip", "-n", a, "route", "add", "default", "via", "10.78.1.1"])
            host.run(["ip", "-n", b, "route", "add", "default", "via", "10.78.2.1"])
            forwarding = _flow_bps(a, b, "10.78.2.2", duration_s)
        finally:
            host.remove_run(run_id)
    return {"direct_bps": direct, "forwarding_bps": forwarding, "duration_s": duration_s,
            "method": "one native-CUBIC iperf3 flow, TSO/GSO/GRO off; direct: one veth pair "
                      "between two namespaces; forwarding: through a namespace doing IPv4 "
                      "forwarding"}

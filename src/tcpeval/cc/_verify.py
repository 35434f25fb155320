"""Reading back the algorithm a socket actually used."""
from __future__ import annotations

import socket
import subprocess

from ._common import CCError

TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
# ss prints these flags before the algorithm name on the info line.
_SS_FLAG_ONLY = {"ts", "sack", "ecn", "ecnseen", "fastopen"}


def _expected_name(expected) -> str:
    return getattr(expected, "kernel_name", expected)


def socket_algorithm(sock: socket.socket) -> str:
    """The congestion control a TCP socket uses (getsockopt TCP_CONGESTION)."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16)
    return raw.split(b"\0", 1)[0].decode()


def set_socket_algorithm(sock: socket.socket, expected) -> None:
    """Select the algorithm (a name or a CCHandle) on a socket and verify it took."""
    name = _expected_name(expected)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())
    except OSError as err:
        raise CCError(f"cannot set TCP_CONGESTION={name!r}: {err}") from err
    verify_socket_algorithm(sock, name)


def verify_socket_algorithm(sock: socket.socket, expected) -> str:
    """Fail unless the socket's algorithm is `expected` (a name or a CCHandle)."""
    name = _expected_name(expected)
    got = socket_algorithm(sock)
    if got != name:
        raise CCError(f"socket uses congestion control {got!r}, requested {name!r}")
    return got


def ss_algorithms(netns: str | None = None, port: int | None = None) -> list[dict]:
    """Established TCP flows with their algorithm and whether they negotiated ECN (`ecn`)
    and have seen a mark (`ecn_seen`), from `ss -tin` (optionally in a network namespace,
    optionally only flows with `port` on either end)."""
    cmd = ["ss", "-tinoH", "state", "established"]  # -o: the options (ts, sack, ecn) too
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CCError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    flows = parse_ss(proc.stdout)
    if port is not None:
        suffix = f":{port}"
        flows = [f for f in flows if f["local"].endswith(suffix) or f["peer"].endswith(suffix)]
    return flows


def parse_ss(text: str) -> list[dict]:
    """The flows of `ss -tinoH state established` output: one line per socket (Recv-Q
    Send-Q Local Peer), then an indented info line whose first word that is neither a flag
    (ts, sack, ecn, ecnseen, fastopen) nor a name:value pair is the algorithm."""
    flows, cur = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            parts = line.split()
            cur = {"local": parts[2], "peer": parts[3], "algorithm": None, "ecn": False, "ecn_seen": False}
            flows.append(cur)
        elif cur is not None and cur["algorithm"] is None:
            for tok in line.split():
                # ecn: negotiated; ecnseen: an ECN-capable segment arrived (so it may be
                # set where ECN was not negotiated: a DCTCP sender's SYN is ECT)
                cur["ecn"] = cur["ecn"] or tok == "ecn"
                cur["ecn_seen"] = cur["ecn_seen"] or tok == "ecnseen"
                if tok in _SS_FLAG_ONLY or ":" in tok:
                    continue
                cur["algorithm"] = tok
                break
    return flows


def verify_flows(expected, netns: str | None = None, port: int | None = None) -> list[dict]:
    """Fail unless at least one matching flow exists and all use `expected`."""
    name = _expected_name(expected)
    flows = ss_algorithms(netns, port)
    if not flows:
        raise CCError(f"no established TCP flow found (netns={netns}, port={port})")
    wrong = [f for f in flows if f["algorithm"] != name]
    if wrong:
        raise CCError(f"flows not using {name!r}: " +
                      ", ".join(f"{f['local']}->{f['peer']}={f['algorithm']}" for f in wrong))
    return flows

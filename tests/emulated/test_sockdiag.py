"""The precision watch's receiver readings (backends/emulated/sockdiag.py) on real kernel
sockets inside a real network namespace: exact payload counts, the socket followed
after the first dump, and None where nothing is connected."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from tcpeval.backends.emulated import host
from tcpeval.backends.emulated.sockdiag import ReceivedBytes

pytestmark = pytest.mark.root

PORT = 5301
# Inside the namespace: a listener on PORT, a client that sends what stdin asks for (one
# line per batch, its size in bytes), the server reading it all and saying "got N".
PEER = textwrap.dedent(f"""
    import socket, sys
    srv = socket.socket(socket.AF_INET6)
    srv.bind(("::", {PORT})); srv.listen(1)
    cli = socket.create_connection(("127.0.0.1", {PORT}))
    conn, _ = srv.accept()
    total = 0
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        cli.sendall(bytes(n))
        got = 0
        while got < n:
            got += len(conn.recv(n - got))
        total += got
        print("got", total, flush=True)
""")


@pytest.fixture
def namespace():
    name = host.ns_name(host.new_run_id(), "r1")
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], check=False)


def _peer(namespace: str, script: str) -> subprocess.Popen:
    """The script running in the namespace, its stdin and stdout as pipes of text."""
    return subprocess.Popen(["ip", "netns", "exec", namespace, sys.executable, "-c", script],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_it_reads_exactly_the_bytes_a_socket_in_the_namespace_received(namespace):
    peer = _peer(namespace, PEER)
    try:
        assert peer.stdout.readline().strip() == "ready"
        with ReceivedBytes(namespace) as receiver:
            assert receiver.read(PORT) == 0               # connected, nothing sent yet
            for total in (1_000_000, 3_500_000):
                peer.stdin.write(f"{total - (receiver.read(PORT) or 0)}\n")
                peer.stdin.flush()
                assert peer.stdout.readline().split() == ["got", str(total)]
                assert receiver.read(PORT) == total       # the second is a lookup, not a dump
            assert PORT in receiver.found
            assert receiver.read(PORT + 1) is None        # no socket on that port
        with ReceivedBytes(None) as here:                 # the host's namespace: not there
            assert here.read(PORT) is None
    finally:
        peer.stdin.close()
        peer.wait(timeout=10)


def test_a_socket_that_went_away_reads_as_none(namespace):
    peer = _peer(namespace, PEER)
    assert peer.stdout.readline().strip() == "ready"
    with ReceivedBytes(namespace) as receiver:
        assert receiver.read(PORT) == 0
        peer.stdin.close()
        peer.wait(timeout=10)
        assert receiver.read(PORT) is None
        assert PORT not in receiver.found


# iperf3's order: the control connection (a few hundred bytes of parameters) first, the
# data connection on the same server port once the control exchange is done.
CONTROL_THEN_DATA = textwrap.dedent(f"""
    import socket, sys
    srv = socket.socket(socket.AF_INET6)
    srv.bind(("::", {PORT})); srv.listen(2)
    control = socket.create_connection(("127.0.0.1", {PORT}))
    control_in, _ = srv.accept()
    control.sendall(bytes(300))
    assert len(control_in.recv(300, socket.MSG_WAITALL)) == 300
    print("control", flush=True)
    n = int(sys.stdin.readline())
    data = socket.create_connection(("127.0.0.1", {PORT}))
    data_in, _ = srv.accept()
    data.sendall(bytes(n))
    assert len(data_in.recv(n, socket.MSG_WAITALL)) == n
    print("data", flush=True)
    sys.stdin.readline()
""")


def test_a_reading_before_the_data_connection_does_not_follow_the_control_socket(namespace):
    peer = _peer(namespace, CONTROL_THEN_DATA)
    try:
        assert peer.stdout.readline().strip() == "control"
        with ReceivedBytes(namespace) as receiver:
            assert receiver.read(PORT) == 300             # only the control socket so far
            assert PORT not in receiver.found             # not followed: too few bytes
            peer.stdin.write("2000000\n")
            peer.stdin.flush()
            assert peer.stdout.readline().strip() == "data"
            assert receiver.read(PORT) == 2_000_000       # the data socket, found by a dump
            assert PORT in receiver.found
            assert receiver.read(PORT) == 2_000_000       # and then followed by its identity
    finally:
        peer.stdin.close()
        peer.wait(timeout=10)


# iperf3's end: both ends close the data connection while the control connection stays
# open a little longer.
DATA_THEN_CLOSE = CONTROL_THEN_DATA + textwrap.dedent("""
    data.close()
    data_in.close()
    print("closed", flush=True)
    sys.stdin.readline()
""")


def test_the_precision_watch_takes_no_sample_from_the_control_socket_once_the_data_socket_closed(
        namespace, monkeypatch):
    from tcpeval.backends import common
    from tcpeval.backends.emulated.precision_watch import PrecisionWatch
    from tcpeval.precision import StopRule

    monkeypatch.setattr(common, "IPERF3_PORT", PORT)
    peer = _peer(namespace, DATA_THEN_CLOSE)
    watch = None
    try:
        assert peer.stdout.readline().strip() == "control"
        watch = PrecisionWatch(StopRule(half_width=0.05, max_s=60), 1, namespace, 0.0, lambda: 0, 0.1)
        peer.stdin.write("1000000\n")
        peer.stdin.flush()
        assert peer.stdout.readline().strip() == "data"
        t0 = time.monotonic() - 5.0       # the loop reached the watch 4.9 s after it was due
        watch.check(t0)
        assert watch.t_s[0] >= 5.0        # timed at its read, not at the loop's turn
        peer.stdin.write("2000000\n")    # a line for the script: close the data connection
        peer.stdin.flush()
        assert peer.stdout.readline().strip() == "closed"
        # the read now finds the control socket's 300 bytes: the count went back, no sample
        with ReceivedBytes(namespace) as receiver:
            assert receiver.read(PORT) == 300
        assert watch.check(t0) is None
        assert watch.bytes == [1_000_000] and watch.rates == []
        # the trace keeps what the rule saw: the reads, their times and counts
        assert watch.record(None)["series"] == {"t_s": watch.t_s, "bytes": [1_000_000]}
    finally:
        if watch is not None:
            watch.close()
        peer.stdin.close()
        peer.wait(timeout=10)

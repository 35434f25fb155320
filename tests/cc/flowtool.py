"""Traffic helper run inside a namespace (ip netns exec): `sink PORT [RCVBUF]` or
`send HOST PORT ALGO SECONDS [DROP_NS]`. The sender selects ALGO, verifies it via
getsockopt, samples TCP_INFO every ~0.3 ms and prints one JSON document."""
from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time

TCP_INFO_LEN = 232


def info(sock):
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    ca_state = raw[1]
    rtt, = struct.unpack_from("I", raw, 68)
    ssthresh, cwnd = struct.unpack_from("II", raw, 76)
    total_retrans, = struct.unpack_from("I", raw, 100)
    segs_in, = struct.unpack_from("I", raw, 140)
    delivered, = struct.unpack_from("I", raw, 192)
    return [ca_state, cwnd, ssthresh, total_retrans, segs_in, delivered, rtt]


def sink(port: int, rcvbuf: int = 0) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:  # a small receive window caps the sender's window: stable cwnd
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(4)
    print("listening", flush=True)
    srv.settimeout(30)
    conn, _ = srv.accept()
    while conn.recv(1 << 20):
        pass
    conn.close()


def send(host: str, port: int, algo: str, seconds: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, algo.encode())
    s.connect((host, port))
    used = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()
    samples = []
    stop = threading.Event()

    def sampler():
        t0 = time.monotonic()
        while not stop.is_set():
            samples.append([round(time.monotonic() - t0, 6)] + info(s))
            time.sleep(0.0003)

    th = threading.Thread(target=sampler)
    th.start()
    buf = b"\0" * (256 * 1024)
    end = time.monotonic() + seconds
    sent = 0
    try:
        while time.monotonic() < end:
            sent += s.send(buf)
    finally:
        stop.set()
        th.join()
    print(json.dumps({"algorithm": used, "bytes": sent, "samples": samples}), flush=True)
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        sink(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    else:
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))

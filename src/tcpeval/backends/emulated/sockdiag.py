"""What a TCP socket in a network namespace has received, read through sock_diag (the
netlink interface `ss` uses) without a process per reading.

A precision-driven run samples the first flow's receiver at the condition's reporting
interval (0.1 virtual s): `ip netns exec ... ss -ti` costs about 13 ms of CPU per call on
the 2-vCPU VM, 13 % of a CPU at ten readings a second, on the CPU that carries the flows.
One netlink query costs microseconds. The socket is opened once inside the namespace (a
netlink socket belongs to the namespace it was created in) from a short-lived thread, so
the runner's own threads never leave the host's namespace.

Linux: SOCK_DIAG_BY_FAMILY with an inet_diag_req_v2 asking for INET_DIAG_INFO, whose
payload is struct tcp_info; tcpi_bytes_received (u64, since 4.1) lies at byte 128.
"""
from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2
TCP_ESTABLISHED = 1
CLONE_NEWNET = 0x40000000
ENOENT = 2
TCPI_BYTES_RECEIVED = 128          # offsetof(struct tcp_info, tcpi_bytes_received)
_NLMSGHDR = struct.Struct("=IHHII")
_REQ_V2 = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states; then the sockid
_SOCKID = struct.Struct(">HH16s16sI8s")   # sport, dport, src, dst, if, cookie (big-endian ports)
_DIAG_MSG_HEAD = 4 + _SOCKID.size + 20     # family..retrans, sockid, expires..inode

_libc = ctypes.CDLL(None, use_errno=True)


class SockDiagError(OSError):
    """The namespace or the netlink socket could not be opened."""


def _open_in_namespace(ns: str | None) -> socket.socket:
    """A NETLINK_SOCK_DIAG socket created inside network namespace ``ns`` (None: here)."""
    if ns is None:
        return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    out: dict = {}

    def opener():  # setns changes this thread only; it ends right after
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        except OSError as err:
            out["error"] = err
            return
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                out["error"] = OSError(errno, f"setns({ns}): {os.strerror(errno)}")
                return
            out["sock"] = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        except OSError as err:
            out["error"] = err
        finally:
            os.close(fd)

    thread = threading.Thread(target=opener, name=f"sockdiag-{ns}")
    thread.start()
    thread.join()
    if "sock" not in out:
        raise SockDiagError(f"sock_diag in namespace {ns}: {out.get('error')}")
    return out["sock"]


# A socket is followed by its identity once it has received more than this: iperf3's
# control connection (a few hundred bytes of parameters) is set up before the data
# connection, and a reading taken between the two must not follow the control socket for
# the rest of the run (it did: 2 of 80 runs read a flat line and never stopped early).
FOLLOW_AFTER_BYTES = 64 * 1024


class ReceivedBytes:
    """``read(port)``: the most bytes any established TCP socket with local port ``port``
    has received (the data socket; iperf3's control socket carries a few hundred bytes),
    or None when there is no such socket yet.

    A dump walks the kernel's whole established hash (about 4.6 ms of CPU on the VM, as
    much as `ss` spends), so readings dump only until a socket has received more than
    FOLLOW_AFTER_BYTES; later ones ask for that socket by its exact identity, a hash
    lookup."""

    def __init__(self, ns: str | None):
        self.ns = ns
        self.sock = _open_in_namespace(ns)
        self.seq = 0
        self.found: dict[int, tuple[int, bytes]] = {}   # port -> (family, sockid)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, port: int) -> int | None:
        if port in self.found:
            family, sockid = self.found[port]
            for _sockid, info in self._query(family, sockid, dump=False):
                got = _bytes_received(info)
                if got is not None:
                    return got
            del self.found[port]                  # gone or closing: look for it again
        best, best_id = None, None
        for family in (socket.AF_INET, socket.AF_INET6):
            for sockid, info in self._query(family, bytes(_SOCKID.size), dump=True):
                got = _bytes_received(info)
                if _SOCKID.unpack(sockid)[0] == port and got is not None and (best is None or got > best):
                    best, best_id = got, (family, sockid)
        if best is not None and best > FOLLOW_AFTER_BYTES:
            self.found[port] = best_id
        return best

    def _query(self, family: int, sockid: bytes, dump: bool):
        """(sockid, tcp_info bytes) of every established TCP socket of ``family`` (dump),
        or of the one socket ``sockid`` names."""
        self.seq += 1
        req = _REQ_V2.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0,
                           1 << TCP_ESTABLISHED) + sockid
        flags = NLM_F_REQUEST | (NLM_F_DUMP if dump else 0)
        hdr = _NLMSGHDR.pack(_NLMSGHDR.size + len(req), SOCK_DIAG_BY_FAMILY, flags, self.seq, 0)
        self.sock.send(hdr + req)
        while True:
            data = self.sock.recv(1 << 16)
            offset = 0
            while offset + _NLMSGHDR.size <= len(data):
                length, kind, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, offset)
                if length < _NLMSGHDR.size:
                    return
                body = data[offset + _NLMSGHDR.size: offset + length]
                offset += (length + 3) & ~3
                if seq != self.seq:
                    continue
                if kind == NLMSG_DONE:
                    return
                if kind == NLMSG_ERROR:
                    errno = -struct.unpack_from("=i", body)[0]
                    if errno and errno != ENOENT:
                        raise SockDiagError(errno, f"sock_diag: {os.strerror(errno)}")
                    return                        # ENOENT: the socket is gone
                if kind != SOCK_DIAG_BY_FAMILY or len(body) < _DIAG_MSG_HEAD:
                    continue
                yield body[4:4 + _SOCKID.size], _attribute(body[_DIAG_MSG_HEAD:], INET_DIAG_INFO)
                if not dump:
                    return


def _bytes_received(info: bytes) -> int | None:
    if len(info) < TCPI_BYTES_RECEIVED + 8:
        return None
    return struct.unpack_from("=Q", info, TCPI_BYTES_RECEIVED)[0]


def _attribute(attrs: bytes, wanted: int) -> bytes:
    """The payload of rtattr ``wanted`` in a run of rtattrs (b'' if absent)."""
    offset = 0
    while offset + 4 <= len(attrs):
        length, kind = struct.unpack_from("=HH", attrs, offset)
        if length < 4:
            break
        if kind == wanted:
            return attrs[offset + 4: offset + length]
        offset += (length + 3) & ~3
    return b""

"""The segment mark that keeps the kernel from merging backlogged segments and ACKs
(3.16 processed each one): the drop stage's BPF and the delay line set the lowest DSCP bit
in turns, per link or route, whatever the IP IDs, keep ECN and everything else, and leave
a valid header checksum."""
from __future__ import annotations

import struct
import subprocess

import pytest

MARK = 0x04
# The BPF program runs in the kernel (BPF_PROG_TEST_RUN: root); the delay line's copy of
# the mark is plain userspace code.
TOOLS = [pytest.param("bpf", marks=pytest.mark.root), "line"]


def ip_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(tos: int, ip_id: int, proto: int = 6) -> bytes:
    eth = bytes.fromhex("020000000001" "020000000002" "0800")
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 40, ip_id, 0x4000, 64, proto, 0,
                      bytes([10, 77, 1, 2]), bytes([10, 77, 100, 11]))
    hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
    return eth + hdr + bytes(20)  # a zeroed TCP header is enough: only IPv4 is read


def run_marks(tool: str, art, frames: list[bytes]) -> list[bytes]:
    """The frames as they leave the tool, marked in turn as segments of one link (bpf:
    the drop stage) or one route (line: the delay line)."""
    if tool == "bpf":
        cmd = [str(art.tevbpf), "marktest", str(art.datapath_obj)]
    else:
        cmd = [str(art.tevdelay), "marktest"]
    out = subprocess.run(cmd + [f.hex() for f in frames], capture_output=True, text=True,
                         check=True).stdout.split()
    assert len(out) == len(frames)
    return [bytes.fromhex(line) for line in out]


def run_mark(tool: str, art, data: bytes) -> bytes:
    return run_marks(tool, art, [data])[0]


CASES = [(tos, ip_id) for tos in (0x00, 0x01, 0x02, 0x03, 0x04, 0x07, 0xB8, 0xBC, 0xFF)
         for ip_id in (0, 1, 2, 0x1234, 0xFFFE, 0xFFFF)]


@pytest.mark.parametrize("tool", TOOLS)
def test_mark_takes_turns_and_checksum_stays_valid(art, tool):
    for tos, ip_id in CASES:
        before = frame(tos, ip_id)
        for turn, after in enumerate(run_marks(tool, art, [before, before])):
            assert len(after) == len(before)
            ip = after[14:34]
            want_tos = (tos & ~MARK & 0xFF) | (MARK if turn else 0)
            assert ip[1] == want_tos, (tool, hex(tos), ip_id, turn, hex(ip[1]))
            assert ip[1] & 0x03 == tos & 0x03  # ECN untouched
            assert ip_checksum(ip) == 0, (tool, hex(tos), ip_id)  # a valid header sums to 0
            # nothing else in the frame changes
            assert after[:15] == before[:15] and after[16:24] == before[16:24] and after[26:] == before[26:]


@pytest.mark.parametrize("tool", TOOLS)
def test_neighbours_always_differ_even_when_a_lost_segment_leaves_equal_id_parities(art, tool):
    # 101 was a retransmission lost on the way: 100 and 102 arrive next to each other (the
    # IP ID's parity, the mark before, gave both the same DS field and let them merge)
    ids = [100, 102, 103, 105, 105, 106]
    marks = [f[15] & MARK for f in run_marks(tool, art, [frame(0, i) for i in ids])]
    assert all(a != b for a, b in zip(marks, marks[1:])), marks


@pytest.mark.parametrize("tool", TOOLS)
def test_non_tcp_is_left_alone_and_takes_no_turn(art, tool):
    udp = frame(0x00, 1, proto=17)
    first, middle, last = run_marks(tool, art, [frame(0, 1), udp, frame(0, 1)])
    assert middle == udp
    assert first[15] & MARK != last[15] & MARK


def tcp_frame(payload: int, flags: int) -> bytes:
    """Ethernet + IPv4 + TCP with a valid TCP checksum and `payload` bytes of data."""
    src, dst = bytes([10, 77, 1, 2]), bytes([10, 77, 100, 11])
    data = bytes(i % 251 for i in range(payload))
    tcp = struct.pack("!HHIIBBHHH", 40000, 5201, 123456, 654321, 5 << 4, flags, 502, 0, 0) + data
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", ip_checksum(pseudo + tcp + bytes(len(tcp) % 2))) + tcp[18:]
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 7, 0x4000, 64, 6, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
    return bytes.fromhex("020000000001" "020000000002" "0800") + hdr + tcp


def tcp_checksum_ok(frame_: bytes) -> bool:
    ip, tcp = frame_[14:34], frame_[34:]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(tcp))
    return ip_checksum(pseudo + tcp + bytes(len(tcp) % 2)) == 0


PSH, ACK = 0x08, 0x10


@pytest.mark.root
def test_the_drop_stage_clears_push_on_full_sized_segments_only(art):
    # 3.16 receivers ACKed every second full-sized segment, PSH or not; 6.6+ ACK a
    # full-sized PSH segment at once -- the drop stage clears the flag (clear_push)
    full = tcp_frame(1460, PSH | ACK)
    assert len(full) == 1514 and tcp_checksum_ok(full)
    after = run_mark("bpf", art, full)
    assert after[34 + 13] == ACK                      # PSH cleared, ACK kept
    assert tcp_checksum_ok(after)                     # checksum updated
    assert after[34 + 14:] == full[34 + 14:34 + 16] + after[34 + 16:34 + 18] + full[34 + 18:]
    # a small segment keeps its PSH (3.16 treated those as pushed as well), as does a
    # full-sized one without it
    small = tcp_frame(100, PSH | ACK)
    assert run_mark("bpf", art, small)[34 + 13] == PSH | ACK
    plain = tcp_frame(1460, ACK)
    assert run_mark("bpf", art, plain)[34:] == plain[34:]

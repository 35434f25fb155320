"""The segment mark that keeps the kernel from merging backlogged segments and ACKs
(3.16 processed each one): the switch's BPF and the delay line set the lowest DSCP bit
from the IP ID's parity, keep ECN and everything else, and leave a valid header checksum."""
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


def run_mark(tool: str, art, data: bytes) -> bytes:
    if tool == "bpf":
        cmd = [str(art.tevbpf), "marktest", str(art.dropper_obj), data.hex()]
    else:
        cmd = [str(art.tevdelay), "marktest", data.hex()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    return bytes.fromhex(out)


CASES = [(tos, ip_id) for tos in (0x00, 0x01, 0x02, 0x03, 0x04, 0x07, 0xB8, 0xBC, 0xFF)
         for ip_id in (0, 1, 2, 0x1234, 0xFFFE, 0xFFFF)]


@pytest.mark.parametrize("tool", TOOLS)
def test_mark_is_id_parity_and_checksum_stays_valid(art, tool):
    for tos, ip_id in CASES:
        before = frame(tos, ip_id)
        after = run_mark(tool, art, before)
        assert len(after) == len(before)
        ip = after[14:34]
        want_tos = (tos & ~MARK & 0xFF) | (MARK if ip_id & 1 else 0)
        assert ip[1] == want_tos, (tool, hex(tos), ip_id, hex(ip[1]))
        assert ip[1] & 0x03 == tos & 0x03  # ECN untouched
        assert ip_checksum(ip) == 0, (tool, hex(tos), ip_id)  # a valid header sums to 0
        # nothing else in the frame changes
        assert after[:15] == before[:15] and after[16:24] == before[16:24] and after[26:] == before[26:]


@pytest.mark.parametrize("tool", TOOLS)
def test_consecutive_segments_of_a_flow_always_differ(art, tool):
    marks = [run_mark(tool, art, frame(0, ip_id))[15] for ip_id in range(100, 108)]
    assert all(a != b for a, b in zip(marks, marks[1:]))


@pytest.mark.parametrize("tool", TOOLS)
def test_non_tcp_is_left_alone(art, tool):
    udp = frame(0x00, 1, proto=17)
    assert run_mark(tool, art, udp) == udp

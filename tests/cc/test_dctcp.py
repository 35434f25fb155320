"""DCTCP (cc/src/dctcp_tev.c): an algorithm beyond Linux 3.16, written once on the ports'
shim. Its behaviour through the host build (the same C source, CC_TARGET_HOST) on a
scripted ECN path (scripted_path.MarkingPath: a fixed fraction F of the acknowledged bytes
carries ECE), and its BPF and kernel-module builds (built only: nothing is loaded here)."""
from __future__ import annotations

import struct

import pytest
from hostsim import (
    ECN_DEMAND_CWR,
    ECN_IS_CE,
    ECN_NO_CE,
    ICSK_ACK_NOW,
    ICSK_ACK_TIMER,
    MSS,
    OPEN,
    TCP_CONG_NEEDS_ECN,
    Sim,
)
from scripted_path import DctcpTev, MarkingPath, ScriptedPath

import tcpeval.cc as cc
from tcpeval.backends import algorithms
from tcpeval.cc import _build, _common

ONE = DctcpTev.ONE
TOLERANCE = 0.02  # |alpha - F| over the last 100 windows of a 300-window run


def _alpha(sim: Sim) -> float:
    return sim.ca(DctcpTev).alpha / ONE


def _set_alpha(sim: Sim, alpha: float) -> None:
    sim.ca(DctcpTev).alpha = round(alpha * ONE)


# ---------------------------------------------------------------- name and build

def test_dctcp_is_named_apart_from_the_316_ports_and_from_the_kernels_own():
    assert "dctcp" not in cc.VARIANTS and cc.EXTRA_VARIANTS[0] == "dctcp"   # nv: test_nv.py
    assert cc.kernel_name("dctcp") == "dctcp_tev" and len("dctcp_tev") < 16
    assert cc.kernel_name("dctcp", impl="native") == "dctcp"   # Linux's own, where a kernel has it
    assert _common.source_path("dctcp").name == "dctcp_tev.c"
    # a port loaded() and the backends offer (a design names `variant: dctcp`), outside the
    # 3.16 list the paper's matrix and `tcpeval cc list` read
    assert "dctcp" in algorithms.ports() and _common.check_variant("dctcp") == "dctcp"
    assert tuple(cc.parameters()) == cc.VARIANTS                 # Table I is the 3.16 set's
    assert tuple(cc.parameters(extra=True)) == cc.VARIANTS + cc.EXTRA_VARIANTS


def test_parameters_parsed_equal_compiled(host_build):
    params = cc.parameters(extra=True)["dctcp"]
    assert {k: p["value"] for k, p in params.items()} == {"shift_g": 4, "alpha_on_init": 1024,
                                                           "min_ssthresh": 2}
    sim = Sim(host_build, "dctcp")
    for name, p in params.items():
        assert sim.param(name) == p["value"], name


def test_only_dctcp_asks_for_ecn(host_build):
    assert Sim(host_build, "dctcp").ops.flags == TCP_CONG_NEEDS_ECN
    for v in cc.VARIANTS:  # the shim's new flags field leaves the 3.16 ports without flags
        assert Sim(host_build, v).ops.flags == 0, v


def _elf_sections(data: bytes) -> dict[str, bytes]:
    """Section name -> contents of a little-endian ELF64 object."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in heads:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out[name] = data[h[4]:h[4] + h[5]] if h[1] != 8 else b""  # SHT_NOBITS: none
    return out


def test_bpf_object_builds_with_the_ecn_flag_and_the_receivers_immediate_ack(tmp_path):
    out = cc.build(tmp_path / "b")                  # clang -target bpf; nothing is loaded
    obj = _build.bpf_object("dctcp", out)
    assert obj.name == "dctcp_tev.bpf.o" and obj.exists()
    sec = _elf_sections(obj.read_bytes())
    ops = sec[".struct_ops"]
    name_at = ops.index(b"dctcp_tev\0")
    # tcp_congestion_ops: name[16], owner, list (16 bytes), key, flags
    assert struct.unpack_from("<I", ops, name_at + 16 + 8 + 16 + 4)[0] == TCP_CONG_NEEDS_ECN
    assert {"struct_ops/dctcp_tev_in_ack_event", "struct_ops/dctcp_tev_cwnd_event"} <= set(sec)
    # the receiving side's immediate ACK: a call of helper 116, bpf_tcp_send_ack()
    prog = sec["struct_ops/dctcp_tev_cwnd_event"]
    calls = {struct.unpack_from("<i", prog, i + 4)[0] for i in range(0, len(prog), 8)
             if prog[i] == 0x85 and prog[i + 1] >> 4 == 0}  # BPF_CALL of a helper (src_reg 0)
    assert 116 in calls
    assert sorted(p.name for p in (out / "bpf").glob("*316.bpf.o")) == \
        sorted(f"{v}316.bpf.o" for v in cc.VARIANTS)  # the ports' objects as before


def test_kernel_module_build_includes_dctcp(tmp_path):
    if cc.kernel_headers() is None:
        pytest.skip("no /usr/src/linux-headers-*-amd64 (apt-get install linux-headers-amd64)")
    kos = cc.build_modules(tmp_path / "k", extra=True)   # kbuild; nothing is inserted
    assert [k.name for k in kos] == [f"{v}316.ko" for v in cc.VARIANTS] + \
        [f"{cc.kernel_name(v)}.ko" for v in cc.EXTRA_VARIANTS]
    data = kos[len(cc.VARIANTS)].read_bytes()                 # dctcp_tev.ko
    assert b"license=GPL" in data and b"name=dctcp_tev" in data
    assert b"description=tcpeval: DCTCP (RFC 8257)" in data and b"Linux 3.16 dctcp" not in data
    assert [k.name for k in cc.build_modules(tmp_path / "k")] == [f"{v}316.ko" for v in cc.VARIANTS]


# ---------------------------------------------------------------- (1) alpha

@pytest.mark.parametrize("fraction", [0, 0.1, 0.5, 1])
def test_alpha_converges_to_the_marked_fraction(host_build, fraction):
    # F = 0 from alpha's initial 1 (a window grows there: slow start would have no end)
    path = MarkingPath(host_build, "dctcp", fraction, ssthresh=10 if fraction == 0 else 0x7FFFFFFF)
    alphas = []
    for _ in range(300):
        path.round()
        alphas.append(_alpha(path.sim))
    assert abs(path.marked_bytes / path.acked_bytes - fraction) < 0.001  # the path's own F
    tail = alphas[-100:]
    assert max(abs(a - fraction) for a in tail) <= TOLERANCE, (min(tail), max(tail))
    if fraction in (0, 1):
        assert set(tail) == {fraction}   # fixed point: exactly 0 and exactly 1


def test_alpha_moves_by_g_once_per_window_and_not_on_duplicate_acks(host_build):
    sim = Sim(host_build, "dctcp", cwnd=20, ssthresh=10, ecn=True, seq_bytes=True)
    assert _alpha(sim) == 1.0                       # alpha_on_init: 1024/1024
    for _ in range(9):                              # 18 of the window's 20 segments, unmarked
        sim.ack(2)
    assert _alpha(sim) == 1.0                       # the window is not over
    sim.ack(0, ece=True)                            # a duplicate ACK: no bytes, marked or not
    sim.ack(2)                                      # the window's last ACK
    assert _alpha(sim) == 1.0 - 1 / 16              # F = 0: alpha - g alpha


# ---------------------------------------------------------------- (2) the reduction

@pytest.mark.parametrize("alpha, ssthresh", [(0.1, 190), (0.5, 150), (1.0, 100)])
def test_a_window_with_marks_is_cut_once_by_alpha_over_two(host_build, alpha, ssthresh):
    sim = Sim(host_build, "dctcp", cwnd=200, ssthresh=100, ecn=True, seq_bytes=True)
    _set_alpha(sim, alpha)
    for _ in range(100):                            # a window of 200 segments, every ACK marked
        sim.ack(2, ece=True)
    assert sim.cwr_entries == 1                     # one reduction for the window
    assert sim.ssthresh == ssthresh                 # 200 (1 - alpha/2): halved only at alpha 1
    sim.ack(2)                                      # the ACK past the window ends the CWR:
    # cwnd = ssthresh, then this ACK's cong_avoid (3.16 slow start at cwnd == ssthresh: +1)
    assert sim.sk.icsk_ca_state == OPEN and sim.cwnd == ssthresh + 1
    reno = Sim(host_build, "reno", cwnd=200, ssthresh=100, ecn=True, seq_bytes=True)
    reno.ack(2, ece=True)
    assert reno.ssthresh == 100                     # what a non-DCTCP algorithm does with ECE


@pytest.mark.parametrize("fraction", [0.1, 0.5, 1])
def test_on_the_marking_path_each_reduction_is_cwnd_times_one_minus_alpha_over_two(host_build, fraction):
    path = MarkingPath(host_build, "dctcp", fraction, probe=_alpha)
    for _ in range(300):
        path.round()
    reds = path.reductions
    assert len(reds) >= 100
    for r in reds:                                  # alpha as the ssthresh hook saw it
        assert r.ssthresh == max(r.prior_cwnd - int(r.prior_cwnd * r.info / 2), 2), r
    for a, b in zip(reds, reds[1:]):                # at most one per window of data
        assert b.una > a.high_seq, (a, b)
    settled = reds[-50:]
    if fraction == 1:
        assert all(r.ssthresh == max(r.prior_cwnd - r.prior_cwnd // 2, 2) for r in reds)
    else:                                           # not halved: cut by about F/2
        assert all(r.ssthresh > r.prior_cwnd // 2 for r in settled if r.prior_cwnd > 2)
        assert all(abs(r.ssthresh - r.prior_cwnd * (1 - fraction / 2)) < 1 + TOLERANCE * r.prior_cwnd
                   for r in settled)


def test_the_guard_changes_nothing_on_a_sound_host(host_build):
    path = MarkingPath(host_build, "dctcp", 0.5)
    before = path.sim.guard_stats()
    for _ in range(100):
        path.round()
    after = path.sim.guard_stats()
    got = {k: after[k] - before[k] for k in after if k != "max_allowed_cwnd"}
    assert got.pop("acked_seen") == got.pop("acked_delivered") > 0
    assert got == {"reductions": path.sim.cwr_entries, "missed_reductions": 0, "missed_states": 0,
                   "foreign_ssthresh": 0, "foreign_cwnd": 0, "sent_over": 0,
                   "drained": 0, "drained_ms": 0}


@pytest.mark.parametrize("slot", [0, 1])
def test_a_skipped_reduction_whose_threshold_is_zero_does_not_drain_the_window(host_build, slot):
    # On the VM (2026-11-28) a skipped ssthresh() left the stack a threshold of 0 at a CWR
    # that began at the window the one before had begun at (DCTCP holds its window), so
    # prior_cwnd did not move; PRR drained the window to a segment and the flow crawled
    # back in congestion avoidance, once a second. The guard's next hook (this CWR's
    # first ACK) puts in the port's threshold; the window then follows a sound host's.
    faulty, sound = (MarkingPath(host_build, "dctcp", 0.1) for _ in range(2))
    for _ in range(300):
        assert faulty.round() == sound.round()
    before = faulty.sim.guard_stats()
    faulty.sim.skip_next_reduction_hooks(slot)
    entries = faulty.sim.cwr_entries
    windows = {id(p): [] for p in (faulty, sound)}
    while faulty.sim.cwr_entries == entries:        # up to the skipped reduction
        for p in (faulty, sound):
            windows[id(p)].append(p.round())
    for _ in range(30):
        for p in (faulty, sound):
            windows[id(p)].append(p.round())
    got = {k: v - before[k] for k, v in faulty.sim.guard_stats().items()}
    assert got["missed_reductions"] + got["foreign_ssthresh"] >= 1 and got["missed_states"] >= 1, got
    assert min(windows[id(faulty)]) >= 0.9 * min(windows[id(sound)]), (windows[id(faulty)], windows[id(sound)])
    assert faulty.sim.ssthresh >= 2


# ---------------------------------------------------------------- (3) no marks, loss

def test_without_marks_the_window_grows_as_renos(host_build):
    dctcp, reno = (MarkingPath(host_build, v, 0.0, ssthresh=40) for v in ("dctcp", "reno"))
    windows = []
    for _ in range(120):
        windows.append(dctcp.round())
        assert windows[-1] == reno.round()          # round for round reno316's window
    assert dctcp.sim.cwnd == reno.sim.cwnd and dctcp.reductions == reno.reductions == []
    assert windows[:4] == [10, 20, 40, 41]          # slow start (3.16: stops at ssthresh + 1),
    assert 0.45 <= (windows[-1] - 41) / (120 - 4) <= 0.55  # then ~0.5 MSS per RTT (delayed ACKs)


def test_on_a_lossy_path_without_marks_it_is_reno(host_build):
    # losses halve (RFC 8257 3.5), whatever alpha says: window for window as reno316
    reno = ScriptedPath(host_build, "reno", rtt_us=200, p=1e-4).run(3)
    dctcp = ScriptedPath(host_build, "dctcp", rtt_us=200, p=1e-4, ecn=True).run(3)
    assert (dctcp.mean_cwnd, dctcp.reductions, dctcp.lost) == (reno.mean_cwnd, reno.reductions, reno.lost)
    assert dctcp.reductions > 50


def test_loss_halves_and_undo_restores_the_window_before_it(host_build):
    sim = Sim(host_build, "dctcp", cwnd=100, ssthresh=50, ecn=True, seq_bytes=True)
    _set_alpha(sim, 0.1)
    assert sim.loss() == (100, 50)                  # fast recovery: halved, not 95
    sim = Sim(host_build, "dctcp", cwnd=100, ssthresh=50, ecn=True, seq_bytes=True)
    _set_alpha(sim, 0.1)
    assert sim.timeout(event=True) == (100, 50)     # a timeout (CA_EVENT_LOSS): halved
    assert sim.undo() == 100                        # max(cwnd, the window before the loss)


def test_without_ecn_negotiated_a_reduction_halves_like_reno(host_build):
    sim = Sim(host_build, "dctcp", cwnd=100, ssthresh=50, ecn=False)
    _set_alpha(sim, 0.1)
    assert sim.ops.ssthresh(sim.p) == 50
    sim = Sim(host_build, "dctcp", cwnd=100, ssthresh=50, ecn=True)
    _set_alpha(sim, 0.1)
    assert sim.ops.ssthresh(sim.p) == 95


# ---------------------------------------------------------------- the receiving side

def test_receiver_echoes_ce_per_segment_and_acks_the_earlier_state_at_once(host_build):
    sim = Sim(host_build, "dctcp", ecn=True)
    s = sim.sk

    def segment(ce: bool, delayed_ack_pending: bool):
        s.rcv_nxt += MSS                            # the stack queued the segment, then tells
        s.icsk_ack_pending = ICSK_ACK_TIMER if delayed_ack_pending else 0
        sim.ops.cwnd_event(sim.p, ECN_IS_CE if ce else ECN_NO_CE)
        return s.icsk_ack_pending & ICSK_ACK_NOW, s.ecn_flags & ECN_DEMAND_CWR

    assert segment(False, False) == (0, 0)          # no change of state: nothing to do
    assert segment(False, True) == (0, 0) and s.host_acks_sent == 0
    before_ce = s.rcv_nxt
    # CE while an ACK for the unmarked segment is delayed: that ACK goes out at once,
    # without ECE, up to the unmarked segment; the CE segment is acknowledged at once, with ECE
    assert segment(True, True) == (ICSK_ACK_NOW, ECN_DEMAND_CWR)
    assert (s.host_acks_sent, s.host_ack_rcv_nxt, s.host_ack_ecn_flags & ECN_DEMAND_CWR) == (1, before_ce, 0)
    assert segment(True, True) == (0, ECN_DEMAND_CWR) and s.host_acks_sent == 1  # CE goes on
    before_no_ce = s.rcv_nxt
    assert segment(False, True) == (ICSK_ACK_NOW, 0)  # and ends: the delayed ACK carries ECE
    assert (s.host_acks_sent, s.host_ack_rcv_nxt, s.host_ack_ecn_flags & ECN_DEMAND_CWR) == \
        (2, before_no_ce, ECN_DEMAND_CWR)
    assert segment(True, False) == (ICSK_ACK_NOW, ECN_DEMAND_CWR)  # nothing delayed: no extra ACK
    assert s.host_acks_sent == 2
    assert sim.ca(DctcpTev).ce_state == 1 and sim.ca(DctcpTev).prior_rcv_nxt == s.rcv_nxt

"""TCP-NV (cc/src/nv_tev.c): an algorithm beyond Linux 3.16, written once on the ports' shim.
Its behaviour through the host build (the same C source, CC_TARGET_HOST) on scripted paths
(scripted_path.ScriptedPath: a bottleneck whose queue lengthens the round trip, drop-tail
beyond its buffer), the base-RTT parameter the loader sets in place of Linux's sock_ops
call, and its BPF and kernel-module builds (built only: nothing is loaded here)."""
from __future__ import annotations

import ctypes as C

import pytest
from hostsim import INFINITE_SSTHRESH, Sim, library
from scripted_path import WIRE_MSS, NvTev, ScriptedPath

import tcpeval.cc as cc
from tcpeval.backends import algorithms
from tcpeval.cc import _build, _common

PAD = 10                      # nv_tev's pad: the queue (packets) it tolerates
C_PKTS, BASE_US = 50, 5000    # the bottleneck: 50 packets per base RTT of 5 ms
BUFFER = 400                  # packets: room for slow start's overshoot and for Reno to fill
RATE = C_PKTS * WIRE_MSS * 8 / (BASE_US / 1e6)
DEFAULTS = {"pad": 10, "pad_buffer": 2, "reset_period": 5, "min_cwnd": 2, "cong_dec_mult": 38,
            "ssthresh_factor": 8, "rtt_factor": 128, "loss_dec_factor": 512,
            "cwnd_growth_rate_neg": 8, "cwnd_growth_rate_pos": 0, "dec_eval_min_calls": 60,
            "inc_eval_min_calls": 20, "ssthresh_eval_min_calls": 30, "stop_rtt_cnt": 10,
            "rtt_min_cnt": 2, "base_rtt_us": 0}


def _queueing_path(build, variant, **kw):
    return ScriptedPath(build, variant, rate_bps=RATE, rtt_us=BASE_US, p=0,
                        buffer_segments=BUFFER, seq_bytes=True, **kw)


def _rounds(path, n):
    """(window, round trip in us) of n rounds."""
    return [(cwnd, dur) for cwnd, dur, _ in (path.round() for _ in range(n))]


# ---------------------------------------------------------------- name, parameters, build

def test_nv_is_named_apart_from_the_316_ports_and_from_the_kernels_own():
    assert "nv" not in cc.VARIANTS and "nv" in cc.EXTRA_VARIANTS and "dctcp" in cc.EXTRA_VARIANTS
    assert cc.kernel_name("nv") == "nv_tev" and len("nv_tev") < 16
    assert cc.kernel_name("nv", impl="native") == "nv"      # Linux's own tcp_nv, where a kernel has it
    assert _common.source_path("nv").name == "nv_tev.c"
    assert "nv" in algorithms.ports() and _common.check_variant("nv") == "nv"
    assert tuple(cc.parameters()) == cc.VARIANTS            # Table I stays the 3.16 set's


def test_parameters_parsed_equal_compiled(host_build):
    params = cc.parameters(extra=True)["nv"]
    assert {k: p["value"] for k, p in params.items()} == DEFAULTS
    sim = Sim(host_build, "nv")
    for name, p in params.items():
        assert sim.param(name) == p["value"], name
    # the one the loader sets: a variable whose default is the CC_PARAM's
    assert C.c_uint.in_dll(library(host_build, "nv"), "cc_lp_base_rtt_us").value == 0


def test_bpf_object_builds_with_the_base_rtt_the_loader_sets(tmp_path):
    out = cc.build(tmp_path / "b")                 # clang -target bpf; nothing is loaded
    obj = _build.bpf_object("nv", out)
    assert obj.name == "nv_tev.bpf.o" and obj.exists()
    data = obj.read_bytes()
    assert b"nv_tev\0" in data and b"struct_ops/nv_tev_pkts_acked" in data
    # a read-only datum in .rodata (BTF names it), which tevcc-loader's base_rtt_us=N rewrites
    assert b"cc_lp_base_rtt_us\0" in data and b".rodata" in data
    assert sorted(p.name for p in (out / "bpf").glob("*316.bpf.o")) == \
        sorted(f"{v}316.bpf.o" for v in cc.VARIANTS)  # the ports' objects as before
    assert (out / "bpf" / "dctcp_tev.bpf.o").exists()


def test_kernel_module_build_includes_nv(tmp_path):
    if cc.kernel_headers() is None:
        pytest.skip("no /usr/src/linux-headers-*-amd64 (apt-get install linux-headers-amd64)")
    kos = cc.build_modules(tmp_path / "k", extra=True)   # kbuild; nothing is inserted
    names = [k.name for k in kos]
    assert names[:len(cc.VARIANTS)] == [f"{v}316.ko" for v in cc.VARIANTS]
    assert {"dctcp_tev.ko", "nv_tev.ko"} <= set(names)
    data = kos[names.index("nv_tev.ko")].read_bytes()
    assert b"license=GPL" in data and b"name=nv_tev" in data
    assert b"description=tcpeval: TCP-NV" in data and b"Linux 3.16 nv" not in data
    assert b"parm=base_rtt_us:" in data and b"parmtype=base_rtt_us:uint" in data


# ---------------------------------------------------------------- (1) queue growth

def test_on_a_queueing_path_nv_keeps_a_pad_of_queue_while_reno_fills_the_buffer(host_build):
    nv = _queueing_path(host_build, "nv")
    nv_rounds = _rounds(nv, 300)
    # slow start ends on the queue it builds, not on a loss: NV never loses here
    assert nv.reductions == 0 and nv.lost_total == 0
    assert nv.sim.ssthresh < INFINITE_SSTHRESH
    settled = nv_rounds[-100:]
    # the window: the path's C packets per base RTT plus NV's pad (and at most a few more)
    assert all(C_PKTS + PAD - 2 <= cwnd <= C_PKTS + PAD + 3 for cwnd, _ in settled), settled
    # the round trip: the base plus that pad's queueing, never more than a few packets' worth
    assert all(BASE_US < dur <= BASE_US * (C_PKTS + PAD + 3) / C_PKTS for _, dur in settled)
    assert nv.sim.ca(NvTev).min_rtt == BASE_US      # the minimum it measured: the base RTT

    reno = _queueing_path(host_build, "reno")
    reno_rounds = _rounds(reno, 300)
    assert reno.reductions >= 1 and reno.lost_total > 0   # it fills the buffer, to a loss
    limit = C_PKTS + BUFFER
    assert max(cwnd for cwnd, _ in reno_rounds) > limit
    assert max(dur for _, dur in reno_rounds[-100:]) > BASE_US * 5    # a standing queue
    assert min(cwnd for cwnd, _ in reno_rounds[-100:]) > 4 * max(cwnd for cwnd, _ in settled)


def test_the_guard_changes_nothing_on_the_queueing_path(host_build):
    path = _queueing_path(host_build, "nv")
    before = path.sim.guard_stats()
    _rounds(path, 100)
    after = path.sim.guard_stats()
    got = {k: after[k] - before[k] for k in after if k != "max_allowed_cwnd"}
    assert got.pop("acked_seen") == got.pop("acked_delivered") > 0
    assert got == {"reductions": 0, "missed_reductions": 0, "missed_states": 0,
                   "foreign_ssthresh": 0, "foreign_cwnd": 0, "sent_over": 0,
                   "drained": 0, "drained_ms": 0}


# ---------------------------------------------------------------- (2) no queueing

def _unqueued(build, variant, **kw):
    # a link far faster than the window: the round trip stays the base
    return ScriptedPath(build, variant, rate_bps=1e13, rtt_us=200, p=0, seq_bytes=True, **kw)


def test_without_queueing_nv_grows_as_reno(host_build):
    nv, reno = (_unqueued(host_build, v, ssthresh=40) for v in ("nv", "reno"))
    windows = []
    for _ in range(120):
        windows.append(nv.round()[0])
        assert windows[-1] == reno.round()[0]       # round for round reno316's window
    assert windows[:4] == [10, 20, 40, 41]          # slow start (3.16: stops at ssthresh + 1),
    # then congestion avoidance: never down, up within every three round trips (3.16's
    # ACK counting with delayed ACKs: ~0.5 MSS per RTT)
    assert all(b >= a for a, b in zip(windows, windows[1:]))
    assert all(windows[i + 3] > windows[i] for i in range(3, 117))
    assert 0.45 <= (windows[-1] - 41) / (120 - 4) <= 0.55
    assert nv.sim.ca(NvTev).allow_growth == 1


def test_without_queueing_slow_start_does_not_end_early(host_build):
    nv, reno = (_unqueued(host_build, v) for v in ("nv", "reno"))
    windows = [nv.round()[0] for _ in range(9)]
    assert windows == [reno.round()[0] for _ in range(9)] == [10 * 2 ** i for i in range(9)]
    assert nv.sim.ssthresh == INFINITE_SSTHRESH


# ---------------------------------------------------------------- (3) loss

def test_loss_halves_as_reno(host_build):
    for cwnd in (3, 10, 101, 4000):
        nv, reno = (Sim(host_build, v, cwnd=cwnd, ssthresh=cwnd // 2, seq_bytes=True)
                    for v in ("nv", "reno"))
        assert nv.loss() == reno.loss() == (cwnd, max(cwnd // 2, 2))
    nv = Sim(host_build, "nv", cwnd=100, ssthresh=50, seq_bytes=True)
    assert nv.timeout(event=True) == (100, 50)      # a timeout: halved too
    assert nv.undo() == 100                         # 3.16's default undo: max(cwnd, 2 ssthresh)


def test_after_a_loss_growth_waits_for_a_round_without_queue(host_build):
    path = _unqueued(host_build, "nv", ssthresh=40)
    for _ in range(20):
        path.round()
    sim = path.sim
    prior, ssthresh = sim.loss()
    assert ssthresh == prior // 2 and sim.cwnd == ssthresh
    assert sim.ca(NvTev).allow_growth == 0          # every reduction stops growth
    path.round()
    assert sim.cwnd == ssthresh                     # no growth yet: evidence first
    for _ in range(6):
        path.round()
    assert sim.ca(NvTev).allow_growth == 1 and sim.cwnd > ssthresh


# ---------------------------------------------------------------- (4) base RTT

def test_the_base_rtt_parameter_is_the_minimum_rtt_at_start(host_build):
    sim = Sim(host_build, "nv", load_params={"base_rtt_us": 4000}, seq_bytes=True)
    ca = sim.ca(NvTev)
    assert (ca.base_rtt, ca.min_rtt) == (4000, 4000)     # before any sample
    assert ca.lower_bound_rtt == 4000 * 205 // 256       # 80 %: samples below are not believed
    sim.ack(2, rtt_us=6000, dt_us=100)                   # an inflated first sample
    assert ca.min_rtt == 4000                            # (Linux bounds samples by the base too)
    for _ in range(3):                                   # too small to be true
        sim.ack(2, rtt_us=1000, dt_us=100)
    assert ca.avg_rtt < ca.lower_bound_rtt and ca.min_rtt == ca.lower_bound_rtt
    # unset (0): nothing before the first sample, then the sample itself
    sim = Sim(host_build, "nv", seq_bytes=True)
    ca = sim.ca(NvTev)
    assert (ca.base_rtt, ca.min_rtt) == (0, NvTev.NO_RTT)
    sim.ack(2, rtt_us=6000, dt_us=100)
    assert ca.min_rtt == 6000


def test_with_the_base_rtt_set_an_inflated_start_is_not_taken_for_the_base(host_build):
    # the path's queue already stands when the flow starts (a first window above C): without
    # the base RTT NV takes the inflated first round trip for the base
    start = 3 * C_PKTS
    kw = dict(rate_bps=RATE, rtt_us=BASE_US, p=0, buffer_segments=BUFFER, seq_bytes=True)
    measured = ScriptedPath(host_build, "nv", **kw)
    told = ScriptedPath(host_build, "nv", load_params={"base_rtt_us": BASE_US}, **kw)
    for path in (measured, told):
        path.sim.allow_window(start)
        for _ in range(200):
            path.round()
    assert told.sim.ca(NvTev).min_rtt == BASE_US
    assert C_PKTS + PAD - 2 <= told.sim.cwnd <= C_PKTS + PAD + 3
    assert measured.sim.ca(NvTev).min_rtt > BASE_US and measured.sim.cwnd > told.sim.cwnd


# ---------------------------------------------------------------- the rolling minimum

def test_the_minimum_rtt_restarts_each_period(host_build):
    sim = Sim(host_build, "nv", cwnd=10, ssthresh=5, seq_bytes=True)
    ca = sim.ca(NvTev)
    t0 = sim.sk.tcp_mstamp

    def run_until(seconds, rtt_us):
        while sim.sk.tcp_mstamp - t0 < seconds * 1e6:
            sim.rtt(rtt_us, pkts_per_ack=sim.cwnd)  # one ACK a round trip

    run_until(1.0, 10_000)
    assert ca.min_rtt == 10_000
    run_until(1.9, 30_000)                         # the path's delay grew
    assert ca.min_rtt == 10_000
    run_until(2.5, 30_000)                         # the first period (2 s) ended with 10 ms in it
    # (the averaged RTT settles a microsecond short of 30 ms: integer EWMA)
    assert ca.min_rtt == 10_000 and abs(ca.min_rtt_new - 30_000) <= 1
    # the next ends 5 s x [3/4, 5/4) later: from then on the minimum is the new delay
    run_until(2 + 5 * 0.75 - 0.1, 30_000)
    assert ca.min_rtt == 10_000
    run_until(2 + 5 * 1.25 + 0.4, 30_000)
    assert abs(ca.min_rtt - 30_000) <= 1


def test_a_minimum_lowered_at_a_periods_end_drains_the_queue_at_once(host_build):
    """Slow start overshoots a one-BDP buffer to a loss; back in Open NV takes the first
    sample -- the queue the halved window still holds -- for its minimum (Linux's NV does
    the same). The first period's end brings back the base RTT, which slow start's early
    rounds saw; from then on the highest rate since the last decision needs only the BDP,
    and NV drains to its pad. (Keeping the window that rate gave at the old minimum, as this
    port once did, left the queue between NV's two thresholds for as long as a run.)"""
    c_pkts, base_us = 83, 2000
    path = ScriptedPath(host_build, "nv", rate_bps=c_pkts * WIRE_MSS * 8 / (base_us / 1e6),
                        rtt_us=base_us, p=0, buffer_segments=c_pkts, seq_bytes=True)
    ca = path.sim.ca(NvTev)
    t0, rounds = path.sim.sk.tcp_mstamp, []
    while path.sim.sk.tcp_mstamp - t0 < 1.9e6:           # before the first period ends (2 s)
        rounds.append(path.round()[:2])
    assert path.reductions >= 1 and ca.min_rtt > base_us * 1.3      # a loss, then a queue's RTT
    assert min(cwnd for cwnd, _ in rounds[-100:]) > c_pkts + 2 * PAD
    losses = path.reductions
    while path.sim.sk.tcp_mstamp - t0 < 3.5e6:           # the first period ended at 2 s
        rounds.append(path.round()[:2])
    assert ca.min_rtt == base_us and path.reductions == losses      # drained without a loss
    settled = rounds[-100:]     # its pad and a few packets more (the old window: 49 more)
    assert all(c_pkts + PAD - 2 <= cwnd <= c_pkts + PAD + 5 for cwnd, _ in settled), settled
    assert all(dur <= base_us * (c_pkts + PAD + 5) / c_pkts for _, dur in settled)

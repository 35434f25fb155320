"""Drive a port's host build (cc/src compiled with CC_TARGET_HOST) with synthetic
ACK and loss sequences, calling the callbacks in the order a 6.x stack does."""
from __future__ import annotations

import ctypes as C
from functools import lru_cache
from pathlib import Path

from tcpeval.cc._common import EXTRA_KERNEL_NAMES
from tcpeval.cc._guard import FIELDS as GUARD_FIELDS

INFINITE_SSTHRESH = 0x7FFFFFFF
OPEN, DISORDER, CWR, RECOVERY, LOSS = range(5)
# enum tcp_ca_event and tcp_ca_ack_event_flags (6.x)
TX_START, CWND_RESTART, COMPLETE_CWR, EV_LOSS, ECN_NO_CE, ECN_IS_CE = range(6)
ACK_SLOWPATH, ACK_WIN_UPDATE, ACK_ECE = 1, 2, 4
# tp->ecn_flags (TCP_ECN_OK, TCP_ECN_DEMAND_CWR), icsk_ack.pending (ICSK_ACK_TIMER, _NOW)
ECN_OK, ECN_DEMAND_CWR = 1, 4
ICSK_ACK_TIMER, ICSK_ACK_NOW = 2, 16
TCP_CONG_NEEDS_ECN = 2
MSS = 1448


class Sock(C.Structure):  # mirrors the host struct in cc/include/cc316.h
    _fields_ = [("icsk_ca_priv", C.c_uint64 * 13), ("icsk_ca_state", C.c_uint8),
                ("is_cwnd_limited", C.c_uint8), ("_pad", C.c_uint8 * 2),
                ("snd_cwnd", C.c_uint32), ("snd_cwnd_cnt", C.c_uint32),
                ("snd_ssthresh", C.c_uint32), ("snd_cwnd_clamp", C.c_uint32),
                ("snd_nxt", C.c_uint32), ("max_packets_out", C.c_uint32),
                ("prior_cwnd", C.c_uint32), ("prior_ssthresh", C.c_uint32),
                ("undo_marker", C.c_uint32), ("delivered", C.c_uint32),
                ("tcp_mstamp", C.c_uint64), ("snd_una", C.c_uint32), ("srtt_us", C.c_uint32),
                ("mss_cache", C.c_uint32), ("packets_out", C.c_uint32),
                ("rcv_tsval", C.c_uint32), ("rcv_tsecr", C.c_uint32),  # rx_opt
                ("segs_out", C.c_uint32), ("sacked_out", C.c_uint32), ("lost_out", C.c_uint32),
                ("retrans_out", C.c_uint32),
                # ECN and the receiving side (dctcp_tev)
                ("rcv_nxt", C.c_uint32), ("ecn_flags", C.c_uint8), ("_pad2", C.c_uint8 * 3),
                ("icsk_ack_pending", C.c_uint8), ("_pad_ack", C.c_uint8 * 3),
                # the host's record of the immediate ACKs a hook sent (cc_send_ack)
                ("host_acks_sent", C.c_uint32), ("host_ack_rcv_nxt", C.c_uint32),
                ("host_ack_ecn_flags", C.c_uint8), ("_pad3", C.c_uint8 * 3)]


class GuardStats(C.Structure):  # cc316_guard_stats in cc/include/cc316.h: its u64s in the
    # order the runner's reader names them (tcpeval.cc._guard.FIELDS)
    _fields_ = [(name, C.c_uint64) for name in GUARD_FIELDS]


class Guard(C.Structure):  # struct cc316_guard in cc/include/cc316.h: the private area's tail
    _fields_ = [("prior_cwnd", C.c_uint32), ("top_cwnd", C.c_uint32), ("ceiling", C.c_uint32),
                ("delivered", C.c_uint32), ("segs_out", C.c_uint32), ("state", C.c_uint8), ("armed", C.c_uint8), ("seen_ms", C.c_uint16)]


class AckSample(C.Structure):
    _fields_ = [("pkts_acked", C.c_uint32), ("rtt_us", C.c_int32), ("in_flight", C.c_uint32)]


SK = C.POINTER(Sock)


class Ops(C.Structure):
    _fields_ = [("ssthresh", C.CFUNCTYPE(C.c_uint32, SK)),
                ("cong_avoid", C.CFUNCTYPE(None, SK, C.c_uint32, C.c_uint32)),
                ("set_state", C.CFUNCTYPE(None, SK, C.c_uint8)),
                ("pkts_acked", C.CFUNCTYPE(None, SK, C.POINTER(AckSample))),
                ("undo_cwnd", C.CFUNCTYPE(C.c_uint32, SK)),
                ("init", C.CFUNCTYPE(None, SK)),
                ("cwnd_event", C.CFUNCTYPE(None, SK, C.c_int)),
                ("in_ack_event", C.CFUNCTYPE(None, SK, C.c_uint32)),
                ("name", C.c_char_p),
                ("flags", C.c_uint32)]


@lru_cache(maxsize=None)
def library(build_dir: Path, variant: str):
    """lib<variant>316.so (lib<name>.so for an algorithm beyond 3.16: EXTRA_KERNEL_NAMES)."""
    stem = EXTRA_KERNEL_NAMES.get(variant, f"{variant}316")
    lib = C.CDLL(str(Path(build_dir) / "host" / f"lib{stem}.so"))
    lib.cc_host_sock_size.restype = C.c_size_t
    assert lib.cc_host_sock_size() == C.sizeof(Sock), "host struct layout mismatch"
    return lib


class Sim:
    """One connection. Time in microseconds; sequence numbers count packets (snd_una: bytes,
    as the kernel's), or with ``seq_bytes`` bytes like the kernel's, snd_nxt and the ACK's
    sequence number too (an algorithm that compares snd_nxt with snd_una: dctcp_tev, nv_tev).
    With ``ecn`` the connection negotiated ECN (tp->ecn_flags TCP_ECN_OK, before init).
    ``load_params``: {name: value} for an algorithm's load-time parameters (CC_LOAD_PARAM:
    the library's cc_lp_<name>), set for this connection's init and restored after it."""

    def __init__(self, build_dir, variant, hz=250, cwnd=10, ssthresh=INFINITE_SSTHRESH,
                 now_us=10_000_000, dilation=1, srtt_us=0, ecn=False, seq_bytes=False,
                 load_params=None):
        self.lib = library(build_dir, variant)
        C.c_uint.in_dll(self.lib, "cc_hz").value = hz
        C.c_uint.in_dll(self.lib, "cc_dilation").value = dilation
        self.ops = Ops.in_dll(self.lib, "cc_ops")
        self.sk = Sock()
        self.p = C.pointer(self.sk)
        s = self.sk
        s.snd_cwnd, s.snd_ssthresh, s.snd_cwnd_clamp = cwnd, ssthresh, 0xFFFFFFFF // 128
        s.is_cwnd_limited, s.tcp_mstamp = 1, now_us
        s.mss_cache = MSS
        s.srtt_us = srtt_us << 3  # the handshake's RTT sample, if any (6.x: 8 x srtt)
        self.una = 0
        self.seq = MSS if seq_bytes else 1  # snd_nxt's unit
        s.snd_nxt = cwnd * self.seq
        s.ecn_flags = ECN_OK if ecn else 0
        self.cwr = None  # a CWR this Sim entered on ECE: [high_seq, prr_delivered, prr_out]
        self.cwr_entries = 0
        self.skipped_slot = None  # see skip_next_reduction_hooks
        saved = {}
        try:
            for name, value in (load_params or {}).items():
                var = C.c_uint.in_dll(self.lib, f"cc_lp_{name}")
                saved[name] = var.value
                var.value = value
            self.ops.init(self.p)
        finally:
            for name, value in saved.items():
                C.c_uint.in_dll(self.lib, f"cc_lp_{name}").value = value

    def param(self, name):
        return C.c_int.in_dll(self.lib, f"cc_param_{name}").value

    @property
    def cwnd(self):
        return self.sk.snd_cwnd

    @property
    def ssthresh(self):
        return self.sk.snd_ssthresh

    def ca(self, ctype):
        return ctype.from_buffer(self.sk.icsk_ca_priv)

    @property
    def nxt(self) -> int:
        """snd_nxt in packets (in bytes, snd_nxt wraps at 2^32: taken relative to una)."""
        if self.seq == 1:
            return self.sk.snd_nxt
        d = (self.sk.snd_nxt - self.una * self.seq) & 0xFFFFFFFF
        return self.una + (d - (1 << 32) if d >= 1 << 31 else d) // self.seq

    def ack(self, pkts=1, rtt_us=-1, dt_us=0, slow=False, ece=False):
        """One ACK for `pkts` packets (6.x order): the RTT estimator, in_ack_event (fast
        path, or with `slow` the slow path; with `ece` the slow path with CA_ACK_ECE),
        pkts_acked, then cong_avoid (in every state but CWR and Recovery, Loss included).
        With `ece`, and while a CWR it entered lasts, what 6.x tcp_fastretrans_alert does
        between the two: the end of the CWR once snd_una is past high_seq (cwnd =
        ssthresh, COMPLETE_CWR, Open), then on ECE in Open tcp_enter_cwr (the ssthresh
        hook, set_state(CWR)); in that CWR, PRR (tcp_cwnd_reduction) instead of
        cong_avoid."""
        s = self.sk
        s.tcp_mstamp += int(dt_us)
        self.una += pkts
        s.delivered = (s.delivered + pkts) & 0xFFFFFFFF
        s.packets_out = max(0, self.nxt - self.una)  # sent before this ACK, not yet ACKed
        s.snd_una = (self.una * MSS) & 0xFFFFFFFF
        s.max_packets_out = s.snd_cwnd
        if rtt_us > 0:  # tcp_rtt_estimator: srtt_us = 8 x srtt, gain 1/8
            s.srtt_us = int(rtt_us) << 3 if not s.srtt_us else \
                s.srtt_us + int(rtt_us) - (s.srtt_us >> 3)
        if self.ops.in_ack_event:
            self.ops.in_ack_event(self.p, ACK_SLOWPATH | ACK_ECE if ece else
                                  ACK_SLOWPATH if slow else ACK_WIN_UPDATE)
        if self.ops.pkts_acked:
            self.ops.pkts_acked(self.p, C.byref(AckSample(pkts, int(rtt_us), s.snd_cwnd)))
        if self.cwr is not None or ece:
            self._ecn_state(ece)
        if self.cwr is not None and s.icsk_ca_state == CWR:
            self._prr(pkts)
        elif s.icsk_ca_state not in (CWR, RECOVERY):  # 6.x tcp_cong_control: PRR there instead
            self.ops.cong_avoid(self.p, (self.una * self.seq) & 0xFFFFFFFF, pkts)
        if self.una + s.snd_cwnd > self.nxt:  # keep the window full
            sent = self.una + s.snd_cwnd - self.nxt
            s.segs_out = (s.segs_out + sent) & 0xFFFFFFFF
            s.snd_nxt = ((self.una + s.snd_cwnd) * self.seq) & 0xFFFFFFFF
            if self.cwr is not None:
                self.cwr[2] += sent  # prr_out

    def _ecn_state(self, ece: bool) -> None:
        """tcp_fastretrans_alert's part for ECN: the end of this Sim's CWR (CWR is held
        until snd_una passes high_seq, so that the CWR flag reached the receiver), then
        tcp_enter_cwr on an ECE in Open or Disorder."""
        s = self.sk
        if self.cwr is not None and s.icsk_ca_state == CWR and self.una > self.cwr[0]:
            s.snd_cwnd = s.snd_ssthresh          # tcp_end_cwnd_reduction
            if self.ops.cwnd_event:
                self.ops.cwnd_event(self.p, COMPLETE_CWR)
            if self.ops.set_state:
                self.ops.set_state(self.p, OPEN)
            s.icsk_ca_state = OPEN
            self.cwr = None
        if ece and s.icsk_ca_state in (OPEN, DISORDER):
            s.undo_marker = 0                    # tcp_enter_cwr: no undo of an ECN reduction
            self._reduce(CWR, prior_ssthresh=0)
            self.cwr = [self.nxt, 0, 0]          # high_seq = snd_nxt; prr_delivered, prr_out
            self.cwr_entries += 1

    def _prr(self, delivered: int) -> None:
        """6.x tcp_cwnd_reduction for this ACK: proportional rate reduction towards
        ssthresh (the slow-start bound once in flight is below it)."""
        s, cwr = self.sk, self.cwr
        in_flight = max(0, self.nxt - self.una)
        cwr[1] += delivered
        delta = s.snd_ssthresh - in_flight
        if delta < 0:
            sndcnt = (s.snd_ssthresh * cwr[1] + s.prior_cwnd - 1) // s.prior_cwnd - cwr[2]
        else:
            sndcnt = min(delta, max(cwr[1] - cwr[2], delivered) + 1)
        sndcnt = max(sndcnt, 0 if cwr[2] else 1)
        s.snd_cwnd = in_flight + sndcnt

    def rtt(self, rtt_us, pkts_per_ack=1, rtt_sample_us=None):
        """A round trip: one window of ACKs spread evenly over rtt_us."""
        n = max(1, self.cwnd // pkts_per_ack)
        for _ in range(n):
            self.ack(pkts_per_ack, rtt_us if rtt_sample_us is None else rtt_sample_us,
                     rtt_us / n)

    def guard(self) -> Guard:
        """The port's guard record, at the end of its private area."""
        return Guard.from_buffer(self.sk.icsk_ca_priv, C.sizeof(self.sk.icsk_ca_priv) - C.sizeof(Guard))

    def allow_window(self, cwnd: int) -> None:
        """Move the connection to ``cwnd`` as if the port had grown it there itself."""
        self.sk.snd_cwnd = cwnd
        g = self.guard()
        g.top_cwnd, g.ceiling = cwnd, max(g.ceiling, cwnd)

    def guard_stats(self) -> dict:
        g = GuardStats.in_dll(self.lib, "cc316_guard_stats")
        return {name: getattr(g, name) for name, _ in GuardStats._fields_}

    def reset_guard_maxima(self) -> None:
        """Zero the maxima among the counters, as a fresh registration has them (the host
        build's counters are one set for every test that loads it)."""
        GuardStats.in_dll(self.lib, "cc316_guard_stats").max_allowed_cwnd = 0

    def loss(self):
        """Fast recovery as the stack does it: prior_cwnd, the ssthresh hook, counter
        reset, the Recovery state, and (after recovery, tcp_end_cwnd_reduction) cwnd =
        ssthresh, the COMPLETE_CWR event, back in Open."""
        s = self.sk
        prior = self._reduce(RECOVERY)
        s.snd_cwnd = s.snd_ssthresh
        if self.ops.cwnd_event:
            self.ops.cwnd_event(self.p, COMPLETE_CWR)
        if self.ops.set_state:
            self.ops.set_state(self.p, OPEN)
        s.icsk_ca_state = OPEN
        return prior, s.snd_ssthresh

    def timeout(self, event: bool = False):
        """A retransmission timeout as 6.x tcp_enter_loss does it from Open: prior_cwnd,
        the ssthresh hook, the Loss state, and a window of what is in flight plus one (1:
        everything outstanding is marked lost). With `event`, also CA_EVENT_LOSS, which
        6.x sends right after the ssthresh hook (left out by default: the 3.16 ports'
        tests were written without it)."""
        s = self.sk
        event_hook = (lambda: self.ops.cwnd_event(self.p, EV_LOSS)) \
            if event and self.ops.cwnd_event else None
        prior = self._reduce(LOSS, after_ssthresh=event_hook)
        s.snd_cwnd = 1
        return prior, s.snd_ssthresh

    def skip_next_reduction_hooks(self, slot: int) -> None:
        """The host skips the port's hooks at the next reduction's start (ssthresh() and
        set_state(), as this project's VM does now and then): the stack takes `slot`, what
        the skipped program's return slot held, as the threshold."""
        self.skipped_slot = slot

    def _reduce(self, state: int, prior_ssthresh: int | None = None, after_ssthresh=None) -> int:
        """The start of a reduction as the stack does it: prior_ssthresh (tcp_enter_cwr: 0),
        prior_cwnd, the ssthresh hook, counter reset, set_state and the new state; returns
        prior_cwnd."""
        s = self.sk
        prior = s.snd_cwnd
        s.prior_ssthresh = max(s.snd_ssthresh, (prior >> 1) + (prior >> 2)) \
            if prior_ssthresh is None else prior_ssthresh
        s.prior_cwnd = prior
        skipped, self.skipped_slot = self.skipped_slot, None
        s.snd_ssthresh = self.ops.ssthresh(self.p) if skipped is None else skipped
        if after_ssthresh:
            after_ssthresh()
        s.snd_cwnd_cnt = 0
        if self.ops.set_state and skipped is None:
            self.ops.set_state(self.p, state)
        s.icsk_ca_state = state
        return prior

    def undo(self):
        return self.ops.undo_cwnd(self.p)

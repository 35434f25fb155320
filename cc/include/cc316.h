/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cc316.h - the shim that lets one algorithm body build for three targets:
 *
 *   CC_TARGET_BPF   BPF struct_ops tcp_congestion_ops (clang -target bpf, vmlinux.h)
 *   CC_TARGET_KMOD  out-of-tree kernel module (kbuild)
 *   CC_TARGET_HOST  userspace shared library driven by the unit harness
 *
 * It also carries the Linux 3.16 stack behaviour every port shares (slow start,
 * ACK-counting additive increase, "in slow start" test, default undo), because a
 * modern kernel's helpers behave like 6.x, not 3.16.
 *
 * Algorithm sources use only: cc_tp(), cc_ca(), cc_ca_state(), cc_jiffies(),
 * cc_ms(), cc_us(), cc_rtt_us(), cc_srtt_us(), cc_tsecr_ms(), cc_msecs_to_jiffies(),
 * cc_usecs_to_jiffies(), cc_div64(), the CC_CWND/CC_SET_CWND macros, CC_PARAM/CC_NOTE
 * (and CC_LOAD_PARAM for a parameter the loader sets),
 * CC_CB and CC_OPS, the 3.16 helpers below (cc316_*, incl. the Vegas RTT accounting),
 * and the host-fault guard (CC_GUARD, cc316_guard_*; see the end of this file).
 * An algorithm that uses ECN (none of the 3.16 ports does) also has the ECN part below
 * (CC_CONG_NEEDS_ECN for CC_OPS's .flags, CC_ECN_*, CC_ACK_PENDING, cc_send_ack(),
 * cc_ecn_dontxmit()); one that is not a 3.16 port defines CC_DESCRIPTION before CC_OPS.
 */
#ifndef CC316_H
#define CC316_H

/* ------------------------------------------------------------------ targets */
#if defined(CC_TARGET_BPF)

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define CC_INLINE static __always_inline
/* Emulated HZ and time-dilation factor; the loader rewrites these read-only data
 * before load. */
const volatile __u32 cc_hz = 250;
const volatile __u32 cc_dilation = 1;
#define CC_CB(ret, name, ...) SEC("struct_ops/" #name) ret BPF_PROG(name, __VA_ARGS__)
#define CC_OPS(var, ...)                                                   \
	char _license[] SEC("license") = "GPL";                            \
	SEC(".struct_ops") struct tcp_congestion_ops var = {               \
		__VA_ARGS__                                                \
		.name = #var,                                              \
	}
#define CC_FN(f) ((void *)(f))
#define CC_STATIC_ASSERT(c, m) _Static_assert(c, m)
typedef __u64 cc_u64;

#elif defined(CC_TARGET_KMOD)

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/math64.h>
#include <net/tcp.h>

#define CC_INLINE static inline
static unsigned int cc_hz = 250;
module_param(cc_hz, uint, 0444);
MODULE_PARM_DESC(cc_hz, "emulated jiffies rate of the 3.16 algorithm (default 250)");
static unsigned int cc_dilation = 1;
module_param(cc_dilation, uint, 0444);
MODULE_PARM_DESC(cc_dilation, "time-dilation factor k: the algorithm's clocks run k times slower (default 1)");
#define CC_CB(ret, name, ...) static ret name(__VA_ARGS__)
#define CC_OPS(var, ...)                                                   \
	static struct tcp_congestion_ops var = {                           \
		__VA_ARGS__                                                \
		.name = #var,                                              \
		.owner = THIS_MODULE,                                      \
	};                                                                 \
	static int __init var##_register(void)                             \
	{                                                                  \
		return tcp_register_congestion_control(&var);              \
	}                                                                  \
	static void __exit var##_unregister(void)                          \
	{                                                                  \
		tcp_unregister_congestion_control(&var);                   \
	}                                                                  \
	module_init(var##_register);                                       \
	module_exit(var##_unregister);                                     \
	MODULE_LICENSE("GPL");                                             \
	CC_MODULE_DESCRIPTION(var)
#define CC_FN(f) (f)
#define CC_STATIC_ASSERT(c, m) _Static_assert(c, m)
typedef u64 cc_u64;
/* A source that is not a 3.16 port says what it is (#define CC_DESCRIPTION "..."). */
#ifdef CC_DESCRIPTION
#define CC_MODULE_DESCRIPTION(var) MODULE_DESCRIPTION(CC_DESCRIPTION)
#else
#define CC_MODULE_DESCRIPTION(var) MODULE_DESCRIPTION("tcpeval: Linux 3.16 " #var " port")
#endif

#elif defined(CC_TARGET_HOST)

#include <stdint.h>
#include <stddef.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef int32_t s32;
typedef int64_t s64;
typedef uint64_t u64;
typedef uint64_t cc_u64;
#define CC_INLINE static inline
#define CC_STATIC_ASSERT(c, m) _Static_assert(c, m)

enum { TCP_CA_Open = 0, TCP_CA_Disorder = 1, TCP_CA_CWR = 2, TCP_CA_Recovery = 3,
       TCP_CA_Loss = 4 };
enum tcp_ca_event { CA_EVENT_TX_START = 0, CA_EVENT_CWND_RESTART = 1, CA_EVENT_COMPLETE_CWR = 2,
		    CA_EVENT_LOSS = 3, CA_EVENT_ECN_NO_CE = 4, CA_EVENT_ECN_IS_CE = 5 };
enum { CA_ACK_SLOWPATH = 1 << 0, CA_ACK_WIN_UPDATE = 1 << 1, CA_ACK_ECE = 1 << 2 };
enum { ICSK_ACK_SCHED = 1, ICSK_ACK_TIMER = 2, ICSK_ACK_PUSHED = 4, ICSK_ACK_PUSHED2 = 8,
       ICSK_ACK_NOW = 16 };

struct tcp_options_received {
	u32 rcv_tsval; /* the peer's timestamp of the segment being processed */
	u32 rcv_tsecr; /* our timestamp it echoes, tsoffset removed (0: none) */
};

/* The fields the ports touch, under the kernel's names. Layout mirrored by the
 * Python harness (tests/cc/hostsim.py); cc_host_sock_size() guards it. */
struct inet_connection_sock {
	u64 icsk_ca_priv[13];
	u8 icsk_ca_state;
	u8 is_cwnd_limited;
	u8 _pad[2];
	u32 snd_cwnd;
	u32 snd_cwnd_cnt;
	u32 snd_ssthresh;
	u32 snd_cwnd_clamp;
	u32 snd_nxt;
	u32 max_packets_out;
	u32 prior_cwnd;
	u32 prior_ssthresh;
	u32 undo_marker;
	u32 delivered;    /* data segments delivered (SACKed or ACKed), like the kernel's */
	u64 tcp_mstamp;
	u32 snd_una;      /* bytes, like the kernel's (westwood316) */
	u32 srtt_us;      /* smoothed RTT << 3, us (hybla316) */
	u32 mss_cache;
	u32 packets_out;  /* segments in flight (sent, not yet cumulatively ACKed) */
	struct tcp_options_received rx_opt; /* lp316 */
	u32 segs_out;     /* segments sent, retransmissions included */
	u32 sacked_out;   /* of packets_out: SACKed, */
	u32 lost_out;     /* marked lost, */
	u32 retrans_out;  /* and retransmitted (tcp_packets_in_flight) */
	/* ECN and the receiving side (dctcp_tev; no 3.16 port reads them) */
	u32 rcv_nxt;      /* the next sequence number the receiver expects (bytes) */
	u8 ecn_flags;     /* CC_ECN_*: negotiated, echo CE (ECE on our ACKs) */
	u8 _pad2[3];
	struct {
		u8 pending; /* ICSK_ACK_*: a delayed ACK is scheduled (TIMER), send one now (NOW) */
		u8 _pad[3];
	} icsk_ack;
	/* the host's record of the immediate ACKs a hook sent (cc_send_ack) */
	u32 host_acks_sent;
	u32 host_ack_rcv_nxt;   /* the last one's acknowledgement number */
	u8 host_ack_ecn_flags;  /* ecn_flags when it was sent (DEMAND_CWR: it carried ECE) */
	u8 _pad3[3];
};
#define tcp_sock inet_connection_sock
struct sock;
struct ack_sample {
	u32 pkts_acked;
	s32 rtt_us;
	u32 in_flight;
};
struct cc_host_ops {
	u32 (*ssthresh)(struct sock *);
	void (*cong_avoid)(struct sock *, u32, u32);
	void (*set_state)(struct sock *, u8);
	void (*pkts_acked)(struct sock *, const struct ack_sample *);
	u32 (*undo_cwnd)(struct sock *);
	void (*init)(struct sock *);
	void (*cwnd_event)(struct sock *, enum tcp_ca_event);
	void (*in_ack_event)(struct sock *, u32);
	const char *name;
	u32 flags; /* TCP_CONG_* (CC_CONG_NEEDS_ECN) */
};
unsigned int cc_hz = 250;
unsigned int cc_dilation = 1;
size_t cc_host_sock_size(void) { return sizeof(struct inet_connection_sock); }
#define CC_CB(ret, name, ...) ret name(__VA_ARGS__)
#define CC_OPS(var, ...) const struct cc_host_ops cc_ops = { __VA_ARGS__ .name = #var, }
#define CC_FN(f) (f)

#else
#error "define CC_TARGET_BPF, CC_TARGET_KMOD or CC_TARGET_HOST"
#endif

/* ---------------------------------------------------------------- parameters */
/*
 * CC_PARAM(name, value, "description"): a parameter the code uses, declared once.
 * CC_NOTE(name, "value", "description"): a documented constant the code does not
 * use directly (e.g. HS-TCP's High P, implicit in its table).
 * tcpeval.cc.parameters() parses both from the sources; the host build exports
 * cc_param_<name> so a test checks the parser against the compiler.
 */
#if defined(CC_TARGET_HOST)
#define CC_PARAM(name, value, desc) \
	enum { name = (value) };    \
	const int cc_param_##name = (value)
#else
#define CC_PARAM(name, value, desc) enum { name = (value) }
#endif
#define CC_NOTE(name, value, desc) struct cc_note_##name

/*
 * CC_LOAD_PARAM(name): makes the CC_PARAM `name` (declared before it) settable when the
 * algorithm is loaded; the code reads cc_lp_<name>, whose default is the CC_PARAM's value.
 * BPF: a read-only datum the loader rewrites before load, as cc_hz (tevcc-loader
 * OBJECT HZ DILATION name=value); kernel module: the module parameter `name`; host: the
 * exported variable cc_lp_<name> (the harness sets it before init). No 3.16 port has one.
 */
#if defined(CC_TARGET_BPF)
#define CC_LOAD_PARAM(name) const volatile __u32 cc_lp_##name = (name)
#elif defined(CC_TARGET_KMOD)
#define CC_LOAD_PARAM(name)                                          \
	static unsigned int cc_lp_##name = (name);                   \
	module_param_named(name, cc_lp_##name, uint, 0444);          \
	MODULE_PARM_DESC(name, "CC_PARAM " #name " of this algorithm (see its source)")
#else
#define CC_LOAD_PARAM(name) unsigned int cc_lp_##name = (name)
#endif

/* Tables stay file-local in the kernel targets; the host harness reads them. */
#if defined(CC_TARGET_HOST)
#define CC_TABLE const
#else
#define CC_TABLE static const
#endif

/* ------------------------------------------------------------------ accessors */
#define CC_CWND(tp) ((tp)->snd_cwnd)
#define CC_SET_CWND(tp, v) ((tp)->snd_cwnd = (v))
#define CC_CA_PRIV_SIZE 104
#define CC_INFINITE_SSTHRESH 0x7fffffffU
/* The tail of the private area belongs to the guard; a port's state must fit before it. */
#define CC_GUARD_SIZE 24
#define CC_GUARD_INIT_CWND 10 /* TCP_INIT_CWND: the window before the first hook */
/* No port's threshold is lower (each port's min_ssthresh), nor any the stack sets itself */
#define CC_GUARD_MIN_SSTHRESH 2
#define CC_PORT_PRIV_SIZE (CC_CA_PRIV_SIZE - CC_GUARD_SIZE)

CC_INLINE struct tcp_sock *cc_tp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

CC_INLINE void *cc_ca(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

CC_INLINE u32 cc_ca_state(struct sock *sk)
{
	return ((struct inet_connection_sock *)sk)->icsk_ca_state;
}

CC_INLINE u32 cc_min(u32 a, u32 b) { return a < b ? a : b; }
CC_INLINE u32 cc_max(u32 a, u32 b) { return a > b ? a : b; }
CC_INLINE u32 cc_clamp(u32 v, u32 lo, u32 hi) { return v < lo ? lo : (v > hi ? hi : v); }
CC_INLINE int cc_after(u32 a, u32 b) { return (s32)(b - a) < 0; }

/* u64 / u64 on every target (the kernel has no native 64-bit division on all
 * arches); x / 0 yields 0 as BPF does. */
CC_INLINE cc_u64 cc_div64(cc_u64 a, cc_u64 b)
{
	if (!b)
		return 0;
#if defined(CC_TARGET_KMOD)
	return div64_u64(a, b);
#else
	return a / b;
#endif
}

/* 3.16 ran on jiffies; we emulate a jiffies counter at cc_hz from the socket's
 * microsecond clock (tcp_mstamp, the time of the ACK being processed).
 *
 * Time dilation (factor k = cc_dilation): a virtual path of rate R and RTT T runs as a
 * physical one of rate R/k and RTT k*T; every time the algorithm reads is physical time
 * divided by k, so it sees the virtual path's clock. The readers below are the
 * only ways a port learns the time. */
CC_INLINE u32 cc_dilation_k(void)
{
	return cc_dilation ? cc_dilation : 1;
}

CC_INLINE u32 cc_jiffies(struct sock *sk)
{
	return (u32)cc_div64(cc_tp(sk)->tcp_mstamp * (cc_u64)cc_hz,
			     1000000ULL * cc_dilation_k());
}

/* Milliseconds, for CUBIC's HyStart clock (3.16 used a ms clock when HZ < 1000). */
CC_INLINE u32 cc_ms(struct sock *sk)
{
	return (u32)cc_div64(cc_tp(sk)->tcp_mstamp, 1000ULL * cc_dilation_k());
}

/* An RTT sample of pkts_acked (us; negative: none), in virtual time. */
CC_INLINE s32 cc_rtt_us(s32 rtt_us)
{
	return rtt_us < 0 ? rtt_us : (s32)((u32)rtt_us / cc_dilation_k());
}

/* The socket's microsecond clock (tcp_mstamp: the time of the ACK being processed), in
 * virtual time. */
CC_INLINE cc_u64 cc_us(struct sock *sk)
{
	return cc_div64(cc_tp(sk)->tcp_mstamp, cc_dilation_k());
}

/* The stack's smoothed RTT (tp->srtt_us: 8 x srtt in us), in virtual time. */
CC_INLINE u32 cc_srtt_us(struct sock *sk)
{
	return cc_tp(sk)->srtt_us / cc_dilation_k();
}

/* TCP timestamps (TCP-LP). 6.x stamps segments with a 1 kHz clock (tcp_clock_ms, the
 * clock of tcp_mstamp; 3.16: jiffies) and removes the connection's random offset from
 * the echo it receives (rx_opt.rcv_tsecr), so the echo is on cc_ms()'s physical clock.
 * The echo in virtual ms, on cc_ms()'s clock; 0 stays 0 (no timestamp). Exact while the
 * ms clock fits in 32 bits (49 days of uptime). */
#define CC_TS_HZ 1000
CC_INLINE u32 cc_tsecr_ms(struct sock *sk)
{
	return cc_tp(sk)->rx_opt.rcv_tsecr / cc_dilation_k();
}

/* Kernel conversions round up. */
CC_INLINE u32 cc_msecs_to_jiffies(u32 ms)
{
	return (u32)cc_div64((cc_u64)ms * cc_hz + 999, 1000);
}

CC_INLINE u32 cc_usecs_to_jiffies(u32 us)
{
	return (u32)cc_div64((cc_u64)us * cc_hz + 999999, 1000000);
}

/* ------------------------------------------------------------------------ ECN */
/*
 * For an algorithm that uses ECN (dctcp_tev); no 3.16 port uses any of this.
 *
 * CC_CONG_NEEDS_ECN, in CC_OPS's .flags (tcp_congestion_ops.flags): the stack asks for
 * ECN in the handshake whatever net.ipv4.tcp_ecn says and sends ECT(0); on the receiving
 * side it tells the algorithm each data segment's CE codepoint (cwnd_event
 * CA_EVENT_ECN_IS_CE / CA_EVENT_ECN_NO_CE: only to algorithms with this flag); an ACK
 * with ECE reaches in_ack_event with CA_ACK_ECE, and the stack enters CWR on it (one
 * ssthresh() per window of data).
 * CC_ECN_OK, CC_ECN_DEMAND_CWR: bits of tp->ecn_flags (ECN negotiated; our ACKs carry
 * ECE), the kernel's TCP_ECN_OK / TCP_ECN_DEMAND_CWR values (newer kernels name the first
 * TCP_ECN_MODE_RFC3168; vmlinux.h has neither, they are #defines).
 * CC_ACK_PENDING(sk): icsk_ack.pending (ICSK_ACK_TIMER: a delayed ACK is scheduled;
 * ICSK_ACK_NOW set: the stack ACKs the segment it is processing at once).
 * cc_send_ack(sk, rcv_nxt): an ACK of rcv_nxt, sent now (the kernel's __tcp_send_ack;
 * BPF: the bpf_tcp_send_ack() helper tcp_congestion_ops programs are given for this).
 * cc_ecn_dontxmit(sk): stop sending ECT (INET_ECN_dontxmit) -- kernel module only.
 * BPF struct_ops may write tp->ecn_flags and icsk_ack.pending (bpf_tcp_ca.c allows both),
 * but not the socket's TOS byte, and setsockopt(IP_TOS) keeps a TCP socket's ECN bits.
 */
#define CC_ECN_OK 0x1
#define CC_ECN_DEMAND_CWR 0x4
#if defined(CC_TARGET_KMOD)
#define CC_CONG_NEEDS_ECN TCP_CONG_NEEDS_ECN
#else
#define CC_CONG_NEEDS_ECN 0x2
#endif
#define CC_ACK_PENDING(sk) (((struct inet_connection_sock *)(sk))->icsk_ack.pending)

CC_INLINE void cc_send_ack(struct sock *sk, u32 rcv_nxt)
{
#if defined(CC_TARGET_BPF)
	bpf_tcp_send_ack(sk, rcv_nxt);
#elif defined(CC_TARGET_KMOD)
	__tcp_send_ack(sk, rcv_nxt);
#else
	struct tcp_sock *tp = cc_tp(sk);

	tp->host_acks_sent++;
	tp->host_ack_rcv_nxt = rcv_nxt;
	tp->host_ack_ecn_flags = tp->ecn_flags;
#endif
}

/* Returns whether the segments stopped carrying ECT (0: this target cannot do it). */
CC_INLINE int cc_ecn_dontxmit(struct sock *sk)
{
#if defined(CC_TARGET_KMOD)
	INET_ECN_dontxmit(sk);
	return 1;
#else
	return 0;
#endif
}

/* ----------------------------------------------------- 3.16 shared behaviour */

/* 3.16: a connection is in slow start while cwnd <= ssthresh (6.x: <). */
CC_INLINE int cc316_in_slow_start(struct tcp_sock *tp)
{
	return tp->snd_cwnd <= tp->snd_ssthresh;
}

/* 3.16 took in_flight from the stack; 6.x measures cwnd-limitedness itself and
 * no longer passes in_flight, so we use the 6.x measurement. */
CC_INLINE int cc_is_cwnd_limited(struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);

	if (tp->is_cwnd_limited)
		return 1;
	if (cc316_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return 0;
}

/* 3.16 slow start: grow by the packets acked but stop at ssthresh + 1 and drop
 * the left-over (6.x hands the left-over to congestion avoidance). */
CC_INLINE void cc316_slow_start(struct tcp_sock *tp, u32 acked)
{
	u32 cwnd = tp->snd_cwnd + acked;

	if (cwnd > tp->snd_ssthresh)
		cwnd = tp->snd_ssthresh + 1;
	CC_SET_CWND(tp, cc_min(cwnd, tp->snd_cwnd_clamp));
}

/* 3.16 additive increase counts ACKs, not packets: one ACK adds one to the
 * counter, and cwnd grows by one on the ACK that finds the counter at w. */
CC_INLINE void cc316_cong_avoid_ai(struct tcp_sock *tp, u32 w)
{
	if (tp->snd_cwnd_cnt >= w) {
		if (tp->snd_cwnd < tp->snd_cwnd_clamp)
			CC_SET_CWND(tp, tp->snd_cwnd + 1);
		tp->snd_cwnd_cnt = 0;
	} else {
		tp->snd_cwnd_cnt++;
	}
}

/* 3.16 tcp_reno_cong_avoid(), which several 3.16 modules fall back to: nothing unless
 * cwnd-limited, then slow start or one increment per cwnd ACKs. */
CC_INLINE void cc316_reno_cong_avoid(struct sock *sk, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);

	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp))
		cc316_slow_start(tp, acked);
	else
		cc316_cong_avoid_ai(tp, tp->snd_cwnd);
}

/* 3.16 tcp_current_ssthresh(): the threshold, or at least 3/4 of cwnd outside a
 * window reduction (CWR, Recovery). */
CC_INLINE u32 cc316_current_ssthresh(struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 state = cc_ca_state(sk);

	if (state == TCP_CA_CWR || state == TCP_CA_Recovery)
		return tp->snd_ssthresh;
	return cc_max(tp->snd_ssthresh, (tp->snd_cwnd >> 1) + (tp->snd_cwnd >> 2));
}

/*
 * Vegas RTT accounting, shared by vegas316 and yeah316 (3.16's YeAH calls
 * tcp_vegas.c's exported init/pkts_acked/state/cwnd_event). Per RTT (the ACK of
 * beg_snd_nxt closes it) the minimum of the RTT samples; over the connection the
 * minimum of all (baseRTT); both in virtual us + 1, never 0.
 */
struct cc316_vegas {
	u32 beg_snd_nxt;  /* right edge of the current RTT */
	u32 beg_snd_una;  /* left edge of the current RTT */
	u32 beg_snd_cwnd; /* cwnd at its start */
	u8 doing_vegas_now;
	u8 _pad;
	u16 cntRTT;       /* RTT samples this RTT */
	u32 minRTT;       /* us */
	u32 baseRTT;      /* us */
};

/* Start a fresh RTT: at establishment, after recovery or RTO, after idle. */
CC_INLINE void cc316_vegas_enable(struct sock *sk, struct cc316_vegas *v)
{
	v->doing_vegas_now = 1;
	v->beg_snd_nxt = cc_tp(sk)->snd_nxt;
	v->cntRTT = 0;
	v->minRTT = 0x7fffffff;
}

CC_INLINE void cc316_vegas_init(struct sock *sk, struct cc316_vegas *v)
{
	v->baseRTT = 0x7fffffff;
	cc316_vegas_enable(sk, v);
}

CC_INLINE void cc316_vegas_rtt_sample(struct cc316_vegas *v, s32 rtt_us)
{
	u32 vrtt;

	if (rtt_us < 0)
		return;
	vrtt = (u32)rtt_us + 1;
	if (vrtt < v->baseRTT)
		v->baseRTT = vrtt;
	v->minRTT = cc_min(v->minRTT, vrtt);
	v->cntRTT++;
}

/* tcp_vegas_state: Vegas decisions only in Open. */
CC_INLINE void cc316_vegas_state(struct sock *sk, struct cc316_vegas *v, u8 new_state)
{
	if (new_state == TCP_CA_Open)
		cc316_vegas_enable(sk, v);
	else
		v->doing_vegas_now = 0;
}

/* tcp_vegas_cwnd_event: start over after idle (both events exist in 6.x as in 3.16). */
CC_INLINE void cc316_vegas_cwnd_event(struct sock *sk, struct cc316_vegas *v,
				      enum tcp_ca_event ev)
{
	if (ev == CA_EVENT_CWND_RESTART || ev == CA_EVENT_TX_START)
		cc316_vegas_init(sk, v);
}

/* 3.16's stack undo for algorithms without an undo_cwnd hook (6.x requires one). */
CC_INLINE u32 cc316_default_undo(struct tcp_sock *tp)
{
	return cc_max(tp->snd_cwnd, tp->snd_ssthresh << 1);
}

/* ---------------------------------------------------------- host-fault guard */
/*
 * Why: a host may run a congestion-control hook without running the BPF program
 * behind it. Seen on the project's 2-core VM (kernel 6.18 in a PVM guest): in some
 * task contexts struct_ops programs and BPF tracepoint programs are silently not
 * executed (ftrace records the same tracepoints; no recursion miss is counted). A
 * skipped ssthresh() leaves the stack an uninitialised return slot (0x81104110 there,
 * the low half of a kernel text address), which PRR turns into a window of ~1e9
 * segments; a skipped undo_cwnd() does the same to cwnd directly.
 *
 * The slot is not always a text address: on 2026-11-28 it held 0 (ftrace's tcp_probe:
 * ssthresh 0 at a DCTCP reduction), and PRR then drained the window to a segment or none
 * (dctcp_tev fell from 95 segments to 1 about once a second at 0.5 Gbps and 2 ms, no
 * retransmission, a third of the link idle); a threshold below any port's minimum is as
 * foreign as one above 2^31 - 1.
 *
 * The garbage is not always that large: a bic316 run at 0.2 ms and p = 1e-3 reached a
 * window of 108,266,549 segments (0x0673f735), a value a stack can hold. But between
 * two of a port's hooks the window rises in three ways only: the stack calls a hook on
 * every ACK, and in Open an ACK can at most double the window (slow start adds what it
 * acknowledges, never more than was in flight); an undo sets what the port's
 * undo_cwnd() returned; the end of a reduction sets the threshold (which the guard
 * checks itself), and slow start stops one above it (an ACK after a timeout may
 * acknowledge far more than the window of 1). A window above all of these came from a
 * skipped hook.
 *
 * The guard notices, in the port's next hook, what the port did not see -- a window
 * reduction without its ssthresh() (tp->prior_cwnd moved), a threshold or window no
 * stack value can be (above 2^31 - 1; a threshold below 2), a threshold above every one the port computed
 * and every window it let pass, a window no hook of the port allowed (above the bound
 * just described), a state change without its set_state() --,
 * repairs it as the port would have, and counts it (cc316_guard_stats, read by the
 * runner) so that the run's fidelity verdict can judge it. On a sound host every
 * counter but `reductions` stays 0 and the guard changes nothing.
 */
struct cc316_guard {
	u32 prior_cwnd; /* tp->prior_cwnd when the port last saw a reduction */
	u32 top_cwnd;   /* the window the port last saw, or its last undo returned */
	u32 ceiling;    /* the largest window or threshold the port produced or let pass */
	u32 delivered;  /* tp->delivered at the port's last pkts_acked() */
	u32 segs_out;   /* tp->segs_out at the port's last hook */
	u8 state;       /* the congestion state the port last saw */
	u8 armed;       /* set by init */
	u16 seen_ms;    /* the socket's clock at the port's last hook, ms (mod 2^16: a gap's length) */
};
CC_STATIC_ASSERT(sizeof(struct cc316_guard) == CC_GUARD_SIZE, "guard size");

struct cc316_guard_stats {
	cc_u64 reductions;        /* ssthresh() calls: window reductions the port made */
	cc_u64 missed_reductions; /* reductions the stack made without the port's ssthresh() */
	cc_u64 missed_states;     /* state changes without the port's set_state() */
	cc_u64 foreign_ssthresh;  /* thresholds above 2^31 - 1, or above any the port allowed, replaced */
	cc_u64 foreign_cwnd;      /* windows above 2^31 - 1, or above the bound, replaced */
	cc_u64 acked_seen;        /* segments the port's pkts_acked() saw acknowledged */
	cc_u64 acked_delivered;   /* segments the stack delivered between the port's pkts_acked() calls */
	cc_u64 sent_over;         /* segments the stack sent above the largest window the port allowed */
	cc_u64 max_allowed_cwnd;  /* the largest window a hook of the port let stand (a maximum, not a count) */
	cc_u64 drained;           /* windows a threshold below 2 drained below 2 segments, repaired */
	cc_u64 drained_ms;        /* at those repairs, the time since the port's last hook: the stack ran the
				   * connection without it, draining and then waiting for a timer */
};
#if defined(CC_TARGET_KMOD)
static struct cc316_guard_stats cc316_guard_stats;
#else
struct cc316_guard_stats cc316_guard_stats = {};
#endif
#define CC_COUNT(field) __sync_fetch_and_add(&cc316_guard_stats.field, 1)

CC_INLINE struct cc316_guard *cc_guard(struct sock *sk)
{
	return (struct cc316_guard *)((char *)cc_ca(sk) + CC_PORT_PRIV_SIZE);
}

/* The socket's clock in ms, low 16 bits: a difference of two is a gap of up to 65 s. */
CC_INLINE u16 cc316_guard_clock_ms(struct sock *sk)
{
	return (u16)cc_div64(cc_tp(sk)->tcp_mstamp, 1000ULL);
}

/* From a port's init(): what the port has seen so far is what the socket holds. */
CC_INLINE void cc316_guard_init(struct sock *sk)
{
	struct cc316_guard *g = cc_guard(sk);

	g->prior_cwnd = cc_tp(sk)->prior_cwnd;
	g->delivered = cc_tp(sk)->delivered;
	g->segs_out = cc_tp(sk)->segs_out;
	g->top_cwnd = cc_max(cc_tp(sk)->snd_cwnd, CC_GUARD_INIT_CWND);
	/* a threshold the stack cached from an earlier connection (tcp_init_metrics) */
	g->ceiling = cc_max(g->top_cwnd, cc_tp(sk)->snd_ssthresh < CC_INFINITE_SSTHRESH
						 ? cc_tp(sk)->snd_ssthresh : 0);
	g->state = cc_ca_state(sk);
	g->seen_ms = cc316_guard_clock_ms(sk);
	g->armed = 1;
}

/* One ACK's slow-start growth over the window the port last saw (or its undo returned). */
CC_INLINE u32 cc316_guard_grown(struct cc316_guard *g)
{
	return g->top_cwnd > CC_INFINITE_SSTHRESH / 2 ? CC_INFINITE_SSTHRESH : 2 * g->top_cwnd + 2;
}

/* Whether the threshold the stack holds is one it can hold without a skipped hook: "none"
 * (2^31 - 1), or at most the largest the port computed or the window it let grow --
 * every other threshold the stack sets is derived from a window (tcp_current_ssthresh:
 * the old threshold or 3/4 of the window; an undo restores such a one). A skipped
 * ssthresh() at a reduction that began at the same window as the one before leaves
 * tp->prior_cwnd unmoved; only its threshold then shows it. */
CC_INLINE int cc316_guard_threshold_sound(struct cc316_guard *g, struct tcp_sock *tp)
{
	return tp->snd_ssthresh == CC_INFINITE_SSTHRESH ||
	       (tp->snd_ssthresh >= CC_GUARD_MIN_SSTHRESH &&
		tp->snd_ssthresh <= cc_max(g->ceiling, cc316_guard_grown(g)));
}

/* The largest window the stack can hold at a port's hook without a skipped hook: one
 * ACK's slow-start growth over the window the port last saw (or its undo returned), or
 * one above a sound threshold -- the threshold ends a reduction (tcp_end_cwnd_reduction),
 * and 3.16 slow start stops at ssthresh + 1 however much one ACK acknowledges (after a
 * timeout, the ACK for the hole covers all the receiver held: window 1 -> ssthresh + 1).
 * Trusting any threshold below 2^31 here let highspeed316 reach a window of 2.9 TB. */
CC_INLINE u32 cc316_guard_cwnd_bound(struct cc316_guard *g, struct tcp_sock *tp)
{
	u32 ends = tp->snd_ssthresh < CC_INFINITE_SSTHRESH && cc316_guard_threshold_sound(g, tp)
			   ? tp->snd_ssthresh + 1 : 0;

	return cc_max(cc316_guard_grown(g), ends);
}

CC_INLINE void cc316_guard_seen_state(struct sock *sk, struct cc316_guard *g)
{
	u32 state = cc_ca_state(sk);

	if (state != g->state) {
		CC_COUNT(missed_states);
		g->state = state;
	}
}

/* What a window the port did not allow let the stack send: of the segments sent since
 * the port's last hook, those that put more in flight (tcp_packets_in_flight) than the
 * bound (the largest window the port allowed) -- each sent segment is counted once,
 * however many hooks find it still in flight. A skipped ssthresh() leaves PRR a threshold of garbage, and a window
 * of 10^9 segments lets the stack send all it holds until the next hook repairs it; the
 * skipped ACKs alone do not show that burst. */
CC_INLINE void cc316_guard_sent_over(struct cc316_guard *g, struct tcp_sock *tp, u32 bound)
{
	u32 sent = tp->segs_out - g->segs_out;
	/* tcp_packets_in_flight: what the window limits (SACKed and lost segments left) */
	u32 in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;

	if (in_flight > bound && sent)
		__sync_fetch_and_add(&cc316_guard_stats.sent_over, cc_min(sent, in_flight - bound));
	g->segs_out = tp->segs_out;
}

/* First thing in every hook but ssthresh(): returns the window at a reduction the port
 * did not see (0: none); CC_GUARD then repairs the threshold. A window no stack value
 * can be is replaced here by the window before the reduction, which is what an undo
 * restores. */
CC_INLINE u32 cc316_guard_check(struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct cc316_guard *g = cc_guard(sk);
	u32 missed = 0;
	u32 prior;

	if (!g->armed)
		return 0;
	/* a reduction that began at a window above every one the port allowed (a skipped
	 * hook's garbage not yet replaced) began, for the port, at the window it last saw:
	 * the repair's threshold and window come from that, not from the garbage
	 * (tp->prior_cwnd itself is not writable from BPF; PRR only grows more cautious
	 * with a large one) */
	prior = tp->prior_cwnd > cc_max(g->ceiling, cc316_guard_grown(g)) ? cc_max(g->top_cwnd, 2)
									      : tp->prior_cwnd;
	cc316_guard_seen_state(sk, g);
	if (tp->prior_cwnd != g->prior_cwnd) {
		CC_COUNT(missed_reductions);
		g->prior_cwnd = tp->prior_cwnd;
		missed = 1;
	} else if (!cc316_guard_threshold_sound(g, tp)) {
		CC_COUNT(foreign_ssthresh);
		missed = 1;
	}
	cc316_guard_sent_over(g, tp, cc316_guard_cwnd_bound(g, tp));
	if (tp->snd_cwnd > CC_INFINITE_SSTHRESH) {
		CC_COUNT(foreign_cwnd);
		CC_SET_CWND(tp, cc_max(prior, 2));
	} else if (tp->snd_cwnd > cc316_guard_cwnd_bound(g, tp)) {
		CC_COUNT(foreign_cwnd);
		CC_SET_CWND(tp, cc_max(g->top_cwnd, 2));
	}
	g->top_cwnd = tp->snd_cwnd;
	g->ceiling = cc_max(g->ceiling, tp->snd_cwnd);
	/* the port's own windows, for the verdict's window check: a sampled window may be
	 * one the host's skipped hook left for a moment, which this check just replaced
	 * (racy between sockets: a lost update only lowers a maximum another hook resets) */
	if (tp->snd_cwnd > cc316_guard_stats.max_allowed_cwnd)
		cc316_guard_stats.max_allowed_cwnd = tp->snd_cwnd;
	if (!missed)
		return 0;
	return prior ? prior : tp->snd_cwnd;
}

/* Put in the threshold the port computes for the missed reduction, and the window the
 * stack would have derived from it: PRR's ceiling (the window before the reduction)
 * while the reduction lasts, the threshold itself once it is over. Nothing to do when
 * the stack already holds that threshold or has since undone the reduction. */
CC_INLINE void cc316_guard_repair(struct sock *sk, u32 ssthresh, u32 prior)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 state = cc_ca_state(sk);

	/* (an ECN reduction's prior_ssthresh is 0: nothing to undo to) */
	if (tp->snd_ssthresh == ssthresh ||
	    (tp->snd_ssthresh == tp->prior_ssthresh && tp->snd_ssthresh >= CC_GUARD_MIN_SSTHRESH &&
	     tp->snd_ssthresh <= CC_INFINITE_SSTHRESH))
		return;
	if (tp->snd_ssthresh > CC_INFINITE_SSTHRESH)
		CC_COUNT(foreign_ssthresh);
	tp->snd_ssthresh = ssthresh;
	cc_guard(sk)->ceiling = cc_max(cc_guard(sk)->ceiling, ssthresh);
	if (state == TCP_CA_Loss)
		return;
	/* a window below any threshold: PRR drained it towards a threshold of 0 or 1, or the
	 * reduction ended at one; the stack would have ended at the threshold. With nothing in
	 * flight no ACK calls a hook: the flow waited for a timer (RTO-based, >= 200 ms) */
	if (tp->snd_cwnd < CC_GUARD_MIN_SSTHRESH) {
		CC_COUNT(drained);
		__sync_fetch_and_add(&cc316_guard_stats.drained_ms,
				     (u16)(cc316_guard_clock_ms(sk) - cc_guard(sk)->seen_ms));
		CC_SET_CWND(tp, ssthresh);
	}
	else if (state == TCP_CA_CWR || state == TCP_CA_Recovery)
		CC_SET_CWND(tp, cc_min(tp->snd_cwnd, cc_max(prior, 2)));
	else
		CC_SET_CWND(tp, cc_min(tp->snd_cwnd, ssthresh));
}

/* CC_GUARD(sk, ssthresh_for): the check and repair, with the port's own threshold
 * function ssthresh_for(sk, cwnd) -- the body of its ssthresh() hook. */
#define CC_GUARD(sk, ssthresh_for)                                                \
	do {                                                                      \
		u32 cc_missed_cwnd_ = cc316_guard_check(sk);                      \
		if (cc_missed_cwnd_)                                              \
			cc316_guard_repair(sk, ssthresh_for(sk, cc_missed_cwnd_), cc_missed_cwnd_); \
		cc_guard(sk)->seen_ms = cc316_guard_clock_ms(sk);                 \
	} while (0)

/* CC_GUARD_ACKED(sk, ssthresh_for, sample): CC_GUARD in pkts_acked(), which also counts
 * what this ACK acknowledged (cc316_guard_acked, defined below). */
#define CC_GUARD_ACKED(sk, ssthresh_for, sample)                                  \
	do {                                                                      \
		CC_GUARD(sk, ssthresh_for);                                       \
		cc316_guard_acked(sk, (sample)->pkts_acked);                      \
	} while (0)

/* In ssthresh(), before the port computes its threshold: the window the reduction starts
 * from. The stack set prior_cwnd = snd_cwnd just before; if that window is one no hook of
 * the port allowed (a skipped hook's garbage the guard has not yet replaced: a two-flow
 * reno316 run let a window of 1.07e9 segments stand this way, through a threshold computed
 * from it), the port reduces from the window it last saw instead. */
CC_INLINE u32 cc316_guard_reduction_window(struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct cc316_guard *g = cc_guard(sk);

	if (g->armed && tp->snd_cwnd > cc316_guard_cwnd_bound(g, tp)) {
		CC_COUNT(foreign_cwnd);
		CC_SET_CWND(tp, cc_max(g->top_cwnd, 2));
	}
	return tp->snd_cwnd;
}

/* In ssthresh(): the reduction the port makes (the stack set prior_cwnd just before). */
CC_INLINE u32 cc316_guard_reduction(struct sock *sk, u32 ssthresh)
{
	struct cc316_guard *g = cc_guard(sk);

	CC_COUNT(reductions);
	cc316_guard_seen_state(sk, g);
	g->seen_ms = cc316_guard_clock_ms(sk);
	g->prior_cwnd = cc_tp(sk)->prior_cwnd;
	g->ceiling = cc_max(g->ceiling, ssthresh);
	return ssthresh;
}

/* In pkts_acked(): what the port saw acknowledged against what the stack delivered since
 * the port's last pkts_acked(). The stack calls pkts_acked() for every ACK it processes;
 * an ACK whose hooks the host skipped adds its segments to the stack's count (read at
 * the next hook that runs) but not to the port's, so over a run
 * 1 - acked_seen / acked_delivered is the share of acknowledged data whose hooks did not
 * run -- counted at every ACK, not only at the few hundred reductions a run has. (The
 * stack counts a SACKed segment when it is SACKed and the port when the cumulative ACK
 * passes it: the two differ by at most the segments SACKed at a run's ends.) */
CC_INLINE void cc316_guard_acked(struct sock *sk, u32 pkts_acked)
{
	struct cc316_guard *g = cc_guard(sk);
	u32 now = cc_tp(sk)->delivered;

	if (!g->armed)
		return;
	__sync_fetch_and_add(&cc316_guard_stats.acked_seen, pkts_acked);
	__sync_fetch_and_add(&cc316_guard_stats.acked_delivered, now - g->delivered);
	g->delivered = now;
}

/* In undo_cwnd(): the window the port hands the stack (which sets it as is). */
CC_INLINE u32 cc316_guard_undo(struct sock *sk, u32 cwnd)
{
	struct cc316_guard *g = cc_guard(sk);

	g->top_cwnd = cc_max(g->top_cwnd, cwnd);
	g->ceiling = cc_max(g->ceiling, cwnd);
	return cwnd;
}

/* After a port's own increase that may pass one slow-start step per ACK (Hybla adds
 * 2^rho - 1 segments per ACK in slow start): the window it set is one it allowed. */
CC_INLINE void cc316_guard_grew(struct sock *sk)
{
	struct cc316_guard *g = cc_guard(sk);

	g->top_cwnd = cc_max(g->top_cwnd, cc_tp(sk)->snd_cwnd);
	g->ceiling = cc_max(g->ceiling, g->top_cwnd);
}

/* In set_state(), after CC_GUARD: the state the stack is about to enter. */
CC_INLINE void cc316_guard_state(struct sock *sk, u8 new_state)
{
	cc_guard(sk)->state = new_state;
}

/* For ports whose 3.16 original had no set_state/pkts_acked hook: hooks that only
 * guard (neither changes what the algorithm does). */
#define CC_GUARD_ONLY_SET_STATE(port, ssthresh_for)                               \
	CC_CB(void, port##_set_state, struct sock *sk, u8 new_state)              \
	{                                                                         \
		CC_GUARD(sk, ssthresh_for);                                       \
		cc316_guard_state(sk, new_state);                                 \
	}
#define CC_GUARD_ONLY_PKTS_ACKED(port, ssthresh_for)                              \
	CC_CB(void, port##_pkts_acked, struct sock *sk, const struct ack_sample *sample) \
	{                                                                         \
		CC_GUARD_ACKED(sk, ssthresh_for, sample);                         \
	}
#define CC_GUARD_ONLY_HOOKS(port, ssthresh_for)                                   \
	CC_GUARD_ONLY_SET_STATE(port, ssthresh_for)                               \
	CC_GUARD_ONLY_PKTS_ACKED(port, ssthresh_for)

#endif /* CC316_H */

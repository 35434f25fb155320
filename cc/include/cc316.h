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
 * cc_ms(), cc_msecs_to_jiffies(), cc_usecs_to_jiffies(), cc_div64(), the
 * CC_CWND/CC_SET_CWND macros, CC_PARAM/CC_NOTE, CC_CB and CC_OPS.
 */
#ifndef CC316_H
#define CC316_H

/* ------------------------------------------------------------------ targets */
#if defined(CC_TARGET_BPF)

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define CC_INLINE static __always_inline
/* Emulated HZ; the loader rewrites this read-only datum before load. */
const volatile __u32 cc_hz = 250;
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
	MODULE_DESCRIPTION("tcpeval: Linux 3.16 " #var " port")
#define CC_FN(f) (f)
#define CC_STATIC_ASSERT(c, m) _Static_assert(c, m)
typedef u64 cc_u64;

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
enum tcp_ca_event { CA_EVENT_TX_START = 0 };

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
	u32 _pad2;
	u64 tcp_mstamp;
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
	const char *name;
};
unsigned int cc_hz = 250;
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
 * microsecond clock (tcp_mstamp, the time of the ACK being processed). */
CC_INLINE u32 cc_jiffies(struct sock *sk)
{
	return (u32)cc_div64(cc_tp(sk)->tcp_mstamp * (cc_u64)cc_hz, 1000000);
}

/* Milliseconds, for CUBIC's HyStart clock (3.16 used a ms clock when HZ < 1000). */
CC_INLINE u32 cc_ms(struct sock *sk)
{
	return (u32)cc_div64(cc_tp(sk)->tcp_mstamp, 1000);
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

/* 3.16's stack undo for algorithms without an undo_cwnd hook (6.x requires one). */
CC_INLINE u32 cc316_default_undo(struct tcp_sock *tp)
{
	return cc_max(tp->snd_cwnd, tp->snd_ssthresh << 1);
}

#endif /* CC316_H */

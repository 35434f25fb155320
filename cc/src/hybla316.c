// SPDX-License-Identifier: GPL-2.0
/* TCP Hybla as in Linux 3.16 (Caini & Firrincieli 2004, as tcp_hybla.c does it): with
 * rho = RTT / rtt0 (at least 1; RTT the smallest smoothed RTT seen), slow start adds
 * 2^rho - 1 segments per ACK and congestion avoidance rho^2 / cwnd, so a long-RTT flow
 * grows per unit of time as a flow with RTT rtt0 would. Increments are kept in 1/128
 * segment (rho in 1/8, 2^fraction from a table). Outside Open it is Reno; losses halve
 * (tcp_reno_ssthresh); no undo hook (the stack's 3.16 default). */
#include "cc316.h"

CC_PARAM(rtt0, 25, "reference RTT in ms: rho = srtt / rtt0, at least 1");
CC_PARAM(cwnd_clamp, 65535, "cwnd clamp hybla_init set (snd_cwnd_clamp = 65535)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets (ssthresh on loss: cwnd/2)");

struct hybla316 {
	u32 rho;            /* integer part of rho */
	u32 rho2;           /* integer part of rho^2 */
	u32 rho_3ls;        /* rho << 3 */
	u32 rho2_7ls;       /* rho^2 << 7 */
	u32 snd_cwnd_cents; /* increments below one segment, << 7 */
	u32 minrtt_us;      /* the smallest srtt seen (8 x us, virtual) */
	u8 hybla_en;        /* Open: Hybla; otherwise Reno */
};
CC_STATIC_ASSERT(sizeof(struct hybla316) <= CC_PORT_PRIV_SIZE, "hybla316 state too large");

/* 2^(odds/8) << 7 for the fractional eighths of rho (3.16's table; a switch here, as a
 * 32-byte constant array lands in a mergeable section the BPF loader rejects). */
CC_INLINE u32 hybla_fraction(u32 odds)
{
	switch (odds) {
	case 1: return 139;
	case 2: return 152;
	case 3: return 165;
	case 4: return 181;
	case 5: return 197;
	case 6: return 215;
	case 7: return 234;
	default: return 128;
	}
}

/* rho from the smoothed RTT: tp->srtt_us is 8 x srtt, so srtt_us / rtt0(us) is rho << 3. */
CC_INLINE void hybla_recalc_param(struct sock *sk, struct hybla316 *ca)
{
	ca->rho_3ls = cc_max(cc_srtt_us(sk) / (rtt0 * 1000), 8);
	ca->rho = ca->rho_3ls >> 3;
	ca->rho2_7ls = (ca->rho_3ls * ca->rho_3ls) << 1;
	ca->rho2 = ca->rho2_7ls >> 7;
}

/* 3.16 also set snd_cwnd_clamp = 65535 here; BPF struct_ops cannot write the clamp, so
 * the port applies it itself (hybla_clamp) wherever Hybla grows the window. */
CC_CB(void, hybla316_init, struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct hybla316 *ca = cc_ca(sk);

	ca->rho = ca->rho2 = ca->rho_3ls = ca->rho2_7ls = 0;
	ca->snd_cwnd_cents = 0;
	ca->hybla_en = 1;
	hybla_recalc_param(sk, ca); /* from the handshake's RTT */
	ca->minrtt_us = cc_srtt_us(sk);
	CC_SET_CWND(tp, ca->rho); /* the initial window is rho */
	cc316_guard_init(sk);
}

CC_INLINE u32 hybla_clamp(struct tcp_sock *tp)
{
	return cc_min(tp->snd_cwnd_clamp, cwnd_clamp);
}

CC_INLINE u32 hybla316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd >> 1, min_ssthresh);
}

CC_CB(u32, hybla316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, hybla316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_INLINE void hybla_grow(struct tcp_sock *tp, struct hybla316 *ca)
{
	u32 increment, odd;
	int is_slowstart = 0;

	if (tp->snd_cwnd < tp->snd_ssthresh) { /* Hybla's own test: cwnd < ssthresh */
		/* 2^rho - 1 = 2^int(rho) x 2^frac(rho) - 1, in 1/128 */
		is_slowstart = 1;
		increment = (1U << cc_min(ca->rho, 16)) *
			    hybla_fraction(ca->rho_3ls - (ca->rho << 3)) - 128;
	} else {
		/* rho^2 / cwnd, in 1/128 */
		increment = ca->rho2_7ls / tp->snd_cwnd;
		if (increment < 128)
			tp->snd_cwnd_cnt++;
	}
	odd = increment % 128;
	CC_SET_CWND(tp, tp->snd_cwnd + (increment >> 7));
	ca->snd_cwnd_cents += odd;
	/* 3.16 loops while cents >= 128; cents < 128 before and odd < 128, so once */
	if (ca->snd_cwnd_cents >= 128) {
		CC_SET_CWND(tp, tp->snd_cwnd + 1);
		ca->snd_cwnd_cents -= 128;
		tp->snd_cwnd_cnt = 0;
	}
	/* rho^2 / cwnd below 1/128: one per cwnd ACKs */
	if (increment == 0 && odd == 0 && tp->snd_cwnd_cnt >= tp->snd_cwnd) {
		CC_SET_CWND(tp, tp->snd_cwnd + 1);
		tp->snd_cwnd_cnt = 0;
	}
	if (is_slowstart)
		CC_SET_CWND(tp, cc_min(tp->snd_cwnd, tp->snd_ssthresh));
	CC_SET_CWND(tp, cc_min(tp->snd_cwnd, hybla_clamp(tp)));
}

CC_CB(void, hybla316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct hybla316 *ca = cc_ca(sk);

	CC_GUARD(sk, hybla316_ssthresh_for);
	/* rho follows the smallest smoothed RTT */
	if (cc_srtt_us(sk) < ca->minrtt_us) {
		hybla_recalc_param(sk, ca);
		ca->minrtt_us = cc_srtt_us(sk);
	}
	if (!cc_is_cwnd_limited(sk))
		return;
	if (!ca->hybla_en) {
		cc316_reno_cong_avoid(sk, acked);
		return;
	}
	if (ca->rho == 0)
		hybla_recalc_param(sk, ca);
	hybla_grow(tp, ca);
	cc316_guard_grew(sk); /* 2^rho - 1 per ACK may pass slow start's doubling */
}

CC_CB(u32, hybla316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, hybla316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_CB(void, hybla316_set_state, struct sock *sk, u8 new_state)
{
	CC_GUARD(sk, hybla316_ssthresh_for);
	((struct hybla316 *)cc_ca(sk))->hybla_en = new_state == TCP_CA_Open;
	cc316_guard_state(sk, new_state);
}

/* 3.16 Hybla had no pkts_acked hook: this one only guards. */
CC_GUARD_ONLY_PKTS_ACKED(hybla316, hybla316_ssthresh_for)

CC_OPS(hybla316,
	.init = CC_FN(hybla316_init),
	.ssthresh = CC_FN(hybla316_ssthresh),
	.cong_avoid = CC_FN(hybla316_cong_avoid),
	.set_state = CC_FN(hybla316_set_state),
	.undo_cwnd = CC_FN(hybla316_undo_cwnd),
	.pkts_acked = CC_FN(hybla316_pkts_acked),
);

// SPDX-License-Identifier: GPL-2.0
/* TCP Illinois as in Linux 3.16 (Liu, Basar & Srikant 2006, as tcp_illinois.c does it):
 * a loss-based AIMD whose increase alpha and decrease beta follow the average queueing
 * delay da (mean RTT of the last RTT - base RTT) relative to the largest one seen, dm:
 * alpha = 10 while da stays within dm/100 (after theta such RTTs once delay has risen),
 * falling as k1/(k2 + da) to 0.3 at dm; beta = 1/8 up to dm/10, rising linearly to 1/2
 * at 8 dm/10. Below win_thresh it is Reno (alpha 1, beta 1/2). ssthresh = cwnd (1 - beta);
 * no undo hook (the stack's 3.16 default). */
#include "cc316.h"

CC_PARAM(win_thresh, 15, "window below which alpha = 1 and beta = 1/2 (Reno)");
CC_PARAM(theta, 5, "RTTs of low delay before alpha returns to its maximum");
CC_PARAM(alpha_min, 38, "ALPHA_MIN: 0.3 in 1/128 ((3 x 128)/10)");
CC_PARAM(alpha_max, 1280, "ALPHA_MAX: 10.0 in 1/128");
CC_PARAM(alpha_base, 128, "ALPHA_BASE: 1.0 in 1/128 (small windows, after RTO)");
CC_PARAM(beta_min, 8, "BETA_MIN: 1/8 in 1/64");
CC_PARAM(beta_max, 32, "BETA_MAX = BETA_BASE: 1/2 in 1/64");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

#define ALPHA_SHIFT 7
#define BETA_SHIFT 6
#define RTT_MAX (0xffffffffU / alpha_max) /* 3.3 s: keeps the alpha arithmetic in 32 bits */

struct illinois316 {
	u32 beta;      /* multiplicative decrease << 6 (first: the probe's p0) */
	u32 alpha;     /* additive increase << 7 */
	u32 base_rtt;  /* smallest RTT sample, us */
	u32 max_rtt;   /* largest RTT sample, us */
	cc_u64 sum_rtt; /* of the RTT samples of the current RTT */
	u32 end_seq;   /* right edge of the current RTT */
	u16 cnt_rtt;   /* RTT samples of the current RTT */
	u16 acked;     /* packets the current ACK acknowledged */
	u8 rtt_above;  /* average delay has gone above dm/100 */
	u8 rtt_low;    /* RTTs below it since */
};
CC_STATIC_ASSERT(sizeof(struct illinois316) <= CC_PORT_PRIV_SIZE, "illinois316 state too large");

CC_INLINE void illinois_rtt_reset(struct sock *sk, struct illinois316 *ca)
{
	ca->end_seq = cc_tp(sk)->snd_nxt;
	ca->cnt_rtt = 0;
	ca->sum_rtt = 0;
}

CC_CB(void, illinois316_init, struct sock *sk)
{
	struct illinois316 *ca = cc_ca(sk);

	ca->alpha = alpha_max;
	ca->beta = beta_max;
	ca->base_rtt = 0x7fffffff;
	ca->max_rtt = 0;
	ca->acked = 0;
	ca->rtt_low = 0;
	ca->rtt_above = 0;
	illinois_rtt_reset(sk, ca);
	cc316_guard_init(sk);
}

CC_INLINE u32 illinois316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct illinois316 *ca = cc_ca(sk);

	return cc_max(cwnd - ((cwnd * ca->beta) >> BETA_SHIFT), min_ssthresh);
}

CC_CB(u32, illinois316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, illinois316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* alpha(da, dm): the maximum while delay stays low, else
 * (dm - d1) amax / ((dm - d1) + (da - d1)(amax - amin)/amin), d1 = dm/100 */
CC_INLINE u32 illinois_alpha(struct illinois316 *ca, u32 da, u32 dm)
{
	u32 d1 = dm / 100;

	if (da <= d1) {
		if (!ca->rtt_above)
			return alpha_max;
		/* theta good RTTs before the maximum again, not one */
		if (++ca->rtt_low < theta)
			return ca->alpha;
		ca->rtt_low = 0;
		ca->rtt_above = 0;
		return alpha_max;
	}
	ca->rtt_above = 1;
	dm -= d1;
	da -= d1;
	return (dm * alpha_max) / (dm + (da * (alpha_max - alpha_min)) / alpha_min);
}

/* beta(da, dm): bmin up to d2 = dm/10, bmax from d3 = 8 dm/10, linear in between */
CC_INLINE u32 illinois_beta(u32 da, u32 dm)
{
	u32 d2 = dm / 10, d3;

	if (da <= d2)
		return beta_min;
	d3 = (8 * dm) / 10;
	if (da >= d3 || d3 <= d2)
		return beta_max;
	return (beta_min * d3 - beta_max * d2 + (beta_max - beta_min) * da) / (d3 - d2);
}

/* Once per RTT. */
CC_INLINE void illinois_update_params(struct sock *sk, struct illinois316 *ca)
{
	if (cc_tp(sk)->snd_cwnd < win_thresh) {
		ca->alpha = alpha_base;
		ca->beta = beta_max;
	} else if (ca->cnt_rtt > 0) {
		u32 dm = ca->max_rtt - ca->base_rtt;
		u32 da = (u32)cc_div64(ca->sum_rtt, ca->cnt_rtt) - ca->base_rtt;

		ca->alpha = illinois_alpha(ca, da, dm);
		ca->beta = illinois_beta(da, dm);
	}
	illinois_rtt_reset(sk, ca);
}

CC_CB(void, illinois316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct illinois316 *ca = cc_ca(sk);
	u32 delta;

	CC_GUARD(sk, illinois316_ssthresh_for);
	if (cc_after(ack, ca->end_seq))
		illinois_update_params(sk, ca);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
		return;
	}
	/* cwnd += alpha / cwnd per packet acked (the count of the previous ACK, as 3.16) */
	tp->snd_cwnd_cnt += ca->acked;
	ca->acked = 1;
	delta = (tp->snd_cwnd_cnt * ca->alpha) >> ALPHA_SHIFT;
	if (delta >= tp->snd_cwnd) {
		CC_SET_CWND(tp, cc_min(tp->snd_cwnd + delta / tp->snd_cwnd, tp->snd_cwnd_clamp));
		tp->snd_cwnd_cnt = 0;
	}
}

CC_CB(u32, illinois316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, illinois316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

/* After an RTO, start from Reno's values. */
CC_CB(void, illinois316_set_state, struct sock *sk, u8 new_state)
{
	struct illinois316 *ca = cc_ca(sk);

	CC_GUARD(sk, illinois316_ssthresh_for);
	if (new_state == TCP_CA_Loss) {
		ca->alpha = alpha_base;
		ca->beta = beta_max;
		ca->rtt_low = 0;
		ca->rtt_above = 0;
		illinois_rtt_reset(sk, ca);
	}
	cc316_guard_state(sk, new_state);
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample): the packets this
 * ACK acknowledged and its RTT sample (here in virtual time). */
CC_CB(void, illinois316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct illinois316 *ca = cc_ca(sk);
	s32 rtt_us = cc_rtt_us(sample->rtt_us);
	u32 rtt;

	CC_GUARD_ACKED(sk, illinois316_ssthresh_for, sample);
	ca->acked = sample->pkts_acked;
	if (rtt_us < 0)
		return;
	rtt = cc_min((u32)rtt_us, RTT_MAX); /* no wrap in the alpha arithmetic */
	if (ca->base_rtt > rtt)
		ca->base_rtt = rtt;
	if (ca->max_rtt < rtt)
		ca->max_rtt = rtt;
	++ca->cnt_rtt;
	ca->sum_rtt += rtt;
}

CC_OPS(illinois316,
	.init = CC_FN(illinois316_init),
	.ssthresh = CC_FN(illinois316_ssthresh),
	.cong_avoid = CC_FN(illinois316_cong_avoid),
	.set_state = CC_FN(illinois316_set_state),
	.undo_cwnd = CC_FN(illinois316_undo_cwnd),
	.pkts_acked = CC_FN(illinois316_pkts_acked),
);

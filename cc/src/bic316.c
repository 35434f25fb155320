// SPDX-License-Identifier: GPL-2.0
/* BIC-TCP as in Linux 3.16: binary search towards the last maximum window,
 * linear probing (at most max_increment per RTT) away from it, Reno below
 * low_window, fast convergence, a delayed-ACK ratio estimate that scales the
 * ACK count, and an update rate-limited to once per HZ/32 while cwnd is unchanged. */
#include "cc316.h"

CC_PARAM(fast_convergence, 1, "fast convergence: lower Wmax to cwnd*(1024+beta)/2048 after a loss below it");
CC_PARAM(max_increment, 16, "Smax: largest increase per RTT in packets");
CC_PARAM(low_window, 14, "Low Window: at or below it BIC behaves like Reno");
CC_PARAM(beta, 819, "multiplicative decrease beta/1024 (819/1024 = 0.8)");
CC_PARAM(beta_scale, 1024, "scale of beta");
CC_PARAM(initial_ssthresh, 0, "initial ssthresh (0: stack default)");
CC_PARAM(smooth_part, 20, "RTTs to approach Wmax once within B packets of it");
CC_PARAM(bictcp_b, 4, "B: binary search divides the distance to Wmax by B per RTT");
CC_PARAM(ack_ratio_shift, 4, "fixed-point shift of the packets-per-ACK estimate");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

struct bic316 {
	u32 cnt;           /* ACKs per cwnd increment */
	u32 last_max_cwnd; /* Wmax */
	u32 loss_cwnd;     /* cwnd at the last loss, for undo */
	u32 last_cwnd;     /* cwnd at the last update */
	u32 last_time;     /* emulated jiffies of the last update */
	u32 epoch_start;   /* emulated jiffies the epoch began, 0: none */
	u32 delayed_ack;   /* packets per ACK << ack_ratio_shift */
};
CC_STATIC_ASSERT(sizeof(struct bic316) <= CC_PORT_PRIV_SIZE, "bic316 state too large");

CC_INLINE void bic_reset(struct bic316 *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->epoch_start = 0;
	ca->delayed_ack = 2 << ack_ratio_shift;
}

CC_CB(void, bic316_init, struct sock *sk)
{
	struct bic316 *ca = cc_ca(sk);

	bic_reset(ca);
	ca->loss_cwnd = 0;
	if (initial_ssthresh)
		cc_tp(sk)->snd_ssthresh = initial_ssthresh;
	cc316_guard_init(sk);
}

CC_INLINE u32 bic316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct bic316 *ca = cc_ca(sk);

	ca->epoch_start = 0;
	if (fast_convergence && cwnd < ca->last_max_cwnd)
		ca->last_max_cwnd = cwnd * (beta_scale + beta) / (2 * beta_scale);
	else
		ca->last_max_cwnd = cwnd;
	ca->loss_cwnd = cwnd;

	if (cwnd <= low_window)
		return cc_max(cwnd >> 1, min_ssthresh);
	return cc_max(cwnd * beta / beta_scale, min_ssthresh);
}

/* Recompute cnt, the ACKs needed for the next increment. */
CC_INLINE void bic_update(struct sock *sk, struct bic316 *ca, u32 cwnd)
{
	u32 now = cc_jiffies(sk);
	u32 cnt;

	if (ca->last_cwnd == cwnd && (s32)(now - ca->last_time) <= (s32)(cc_hz / 32))
		return;
	ca->last_cwnd = cwnd;
	ca->last_time = now;
	if (ca->epoch_start == 0)
		ca->epoch_start = now;

	if (cwnd <= low_window) {
		ca->cnt = cwnd; /* Reno */
		return;
	}

	if (cwnd < ca->last_max_cwnd) {
		u32 dist = (ca->last_max_cwnd - cwnd) / bictcp_b;

		if (dist > max_increment)
			cnt = cwnd / max_increment;      /* far below: linear */
		else if (dist <= 1)
			cnt = cwnd * smooth_part / bictcp_b; /* close: creep */
		else
			cnt = cwnd / dist;               /* binary search */
	} else {
		if (cwnd < ca->last_max_cwnd + bictcp_b)
			cnt = cwnd * smooth_part / bictcp_b; /* just above: creep */
		else if (cwnd < ca->last_max_cwnd + max_increment * (bictcp_b - 1))
			cnt = cwnd * (bictcp_b - 1) / (cwnd - ca->last_max_cwnd); /* max probing, slow */
		else
			cnt = cwnd / max_increment;      /* max probing, linear */
	}
	/* No maximum known yet (start-up): at least 5 % per RTT. */
	if (ca->last_max_cwnd == 0 && cnt > 20)
		cnt = 20;
	/* Scale ACKs to packets with the delayed-ACK estimate. */
	if (ca->delayed_ack)
		cnt = (cnt << ack_ratio_shift) / ca->delayed_ack;
	ca->cnt = cnt ? cnt : 1;
}

CC_CB(void, bic316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct bic316 *ca = cc_ca(sk);

	CC_GUARD(sk, bic316_ssthresh_for);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
	} else {
		bic_update(sk, ca, tp->snd_cwnd);
		cc316_cong_avoid_ai(tp, ca->cnt);
	}
}

CC_CB(u32, bic316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, bic316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_CB(u32, bic316_undo_cwnd, struct sock *sk)
{
	struct bic316 *ca = cc_ca(sk);

	CC_GUARD(sk, bic316_ssthresh_for);
	return cc316_guard_undo(sk, cc_max(cc_tp(sk)->snd_cwnd, ca->loss_cwnd));
}

CC_CB(void, bic316_set_state, struct sock *sk, u8 new_state)
{
	CC_GUARD(sk, bic316_ssthresh_for);
	if (new_state == TCP_CA_Loss)
		bic_reset(cc_ca(sk));
	cc316_guard_state(sk, new_state);
}

/* Packets per ACK as a moving average: ratio += sample - ratio/16. */
CC_CB(void, bic316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct bic316 *ca = cc_ca(sk);

	CC_GUARD_ACKED(sk, bic316_ssthresh_for, sample);
	if (cc_ca_state(sk) == TCP_CA_Open)
		ca->delayed_ack += sample->pkts_acked - (ca->delayed_ack >> ack_ratio_shift);
}

CC_OPS(bic316,
	.init = CC_FN(bic316_init),
	.ssthresh = CC_FN(bic316_ssthresh),
	.cong_avoid = CC_FN(bic316_cong_avoid),
	.set_state = CC_FN(bic316_set_state),
	.undo_cwnd = CC_FN(bic316_undo_cwnd),
	.pkts_acked = CC_FN(bic316_pkts_acked),
);

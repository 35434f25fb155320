// SPDX-License-Identifier: GPL-2.0
/* Scalable TCP as in Linux 3.16: +1 packet per ai_cnt ACKs once cwnd exceeds
 * ai_cnt (alpha = 0.02 per ACK), ssthresh = cwnd - cwnd/8 at every window size. */
#include "cc316.h"

CC_PARAM(ai_cnt, 50, "additive increase: cwnd += 1 per min(cwnd, ai_cnt) ACKs (alpha = 1/50 = 0.02, Low Window = 50)");
CC_PARAM(md_scale, 3, "multiplicative decrease: ssthresh = cwnd - (cwnd >> md_scale) (beta = 0.875)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

CC_CB(void, scalable316_init, struct sock *sk)
{
	cc316_guard_init(sk);
}

CC_INLINE u32 scalable316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd - (cwnd >> md_scale), min_ssthresh);
}

CC_CB(void, scalable316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);

	CC_GUARD(sk, scalable316_ssthresh_for);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp))
		cc316_slow_start(tp, acked);
	else
		cc316_cong_avoid_ai(tp, cc_min(tp->snd_cwnd, ai_cnt));
}

CC_CB(u32, scalable316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, scalable316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* 3.16 Scalable had no undo hook: the stack's default applies. */
CC_CB(u32, scalable316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, scalable316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_GUARD_ONLY_HOOKS(scalable316, scalable316_ssthresh_for)

CC_OPS(scalable316,
	.init = CC_FN(scalable316_init),
	.ssthresh = CC_FN(scalable316_ssthresh),
	.cong_avoid = CC_FN(scalable316_cong_avoid),
	.undo_cwnd = CC_FN(scalable316_undo_cwnd),
	.set_state = CC_FN(scalable316_set_state),
	.pkts_acked = CC_FN(scalable316_pkts_acked),
);

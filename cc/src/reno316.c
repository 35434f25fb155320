// SPDX-License-Identifier: GPL-2.0
/* TCP Reno as in Linux 3.16: 3.16 slow start, ACK-counting additive increase
 * (w = cwnd), halving on loss, and the stack's hook-less undo. */
#include "cc316.h"

CC_PARAM(md_shift, 1, "multiplicative decrease: ssthresh = cwnd >> md_shift (beta = 0.5)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

CC_CB(void, reno316_init, struct sock *sk)
{
}

CC_CB(u32, reno316_ssthresh, struct sock *sk)
{
	return cc_max(cc_tp(sk)->snd_cwnd >> md_shift, min_ssthresh);
}

CC_CB(void, reno316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);

	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp))
		cc316_slow_start(tp, acked);
	else
		cc316_cong_avoid_ai(tp, tp->snd_cwnd);
}

CC_CB(u32, reno316_undo_cwnd, struct sock *sk)
{
	return cc316_default_undo(cc_tp(sk));
}

CC_OPS(reno316,
	.init = CC_FN(reno316_init),
	.ssthresh = CC_FN(reno316_ssthresh),
	.cong_avoid = CC_FN(reno316_cong_avoid),
	.undo_cwnd = CC_FN(reno316_undo_cwnd),
);

// SPDX-License-Identifier: GPL-2.0
/* TCP Reno as in Linux 3.16: 3.16 slow start, ACK-counting additive increase
 * (w = cwnd), halving on loss, and the stack's hook-less undo. */
#include "cc316.h"

CC_PARAM(md_shift, 1, "multiplicative decrease: ssthresh = cwnd >> md_shift (beta = 0.5)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

CC_CB(void, reno316_init, struct sock *sk)
{
	cc316_guard_init(sk);
}

CC_INLINE u32 reno316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd >> md_shift, min_ssthresh);
}

CC_CB(u32, reno316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, reno316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_CB(void, reno316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	CC_GUARD(sk, reno316_ssthresh_for);
	cc316_reno_cong_avoid(sk, acked);
}

CC_CB(u32, reno316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, reno316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_GUARD_ONLY_HOOKS(reno316, reno316_ssthresh_for)

CC_OPS(reno316,
	.init = CC_FN(reno316_init),
	.ssthresh = CC_FN(reno316_ssthresh),
	.cong_avoid = CC_FN(reno316_cong_avoid),
	.undo_cwnd = CC_FN(reno316_undo_cwnd),
	.set_state = CC_FN(reno316_set_state),
	.pkts_acked = CC_FN(reno316_pkts_acked),
);

// SPDX-License-Identifier: GPL-2.0
/* TCP Vegas as in Linux 3.16 (Brakmo & Peterson 1995, as tcp_vegas.c does it): once
 * per RTT, diff = cwnd (minRTT - baseRTT) / baseRTT estimates the packets this flow
 * keeps queued (minRTT: the smallest RTT sample of the last RTT, baseRTT: of the
 * connection). In congestion avoidance cwnd grows by one per RTT below alpha, shrinks
 * by one above beta, stays in between; slow start ends once diff passes gamma, with
 * cwnd set to the rate actually achieved. Fewer than three samples in an RTT (delayed
 * ACKs), or outside Open, it is Reno. Losses halve (tcp_reno_ssthresh); no undo hook
 * (the stack's 3.16 default). */
#include "cc316.h"

CC_PARAM(alpha, 2, "lower bound of packets queued in the network: below it cwnd grows by one per RTT");
CC_PARAM(beta, 4, "upper bound of packets queued in the network: above it cwnd shrinks by one per RTT");
CC_PARAM(gamma, 1, "packets queued in slow start above which Vegas leaves slow start");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh and cwnd in packets (ssthresh on loss: cwnd/2)");

struct vegas316 {
	struct cc316_vegas v;
};
CC_STATIC_ASSERT(sizeof(struct vegas316) <= CC_PORT_PRIV_SIZE, "vegas316 state too large");

CC_CB(void, vegas316_init, struct sock *sk)
{
	struct vegas316 *ca = cc_ca(sk);

	cc316_vegas_init(sk, &ca->v);
	cc316_guard_init(sk);
}

CC_INLINE u32 vegas316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd >> 1, min_ssthresh);
}

CC_CB(u32, vegas316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, vegas316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* 3.16 tcp_vegas_ssthresh(): the threshold Vegas itself lowers to (cwnd - 1). */
CC_INLINE u32 vegas_own_ssthresh(struct tcp_sock *tp)
{
	return cc_min(tp->snd_ssthresh, tp->snd_cwnd - 1);
}

/* The once-per-RTT decision, from this RTT's samples. */
CC_INLINE void vegas_adjust(struct sock *sk, struct cc316_vegas *v, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 rtt = v->minRTT;
	/* the window that would have carried the achieved rate at baseRTT */
	u32 target = (u32)cc_div64((cc_u64)tp->snd_cwnd * v->baseRTT, rtt);
	/* u32 as in 3.16: packets queued, truncated */
	u32 diff = tp->snd_cwnd * (rtt - v->baseRTT) / v->baseRTT;

	if (diff > gamma && cc316_in_slow_start(tp)) {
		/* too fast for slow start: match the actual rate (+1 against truncation) */
		CC_SET_CWND(tp, cc_min(tp->snd_cwnd, target + 1));
		tp->snd_ssthresh = vegas_own_ssthresh(tp);
	} else if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
	} else if (diff > beta) {
		CC_SET_CWND(tp, tp->snd_cwnd - 1);
		tp->snd_ssthresh = vegas_own_ssthresh(tp);
	} else if (diff < alpha) {
		CC_SET_CWND(tp, tp->snd_cwnd + 1);
	}
	if (tp->snd_cwnd < min_ssthresh)
		CC_SET_CWND(tp, min_ssthresh);
	else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		CC_SET_CWND(tp, tp->snd_cwnd_clamp);
	tp->snd_ssthresh = cc316_current_ssthresh(sk);
}

CC_CB(void, vegas316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct cc316_vegas *v = &((struct vegas316 *)cc_ca(sk))->v;

	CC_GUARD(sk, vegas316_ssthresh_for);
	if (!v->doing_vegas_now) {
		cc316_reno_cong_avoid(sk, acked);
		return;
	}
	if (cc_after(ack, v->beg_snd_nxt)) {
		v->beg_snd_nxt = tp->snd_nxt;
		if (v->cntRTT <= 2) {
			/* one or two samples per RTT: delayed ACKs, no Vegas decision */
			cc316_reno_cong_avoid(sk, acked);
		} else {
			vegas_adjust(sk, v, acked);
		}
		v->cntRTT = 0;
		v->minRTT = 0x7fffffff;
	} else if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
	}
}

CC_CB(u32, vegas316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, vegas316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_CB(void, vegas316_set_state, struct sock *sk, u8 new_state)
{
	CC_GUARD(sk, vegas316_ssthresh_for);
	cc316_vegas_state(sk, &((struct vegas316 *)cc_ca(sk))->v, new_state);
	cc316_guard_state(sk, new_state);
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample): the same RTT
 * sample (us, negative: none), here in virtual time. */
CC_CB(void, vegas316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	CC_GUARD_ACKED(sk, vegas316_ssthresh_for, sample);
	cc316_vegas_rtt_sample(&((struct vegas316 *)cc_ca(sk))->v, cc_rtt_us(sample->rtt_us));
}

/* 3.16 and 6.x both announce idle restarts through cwnd_event (TX_START, CWND_RESTART);
 * Vegas ignored the ACK events, so no in_ack_event. */
CC_CB(void, vegas316_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	CC_GUARD(sk, vegas316_ssthresh_for);
	cc316_vegas_cwnd_event(sk, &((struct vegas316 *)cc_ca(sk))->v, ev);
}

CC_OPS(vegas316,
	.init = CC_FN(vegas316_init),
	.ssthresh = CC_FN(vegas316_ssthresh),
	.cong_avoid = CC_FN(vegas316_cong_avoid),
	.set_state = CC_FN(vegas316_set_state),
	.undo_cwnd = CC_FN(vegas316_undo_cwnd),
	.pkts_acked = CC_FN(vegas316_pkts_acked),
	.cwnd_event = CC_FN(vegas316_cwnd_event),
);

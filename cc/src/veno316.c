// SPDX-License-Identifier: GPL-2.0
/* TCP Veno as in Linux 3.16 (Fu & Liew 2003, as tcp_veno.c does it): Vegas's backlog
 * estimate N = cwnd (RTT - baseRTT)/RTT, taken on every ACK from that ACK's RTT sample
 * (minrtt is wiped after each ACK) against the connection's minimum, tells congestive
 * (N >= beta = 3) from random loss. A loss cuts cwnd to 4/5 when non-congestive and to
 * 1/2 when congestive; congestion avoidance adds one per RTT when non-congestive and one
 * every other RTT when congestive. Until three RTT samples were seen, or outside Open,
 * it is Reno. No undo hook (the stack's 3.16 default). */
#include "cc316.h"

CC_PARAM(beta, 3, "backlog N (packets) at or above which Veno deems the path congestive (3.16: a constant)");
CC_PARAM(v_param_shift, 1, "fixed-point shift of N (N << 1 compared with beta << 1)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh and cwnd in packets");

#define VENO_BETA (beta << v_param_shift)

struct veno316 {
	u32 diff;       /* N << v_param_shift, as the last ACK computed it (first: the probe's p0) */
	u32 inc;        /* congestive state: increase on the next counter wrap */
	u32 minrtt;     /* the current ACK's RTT sample, us + 1 */
	u32 basertt;    /* the connection's minimum, us + 1 */
	u16 cntrtt;     /* RTT samples seen (3.16 never resets it) */
	u8 doing_veno_now;
};
CC_STATIC_ASSERT(sizeof(struct veno316) <= CC_PORT_PRIV_SIZE, "veno316 state too large");

CC_INLINE void veno_enable(struct veno316 *ca)
{
	ca->doing_veno_now = 1;
	ca->minrtt = 0x7fffffff;
}

/* tcp_veno_init: also what an idle restart does (it keeps the sample count). */
CC_INLINE void veno_reset(struct veno316 *ca)
{
	ca->basertt = 0x7fffffff;
	ca->inc = 1;
	veno_enable(ca);
}

CC_CB(void, veno316_init, struct sock *sk)
{
	struct veno316 *ca = cc_ca(sk);

	ca->diff = 0;
	ca->cntrtt = 0;
	veno_reset(ca);
	cc316_guard_init(sk);
}

CC_INLINE u32 veno316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct veno316 *ca = cc_ca(sk);

	if (ca->diff < VENO_BETA)
		return cc_max(cwnd * 4 / 5, min_ssthresh); /* random loss: -1/5 */
	return cc_max(cwnd >> 1, min_ssthresh);            /* congestive: -1/2 */
}

CC_CB(u32, veno316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, veno316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_INLINE void veno_adjust(struct sock *sk, struct veno316 *ca, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	/* 3.16 multiplied cwnd by baseRTT in 32 bits before widening (it wraps once
	 * cwnd x baseRTT(us) passes 2^32, e.g. cwnd 21475 at 200 ms); kept as it was. */
	cc_u64 target = (cc_u64)(u32)(tp->snd_cwnd * ca->basertt) << v_param_shift;

	target = cc_div64(target, ca->minrtt);
	ca->diff = (tp->snd_cwnd << v_param_shift) - (u32)target;

	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
	} else if (ca->diff < VENO_BETA) {
		cc316_cong_avoid_ai(tp, tp->snd_cwnd); /* non-congestive: +1 per RTT */
	} else if (tp->snd_cwnd_cnt >= tp->snd_cwnd) {
		/* congestive: +1 on every other wrap of the counter, i.e. every other RTT */
		if (ca->inc && tp->snd_cwnd < tp->snd_cwnd_clamp) {
			CC_SET_CWND(tp, tp->snd_cwnd + 1);
			ca->inc = 0;
		} else {
			ca->inc = 1;
		}
		tp->snd_cwnd_cnt = 0;
	} else {
		tp->snd_cwnd_cnt++;
	}
	if (tp->snd_cwnd < min_ssthresh)
		CC_SET_CWND(tp, min_ssthresh);
	else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		CC_SET_CWND(tp, tp->snd_cwnd_clamp);
}

CC_CB(void, veno316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct veno316 *ca = cc_ca(sk);

	CC_GUARD(sk, veno316_ssthresh_for);
	if (!ca->doing_veno_now) {
		cc316_reno_cong_avoid(sk, acked);
		return;
	}
	if (!cc_is_cwnd_limited(sk))
		return;
	if (ca->cntrtt <= 2)
		cc316_reno_cong_avoid(sk, acked); /* too few samples yet */
	else
		veno_adjust(sk, ca, acked);
	ca->minrtt = 0x7fffffff; /* 3.16 wipes only the minimum, not the count */
}

CC_CB(u32, veno316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, veno316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_CB(void, veno316_set_state, struct sock *sk, u8 new_state)
{
	struct veno316 *ca = cc_ca(sk);

	CC_GUARD(sk, veno316_ssthresh_for);
	if (new_state == TCP_CA_Open)
		veno_enable(ca);
	else
		ca->doing_veno_now = 0;
	cc316_guard_state(sk, new_state);
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample): the same RTT
 * sample, here in virtual time. */
CC_CB(void, veno316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct veno316 *ca = cc_ca(sk);
	s32 rtt_us = cc_rtt_us(sample->rtt_us);
	u32 vrtt;

	CC_GUARD_ACKED(sk, veno316_ssthresh_for, sample);
	if (rtt_us < 0)
		return;
	vrtt = (u32)rtt_us + 1; /* never 0 */
	if (vrtt < ca->basertt)
		ca->basertt = vrtt;
	ca->minrtt = cc_min(ca->minrtt, vrtt);
	ca->cntrtt++;
}

/* Idle restarts start over, through cwnd_event in 6.x as in 3.16. */
CC_CB(void, veno316_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	CC_GUARD(sk, veno316_ssthresh_for);
	if (ev == CA_EVENT_CWND_RESTART || ev == CA_EVENT_TX_START)
		veno_reset(cc_ca(sk));
}

CC_OPS(veno316,
	.init = CC_FN(veno316_init),
	.ssthresh = CC_FN(veno316_ssthresh),
	.cong_avoid = CC_FN(veno316_cong_avoid),
	.set_state = CC_FN(veno316_set_state),
	.undo_cwnd = CC_FN(veno316_undo_cwnd),
	.pkts_acked = CC_FN(veno316_pkts_acked),
	.cwnd_event = CC_FN(veno316_cwnd_event),
);

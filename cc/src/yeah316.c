// SPDX-License-Identifier: GPL-2.0
/* YeAH-TCP as in Linux 3.16 (Baiocchi, Castellani & Vacirca 2007, as tcp_yeah.c does it
 * on top of tcp_vegas.c's RTT accounting): once per RTT the queue Q = cwnd (RTT -
 * baseRTT)/RTT (RTT: the minimum sample of the last RTT) picks the mode. Fast mode
 * (Q <= alpha = 80 and RTT - baseRTT <= baseRTT/phy) grows like Scalable TCP (+1 per
 * min(cwnd, 100) packets acked); slow mode grows like Reno and, when Q > alpha,
 * decongests at once: cwnd -= min(Q/gamma, cwnd/2^epsilon), not below reno_count, and
 * ssthresh = cwnd. A loss removes Q (at least cwnd/8, at most cwnd/2) unless slow mode
 * has lasted rho RTTs (Reno flows compete): then it halves. reno_count, the Reno-friendly
 * floor, grows by one per slow RTT, halves per loss, and goes back to 2 after zeta fast
 * RTTs. No undo hook (the stack's 3.16 default). */
#include "cc316.h"

CC_PARAM(yeah_alpha, 80, "TCP_YEAH_ALPHA: packets queued at the bottleneck that mean congestion");
CC_PARAM(yeah_gamma, 1, "TCP_YEAH_GAMMA: fraction (1/gamma) of the queue removed by decongestion");
CC_PARAM(yeah_delta, 3, "TCP_YEAH_DELTA: log2 of the least fraction of cwnd a loss removes (1/8)");
CC_PARAM(yeah_epsilon, 1, "TCP_YEAH_EPSILON: log2 of the largest fraction decongestion removes (1/2)");
CC_PARAM(yeah_phy, 8, "TCP_YEAH_PHY: fast mode needs RTT - baseRTT <= baseRTT/phy");
CC_PARAM(yeah_rho, 16, "TCP_YEAH_RHO: slow RTTs in a row after which a loss halves (Reno competes)");
CC_PARAM(yeah_zeta, 50, "TCP_YEAH_ZETA: fast RTTs after which reno_count returns to 2");
CC_PARAM(scalable_ai_cnt, 100, "TCP_SCALABLE_AI_CNT: fast mode adds one per min(cwnd, 100) packets");
CC_PARAM(cwnd_clamp, 33554431, "cwnd clamp yeah_init set (0xffffffff/128) for the decrease arithmetic");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets (not in 3.16; see yeah316_ssthresh_for)");

struct yeah316 {
	u32 lastQ;          /* Q of the last RTT decision (first: the probe's p0) */
	u32 doing_reno_now; /* slow RTTs in a row, 0: fast mode (p1) */
	u32 reno_count;     /* Reno-friendly floor of decongestion */
	u32 fast_count;     /* fast RTTs since reno_count was last reset */
	u32 pkts_acked;     /* packets the current ACK acknowledged */
	struct cc316_vegas v;
};
CC_STATIC_ASSERT(sizeof(struct yeah316) <= CC_PORT_PRIV_SIZE, "yeah316 state too large");

/* 3.16 also lowered snd_cwnd_clamp to 0xffffffff/128 here; BPF struct_ops cannot write the
 * clamp, so the port applies it itself where YeAH grows the window. */
CC_CB(void, yeah316_init, struct sock *sk)
{
	struct yeah316 *ca = cc_ca(sk);

	cc316_vegas_init(sk, &ca->v);
	ca->doing_reno_now = 0;
	ca->lastQ = 0;
	ca->reno_count = 2;
	ca->fast_count = 0;
	ca->pkts_acked = 0; /* set by pkts_acked before any cong_avoid */
	cc316_guard_init(sk);
}

/* 3.16 returned cwnd - reduction unclamped: 0 or a wrapped value for cwnd <= 3 with a
 * queue of 2 (later kernels clamp at 2); the 6.x stack warns on and stalls at a zero
 * window, so the port clamps as later kernels do. Identical for cwnd >= 4. */
CC_INLINE u32 yeah316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct yeah316 *ca = cc_ca(sk);
	u32 reduction;

	if (ca->doing_reno_now < yeah_rho) {
		/* remove the queue, between cwnd/8 and cwnd/2 */
		reduction = cc_min(ca->lastQ, cc_max(cwnd >> 1, 2));
		reduction = cc_max(reduction, cwnd >> yeah_delta);
	} else {
		reduction = cc_max(cwnd >> 1, 2); /* competing with Reno: halve */
	}
	ca->fast_count = 0;
	ca->reno_count = cc_max(ca->reno_count >> 1, 2);
	return cwnd > reduction + min_ssthresh ? cwnd - reduction : min_ssthresh;
}

CC_CB(u32, yeah316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, yeah316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* The once-per-RTT mode decision and precautionary decongestion. */
CC_INLINE void yeah_decide(struct sock *sk, struct yeah316 *ca)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 rtt = ca->v.minRTT, base = ca->v.baseRTT;
	u32 queue = (u32)cc_div64((cc_u64)tp->snd_cwnd * (rtt - base), rtt);

	if (queue > yeah_alpha || rtt - base > base / yeah_phy) {
		/* slow mode */
		if (queue > yeah_alpha && tp->snd_cwnd > ca->reno_count) {
			u32 reduction = cc_min(queue / yeah_gamma, tp->snd_cwnd >> yeah_epsilon);

			CC_SET_CWND(tp, cc_max(tp->snd_cwnd - reduction, ca->reno_count));
			tp->snd_ssthresh = tp->snd_cwnd;
		}
		if (ca->reno_count <= 2)
			ca->reno_count = cc_max(tp->snd_cwnd >> 1, 2);
		else
			ca->reno_count++;
		ca->doing_reno_now = cc_min(ca->doing_reno_now + 1, 0xffffff);
	} else {
		/* fast mode */
		ca->fast_count++;
		if (ca->fast_count > yeah_zeta) {
			ca->reno_count = 2;
			ca->fast_count = 0;
		}
		ca->doing_reno_now = 0;
	}
	ca->lastQ = queue;
}

CC_CB(void, yeah316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct yeah316 *ca = cc_ca(sk);

	CC_GUARD(sk, yeah316_ssthresh_for);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
	} else if (!ca->doing_reno_now) {
		/* fast mode: Scalable, counting packets */
		tp->snd_cwnd_cnt += ca->pkts_acked;
		if (tp->snd_cwnd_cnt > cc_min(tp->snd_cwnd, scalable_ai_cnt)) {
			if (tp->snd_cwnd < cc_min(tp->snd_cwnd_clamp, cwnd_clamp))
				CC_SET_CWND(tp, tp->snd_cwnd + 1);
			tp->snd_cwnd_cnt = 0;
		}
		ca->pkts_acked = 1;
	} else {
		cc316_cong_avoid_ai(tp, tp->snd_cwnd); /* slow mode: Reno */
	}
	if (cc_after(ack, ca->v.beg_snd_nxt)) {
		/* as in Vegas: at least three samples, or they are delayed ACKs only */
		if (ca->v.cntRTT > 2)
			yeah_decide(sk, ca);
		ca->v.beg_snd_una = ca->v.beg_snd_nxt;
		ca->v.beg_snd_nxt = tp->snd_nxt;
		ca->v.beg_snd_cwnd = tp->snd_cwnd;
		ca->v.cntRTT = 0;
		ca->v.minRTT = 0x7fffffff;
	}
}

CC_CB(u32, yeah316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, yeah316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

/* 3.16 YeAH used tcp_vegas_state and tcp_vegas_cwnd_event as they are. */
CC_CB(void, yeah316_set_state, struct sock *sk, u8 new_state)
{
	CC_GUARD(sk, yeah316_ssthresh_for);
	cc316_vegas_state(sk, &((struct yeah316 *)cc_ca(sk))->v, new_state);
	cc316_guard_state(sk, new_state);
}

CC_CB(void, yeah316_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	CC_GUARD(sk, yeah316_ssthresh_for);
	cc316_vegas_cwnd_event(sk, &((struct yeah316 *)cc_ca(sk))->v, ev);
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample): the packets (for
 * fast mode's count, in Open only) and the RTT sample (virtual time) for the accounting. */
CC_CB(void, yeah316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct yeah316 *ca = cc_ca(sk);

	CC_GUARD_ACKED(sk, yeah316_ssthresh_for, sample);
	if (cc_ca_state(sk) == TCP_CA_Open)
		ca->pkts_acked = sample->pkts_acked;
	cc316_vegas_rtt_sample(&ca->v, cc_rtt_us(sample->rtt_us));
}

CC_OPS(yeah316,
	.init = CC_FN(yeah316_init),
	.ssthresh = CC_FN(yeah316_ssthresh),
	.cong_avoid = CC_FN(yeah316_cong_avoid),
	.set_state = CC_FN(yeah316_set_state),
	.undo_cwnd = CC_FN(yeah316_undo_cwnd),
	.pkts_acked = CC_FN(yeah316_pkts_acked),
	.cwnd_event = CC_FN(yeah316_cwnd_event),
);

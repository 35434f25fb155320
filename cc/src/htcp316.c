// SPDX-License-Identifier: GPL-2.0
/* H-TCP as in Linux 3.16: alpha grows with the time since the last congestion
 * event (Delta_L = 1 s), scaled by RTT; beta = minRTT/maxRTT in [0.5, 0.8], forced
 * to 0.5 when the achieved throughput moves by more than Delta_B = 20 %. The
 * increase counts the packets acked reported through pkts_acked. All times are
 * emulated jiffies. */
#include "cc316.h"

CC_PARAM(use_rtt_scaling, 1, "scale alpha by RTT (RTT-fair increase), factor clamped to [0.5, 10]");
CC_PARAM(use_bandwidth_switch, 1, "force beta = 0.5 when the throughput estimate changes by more than Delta_B");
CC_PARAM(delta_l_ms, 1000, "Delta_L: time after a congestion event before alpha grows beyond 1 (ms)");
CC_PARAM(delta_b_pct, 20, "Delta_B: throughput change (percent) that resets beta to 0.5");
CC_PARAM(alpha_base, 128, "alpha = 1.0 in 1/128");
CC_PARAM(beta_min, 64, "lowest beta: 0.5 in 1/128");
CC_PARAM(beta_max, 102, "highest beta: 0.8 in 1/128");
CC_PARAM(beta_min_rtt_ms, 10, "beta follows minRTT/maxRTT only when minRTT exceeds this (ms)");
CC_PARAM(maxrtt_step_ms, 20, "maxRTT accepts samples at most this far above it (ms)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

struct htcp316 {
	u32 alpha;      /* increase per RTT << 7 */
	u8 beta;        /* decrease factor << 7 */
	u8 modeswitch;  /* beta adapts only after one congestion event */
	u16 pkts_acked; /* packets the current ACK acknowledged */
	u32 packetcount;
	u32 minRTT;     /* jiffies */
	u32 maxRTT;     /* jiffies */
	u32 last_cong;  /* jiffies of the last congestion event */
	u32 undo_last_cong;
	u32 undo_maxRTT;
	u32 undo_old_maxB;
	u32 minB;       /* throughput estimates, packets per second */
	u32 maxB;
	u32 old_maxB;
	u32 Bi;
	u32 lasttime;
};
CC_STATIC_ASSERT(sizeof(struct htcp316) <= CC_PORT_PRIV_SIZE, "htcp316 state too large");

CC_INLINE u32 htcp_cong_time(struct sock *sk, struct htcp316 *ca)
{
	return cc_jiffies(sk) - ca->last_cong;
}

/* Remember the state a spurious congestion event would have destroyed. */
CC_INLINE void htcp_reset(struct sock *sk, struct htcp316 *ca)
{
	ca->undo_last_cong = ca->last_cong;
	ca->undo_maxRTT = ca->maxRTT;
	ca->undo_old_maxB = ca->old_maxB;
	ca->last_cong = cc_jiffies(sk);
}

CC_CB(void, htcp316_init, struct sock *sk)
{
	struct htcp316 *ca = cc_ca(sk);
	u32 *w = (u32 *)ca;
	int i;

	for (i = 0; i < (int)(sizeof(*ca) / 4); i++)
		w[i] = 0;
	ca->alpha = alpha_base;
	ca->beta = beta_min;
	ca->pkts_acked = 1;
	ca->last_cong = cc_jiffies(sk);
	cc316_guard_init(sk);
}

/* The body of ssthresh() (defined below, next to the alpha and beta updates it makes). */
CC_INLINE u32 htcp316_ssthresh_for(struct sock *sk, u32 cwnd);

CC_CB(u32, htcp316_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct htcp316 *ca = cc_ca(sk);

	CC_GUARD(sk, htcp316_ssthresh_for);
	if (ca->undo_last_cong) {
		ca->last_cong = ca->undo_last_cong;
		ca->maxRTT = ca->undo_maxRTT;
		ca->old_maxB = ca->undo_old_maxB;
		ca->undo_last_cong = 0;
	}
	if (!ca->beta)
		return cc316_guard_undo(sk, tp->snd_cwnd);
	return cc316_guard_undo(sk, cc_max(tp->snd_cwnd, (tp->snd_ssthresh << 7) / ca->beta));
}

CC_INLINE void htcp_measure_rtt(struct sock *sk, struct htcp316 *ca, u32 srtt)
{
	if (ca->minRTT > srtt || !ca->minRTT)
		ca->minRTT = srtt;
	if (cc_ca_state(sk) == TCP_CA_Open) {
		if (ca->maxRTT < ca->minRTT)
			ca->maxRTT = ca->minRTT;
		/* ignore outliers more than 20 ms above the current maximum */
		if (ca->maxRTT < srtt && srtt <= ca->maxRTT + cc_msecs_to_jiffies(maxrtt_step_ms))
			ca->maxRTT = srtt;
	}
}

CC_CB(void, htcp316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct htcp316 *ca = cc_ca(sk);
	u32 now = cc_jiffies(sk);
	u32 alpha_pkts, cur_Bi, state;

	CC_GUARD_ACKED(sk, htcp316_ssthresh_for, sample);
	state = cc_ca_state(sk);
	if (state == TCP_CA_Open)
		ca->pkts_acked = sample->pkts_acked;
	if (sample->rtt_us > 0)
		htcp_measure_rtt(sk, ca, cc_usecs_to_jiffies(cc_rtt_us(sample->rtt_us)));
	if (!use_bandwidth_switch)
		return;

	/* Throughput is measured only while no recovery is under way. */
	if (state != TCP_CA_Open && state != TCP_CA_Disorder) {
		ca->packetcount = 0;
		ca->lasttime = now;
		return;
	}
	ca->packetcount += sample->pkts_acked;
	alpha_pkts = ca->alpha >> 7 ? ca->alpha >> 7 : 1;
	if (ca->packetcount >= tp->snd_cwnd - alpha_pkts &&
	    now - ca->lasttime >= ca->minRTT && ca->minRTT > 0) {
		cur_Bi = ca->packetcount * cc_hz / (now - ca->lasttime);
		if (htcp_cong_time(sk, ca) / ca->minRTT <= 3) {
			/* just after a backoff: restart the estimate */
			ca->minB = ca->maxB = ca->Bi = cur_Bi;
		} else {
			ca->Bi = (3 * ca->Bi + cur_Bi) / 4;
			if (ca->Bi > ca->maxB)
				ca->maxB = ca->Bi;
			if (ca->minB > ca->maxB)
				ca->minB = ca->maxB;
		}
		ca->packetcount = 0;
		ca->lasttime = now;
	}
}

CC_INLINE void htcp_beta_update(struct htcp316 *ca, u32 minRTT, u32 maxRTT)
{
	if (use_bandwidth_switch) {
		u32 maxB = ca->maxB, old_maxB = ca->old_maxB;

		ca->old_maxB = ca->maxB;
		/* |maxB - old_maxB| > Delta_B * old_maxB, i.e. 5 maxB outside
		 * [4, 6] old_maxB for Delta_B = 20 % */
		if (100 * maxB < (100 - delta_b_pct) * old_maxB ||
		    100 * maxB > (100 + delta_b_pct) * old_maxB) {
			ca->beta = beta_min;
			ca->modeswitch = 0;
			return;
		}
	}
	if (ca->modeswitch && minRTT > cc_msecs_to_jiffies(beta_min_rtt_ms) && maxRTT) {
		ca->beta = cc_clamp((minRTT << 7) / maxRTT, beta_min, beta_max);
	} else {
		ca->beta = beta_min;
		ca->modeswitch = 1;
	}
}

CC_INLINE void htcp_alpha_update(struct sock *sk, struct htcp316 *ca)
{
	u32 minRTT = ca->minRTT;
	u32 factor = 1;
	u32 diff = htcp_cong_time(sk, ca);
	u32 delta_l = cc_msecs_to_jiffies(delta_l_ms);

	/* f(d) = 1 + 10 d + (d/2)^2, d in seconds past Delta_L */
	if (diff > delta_l) {
		diff -= delta_l;
		factor = 1 + (10 * diff + ((diff / 2) * (diff / 2) / cc_hz)) / cc_hz;
	}
	if (use_rtt_scaling && minRTT) {
		/* scale = 1/(10 minRTT) in 1/8, clamped to [0.5, 10] */
		u32 scale = (cc_hz << 3) / (10 * minRTT);

		scale = cc_clamp(scale, 1U << 2, 10U << 3);
		factor = (factor << 3) / scale;
		if (!factor)
			factor = 1;
	}
	ca->alpha = 2 * factor * ((1 << 7) - ca->beta);
	if (!ca->alpha)
		ca->alpha = alpha_base;
}

CC_INLINE u32 htcp316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct htcp316 *ca = cc_ca(sk);
	u32 minRTT = ca->minRTT, maxRTT = ca->maxRTT;

	htcp_beta_update(ca, minRTT, maxRTT);
	htcp_alpha_update(sk, ca);
	/* let maxRTT fade towards minRTT (route changes) */
	if (minRTT > 0 && maxRTT > minRTT)
		ca->maxRTT = minRTT + ((maxRTT - minRTT) * 95) / 100;
	return cc_max((cwnd * ca->beta) >> 7, min_ssthresh);
}

CC_CB(u32, htcp316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, htcp316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_CB(void, htcp316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct htcp316 *ca = cc_ca(sk);

	CC_GUARD(sk, htcp316_ssthresh_for);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
		return;
	}
	/* cwnd += alpha/cwnd per packet acked */
	if ((tp->snd_cwnd_cnt * ca->alpha) >> 7 >= tp->snd_cwnd) {
		if (tp->snd_cwnd < tp->snd_cwnd_clamp)
			CC_SET_CWND(tp, tp->snd_cwnd + 1);
		tp->snd_cwnd_cnt = 0;
		htcp_alpha_update(sk, ca);
	} else {
		tp->snd_cwnd_cnt += ca->pkts_acked;
	}
	ca->pkts_acked = 1;
}

CC_CB(void, htcp316_set_state, struct sock *sk, u8 new_state)
{
	struct htcp316 *ca = cc_ca(sk);

	CC_GUARD(sk, htcp316_ssthresh_for);
	switch (new_state) {
	case TCP_CA_Open:
		if (ca->undo_last_cong) {
			ca->last_cong = cc_jiffies(sk);
			ca->undo_last_cong = 0;
		}
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
	case TCP_CA_Loss:
		htcp_reset(sk, ca);
		break;
	}
	cc316_guard_state(sk, new_state);
}

CC_OPS(htcp316,
	.init = CC_FN(htcp316_init),
	.ssthresh = CC_FN(htcp316_ssthresh),
	.cong_avoid = CC_FN(htcp316_cong_avoid),
	.set_state = CC_FN(htcp316_set_state),
	.undo_cwnd = CC_FN(htcp316_undo_cwnd),
	.pkts_acked = CC_FN(htcp316_pkts_acked),
);

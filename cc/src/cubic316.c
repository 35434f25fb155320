// SPDX-License-Identifier: GPL-2.0
/* CUBIC as in Linux 3.16: W(t) = C (t - K)^3 + Wmax on an emulated jiffies clock
 * (t includes the minimum delay), Reno-friendly region W_tcp, fast convergence,
 * HyStart (ACK train + delay increase, ms clock), a delayed-ACK ratio estimate,
 * undo to the window before the loss. */
#include "cc316.h"

CC_PARAM(fast_convergence, 1, "fast convergence: lower Wmax to cwnd*(1024+beta)/2048 after a loss below it");
CC_PARAM(beta, 717, "multiplicative decrease beta/1024 (717/1024 = 0.7)");
CC_PARAM(beta_scale, 1024, "scale of beta");
CC_PARAM(initial_ssthresh, 0, "initial ssthresh (0: stack default)");
CC_PARAM(bic_scale, 41, "C = bic_scale*10/1024 = 0.4 (cube scaling)");
CC_PARAM(tcp_friendliness, 1, "Reno-friendly region: legacy mode while cwnd < W_tcp(t)");
CC_PARAM(hystart, 1, "HyStart slow-start exit on");
CC_PARAM(hystart_detect, 3, "HyStart detectors: 1 ACK train, 2 delay increase, 3 both");
CC_PARAM(hystart_low_window, 16, "HyStart acts only from this cwnd on");
CC_PARAM(hystart_ack_delta, 2, "HyStart ACK-train spacing in ms");
CC_PARAM(hystart_min_samples, 8, "HyStart RTT samples per round");
CC_PARAM(hystart_delay_min_ms, 4, "HyStart delay threshold lower clamp (ms)");
CC_PARAM(hystart_delay_max_ms, 16, "HyStart delay threshold upper clamp (ms)");
CC_PARAM(bictcp_hz_shift, 10, "time unit of the cubic function: 2^-10 s");
CC_PARAM(ack_ratio_shift, 4, "fixed-point shift of the packets-per-ACK estimate");
CC_PARAM(ack_ratio_limit, 512, "upper clamp of the packets-per-ACK estimate (32 << 4)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

#define HYSTART_ACK_TRAIN 0x1
#define HYSTART_DELAY 0x2

struct cubic316 {
	u32 cnt;              /* ACKs per cwnd increment */
	u32 last_max_cwnd;    /* Wmax */
	u32 loss_cwnd;        /* cwnd at the last loss, for undo */
	u32 last_cwnd;        /* cwnd at the last update */
	u32 last_time;        /* emulated jiffies of the last update */
	u32 bic_origin_point; /* the plateau of the cubic */
	u32 bic_K;            /* time to the plateau, 2^-10 s */
	u32 delay_min;        /* minimum RTT, ms << 3 */
	u32 epoch_start;      /* emulated jiffies the epoch began, 0: none */
	u32 ack_cnt;          /* ACKs since the epoch began, for W_tcp */
	u32 tcp_cwnd;         /* W_tcp, the Reno-friendly window */
	u16 delayed_ack;      /* packets per ACK << ack_ratio_shift */
	u8 sample_cnt;        /* HyStart RTT samples this round */
	u8 found;             /* HyStart detector that fired */
	u32 round_start;      /* HyStart: ms the round began */
	u32 end_seq;          /* HyStart: snd_nxt at the round's start */
	u32 last_ack;         /* HyStart: ms of the last train ACK */
	u32 curr_rtt;         /* HyStart: min RTT this round, ms << 3 */
};
CC_STATIC_ASSERT(sizeof(struct cubic316) <= CC_PORT_PRIV_SIZE, "cubic316 state too large");

/* Derived constants, as 3.16 computed them at module load. */
#define CUBE_RTT_SCALE (bic_scale * 10)
/* 2^40 / (bic_scale * 10): (Wmax - cwnd) * CUBE_FACTOR = K^3 in 2^-30 s^3 */
#define CUBE_FACTOR ((cc_u64)(1ULL << (10 + 3 * bictcp_hz_shift)) / (bic_scale * 10))
/* W_tcp grows by one per (cwnd * BETA_TCP >> 3) ACKs: 3(1-b)/(1+b) per RTT */
#define BETA_TCP (8 * (beta_scale + beta) / 3 / (beta_scale - beta))

CC_INLINE void cubic_reset(struct cubic316 *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->bic_origin_point = 0;
	ca->bic_K = 0;
	ca->delay_min = 0;
	ca->epoch_start = 0;
	ca->delayed_ack = 2 << ack_ratio_shift;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

CC_INLINE void hystart_reset(struct sock *sk, struct cubic316 *ca)
{
	ca->round_start = ca->last_ack = cc_ms(sk);
	ca->end_seq = cc_tp(sk)->snd_nxt;
	ca->curr_rtt = 0;
	ca->sample_cnt = 0;
}

CC_CB(void, cubic316_init, struct sock *sk)
{
	struct cubic316 *ca = cc_ca(sk);

	cubic_reset(ca);
	ca->loss_cwnd = 0;
	if (hystart)
		hystart_reset(sk, ca);
	if (!hystart && initial_ssthresh)
		cc_tp(sk)->snd_ssthresh = initial_ssthresh;
	cc316_guard_init(sk);
}

CC_INLINE u32 cubic316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct cubic316 *ca = cc_ca(sk);

	ca->epoch_start = 0;
	if (fast_convergence && cwnd < ca->last_max_cwnd)
		ca->last_max_cwnd = cwnd * (beta_scale + beta) / (2 * beta_scale);
	else
		ca->last_max_cwnd = cwnd;
	ca->loss_cwnd = cwnd;
	return cc_max(cwnd * beta / beta_scale, min_ssthresh);
}

/* floor(cbrt(a)), exact: one result bit per step, branch-free so the BPF
 * verifier sees a single path (the residual stays far below 2^63). */
CC_INLINE u32 cubic_root(cc_u64 a)
{
	cc_u64 y = 0, b, take;
	int s;

	for (s = 63; s >= 0; s -= 3) {
		y <<= 1;
		b = 3 * y * (y + 1) + 1;
		take = ~(cc_u64)((s64)((a >> s) - b) >> 63); /* all ones if a>>s >= b */
		a -= (b << s) & take;
		y += 1 & take;
	}
	return (u32)y;
}

CC_INLINE void cubic_update(struct sock *sk, struct cubic316 *ca, u32 cwnd)
{
	u32 now = cc_jiffies(sk);
	u32 delta, target, max_cnt, cnt;
	cc_u64 offs, t;

	ca->ack_cnt++;
	if (ca->last_cwnd == cwnd && (s32)(now - ca->last_time) <= (s32)(cc_hz / 32))
		return;
	ca->last_cwnd = cwnd;
	ca->last_time = now;

	if (ca->epoch_start == 0) {
		ca->epoch_start = now;
		ca->ack_cnt = 1;
		ca->tcp_cwnd = cwnd;
		if (ca->last_max_cwnd <= cwnd) {
			ca->bic_K = 0;
			ca->bic_origin_point = cwnd;
		} else {
			ca->bic_K = cubic_root(CUBE_FACTOR * (ca->last_max_cwnd - cwnd));
			ca->bic_origin_point = ca->last_max_cwnd;
		}
	}

	/* t: time in the epoch plus the minimum delay, in 2^-10 s. */
	t = (s32)(now - ca->epoch_start);
	t += cc_msecs_to_jiffies(ca->delay_min >> 3);
	t = cc_div64(t << bictcp_hz_shift, cc_hz);
	offs = t < ca->bic_K ? ca->bic_K - t : t - ca->bic_K;
	/* C (t - K)^3 in packets; exact below a million packets. */
	delta = (u32)((CUBE_RTT_SCALE * offs * offs * offs) >> (10 + 3 * bictcp_hz_shift));
	target = t < ca->bic_K ? ca->bic_origin_point - delta : ca->bic_origin_point + delta;

	if (target > cwnd)
		cnt = cwnd / (target - cwnd);
	else
		cnt = 100 * cwnd; /* at or above the target: crawl */
	/* No maximum known yet: at least 5 % per RTT. */
	if (ca->last_max_cwnd == 0 && cnt > 20)
		cnt = 20;

	if (tcp_friendliness) {
		u32 per = (cwnd * BETA_TCP) >> 3;

		if (per && ca->ack_cnt > per) {
			u32 n = (ca->ack_cnt - 1) / per;

			ca->ack_cnt -= n * per;
			ca->tcp_cwnd += n;
		}
		/* Legacy mode: do not grow slower than Reno would. */
		if (ca->tcp_cwnd > cwnd) {
			max_cnt = cwnd / (ca->tcp_cwnd - cwnd);
			if (cnt > max_cnt)
				cnt = max_cnt;
		}
	}
	if (ca->delayed_ack)
		cnt = (cnt << ack_ratio_shift) / ca->delayed_ack;
	ca->cnt = cnt ? cnt : 1;
}

CC_CB(void, cubic316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct cubic316 *ca = cc_ca(sk);

	CC_GUARD(sk, cubic316_ssthresh_for);
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		if (hystart && cc_after(ack, ca->end_seq))
			hystart_reset(sk, ca);
		cc316_slow_start(tp, acked);
	} else {
		cubic_update(sk, ca, tp->snd_cwnd);
		cc316_cong_avoid_ai(tp, ca->cnt);
	}
}

CC_CB(u32, cubic316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, cubic316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

CC_CB(u32, cubic316_undo_cwnd, struct sock *sk)
{
	struct cubic316 *ca = cc_ca(sk);

	CC_GUARD(sk, cubic316_ssthresh_for);
	return cc316_guard_undo(sk, cc_max(cc_tp(sk)->snd_cwnd, ca->loss_cwnd));
}

CC_CB(void, cubic316_set_state, struct sock *sk, u8 new_state)
{
	struct cubic316 *ca = cc_ca(sk);

	CC_GUARD(sk, cubic316_ssthresh_for);
	if (new_state == TCP_CA_Loss) {
		cubic_reset(ca);
		hystart_reset(sk, ca);
	}
	cc316_guard_state(sk, new_state);
}

CC_INLINE void hystart_update(struct sock *sk, struct cubic316 *ca, u32 delay)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 now, thresh;

	if (ca->found & hystart_detect)
		return;
	now = cc_ms(sk);
	/* ACK train: closely spaced ACKs spanning half the minimum RTT. */
	if ((s32)(now - ca->last_ack) <= hystart_ack_delta) {
		ca->last_ack = now;
		if ((s32)(now - ca->round_start) > (s32)(ca->delay_min >> 4))
			ca->found |= HYSTART_ACK_TRAIN;
	}
	/* Delay increase: the round's minimum RTT exceeds the path minimum by
	 * clamp(minRTT/16, 4 ms, 16 ms). */
	if (ca->sample_cnt < hystart_min_samples) {
		if (ca->curr_rtt == 0 || ca->curr_rtt > delay)
			ca->curr_rtt = delay;
		ca->sample_cnt++;
	} else {
		thresh = cc_clamp(ca->delay_min >> 4, hystart_delay_min_ms << 3,
				  hystart_delay_max_ms << 3);
		if (ca->curr_rtt > ca->delay_min + thresh)
			ca->found |= HYSTART_DELAY;
	}
	if (ca->found & hystart_detect)
		tp->snd_ssthresh = tp->snd_cwnd;
}

CC_CB(void, cubic316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct cubic316 *ca = cc_ca(sk);
	s32 rtt_us = cc_rtt_us(sample->rtt_us);
	u32 delay;

	CC_GUARD_ACKED(sk, cubic316_ssthresh_for, sample);
	/* Packets per ACK as a moving average: ratio += sample - ratio/16. */
	if (cc_ca_state(sk) == TCP_CA_Open) {
		u32 ratio = ca->delayed_ack;

		ratio -= ca->delayed_ack >> ack_ratio_shift;
		ratio += sample->pkts_acked;
		ca->delayed_ack = cc_clamp(ratio, 1, ack_ratio_limit);
	}
	if (rtt_us < 0)
		return;
	/* Ignore delay samples for a second after a loss (queues still draining). */
	if (ca->epoch_start && (s32)(cc_jiffies(sk) - ca->epoch_start) < (s32)cc_hz)
		return;
	delay = (u32)cc_div64((cc_u64)rtt_us << 3, 1000);
	if (delay == 0)
		delay = 1;
	if (ca->delay_min == 0 || ca->delay_min > delay)
		ca->delay_min = delay;
	if (hystart && cc316_in_slow_start(tp) && tp->snd_cwnd >= hystart_low_window)
		hystart_update(sk, ca, delay);
}

CC_OPS(cubic316,
	.init = CC_FN(cubic316_init),
	.ssthresh = CC_FN(cubic316_ssthresh),
	.cong_avoid = CC_FN(cubic316_cong_avoid),
	.set_state = CC_FN(cubic316_set_state),
	.undo_cwnd = CC_FN(cubic316_undo_cwnd),
	.pkts_acked = CC_FN(cubic316_pkts_acked),
);

// SPDX-License-Identifier: GPL-2.0
/* TCP-NV, "New Vegas" (L. Brakmo; Linux 4.8's tcp_nv), written for this project on the
 * shim. Not a Linux 3.16 algorithm: variant "nv" outside the 3.16 set
 * (tcpeval.cc.EXTRA_VARIANTS), known to the kernel as nv_tev so that it is taken neither
 * for a 3.16 port nor for a kernel's own "nv".
 *
 * Delay-based, like Vegas. NV keeps a rolling minimum RTT: the smallest averaged RTT
 * sample (EWMA, new sample weight rtt_factor/256) of the current period and the one
 * before; at the end of a period (the first after 2 s, then every reset_period seconds
 * jittered to [3/4, 5/4) of it) the minimum restarts from the period just ended, so that
 * a path whose propagation delay grew is learnt again (and, as in Linux, a flow that never
 * drains its own pad takes it into the next period's minimum: a base RTT prevents that).
 * Once per round trip (the cumulative ACK passing the snd_nxt of the round's start) it
 * takes the rate the round achieved (segments delivered / the round's duration) and the
 * window the highest rate since the last decision needs at the current minimum RTT,
 * cwnd_by_slope = max rate x min RTT; the segments in flight beyond it are the queue
 * this flow keeps. With
 * enough evidence since the last decision (at least rtt_min_cnt rounds and
 * dec_eval_min_calls RTT samples, or ssthresh_eval_min_calls in slow start) a queue
 * above pad packets is congestion: ssthresh = max_win
 * (= cwnd_by_slope + pad; x ssthresh_factor / 8), which also ends slow start, and cwnd
 * falls by cong_dec_mult/128 of its excess over max_win (to max_win when that is at most
 * 2), and growth stops. A queue of at most pad - pad_buffer (and inc_eval_min_calls
 * samples) lets cwnd grow again; in between nothing changes. Growth is 3.16 Reno's (slow
 * start, then one segment per cwnd ACKs: cc316_*), slowed by 2^-f after losses (f
 * recovers by one per cwnd_growth_rate_neg growth decisions). Loss: ssthresh = cwnd x
 * loss_dec_factor / 1024 (512: Reno's halving); every reduction (CWR, Recovery, Loss)
 * stops growth and starts the round accounting over in Open; the averaged RTT starts
 * over then too, and NV takes the first new sample (x 2, lowered by the sample itself)
 * as the minimum.
 *
 * Where ours differs from tcp_nv.c, and why:
 * - Base RTT. Linux (4.13 on) asks a sock_ops program for a base RTT at init
 *   (BPF_SOCK_OPS_BASE_RTT); when it gives one, RTT samples are bounded to
 *   [80 % of it, it] before they enter the minimum. A BPF struct_ops program cannot make
 *   that call, so here the base RTT is the parameter base_rtt_us (virtual microseconds,
 *   0 = none: measure as usual), which the loader sets (CC_LOAD_PARAM: tevcc-loader's
 *   base_rtt_us=N, the kernel module's parameter base_rtt_us). With it the minimum RTT
 *   starts at it, at init and after every reduction (rather than at the first sample),
 *   and samples are bounded as Linux bounds them.
 * - The rate. Linux's per-ACK rate is the bytes in flight when the acknowledged segment
 *   was sent over the averaged RTT, maxed over the evaluation, and compared with the
 *   current cwnd. Ours measures each round's achieved rate (tp->delivered over the
 *   round's duration, the same on every target), keeps the highest since the last
 *   decision as Linux does (the rate, not the window it gave: a minimum that a period's
 *   end lowered applies at once, as in Linux; a window kept from the old minimum held a
 *   standing queue that sat between the two thresholds for as long as the run), and
 *   compares its cwnd_by_slope with the segments in flight
 *   when the round just ended began -- the window the round carried -- so that slow
 *   start's doubling within a round is not taken for a queue. The decrease is then
 *   applied to the current cwnd as Linux does.
 * - Growth is 3.16's (the shim's slow start, ACK-counting additive increase), as every
 *   port here, not 4.8's packet counting.
 * - Left out: the TSO/LRO minimum-window heuristic (nv_min_cwnd growth when an RTT brings
 *   one ACK) and its catch-up mode; the reset jitter comes from the low bits of the
 *   microsecond clock instead of get_random_bytes().
 * - Undo: the stack's 3.16 default (4.8's NV had no undo hook), as vegas316.
 */
#define CC_DESCRIPTION "tcpeval: TCP-NV (Linux 4.8 tcp_nv) on the 3.16 ports' shim; not a Linux 3.16 algorithm"
#include "cc316.h"

CC_PARAM(pad, 10, "queued packets above which NV decides on congestion and decreases cwnd (nv_pad)");
CC_PARAM(pad_buffer, 2, "NV lets cwnd grow only with at most pad - pad_buffer packets queued (nv_pad_buffer)");
CC_PARAM(reset_period, 5, "seconds between restarts of the rolling minimum RTT, jittered to [3/4, 5/4) (the first after 2 s)");
CC_PARAM(min_cwnd, 2, "NV decreases cwnd to no less than this, in packets");
CC_PARAM(cong_dec_mult, 38, "decrease on congestion: cong_dec_mult/128 of cwnd - max_win (38: 30 %)");
CC_PARAM(ssthresh_factor, 8, "ssthresh on congestion: max_win x ssthresh_factor / 8");
CC_PARAM(rtt_factor, 128, "weight of a new sample in the averaged RTT, in 1/256 (0: no averaging)");
CC_PARAM(loss_dec_factor, 512, "ssthresh on loss: cwnd x loss_dec_factor / 1024 (512: Reno's halving, as Linux 4.8; later kernels 819)");
CC_PARAM(cwnd_growth_rate_neg, 8, "after a loss, growth decisions per step back towards Reno's rate (0: none)");
CC_PARAM(cwnd_growth_rate_pos, 0, "growth decisions per step of growth faster than Reno's (0: never faster)");
CC_PARAM(dec_eval_min_calls, 60, "RTT samples since the last decision needed to decide on congestion");
CC_PARAM(inc_eval_min_calls, 20, "RTT samples since the last decision needed to allow growth");
CC_PARAM(ssthresh_eval_min_calls, 30, "RTT samples needed to decide on congestion in slow start (ssthresh unset)");
CC_PARAM(stop_rtt_cnt, 10, "rounds without a decision after which a pending congestion stops growth");
CC_PARAM(rtt_min_cnt, 2, "rounds since the last decision needed to decide on congestion");
CC_PARAM(base_rtt_us, 0, "base RTT in virtual us, set by the loader (Linux: a sock_ops program's BPF_SOCK_OPS_BASE_RTT); 0: measure");
CC_LOAD_PARAM(base_rtt_us);

#define NV_FIRST_RESET_S 2           /* the first restart of the minimum, s after init */
#define NV_NO_RTT 0xffffffffU        /* no minimum yet */
#define NV_MAX_SLOWDOWN 8            /* after losses growth is at most 2^8 times slower */
#define NV_RATE_SHIFT 20             /* rates in segments per us, 20 fractional bits */
CC_STATIC_ASSERT(rtt_factor >= 0 && rtt_factor <= 256, "rtt_factor out of range");
CC_STATIC_ASSERT((int)pad_buffer <= (int)pad, "pad_buffer above pad");

struct nv_tev {
	u32 min_rtt;         /* us: the rolling minimum the decisions use */
	u32 min_rtt_new;     /* us: the minimum of the current period, the next min_rtt */
	u32 min_rtt_reset;   /* cc_jiffies() at which the period ends */
	u32 avg_rtt;         /* us: the averaged RTT (0: no sample since the last reset) */
	u32 base_rtt;        /* us: base_rtt_us at init (0: none) */
	u32 lower_bound_rtt; /* us: samples below are raised to it (80 % of base_rtt) */
	u32 round_end;       /* the round ends when snd_una reaches this (its start's snd_nxt) */
	u32 round_start_us;  /* cc_us() when it began (low 32 bits) */
	u32 round_delivered; /* tp->delivered when it began */
	u32 round_flight;    /* segments in flight when it began */
	u32 queue;           /* the queue the last round showed, in segments */
	u32 max_rate;        /* the highest round rate since the last decision (NV_RATE_SHIFT) */
	s32 growth_factor;   /* < 0: growth 2^f times Reno's; > 0: faster */
	u8 eval_calls;       /* RTT samples since the last decision (to 255) */
	u8 rtt_cnt;          /* rounds since the last decision (to 255) */
	u8 allow_growth;
	u8 reset_pending;    /* a reduction began: start over when back in Open */
	u8 no_cong_cnt;      /* growth decisions since growth_factor last moved */
	u8 round_open;       /* a round is being measured */
	u8 _pad[2];
};
CC_STATIC_ASSERT(sizeof(struct nv_tev) <= CC_PORT_PRIV_SIZE, "nv_tev state too large");

/* Start over (init, idle restart, back in Open after a reduction): no averaged RTT, no
 * evidence, the next ACK opens a round. */
CC_INLINE void nv_tev_reset(struct nv_tev *ca)
{
	ca->reset_pending = 0;
	ca->no_cong_cnt = 0;
	ca->rtt_cnt = 0;
	ca->eval_calls = 0;
	ca->avg_rtt = 0;
	ca->max_rate = 0;
	ca->queue = 0;
	ca->round_open = 0;
}

CC_CB(void, nv_tev_init, struct sock *sk)
{
	struct nv_tev *ca = cc_ca(sk);
	u32 base = cc_lp_base_rtt_us;

	ca->base_rtt = base;
	ca->lower_bound_rtt = (u32)(((cc_u64)base * 205) >> 8);
	ca->min_rtt = base ? base : NV_NO_RTT;
	ca->min_rtt_new = NV_NO_RTT;
	ca->min_rtt_reset = cc_jiffies(sk) + NV_FIRST_RESET_S * cc_hz;
	ca->allow_growth = 1;
	ca->growth_factor = 0;
	nv_tev_reset(ca);
	cc316_guard_init(sk);
}

CC_INLINE u32 nv_tev_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max((u32)(((cc_u64)cwnd * loss_dec_factor) >> 10), 2);
}

CC_CB(u32, nv_tev_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, nv_tev_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* A sample as the minimum takes it: within [80 %, 100 %] of the base RTT, if one is set. */
CC_INLINE u32 nv_tev_bounded(struct nv_tev *ca, u32 rtt)
{
	if (rtt < ca->lower_bound_rtt)
		return ca->lower_bound_rtt;
	if (ca->base_rtt && rtt > ca->base_rtt)
		return ca->base_rtt;
	return rtt;
}

/* The decision at the end of a round, from the queue it showed beyond cwnd_by_slope. */
CC_INLINE void nv_tev_decide(struct tcp_sock *tp, struct nv_tev *ca, u32 cwnd_by_slope)
{
	u32 max_win = cwnd_by_slope + pad;
	u32 cwnd = tp->snd_cwnd;

	if (ca->queue > pad) {
		/* congestion, if the evidence suffices */
		if (ca->rtt_cnt < rtt_min_cnt)
			return;
		if (tp->snd_ssthresh >= CC_INFINITE_SSTHRESH) {
			if (ca->eval_calls < ssthresh_eval_min_calls)
				return;
		} else if (ca->eval_calls < dec_eval_min_calls) {
			if (ca->allow_growth && ca->rtt_cnt > stop_rtt_cnt)
				ca->allow_growth = 0;
			return;
		}
		ca->allow_growth = 0;
		tp->snd_ssthresh = cc_max((u32)(((cc_u64)max_win * ssthresh_factor) >> 3), 2);
		if (cwnd > max_win + 2)
			CC_SET_CWND(tp, cwnd - cc_max(2, (u32)(((cc_u64)(cwnd - max_win) * cong_dec_mult) >> 7)));
		else if (cwnd > max_win && cong_dec_mult > 0)
			CC_SET_CWND(tp, max_win);
		if (ca->growth_factor > 0)
			ca->growth_factor = 0;
		ca->no_cong_cnt = 0;
	} else if (ca->queue + pad_buffer <= pad) {
		/* room: growth, once enough samples say so */
		if (ca->eval_calls < inc_eval_min_calls)
			return;
		ca->allow_growth = 1;
		if (ca->no_cong_cnt < 255)
			ca->no_cong_cnt++;
		if (ca->growth_factor < 0 && cwnd_growth_rate_neg > 0 &&
		    ca->no_cong_cnt > cwnd_growth_rate_neg) {
			ca->growth_factor++;
			ca->no_cong_cnt = 0;
		} else if (ca->growth_factor >= 0 && cwnd_growth_rate_pos > 0 &&
			   ca->no_cong_cnt > cwnd_growth_rate_pos) {
			ca->growth_factor++;
			ca->no_cong_cnt = 0;
		}
	} else {
		return; /* between the two: gather more */
	}
	ca->eval_calls = 0;
	ca->rtt_cnt = 0;
	ca->max_rate = 0;
	if (tp->snd_cwnd < min_cwnd)
		CC_SET_CWND(tp, min_cwnd);
}

/* At every ACK with an RTT sample in Open/Disorder: end the round once the cumulative ACK
 * passes its start's snd_nxt (infer the queue, decide), then open the next. */
CC_INLINE void nv_tev_round(struct sock *sk, struct nv_tev *ca)
{
	struct tcp_sock *tp = cc_tp(sk);
	u32 now = (u32)cc_us(sk);
	u32 elapsed, delivered, rate, slope;
	cc_u64 rate64;

	if (ca->round_open) {
		if (cc_after(ca->round_end, tp->snd_una))
			return; /* the round goes on */
		if (ca->rtt_cnt < 255)
			ca->rtt_cnt++;
		elapsed = now - ca->round_start_us;
		delivered = tp->delivered - ca->round_delivered;
		if (elapsed && ca->round_flight && ca->min_rtt != NV_NO_RTT) {
			/* the window the highest rate needs at the minimum RTT */
			rate64 = cc_div64((cc_u64)delivered << NV_RATE_SHIFT, elapsed);
			rate = rate64 > 0xffffffffULL ? 0xffffffffU : (u32)rate64;
			ca->max_rate = cc_max(ca->max_rate, rate);
			slope = (u32)(((cc_u64)ca->max_rate * ca->min_rtt) >> NV_RATE_SHIFT);
			ca->queue = ca->round_flight > slope ? ca->round_flight - slope : 0;
			nv_tev_decide(tp, ca, slope);
		}
	}
	ca->round_open = 1;
	ca->round_end = tp->snd_nxt;
	ca->round_start_us = now;
	ca->round_delivered = tp->delivered;
	ca->round_flight = (u32)cc_div64(tp->snd_nxt - tp->snd_una, tp->mss_cache);
}

CC_CB(void, nv_tev_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct nv_tev *ca = cc_ca(sk);
	s32 rtt_us = cc_rtt_us(sample->rtt_us);
	u32 state = cc_ca_state(sk);
	u32 avg, now_j, rnd;

	CC_GUARD_ACKED(sk, nv_tev_ssthresh_for, sample);
	if (rtt_us < 0 || (state != TCP_CA_Open && state != TCP_CA_Disorder))
		return;
	/* the averaged RTT; its first sample (after a reset) also restarts the minimum */
	if (rtt_factor > 0 && ca->avg_rtt) {
		avg = (u32)(((cc_u64)rtt_us * rtt_factor + (cc_u64)ca->avg_rtt * (256 - rtt_factor)) >> 8);
	} else {
		avg = (u32)rtt_us;
		ca->min_rtt = ca->base_rtt ? ca->base_rtt : cc_min(avg, 0x7fffffff) << 1;
	}
	avg = cc_max(avg, 1);
	ca->avg_rtt = avg;
	if (ca->eval_calls < 255)
		ca->eval_calls++;

	avg = nv_tev_bounded(ca, avg);
	ca->min_rtt = cc_min(ca->min_rtt, avg);
	ca->min_rtt_new = cc_min(ca->min_rtt_new, avg);
	now_j = cc_jiffies(sk);
	if (!cc_after(ca->min_rtt_reset, now_j)) {
		/* the period is over: its minimum becomes the one in use */
		ca->min_rtt = ca->base_rtt ? cc_min(ca->min_rtt_new, ca->base_rtt) : ca->min_rtt_new;
		ca->min_rtt_new = NV_NO_RTT;
		rnd = (u32)cc_tp(sk)->tcp_mstamp & 0xff;
		ca->min_rtt_reset = now_j + (u32)(((cc_u64)reset_period * (384 + rnd) * cc_hz) >> 9);
	}
	nv_tev_round(sk, ca);
}

CC_CB(void, nv_tev_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct nv_tev *ca = cc_ca(sk);
	s32 f = ca->growth_factor;
	u32 cnt;

	CC_GUARD(sk, nv_tev_ssthresh_for);
	if (!cc_is_cwnd_limited(sk) || !ca->allow_growth)
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
		return;
	}
	if (f < 0) {
		f = f < -NV_MAX_SLOWDOWN ? NV_MAX_SLOWDOWN : -f;
		cnt = tp->snd_cwnd > (0xffffffffU >> NV_MAX_SLOWDOWN) ? 0xffffffffU : tp->snd_cwnd << f;
	} else {
		cnt = cc_max(4, tp->snd_cwnd >> (f > 31 ? 31 : f));
	}
	cc316_cong_avoid_ai(tp, cnt);
}

CC_CB(u32, nv_tev_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, nv_tev_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

/* A reduction stops growth and, back in Open, starts over; a timeout also slows growth. */
CC_CB(void, nv_tev_set_state, struct sock *sk, u8 new_state)
{
	struct nv_tev *ca = cc_ca(sk);

	CC_GUARD(sk, nv_tev_ssthresh_for);
	if (new_state == TCP_CA_Open && ca->reset_pending) {
		nv_tev_reset(ca);
	} else if (new_state == TCP_CA_Loss || new_state == TCP_CA_CWR ||
		   new_state == TCP_CA_Recovery) {
		ca->reset_pending = 1;
		ca->allow_growth = 0;
		if (new_state == TCP_CA_Loss) {
			if (ca->growth_factor > 0)
				ca->growth_factor = 0;
			if (cwnd_growth_rate_neg > 0 && ca->growth_factor > -NV_MAX_SLOWDOWN)
				ca->growth_factor--;
		}
	}
	cc316_guard_state(sk, new_state);
}

/* Sending again after idle: start over. */
CC_CB(void, nv_tev_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	CC_GUARD(sk, nv_tev_ssthresh_for);
	if (ev == CA_EVENT_TX_START)
		nv_tev_reset(cc_ca(sk));
}

CC_OPS(nv_tev,
	.init = CC_FN(nv_tev_init),
	.ssthresh = CC_FN(nv_tev_ssthresh),
	.cong_avoid = CC_FN(nv_tev_cong_avoid),
	.undo_cwnd = CC_FN(nv_tev_undo_cwnd),
	.set_state = CC_FN(nv_tev_set_state),
	.pkts_acked = CC_FN(nv_tev_pkts_acked),
	.cwnd_event = CC_FN(nv_tev_cwnd_event),
);

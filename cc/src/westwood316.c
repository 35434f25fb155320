// SPDX-License-Identifier: GPL-2.0
/* TCP Westwood+ as in Linux 3.16 (Mascolo et al., as tcp_westwood.c does it): the bytes
 * ACKed per window of at least one RTT (and at least HZ/20) give a bandwidth sample,
 * low-pass filtered twice (7/8 old + 1/8 new) into BWE, in bytes per jiffy. Growth is
 * Reno's and a fast-recovery entry halves as Reno does, but when the reduction completes
 * (CA_EVENT_COMPLETE_CWR) cwnd = ssthresh = BWE x RTTmin / mss, the path's pipe at the
 * minimum RTT, and an RTO (CA_EVENT_LOSS) sets ssthresh to the same. Delayed and
 * duplicate ACKs are accounted so that each byte counts once. No undo hook (the stack's
 * 3.16 default). */
#include "cc316.h"

CC_PARAM(rtt_min_hz_div, 20, "TCP_WESTWOOD_RTT_MIN = HZ/20 jiffies (50 ms): the shortest bandwidth-sample window");
CC_PARAM(init_rtt_hz_mul, 20, "TCP_WESTWOOD_INIT_RTT = 20*HZ jiffies (20 s): the RTT assumed before a sample");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets (loss: cwnd/2; after it: BWE x RTTmin / mss)");

struct westwood316 {
	u32 bw_est;     /* BWE, bytes per jiffy (first: the probe's p0) */
	u32 rtt_min;    /* jiffies (p1) */
	u32 bw_ns_est;  /* the first filter's output */
	u32 rtt_win_sx; /* jiffies the current sample window began */
	u32 bk;         /* bytes ACKed in it */
	u32 snd_una;    /* snd_una at the last ACK event */
	u32 cumul_ack;
	u32 accounted;  /* bytes credited to duplicate ACKs, not yet cumulatively ACKed */
	u32 rtt;        /* the last RTT sample, jiffies */
	u8 first_ack;
	u8 reset_rtt_min;
};
CC_STATIC_ASSERT(sizeof(struct westwood316) <= CC_PORT_PRIV_SIZE, "westwood316 state too large");

CC_CB(void, westwood316_init, struct sock *sk)
{
	struct westwood316 *w = cc_ca(sk);

	w->bk = 0;
	w->bw_ns_est = 0;
	w->bw_est = 0;
	w->accounted = 0;
	w->cumul_ack = 0;
	w->reset_rtt_min = 1;
	w->rtt_min = w->rtt = init_rtt_hz_mul * cc_hz;
	w->rtt_win_sx = cc_jiffies(sk);
	w->snd_una = cc_tp(sk)->snd_una;
	w->first_ack = 1;
	cc316_guard_init(sk);
}

CC_INLINE u32 westwood316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd >> 1, min_ssthresh); /* tcp_reno_ssthresh */
}

CC_CB(u32, westwood316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, westwood316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* BWE x RTTmin in packets (3.16: 32-bit product), at least 2. */
CC_INLINE u32 westwood_bw_rttmin(struct sock *sk)
{
	struct westwood316 *w = cc_ca(sk);

	return cc_max(w->bw_est * w->rtt_min / cc_tp(sk)->mss_cache, min_ssthresh);
}

CC_INLINE u32 westwood_do_filter(u32 a, u32 b)
{
	return (7 * a + b) >> 3;
}

CC_INLINE void westwood_filter(struct westwood316 *w, u32 delta)
{
	if (w->bw_ns_est == 0 && w->bw_est == 0) {
		w->bw_ns_est = w->bk / delta; /* the first sample fills the filter */
		w->bw_est = w->bw_ns_est;
	} else {
		w->bw_ns_est = westwood_do_filter(w->bw_ns_est, w->bk / delta);
		w->bw_est = westwood_do_filter(w->bw_est, w->bw_ns_est);
	}
}

/* Close the sample window once it spans an RTT (and HZ/20); the first ACK only sets the
 * left edge of the byte count. */
CC_INLINE void westwood_update_window(struct sock *sk, struct westwood316 *w)
{
	u32 now = cc_jiffies(sk);
	s32 delta = (s32)(now - w->rtt_win_sx);

	if (w->first_ack) {
		w->snd_una = cc_tp(sk)->snd_una;
		w->first_ack = 0;
	}
	if (w->rtt && (u32)delta > cc_max(w->rtt, cc_hz / rtt_min_hz_div)) {
		westwood_filter(w, (u32)delta);
		w->bk = 0;
		w->rtt_win_sx = now;
	}
}

CC_INLINE void westwood_update_rtt_min(struct westwood316 *w)
{
	if (w->reset_rtt_min) {
		w->rtt_min = w->rtt;
		w->reset_rtt_min = 0;
	} else {
		w->rtt_min = cc_min(w->rtt, w->rtt_min);
	}
}

/* Bytes an ACK on the slow path stands for: a duplicate ACK one mss (credited), a
 * cumulative ACK what it covers less what duplicates were already credited. */
CC_INLINE u32 westwood_acked_count(struct sock *sk, struct westwood316 *w)
{
	struct tcp_sock *tp = cc_tp(sk);

	w->cumul_ack = tp->snd_una - w->snd_una;
	if (!w->cumul_ack) {
		w->accounted += tp->mss_cache;
		w->cumul_ack = tp->mss_cache;
	}
	if (w->cumul_ack > tp->mss_cache) {
		if (w->accounted >= w->cumul_ack) {
			w->accounted -= w->cumul_ack;
			w->cumul_ack = tp->mss_cache;
		} else {
			w->cumul_ack -= w->accounted;
			w->accounted = 0;
		}
	}
	w->snd_una = tp->snd_una;
	return w->cumul_ack;
}

/* 3.16 delivered CA_EVENT_FAST_ACK / CA_EVENT_SLOW_ACK through cwnd_event from the same
 * place in tcp_ack() where 6.x calls in_ack_event (before the RTT sample's pkts_acked):
 * CA_ACK_SLOWPATH set is 3.16's SLOW_ACK, clear (a pure advance on the fast path) its
 * FAST_ACK. */
CC_CB(void, westwood316_in_ack_event, struct sock *sk, u32 flags)
{
	struct westwood316 *w = cc_ca(sk);

	CC_GUARD(sk, westwood316_ssthresh_for);
	westwood_update_window(sk, w);
	if (flags & CA_ACK_SLOWPATH) {
		w->bk += westwood_acked_count(sk, w);
	} else {
		w->bk += cc_tp(sk)->snd_una - w->snd_una;
		w->snd_una = cc_tp(sk)->snd_una;
	}
	westwood_update_rtt_min(w);
}

/* The events 6.x still delivers through cwnd_event, as 3.16 did. */
CC_CB(void, westwood316_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct westwood316 *w = cc_ca(sk);

	CC_GUARD(sk, westwood316_ssthresh_for);
	if (ev == CA_EVENT_COMPLETE_CWR) {
		tp->snd_ssthresh = westwood_bw_rttmin(sk);
		CC_SET_CWND(tp, tp->snd_ssthresh);
	} else if (ev == CA_EVENT_LOSS) {
		tp->snd_ssthresh = westwood_bw_rttmin(sk);
		w->reset_rtt_min = 1; /* RTTmin from the next ACK on */
	}
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample). */
CC_CB(void, westwood316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct westwood316 *w = cc_ca(sk);
	s32 rtt_us = cc_rtt_us(sample->rtt_us);

	CC_GUARD_ACKED(sk, westwood316_ssthresh_for, sample);
	if (rtt_us > 0)
		w->rtt = cc_usecs_to_jiffies((u32)rtt_us);
}

CC_CB(void, westwood316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	CC_GUARD(sk, westwood316_ssthresh_for);
	cc316_reno_cong_avoid(sk, acked);
}

CC_CB(u32, westwood316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, westwood316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

/* 3.16's min_cwnd hook (westwood: BWE x RTTmin) was no longer called by the 3.16 stack
 * (unused since PRR replaced rate halving in 3.7) and is gone in 6.x: nothing to map.
 * 3.16 Westwood had no set_state hook: this one only guards. */
CC_GUARD_ONLY_SET_STATE(westwood316, westwood316_ssthresh_for)

CC_OPS(westwood316,
	.init = CC_FN(westwood316_init),
	.ssthresh = CC_FN(westwood316_ssthresh),
	.cong_avoid = CC_FN(westwood316_cong_avoid),
	.set_state = CC_FN(westwood316_set_state),
	.undo_cwnd = CC_FN(westwood316_undo_cwnd),
	.pkts_acked = CC_FN(westwood316_pkts_acked),
	.cwnd_event = CC_FN(westwood316_cwnd_event),
	.in_ack_event = CC_FN(westwood316_in_ack_event),
);

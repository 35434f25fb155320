// SPDX-License-Identifier: GPL-2.0
/* TCP-LP as in Linux 3.16 (Kuzmanovic & Knightly 2003, as tcp_lp.c does it): a
 * low-priority flow that yields to others. From TCP timestamps it estimates the peer's
 * timestamp rate and a relative one-way delay (OWD), smoothed (SOWD, 7/8 + 1/8) and
 * tracked between its minimum and maximum. SOWD above min + 15 % of (max - min) is an
 * early congestion indication: cwnd halves, or drops to 1 if it comes within the
 * inference time (3 x the echoed timestamp's age) of the previous one; growth is Reno's
 * and stops while within inference. Losses halve (tcp_reno_ssthresh); no undo hook (the
 * stack's 3.16 default).
 *
 * Without timestamps (the paper's hosts) rcv_tsval = rcv_tsecr = 0: no peer rate, no OWD,
 * and 3.16's threshold test, owd_min + 15 (owd_max - owd_min)/100 in 32 bits with
 * owd_min = 0xffffffff and owd_max = 0, is 0xffffffff: SOWD = 0 is always below it, so
 * there is never an indication and TCP-LP is exactly Reno. The port keeps that.
 *
 * Clocks: 3.16's tcp_time_stamp was jiffies, the clock of its timestamps, on both ends
 * (HZ in its formulas). On the wire 6.x stamps at 1 kHz on both ends (CC_TS_HZ), so the
 * peer-rate estimate and the OWD use the timestamps as they are, with HZ = 1000: TCP-LP
 * as between two 3.16 hosts at HZ 1000; the emulated HZ does not apply (the estimate,
 * which 3.16 refreshed on every ACK, breaks between unequal rates). The durations --
 * inference time, time since the last reduction -- are in virtual ms (cc_ms(),
 * cc_tsecr_ms()); the OWDs, compared only with each other, need no dilation.
 * 6.x peers add a random offset to their stamps (tcp_timestamps=1); an OWD of 2^29 or
 * more overflows 3.16's 32-bit SOWD << 3 and hides every indication, as it would have in
 * 3.16 against such a peer. tcp_timestamps=2 (no offsets), as 3.16 peers stamped. */
#include "cc316.h"

CC_PARAM(lp_resol, 1000, "LP_RESOL: OWD resolution (OWD = tsval x (1000 / remote HZ) - tsecr x (1000 / HZ))");
CC_PARAM(lp_thr_pct, 15, "early congestion when SOWD > owd_min + 15 % of (owd_max - owd_min)");
CC_PARAM(lp_inference_mult, 3, "inference time = 3 x (now - echoed timestamp)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets (ssthresh on loss: cwnd/2)");

#define LP_VALID_RHZ (1 << 0)
#define LP_VALID_OWD (1 << 1)
#define LP_WITHIN_THR (1 << 3)
#define LP_WITHIN_INF (1 << 4)

struct lp316 {
	u32 flag;
	u32 sowd;            /* smoothed OWD << 3 */
	u32 owd_min;
	u32 owd_max;
	u32 owd_max_rsv;     /* the max but one is what owd_max keeps */
	u32 remote_hz;       /* the peer's timestamp rate, estimated */
	u32 remote_ref_time; /* the peer's tsval at the last estimate */
	u32 local_ref_time;  /* the echo at the last estimate (ms) */
	u32 last_drop;       /* virtual ms of the last early-congestion reduction */
	u32 inference;       /* virtual ms */
};
CC_STATIC_ASSERT(sizeof(struct lp316) <= CC_PORT_PRIV_SIZE, "lp316 state too large");

CC_CB(void, lp316_init, struct sock *sk)
{
	struct lp316 *lp = cc_ca(sk);

	lp->flag = 0;
	lp->sowd = 0;
	lp->owd_min = 0xffffffff;
	lp->owd_max = 0;
	lp->owd_max_rsv = 0;
	lp->remote_hz = 0;
	lp->remote_ref_time = 0;
	lp->local_ref_time = 0;
	lp->last_drop = 0;
	lp->inference = 0;
	cc316_guard_init(sk);
}

CC_INLINE u32 lp316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	return cc_max(cwnd >> 1, min_ssthresh);
}

CC_CB(u32, lp316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, lp316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* Reno, but no growth within inference. */
CC_CB(void, lp316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct lp316 *lp = cc_ca(sk);

	CC_GUARD(sk, lp316_ssthresh_for);
	if (!(lp->flag & LP_WITHIN_INF))
		cc316_reno_cong_avoid(sk, acked);
}

/* The peer's timestamp rate: HZ x (tsval advance) / (echo advance), 63/64 old + 1/64 new
 * (32-bit differences and product, as 3.16). */
CC_INLINE u32 lp_remote_hz_estimator(struct sock *sk, struct lp316 *lp, u32 tsval, u32 tsecr)
{
	s64 rhz = (s64)(u32)(lp->remote_hz << 6);
	s64 m;

	if (lp->remote_ref_time != 0 && lp->local_ref_time != 0 &&
	    tsval != lp->remote_ref_time && tsecr != lp->local_ref_time) {
		m = (u32)(CC_TS_HZ * (tsval - lp->remote_ref_time)) / (tsecr - lp->local_ref_time);
		if (rhz > 0) {
			m -= rhz >> 6;
			rhz += m;
		} else {
			rhz = m << 6;
		}
	}
	if ((rhz >> 6) > 0)
		lp->flag |= LP_VALID_RHZ;
	else
		lp->flag &= ~LP_VALID_RHZ;
	lp->remote_ref_time = tsval;
	lp->local_ref_time = tsecr;
	return (u32)(rhz >> 6);
}

/* Relative OWD: the peer's stamp minus ours, both in 1/LP_RESOL s (32 bits, as 3.16). */
CC_INLINE u32 lp_owd_calculator(struct sock *sk, struct lp316 *lp, u32 tsval, u32 tsecr)
{
	u32 owd = 0;

	lp->remote_hz = lp_remote_hz_estimator(sk, lp, tsval, tsecr);
	if (lp->flag & LP_VALID_RHZ)
		owd = tsval * (lp_resol / lp->remote_hz) - tsecr * (lp_resol / CC_TS_HZ);
	if (owd > 0)
		lp->flag |= LP_VALID_OWD;
	else
		lp->flag &= ~LP_VALID_OWD;
	return owd;
}

/* 3.16's tcp_lp_rtt_sample: min, max (forgetting the largest) and smoothed OWD. */
CC_INLINE void lp_rtt_sample(struct sock *sk, struct lp316 *lp, u32 tsval, u32 tsecr)
{
	s64 mowd = lp_owd_calculator(sk, lp, tsval, tsecr);

	if (!(lp->flag & LP_VALID_RHZ) || !(lp->flag & LP_VALID_OWD))
		return;
	if (mowd < lp->owd_min)
		lp->owd_min = (u32)mowd;
	if (mowd > lp->owd_max) {
		if (mowd > lp->owd_max_rsv) {
			lp->owd_max = lp->owd_max_rsv == 0 ? (u32)mowd : lp->owd_max_rsv;
			lp->owd_max_rsv = (u32)mowd;
		} else {
			lp->owd_max = (u32)mowd;
		}
	}
	if (lp->sowd != 0) {
		mowd -= lp->sowd >> 3;
		lp->sowd += (u32)mowd;
	} else {
		lp->sowd = (u32)mowd << 3;
	}
}

/* 3.16 pkts_acked(sk, num_acked, rtt_us) is 6.x pkts_acked(sk, sample); 3.16 LP took its
 * OWD sample here (when there was an RTT sample) and reacted to early congestion. */
CC_CB(void, lp316_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct lp316 *lp = cc_ca(sk);
	u32 now = cc_ms(sk), sent = cc_tsecr_ms(sk);

	CC_GUARD_ACKED(sk, lp316_ssthresh_for, sample);
	if (sample->rtt_us > 0)
		lp_rtt_sample(sk, lp, tp->rx_opt.rcv_tsval, tp->rx_opt.rcv_tsecr);
	if (now > sent)
		lp->inference = lp_inference_mult * (now - sent);
	if (lp->last_drop && now - lp->last_drop < lp->inference)
		lp->flag |= LP_WITHIN_INF;
	else
		lp->flag &= ~LP_WITHIN_INF;
	if (lp->sowd >> 3 < lp->owd_min + lp_thr_pct * (lp->owd_max - lp->owd_min) / 100)
		lp->flag |= LP_WITHIN_THR;
	else
		lp->flag &= ~LP_WITHIN_THR;
	if (lp->flag & LP_WITHIN_THR)
		return;
	/* early congestion: forget min and max around the present SOWD */
	lp->owd_min = lp->sowd >> 3;
	lp->owd_max = lp->sowd >> 2;
	lp->owd_max_rsv = lp->sowd >> 2;
	if (lp->flag & LP_WITHIN_INF)
		CC_SET_CWND(tp, 1); /* again within inference: to one */
	else
		CC_SET_CWND(tp, cc_max(tp->snd_cwnd >> 1, 1)); /* halve */
	lp->last_drop = now;
}

CC_CB(u32, lp316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, lp316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

/* 3.16 LP had no set_state hook: this one only guards. */
CC_GUARD_ONLY_SET_STATE(lp316, lp316_ssthresh_for)

CC_OPS(lp316,
	.init = CC_FN(lp316_init),
	.ssthresh = CC_FN(lp316_ssthresh),
	.cong_avoid = CC_FN(lp316_cong_avoid),
	.set_state = CC_FN(lp316_set_state),
	.undo_cwnd = CC_FN(lp316_undo_cwnd),
	.pkts_acked = CC_FN(lp316_pkts_acked),
);

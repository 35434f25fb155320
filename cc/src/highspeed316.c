// SPDX-License-Identifier: GPL-2.0
/* HighSpeed TCP (RFC 3649) as in Linux 3.16: a table of cwnd bands; in band ai
 * cwnd grows by ai+1 packets per window of ACKs and a loss keeps
 * cwnd - cwnd*md[ai]/256. The band only moves in congestion avoidance, so a loss
 * in slow start uses band 0 (md = 0.5). */
#include "cc316.h"

CC_PARAM(low_window, 38, "Low Window: below it HS-TCP behaves like Reno (upper bound of band 0)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");
CC_NOTE(high_window, "83000", "High Window: RFC 3649 window at High P (implicit in the band table)");
CC_NOTE(high_p, "1e-7", "High P: loss rate at High Window (implicit in the band table)");
CC_NOTE(high_decrease, "0.1", "High Decrease: decrease factor at High Window (implicit in the band table)");

#define HSTCP_BANDS 72

/* {upper cwnd bound of the band, decrease factor << 8}; RFC 3649 values with
 * a(bound[i]) ~ i + 1 and md = floor(256 * b(bound[i])). */
struct hstcp_band {
	u32 cwnd;
	u32 md;
};

CC_TABLE struct hstcp_band hstcp316_bands[HSTCP_BANDS] = {
	{low_window, 128}, {118, 112}, {221, 104}, {347, 98}, {495, 93}, {663, 89},
	{851, 86}, {1058, 83}, {1284, 81}, {1529, 78}, {1793, 76}, {2076, 74},
	{2378, 72}, {2699, 71}, {3039, 69}, {3399, 68}, {3778, 66}, {4177, 65},
	{4596, 64}, {5036, 62}, {5497, 61}, {5979, 60}, {6483, 59}, {7009, 58},
	{7558, 57}, {8130, 56}, {8726, 55}, {9346, 54}, {9991, 53}, {10661, 52},
	{11358, 52}, {12082, 51}, {12834, 50}, {13614, 49}, {14424, 48}, {15265, 48},
	{16137, 47}, {17042, 46}, {17981, 45}, {18955, 45}, {19965, 44}, {21013, 43},
	{22101, 43}, {23230, 42}, {24402, 41}, {25618, 41}, {26881, 40}, {28193, 39},
	{29557, 39}, {30975, 38}, {32450, 38}, {33986, 37}, {35586, 36}, {37253, 36},
	{38992, 35}, {40808, 35}, {42707, 34}, {44694, 33}, {46776, 33}, {48961, 32},
	{51258, 32}, {53677, 31}, {56230, 30}, {58932, 30}, {61799, 29}, {64851, 28},
	{68113, 28}, {71617, 27}, {75401, 26}, {79517, 26}, {84035, 25}, {89053, 24},
};

struct hstcp316 {
	u32 ai;
};
CC_STATIC_ASSERT(sizeof(struct hstcp316) <= CC_PORT_PRIV_SIZE, "hstcp316 state too large");

/* Masking keeps the index provably inside the table for the verifier. */
CC_INLINE u32 hstcp_bound(u32 i)
{
	if (i >= HSTCP_BANDS)
		i = HSTCP_BANDS - 1;
	return hstcp316_bands[i & 127].cwnd;
}

CC_INLINE u32 hstcp_md(u32 i)
{
	if (i >= HSTCP_BANDS)
		i = HSTCP_BANDS - 1;
	return hstcp316_bands[i & 127].md;
}

CC_CB(void, highspeed316_init, struct sock *sk)
{
	struct hstcp316 *ca = cc_ca(sk);

	ca->ai = 0;
	cc316_guard_init(sk);
	/* 3.16 also lowered snd_cwnd_clamp to 2^32/128 so cwnd*md fits; the clamp is
	 * read-only to BPF and far above any window reachable here. */
}

CC_INLINE u32 highspeed316_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct hstcp316 *ca = cc_ca(sk);

	return cc_max(cwnd - ((cwnd * hstcp_md(ca->ai)) >> 8), min_ssthresh);
}

CC_CB(void, highspeed316_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct hstcp316 *ca = cc_ca(sk);
	u32 cwnd = tp->snd_cwnd;
	u32 ai, step;

	CC_GUARD(sk, highspeed316_ssthresh_for);
	cwnd = tp->snd_cwnd;
	if (!cc_is_cwnd_limited(sk))
		return;
	if (cc316_in_slow_start(tp)) {
		cc316_slow_start(tp, acked);
		return;
	}
	/* Move to the band with bound[ai-1] < cwnd <= bound[ai] (the last band
	 * above 89053). 3.16 walked the table one step at a time; a binary search
	 * gives the same band and keeps the BPF verifier's path count small. */
	ai = 0;
	for (step = 64; step; step >>= 1) {
		if (ai + step <= HSTCP_BANDS - 1 && hstcp_bound(ai + step - 1) < cwnd)
			ai += step;
	}
	ca->ai = ai;
	/* cwnd += (ai + 1) / cwnd per ACK, with the remainder kept in the counter. */
	if (cwnd < tp->snd_cwnd_clamp) {
		tp->snd_cwnd_cnt += ai + 1;
		if (tp->snd_cwnd_cnt >= cwnd) {
			tp->snd_cwnd_cnt -= cwnd;
			CC_SET_CWND(tp, cwnd + 1);
		}
	}
}

CC_CB(u32, highspeed316_ssthresh, struct sock *sk)
{
	return cc316_guard_reduction(sk, highspeed316_ssthresh_for(sk, cc316_guard_reduction_window(sk)));
}

/* 3.16 HS-TCP had no undo hook: the stack's default applies. */
CC_CB(u32, highspeed316_undo_cwnd, struct sock *sk)
{
	CC_GUARD(sk, highspeed316_ssthresh_for);
	return cc316_guard_undo(sk, cc316_default_undo(cc_tp(sk)));
}

CC_GUARD_ONLY_HOOKS(highspeed316, highspeed316_ssthresh_for)

CC_OPS(highspeed316,
	.init = CC_FN(highspeed316_init),
	.ssthresh = CC_FN(highspeed316_ssthresh),
	.cong_avoid = CC_FN(highspeed316_cong_avoid),
	.undo_cwnd = CC_FN(highspeed316_undo_cwnd),
	.set_state = CC_FN(highspeed316_set_state),
	.pkts_acked = CC_FN(highspeed316_pkts_acked),
);

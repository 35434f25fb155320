// SPDX-License-Identifier: GPL-2.0
/* DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257), written for this project on the shim.
 * Not a Linux 3.16 algorithm (Linux gained DCTCP in 3.18): variant "dctcp" outside the
 * 3.16 set (tcpeval.cc.EXTRA_VARIANTS), known to the kernel as dctcp_tev so that it is
 * taken neither for a 3.16 port nor for a kernel's own "dctcp".
 *
 * Sender. An observation window runs from the snd_nxt at its start until the cumulative
 * ACK reaches it (about one round trip). Over it, F = bytes acknowledged by ACKs that
 * carried ECE / bytes acknowledged; at its end alpha <- alpha + g (F - alpha),
 * g = 2^-shift_g. An ACK with ECE makes the stack enter CWR (at most once per window of
 * data) and call ssthresh(): cwnd - cwnd alpha / 2, at least min_ssthresh -- a window
 * of which a fraction alpha was marked costs alpha/2 of it, alpha = 1 halves it.
 * Increase: Reno's slow start and additive increase as Linux 3.18 had them, which are
 * 3.16's (cc316_reno_cong_avoid).
 * Loss: halving, as RFC 8257 (sec. 3.5) asks -- like a conventional TCP. Entering
 * Recovery (set_state) and a timeout (CA_EVENT_LOSS) replace the threshold ssthresh()
 * computed from alpha by max(cwnd / 2, min_ssthresh), as current Linux does; the 3.18
 * original reduced by alpha on loss as well (a module parameter could set alpha to 1 on
 * entering Loss).
 * Without ECN negotiated no ACK carries ECE, and ssthresh() halves like Reno: Linux swaps
 * Reno's ops in for such a connection and stops sending ECT. A BPF program cannot write
 * icsk_ca_ops (it could only setsockopt() the socket to another registered algorithm,
 * which would change the algorithm the run verifies on the flow) nor the socket's TOS,
 * so the port branches instead, and only the kernel module clears ECT (cc_ecn_dontxmit).
 *
 * Receiver (the other end runs dctcp_tev too): ECE on an ACK echoes whether the latest
 * data segment carried CE -- not RFC 3168's "CE seen since the last CWR" -- so that the
 * sender's F is the fraction of marked bytes. A delayed ACK covers two segments; when the
 * CE state changes while one is pending, it is sent at once with the earlier state's ECE
 * (acknowledging up to the segment before), and the segment that changed the state is
 * acknowledged at once too. All three targets do this (BPF: bpf_tcp_send_ack()).
 */
#define CC_DESCRIPTION "tcpeval: DCTCP (RFC 8257) on the 3.16 ports' shim; not a Linux 3.16 algorithm"
#include "cc316.h"

CC_PARAM(shift_g, 4, "EWMA gain of alpha: g = 2^-shift_g (1/16)");
CC_PARAM(alpha_on_init, 1024, "alpha before the first observation window, in 1/1024 (1024: a first window with marks halves)");
CC_PARAM(min_ssthresh, 2, "lower bound of ssthresh in packets");

/* alpha in fixed point, 2^-20 units: fine enough that the EWMA settles on F itself (a
 * 10-bit alpha with g = 1/16 stops short of F by up to 15/1024) */
#define ALPHA_SHIFT 20
#define ALPHA_ONE (1U << ALPHA_SHIFT)
CC_STATIC_ASSERT(shift_g >= 0 && shift_g <= 10, "shift_g out of range");
CC_STATIC_ASSERT(alpha_on_init >= 0 && alpha_on_init <= 1024, "alpha_on_init out of range");

struct dctcp_tev {
	u32 alpha;         /* EWMA of the marked fraction, ALPHA_ONE = 1 */
	u32 window_end;    /* the observation window ends when snd_una reaches this */
	u32 prior_snd_una; /* snd_una at the last ACK */
	u32 bytes_acked;   /* this window: bytes the cumulative ACK passed, */
	u32 bytes_marked;  /* of which by ACKs with ECE */
	u32 loss_cwnd;     /* cwnd when the last reduction began (undo) */
	u32 prior_rcv_nxt; /* receiving side: rcv_nxt after the latest data segment, */
	u8 ce_state;       /* and whether that segment carried CE */
	u8 _pad[3];
};
CC_STATIC_ASSERT(sizeof(struct dctcp_tev) <= CC_PORT_PRIV_SIZE, "dctcp_tev state too large");

CC_INLINE void dctcp_tev_new_window(struct tcp_sock *tp, struct dctcp_tev *ca)
{
	ca->window_end = tp->snd_nxt;
	ca->bytes_acked = 0;
	ca->bytes_marked = 0;
}

CC_CB(void, dctcp_tev_init, struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct dctcp_tev *ca = cc_ca(sk);

	ca->alpha = (u32)alpha_on_init << (ALPHA_SHIFT - 10);
	ca->prior_snd_una = tp->snd_una;
	ca->loss_cwnd = 0;
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = 0;
	dctcp_tev_new_window(tp, ca);
	if (!(tp->ecn_flags & CC_ECN_OK))
		cc_ecn_dontxmit(sk);
	cc316_guard_init(sk);
}

/* The threshold for a reduction that starts at cwnd. In Recovery or Loss (a missed
 * reduction the guard repairs there) a loss's halving; without ECN, Reno's. */
CC_INLINE u32 dctcp_tev_ssthresh_for(struct sock *sk, u32 cwnd)
{
	struct dctcp_tev *ca = cc_ca(sk);
	u32 cut;

	if (!(cc_tp(sk)->ecn_flags & CC_ECN_OK) || cc_ca_state(sk) >= TCP_CA_Recovery)
		return cc_max(cwnd >> 1, min_ssthresh);
	cut = (u32)(((cc_u64)cwnd * ca->alpha) >> (ALPHA_SHIFT + 1));
	return cc_max(cwnd - cut, min_ssthresh);
}

CC_CB(u32, dctcp_tev_ssthresh, struct sock *sk)
{
	struct dctcp_tev *ca = cc_ca(sk);
	u32 cwnd = cc316_guard_reduction_window(sk);

	ca->loss_cwnd = cwnd;
	return cc316_guard_reduction(sk, dctcp_tev_ssthresh_for(sk, cwnd));
}

/* A loss: halve, whatever alpha says. */
CC_INLINE void dctcp_tev_loss(struct sock *sk)
{
	struct tcp_sock *tp = cc_tp(sk);

	((struct dctcp_tev *)cc_ca(sk))->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = cc_max(tp->snd_cwnd >> 1, min_ssthresh);
}

/* Every ACK: count the bytes the cumulative ACK passed (marked if it carried ECE); at the
 * end of a window move alpha towards its fraction. An ACK that does not advance snd_una
 * (a duplicate) counts nothing: its data is counted once the cumulative ACK passes it
 * (3.18 counted a duplicate ACK as one MSS, and the same bytes again later). */
CC_CB(void, dctcp_tev_in_ack_event, struct sock *sk, u32 flags)
{
	struct tcp_sock *tp = cc_tp(sk);
	struct dctcp_tev *ca = cc_ca(sk);
	u32 acked = tp->snd_una - ca->prior_snd_una;
	u32 f, step;

	CC_GUARD(sk, dctcp_tev_ssthresh_for);
	if (cc_after(tp->snd_una, ca->prior_snd_una)) {
		ca->bytes_acked += acked;
		if (flags & CA_ACK_ECE)
			ca->bytes_marked += acked;
		ca->prior_snd_una = tp->snd_una;
	}
	if (cc_after(ca->window_end, tp->snd_una))
		return; /* the window goes on */
	if (ca->bytes_acked) {
		/* F and the step towards it, rounded up so that alpha reaches F exactly */
		f = (u32)cc_div64((cc_u64)ca->bytes_marked << ALPHA_SHIFT, ca->bytes_acked);
		if (f > ca->alpha) {
			step = (f - ca->alpha + (1U << shift_g) - 1) >> shift_g;
			ca->alpha += step;
		} else {
			step = (ca->alpha - f + (1U << shift_g) - 1) >> shift_g;
			ca->alpha -= step;
		}
	}
	/* a window in which nothing was acknowledged (nothing was in flight) tells nothing */
	dctcp_tev_new_window(tp, ca);
}

CC_CB(void, dctcp_tev_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	CC_GUARD(sk, dctcp_tev_ssthresh_for);
	cc316_reno_cong_avoid(sk, acked);
}

CC_CB(u32, dctcp_tev_undo_cwnd, struct sock *sk)
{
	struct dctcp_tev *ca = cc_ca(sk);

	CC_GUARD(sk, dctcp_tev_ssthresh_for);
	return cc316_guard_undo(sk, cc_max(cc_tp(sk)->snd_cwnd, ca->loss_cwnd));
}

/* Entering Recovery: the loss's halving replaces the alpha threshold ssthresh() gave
 * (from CWR, where no ssthresh() is called, it replaces the ECN reduction's). */
CC_CB(void, dctcp_tev_set_state, struct sock *sk, u8 new_state)
{
	CC_GUARD(sk, dctcp_tev_ssthresh_for);
	if (new_state == TCP_CA_Recovery && cc_ca_state(sk) != TCP_CA_Recovery)
		dctcp_tev_loss(sk);
	cc316_guard_state(sk, new_state);
}

/* The receiving side: ECE on our ACKs while the latest segment carried CE. */
CC_INLINE void dctcp_tev_echo(struct tcp_sock *tp, u8 ce)
{
	if (ce)
		tp->ecn_flags |= CC_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~CC_ECN_DEMAND_CWR;
}

CC_INLINE void dctcp_tev_segment_ce(struct sock *sk, struct dctcp_tev *ca, u8 ce)
{
	struct tcp_sock *tp = cc_tp(sk);

	if (ca->ce_state != ce) {
		if (CC_ACK_PENDING(sk) & ICSK_ACK_TIMER) {
			/* the delayed ACK covers segments of the earlier state: out with it now */
			dctcp_tev_echo(tp, ca->ce_state);
			cc_send_ack(sk, ca->prior_rcv_nxt);
		}
		CC_ACK_PENDING(sk) |= ICSK_ACK_NOW;
	}
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = ce;
	dctcp_tev_echo(tp, ce);
}

/* CE on a data segment we received (the stack tells only algorithms that need ECN), and
 * a timeout (the loss's halving; Recovery is set_state's). */
CC_CB(void, dctcp_tev_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct dctcp_tev *ca = cc_ca(sk);

	CC_GUARD(sk, dctcp_tev_ssthresh_for);
	if (ev == CA_EVENT_ECN_IS_CE)
		dctcp_tev_segment_ce(sk, ca, 1);
	else if (ev == CA_EVENT_ECN_NO_CE)
		dctcp_tev_segment_ce(sk, ca, 0);
	else if (ev == CA_EVENT_LOSS)
		dctcp_tev_loss(sk);
}

CC_GUARD_ONLY_PKTS_ACKED(dctcp_tev, dctcp_tev_ssthresh_for)

CC_OPS(dctcp_tev,
	.init = CC_FN(dctcp_tev_init),
	.ssthresh = CC_FN(dctcp_tev_ssthresh),
	.cong_avoid = CC_FN(dctcp_tev_cong_avoid),
	.undo_cwnd = CC_FN(dctcp_tev_undo_cwnd),
	.set_state = CC_FN(dctcp_tev_set_state),
	.pkts_acked = CC_FN(dctcp_tev_pkts_acked),
	.cwnd_event = CC_FN(dctcp_tev_cwnd_event),
	.in_ack_event = CC_FN(dctcp_tev_in_ack_event),
	.flags = CC_CONG_NEEDS_ECN,
);

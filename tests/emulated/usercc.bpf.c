// SPDX-License-Identifier: GPL-2.0
/* A user's own congestion control, as `impl: bpf` runs it: the kernel's Reno through its
 * kfuncs, registered as "tevuserreno" (tests/emulated/test_user_bpf.py).
 *
 * Built with -DCORRUPT_WINDOW it is deliberately faulty, as "tevbadwindow"
 * (tests/emulated/test_window_check.py): Reno until the first window reduction, then a
 * window of 2^30 segments -- the size the 3.16 ports' windows jumped to before the guard
 * in cc/include/cc316.h (issue 10). A run with it must be flagged for its window.
 * Built against the running kernel's BTF (build/cc/vmlinux.h, cc/Makefile). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define CORRUPTED_CWND (1u << 30)

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
void BPF_PROG(usercc_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
#ifdef CORRUPT_WINDOW
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	/* ssthresh below "infinity": a reduction happened, so corrupt the window */
	if (tp->snd_ssthresh < 0x7fffffff) {
		tp->snd_cwnd = CORRUPTED_CWND;
		return;
	}
#endif
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(usercc_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(usercc_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
#ifdef CORRUPT_WINDOW
struct tcp_congestion_ops badwindow = {
#else
struct tcp_congestion_ops userreno = {
#endif
	.cong_avoid = (void *)usercc_cong_avoid,
	.ssthresh = (void *)usercc_ssthresh,
	.undo_cwnd = (void *)usercc_undo_cwnd,
#ifdef CORRUPT_WINDOW
	.name = "tevbadwindow",
#else
	.name = "tevuserreno",
#endif
};

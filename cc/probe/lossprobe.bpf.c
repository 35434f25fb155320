// SPDX-License-Identifier: GPL-2.0
/* lossprobe: records every congestion-state change of one flow (destination
 * address and port set before load) at the moment the stack makes it, with the
 * window the algorithm's ssthresh hook saw. Test instrumentation only.
 *
 * BTF tracepoint tcp_cong_state_set, fired first thing in tcp_set_ca_state()
 * (kernel >= 6.2; this kernel has no fentry/kprobes): on entering
 * CWR/Recovery/Loss the stack has already stored prior_cwnd (the cwnd the
 * ssthresh hook was called with), the new snd_ssthresh and prior_ssthresh, and
 * icsk_ca_state still holds the old state. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

const volatile __u32 filter_daddr = 0; /* network byte order */
const volatile __u16 filter_dport = 0; /* host byte order */

struct lossprobe_event {
	__u64 t_ns;
	__u32 old_state;
	__u32 new_state;
	__u32 snd_cwnd;
	__u32 prior_cwnd;
	__u32 snd_ssthresh;
	__u32 prior_ssthresh;
	__u32 total_retrans;
	__u32 ca_priv[4];
	char ca_name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(lossprobe_set_state, struct sock *sk, const __u8 ca_state)
{
	struct inet_connection_sock *icsk;
	struct lossprobe_event *e;
	struct tcp_sock *tp;

	if (sk->__sk_common.skc_daddr != filter_daddr ||
	    bpf_ntohs(sk->__sk_common.skc_dport) != filter_dport)
		return 0;
	tp = bpf_skc_to_tcp_sock(sk); /* typed access beyond struct sock */
	if (!tp)
		return 0;
	icsk = &tp->inet_conn;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->t_ns = bpf_ktime_get_ns();
	e->old_state = BPF_CORE_READ_BITFIELD_PROBED(icsk, icsk_ca_state);
	e->new_state = ca_state;
	e->snd_cwnd = tp->snd_cwnd;
	e->prior_cwnd = tp->prior_cwnd;
	e->snd_ssthresh = tp->snd_ssthresh;
	e->prior_ssthresh = tp->prior_ssthresh;
	e->total_retrans = tp->total_retrans;
	bpf_probe_read_kernel(e->ca_priv, sizeof(e->ca_priv), icsk->icsk_ca_priv);
	bpf_probe_read_kernel_str(e->ca_name, sizeof(e->ca_name), BPF_CORE_READ(icsk, icsk_ca_ops, name));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char _license[] SEC("license") = "GPL";

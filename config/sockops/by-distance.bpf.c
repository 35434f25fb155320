// SPDX-License-Identifier: GPL-2.0
/* by-distance: a sock_ops program that sizes each connection to the distance between its
 * hosts, as a data-centre operator might. Once the handshake has measured the round trip,
 * the socket's send and receive buffers are set to two bandwidth-delay products of a
 * LINK_MBPS link at that RTT, and its window clamp to one: a rack-local connection (tens of
 * microseconds) gets tens of kB, a WAN one (tens of ms) megabytes. A design attaches it to
 * the senders with `sock_ops: build/sockops/by-distance.bpf.o`; the trace records its hash.
 *
 * Build (vmlinux.h from the running kernel's BTF: tcpeval.cc.build() writes one):
 *   clang -O2 -g -target bpf -I<dir with vmlinux.h> [-DLINK_MBPS=10000] \
 *         -c config/sockops/by-distance.bpf.c -o build/sockops/by-distance.bpf.o
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#ifndef LINK_MBPS
#define LINK_MBPS 10000
#endif
/* uapi constants vmlinux.h does not carry (they are macros, not types) */
#define SOL_SOCKET 1
#define SO_SNDBUF 7
#define SO_RCVBUF 8
#define SOL_TCP 6
#define TCP_WINDOW_CLAMP 10
#define MIN_BYTES (16 * 1024)
#define MAX_BYTES (256 * 1024 * 1024)

SEC("sockops")
int by_distance(struct bpf_sock_ops *skops)
{
	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	/* the kernel keeps the smoothed RTT in 1/8 us; after the handshake it is the SYN's */
	__u64 rtt_us = skops->srtt_us >> 3;
	__u64 bdp = (__u64)LINK_MBPS * rtt_us / 8; /* Mbit/s x us / 8 = bytes */
	if (bdp < MIN_BYTES)
		bdp = MIN_BYTES;
	if (bdp > MAX_BYTES / 2)
		bdp = MAX_BYTES / 2;
	int buf = (int)(2 * bdp), clamp = (int)bdp;
	bpf_setsockopt(skops, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	bpf_setsockopt(skops, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	bpf_setsockopt(skops, SOL_TCP, TCP_WINDOW_CLAMP, &clamp, sizeof(clamp));
	return 1;
}

char _license[] SEC("license") = "GPL";

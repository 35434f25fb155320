// SPDX-License-Identifier: GPL-2.0
/* Per-packet drop module for the emulated backend (tc clsact direct-action).
 *
 * Semantics follow src/tcpeval/drop_model.py exactly: per packet while ENABLE is set,
 * state = xorshift32(state); SEEN += 1; drop iff state < T (33-bit compare); DROPPED += 1.
 * The first 32 bytes of the single array-map value mirror the register map byte for byte
 * (0x00 CONTROL ... 0x1C DROPPED_HI). RESEED/CLEAR are acted on by the control tool at
 * write time (as the hardware does), never lazily here.
 *
 * Concurrency: packets may arrive on any CPU, so the generator step and the counters are
 * updated under one bpf_spin_lock; the sequence of draws is then a single total order,
 * identical to the model's, whatever CPU each packet is on.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <stddef.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "segment_mark.h"

struct drop_regs {
	__u32 control;       /* 0x00 */
	__u32 threshold_lo;  /* 0x04 */
	__u32 threshold_hi;  /* 0x08 */
	__u32 seed;          /* 0x0C */
	__u32 seen_lo;       /* 0x10 */
	__u32 seen_hi;       /* 0x14 */
	__u32 dropped_lo;    /* 0x18 */
	__u32 dropped_hi;    /* 0x1C */
	/* beyond the register map: generator state and the lock */
	__u32 state;         /* 0x20 */
	struct bpf_spin_lock lock; /* 0x24 */
	/* evidence, not registers: the largest frame (L2 bytes) seen while enabled and how
	 * many exceeded MTU + Ethernet header (none may: one decision per wire packet) */
	__u32 max_len;       /* 0x28 */
	__u32 over_mtu;      /* 0x2C */
	/* full-sized data segments whose PSH flag the drop stage cleared (clear_push) */
	__u32 push_cleared;  /* 0x30 */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_regs);
} tev_drop_regs SEC(".maps");

#define CONTROL_ENABLE 1u

#define WIRE_MAX 1514u /* MTU 1500 + Ethernet header */

static __always_inline int decide(__u32 len)
{
	__u32 key = 0;
	struct drop_regs *r = bpf_map_lookup_elem(&tev_drop_regs, &key);
	int drop = 0;

	if (!r)
		return 0;
	bpf_spin_lock(&r->lock);
	if (r->control & CONTROL_ENABLE) {
		__u32 s = r->state;
		__u64 seen, threshold;

		s ^= s << 13;
		s ^= s >> 17;
		s ^= s << 5;
		r->state = s;
		if (len > r->max_len)
			r->max_len = len;
		if (len > WIRE_MAX)
			r->over_mtu++;
		seen = (((__u64)r->seen_hi << 32) | r->seen_lo) + 1;
		r->seen_lo = (__u32)seen;
		r->seen_hi = (__u32)(seen >> 32);
		threshold = ((__u64)(r->threshold_hi & 1) << 32) | r->threshold_lo;
		if ((__u64)s < threshold) {
			__u64 d = (((__u64)r->dropped_hi << 32) | r->dropped_lo) + 1;
			r->dropped_lo = (__u32)d;
			r->dropped_hi = (__u32)(d >> 32);
			drop = 1;
		}
	}
	bpf_spin_unlock(&r->lock);
	return drop;
}

/* The bottleneck's drop stage: every IPv4 frame leaving the bottleneck device is one
 * wire packet (offloads are off), and gets one decision. */
SEC("tc")
int tev_dropper(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	/* UNSPEC = pass on, and lets a later filter on the same hook (the switch's L2
	 * forwarding behind a background-loss instance) see the packet */
	return decide(skb->len) ? TC_ACT_SHOT : TC_ACT_UNSPEC;
}

/* The segment mark's turns (segment_mark.h): TCP segments marked so far per place, a
 * device and a direction (a receiver's link carries one flow each way: its data leaving
 * through the drop stage, its ACKs entering the switch). 64 places: plan.MAX_FLOWS is 16,
 * and a pair uses at most three (drop stage, sender port, receiver port). A lock, not an
 * atomic add: BPF's fetch-and-add needs ISA v3, which the rest of the object does not. */
struct mark_turns {
	__u32 count;
	struct bpf_spin_lock lock;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* ifindex << 1 | 1 at a switch port's ingress, | 0 at an egress */
	__type(value, struct mark_turns);
} tev_mark_turns SEC(".maps");

/* The parity of the next TCP segment's turn at `place`; the IP ID's parity if the map is
 * full (it is sized so it never is) */
static __always_inline __u32 next_turn(__u32 place, const __u8 *ip)
{
	struct mark_turns zero = {}, *t = bpf_map_lookup_elem(&tev_mark_turns, &place);
	__u32 turn;

	if (!t) {
		bpf_map_update_elem(&tev_mark_turns, &place, &zero, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&tev_mark_turns, &place);
		if (!t)
			return ip[5] & 1;
	}
	bpf_spin_lock(&t->lock);
	turn = t->count++;
	bpf_spin_unlock(&t->lock);
	return turn & 1;
}

/* Marks the frame's TCP segment so the kernel never merges neighbours (segment_mark.h),
 * taking the next turn at `place`; 0 when the frame is too short for Ethernet + a 20-byte
 * IPv4 header (left alone). */
static __always_inline int mark_frame(struct __sk_buff *skb, __u32 place)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	__u8 *ip = (__u8 *)data + sizeof(struct ethhdr);

	if ((void *)(ip + 20) > end)
		return 0;
	if (segment_is_tcp(ip))
		mark_segment(ip, next_turn(place, ip));
	return 1;
}

/* 3.16 receivers ACKed every second full-sized segment, PSH or not. Since Linux 6.6
 * (tcp_measure_rcv_mss: "set ICSK_ACK_PUSHED for full-sized segments with PSH") a
 * receiver whose reader drains the socket ACKs a full-sized PSH segment at once, so at
 * low packet rates -- a slowed (time-dilated) path, or a flow a loss has slowed -- it sends
 * one ACK per segment after every PSH: measured 1.71-1.78 in-order segments per ACK at
 * k = 4 instead of 2, every one-segment ACK right after a PSH segment. The senders set PSH
 * at the end of each write and TSO frame, which carries no meaning for bulk transfer; so
 * the drop stage clears it on full-sized (MTU) frames and the receivers ACK as 3.16 did.
 * Small segments keep PSH (3.16 receivers treated those as pushed too). The TCP checksum
 * is updated with bpf_l4_csum_replace, which also handles a checksum left to offload. */
static __always_inline void clear_push(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 tcp_off, key = 0;
	struct drop_regs *r;
	__u16 old, new;

	if (skb->len != WIRE_MAX || (void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP ||
	    ip->ihl < 5 || (ip->frag_off & bpf_htons(0x3FFF)))
		return;
	tcp_off = sizeof(struct ethhdr) + ip->ihl * 4;
	if (data + tcp_off + sizeof(struct tcphdr) > end)
		return;
	/* the 16-bit word at byte 12 of the TCP header: data offset, reserved, flags */
	old = *(__u16 *)(data + tcp_off + 12);
	if (!(old & bpf_htons(0x0008))) /* PSH */
		return;
	new = old & ~bpf_htons(0x0008);
	if (bpf_skb_store_bytes(skb, tcp_off + 12, &new, sizeof(new), 0) ||
	    bpf_l4_csum_replace(skb, tcp_off + offsetof(struct tcphdr, check), old, new, sizeof(new)))
		return;
	r = bpf_map_lookup_elem(&tev_drop_regs, &key);
	if (r)
		__sync_fetch_and_add(&r->push_cleared, 1);
}

/* The bottleneck's drop stage as the runs use it: on each receiver's link, after the
 * bottleneck queue (where the paper's NetFPGA sat, behind switch A's buffer), where every
 * frame is one wire packet -- the senders' TSO frames are segmented at the latest when
 * they leave the switch. One program and one register map on all receivers' links. Marks
 * each surviving TCP segment (mark_segment) and clears PSH on full-sized ones (clear_push). */
SEC("tc")
int tev_drop_stage(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_UNSPEC;
	if (decide(skb->len))
		return TC_ACT_SHOT;
	mark_frame(skb, skb->ifindex << 1);
	clear_push(skb); /* after mark_frame: its helpers invalidate direct packet pointers */
	return TC_ACT_UNSPEC;
}

/* Test entry for BPF_PROG_TEST_RUN: one decision per invocation, regardless of the
 * (synthetic) packet's protocol. Same code path as tev_dropper. */
SEC("tc")
int tev_dropper_test(struct __sk_buff *skb)
{
	return decide(skb->len) ? TC_ACT_SHOT : TC_ACT_OK;
}

/* Reverse-path tap for the user-space delay line: the AF_PACKET ring has already copied
 * the frame (taps run before tc ingress); the kernel's own copy is discarded here so each
 * ACK travels only through the delay line. ARP and other non-IPv4 frames pass. */
SEC("tc")
int tev_steal(struct __sk_buff *skb)
{
	return skb->protocol == bpf_htons(ETH_P_IP) ? TC_ACT_SHOT : TC_ACT_OK;
}

/* The switch's forwarding (switch A/B of the paper are Ethernet switches): at the tc
 * ingress of a switch port, frames for a known receiver/sender IPv4 address get the next
 * hop's MACs and are redirected to the egress of the port (or bridge) behind which it
 * sits -- through that device's clsact egress (the dropper) and root qdisc (the
 * bottleneck's TBF), like IP forwarding, but without the routing pass per packet. Unknown
 * destinations and non-IPv4 frames take the kernel's normal path. */
struct fwd_entry {
	__u32 ifindex;
	__u8 dst[6];
	__u8 src[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32); /* IPv4 destination, network order */
	__type(value, struct fwd_entry);
} tev_fwd SEC(".maps");

SEC("tc")
int tev_l2fwd(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u32 daddr;

	if (skb->protocol != bpf_htons(ETH_P_IP) || data + sizeof(*eth) + 20 > end)
		return TC_ACT_OK;
	__builtin_memcpy(&daddr, data + sizeof(*eth) + 16, 4);
	struct fwd_entry *e = bpf_map_lookup_elem(&tev_fwd, &daddr);
	if (!e)
		return TC_ACT_OK;
	__builtin_memcpy(eth->h_dest, e->dst, 6);
	__builtin_memcpy(eth->h_source, e->src, 6);
	/* a TSO frame is marked per segment by the drop stage, and so is every data segment
	 * again: this mark is the one the ACKs keep */
	if (skb->gso_segs <= 1 && segment_is_tcp(data + sizeof(*eth)))
		mark_segment((__u8 *)data + sizeof(*eth), next_turn(skb->ifindex << 1 | 1, data + sizeof(*eth)));
	/* A clone goes on, the sender's own frame ends here. A frame that crossed the veth
	 * still belongs to its sender's socket, and a redirect keeps it so: TCP small queues
	 * then count the whole bottleneck queue as the sender's own and hold it to about a
	 * millisecond of data (the queue never filled, no flow ever overflowed a buffer).
	 * A clone belongs to no socket, so the frame leaves the sender as from a NIC (IP
	 * forwarding drops the owner the same way, in ip_rcv). */
	/* < 0: no clone was made, the kernel's normal path takes the frame; > 0: the queue
	 * dropped the clone (a full buffer), which is the frame's fate */
	if (bpf_clone_redirect(skb, e->ifindex, 0) < 0)
		return TC_ACT_OK;
	return TC_ACT_SHOT;
}

/* Test entry for BPF_PROG_TEST_RUN: the drop stage's edits of a frame without its drop
 * decision -- the segment mark, then PSH cleared on a full-sized segment. */
SEC("tc")
int tev_mark_test(struct __sk_buff *skb)
{
	if (!mark_frame(skb, skb->ifindex << 1))
		return TC_ACT_SHOT;
	clear_push(skb);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";

/* SPDX-License-Identifier: GPL-2.0 */
/* The segment mark, one source for the BPF drop stage and switch (datapath.bpf.c) and the
 * user-space delay line (tevdelay.c).
 *
 * 3.16 receivers processed every segment on its own: a segment that arrived while the
 * reader held the socket waited in the backlog and was ACKed (every second one) when the
 * backlog ran. Kernels since 5.0 merge consecutive backlogged segments -- and pure ACKs --
 * into one, so a busy reader ACKs once per dozens of segments and a busy sender counts one
 * ACK for dozens: stretch ACKs that slow every algorithm counting ACKs (3.16 Reno,
 * Scalable, HS-TCP). The merge requires equal IP DS fields (tcp_add_backlog), so each TCP
 * segment gets the lowest DSCP bit in turns: the caller counts the segments of one flow
 * where they leave the last hop before their receiver (the drop stage: per link; the
 * delay line: per route) and passes the count's parity, so neighbours in arrival order
 * always differ and are never merged. The IP ID's parity, used before, is not enough: a
 * retransmission lost between two segments of a flow leaves its neighbours with IDs of
 * equal parity (a merge in a CI run, once in some 10^5 segments). ECN bits are untouched;
 * the header checksum is updated incrementally (RFC 1624). */
#ifndef TEV_SEGMENT_MARK_H
#define TEV_SEGMENT_MARK_H

#define TEV_SEGMENT_MARK 0x04 /* lowest DSCP bit of the TOS byte */

/* ip: the first 12 bytes of an IPv4 header */
static inline __attribute__((always_inline)) int segment_is_tcp(const unsigned char *ip)
{
	return ip[9] == 6;
}

/* ip: the first 12 bytes of an IPv4 header, writable; odd: the segment's turn in its flow */
static inline __attribute__((always_inline)) void mark_segment(unsigned char *ip, unsigned int odd)
{
	unsigned char tos = (unsigned char)((ip[1] & ~TEV_SEGMENT_MARK) | ((odd & 1) ? TEV_SEGMENT_MARK : 0));
	unsigned short check;
	unsigned int sum;

	if (!segment_is_tcp(ip) || tos == ip[1])
		return;
	check = (unsigned short)(ip[10] << 8 | ip[11]);
	sum = (unsigned int)(~check & 0xffff) + (unsigned int)(~(ip[0] << 8 | ip[1]) & 0xffff) +
	      (unsigned int)(ip[0] << 8 | tos);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	check = (unsigned short)~sum;
	ip[1] = tos;
	ip[10] = (unsigned char)(check >> 8);
	ip[11] = (unsigned char)check;
}

#endif

// SPDX-License-Identifier: GPL-2.0
/* tevdelay: the emulated backend's constant-delay line, and a UDP RTT probe.
 *
 *   tevdelay line --delay-ns D [--quantum-ns Q] [--release batch|each] [--held-ms MS,...] [--stats FILE]
 *                 [--cpu N] [--rt PRIO] [--stall-watch]
 *                 --in IF [--in IF ...]
 *                 --route IPv4=IFNAME,DSTMAC,SRCMAC [--route ...]
 *                 [--rate-bps R --buffer-bytes B --data-in IF [...] --data-route IPv4=IF,DST,SRC [...]]
 *   tevdelay echo PORT
 *   tevdelay probe IPv4 PORT COUNT INTERVAL_US
 *   tevdelay marktest HEXFRAME ...    the segment mark on frames of one route -> each frame, in hex
 *   tevdelay ecntest K BACKLOG HEXFRAME ...   the link's ECN decision on frames finding BACKLOG
 *                                             bytes queued -> each frame, in hex
 *   tevdelay drrtest RATE_BPS QUEUE:ARRIVAL_NS:BYTES ...   the two queues' schedule for frames
 *                                             arriving so (all admitted) -> "QUEUE DEPARTURE_NS" each
 *   tevdelay ringtest SLOTS STEPS             the link's data ring of SLOTS slots through STEPS,
 *                                             one letter each: k the kernel fills its next slot
 *                                             (or drops: the slot is not free), a the link admits
 *                                             what has arrived, s it sends its oldest queued frame
 *                                             -> "admitted A drops D cur C head H queued Q"
 *
 * Why this design (kernel without sch_netem/sch_fq/etf): the delay sits on the reverse
 * (ACK) path, where packets are few and small. Each input port has an AF_PACKET
 * TPACKET_V2 RX ring; a tc ingress program (tev_steal) discards the kernel's own copy, so
 * the ring *is* the delay buffer: frames stay in place, in arrival order, until
 * arrival + D, then go out through one AF_PACKET socket (qdisc bypass, sendmmsg batches)
 * with the MACs of the next hop. No copy into user space, no per-packet wakeup under
 * load: the loop sleeps until the head frame's batch is due and then releases, in one go,
 * the frames due within a quantum Q after the head, at the middle of their due times, so
 * the delay error is bounded by Q/2 plus wakeup latency, which the stats record (lateness
 * histogram, ring drops), and the receiving CPU is interrupted once per batch.
 *
 * With --rate-bps the same process is also the bottleneck link (the "link engine"): the
 * data frames are stolen at the switch's sender ports into rings of their own, and each
 * frame gets its departure from the link's own clock when it arrives,
 *     departure = max(arrival, previous departure) + wire bytes / rate,
 * or is dropped at the tail when the bytes still to be sent before it would exceed the
 * buffer. Arrival is the tap's timestamp, so a late look at the ring delays nothing, and a
 * late release delays a frame but never the ones behind it: the link loses no capacity to
 * wake-ups. The engine then never sleeps (it spins on its own CPU for the whole run), so
 * it needs no timer per packet, which is what a qdisc's watchdog costs in a VM.
 *
 * With --ecn-threshold-bytes K the link marks instead of waiting to drop, as a data-centre
 * switch does for DCTCP: an ECN-capable frame (ECT(0)/ECT(1)) that finds K bytes or more
 * queued before it is admitted with CE set; one that is not ECN-capable is left to the tail
 * drop. Marks and drops see the same queue: the bytes still to be sent at arrival.
 *
 * With --ecn-queues 2 as well the link has two queues, as a data-centre switch gives ECN and
 * non-ECN traffic classes of their own (DCTCP cannot share a drop-tail queue: the other
 * flows keep it above K). Each --data-route names its queue (a 4th field: 0 the marking
 * queue, 1 the drop-tail one), so a flow's frames -- its retransmissions, which are never
 * ECN-capable, too -- stay in one queue. Each queue has the whole buffer to itself; a
 * frame's backlog is what waits in its own queue (the bytes admitted to it and not yet
 * sent when the engine admits the frame). A deficit round robin with a quantum of one
 * full frame (DRR_QUANTUM) shares the rate between the two while both have frames waiting,
 * and gives it all to one when the other is empty. Departures are then decided when the
 * link falls free (the next frame cannot be known at arrival), still from the link's own
 * clock: start = max(the link free, the frame's arrival), departure = start + size/rate.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "segment_mark.h" /* the ACKs get the same mark as the data */

#define MAX_IN 16 /* one per ACK port: plan.MAX_FLOWS pairs */
/* ours, never set by the kernel: the frame is taken by the link (link_admit) until sent,
 * or, on the ACK rings, already counted in the timestamp checks */
#define TP_STATUS_USER_SEEN (1u << 30)
#define MAX_ROUTES 32
#define MAX_HELD 6 /* "held back" thresholds in the stats */
#define BATCH 16 /* bounds the work done per send call (ACK processing downstream) */
#define FRAME_SIZE 2048u
#define BLOCK_SIZE (1u << 20)
#define OUT_SNDBUF (64 << 20) /* bytes; the kernel doubles it */
#define BLOCK_NR 64u /* 32768 frames per input: 24 ms of ACKs at > 1 Mpps */
/* A data ring holds every frame the link has admitted and not yet sent -- its whole buffer,
 * which one sender can fill alone -- and the frames not yet admitted. The kernel fills its
 * slots in turn and cannot pass a slot the link still holds, so what counts is the span
 * from the oldest frame still queued to the newest arrival: every frame that arrived while
 * the queue drained, the tail drops between the queued ones included. A slow start's
 * overshoot sends up to twice the link's rate into a full buffer, half of it dropped, so
 * that span is two buffers and more: the ring takes DATA_SPAN_BUFFERS buffers in frames of
 * at least DATA_MIN_FRAME bytes, plus DATA_RING_SPARE frames. (One buffer plus the spare,
 * 46,592 slots for the 30-MB buffer of 24.2 ms at 9.85 Gbps, filled in BIC's overshoot.) */
#define DATA_MIN_FRAME 1000u
#define DATA_SPAN_BUFFERS 3u
#define DATA_RING_SPARE 16384u /* and an ACK ring: the ACKs of one delay, and as many spare */
#define LINK_FIFO (1u << 17) /* frames admitted to the link, not yet sent (power of 2) */
#define WINDOW_SLACK_NS 1000 /* a batch's head leaves this much after its window opens: the loop */
#define LATE_US 2000 /* link lateness histogram: 1-us bins up to 2 ms, then one overflow bin */

static volatile sig_atomic_t stop, snapshot;
static void on_signal(int sig) { (void)sig; stop = 1; }
/* SIGUSR1: append the link's counters, with the time, to STATS.snap (exact byte counts at
 * the edges of a run's steady state) */
static void on_snapshot(int sig) { (void)sig; snapshot = 1; }

static void die(const char *what)
{
	fprintf(stderr, "tevdelay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct ring {
	int fd;
	char name[IFNAMSIZ];
	uint8_t *map;
	unsigned frames, cur;
};

struct route {
	uint32_t ip; /* network order */
	int ifindex;
	uint8_t dst[6], src[6];
	uint32_t turns; /* TCP segments it has carried: the segment mark's turns */
	int queue;      /* --ecn-queues 2: 0 the marking queue, 1 the drop-tail one */
};

static int parse_mac(const char *s, uint8_t m[6])
{
	return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &m[0], &m[1], &m[2], &m[3], &m[4],
		      &m[5]) == 6 ? 0 : -1;
}

static void open_ring(struct ring *r, const char *ifname, int vnet, unsigned block_nr)
{
	/* the caller's array is on the stack: every field is set here, cur (the next frame
	 * the kernel fills) included -- a stale cur watched the wrong slot forever */
	*r = (struct ring){0};
	snprintf(r->name, sizeof(r->name), "%s", ifname);
	r->fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: nothing queued before bind */
	if (r->fd < 0)
		die("socket");
	int v = TPACKET_V2, one = 1;
	if (setsockopt(r->fd, SOL_PACKET, PACKET_VERSION, &v, sizeof(v)))
		die("PACKET_VERSION");
	if (setsockopt(r->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)))
		die("PACKET_IGNORE_OUTGOING");
	/* a virtio-net header before each frame: its checksum state (a data frame's TCP
	 * checksum is still partial, as on the kernel's own path) travels with it */
	if (vnet && setsockopt(r->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		die("PACKET_VNET_HDR (rx ring)");
	struct tpacket_req req = {
		.tp_block_size = BLOCK_SIZE, .tp_block_nr = block_nr,
		.tp_frame_size = FRAME_SIZE, .tp_frame_nr = BLOCK_SIZE / FRAME_SIZE * block_nr,
	};
	if (setsockopt(r->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		die("PACKET_RX_RING");
	r->frames = req.tp_frame_nr;
	r->map = mmap(NULL, (size_t)BLOCK_SIZE * block_nr, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_LOCKED, r->fd, 0);
	if (r->map == MAP_FAILED)
		die("mmap ring");
	/* ETH_P_ALL: only "all" taps run before tc ingress, where tev_steal discards the
	 * kernel's copy; a protocol-bound tap would never see the frame. */
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = (int)if_nametoindex(ifname)};
	if (!sll.sll_ifindex)
		die(ifname);
	if (bind(r->fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind");
}

static inline struct tpacket2_hdr *frame(struct ring *r, unsigned i)
{
	return (struct tpacket2_hdr *)(r->map + (size_t)i * FRAME_SIZE);
}


/* ---- host stalls: the hypervisor takes the engine's vCPU ---- */

/* A virtual machine's vCPU is now and then taken away by the hypervisor (here ~3 ms, once
 * every few seconds, in spells): every frame due meanwhile leaves late, at any rate. The
 * engine tells such a stall from its own overload: a gap in its loop during which it never
 * gave up its CPU (no voluntary context switch: it was not stopped or blocked) and in which
 * the time neither on its thread's CPU clock nor waiting on the run queue is at least half
 * the gap. That time is the stall: the kernel leaves stolen time out of the thread's CPU
 * time (CONFIG_PARAVIRT_TIME_ACCOUNTING; softirq work done in its context counts as its
 * own), and the run queue wait (/proc/thread-self/schedstat, CONFIG_SCHED_INFO) is the
 * time another task of the host held the CPU, which is the run's doing. (A vCPU given back
 * after ~4 ms often runs a task woken meanwhile for ~40 us first: one involuntary switch,
 * not 4 ms of the host's. Where schedstat is missing, any switch refuses the gap.)
 * A stall of length S delays every frame due during it,
 * and those due while the engine works off the backlog, by at most S; it excuses up to S of
 * the lateness of each frame released after it began and due before the stall's end + S.
 * A rate that needs longer than S to catch up has too little headroom, and its later
 * frames count in full. What is left is counted apart (late_ge_ms_beyond_stalls), so that
 * the calibration can judge a rate on what the rate does, not on what the host did
 * meanwhile (a 10-ms stall alone holds 0.2 % of a 4-s run's frames back 2 ms or more,
 * at any rate). */
#define STALL_MIN_NS 250000 /* a loop gap this long is examined */
#define CPU_SAMPLE_NS 500000 /* the thread's CPU time and context switches are read this often: ~0.9 us a read here */

#define LONGEST_GAPS 8 /* the longest gaps examined, kept with what decided them (stats) */
/* Every stall is listed (its start after the watch's first turn, and its length), up to
 * this many: the verdict weighs a stall against the physical path's round trip, which a
 * count and a maximum cannot (a 6.7-ms stall is 6.7 round trips of a 1-ms path, and 1.7
 * of a 4-ms one), and the calibration learns from them how often the host stalls how long. */
#define STALLS_LISTED 8192

struct gap {
	int64_t gap_ns, stolen_ns, waited_ns; /* waited: on the run queue (-1: not known) */
	long switches, voluntary;
};

struct switches {
	long voluntary, involuntary; /* -1: unknown */
};

/* What the stall watch reads at once: the thread's context switches, its CPU time and the time */
struct sample {
	int64_t real, cpu;
	struct switches csw;
};

struct stalls {
	struct gap longest[LONGEST_GAPS];
	int64_t prev_top; /* the loop's previous turn, or the end of the sample taken in it (CLOCK_REALTIME ns) */
	struct sample sample; /* the last one */
	int schedstat_fd; /* /proc/thread-self/schedstat, or -1 */
	int64_t run_delay; /* its run queue wait, read when the involuntary switches last changed */
	int64_t start, end, len; /* the latest stall: its loop gap, and the time stolen in it */
	uint64_t count, examined;
	int64_t stolen_ns, max_ns;
	int64_t origin; /* the watch's first turn (CLOCK_REALTIME ns) */
	uint32_t listed;
	uint32_t at_ms[STALLS_LISTED], len_us[STALLS_LISTED]; /* each stall: its start after origin, its stolen time */
};

static struct switches context_switches(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru))
		return (struct switches){-1, -1};
	return (struct switches){ru.ru_nvcsw, ru.ru_nivcsw};
}

/* The thread's run queue wait so far (ns), or -1. It grows only while the thread waits
 * after an involuntary switch, and is brought up to date when it runs again: read after
 * each change of the involuntary count, it is exact at every sample. */
static int64_t run_queue_wait(int fd)
{
	char buf[96];
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long on_cpu, waited;
	if (sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
		return -1;
	return (int64_t)waited;
}

static void stall_watch_init(struct stalls *S)
{
	*S = (struct stalls){0};
	S->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	S->run_delay = run_queue_wait(S->schedstat_fd);
	S->sample.csw = (struct switches){-1, -1};
}

/* A sample with no context switch among its reads: the switch counts are read again after
 * the time and must not have moved. A switch is then in the sample's counts and its time
 * before the sample's time, or in neither (a preemption lands at the reads' own system
 * calls: one between the counts and the time would be read as stolen, one before the
 * counts but after the loop's turn, as a gap with no switch). The run queue wait is read
 * inside, after the involuntary count last moved. */
static struct sample take_sample(struct stalls *S)
{
	struct sample s;
	for (int tries = 0;; tries++) {
		s.csw = context_switches();
		if (s.csw.involuntary != S->sample.csw.involuntary)
			S->run_delay = run_queue_wait(S->schedstat_fd);
		s.cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
		s.real = now_ns(CLOCK_REALTIME);
		struct switches again = context_switches();
		if ((again.voluntary == s.csw.voluntary && again.involuntary == s.csw.involuntary) || tries == 3)
			return s;
	}
}

/* Called at the top of every turn of the spinning loop (`top`: its time); returns the time
 * to go on with: the sample's, if one was taken (its reads may have been preempted). */
static int64_t stall_watch(struct stalls *S, int64_t top)
{
	if (top - S->prev_top < STALL_MIN_NS && top - S->sample.real < CPU_SAMPLE_NS) {
		S->prev_top = top;
		return top;
	}
	if (!S->origin)
		S->origin = top;
	struct sample last = S->sample;
	int64_t run_delay = S->run_delay;
	struct sample s = take_sample(S);
	/* the gap: from the loop's previous turn (or the sample taken in it) to the end of this
	 * sample, so that a switch during these reads, which the counts hold, is in it too; the
	 * interval the counts cover (from the last sample) holds the gap */
	int64_t gap = S->prev_top ? s.real - S->prev_top : 0;
	S->prev_top = s.real;
	S->sample = s;
	int known = s.csw.voluntary >= 0 && last.csw.voluntary >= 0;
	if (gap < STALL_MIN_NS || !last.real || !known)
		return s.real;
	long voluntary = s.csw.voluntary - last.csw.voluntary;
	long involuntary = s.csw.involuntary - last.csw.involuntary;
	/* the run queue wait in the interval; without schedstat a switch leaves it unknown */
	int64_t waited = !involuntary ? 0 : run_delay >= 0 && S->run_delay >= 0 ? S->run_delay - run_delay : -1;
	int64_t stolen = (s.real - last.real) - (s.cpu - last.cpu) - (waited > 0 ? waited : 0);
	S->examined++;
	int shortest = 0;
	for (int i = 1; i < LONGEST_GAPS; i++)
		if (S->longest[i].gap_ns < S->longest[shortest].gap_ns)
			shortest = i;
	if (gap > S->longest[shortest].gap_ns)
		S->longest[shortest] = (struct gap){gap, stolen, waited, voluntary + involuntary, voluntary};
	if (!voluntary && waited >= 0 && stolen >= gap / 2) {
		if (stolen > gap)
			stolen = gap;
		S->count++;
		S->stolen_ns += stolen;
		if (stolen > S->max_ns)
			S->max_ns = stolen;
		S->start = s.real - gap;
		S->end = s.real;
		S->len = stolen;
		if (S->listed < STALLS_LISTED) {
			S->at_ms[S->listed] = (uint32_t)((S->start - S->origin) / 1000000);
			S->len_us[S->listed++] = (uint32_t)(stolen / 1000);
		}
	}
	return s.real;
}

/* The lateness the latest stall excuses in a frame released at `release`, due at `due` */
static int64_t stall_excused(const struct stalls *S, int64_t due, int64_t release)
{
	if (!S->len || release < S->start || due > S->end + S->len)
		return 0;
	return S->len;
}

static void stall_stats(FILE *f, const struct stalls *S)
{
	fprintf(f, ",\"host_stalls\":{\"count\":%" PRIu64 ",\"stolen_ns\":%" PRId64 ",\"max_ns\":%" PRId64
		   ",\"gaps_examined\":%" PRIu64 ",\"min_gap_ns\":%d,\"watched_ns\":%" PRId64 ",\"at_ms\":[",
		S->count, S->stolen_ns, S->max_ns, S->examined, STALL_MIN_NS, S->origin ? S->prev_top - S->origin : 0);
	for (uint32_t i = 0; i < S->listed; i++)
		fprintf(f, "%s%" PRIu32, i ? "," : "", S->at_ms[i]);
	fprintf(f, "],\"length_us\":[");
	for (uint32_t i = 0; i < S->listed; i++)
		fprintf(f, "%s%" PRIu32, i ? "," : "", S->len_us[i]);
	fprintf(f, "],\"longest_gaps\":[");
	for (int i = 0, first = 1; i < LONGEST_GAPS; i++)
		if (S->longest[i].gap_ns) {
			fprintf(f, "%s{\"gap_ns\":%" PRId64 ",\"stolen_ns\":%" PRId64 ",\"waited_ns\":%" PRId64
				   ",\"switches\":%ld,\"voluntary\":%ld}", first ? "" : ",",
				S->longest[i].gap_ns, S->longest[i].stolen_ns, S->longest[i].waited_ns,
				S->longest[i].switches, S->longest[i].voluntary);
			first = 0;
		}
	fprintf(f, "]}");
}

static void held_stats(FILE *f, const char *name, int n, const double *ms, const uint64_t *count)
{
	fprintf(f, ",\"%s\":{", name);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\"%g\":%" PRIu64, i ? "," : "", ms[i], count[i]);
	fprintf(f, "}");
}

/* ---- the link engine: rate and buffer with scheduled departures ---- */

struct pending {
	struct tpacket2_hdr *h;
	struct route *rt;
	double depart; /* ns since the engine's epoch (a double keeps sub-ns steps exact); in a
			* queue of two (struct queue), the arrival until the departure is decided */
	uint32_t len;  /* wire bytes */
};

/* One of the two queues of --ecn-queues 2 */
#define DRR_QUANTUM 1514 /* bytes a queue may send per round: one full frame */
struct queue {
	struct pending *fifo; /* admitted, not yet sent, in arrival order */
	unsigned head, tail;
	int64_t bytes;        /* admitted and not yet sent: a new frame's backlog */
	int64_t deficit;      /* DRR: what it may still send in its turn */
	uint64_t admitted, admitted_bytes, sent, sent_bytes, tail_drops, tail_drop_bytes;
	int64_t max_backlog;
};

/* DRR between two queues, each holding frames in arrival order (pending.depart: the
 * arrival), the link free from *free_at on: the queue whose head goes next, and its start
 * in *start; -1 when both are empty. The link idle, it starts at the earlier arrival; a
 * queue with nothing waiting then loses its deficit, as DRR empties an idle queue's. The
 * chosen frame's bytes are the caller's to take from the deficit. */
static int drr_next(struct queue q[2], int *cur, double free_at, double *start)
{
	int has0 = q[0].head != q[0].tail, has1 = q[1].head != q[1].tail;
	if (!has0 && !has1)
		return -1;
	double a0 = has0 ? q[0].fifo[q[0].head & (LINK_FIFO - 1)].depart : INFINITY;
	double a1 = has1 ? q[1].fifo[q[1].head & (LINK_FIFO - 1)].depart : INFINITY;
	double t = free_at;
	if (a0 > t && a1 > t)
		t = a0 < a1 ? a0 : a1;
	*start = t;
	int w0 = a0 <= t, w1 = a1 <= t;
	if (!(w0 && w1)) { /* one waits: it has the link, and both start their next turns afresh */
		int only = w0 ? 0 : 1;
		q[1 - only].deficit = 0;
		q[only].deficit = q[only].fifo[q[only].head & (LINK_FIFO - 1)].len; /* 0 once it is taken */
		*cur = only;
		return only;
	}
	for (;;) { /* both wait: the current one sends while its deficit covers its head */
		struct queue *Q = &q[*cur];
		if (Q->deficit >= (int64_t)Q->fifo[Q->head & (LINK_FIFO - 1)].len)
			return *cur;
		*cur ^= 1;
		q[*cur].deficit += DRR_QUANTUM;
	}
}

/* ECN marking at the link (--ecn-threshold-bytes); threshold 0: off */
struct ecn {
	int64_t threshold;
	uint64_t ect, marked, marked_bytes, ce_on_arrival, not_ect_over;
	int64_t min_marked_backlog; /* the least backlog a marked frame found (INT64_MAX: none) */
	int64_t max_unmarked_backlog; /* the most an ECN-capable frame found and passed unmarked (-1: none) */
};

/* CE into an IPv4 header, its checksum updated incrementally (RFC 1624: HC' = ~(~HC + ~m +
 * m')). The TCP checksum does not cover the TOS byte: a partial one stays valid. */
static void set_ce(uint8_t *ip)
{
	uint16_t before = (uint16_t)(ip[0] << 8 | ip[1]);
	ip[1] |= 0x03;
	uint16_t after = (uint16_t)(ip[0] << 8 | ip[1]);
	uint32_t sum = (uint16_t)~(ip[10] << 8 | ip[11]);
	sum += (uint16_t)~before;
	sum += after;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	uint16_t check = (uint16_t)~sum;
	ip[10] = (uint8_t)(check >> 8);
	ip[11] = (uint8_t)check;
}

/* The link's ECN decision on an IPv4 frame admitted behind `backlog` bytes. */
static void ecn_at_link(struct ecn *e, uint8_t *eth, unsigned snaplen, unsigned len, int64_t backlog)
{
	uint8_t *ip = eth + 14;
	if (e->threshold <= 0 || snaplen < 14 + 20 || ip[0] >> 4 != 4)
		return;
	int field = ip[1] & 0x03;
	if (field == 0x03) {
		e->ce_on_arrival++;
	} else if (field) {
		e->ect++;
		if (backlog >= e->threshold) {
			set_ce(ip);
			e->marked++;
			e->marked_bytes += len;
			if (backlog < e->min_marked_backlog)
				e->min_marked_backlog = backlog;
		} else if (backlog > e->max_unmarked_backlog) {
			e->max_unmarked_backlog = backlog;
		}
	} else if (backlog >= e->threshold) {
		e->not_ect_over++;
	}
}

struct link {
	int on;
	double rate_bps, ns_per_byte;
	int64_t buffer_bytes;
	int64_t epoch; /* CLOCK_REALTIME ns at start: departures are kept relative to it */
	struct ring rings[MAX_IN];
	int nin;
	struct route routes[MAX_ROUTES];
	int nroutes;
	int out; /* its own socket: sends each frame with its virtio-net header */
	uint64_t idle_ns; /* time the engine found nothing to do: its headroom */
	struct pending *fifo;
	unsigned head, tail; /* fifo[head..tail): admitted, in departure order */
	double last_depart;
	uint64_t admitted, sent, sent_bytes, admitted_bytes, tail_drops, tail_drop_bytes;
	uint64_t fifo_full, no_route, non_ip, send_err, ts_fallback;
	int64_t max_backlog, max_late;
	uint64_t late_hist[LATE_US + 1];
	int nheld; /* the delay line's "held back" thresholds, counted for the data too */
	const int64_t *held_ns;
	const double *held_ms;
	uint64_t held_count[MAX_HELD];
	uint64_t held_beyond_stalls[MAX_HELD]; /* ... less what a host stall excuses */
	const struct stalls *stalls;
	struct ecn ecn;
	int nqueues;          /* 2: --ecn-queues 2 (struct queue); else the one FIFO above */
	struct queue q[2];
	int drr_cur;          /* the queue whose DRR turn it is */
	double free_at;       /* two queues: when the link finishes the frame it last started */
};

/* A frame's wall-clock arrival, the tap's stamp. One that is not a wall-clock stamp (e.g.
 * a mono delivery time) is converted, or replaced by now, and written back: once per frame. */
static int64_t frame_time(struct tpacket2_hdr *h, int64_t real, uint64_t *fallbacks)
{
	int64_t ts = (int64_t)h->tp_sec * 1000000000LL + h->tp_nsec;
	if (ts < real - 10000000000LL || ts > real + 1000000000LL) {
		int64_t mono = now_ns(CLOCK_MONOTONIC);
		if (ts > mono - 10000000000LL && ts <= mono + 1000000000LL)
			ts += real - mono;
		else {
			ts = real;
			(*fallbacks)++;
		}
		h->tp_sec = (uint32_t)(ts / 1000000000LL);
		h->tp_nsec = (uint32_t)(ts % 1000000000LL);
	}
	return ts;
}

static struct route *route_for(struct route *routes, int n, const uint8_t *eth, uint32_t snaplen, uint32_t len)
{
	uint32_t dip;
	if (snaplen < 34 || snaplen != len)
		return NULL;
	memcpy(&dip, eth + 30, 4);
	for (int k = 0; k < n; k++)
		if (routes[k].ip == dip)
			return &routes[k];
	return NULL;
}

/* One frame of a sendmmsg batch, readdressed to the next hop of its route: the MACs, the
 * segment mark, and the message (the bytes from base, len of them: with a virtio-net
 * header before the frame where its socket has them). */
static void address_frame(struct route *rt, uint8_t *eth, void *base, size_t len, struct sockaddr_ll *addr,
			  struct iovec *iov, struct mmsghdr *msg)
{
	memcpy(eth, rt->dst, 6);
	memcpy(eth + 6, rt->src, 6);
	if (segment_is_tcp(eth + 14))
		mark_segment(eth + 14, rt->turns++ & 1);
	*addr = (struct sockaddr_ll){.sll_family = AF_PACKET, .sll_ifindex = rt->ifindex, .sll_halen = 6};
	memcpy(addr->sll_addr, rt->dst, 6);
	*iov = (struct iovec){.iov_base = base, .iov_len = len};
	*msg = (struct mmsghdr){.msg_hdr = {.msg_name = addr, .msg_namelen = sizeof(*addr), .msg_iov = iov,
					    .msg_iovlen = 1}};
}

/* Send a batch; returns how many went out, the rest counted in *errors. */
/* Send a batch; a frame the kernel refuses (its receiver's input backlog full) is lost,
 * counted in *errors and marked in unsent[] (when given), and the frames after it are still
 * offered: giving up at the first refusal lost the rest of the batch (3,211 refusals cost
 * 46,807 ACKs at 24.2 ms x7, docs/fidelity.md). Returns the frames sent. */
static int send_batch(int fd, struct mmsghdr *msgs, int nb, uint64_t *errors, unsigned char *unsent)
{
	int sent = 0, next = 0;
	if (unsent)
		memset(unsent, 0, (size_t)nb);
	while (next < nb) {
		int n = sendmmsg(fd, msgs + next, (unsigned)(nb - next), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) { /* the frame at `next` was refused */
			(*errors)++;
			if (unsent)
				unsent[next] = 1;
			next++;
			continue;
		}
		sent += n;
		next += n;
	}
	return sent;
}

/* Frames the kernel could not put into these rings (full) */
static uint64_t ring_drops(struct ring *rings, int n)
{
	uint64_t drops = 0;
	for (int i = 0; i < n; i++) {
		struct tpacket_stats st;
		socklen_t len = sizeof(st);
		if (!getsockopt(rings[i].fd, SOL_PACKET, PACKET_STATISTICS, &st, &len))
			drops += st.tp_drops;
	}
	return drops;
}

/* The tail drop, one rule for one queue or two: a frame that finds `backlog` bytes queued
 * before it, and would take them past the buffer, is dropped -- so is one that finds the
 * queue's FIFO (`held` frames) full. A drop is counted in the link's totals and, with two
 * queues, in its queue's (Q; NULL with one), and the frame goes back to the kernel. */
static int tail_drop(struct link *L, struct queue *Q, struct tpacket2_hdr *h, int64_t backlog, unsigned held)
{
	int fifo_full = held >= LINK_FIFO;
	if (!fifo_full && backlog + (int64_t)h->tp_len <= L->buffer_bytes)
		return 0;
	L->fifo_full += fifo_full;
	L->tail_drops++;
	L->tail_drop_bytes += h->tp_len;
	if (Q) {
		Q->tail_drops++;
		Q->tail_drop_bytes += h->tp_len;
	}
	__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	return 1;
}

/* --ecn-queues 2: a frame into its route's queue, or dropped at that queue's tail; only the
 * first queue marks. */
static void queue_admit(struct link *L, struct tpacket2_hdr *h, struct route *rt, uint8_t *eth, double arrival)
{
	struct queue *Q = &L->q[rt->queue];
	int64_t backlog = Q->bytes;
	if (tail_drop(L, Q, h, backlog, Q->tail - Q->head))
		return;
	if (backlog > Q->max_backlog)
		Q->max_backlog = backlog;
	if (backlog > L->max_backlog)
		L->max_backlog = backlog;
	if (rt->queue == 0)
		ecn_at_link(&L->ecn, eth, h->tp_snaplen, h->tp_len, backlog);
	Q->fifo[Q->tail++ & (LINK_FIFO - 1)] = (struct pending){h, rt, arrival, h->tp_len};
	Q->bytes += h->tp_len;
	Q->admitted++;
	Q->admitted_bytes += h->tp_len;
	L->admitted++;
	L->admitted_bytes += h->tp_len;
}

/* Admit what has arrived, in arrival order across the data rings: a departure, or a drop
 * at the tail (with two queues: into its queue). Returns how many frames it looked at. */
static int link_admit(struct link *L, int64_t real)
{
	int seen = 0;
	for (;;) {
		int best = -1;
		int64_t best_ts = INT64_MAX;
		for (int i = 0; i < L->nin; i++) {
			struct tpacket2_hdr *h = frame(&L->rings[i], L->rings[i].cur);
			/* a slot the link took on the ring's last lap and still holds is no arrival:
			 * the ring is full, and the kernel drops (ring_drops) until the frame is sent.
			 * Taken for one, the frame went into the queue twice and the cursor ran ahead
			 * of the kernel's: every later arrival sat unread behind it, the flow stalled
			 * for good (BIC's overshoot at 24.2 ms, 2026-12-02). */
			uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
			if (!(st & TP_STATUS_USER) || (st & TP_STATUS_USER_SEEN))
				continue;
			int64_t ts = frame_time(h, real, &L->ts_fallback);
			if (ts < best_ts) {
				best_ts = ts;
				best = i;
			}
		}
		if (best < 0 || seen >= 256)
			return seen;
		seen++;
		struct ring *r = &L->rings[best];
		struct tpacket2_hdr *h = frame(r, r->cur);
		h->tp_status |= TP_STATUS_USER_SEEN; /* taken: until the link gives it back (KERNEL) */
		r->cur = (r->cur + 1) % r->frames;
		uint8_t *eth = (uint8_t *)h + h->tp_mac;
		if (h->tp_snaplen >= 14 && (eth[12] != 0x08 || eth[13] != 0x00)) {
			L->non_ip++; /* ARP...: the kernel kept its own copy */
			__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			continue;
		}
		struct route *rt = route_for(L->routes, L->nroutes, eth, h->tp_snaplen, h->tp_len);
		if (!rt) {
			L->no_route++;
			__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			continue;
		}
		double arrival = (double)(best_ts - L->epoch);
		if (L->nqueues == 2) {
			queue_admit(L, h, rt, eth, arrival);
			continue;
		}
		double wait = L->last_depart - arrival; /* ns of work queued before this frame */
		int64_t backlog = wait > 0 ? (int64_t)(wait / L->ns_per_byte + 0.5) : 0;
		if (tail_drop(L, NULL, h, backlog, L->tail - L->head))
			continue;
		if (backlog > L->max_backlog)
			L->max_backlog = backlog;
		ecn_at_link(&L->ecn, eth, h->tp_snaplen, h->tp_len, backlog);
		double start = wait > 0 ? L->last_depart : arrival;
		L->last_depart = start + (double)h->tp_len * L->ns_per_byte;
		L->fifo[L->tail++ & (LINK_FIFO - 1)] = (struct pending){h, rt, L->last_depart, h->tp_len};
		L->admitted++;
		L->admitted_bytes += h->tp_len;
	}
}

/* A data frame sent at `now` (engine ns) that was due at `depart`: the lateness stats. */
static void count_late(struct link *L, double depart, double now, int64_t real)
{
	int64_t late = (int64_t)(now - depart);
	if (late > L->max_late)
		L->max_late = late;
	L->late_hist[late / 1000 < LATE_US ? late / 1000 : LATE_US]++;
	int64_t beyond = late - stall_excused(L->stalls, (int64_t)depart + L->epoch, real);
	for (int i = 0; i < L->nheld; i++) {
		L->held_count[i] += late >= L->held_ns[i];
		L->held_beyond_stalls[i] += beyond >= L->held_ns[i];
	}
}

/* --ecn-queues 2: send the frames the DRR takes whose departure has come, one batch per
 * call (as link_release). The choice is made anew at each call until the frame is due:
 * by then every frame that arrived before its start has been admitted. */
static int queues_release(struct link *L, int64_t real)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	struct sockaddr_ll addrs[BATCH];
	struct pending *batch[BATCH];
	int from[BATCH];
	double now = (double)(real - L->epoch), start;
	int nb = 0, q;
	while (nb < BATCH && (q = drr_next(L->q, &L->drr_cur, L->free_at, &start)) >= 0) {
		struct queue *Q = &L->q[q];
		struct pending *p = &Q->fifo[Q->head & (LINK_FIFO - 1)];
		double depart = start + (double)p->len * L->ns_per_byte;
		if (depart > now)
			break;
		Q->head++;
		Q->bytes -= p->len;
		Q->deficit -= p->len;
		L->free_at = depart;
		count_late(L, depart, now, real);
		uint8_t *eth = (uint8_t *)p->h + p->h->tp_mac;
		address_frame(p->rt, eth, eth - sizeof(struct virtio_net_hdr),
			      p->h->tp_snaplen + sizeof(struct virtio_net_hdr), &addrs[nb], &iovs[nb], &msgs[nb]);
		batch[nb] = p;
		from[nb++] = q;
	}
	unsigned char unsent[BATCH];
	send_batch(L->out, msgs, nb, &L->send_err, unsent);
	for (int k = 0; k < nb; k++) {
		if (!unsent[k]) {
			L->sent++;
			L->sent_bytes += batch[k]->len;
			L->q[from[k]].sent++;
			L->q[from[k]].sent_bytes += batch[k]->len;
		}
		__atomic_store_n(&batch[k]->h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	}
	return nb;
}

/* Send the frames whose departure has come, one batch (at most BATCH) per call: the ACKs
 * due meanwhile go next, so neither direction starves. Returns how many it sent. */
static int link_release(struct link *L, int64_t real)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	struct sockaddr_ll addrs[BATCH];
	double now = (double)(real - L->epoch);
	unsigned first = L->head;
	int nb = 0;
	while (nb < BATCH && L->head != L->tail && L->fifo[L->head & (LINK_FIFO - 1)].depart <= now) {
		struct pending *p = &L->fifo[L->head++ & (LINK_FIFO - 1)];
		count_late(L, p->depart, now, real);
		uint8_t *eth = (uint8_t *)p->h + p->h->tp_mac;
		address_frame(p->rt, eth, eth - sizeof(struct virtio_net_hdr),
			      p->h->tp_snaplen + sizeof(struct virtio_net_hdr), &addrs[nb], &iovs[nb], &msgs[nb]);
		nb++;
	}
	unsigned char unsent[BATCH];
	send_batch(L->out, msgs, nb, &L->send_err, unsent);
	for (int k = 0; k < nb; k++) {
		struct pending *p = &L->fifo[(first + (unsigned)k) & (LINK_FIFO - 1)];
		if (!unsent[k]) {
			L->sent++;
			L->sent_bytes += p->h->tp_len;
		}
		__atomic_store_n(&p->h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
	}
	return nb;
}

static double late_quantile_us(const struct link *L, double q)
{
	uint64_t total = 0, acc = 0;
	for (int i = 0; i <= LATE_US; i++)
		total += L->late_hist[i];
	if (!total)
		return 0;
	for (int i = 0; i <= LATE_US; i++) {
		acc += L->late_hist[i];
		if ((double)acc >= q * (double)total)
			return i + 1; /* upper edge of the bin */
	}
	return LATE_US + 1;
}

static void link_stats(FILE *f, struct link *L, int watch_stalls)
{
	fprintf(f,
		",\"link\":{\"rate_bps\":%.0f,\"buffer_bytes\":%" PRId64 ",\"admitted\":%" PRIu64
		",\"admitted_bytes\":%" PRIu64 ",\"sent\":%" PRIu64 ",\"sent_bytes\":%" PRIu64
		",\"tail_drops\":%" PRIu64 ",\"tail_drop_bytes\":%" PRIu64 ",\"fifo_full\":%" PRIu64
		",\"ring_drops\":%" PRIu64 ",\"ring_frames\":%u,\"no_route\":%" PRIu64 ",\"non_ip\":%" PRIu64
		",\"send_errors\":%" PRIu64 ",\"timestamp_fallbacks\":%" PRIu64 ",\"max_backlog_bytes\":%" PRId64
		",\"max_late_ns\":%" PRId64 ",\"idle_ns\":%" PRIu64 ",\"late_us_p50\":%g,\"late_us_p99\":%g,\"late_us_p999\":%g"
		",\"late_us_histogram\":{",
		L->rate_bps, L->buffer_bytes, L->admitted, L->admitted_bytes, L->sent, L->sent_bytes,
		L->tail_drops, L->tail_drop_bytes, L->fifo_full, ring_drops(L->rings, L->nin), L->nin ? L->rings[0].frames : 0,
		L->no_route, L->non_ip, L->send_err, L->ts_fallback, L->max_backlog, L->max_late, L->idle_ns,
		late_quantile_us(L, 0.5), late_quantile_us(L, 0.99), late_quantile_us(L, 0.999));
	int first = 1;
	for (int i = 0; i <= LATE_US; i++)
		if (L->late_hist[i]) {
			fprintf(f, "%s\"%d\":%" PRIu64, first ? "" : ",", i, L->late_hist[i]);
			first = 0;
		}
	fprintf(f, "}");
	held_stats(f, "late_ge_ms", L->nheld, L->held_ms, L->held_count);
	if (watch_stalls)
		held_stats(f, "late_ge_ms_beyond_stalls", L->nheld, L->held_ms, L->held_beyond_stalls);
	const struct ecn *e = &L->ecn;
	if (e->threshold > 0) {
		fprintf(f, ",\"ecn\":{\"threshold_bytes\":%" PRId64 ",\"ect_frames\":%" PRIu64 ",\"ce_marked\":%" PRIu64
			   ",\"ce_marked_bytes\":%" PRIu64 ",\"ce_on_arrival\":%" PRIu64 ",\"not_ect_over_threshold\":%" PRIu64,
			e->threshold, e->ect, e->marked, e->marked_bytes, e->ce_on_arrival, e->not_ect_over);
		if (e->marked)
			fprintf(f, ",\"min_marked_backlog_bytes\":%" PRId64, e->min_marked_backlog);
		else
			fprintf(f, ",\"min_marked_backlog_bytes\":null");
		if (e->max_unmarked_backlog >= 0)
			fprintf(f, ",\"max_unmarked_ect_backlog_bytes\":%" PRId64 "}", e->max_unmarked_backlog);
		else
			fprintf(f, ",\"max_unmarked_ect_backlog_bytes\":null}");
	}
	if (L->nqueues == 2) {
		fprintf(f, ",\"queues\":{\"scheduler\":\"drr\",\"quantum_bytes\":%d,\"buffer_bytes_each\":%" PRId64,
			DRR_QUANTUM, L->buffer_bytes);
		for (int k = 0; k < 2; k++) {
			const struct queue *Q = &L->q[k];
			fprintf(f, ",\"%s\":{\"admitted\":%" PRIu64 ",\"admitted_bytes\":%" PRIu64 ",\"sent\":%" PRIu64
				   ",\"sent_bytes\":%" PRIu64 ",\"tail_drops\":%" PRIu64 ",\"tail_drop_bytes\":%" PRIu64
				   ",\"max_backlog_bytes\":%" PRId64 "}",
				k ? "drop_tail" : "marking", Q->admitted, Q->admitted_bytes, Q->sent, Q->sent_bytes,
				Q->tail_drops, Q->tail_drop_bytes, Q->max_backlog);
		}
		fprintf(f, "}");
	}
	fprintf(f, "}");
}

/* IPv4=IFNAME,DSTMAC,SRCMAC[,QUEUE]: the queue (0 or 1) only for a data route */
static int parse_route(const char *v, struct route *rt)
{
	char buf[128], *ip, *ifn, *dst, *src, *queue, *end = NULL;
	snprintf(buf, sizeof(buf), "%s", v);
	ip = strtok(buf, "=");
	ifn = strtok(NULL, ",");
	dst = strtok(NULL, ",");
	src = strtok(NULL, ",");
	queue = strtok(NULL, ",");
	rt->queue = queue ? (int)strtol(queue, &end, 10) : 0;
	if (!ip || !ifn || !dst || !src || inet_pton(AF_INET, ip, &rt->ip) != 1 ||
	    parse_mac(dst, rt->dst) || parse_mac(src, rt->src) || !(rt->ifindex = (int)if_nametoindex(ifn)) ||
	    (queue && (*end || rt->queue < 0 || rt->queue > 1))) {
		fprintf(stderr, "tevdelay: bad route %s\n", v);
		return -1;
	}
	return 0;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* The latest due time (timestamp + delay), no later than `until`, of the frames waiting
 * in the rings: the end of the batch the oldest frame opens. */
static int64_t batch_last(struct ring *rings, int nin, int64_t delay, int64_t until, int64_t real,
			  uint64_t *fallbacks)
{
	int64_t last = INT64_MIN;
	for (int i = 0; i < nin; i++) {
		struct ring *r = &rings[i];
		for (unsigned j = 0; j < r->frames; j++) {
			struct tpacket2_hdr *h = frame(r, (r->cur + j) % r->frames);
			if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
				break;
			int64_t due = frame_time(h, real, fallbacks) + delay;
			if (due > until)
				break;
			if (due > last)
				last = due;
		}
	}
	return last;
}

static int cmd_line(int argc, char **argv)
{
	struct ring rings[MAX_IN] = {0};
	struct route routes[MAX_ROUTES];
	int nin = 0, nroutes = 0;
	int64_t delay = -1, quantum = 20000;
	const char *stats_path = NULL;
	int cpu = -1, rt_prio = 0, each = 0, watch_stalls = 0;
	/* "held back" thresholds (ms, ascending): frames at least this late are counted
	 * whatever Q is; a time-dilated run passes them multiplied by its factor */
	double held_ms[MAX_HELD] = {0.5, 1, 2, 5};
	int nheld = 4;
	static struct link L; /* large (histogram, rings): not on the stack */
	const char *data_in[MAX_IN], *ack_in[MAX_IN];
	int ndata = 0, nack = 0;

	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--stall-watch")) { /* a flag: the link engine counts host stalls */
			watch_stalls = 1;
			continue;
		}
		if (!v)
			goto usage;
		if (!strcmp(a, "--delay-ns"))
			delay = strtoll(v, NULL, 0);
		else if (!strcmp(a, "--quantum-ns"))
			quantum = strtoll(v, NULL, 0);
		else if (!strcmp(a, "--cpu"))
			cpu = atoi(v);
		else if (!strcmp(a, "--rt"))
			rt_prio = atoi(v);
		else if (!strcmp(a, "--release")) {
			if (strcmp(v, "batch") && strcmp(v, "each"))
				goto usage;
			each = !strcmp(v, "each");
		}

		else if (!strcmp(a, "--held-ms")) {
			char buf[128], *tok, *save = NULL;
			snprintf(buf, sizeof(buf), "%s", v);
			nheld = 0;
			for (tok = strtok_r(buf, ",", &save); tok && nheld < MAX_HELD; tok = strtok_r(NULL, ",", &save))
				held_ms[nheld++] = strtod(tok, NULL);
			if (!nheld)
				goto usage;
		}
		else if (!strcmp(a, "--stats"))
			stats_path = v;
		else if (!strcmp(a, "--in") && nack < MAX_IN)
			ack_in[nack++] = v; /* opened once delay and rate are known */
		else if (!strcmp(a, "--route") && nroutes < MAX_ROUTES) {
			if (parse_route(v, &routes[nroutes++]))
				return 2;
		} else if (!strcmp(a, "--data-route") && L.nroutes < MAX_ROUTES) {
			if (parse_route(v, &L.routes[L.nroutes++]))
				return 2;
		} else if (!strcmp(a, "--data-in") && ndata < MAX_IN)
			data_in[ndata++] = v; /* opened once the buffer is known */
		else if (!strcmp(a, "--rate-bps"))
			L.rate_bps = strtod(v, NULL);
		else if (!strcmp(a, "--buffer-bytes"))
			L.buffer_bytes = strtoll(v, NULL, 0);
		else if (!strcmp(a, "--ecn-threshold-bytes"))
			L.ecn.threshold = strtoll(v, NULL, 0);
		else if (!strcmp(a, "--ecn-queues"))
			L.nqueues = atoi(v);
		else
			goto usage;
		i++;
	}
	if (delay < 0 || !nack || !nroutes)
		goto usage;
	/* an ACK ring holds the ACKs of one delay: one per segment at most (a receiver ACKs
	 * every segment while it holds a hole), at the link's rate where the line is the link */
	uint64_t ack_frames = (uint64_t)((double)delay / 1e9 * L.rate_bps / (8.0 * 1514)) + DATA_RING_SPARE;
	unsigned ack_blocks = (unsigned)((ack_frames * FRAME_SIZE + BLOCK_SIZE - 1) / BLOCK_SIZE);
	for (int k = 0; k < nack; k++)
		open_ring(&rings[nin++], ack_in[k], 0, ack_blocks > BLOCK_NR ? ack_blocks : BLOCK_NR);
	L.on = L.rate_bps > 0;
	if (L.on && (!ndata || !L.nroutes || L.buffer_bytes <= 0)) {
		fprintf(stderr, "tevdelay: --rate-bps needs --buffer-bytes > 0, --data-in and --data-route\n");
		return 2;
	}
	if (L.ecn.threshold < 0 || (L.ecn.threshold > 0 && !L.on)) {
		fprintf(stderr, "tevdelay: --ecn-threshold-bytes needs a value > 0 and the link (--rate-bps)\n");
		return 2;
	}
	if (L.nqueues != 0 && L.nqueues != 1 && !(L.nqueues == 2 && L.ecn.threshold > 0)) {
		fprintf(stderr, "tevdelay: --ecn-queues is 1 or 2, and 2 needs --ecn-threshold-bytes\n");
		return 2;
	}
	for (int k = 0; k < L.nroutes; k++)
		if (L.routes[k].queue && L.nqueues != 2) {
			fprintf(stderr, "tevdelay: a data route names queue 1 without --ecn-queues 2\n");
			return 2;
		}
	L.ecn.min_marked_backlog = INT64_MAX;
	L.ecn.max_unmarked_backlog = -1;
	if (L.on) {
		uint64_t frames = DATA_SPAN_BUFFERS * (uint64_t)L.buffer_bytes / DATA_MIN_FRAME + DATA_RING_SPARE;
		unsigned blocks = (unsigned)((frames * FRAME_SIZE + BLOCK_SIZE - 1) / BLOCK_SIZE);
		for (int k = 0; k < ndata; k++)
			open_ring(&L.rings[L.nin++], data_in[k], 1, blocks > BLOCK_NR ? blocks : BLOCK_NR);
		L.ns_per_byte = 8e9 / L.rate_bps;
		L.fifo = calloc(LINK_FIFO, sizeof(*L.fifo));
		if (!L.fifo)
			die("calloc link fifo");
		for (int k = 0; L.nqueues == 2 && k < 2; k++)
			if (!(L.q[k].fifo = calloc(LINK_FIFO, sizeof(*L.q[k].fifo))))
				die("calloc link queue");
	}

	int out = socket(AF_PACKET, SOCK_RAW, 0), one = 1;
	if (out < 0)
		die("socket out");
	if (setsockopt(out, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)))
		die("PACKET_QDISC_BYPASS");
	/* A veth frees a sent frame only once the peer's CPU has processed it, and a full
	 * send buffer blocks sendmmsg: with the default (~270 ACKs, 4 ms at 1.6 Gbps) the
	 * whole line stalled whenever the senders' CPU lagged, holding every ACK back for
	 * 10-25 ms. Room for a full ring of ACKs keeps the line on its own clock. */
	int sndbuf = OUT_SNDBUF;
	if (setsockopt(out, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
		die("SO_SNDBUFFORCE");
	/* Release times are the whole point: a time-shared scheduler lets busy neighbours
	 * (iperf3, other work on the host) delay ACKs by milliseconds. SCHED_FIFO keeps the
	 * line on time; it sleeps whenever nothing is due, and RT throttling bounds it. */
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			die("sched_setaffinity");
	}
	/* The link engine spins: as SCHED_FIFO it would hog the CPU, and the kernel's fair
	 * server (RT throttling) then stops it for 50 ms about once a second whenever anything
	 * else wants that CPU. Alone on its CPU at nice -20 it keeps it just as well. */
	if (L.on && rt_prio > 0) {
		fprintf(stderr, "tevdelay: the link engine spins; it runs without --rt\n");
		return 2;
	}
	if (L.on && setpriority(PRIO_PROCESS, 0, -20))
		die("setpriority");
	if (rt_prio > 0) {
		struct sched_param sp = {.sched_priority = rt_prio};
		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			die("sched_setscheduler");
	}
	prctl(PR_SET_TIMERSLACK, 1UL); /* hrtimer wakeups without the default 50 us slack */
	signal(SIGTERM, on_signal);
	signal(SIGUSR1, on_snapshot);
	signal(SIGINT, on_signal);
	if (L.on) {
		L.out = socket(AF_PACKET, SOCK_RAW, 0);
		if (L.out < 0)
			die("socket link out");
		if (setsockopt(L.out, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)))
			die("PACKET_QDISC_BYPASS (link)");
		if (setsockopt(L.out, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
			die("PACKET_VNET_HDR (link)");
		if (setsockopt(L.out, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)))
			die("SO_SNDBUFFORCE (link)");
		L.epoch = now_ns(CLOCK_REALTIME);
	}
	printf("ready\n");
	fflush(stdout);

	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	struct sockaddr_ll addrs[BATCH];
	struct tpacket2_hdr *held[BATCH];
	int nb = 0;
	uint64_t forwarded = 0, batches = 0, no_route = 0, non_ip = 0, send_err = 0, ts_fallback = 0, late = 0, ts_software = 0, ts_future = 0;
	int64_t max_late = 0, sum_err = 0, max_early = 0;
	uint64_t hist[8] = {0}; /* error: within +-Q/2, late <Q, <2Q, <5Q, <10Q, <100Q, >=100Q; early (before -Q/2) */
	uint64_t held_count[MAX_HELD] = {0}; /* frames late by >= held_ms[i] */
	uint64_t held_beyond_stalls[MAX_HELD] = {0}; /* ... less the part a host stall explains */
	struct stalls stalls;
	stall_watch_init(&stalls);
	L.stalls = &stalls;
	int64_t held_ns[MAX_HELD];
	for (int i = 0; i < nheld; i++)
		held_ns[i] = (int64_t)(held_ms[i] * 1e6 + 0.5);
	L.nheld = nheld;
	L.held_ns = held_ns;
	L.held_ms = held_ms;
	int64_t half = quantum / 2, batch_until = INT64_MIN, head_due = INT64_MIN, head_last = 0;
	struct pollfd pfds[MAX_IN];
	for (int i = 0; i < nin; i++)
		pfds[i] = (struct pollfd){.fd = rings[i].fd, .events = POLLIN};

	int64_t idle_since = 0;
	char snap_path[4096];
	snprintf(snap_path, sizeof(snap_path), "%s.snap", stats_path ? stats_path : "tevdelay-stats");
	while (!stop) {
		int64_t real = now_ns(CLOCK_REALTIME);
		if (L.on && watch_stalls) /* only a loop that never sleeps tells a stall from a sleep */
			real = stall_watch(&stalls, real);
		if (snapshot) {
			snapshot = 0;
			FILE *sf = fopen(snap_path, "a");
			if (sf) {
				/* and where the engine stands (to tell where a stalled run's frames went):
				 * its FIFO, its place in the first data ring and the status the kernel left
				 * there, how far its schedule runs ahead of now, the ACKs forwarded and
				 * those the kernel refused (when a run lost them: the verdict judges a
				 * precision-driven run's after its warm-up cut) */
				struct ring *r0 = L.nin ? &L.rings[0] : NULL;
				unsigned st = r0 ? __atomic_load_n(&frame(r0, r0->cur)->tp_status, __ATOMIC_ACQUIRE) : 0;
				fprintf(sf, "{\"mono_ns\":%" PRId64 ",\"sent\":%" PRIu64 ",\"sent_bytes\":%" PRIu64
					",\"tail_drops\":%" PRIu64 ",\"admitted\":%" PRIu64 ",\"fifo\":%u"
					",\"ring_cur\":%u,\"ring_cur_status\":%u"
					",\"schedule_ahead_ns\":%.0f,\"acks_forwarded\":%" PRIu64 ",\"acks_held\":%d"
					",\"acks_not_sent\":%" PRIu64 "}\n",
					now_ns(CLOCK_MONOTONIC), L.sent, L.sent_bytes, L.tail_drops, L.admitted,
					L.tail - L.head, r0 ? r0->cur : 0, st,
					L.last_depart - (double)(now_ns(CLOCK_REALTIME) - L.epoch), forwarded, nb,
					send_err);
				fclose(sf);
			}
		}
		int link_work = 0;
		if (L.on && !nb) { /* between ACK batches: a batch is gathered in one go */
			if (idle_since)
				L.idle_ns += (uint64_t)(real - idle_since);
			link_work = link_admit(&L, real);
			link_work += L.nqueues == 2 ? queues_release(&L, real) : link_release(&L, real);
			if (link_work)
				real = now_ns(CLOCK_REALTIME);
			idle_since = 0;
		}
		int best = -1;
		int64_t best_ts = INT64_MAX;
		for (int i = 0; i < nin; i++) {
			struct tpacket2_hdr *h = frame(&rings[i], rings[i].cur);
			if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
				continue;
			int64_t ts = (int64_t)h->tp_sec * 1000000000LL + h->tp_nsec;
			if (!(h->tp_status & TP_STATUS_USER_SEEN)) {
				h->tp_status |= TP_STATUS_USER_SEEN;
				if (h->tp_status & TP_STATUS_TS_SOFTWARE)
					ts_software++;
				if (ts > real)
					ts_future++;
			}
			ts = frame_time(h, real, &ts_fallback);
			if (ts < best_ts) {
				best_ts = ts;
				best = i;
			}
		}
		int64_t due = best >= 0 ? best_ts + delay : 0;
		/* Frames leave in batches, as a NIC's interrupt moderation delivers them: the
		 * senders' CPU is interrupted once per batch, not once per ACK or two -- in a VM
		 * each interrupt cost that CPU more than the ACK's own processing. A batch holds the
		 * oldest frame and every frame due within a quantum Q after it, and leaves at the
		 * middle of their due times, so each frame leaves within Q/2 of its due time, a
		 * frame alone exactly on time, and the errors of a batch average out. Every frame
		 * of the window is in the rings already: one arriving now is due a whole delay
		 * later, and the delay is 100 Q (delay.py). */
		int64_t open_at = 0;
		if (best >= 0 && due > batch_until && !each) {
			if (due != head_due) {
				head_due = due;
				head_last = batch_last(rings, nin, delay, due + quantum, real, &ts_fallback);
			}
			open_at = due + (head_last - due) / 2;
		}
		if (each) /* the rule before batches (benchmarks): as soon as it is due within Q/2 */
			open_at = due - half;
		if (best >= 0 && nb < BATCH && (due <= batch_until || real >= open_at)) {
			if (due > batch_until) {
				batch_until = each ? due : head_last;
				batches++;
			}
			struct ring *r = &rings[best];
			struct tpacket2_hdr *h = frame(r, r->cur);
			r->cur = (r->cur + 1) % r->frames;
			uint8_t *eth = (uint8_t *)h + h->tp_mac;
			int64_t err = real - due;
			sum_err += err;
			if (err > max_late)
				max_late = err;
			if (-err > max_early)
				max_early = -err;
			/* within half a quantum (and the loop's own microsecond) is on time */
			int b = err < -half - WINDOW_SLACK_NS ? 7 : err <= half + WINDOW_SLACK_NS ? 0 : err < quantum ? 1 : err < 2 * quantum ? 2
				: err < 5 * quantum ? 3 : err < 10 * quantum ? 4 : err < 100 * quantum ? 5 : 6;
			hist[b]++;
			if (b >= 1 && b <= 6)
				late++;
			int64_t beyond = err - stall_excused(&stalls, due, real);
			for (int i = 0; i < nheld; i++) {
				held_count[i] += err >= held_ns[i];
				held_beyond_stalls[i] += beyond >= held_ns[i];
			}
			if (h->tp_snaplen >= 34 && (eth[12] != 0x08 || eth[13] != 0x00)) {
				/* not IPv4 (ARP...): the kernel kept its own copy, nothing to do */
				non_ip++;
				__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
				continue;
			}
			struct route *rt = route_for(routes, nroutes, eth, h->tp_snaplen, h->tp_len);
			if (!rt) {
				no_route++;
				__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
				continue;
			}
			address_frame(rt, eth, eth, h->tp_snaplen, &addrs[nb], &iovs[nb], &msgs[nb]);
			held[nb++] = h;
			continue;
		}
		if (nb) {
			forwarded += (uint64_t)send_batch(out, msgs, nb, &send_err, NULL); /* frames go back anyway */
			for (int k = 0; k < nb; k++)
				__atomic_store_n(&held[k]->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			nb = 0;
			continue;
		}
		if (L.on) {
			/* the link engine never sleeps: no timer, no wake-up per packet */
			if (!link_work) {
				idle_since = real;
				cpu_relax();
			}
			continue;
		}
		if (best < 0) {
			poll(pfds, (nfds_t)nin, 100); /* idle: wake on the next frame */
			continue;
		}
		/* the head's batch is not due yet: sleep until it is */
		int64_t wake = open_at;
		struct timespec ts = {.tv_sec = wake / 1000000000LL, .tv_nsec = wake % 1000000000LL};
		clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL);
	}

	FILE *f = stats_path ? fopen(stats_path, "w") : stdout;
	if (!f)
		die("stats file");
	fprintf(f,
		"{\"delay_ns\":%" PRId64 ",\"quantum_ns\":%" PRId64 ",\"forwarded\":%" PRIu64 ",\"batches\":%" PRIu64
		",\"no_route\":%" PRIu64 ",\"non_ip\":%" PRIu64 ",\"send_errors\":%" PRIu64 ",\"ring_drops\":%" PRIu64
		",\"ring_frames\":%u,\"timestamp_fallbacks\":%" PRIu64 ",\"skb_timestamps\":%" PRIu64 ",\"future_timestamps\":%" PRIu64 ",\"late_beyond_half_quantum\":%" PRIu64
		",\"max_late_ns\":%" PRId64 ",\"max_early_ns\":%" PRId64 ",\"mean_error_ns\":%.1f"
		",\"error_histogram\":{\"lt_half_q\":%" PRIu64 ",\"lt_q\":%" PRIu64 ",\"lt_2q\":%" PRIu64
		",\"lt_5q\":%" PRIu64 ",\"lt_10q\":%" PRIu64 ",\"lt_100q\":%" PRIu64 ",\"ge_100q\":%" PRIu64
		",\"early\":%" PRIu64 "},\"late_ge_ms\":{",
		delay, quantum, forwarded, batches, no_route, non_ip, send_err, ring_drops(rings, nin), rings[0].frames, ts_fallback, ts_software, ts_future,
		late, max_late, max_early,
		forwarded + no_route ? (double)sum_err / (double)(forwarded + no_route) : 0.0,
		hist[0], hist[1], hist[2], hist[3], hist[4], hist[5], hist[6], hist[7]);
	for (int i = 0; i < nheld; i++)
		fprintf(f, "%s\"%g\":%" PRIu64, i ? "," : "", held_ms[i], held_count[i]);
	fprintf(f, "}");
	if (L.on && watch_stalls) {
		held_stats(f, "late_ge_ms_beyond_stalls", nheld, held_ms, held_beyond_stalls);
		stall_stats(f, &stalls);
	}
	if (L.on)
		link_stats(f, &L, watch_stalls);
	fprintf(f, "}\n");
	if (f != stdout)
		fclose(f);
	return 0;
usage:
	fprintf(stderr, "usage: tevdelay line --delay-ns D [--quantum-ns Q] [--release batch|each] [--held-ms MS,...] [--stats FILE] [--stall-watch] "
			"--in IF [...] --route IP=IF,DSTMAC,SRCMAC [...] [--rate-bps R --buffer-bytes B "
			"--data-in IF [...] --data-route IP=IF,DSTMAC,SRCMAC[,QUEUE] [...] [--ecn-threshold-bytes K [--ecn-queues 2]]]\n");
	return 2;
}

static int cmd_echo(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("echo bind");
	printf("ready\n");
	fflush(stdout);
	char buf[2048];
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n > 0)
			sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
}

/* Probes are paced (one every INTERVAL_US) and not sent in lock-step with the replies,
 * so COUNT probes take COUNT * INTERVAL + one RTT however long the RTT is; each probe
 * carries its own sequence number and its send time is kept here. Replies are awaited
 * WAIT_US after the last probe (default 1 s; a time-dilated path's RTT can be longer). */
static int cmd_probe(int argc, char **argv)
{
	if (argc != 6 && argc != 7)
		return 2;
	int64_t wait_ns = argc == 7 ? atol(argv[6]) * 1000LL : 1000000000LL;
	if (wait_ns <= 0)
		return 2;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
	if (fd < 0 || inet_pton(AF_INET, argv[2], &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("probe connect");
	int count = atoi(argv[4]);
	int64_t interval = atol(argv[5]) * 1000LL;
	if (count < 1 || count > 100000)
		return 2;
	int64_t *sent = calloc((size_t)count, sizeof(int64_t)), *rtt = calloc((size_t)count, sizeof(int64_t));
	if (!sent || !rtt)
		die("calloc");
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int nsent = 0, got = 0;
	int64_t next = now_ns(CLOCK_MONOTONIC), deadline = INT64_MAX;
	while (got < count) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		if (nsent < count && now >= next) {
			uint64_t seq = (uint64_t)nsent;
			sent[nsent] = now_ns(CLOCK_MONOTONIC);
			if (send(fd, &seq, sizeof(seq), 0) != sizeof(seq))
				die("probe send");
			if (++nsent == count)
				deadline = now + wait_ns;
			next += interval;
			continue;
		}
		if (now >= deadline)
			break;
		int64_t until = nsent < count ? next : deadline;
		int ms = (int)((until - now + 999999) / 1000000);
		if (poll(&pfd, 1, ms > 0 ? ms : 0) > 0) {
			uint64_t back;
			while (recv(fd, &back, sizeof(back), MSG_DONTWAIT) == sizeof(back)) {
				int64_t t = now_ns(CLOCK_MONOTONIC);
				if (back < (uint64_t)nsent && !rtt[back]) {
					rtt[back] = t - sent[back];
					got++;
				}
			}
		}
	}
	printf("{\"rtt_ns\":[");
	int first = 1;
	for (int i = 0; i < count; i++)
		if (rtt[i]) {
			printf(first ? "%" PRId64 : ",%" PRId64, rtt[i]);
			first = 0;
		}
	printf("],\"lost\":%d}\n", count - got);
	return 0;
}

/* A test frame given in hex (at least an Ethernet and an IPv4 header: 34 bytes) into f;
 * its length, or 0 for one that is not such hex. */
static size_t parse_hex_frame(const char *hex, uint8_t *f, size_t size)
{
	size_t len = strlen(hex), n = 0;
	if (len % 2 || len / 2 > size || len < 68)
		return 0;
	for (const char *h = hex; *h; h += 2) {
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1)
			return 0;
		f[n++] = (uint8_t)v;
	}
	return n;
}

static int cmd_marktest(int argc, char **argv)
{
	struct route rt = {0};
	if (argc < 3)
		return 2;
	for (int a = 2; a < argc; a++) {
		uint8_t f[256] = {0};
		size_t n = parse_hex_frame(argv[a], f, sizeof(f));
		if (!n)
			return 2;
		if (segment_is_tcp(f + 14))
			mark_segment(f + 14, rt.turns++ & 1);
		for (size_t i = 0; i < n; i++)
			printf("%02x", f[i]);
		printf("\n");
	}
	return 0;
}

/* tevdelay ecntest K BACKLOG HEXFRAME...: the link's ECN decision (ecn_at_link) on each
 * frame as if it found BACKLOG bytes queued, printed back in hex (tests pin the threshold
 * and the header checksum on it). */
static int cmd_ecntest(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	struct ecn e = {.threshold = strtoll(argv[2], NULL, 0), .min_marked_backlog = INT64_MAX,
			.max_unmarked_backlog = -1};
	int64_t backlog = strtoll(argv[3], NULL, 0);
	for (int a = 4; a < argc; a++) {
		uint8_t f[256] = {0};
		size_t n = parse_hex_frame(argv[a], f, sizeof(f));
		if (!n)
			return 2;
		ecn_at_link(&e, f, (unsigned)n, (unsigned)n, backlog);
		for (size_t i = 0; i < n; i++)
			printf("%02x", f[i]);
		printf("\n");
	}
	return 0;
}

/* tevdelay awake CPU: keep one vCPU from halting while a run lasts. In a VM an idle vCPU
 * halts and the hypervisor may give its core away; the timer or packet that should wake
 * it then waits for the host (the project's VM: base RTTs of 1-1.5 ms at a 0.2 ms setting,
 * ACKs held back 10-15 ms, 3-15 % of CPU time stolen). This loop takes only what nothing
 * else on the CPU wants (SCHED_IDLE), so a vCPU with work runs it as before and one without
 * stays awake. Ends on SIGTERM/SIGINT or when stdin closes (its runner died). */
static int cmd_awake(int argc, char **argv)
{
	struct sched_param sp = {0};
	cpu_set_t set;
	char *end;
	long cpu = argc == 3 ? strtol(argv[2], &end, 10) : -1;

	if (argc != 3 || *end || cpu < 0 || cpu >= CPU_SETSIZE) {
		fprintf(stderr, "usage: tevdelay awake CPU\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET((int)cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("sched_setaffinity");
	if (sched_setscheduler(0, SCHED_IDLE, &sp))
		die("sched_setscheduler SCHED_IDLE");
	/* SCHED_IDLE yields only within its own scheduling group, and with autogroup every
	 * session is one group of full weight (this loop's session too, or its runner's):
	 * its group gets the lowest weight as well, or it would take half a busy CPU */
	FILE *ag = fopen("/proc/self/autogroup", "w");
	if (ag) {
		fputs("19", ag);
		fclose(ag);
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		for (int i = 0; i < 100000 && !stop; i++)
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#else
			__asm__ __volatile__("" ::: "memory");
#endif
		if (getppid() == 1)
			break; /* the runner is gone */
	}
	return 0;
}

/* The two queues' DRR schedule (drr_next) for frames QUEUE:ARRIVAL_NS:BYTES, each queue's
 * in arrival order, on a link of RATE_BPS, no buffer limit: each frame's queue and
 * departure (ns), in the order they leave. */
static int cmd_drrtest(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	double ns_per_byte = 8e9 / strtod(argv[2], NULL);
	struct queue q[2] = {0};
	for (int k = 0; k < 2; k++)
		if (!(q[k].fifo = calloc(LINK_FIFO, sizeof(*q[k].fifo))))
			return 2;
	for (int a = 3; a < argc; a++) {
		int queue;
		double arrival;
		unsigned len;
		if (sscanf(argv[a], "%d:%lf:%u", &queue, &arrival, &len) != 3 || queue < 0 || queue > 1 || !len)
			return 2;
		struct queue *Q = &q[queue];
		if (Q->tail != Q->head && Q->fifo[(Q->tail - 1) & (LINK_FIFO - 1)].depart > arrival)
			return 2; /* each queue's frames in arrival order */
		Q->fifo[Q->tail++ & (LINK_FIFO - 1)] = (struct pending){NULL, NULL, arrival, len};
	}
	int cur = 0, k;
	double free_at = 0, start;
	while ((k = drr_next(q, &cur, free_at, &start)) >= 0) {
		struct pending *p = &q[k].fifo[q[k].head++ & (LINK_FIFO - 1)];
		q[k].deficit -= p->len;
		free_at = start + (double)p->len * ns_per_byte;
		printf("%d %.0f\n", k, free_at);
	}
	return 0;
}

/* tevdelay ringtest SLOTS STEPS: the link's admission (link_admit) on a data ring of SLOTS
 * slots in memory, the kernel's part played as it plays it -- a frame goes into the next
 * slot in turn only if that slot is free (TP_STATUS_KERNEL), or is dropped -- and a send
 * gives the oldest queued frame's slot back. Tests pin that a slot the link still holds is
 * never taken for an arrival when the kernel has come round to it. */
static int cmd_ringtest(int argc, char **argv)
{
	char *end = NULL;
	long slots = argc == 4 ? strtol(argv[2], &end, 10) : 0;
	if (slots < 1 || slots > (1L << 24) || *end) {
		fprintf(stderr, "usage: tevdelay ringtest SLOTS(1..16777216) STEPS\n");
		return 2;
	}
	static struct link L;
	L.rings[0].frames = (unsigned)slots;
	L.rings[0].map = calloc(L.rings[0].frames, FRAME_SIZE);
	L.fifo = calloc(LINK_FIFO, sizeof(*L.fifo));
	if (!L.rings[0].map || !L.fifo)
		return 2;
	L.nin = 1;
	L.nroutes = 1;
	L.routes[0].ip = htonl(0x0a4d640b); /* 10.77.100.11 */
	L.buffer_bytes = 1LL << 40;          /* no tail drop: every frame stays queued */
	L.ns_per_byte = 8.0;                 /* 1 Gb/s */
	L.epoch = now_ns(CLOCK_REALTIME);
	unsigned head = 0, drops = 0;
	for (const char *c = argv[3]; *c; c++) {
		if (*c == 'k') {
			struct tpacket2_hdr *h = frame(&L.rings[0], head);
			if (h->tp_status != TP_STATUS_KERNEL) {
				drops++;
				continue;
			}
			uint8_t *eth = (uint8_t *)h + 66;
			memset(eth, 0, 60);
			eth[12] = 0x08;
			eth[14] = 0x45;
			eth[23] = 6;
			memcpy(eth + 30, &L.routes[0].ip, 4);
			int64_t t = now_ns(CLOCK_REALTIME);
			*h = (struct tpacket2_hdr){.tp_len = 60, .tp_snaplen = 60, .tp_mac = 66, .tp_net = 80,
						   .tp_sec = (uint32_t)(t / 1000000000LL),
						   .tp_nsec = (uint32_t)(t % 1000000000LL)};
			__atomic_store_n(&h->tp_status, TP_STATUS_USER, __ATOMIC_RELEASE);
			head = (head + 1) % L.rings[0].frames;
		} else if (*c == 'a') {
			link_admit(&L, now_ns(CLOCK_REALTIME));
		} else if (*c == 's') {
			if (L.head != L.tail)
				__atomic_store_n(&L.fifo[L.head++ & (LINK_FIFO - 1)].h->tp_status, TP_STATUS_KERNEL,
						 __ATOMIC_RELEASE);
		} else {
			return 2;
		}
	}
	printf("admitted %" PRIu64 " drops %u cur %u head %u queued %u\n", L.admitted, drops, L.rings[0].cur, head,
	       L.tail - L.head);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "line"))
		return cmd_line(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "echo"))
		return cmd_echo(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "probe"))
		return cmd_probe(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "marktest"))
		return cmd_marktest(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "ecntest"))
		return cmd_ecntest(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "drrtest"))
		return cmd_drrtest(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "ringtest"))
		return cmd_ringtest(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "awake"))
		return cmd_awake(argc, argv);
	fprintf(stderr, "usage: tevdelay line|echo|probe|awake ...\n");
	return 2;
}

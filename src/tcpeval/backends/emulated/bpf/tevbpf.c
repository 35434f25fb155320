// SPDX-License-Identifier: GPL-2.0
/* tevbpf: loader and register tool for the emulated backend's BPF drop module.
 *
 *   tevbpf attach OBJ PROG IFNAME ingress|egress [--prio N] [--also NETNS/IFNAME ...]
 *                                                  -> {"prog_id":..,"map_id":..}
 *   tevbpf write MAP_ID OFFSET VALUE               register write, model semantics
 *   tevbpf read MAP_ID                             -> all registers as JSON
 *   tevbpf read MAP_ID OFFSET                      -> one register, like rdaxi: "0xOFF = 0xVALUE"
 *   tevbpf testrun OBJ SEED THRESHOLD N            BPF_PROG_TEST_RUN N packets
 *   tevbpf marktest OBJ HEXFRAME ...               BPF_PROG_TEST_RUN of the drop stage's frame
 *                                                  edits (segment mark, PSH on full-sized segments)
 *                                                  on frames of one link, in turn -> each frame
 *                                                  out, in hex, a line each
 *   tevbpf fwd OBJ IFNAME IPv4=OUTIF,DSTMAC,SRCMAC ...
 *                                                  the switch's L2 forwarding (tev_l2fwd) at
 *                                                  IFNAME's tc ingress, after the dropper
 *
 * The attachment outlives this process (tc holds the program, the program holds the
 * map); later calls reach the map by id, so nothing is pinned on the host. Map access
 * uses BPF_F_LOCK so it is consistent with the program's bpf_spin_lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct drop_regs {
	uint32_t control, threshold_lo, threshold_hi, seed;
	uint32_t seen_lo, seen_hi, dropped_lo, dropped_hi;
	uint32_t state;
	uint32_t lock; /* struct bpf_spin_lock */
	uint32_t max_len, over_mtu; /* evidence: largest frame, frames > 1514 B */
	uint32_t push_cleared; /* full-sized segments whose PSH the drop stage cleared */
};

#define SEED_IF_ZERO 0x2545F491u

static int die(const char *what, int err)
{
	fprintf(stderr, "tevbpf: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static uint32_t effective_seed(uint32_t s) { return s ? s : SEED_IF_ZERO; }

static struct bpf_object *open_load(const char *path)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	int err = libbpf_get_error(obj);
	if (err)
		die(path, err);
	err = bpf_object__load(obj);
	if (err)
		die("load", err);
	return obj;
}

static uint32_t map_id_of(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);
	int err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		die("map info", err);
	return info.id;
}

static int map_fd_by_id(const char *s)
{
	int fd = bpf_map_get_fd_by_id((uint32_t)strtoul(s, NULL, 0));
	if (fd < 0)
		die("map by id", errno);
	return fd;
}

static void lookup(int fd, struct drop_regs *r)
{
	uint32_t key = 0;
	int err = bpf_map_lookup_elem_flags(fd, &key, r, BPF_F_LOCK);
	if (err)
		die("lookup", errno);
}

static void update(int fd, struct drop_regs *r)
{
	uint32_t key = 0;
	int err = bpf_map_update_elem(fd, &key, r, BPF_F_LOCK);
	if (err)
		die("update", errno);
}

/* DropModule.write, on the map value. */
static void reg_write(struct drop_regs *r, unsigned off, uint32_t v)
{
	switch (off) {
	case 0x00:
		r->control = v & 1u;
		if (v & 2u)
			r->state = effective_seed(r->seed);
		if (v & 4u)
			r->seen_lo = r->seen_hi = r->dropped_lo = r->dropped_hi = r->max_len =
				r->over_mtu = r->push_cleared = 0;
		break;
	case 0x04: r->threshold_lo = v; break;
	case 0x08: r->threshold_hi = v & 1u; break;
	case 0x0C: r->seed = v; break;
	default:
		fprintf(stderr, "tevbpf: register 0x%02X is not writable\n", off);
		exit(2);
	}
}

static void print_regs(const struct drop_regs *r)
{
	printf("{\"control\":%u,\"threshold_lo\":%u,\"threshold_hi\":%u,\"seed\":%u,"
	       "\"seen\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"state\":%u,"
	       "\"max_frame_bytes\":%u,\"frames_over_mtu\":%u,\"push_cleared\":%u}\n",
	       r->control, r->threshold_lo, r->threshold_hi, r->seed,
	       ((uint64_t)r->seen_hi << 32) | r->seen_lo,
	       ((uint64_t)r->dropped_hi << 32) | r->dropped_lo, r->state, r->max_len, r->over_mtu,
	       r->push_cleared);
}

static void attach_one(struct bpf_program *prog, const char *ifname, int ingress, int prio,
		       __u32 *prog_id)
{
	int ifindex = if_nametoindex(ifname);
	if (!ifindex)
		die(ifname, errno);
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS);
	int err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST)
		die("clsact", err);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = (__u32)prio, .priority = (__u32)prio,
		    .prog_fd = bpf_program__fd(prog));
	err = bpf_tc_attach(&hook, &opts);
	if (err)
		die("tc attach", err);
	*prog_id = opts.prog_id;
}

/* One program (and so one register map) may sit on several ports, in other network
 * namespaces too (--also NETNS/IFNAME): the drop module on each receiver's link is one
 * module with one sequence of draws, as the single NetFPGA card was. */
static int cmd_attach(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: tevbpf attach OBJ PROG IFNAME ingress|egress [--prio N] "
				"[--also NETNS/IFNAME ...]\n");
		return 2;
	}
	int ingress = !strcmp(argv[5], "ingress"), prio = 1;
	for (int i = 6; i < argc; i += 2) {
		if (i + 1 >= argc || (strcmp(argv[i], "--prio") && strcmp(argv[i], "--also"))) {
			fprintf(stderr, "tevbpf attach: bad option %s\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--prio"))
			prio = atoi(argv[i + 1]);
	}
	if (prio < 1 || prio > 0xffff) {
		fprintf(stderr, "tevbpf attach: --prio must be 1..65535\n");
		return 2;
	}
	struct bpf_object *obj = open_load(argv[2]);
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, argv[3]);
	if (!prog)
		die(argv[3], ENOENT);
	__u32 prog_id = 0;
	attach_one(prog, argv[4], ingress, prio, &prog_id);
	for (int i = 6; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--also"))
			continue;
		char path[256], *slash = strchr(argv[i + 1], '/');
		if (!slash || slash == argv[i + 1]) {
			fprintf(stderr, "tevbpf attach: --also wants NETNS/IFNAME, got %s\n", argv[i + 1]);
			return 2;
		}
		snprintf(path, sizeof(path), "/run/netns/%.*s", (int)(slash - argv[i + 1]), argv[i + 1]);
		int nsfd = open(path, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			die(path, errno);
		if (setns(nsfd, CLONE_NEWNET))
			die("setns", errno);
		close(nsfd);
		attach_one(prog, slash + 1, ingress, prio, &prog_id);
	}
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "tev_drop_regs");
	printf("{\"prog_id\":%u,\"map_id\":%u}\n", prog_id, map ? map_id_of(bpf_map__fd(map)) : 0);
	return 0;
}

static int cmd_fwd(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: tevbpf fwd OBJ IFNAME IPv4=OUTIF,DSTMAC,SRCMAC ...\n");
		return 2;
	}
	struct bpf_object *obj = open_load(argv[2]);
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, "tev_l2fwd");
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "tev_fwd");
	if (!prog || !map)
		die("object lacks tev_l2fwd/tev_fwd", ENOENT);
	for (int i = 4; i < argc; i++) {
		struct { uint32_t ifindex; uint8_t dst[6], src[6]; } e = {0};
		char buf[128], ip[32], out[IFNAMSIZ + 1];
		uint32_t key;
		snprintf(buf, sizeof(buf), "%s", argv[i]);
		char *eq = strchr(buf, '='), *c1 = eq ? strchr(eq, ',') : NULL;
		char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
		if (!eq || !c1 || !c2 || eq - buf >= (long)sizeof(ip) || c1 - eq - 1 > IFNAMSIZ) {
			fprintf(stderr, "tevbpf: bad route %s\n", argv[i]);
			return 2;
		}
		snprintf(ip, sizeof(ip), "%.*s", (int)(eq - buf), buf);
		snprintf(out, sizeof(out), "%.*s", (int)(c1 - eq - 1), eq + 1);
		if (inet_pton(AF_INET, ip, &key) != 1 || !(e.ifindex = if_nametoindex(out)) ||
		    sscanf(c1 + 1, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &e.dst[0], &e.dst[1], &e.dst[2],
			   &e.dst[3], &e.dst[4], &e.dst[5]) != 6 ||
		    sscanf(c2 + 1, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &e.src[0], &e.src[1], &e.src[2],
			   &e.src[3], &e.src[4], &e.src[5]) != 6) {
			fprintf(stderr, "tevbpf: bad route %s\n", argv[i]);
			return 2;
		}
		if (bpf_map_update_elem(bpf_map__fd(map), &key, &e, BPF_ANY))
			die("route update", errno);
	}
	int ifindex = if_nametoindex(argv[3]);
	if (!ifindex)
		die(argv[3], errno);
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
	int err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST)
		die("clsact", err);
	/* priority 2: behind a background-loss dropper (priority 1) on the same hook */
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 2, .priority = 2, .prog_fd = bpf_program__fd(prog));
	err = bpf_tc_attach(&hook, &opts);
	if (err)
		die("tc attach", err);
	printf("{\"prog_id\":%u}\n", opts.prog_id);
	return 0;
}

static int cmd_testrun(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: tevbpf testrun OBJ SEED THRESHOLD N\n");
		return 2;
	}
	uint32_t seed = (uint32_t)strtoul(argv[3], NULL, 0);
	uint64_t threshold = strtoull(argv[4], NULL, 0);
	long n = strtol(argv[5], NULL, 0);
	struct bpf_object *obj = open_load(argv[2]);
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, "tev_dropper_test");
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "tev_drop_regs");
	if (!prog || !map)
		die("object lacks tev_dropper_test/tev_drop_regs", ENOENT);
	int mfd = bpf_map__fd(map);
	struct drop_regs r = {};
	/* Program the registers through the same write path the runs use. */
	reg_write(&r, 0x04, (uint32_t)threshold);
	reg_write(&r, 0x08, (uint32_t)(threshold >> 32));
	reg_write(&r, 0x0C, seed);
	reg_write(&r, 0x00, 1u | 2u | 4u);
	update(mfd, &r);

	unsigned char pkt[64] = {0};
	pkt[12] = 0x08; /* ethertype IPv4 */
	pkt[14] = 0x45;
	LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = 1);
	printf("{\"drops\":[");
	int first = 1;
	for (long i = 0; i < n; i++) {
		int err = bpf_prog_test_run_opts(bpf_program__fd(prog), &topts);
		if (err)
			die("test_run", errno);
		if (topts.retval == 2 /* TC_ACT_SHOT */) {
			printf(first ? "%ld" : ",%ld", i);
			first = 0;
		}
	}
	lookup(mfd, &r);
	printf("],\"regs\":");
	print_regs(&r);
	printf("}\n");
	return 0;
}

static int cmd_marktest(int argc, char **argv)
{
	unsigned char in[2048], out[2048];
	if (argc < 4) {
		fprintf(stderr, "usage: tevbpf marktest OBJ HEXFRAME ... (at most %zu bytes each)\n", sizeof(in));
		return 2;
	}
	struct bpf_object *obj = open_load(argv[2]);
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, "tev_mark_test");
	if (!prog)
		die("object lacks tev_mark_test", ENOENT);
	int rc = 0;
	for (int a = 3; a < argc; a++) {
		size_t n = 0;
		if (strlen(argv[a]) % 2 || strlen(argv[a]) / 2 > sizeof(in)) {
			fprintf(stderr, "tevbpf marktest: frame %d: odd length or over %zu bytes\n", a - 2, sizeof(in));
			return 2;
		}
		for (const char *h = argv[a]; *h; h += 2) {
			unsigned v;
			if (sscanf(h, "%2x", &v) != 1)
				die("bad hex frame", EINVAL);
			in[n++] = (unsigned char)v;
		}
		/* the frames share the program's map, so they take the mark's turns in order */
		LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = in, .data_size_in = (uint32_t)n,
			    .data_out = out, .data_size_out = sizeof(out), .repeat = 1);
		if (bpf_prog_test_run_opts(bpf_program__fd(prog), &topts))
			die("test_run", errno);
		for (uint32_t i = 0; i < topts.data_size_out; i++)
			printf("%02x", out[i]);
		printf("\n");
		rc |= topts.retval != 0;
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: tevbpf attach|write|read|testrun ...\n");
		return 2;
	}
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	if (!strcmp(argv[1], "attach"))
		return cmd_attach(argc, argv);
	if (!strcmp(argv[1], "testrun"))
		return cmd_testrun(argc, argv);
	if (!strcmp(argv[1], "fwd"))
		return cmd_fwd(argc, argv);
	if (!strcmp(argv[1], "marktest"))
		return cmd_marktest(argc, argv);
	if (!strcmp(argv[1], "read") && argc == 3) {
		struct drop_regs r;
		lookup(map_fd_by_id(argv[2]), &r);
		print_regs(&r);
		return 0;
	}
	if (!strcmp(argv[1], "read") && argc == 4) {
		/* The NetFPGA register view of the map: the testbed backend drives this
		 * exactly as it drives rdaxi on a card. */
		struct drop_regs r;
		unsigned off = (unsigned)strtoul(argv[3], NULL, 0);
		const uint32_t *words = &r.control;
		lookup(map_fd_by_id(argv[2]), &r);
		if (off > 0x1C || off % 4) {
			fprintf(stderr, "tevbpf: no register at 0x%02X\n", off);
			return 2;
		}
		printf("0x%02x = 0x%08x\n", off, words[off / 4]);
		return 0;
	}
	if (!strcmp(argv[1], "write") && argc == 5) {
		int fd = map_fd_by_id(argv[2]);
		struct drop_regs r;
		lookup(fd, &r);
		reg_write(&r, (unsigned)strtoul(argv[3], NULL, 0),
			  (uint32_t)strtoul(argv[4], NULL, 0));
		update(fd, &r);
		return 0;
	}
	fprintf(stderr, "tevbpf: unknown command or arguments\n");
	return 2;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * tevcc-lossprobe OBJECT DADDR DPORT
 *
 * Loads lossprobe.bpf.o for the flow to DADDR:DPORT, prints "ready", then one line
 * per congestion-state change of that flow:
 *   ev T_NS OLD NEW CWND PRIOR_CWND SSTHRESH PRIOR_SSTHRESH TOTAL_RETRANS P0 P1 P2 P3 CA
 * (P0..P3: the first four u32 of the algorithm's private area), and after stdin
 * reaches EOF "misses N" (runs the kernel skipped: tracing programs do not nest on
 * a CPU) and "end". The program is attached through a link owned by this process, so it
 * goes away with the process whatever happens. Test instrumentation (tests/cc).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

struct lossprobe_event {
	unsigned long long t_ns;
	unsigned int old_state, new_state, snd_cwnd, prior_cwnd, snd_ssthresh,
		prior_ssthresh, total_retrans, ca_priv[4];
	char ca_name[16];
};

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int on_event(void *ctx, void *data, size_t len)
{
	const struct lossprobe_event *e = data;

	(void)ctx;
	if (len < sizeof(*e))
		return 0;
	printf("ev %llu %u %u %u %u %u %u %u %u %u %u %u %.16s\n", e->t_ns, e->old_state,
	       e->new_state, e->snd_cwnd, e->prior_cwnd, e->snd_ssthresh, e->prior_ssthresh,
	       e->total_retrans, e->ca_priv[0], e->ca_priv[1], e->ca_priv[2], e->ca_priv[3],
	       e->ca_name[0] ? e->ca_name : "-");
	return 0;
}

/* Set a const volatile global in .rodata before load. */
static int set_rodata(struct bpf_object *obj, const char *var_name, const void *val, size_t n)
{
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *vsi;
	const struct btf_type *sec;
	struct bpf_map *map, *rodata = NULL;
	size_t size;
	char *data;
	int id, i;

	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		size_t len = strlen(name);

		if (len >= 7 && !strcmp(name + len - 7, ".rodata"))
			rodata = map;
	}
	id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;
	if (!rodata || id < 0)
		return -1;
	sec = btf__type_by_id(btf, id);
	vsi = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vsi++) {
		const struct btf_type *var = btf__type_by_id(btf, vsi->type);

		if (strcmp(btf__name_by_offset(btf, var->name_off), var_name))
			continue;
		data = (char *)bpf_map__initial_value(rodata, &size);
		if (!data || vsi->offset + n > size)
			return -1;
		memcpy(data + vsi->offset, val, n);
		return 0;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_link *link;
	struct ring_buffer *rb;
	struct in_addr addr;
	unsigned short dport;
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	char buf[64];
	int err;

	if (argc != 4 || inet_pton(AF_INET, argv[2], &addr) != 1 || atoi(argv[3]) <= 0 ||
	    atoi(argv[3]) > 65535) {
		fprintf(stderr, "usage: %s OBJECT IPV4_DADDR DPORT\n", argv[0]);
		return 2;
	}
	dport = (unsigned short)atoi(argv[3]);
	libbpf_set_print(libbpf_print);
	signal(SIGPIPE, SIG_IGN);

	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "tevcc-lossprobe: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (set_rodata(obj, "filter_daddr", &addr.s_addr, 4) ||
	    set_rodata(obj, "filter_dport", &dport, 2)) {
		fprintf(stderr, "tevcc-lossprobe: cannot set the flow filter\n");
		return 1;
	}
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "tevcc-lossprobe: load failed: %s\n", strerror(-err));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "lossprobe_set_state");
	link = prog ? bpf_program__attach(prog) : NULL;
	if (!link) {
		fprintf(stderr, "tevcc-lossprobe: attach failed: %s\n", strerror(errno));
		return 1;
	}
	rb = ring_buffer__new(bpf_map__fd(bpf_object__find_map_by_name(obj, "events")),
			      on_event, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "tevcc-lossprobe: ring buffer: %s\n", strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ring_buffer__poll(rb, 50);
		fflush(stdout);
		if (poll(&pfd, 1, 0) > 0) {
			ssize_t n = read(0, buf, sizeof(buf));

			if (n <= 0)
				break;
		}
	}
	bpf_link__destroy(link); /* no new events; then drain what is queued */
	ring_buffer__consume(rb);
	{
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			info.recursion_misses = -1ULL;
		printf("misses %lld\n", (long long)info.recursion_misses);
	}
	printf("end\n");
	fflush(stdout);
	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}

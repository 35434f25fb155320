// SPDX-License-Identifier: GPL-2.0
/*
 * tevcc-loader OBJECT [HZ [DILATION [NAME=VALUE...]]]
 * tevcc-loader OBJECT -        (a user's own object: nothing rewritten)
 *
 * NAME=VALUE sets an algorithm's load-time parameter (CC_LOAD_PARAM in cc/include/cc316.h:
 * the read-only datum cc_lp_NAME; nv_tev's base_rtt_us), an unsigned 32-bit integer.
 *
 * Registers the tcp_congestion_ops in a BPF struct_ops OBJECT through a BPF link,
 * after setting its emulated HZ (read-only datum cc_hz), prints
 *     ready <name> <map_id> <link_id> <bss_map_id>
 * on stdout (the .bss map holds the port's guard counters, cc316_guard_stats) and keeps the registration until stdin reaches EOF or SIGINT/SIGTERM
 * arrives. Registration is owned by the link fd: if this process dies for any
 * reason, the kernel unregisters the algorithm.
 *
 * libbpf 1.1 predates ".struct_ops.link", so the link is made by hand: the map is
 * created with BPF_F_LINK, libbpf fills its value, and BPF_LINK_CREATE registers it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

/* uapi values of kernels >= 6.4, absent from the 6.1 headers Debian 12 ships */
#define TEVCC_F_LINK (1U << 13)
#define TEVCC_ATTACH_STRUCT_OPS 44

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Write a u32 into the object's .rodata at the offset BTF gives for `var_name`
 * (cc_hz, cc_dilation, cc_lp_NAME). */
static int set_rodata_u32(struct bpf_object *obj, const char *var_name, unsigned int value)
{
	const struct btf_var_secinfo *vsi;
	const struct btf_type *sec;
	struct bpf_map *map, *rodata = NULL;
	struct btf *btf = bpf_object__btf(obj);
	size_t size;
	char *data;
	int id, i;

	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		size_t n = strlen(name);

		if (n >= 7 && !strcmp(name + n - 7, ".rodata"))
			rodata = map;
	}
	if (!btf || !rodata) {
		fprintf(stderr, "tevcc-loader: object has no .rodata with %s\n", var_name);
		return -1;
	}
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id < 0) {
		fprintf(stderr, "tevcc-loader: no .rodata section in BTF\n");
		return -1;
	}
	sec = btf__type_by_id(btf, id);
	vsi = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, vsi++) {
		const struct btf_type *var = btf__type_by_id(btf, vsi->type);

		if (strcmp(btf__name_by_offset(btf, var->name_off), var_name))
			continue;
		data = (char *)bpf_map__initial_value(rodata, &size);
		if (!data || vsi->offset + sizeof(__u32) > size)
			return -1;
		memcpy(data + vsi->offset, &(__u32){ value }, sizeof(__u32));
		return 0;
	}
	fprintf(stderr, "tevcc-loader: %s not found in .rodata\n", var_name);
	return -1;
}

int main(int argc, char **argv)
{
	struct bpf_map_info map_info = {}, bss_info = {};
	struct bpf_link_info link_info = {};
	__u32 info_len;
	struct bpf_object *obj;
	struct bpf_map *map, *ops = NULL, *bss = NULL;
	struct bpf_link *filler;
	struct sigaction sa = {};
	unsigned long hz = 250, dilation = 1;
	int link_fd, err;
	char buf[64];
	int foreign = argc == 3 && !strcmp(argv[2], "-");

	if (argc < 2 || (foreign && argc > 3)) {
		fprintf(stderr, "usage: %s OBJECT [HZ [DILATION [NAME=VALUE...]]]\n", argv[0]);
		return 2;
	}
	if (argc >= 3 && !foreign) {
		char *end;

		hz = strtoul(argv[2], &end, 10);
		if (*end || hz < 1 || hz > 100000) {
			fprintf(stderr, "tevcc-loader: HZ must be an integer in [1, 100000], got '%s'\n", argv[2]);
			return 2;
		}
	}
	if (argc >= 4) {
		char *end;

		dilation = strtoul(argv[3], &end, 10);
		if (*end || dilation < 1 || dilation > 1000) {
			fprintf(stderr, "tevcc-loader: DILATION must be an integer in [1, 1000], got '%s'\n", argv[3]);
			return 2;
		}
	}
	libbpf_set_print(libbpf_print);

	/* Signals end the wait below; no SA_RESTART so read() returns EINTR. */
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "tevcc-loader: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* a user's object has no emulated clock to set */
	if (!foreign && (set_rodata_u32(obj, "cc_hz", (unsigned int)hz) ||
			 set_rodata_u32(obj, "cc_dilation", (unsigned int)dilation)))
		return 1;
	for (int i = 4; !foreign && i < argc; i++) {
		char var[64], *eq = strchr(argv[i], '='), *end;
		unsigned long v;

		if (!eq || eq == argv[i] || eq - argv[i] > 48) {
			fprintf(stderr, "tevcc-loader: expected NAME=VALUE, got '%s'\n", argv[i]);
			return 2;
		}
		v = strtoul(eq + 1, &end, 10);
		if (!eq[1] || *end || v > 0xffffffffUL) {
			fprintf(stderr, "tevcc-loader: %s: VALUE must be an unsigned 32-bit integer\n", argv[i]);
			return 2;
		}
		snprintf(var, sizeof(var), "cc_lp_%.*s", (int)(eq - argv[i]), argv[i]);
		if (set_rodata_u32(obj, var, (unsigned int)v))
			return 1;
	}
	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		size_t n = strlen(name);

		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS)
			ops = map;
		else if (n >= 4 && !strcmp(name + n - 4, ".bss"))
			bss = map;
	}
	if (!ops) {
		fprintf(stderr, "tevcc-loader: %s has no struct_ops map\n", argv[1]);
		return 1;
	}
	bpf_map__set_map_flags(ops, bpf_map__map_flags(ops) | TEVCC_F_LINK);
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "tevcc-loader: loading %s failed: %s\n", argv[1], strerror(-err));
		return 1;
	}
	/* Fills the map value (no registration for a BPF_F_LINK map). */
	filler = bpf_map__attach_struct_ops(ops);
	if (!filler) {
		fprintf(stderr, "tevcc-loader: filling the struct_ops map failed: %s\n", strerror(errno));
		return 1;
	}
	link_fd = bpf_link_create(bpf_map__fd(ops), 0, TEVCC_ATTACH_STRUCT_OPS, NULL);
	if (link_fd < 0) {
		fprintf(stderr, "tevcc-loader: registering %s failed: %s\n", bpf_map__name(ops),
			strerror(errno));
		return errno == EEXIST ? 3 : 1;
	}
	info_len = sizeof(map_info);
	bpf_obj_get_info_by_fd(bpf_map__fd(ops), &map_info, &info_len);
	info_len = sizeof(link_info);
	bpf_obj_get_info_by_fd(link_fd, &link_info, &info_len);
	if (bss) {
		info_len = sizeof(bss_info);
		bpf_obj_get_info_by_fd(bpf_map__fd(bss), &bss_info, &info_len);
	}
	printf("ready %s %u %u %u\n", bpf_map__name(ops), map_info.id, link_info.id, bss_info.id);
	fflush(stdout);

	while (!stop) {
		ssize_t n = read(0, buf, sizeof(buf));

		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	/* Detach unregisters now; closing drops the last reference. */
	bpf_link_detach(link_fd);
	close(link_fd);
	bpf_object__close(obj);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * tevrpc: request/response (RPC) traffic over one persistent TCP connection (IPv4), to
 * measure RPC latencies beside the bulk flows in the emulated backend's namespaces.
 *
 *   tevrpc serve --port P --out FILE.json [--cc NAME] [--interval S]
 *   tevrpc call  --connect IP:PORT --request B --response B --duration S --out FILE.json
 *                [--rate R] [--interval S] [--cc NAME] [--connect-timeout-ms N] [--grace S]
 *
 * Wire protocol. A request is an 8-byte header -- u32 big-endian request_len (the whole
 * request, header included, >= 8) and u32 big-endian response_len (>= 1) -- followed by
 * request_len - 8 payload bytes of any content. The server reads the whole request, then
 * writes response_len bytes. Requests may be pipelined and are answered in order, so the
 * client needs no ids: RPC i is complete once (i + 1) * response_len bytes have arrived.
 *
 * serve: listens on 0.0.0.0:P, accepts exactly one connection and answers it until the
 * client closes it (EOF), then writes FILE.json and exits 0 (also on SIGINT/SIGTERM, with
 * what it has). Every S seconds after accept (default 0.1) it samples the connection's
 * TCP_INFO: the sender's window, RTT, retransmissions and acknowledged bytes, which only
 * the responding side knows. A sample at k*S is taken when the loop first sees k*S pass;
 * a late loop (a stalled host) fills the ticks it missed with that one reading, so the
 * list stays one entry per tick and lines up with the client's intervals by position.
 *
 * call: connects (refused connections retried every 20 ms up to the timeout: the server
 * may not be listening yet), then, from t = 0 at the connection's establishment, runs
 *   - closed loop (no --rate): one RPC at a time; latency = completion - first byte written;
 *   - open loop (--rate R): RPC i is due at t_i = i / R whatever happened before it; its
 *     request joins the send queue once t_i has passed, and its latency is completion - t_i,
 *     so an RPC stuck behind slow ones counts its wait (no coordinated omission).
 * No RPC is started at or after --duration; the outstanding ones get --grace seconds
 * (default 10), then the connection is shut down and FILE.json written. It also counts the
 * response bytes received per interval (intervals end at k*S; the last, partial, at the
 * measurement's true end).
 *
 * Both outputs are JSON (see write_server_json and write_call_json), written to FILE.tmp,
 * fsync'ed and renamed, so a reader never sees half a file.
 *
 * Exit status: 0 done (also after SIGINT/SIGTERM, and for the server after the client's
 * reset: a client that gave up waiting closes with responses unread); 1 a system call
 * failed, or the connection ended otherwise -- the server closed it early (call,
 * stopped_by "peer_closed") or an error other than a reset (serve, stopped_by "error"),
 * the output written either way; 2 bad arguments, a congestion control that cannot be
 * set, no connection; 3 (serve) a malformed request header.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/tcp.h> /* the full struct tcp_info (bytes_acked, min_rtt), TCP_CONGESTION */
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define HEADER_BYTES 8
#define CC_NAME_MAX 16 /* the kernel's TCP_CA_NAME_MAX */
#define IO_CHUNK (256 * 1024) /* bytes per read/write call: few system calls, little memory */
#define IOV_BATCH 512 /* iovecs per writev: a batch of small pipelined requests in one call */
#define QUEUE_SLOTS 65536 /* requests read but not yet answered; more waits in the socket */
#define RETRY_NS (20 * 1000000LL) /* between connection attempts refused */
#define DRAIN_NS (500 * 1000000LL) /* after our shutdown, how long to wait for the peer's EOF */
#define NO_DEADLINE INT64_MAX

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }
/* The mask while waiting: SIGINT/SIGTERM are blocked everywhere else and delivered only
 * inside ppoll, so a signal can never slip in between checking the flag and sleeping. */
static sigset_t wait_mask;
/* The output's temporary file once opened: removed on a failure exit, so a failed run
 * leaves no file behind. */
static const char *tmp_to_remove;

static void cleanup(void)
{
	if (tmp_to_remove)
		unlink(tmp_to_remove);
}

static void die(const char *what)
{
	fprintf(stderr, "tevrpc: %s: %s\n", what, strerror(errno));
	cleanup();
	exit(1);
}

static void __attribute__((format(printf, 2, 3))) fail(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("tevrpc: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cleanup();
	exit(status);
}

static int64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static int64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: ppoll returns */
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a peer gone is an EPIPE to handle, not a death */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &wait_mask);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
}

/* Waits for the fds or until deadline (CLOCK_MONOTONIC ns) or a signal; revents are
 * cleared when it returns without events. */
static void wait_until(struct pollfd *fds, nfds_t n, int64_t deadline)
{
	struct timespec ts, *timeout = NULL;

	if (deadline != NO_DEADLINE) {
		int64_t left = deadline - mono_ns();

		if (left < 0)
			left = 0;
		ts.tv_sec = left / NS;
		ts.tv_nsec = left % NS;
		timeout = &ts;
	}
	if (ppoll(fds, n, timeout, &wait_mask) < 0) {
		if (errno != EINTR)
			die("ppoll");
		for (nfds_t i = 0; i < n; i++)
			fds[i].revents = 0;
	}
}

/* array (elements of size) grown to hold at least need elements, doubling */
static void *reserve(void *array, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 1024;

	if (need <= *cap)
		return array;
	while (n < need)
		n *= 2;
	array = realloc(array, n * size);
	if (!array)
		die("memory");
	*cap = n;
	return array;
}

/* ---- arguments ---- */

static const char *option_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		fail(2, "%s needs a value", argv[*i]);
	return argv[++*i];
}

static uint64_t parse_count(const char *option, const char *text)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (!*text || *end || errno || text[strspn(text, " \t")] == '-')
		fail(2, "%s must be a non-negative integer, got '%s'", option, text);
	return v;
}

static double parse_seconds(const char *option, const char *text)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (!*text || *end || errno || v != v || v > 1e9 || v < -1e9)
		fail(2, "%s must be a number, got '%s'", option, text);
	return v;
}

static int64_t seconds_to_ns(double s) { return (int64_t)(s * 1e9 + 0.5); }

static int64_t parse_interval(const char *text)
{
	double s = parse_seconds("--interval", text);

	/* a list entry per interval: finer than a millisecond is no longer a time series */
	if (s < 0.001)
		fail(2, "--interval must be at least 0.001 s, got %s", text);
	return seconds_to_ns(s);
}

static const char *parse_cc(const char *text)
{
	if (!*text || strlen(text) >= CC_NAME_MAX)
		fail(2, "--cc must be a congestion control name of 1-%d characters, got '%s'",
		     CC_NAME_MAX - 1, text);
	return text;
}

/* ---- sockets ---- */

static void set_int_option(int fd, int level, int name, int value, const char *what)
{
	if (setsockopt(fd, level, name, &value, sizeof(value)))
		die(what);
}

static void set_cc(int fd, const char *cc)
{
	const char *hint = "";

	if (!setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)))
		return;
	if (errno == ENOENT)
		hint = " (not in /proc/sys/net/ipv4/tcp_available_congestion_control: module not loaded?)";
	else if (errno == EPERM)
		hint = " (not in /proc/sys/net/ipv4/tcp_allowed_congestion_control)";
	fail(2, "--cc %s: cannot set congestion control '%s': %s%s", cc, cc, strerror(errno), hint);
}

/* The algorithm the kernel actually runs on fd, into name[CC_NAME_MAX + 1]; NULL if unknown. */
static const char *read_cc(int fd, char *name)
{
	socklen_t len = CC_NAME_MAX;

	memset(name, 0, CC_NAME_MAX + 1);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len))
		return NULL;
	return name;
}

static int read_tcp_info(int fd, struct tcp_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info)); /* an older kernel fills less */
	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len);
}

/* ---- output ---- */

/* The output's temporary file, opened before the run so a bad path fails at once. */
static FILE *open_output(const char *path, char **tmp)
{
	FILE *f;

	if (asprintf(tmp, "%s.tmp", path) < 0)
		die("memory");
	f = fopen(*tmp, "w");
	if (!f)
		fail(2, "--out %s: cannot create %s: %s", path, *tmp, strerror(errno));
	tmp_to_remove = *tmp;
	setvbuf(f, NULL, _IOFBF, 1 << 20); /* hundreds of thousands of values: few writes */
	return f;
}

static void commit_output(FILE *f, const char *tmp, const char *path)
{
	if (fflush(f) || ferror(f) || fsync(fileno(f)))
		die(tmp);
	if (fclose(f))
		die(tmp);
	if (rename(tmp, path))
		die(path);
	tmp_to_remove = NULL;
}

static void json_string(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* the shortest of %.15g and %.17g that reads back as v: 0.1 stays 0.1 */
static void json_number(FILE *f, double v)
{
	char text[32];

	snprintf(text, sizeof(text), "%.15g", v);
	if (strtod(text, NULL) != v)
		snprintf(text, sizeof(text), "%.17g", v);
	fputs(text, f);
}

/* ns as seconds with 6 decimals (microseconds), exactly: no binary fraction in between;
 * truncated, not rounded, so a time before a bound (an RPC started 0.4 us before the
 * duration's end) never prints at it */
static void json_seconds(FILE *f, int64_t ns)
{
	int64_t us = ns / 1000;

	fprintf(f, "%s%" PRId64 ".%06" PRId64, us < 0 ? "-" : "", (us < 0 ? -us : us) / 1000000,
		(us < 0 ? -us : us) % 1000000);
}

/* ns as microseconds with 3 decimals, exactly */
static void json_micros(FILE *f, int64_t ns)
{
	int64_t a = ns < 0 ? -ns : ns;

	fprintf(f, "%s%" PRId64 ".%03" PRId64, ns < 0 ? "-" : "", a / 1000, a % 1000);
}

/* ---- serve ---- */

struct sample {
	int64_t t_ns; /* nominal: k * interval after accept */
	uint64_t cwnd_bytes, bytes_acked;
	uint32_t rtt_us, total_retrans;
};

struct server {
	int port;
	const char *out, *cc;
	int64_t interval_ns;
	int connected;
	double accepted_at_unix;
	const char *cc_verified;
	char cc_name[CC_NAME_MAX + 1];
	uint64_t rpcs, bytes_sent;
	struct sample *samples;
	size_t n_samples, cap_samples;
	int64_t next_tick; /* the next sample's k */
	struct tcp_info end;
	const char *stopped_by;
};

/* Requests read but not yet answered, in order: their response sizes. */
struct response_queue {
	uint32_t len[QUEUE_SLOTS];
	size_t head, count;
	uint64_t head_written; /* bytes of the head's response already written */
	uint64_t owed; /* response bytes still to write, all queued requests together */
};

static void push_response(struct response_queue *q, uint32_t len)
{
	q->len[(q->head + q->count) % QUEUE_SLOTS] = len;
	q->count++;
	q->owed += len;
}

/* Records written response bytes; returns how many responses they completed. */
static uint64_t responses_written(struct response_queue *q, uint64_t n)
{
	uint64_t done = 0;

	q->owed -= n;
	while (n > 0) {
		uint64_t take = q->len[q->head] - q->head_written;

		if (take > n)
			take = n;
		q->head_written += take;
		n -= take;
		if (q->head_written == q->len[q->head]) {
			q->head = (q->head + 1) % QUEUE_SLOTS;
			q->count--;
			q->head_written = 0;
			done++;
		}
	}
	return done;
}

/* The request stream's parser: where in the current request the bytes read so far end. */
struct request_parser {
	unsigned char header[HEADER_BYTES];
	unsigned have; /* header bytes of the current request seen */
	uint32_t response_len;
	uint64_t payload_left;
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Consumes n bytes of the stream, queueing a response for each request read whole. */
static void parse_requests(struct request_parser *r, struct response_queue *q,
			   const unsigned char *buf, size_t n)
{
	size_t p = 0;

	while (p < n) {
		if (r->have < HEADER_BYTES) {
			size_t take = HEADER_BYTES - r->have;

			if (take > n - p)
				take = n - p;
			memcpy(r->header + r->have, buf + p, take);
			r->have += take;
			p += take;
			if (r->have < HEADER_BYTES)
				break;
			uint32_t request_len = be32(r->header);

			r->response_len = be32(r->header + 4);
			if (request_len < HEADER_BYTES)
				fail(3, "malformed request: request_len %" PRIu32
				     " is less than %d (the header itself)", request_len, HEADER_BYTES);
			if (r->response_len == 0)
				fail(3, "malformed request: response_len is 0 (must be at least 1)");
			r->payload_left = request_len - HEADER_BYTES;
		} else {
			size_t take = r->payload_left < n - p ? r->payload_left : n - p;

			r->payload_left -= take;
			p += take;
		}
		if (r->payload_left == 0) { /* read whole: answer it */
			push_response(q, r->response_len);
			r->have = 0;
		}
	}
}

static void take_samples(struct server *s, int fd, int64_t since_accept)
{
	int64_t *next_tick = &s->next_tick;
	struct tcp_info info;
	struct sample now;

	if (since_accept < *next_tick * s->interval_ns)
		return;
	if (read_tcp_info(fd, &info))
		die("getsockopt TCP_INFO");
	now.cwnd_bytes = (uint64_t)info.tcpi_snd_cwnd * info.tcpi_snd_mss;
	now.bytes_acked = info.tcpi_bytes_acked;
	now.rtt_us = info.tcpi_rtt;
	now.total_retrans = info.tcpi_total_retrans;
	/* one entry per tick, the missed ones (a stall) with this same late reading */
	for (; *next_tick * s->interval_ns <= since_accept; ++*next_tick) {
		s->samples = reserve(s->samples, &s->cap_samples, s->n_samples + 1, sizeof(*s->samples));
		now.t_ns = *next_tick * s->interval_ns;
		s->samples[s->n_samples++] = now;
	}
}

/* The connection's end by an error: a reset (the client closed with responses unread:
 * it gave up waiting) is one of its normal ends, anything else is not. */
static void connection_failed(struct server *s, const char *call)
{
	fprintf(stderr, "tevrpc: %s on the connection: %s\n", call, strerror(errno));
	s->stopped_by = errno == ECONNRESET || errno == EPIPE ? "reset" : "error";
}

/* Answers the one connection until EOF, an error or a signal. */
static void serve_connection(struct server *s, int fd, int64_t accepted)
{
	static unsigned char inbuf[IO_CHUNK];
	static const unsigned char zeros[IO_CHUNK]; /* every response's content */
	static struct response_queue queue;
	struct request_parser parser = { .have = 0 };

	for (;;) {
		int64_t now = mono_ns();
		struct pollfd pfd = { .fd = fd };

		take_samples(s, fd, now - accepted);
		if (stop_signal) {
			s->stopped_by = "signal";
			return;
		}
		/* a full queue stops the reading: the client's requests then wait in TCP */
		if (QUEUE_SLOTS - queue.count >= 2)
			pfd.events |= POLLIN;
		if (queue.owed)
			pfd.events |= POLLOUT;
		wait_until(&pfd, 1, accepted + s->next_tick * s->interval_ns);

		if ((pfd.events & POLLIN) && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
			/* each request is at least 8 bytes, so a read this size completes at most
			 * free - 1 of them: the queue cannot overflow */
			size_t room = (QUEUE_SLOTS - queue.count - 1) * HEADER_BYTES;
			ssize_t n = read(fd, inbuf, room < sizeof(inbuf) ? room : sizeof(inbuf));

			if (n == 0) {
				s->stopped_by = "eof";
				return;
			}
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				connection_failed(s, "read");
				return;
			}
			if (n > 0)
				parse_requests(&parser, &queue, inbuf, (size_t)n);
		}
		while (queue.owed) {
			size_t chunk = queue.owed < sizeof(zeros) ? queue.owed : sizeof(zeros);
			ssize_t n = write(fd, zeros, chunk);

			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (n < 0) {
				connection_failed(s, "write");
				return;
			}
			s->bytes_sent += (uint64_t)n;
			s->rpcs += responses_written(&queue, (uint64_t)n);
			if ((size_t)n < chunk)
				break; /* the socket buffer is full */
		}
	}
}

/*
 * {"tool": "tevrpc", "version": 1, "role": "server", "port": P, "cc_requested": NAME|null,
 *  "cc_verified": NAME|null, "accepted_at_unix": float|null, "rpcs": responses written,
 *  "bytes_sent": response bytes written, "stopped_by": "eof"|"reset"|"error"|"signal",
 *  "intervals": {"t_s", "cwnd_bytes", "rtt_us", "total_retrans" (cumulative),
 *                "bytes_acked" (cumulative)},
 *  "end": {"total_retrans", "min_rtt_us", "rtt_us", "cwnd_bytes", "bytes_acked",
 *          "ecn" (the connection negotiated ECN: tcpi_options)}}
 * Without a connection (a signal before accept) the end's values are null.
 */
static void write_server_json(FILE *f, const struct server *s)
{
	size_t i;

	fprintf(f, "{\"tool\":\"tevrpc\",\"version\":1,\"role\":\"server\",\"port\":%d,\"cc_requested\":",
		s->port);
	json_string(f, s->cc);
	fputs(",\"cc_verified\":", f);
	json_string(f, s->cc_verified);
	if (s->connected)
		fprintf(f, ",\"accepted_at_unix\":%.6f", s->accepted_at_unix);
	else
		fputs(",\"accepted_at_unix\":null", f);
	fprintf(f, ",\"rpcs\":%" PRIu64 ",\"bytes_sent\":%" PRIu64 ",\"stopped_by\":", s->rpcs,
		s->bytes_sent);
	json_string(f, s->stopped_by);
	fputs(",\"intervals\":{\"t_s\":[", f);
	for (i = 0; i < s->n_samples; i++) {
		fputs(i ? "," : "", f);
		json_seconds(f, s->samples[i].t_ns);
	}
	fputs("],\"cwnd_bytes\":[", f);
	for (i = 0; i < s->n_samples; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", s->samples[i].cwnd_bytes);
	fputs("],\"rtt_us\":[", f);
	for (i = 0; i < s->n_samples; i++)
		fprintf(f, "%s%" PRIu32, i ? "," : "", s->samples[i].rtt_us);
	fputs("],\"total_retrans\":[", f);
	for (i = 0; i < s->n_samples; i++)
		fprintf(f, "%s%" PRIu32, i ? "," : "", s->samples[i].total_retrans);
	fputs("],\"bytes_acked\":[", f);
	for (i = 0; i < s->n_samples; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", s->samples[i].bytes_acked);
	fputs("]},\"end\":", f);
	if (s->connected)
		fprintf(f, "{\"total_retrans\":%" PRIu32 ",\"min_rtt_us\":%" PRIu32 ",\"rtt_us\":%" PRIu32
			",\"cwnd_bytes\":%" PRIu64 ",\"bytes_acked\":%" PRIu64 ",\"ecn\":%s}",
			s->end.tcpi_total_retrans, s->end.tcpi_min_rtt, s->end.tcpi_rtt,
			(uint64_t)s->end.tcpi_snd_cwnd * s->end.tcpi_snd_mss,
			(uint64_t)s->end.tcpi_bytes_acked,
			s->end.tcpi_options & TCPI_OPT_ECN ? "true" : "false");
	else
		fputs("{\"total_retrans\":null,\"min_rtt_us\":null,\"rtt_us\":null,"
		      "\"cwnd_bytes\":null,\"bytes_acked\":null,\"ecn\":null}", f);
	fputs("}\n", f);
}

static int serve(int argc, char **argv)
{
	struct server s = { .port = -1, .interval_ns = NS / 10, .next_tick = 1, .stopped_by = "signal" };
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	int listener, fd = -1;
	int64_t accepted = 0;
	char *tmp;
	FILE *out;

	for (int i = 2; i < argc; i++) {
		const char *opt = argv[i];

		if (!strcmp(opt, "--port")) {
			uint64_t port = parse_count(opt, option_value(argc, argv, &i));

			if (port < 1 || port > 65535)
				fail(2, "--port must be 1-65535, got %" PRIu64, port);
			s.port = (int)port;
		} else if (!strcmp(opt, "--out")) {
			s.out = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--cc")) {
			s.cc = parse_cc(option_value(argc, argv, &i));
		} else if (!strcmp(opt, "--interval")) {
			s.interval_ns = parse_interval(option_value(argc, argv, &i));
		} else {
			fail(2, "serve: unknown option '%s' (usage: tevrpc serve --port P --out FILE.json "
			     "[--cc NAME] [--interval S])", opt);
		}
	}
	if (s.port < 0)
		fail(2, "serve: --port is required");
	if (!s.out)
		fail(2, "serve: --out is required");

	listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listener < 0)
		die("socket");
	set_int_option(listener, SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt SO_REUSEADDR");
	/* on the listener too: the handshake's own state (initial window) is the algorithm's */
	if (s.cc)
		set_cc(listener, s.cc);
	addr.sin_port = htons((uint16_t)s.port);
	if (bind(listener, (struct sockaddr *)&addr, sizeof(addr)) || listen(listener, 1))
		fail(2, "--port %d: cannot listen on 0.0.0.0:%d: %s", s.port, s.port, strerror(errno));
	out = open_output(s.out, &tmp);

	while (!stop_signal) {
		struct pollfd pfd = { .fd = listener, .events = POLLIN };

		wait_until(&pfd, 1, NO_DEADLINE);
		if (!(pfd.revents & POLLIN))
			continue;
		fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			die("accept");
	}
	close(listener); /* exactly one connection */
	if (fd >= 0) {
		accepted = mono_ns();
		s.accepted_at_unix = (double)clock_ns(CLOCK_REALTIME) / 1e9;
		s.connected = 1;
		set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt TCP_NODELAY");
		if (s.cc)
			set_cc(fd, s.cc);
		s.cc_verified = read_cc(fd, s.cc_name);
		serve_connection(&s, fd, accepted);
		take_samples(&s, fd, mono_ns() - accepted); /* the ticks up to the end, after a stall too */
		if (read_tcp_info(fd, &s.end))
			die("getsockopt TCP_INFO");
		close(fd);
	}
	write_server_json(out, &s);
	commit_output(out, tmp, s.out);
	return strcmp(s.stopped_by, "error") ? 0 : 1;
}

/* ---- call ---- */

struct client {
	const char *connect, *out, *cc;
	struct sockaddr_in addr;
	uint64_t request_len, response_len;
	double rate; /* RPCs per second; 0: closed loop */
	double duration_s, interval_s;
	int64_t duration_ns, interval_ns, grace_ns, connect_timeout_ms;

	int connected;
	int64_t t0; /* CLOCK_MONOTONIC at establishment */
	double connected_at_unix;
	const char *cc_verified;
	char cc_name[CC_NAME_MAX + 1];
	uint64_t issued, completed, bytes_received;
	int64_t *start_ns, *latency_ns; /* per RPC, since t0: [issued], [completed] */
	size_t cap_start, cap_latency;
	uint64_t *interval_bytes; /* closed intervals: the k-th ends at (k + 1) * interval */
	size_t n_intervals, cap_intervals;
	uint64_t open_interval_bytes;
	int64_t end_ns; /* the measurement's end, since t0: the last interval's true end */
	struct tcp_info end;
	const char *stopped_by;
};

static void parse_call_args(struct client *c, int argc, char **argv)
{
	const char *request = NULL, *response = NULL, *duration = NULL;

	for (int i = 2; i < argc; i++) {
		const char *opt = argv[i];

		if (!strcmp(opt, "--connect")) {
			c->connect = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--request")) {
			request = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--response")) {
			response = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--duration")) {
			duration = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--out")) {
			c->out = option_value(argc, argv, &i);
		} else if (!strcmp(opt, "--rate")) {
			const char *text = option_value(argc, argv, &i);

			c->rate = parse_seconds(opt, text);
			if (!(c->rate > 0) || c->rate > 1e7)
				fail(2, "--rate must be more than 0 and at most 1e7 RPCs per second, got %s", text);
		} else if (!strcmp(opt, "--interval")) {
			const char *text = option_value(argc, argv, &i);

			c->interval_ns = parse_interval(text);
			c->interval_s = parse_seconds(opt, text);
		} else if (!strcmp(opt, "--cc")) {
			c->cc = parse_cc(option_value(argc, argv, &i));
		} else if (!strcmp(opt, "--connect-timeout-ms")) {
			c->connect_timeout_ms = (int64_t)parse_count(opt, option_value(argc, argv, &i));
			if (c->connect_timeout_ms > 86400000)
				fail(2, "--connect-timeout-ms must be at most a day (86400000)");
		} else if (!strcmp(opt, "--grace")) {
			const char *text = option_value(argc, argv, &i);
			double grace = parse_seconds(opt, text);

			if (grace < 0)
				fail(2, "--grace must be at least 0 s, got %s", text);
			c->grace_ns = seconds_to_ns(grace);
		} else {
			fail(2, "call: unknown option '%s' (usage: tevrpc call --connect IP:PORT --request B "
			     "--response B --duration S --out FILE.json [--rate R] [--interval S] [--cc NAME] "
			     "[--connect-timeout-ms N] [--grace S])", opt);
		}
	}
	if (!c->connect)
		fail(2, "call: --connect IP:PORT is required");
	if (!request)
		fail(2, "call: --request BYTES is required");
	if (!response)
		fail(2, "call: --response BYTES is required");
	if (!duration)
		fail(2, "call: --duration SECONDS is required");
	if (!c->out)
		fail(2, "call: --out FILE.json is required");

	c->request_len = parse_count("--request", request);
	if (c->request_len < HEADER_BYTES)
		fail(2, "--request must be at least %d (the header), got %s", HEADER_BYTES, request);
	if (c->request_len > UINT32_MAX)
		fail(2, "--request must be at most %" PRIu32 " (a u32 on the wire), got %s", UINT32_MAX, request);
	c->response_len = parse_count("--response", response);
	if (c->response_len < 1)
		fail(2, "--response must be at least 1, got %s", response);
	if (c->response_len > UINT32_MAX)
		fail(2, "--response must be at most %" PRIu32 " (a u32 on the wire), got %s", UINT32_MAX, response);
	c->duration_s = parse_seconds("--duration", duration);
	if (!(c->duration_s > 0) || c->duration_s > 1e6)
		fail(2, "--duration must be more than 0 and at most 1e6 s, got %s", duration);
	c->duration_ns = seconds_to_ns(c->duration_s);

	/* IP:PORT, the port after the last colon */
	const char *colon = strrchr(c->connect, ':');
	char ip[INET_ADDRSTRLEN + 1];
	uint64_t port;

	if (!colon || colon == c->connect || (size_t)(colon - c->connect) > INET_ADDRSTRLEN)
		fail(2, "--connect must be IPv4:PORT, got '%s'", c->connect);
	memcpy(ip, c->connect, (size_t)(colon - c->connect));
	ip[colon - c->connect] = '\0';
	c->addr.sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &c->addr.sin_addr) != 1)
		fail(2, "--connect must be IPv4:PORT, got '%s' ('%s' is not an IPv4 address)", c->connect, ip);
	port = parse_count("--connect's port", colon + 1);
	if (port < 1 || port > 65535)
		fail(2, "--connect's port must be 1-65535, got '%s'", colon + 1);
	c->addr.sin_port = htons((uint16_t)port);
}

/* A connected non-blocking socket; -1 if a signal came first. Refused attempts (the
 * server not listening yet) are retried every RETRY_NS until the timeout. */
static int connect_server(struct client *c)
{
	int64_t deadline = mono_ns() + c->connect_timeout_ms * 1000000LL;
	int err;

	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0)
			die("socket");
		if (c->cc)
			set_cc(fd, c->cc); /* before the SYN: the connection's whole life */
		if (connect(fd, (struct sockaddr *)&c->addr, sizeof(c->addr)) == 0)
			return fd;
		err = errno;
		if (err == EINPROGRESS) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			socklen_t len = sizeof(err);

			wait_until(&pfd, 1, deadline);
			if (stop_signal) {
				close(fd);
				return -1;
			}
			if (!pfd.revents)
				err = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
				die("getsockopt SO_ERROR");
			if (!err)
				return fd;
		}
		close(fd);
		if (err != ECONNREFUSED || mono_ns() >= deadline)
			break;
		int64_t retry = mono_ns() + RETRY_NS;

		wait_until(NULL, 0, retry < deadline ? retry : deadline);
		if (stop_signal)
			return -1;
	}
	fail(2, "--connect %s: cannot connect to %s: %s (--connect-timeout-ms %" PRId64 ")",
	     c->connect, c->connect, strerror(err), c->connect_timeout_ms);
	return -1;
}

/* Closes the intervals that ended by since_t0 (empty ones too: idle time is data). */
static void close_intervals(struct client *c, int64_t since_t0)
{
	while (since_t0 >= (int64_t)(c->n_intervals + 1) * c->interval_ns) {
		c->interval_bytes = reserve(c->interval_bytes, &c->cap_intervals, c->n_intervals + 1, sizeof(*c->interval_bytes));
		c->interval_bytes[c->n_intervals++] = c->open_interval_bytes;
		c->open_interval_bytes = 0;
	}
}

/* RPC i's scheduled time in the open loop, since t0 */
static int64_t scheduled_ns(const struct client *c, uint64_t i)
{
	return (int64_t)((double)i * 1e9 / c->rate + 0.5);
}

static void issue(struct client *c, int64_t start_ns, uint64_t *send_target)
{
	c->start_ns = reserve(c->start_ns, &c->cap_start, c->issued + 1, sizeof(*c->start_ns));
	c->start_ns[c->issued++] = start_ns;
	*send_target += c->request_len;
}

/* Writes what it can of the request stream from byte *sent up to target (each request:
 * the header, then zeros); returns 0, or the errno that ended the connection. Sets
 * *blocked when the socket took less than offered. */
static int send_requests(struct client *c, int fd, const unsigned char *header,
			 uint64_t *sent, uint64_t target, int *blocked)
{
	static const unsigned char zeros[IO_CHUNK];
	struct iovec iov[IOV_BATCH];

	while (*sent < target) {
		uint64_t left = target - *sent, offset = *sent % c->request_len;
		size_t total = 0;
		int n_iov = 0;

		while (left && n_iov < IOV_BATCH && total < IO_CHUNK) {
			uint64_t len;

			if (offset < HEADER_BYTES) {
				len = HEADER_BYTES - offset;
				iov[n_iov].iov_base = (void *)(header + offset);
			} else {
				len = c->request_len - offset;
				if (len > IO_CHUNK - total)
					len = IO_CHUNK - total;
				iov[n_iov].iov_base = (void *)zeros;
			}
			if (len > left)
				len = left;
			iov[n_iov++].iov_len = len;
			total += len;
			left -= len;
			offset = (offset + len) % c->request_len;
		}
		ssize_t n = writev(fd, iov, n_iov);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			*blocked = 1;
			return 0;
		}
		if (n < 0)
			return errno;
		*sent += (uint64_t)n;
		if ((size_t)n < total) {
			*blocked = 1;
			return 0;
		}
	}
	return 0;
}

/* Reads what has arrived; completes the RPCs whose last response byte it holds.
 * Returns 0, or -1 at EOF, or the errno that ended the connection. read(), not recv():
 * a preloaded libtevrcv (the receivers' window clamp) sees the reads. */
static int receive_responses(struct client *c, int fd)
{
	static unsigned char inbuf[IO_CHUNK];

	for (int reads = 0; reads < 16; reads++) { /* then back to the schedule */
		ssize_t n = read(fd, inbuf, sizeof(inbuf));
		int64_t now = mono_ns() - c->t0;

		if (n == 0)
			return -1;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0)
			return errno;
		close_intervals(c, now);
		c->open_interval_bytes += (uint64_t)n;
		c->bytes_received += (uint64_t)n;
		while (c->completed < c->issued &&
		       c->bytes_received >= (c->completed + 1) * c->response_len) {
			c->latency_ns = reserve(c->latency_ns, &c->cap_latency, c->completed + 1, sizeof(*c->latency_ns));
			c->latency_ns[c->completed] = now - c->start_ns[c->completed];
			c->completed++;
		}
		if ((size_t)n < sizeof(inbuf))
			return 0;
	}
	return 0;
}

/* The run, from t0 until the duration (and grace) are over, a signal or the peer's end. */
static void run_rpcs(struct client *c, int fd)
{
	unsigned char header[HEADER_BYTES] = {
		c->request_len >> 24, c->request_len >> 16, c->request_len >> 8, c->request_len,
		c->response_len >> 24, c->response_len >> 16, c->response_len >> 8, c->response_len,
	};
	uint64_t sent = 0, send_target = 0, next = 0; /* next: the open loop's next RPC */
	int64_t give_up = c->duration_ns + c->grace_ns;
	int blocked = 0, err = 0;

	for (;;) {
		int64_t now = mono_ns() - c->t0, wake;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (stop_signal) {
			c->stopped_by = "signal";
			return;
		}
		/* the run lasts the whole duration (the intervals cover it), then until the
		 * last response or the grace's end */
		wake = now < c->duration_ns ? c->duration_ns : give_up;
		if (c->rate > 0) {
			while (scheduled_ns(c, next) < c->duration_ns && scheduled_ns(c, next) <= now) {
				issue(c, scheduled_ns(c, next), &send_target); /* its due time, not now */
				next++;
			}
			if (scheduled_ns(c, next) < wake)
				wake = scheduled_ns(c, next);
		} else if (now < c->duration_ns && c->completed == c->issued) {
			int64_t at = mono_ns() - c->t0; /* just before its first byte goes */

			if (at < c->duration_ns) /* that second reading may lie past the end */
				issue(c, at, &send_target);
		}
		if (now >= c->duration_ns && c->completed == c->issued) {
			c->stopped_by = "duration";
			return;
		}
		if (now >= give_up) {
			c->stopped_by = "duration"; /* the unfinished ones are left unfinished */
			return;
		}
		if (sent < send_target && !blocked)
			err = send_requests(c, fd, header, &sent, send_target, &blocked);
		if (err)
			break;
		if (sent < send_target && blocked)
			pfd.events |= POLLOUT;
		wait_until(&pfd, 1, c->t0 + wake);
		if (pfd.revents & POLLOUT)
			blocked = 0;
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			err = receive_responses(c, fd);
			if (err)
				break;
		}
	}
	fprintf(stderr, "tevrpc: %s closed the connection early: %s\n", c->connect,
		err < 0 ? "end of stream" : strerror(err));
	c->stopped_by = "peer_closed";
}

/* Half-closes and waits briefly for the server's EOF, so it sees a clean end and writes
 * its output, and our close sends no reset for unread data. What arrives now is not
 * counted: the measurement has ended. Also after a signal: it takes DRAIN_NS at most. */
static void hang_up(int fd)
{
	static unsigned char discard[IO_CHUNK];
	int64_t deadline = mono_ns() + DRAIN_NS;

	shutdown(fd, SHUT_WR);
	while (mono_ns() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		wait_until(&pfd, 1, deadline);
		if (!pfd.revents)
			continue;
		n = read(fd, discard, sizeof(discard));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
	close(fd);
}

/*
 * {"tool": "tevrpc", "version": 1, "role": "client", "connect": "IP:PORT",
 *  "request_bytes", "response_bytes", "rate_per_s": R|null (closed loop), "duration_s",
 *  "interval_s", "connected_at_unix": float|null, "cc_requested", "cc_verified",
 *  "issued", "completed", "unfinished", "bytes_received",
 *  "rpcs": {"start_s": [...], "latency_us": [...]}   one entry per completed RPC, in order,
 *  "intervals": {"t_s": [...], "bytes": [...]}      t_s: each interval's end,
 *  "end": {"total_retrans", "min_rtt_us", "rtt_us"},
 *  "stopped_by": "duration"|"signal"|"peer_closed"}
 * Without a connection (a signal during connect) the end's values are null.
 */
static void write_call_json(FILE *f, const struct client *c)
{
	uint64_t i;

	fputs("{\"tool\":\"tevrpc\",\"version\":1,\"role\":\"client\",\"connect\":", f);
	json_string(f, c->connect);
	fprintf(f, ",\"request_bytes\":%" PRIu64 ",\"response_bytes\":%" PRIu64 ",\"rate_per_s\":",
		c->request_len, c->response_len);
	if (c->rate > 0)
		json_number(f, c->rate);
	else
		fputs("null", f);
	fputs(",\"duration_s\":", f);
	json_number(f, c->duration_s);
	fputs(",\"interval_s\":", f);
	json_number(f, c->interval_s);
	fputs(",\"connected_at_unix\":", f);
	if (c->connected)
		fprintf(f, "%.6f", c->connected_at_unix);
	else
		fputs("null", f);
	fputs(",\"cc_requested\":", f);
	json_string(f, c->cc);
	fputs(",\"cc_verified\":", f);
	json_string(f, c->cc_verified);
	fprintf(f, ",\"issued\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"unfinished\":%" PRIu64
		",\"bytes_received\":%" PRIu64, c->issued, c->completed, c->issued - c->completed,
		c->bytes_received);
	fputs(",\"rpcs\":{\"start_s\":[", f);
	for (i = 0; i < c->completed; i++) {
		fputs(i ? "," : "", f);
		json_seconds(f, c->start_ns[i]);
	}
	fputs("],\"latency_us\":[", f);
	for (i = 0; i < c->completed; i++) {
		fputs(i ? "," : "", f);
		json_micros(f, c->latency_ns[i]);
	}
	fputs("]},\"intervals\":{\"t_s\":[", f);
	for (i = 0; i < c->n_intervals; i++) {
		fputs(i ? "," : "", f);
		json_seconds(f, (int64_t)(i + 1) * c->interval_ns);
	}
	/* the last, partial interval, up to the measurement's end */
	int partial = c->connected && c->end_ns > (int64_t)c->n_intervals * c->interval_ns;

	if (partial) {
		fputs(c->n_intervals ? "," : "", f);
		json_seconds(f, c->end_ns);
	}
	fputs("],\"bytes\":[", f);
	for (i = 0; i < c->n_intervals; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "", c->interval_bytes[i]);
	if (partial)
		fprintf(f, "%s%" PRIu64, c->n_intervals ? "," : "", c->open_interval_bytes);
	fputs("]},\"end\":", f);
	if (c->connected)
		fprintf(f, "{\"total_retrans\":%" PRIu32 ",\"min_rtt_us\":%" PRIu32 ",\"rtt_us\":%" PRIu32 "}",
			c->end.tcpi_total_retrans, c->end.tcpi_min_rtt, c->end.tcpi_rtt);
	else
		fputs("{\"total_retrans\":null,\"min_rtt_us\":null,\"rtt_us\":null}", f);
	fputs(",\"stopped_by\":", f);
	json_string(f, c->stopped_by);
	fputs("}\n", f);
}

static int call(int argc, char **argv)
{
	struct client c = { .interval_ns = NS / 10, .interval_s = 0.1, .grace_ns = 10 * NS,
			    .connect_timeout_ms = 32000, .stopped_by = "signal" };
	char *tmp;
	FILE *out;
	int fd;

	parse_call_args(&c, argc, argv);
	out = open_output(c.out, &tmp);
	fd = connect_server(&c);
	if (fd >= 0) {
		c.t0 = mono_ns();
		c.connected_at_unix = (double)clock_ns(CLOCK_REALTIME) / 1e9;
		c.connected = 1;
		set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt TCP_NODELAY");
		c.cc_verified = read_cc(fd, c.cc_name);
		run_rpcs(&c, fd);
		c.end_ns = mono_ns() - c.t0;
		close_intervals(&c, c.end_ns);
		if (read_tcp_info(fd, &c.end))
			die("getsockopt TCP_INFO");
		hang_up(fd);
	}
	write_call_json(out, &c);
	commit_output(out, tmp, c.out);
	return strcmp(c.stopped_by, "peer_closed") ? 0 : 1;
}

int main(int argc, char **argv)
{
	setup_signals();
	if (argc >= 2 && !strcmp(argv[1], "serve"))
		return serve(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "call"))
		return call(argc, argv);
	fail(2, "usage: tevrpc serve --port P --out FILE.json [--cc NAME] [--interval S]\n"
	     "       tevrpc call --connect IP:PORT --request B --response B --duration S --out FILE.json\n"
	     "                   [--rate R] [--interval S] [--cc NAME] [--connect-timeout-ms N] [--grace S]");
	return 2;
}

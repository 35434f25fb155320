// SPDX-License-Identifier: GPL-2.0
/*
 * libtevrcv.so: preloaded into the receivers' iperf3 servers (LD_PRELOAD), it holds
 * every TCP socket the server reads from at TCP_WINDOW_CLAMP = $TEVRCV_WINDOW_CLAMP bytes.
 *
 * Why: a receiver ACKs each second segment only while the right edge of its advertised
 * window moves (__tcp_ack_snd_check, the same rule in 3.16). Unclamped, the window is
 * the whole free receive buffer, so every byte the reading application has not yet
 * taken stops the edge and the ACK waits for the reader: stretch ACKs, 3-89 segments
 * per ACK on a 2-core host where the reader shares a CPU. The paper's dedicated
 * receivers kept up. With the window clamped well below a much larger buffer, a lagging
 * reader eats into spare room and the edge keeps moving.
 *
 * Why here and not once at accept(): the kernel resets the clamp to the buffer size
 * when it first measures the peer's segment size (tcp_measure_rcv_mss, 6.x), after the
 * first data arrived. So the clamp is (re)applied from the reads, every CLAMP_EVERY-th.
 *
 * With $TEVRCV_RCVLOWAT it also sets SO_RCVLOWAT: the reader is woken once that many
 * bytes wait, not for every segment or two. On a host where the receivers' packets are
 * processed on another CPU than their reader's, each wake-up costs an inter-processor
 * interrupt, and in a VM that is many microseconds per packet. The kernel still wakes it
 * early when the window is about to close or the peer is done (tcp_epollin_ready), and
 * the ACKs do not wait for the reader: the clamp keeps the window's edge moving.
 *
 * With $TEVRCV_CC it also sets each TCP socket's congestion control to that algorithm at
 * its first read: an algorithm with a receive side (DCTCP's CE state machine decides what
 * the receiver's ACKs echo, and when they leave) must run on the receiver too, and the
 * listening socket has the namespace's default.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 4096
#define CLAMP_EVERY 64

static unsigned char kind[MAX_FDS];  /* 0 unknown, 1 TCP, 2 other */
static unsigned int reads[MAX_FDS];
static size_t total[MAX_FDS]; /* bytes read so far */
#define BULK_BYTES (1 << 20)
static int clamp = -1, lowat = -1;
static char cc[16]; /* TEVRCV_CC, "" for none */

static void after_read(int fd, ssize_t n)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	if (n <= 0 || fd < 0 || fd >= MAX_FDS)
		return;
	if (clamp < 0) {
		const char *v = getenv("TEVRCV_WINDOW_CLAMP"), *w = getenv("TEVRCV_RCVLOWAT"), *c = getenv("TEVRCV_CC");

		clamp = v ? atoi(v) : 0;
		lowat = w ? atoi(w) : 0;
		snprintf(cc, sizeof(cc), "%s", c ? c : "");
	}
	if (clamp <= 0 && lowat <= 0 && !cc[0])
		return;
	if (!kind[fd]) {
		kind[fd] = getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 &&
			   proto == IPPROTO_TCP ? 1 : 2;
		if (kind[fd] == 1 && cc[0])
			setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
	}
	if (kind[fd] == 1 && reads[fd]++ % CLAMP_EVERY == 0) {
		if (clamp > 0)
			setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &clamp, sizeof(clamp));
	}
	/* only a bulk socket: iperf3's control connection waits for messages of a few bytes */
	if (kind[fd] == 1 && lowat > 0 && total[fd] < BULK_BYTES && (total[fd] += (size_t)n) >= BULK_BYTES)
		setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
}

ssize_t read(int fd, void *buf, size_t count)
{
	static ssize_t (*real)(int, void *, size_t);
	ssize_t n;

	if (!real)
		real = dlsym(RTLD_NEXT, "read");
	n = real(fd, buf, count);
	after_read(fd, n);
	return n;
}

ssize_t recv(int fd, void *buf, size_t count, int flags)
{
	static ssize_t (*real)(int, void *, size_t, int);
	ssize_t n;

	if (!real)
		real = dlsym(RTLD_NEXT, "recv");
	n = real(fd, buf, count, flags);
	after_read(fd, n);
	return n;
}

int close(int fd)
{
	static int (*real)(int);

	if (!real)
		real = dlsym(RTLD_NEXT, "close");
	if (fd >= 0 && fd < MAX_FDS) {
		kind[fd] = 0;
		reads[fd] = 0;
		total[fd] = 0;
	}
	return real(fd);
}

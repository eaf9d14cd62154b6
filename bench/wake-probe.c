/*
 * bench/wake-probe.c — how long a sleeping thread of this host takes to run
 * again once woken, by how long it slept.
 *
 * Why: a rank's request path hands work from thread to thread (the loop that
 * reads a request, the worker that runs it, the loop again for the reply).
 * Between two decoded tokens a rank's threads sleep for a millisecond or
 * two; if the host makes a thread woken after such a sleep wait (deep CPU
 * idle states, a virtual CPU halted by its hypervisor), every hand-off of a
 * token's first requests pays it.  This probe measures that cost alone,
 * with nothing of pprpc in it.
 *
 *   build/bin/bench-wake-probe [ROUNDS] [--hold-latency US]   (make all builds it)
 *   cc -O2 -pthread bench/wake-probe.c -o wake-probe   (alone, e.g. on the GPU machine)
 *
 * For each idle gap G (the sleeper's time asleep before the wake), two ways
 * of waking: a futex (a worker's condition variable) and a byte on a
 * loopback TCP connection read after epoll_wait (the loop).  The waker
 * sleeps G, takes the clock, wakes; the sleeper takes the clock when it
 * runs: the difference is the wake latency.  With --hold-latency N the
 * probe holds /dev/cpu_dma_latency at N us while it runs (the kernel's
 * PM QoS request; needs root), to compare.  Prints p50 / p90 / p99 / max.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct probe {
	int mode; /* 0 futex, 1 tcp+epoll */
	uint64_t gap_ns;
	int rounds;
	_Atomic uint32_t word;
	_Atomic uint64_t t_wake; /* waker's clock at the wake */
	_Atomic int ack;
	int fd_w, fd_r, ep;
	uint64_t *lat;
};

static void *sleeper(void *arg)
{
	struct probe *p = arg;

	for (int i = 0; i < p->rounds; i++) {
		uint64_t t;

		if (p->mode == 0) {
			uint32_t seen = (uint32_t)i;

			while (atomic_load(&p->word) == seen)
				syscall(SYS_futex, &p->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
		} else {
			struct epoll_event ev;
			char b;

			while (epoll_wait(p->ep, &ev, 1, -1) < 1)
				;
			if (read(p->fd_r, &b, 1) != 1)
				return NULL;
		}
		t = now_ns();
		p->lat[i] = t - atomic_load(&p->t_wake);
		atomic_store(&p->ack, i + 1);
	}
	return NULL;
}

static int tcp_pair(int *w, int *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*w = socket(AF_INET, SOCK_STREAM, 0);
	if (*w < 0 || connect(*w, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -1;
	*r = accept(l, NULL, NULL);
	close(l);
	if (*r < 0)
		return -1;
	setsockopt(*w, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

static int run(int mode, uint64_t gap_ns, int rounds)
{
	struct probe p = { .mode = mode, .gap_ns = gap_ns, .rounds = rounds };
	pthread_t th;
	int rc = -1;

	p.lat = calloc((size_t)rounds, sizeof(*p.lat));
	if (!p.lat)
		return -1;
	if (mode == 1) {
		struct epoll_event ev = { .events = EPOLLIN };

		if (tcp_pair(&p.fd_w, &p.fd_r) < 0 || (p.ep = epoll_create1(0)) < 0 ||
		    epoll_ctl(p.ep, EPOLL_CTL_ADD, p.fd_r, &ev) < 0)
			goto out;
	}
	if (pthread_create(&th, NULL, sleeper, &p) != 0)
		goto out;
	for (int i = 0; i < rounds; i++) {
		sleep_ns(gap_ns);
		atomic_store(&p.t_wake, now_ns());
		if (mode == 0) {
			atomic_fetch_add(&p.word, 1);
			syscall(SYS_futex, &p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		} else if (write(p.fd_w, "x", 1) != 1) {
			break;
		}
		/* the next gap starts once the sleeper ran: it sleeps the whole gap */
		while (atomic_load(&p.ack) != i + 1)
			sleep_ns(20000);
	}
	pthread_join(th, NULL);
	qsort(p.lat, (size_t)rounds, sizeof(*p.lat), cmp_u64);
	printf("%-6s gap %7.1f us: wake p50 %6.1f  p90 %6.1f  p99 %6.1f  max %7.1f us\n",
	       mode ? "tcp" : "futex", gap_ns / 1e3, p.lat[rounds / 2] / 1e3, p.lat[rounds * 9 / 10] / 1e3,
	       p.lat[rounds * 99 / 100] / 1e3, p.lat[rounds - 1] / 1e3);
	rc = 0;
out:
	if (mode == 1) {
		close(p.fd_w);
		close(p.fd_r);
		close(p.ep);
	}
	free(p.lat);
	return rc;
}

/* A whole number 0..1000000, else -1. */
static long number(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s && !*end && v >= 0 && v <= 1000000 ? v : -1;
}

int main(int argc, char **argv)
{
	static const uint64_t gaps_us[] = { 5, 50, 200, 1000, 2000 };
	int rounds = 400, hold = -1, fd = -1;

	for (int i = 1; i < argc; i++) {
		int is_hold = !strcmp(argv[i], "--hold-latency");
		long v = is_hold ? (i + 1 < argc ? number(argv[++i]) : -1) : number(argv[i]);

		if (is_hold && v >= 0) {
			hold = (int)v;
		} else if (!is_hold && v > 0) {
			rounds = (int)v;
		} else {
			fprintf(stderr, "usage: wake-probe [ROUNDS (1..1000000)] [--hold-latency US (0..1000000)]\n"
					"wake-probe: bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (hold >= 0) {
		int32_t v = hold;

		fd = open("/dev/cpu_dma_latency", O_WRONLY);
		if (fd < 0 || write(fd, &v, sizeof(v)) != sizeof(v)) {
			perror("wake-probe: /dev/cpu_dma_latency");
			return 1;
		}
		printf("holding /dev/cpu_dma_latency at %d us\n", hold);
	}
	for (size_t g = 0; g < sizeof(gaps_us) / sizeof(gaps_us[0]); g++)
		for (int mode = 0; mode < 2; mode++)
			if (run(mode, gaps_us[g] * 1000, rounds) < 0) {
				perror("wake-probe");
				return 1;
			}
	if (fd >= 0)
		close(fd);
	return 0;
}

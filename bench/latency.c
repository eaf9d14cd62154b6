/*
 * bench/latency — round-trip time of tiny commands next to a plain TCP
 * ping-pong, in the same run, with client and server on one core and on two.
 *
 *   bench-latency [--rank HOST:PORT | --pprpcd PATH] [--iters N] [--blocks K]
 *                 [--cmds fence,get,graph] [--placement same|diff|both]
 *                 [--echo-io blocking|poll] [--json FILE]
 *
 * Candidates, each timed from the call to its return:
 *   FENCE  pprpc_synchronize(device 0) on an idle queue;
 *   GET    pprpc_tensor_get of 4 bytes (set once, before the timing);
 *   GRAPH  pprpc_graph_run_async + pprpc_synchronize of a graph created once:
 *          one in-place SCALE of a 4-float tensor, x = x * 1 + 1.
 *
 * Baseline: a forked echo peer over loopback TCP (TCP_NODELAY both ends).  We
 * send ECHO_REQ bytes, it answers with the first ECHO_REP of them; the sizes
 * are those of a pprpc request and reply frame (32-byte header plus a few
 * bytes of meta or bulk).  --echo-io blocking (default): write + blocking
 * recv on both ends, the tightest ping-pong.  --echo-io poll: both ends use
 * non-blocking sockets the way libpprpc (writev, poll, recv until EAGAIN)
 * and a libuv loop (poll, read, write) do, to tell the library's syscall
 * pattern apart from the daemon's work.
 *
 * Placement (sched_setaffinity): "same core" pins this process, the echo
 * peer and every thread of the spawned daemon (each tid in /proc/PID/task)
 * to the first allowed CPU; "different cores" keeps us there and moves the
 * server (daemon or peer) to the second.  With --rank the daemon is not
 * ours and is left where it is.  With one CPU the second placement is
 * skipped.
 *
 * Each (placement, command) runs K blocks of N round trips per side; block b
 * runs the baseline first when b is even and the candidate first when it is
 * odd, and the commands take turns inside each block, so drift hits both
 * sides alike.  Medians and p99 are over all K*N samples of a side; the
 * ratio is median(candidate block) / median(baseline block) per block,
 * reported as the median over blocks [min..max].
 *
 * Parity, every round trip and outside the timed region: each GET must
 * return the 4 bytes set before (the destination is refilled before each);
 * each echo must return the bytes sent (which carry a sequence number).  The
 * graph's result is read once at the end: after R runs x must be x0 + R
 * exactly (small integers in float).  Any mismatch exits 1.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "tools/common/spawn.h"
#include "tools/common/loopback.h"
#include "tools/common/measure.h"

#define ECHO_REQ 48
#define ECHO_REP 40
#define GET_BYTES 4
#define MAX_ITERS 1000000
#define MAX_BLOCKS 1000
#define WARMUP 500
#define TARGET_RATIO 1.5

/* ---- small helpers ----------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* ---- CPU placement -------------------------------------------------------------------- */

/* Pin every thread of process pid (0: this one) to cpu.  Returns the number
 * of threads pinned, or -1. */
static int pin_process(pid_t pid, int cpu)
{
	char path[64];
	struct dirent *de;
	cpu_set_t set;
	DIR *dir;
	int n = 0;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/task");
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) != NULL) {
		pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);

		if (tid <= 0)
			continue;
		if (sched_setaffinity(tid, sizeof(set), &set) < 0) {
			if (errno == ESRCH) /* the thread just exited */
				continue;
			closedir(dir);
			return -1;
		}
		n++;
	}
	closedir(dir);
	return n;
}

/* The first two CPUs this process may use (cpu[1] = -1 if only one). */
static void pick_cpus(int cpu[2])
{
	cpu_set_t set;
	int k = 0;

	cpu[0] = 0;
	cpu[1] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return;
	for (int i = 0; i < CPU_SETSIZE && k < 2; i++)
		if (CPU_ISSET(i, &set))
			cpu[k++] = i;
}

/* ---- the echo peer ------------------------------------------------------------------------ */

enum echo_io { ECHO_BLOCKING, ECHO_POLL };

struct peer {
	struct loopback_peer lp;
	enum echo_io io;
};

/* Blocking echo: read a request, answer with its first ECHO_REP bytes. */
static void peer_serve_blocking(int fd)
{
	uint8_t msg[ECHO_REQ];

	while (recv_exact(fd, msg, sizeof(msg)) == 0)
		if (send_exact(fd, msg, ECHO_REP) < 0)
			_exit(5);
	_exit(0);
}

/* The shape of a libuv loop: wait for readability, read what is there (one
 * read unless it filled the buffer), write the answer right away. */
static void peer_serve_poll(int fd)
{
	uint8_t in[4096], msg[ECHO_REQ];
	size_t have = 0;

	if (set_nonblock(fd, 1) < 0)
		_exit(3);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(4);
		}
		n = recv(fd, in, sizeof(in), 0);
		if (n == 0)
			_exit(0);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			_exit(4);
		}
		for (ssize_t i = 0; i < n; i++) {
			msg[have++] = in[i];
			if (have == ECHO_REQ) {
				have = 0;
				/* A 40-byte send into an empty socket buffer does
				 * not block; the loop below only covers EAGAIN. */
				for (size_t off = 0; off < ECHO_REP;) {
					ssize_t w = send(fd, msg + off, ECHO_REP - off, MSG_NOSIGNAL);

					if (w > 0) {
						off += (size_t)w;
						continue;
					}
					if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
						struct pollfd o = { .fd = fd, .events = POLLOUT };

						poll(&o, 1, -1);
						continue;
					}
					_exit(5);
				}
			}
		}
	}
}

static void serve_echo(int fd, void *arg)
{
	if (*(const enum echo_io *)arg == ECHO_POLL)
		peer_serve_poll(fd);
	peer_serve_blocking(fd);
}

static int peer_start(struct peer *p)
{
	if (loopback_peer_start(&p->lp, serve_echo, &p->io) < 0)
		return -1;
	if (p->io == ECHO_POLL && set_nonblock(p->lp.fd, 1) < 0) {
		loopback_peer_stop(&p->lp);
		return -1;
	}
	return 0;
}

/* libpprpc's pattern: writev, then poll + recv until EAGAIN until the reply
 * is complete. */
static int echo_poll_rt(int fd, const uint8_t *msg, uint8_t *rep)
{
	struct iovec iov = { (void *)msg, ECHO_REQ };
	size_t have = 0;

	if (writev(fd, &iov, 1) != ECHO_REQ) /* empty socket buffer: never partial */
		return -1;
	while (have < ECHO_REP) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -1;
		for (;;) {
			ssize_t n = recv(fd, rep + have, ECHO_REP - have, MSG_DONTWAIT);

			if (n > 0) {
				have += (size_t)n;
				if (have == ECHO_REP) {
					/* libpprpc reads until EAGAIN */
					uint8_t extra;

					n = recv(fd, &extra, 1, MSG_DONTWAIT);
					if (n >= 0)
						return -1;
					break;
				}
				continue;
			}
			if (n == 0)
				return -1;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno != EINTR)
				return -1;
		}
	}
	return 0;
}

/* ---- the measurement ------------------------------------------------------------------------ */

enum cmd { CMD_FENCE, CMD_GET, CMD_GRAPH, CMD_COUNT };
static const char *const cmd_name[CMD_COUNT] = { "FENCE", "GET", "GRAPH+FENCE" };
static const char *const cmd_key[CMD_COUNT] = { "fence", "get", "graph" };

enum { PL_SAME, PL_DIFF, PL_COUNT };
static const char *const pl_name[PL_COUNT] = { "same core", "different cores" };
static const char *const pl_key[PL_COUNT] = { "same_core", "different_cores" };

struct series {
	double *us;                 /* K*N samples, block-major */
	double med, p99, mean;
};

struct result {
	int done;
	struct series cand, base;
	double *ratio;              /* per block */
	double ratio_med, ratio_min, ratio_max;
};

struct ctx {
	pprpc_client *c;
	struct peer peer;
	pprpc_buffer getbuf, graphbuf;
	pprpc_graph graph;
	uint8_t get_want[GET_BYTES];
	uint64_t graph_runs;
	uint64_t echo_seq;
	int iters, blocks;
	/* parity */
	uint64_t get_bad, echo_bad, fence_bad;
	char first_bad[200];
};

static int pprpc_err(pprpc_client *c, const char *what, int rc)
{
	fprintf(stderr, "bench-latency: %s: %s (%s)\n", what, pprpc_strerror(rc), pprpc_last_error(c));
	return -1;
}

static void note_bad(struct ctx *x, const char *what, uint64_t i)
{
	if (!x->first_bad[0])
		snprintf(x->first_bad, sizeof(x->first_bad), "%s (round trip %" PRIu64 ")", what, i);
}

/* n echo round trips into us[]. */
static int run_echo(struct ctx *x, double *us, int n)
{
	uint8_t msg[ECHO_REQ], rep[ECHO_REP];

	for (int i = 0; i < ECHO_REQ; i++)
		msg[i] = (uint8_t)(0x40 + i);
	for (int i = 0; i < n; i++) {
		uint64_t seq = ++x->echo_seq, t0, t1;
		int rc;

		memcpy(msg, &seq, sizeof(seq));
		msg[ECHO_REP - 1] = (uint8_t)(seq * 31);
		memset(rep, 0xee, sizeof(rep));
		t0 = now_ns();
		if (x->peer.io == ECHO_POLL)
			rc = echo_poll_rt(x->peer.lp.fd, msg, rep);
		else
			rc = send_exact(x->peer.lp.fd, msg, ECHO_REQ) < 0 ||
			     recv_exact(x->peer.lp.fd, rep, ECHO_REP) < 0 ? -1 : 0;
		t1 = now_ns();
		if (rc < 0) {
			fprintf(stderr, "bench-latency: echo peer failed\n");
			return -1;
		}
		us[i] = (double)(t1 - t0) * 1e-3;
		if (memcmp(rep, msg, ECHO_REP) != 0) {
			x->echo_bad++;
			note_bad(x, "echo returned other bytes than were sent", seq);
		}
	}
	return 0;
}

static int run_cand(struct ctx *x, enum cmd cmd, double *us, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t got[GET_BYTES];
		uint64_t t0, t1;
		int rc = 0;

		memset(got, 0x5a, sizeof(got));
		t0 = now_ns();
		switch (cmd) {
		case CMD_FENCE:
			rc = pprpc_synchronize(x->c, 0);
			break;
		case CMD_GET:
			rc = pprpc_tensor_get(x->c, x->getbuf, 0, got, GET_BYTES);
			break;
		case CMD_GRAPH:
			rc = pprpc_graph_run_async(x->c, x->graph);
			if (rc == 0)
				rc = pprpc_synchronize(x->c, 0);
			break;
		default:
			break;
		}
		t1 = now_ns();
		if (rc < 0)
			return pprpc_err(x->c, cmd_name[cmd], rc);
		us[i] = (double)(t1 - t0) * 1e-3;
		if (cmd == CMD_GRAPH)
			x->graph_runs++;
		if (cmd == CMD_GET && memcmp(got, x->get_want, GET_BYTES) != 0) {
			x->get_bad++;
			note_bad(x, "GET returned other bytes than were set", (uint64_t)i);
		}
	}
	return 0;
}

static void summarize_series(struct series *s, int n)
{
	double *tmp = malloc(sizeof(double) * (size_t)n), sum = 0;

	if (!tmp)
		abort(); /* a few hundred KiB after the run: not worth a path */
	memcpy(tmp, s->us, sizeof(double) * (size_t)n);
	for (int i = 0; i < n; i++)
		sum += tmp[i];
	s->mean = sum / n;
	s->med = median_sorting(tmp, n);
	s->p99 = pct_sorted(tmp, n, 99.0);
	free(tmp);
}

static void summarize(struct result *r, int iters, int blocks)
{
	double *tmp = malloc(sizeof(double) * (size_t)iters), *rs = malloc(sizeof(double) * (size_t)blocks);

	if (!tmp || !rs)
		abort();
	summarize_series(&r->cand, iters * blocks);
	summarize_series(&r->base, iters * blocks);
	for (int b = 0; b < blocks; b++) {
		double cm, bm;

		memcpy(tmp, r->cand.us + (size_t)b * iters, sizeof(double) * (size_t)iters);
		cm = median_sorting(tmp, iters);
		memcpy(tmp, r->base.us + (size_t)b * iters, sizeof(double) * (size_t)iters);
		bm = median_sorting(tmp, iters);
		r->ratio[b] = cm / bm;
	}
	memcpy(rs, r->ratio, sizeof(double) * (size_t)blocks);
	r->ratio_med = median_sorting(rs, blocks);
	r->ratio_min = rs[0];
	r->ratio_max = rs[blocks - 1];
	free(tmp);
	free(rs);
}

/* Pin everything for placement pl; returns 0, or -1 on a failed pin. */
static int place(struct ctx *x, const struct spawned *d, int pl, const int cpu[2], int verbose)
{
	int server_cpu = pl == PL_SAME ? cpu[0] : cpu[1];
	int nd = 0, ns, np;

	ns = pin_process(0, cpu[0]);
	np = pin_process(x->peer.lp.pid, server_cpu);
	if (d && d->pid > 0)
		nd = pin_process(d->pid, server_cpu);
	if (ns < 0 || np < 0 || nd < 0) {
		fprintf(stderr, "bench-latency: sched_setaffinity: %s\n", strerror(errno));
		return -1;
	}
	if (verbose)
		printf("%s: client on CPU %d (%d threads); echo peer and %s on CPU %d (%d daemon threads)\n",
		       pl_name[pl], cpu[0], ns, d && d->pid > 0 ? "daemon" : "(unpinned daemon)",
		       server_cpu, nd);
	return 0;
}

static int warm_up(struct ctx *x, const int enabled[CMD_COUNT])
{
	double us[WARMUP];

	if (run_echo(x, us, WARMUP) < 0)
		return -1;
	for (int c = 0; c < CMD_COUNT; c++)
		if (enabled[c] && run_cand(x, (enum cmd)c, us, WARMUP) < 0)
			return -1;
	return 0;
}

static int measure_placement(struct ctx *x, const struct spawned *d, int pl, const int cpu[2],
			     const int enabled[CMD_COUNT], struct result res[CMD_COUNT])
{
	int n = x->iters;

	/* Warm up, pin (threads the warm-up started included), warm up again
	 * so caches and scheduler state follow the new placement. */
	if (warm_up(x, enabled) < 0 || place(x, d, pl, cpu, 1) < 0 || warm_up(x, enabled) < 0)
		return -1;
	for (int b = 0; b < x->blocks; b++) {
		for (int c = 0; c < CMD_COUNT; c++) {
			struct result *r = &res[c];
			double *cu, *bu;

			if (!enabled[c])
				continue;
			cu = r->cand.us + (size_t)b * n;
			bu = r->base.us + (size_t)b * n;
			if (b % 2 == 0) {
				if (run_echo(x, bu, n) < 0 || run_cand(x, (enum cmd)c, cu, n) < 0)
					return -1;
			} else {
				if (run_cand(x, (enum cmd)c, cu, n) < 0 || run_echo(x, bu, n) < 0)
					return -1;
			}
		}
	}
	for (int c = 0; c < CMD_COUNT; c++) {
		if (!enabled[c])
			continue;
		summarize(&res[c], n, x->blocks);
		res[c].done = 1;
	}
	return 0;
}

/* ---- set-up on the daemon ------------------------------------------------------------------ */

static const float graph_x0[4] = { 1.0f, 2.0f, 3.0f, 4.0f };

static int setup_daemon_objects(struct ctx *x)
{
	pprpc_graph_builder *gb = NULL;
	pprpc_tensor t;
	int rc, ti;

	for (int i = 0; i < GET_BYTES; i++)
		x->get_want[i] = (uint8_t)(0xc3 ^ (i * 0x35));
	rc = pprpc_buffer_alloc(x->c, 0, GET_BYTES, &x->getbuf);
	if (rc < 0)
		return pprpc_err(x->c, "buffer_alloc", rc);
	rc = pprpc_tensor_set(x->c, x->getbuf, 0, x->get_want, GET_BYTES);
	if (rc < 0)
		return pprpc_err(x->c, "tensor_set", rc);

	rc = pprpc_buffer_alloc(x->c, 0, sizeof(graph_x0), &x->graphbuf);
	if (rc < 0)
		return pprpc_err(x->c, "buffer_alloc", rc);
	rc = pprpc_tensor_set(x->c, x->graphbuf, 0, graph_x0, sizeof(graph_x0));
	if (rc < 0)
		return pprpc_err(x->c, "tensor_set", rc);
	rc = pprpc_graph_builder_new(&gb);
	if (rc < 0)
		return pprpc_err(x->c, "graph_builder_new", rc);
	t = pprpc_tensor_make(x->graphbuf, 0, PPRPC_F32, 4, 1, 1, 1);
	ti = pprpc_gb_tensor(gb, &t);
	/* In place, x = x * 1 + 1: the result counts the runs. */
	if (ti < 0 || (rc = pprpc_gb_scale(gb, ti, 1.0f, 1.0f, ti)) < 0) {
		fprintf(stderr, "bench-latency: graph builder: %s\n", pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		return -1;
	}
	rc = pprpc_graph_create(x->c, 0, gb, &x->graph);
	pprpc_graph_builder_free(gb);
	if (rc < 0)
		return pprpc_err(x->c, "graph_create", rc);
	return 0;
}

/* Returns 1 if the graph's tensor equals x0 + runs, 0 if not, -1 on error. */
static int check_graph(struct ctx *x, float got[4])
{
	int rc = pprpc_tensor_get(x->c, x->graphbuf, 0, got, sizeof(graph_x0));

	if (rc < 0)
		return pprpc_err(x->c, "tensor_get (graph result)", rc);
	for (int i = 0; i < 4; i++)
		if (got[i] != graph_x0[i] + (float)x->graph_runs)
			return 0;
	return 1;
}

/* ---- output ------------------------------------------------------------------------------------ */

static void print_header(const struct ctx *x, const char *rank, int spawned)
{
	printf("bench-latency: rank %s (%s), %d blocks x %d round trips per side, "
	       "alternating baseline-first/candidate-first\n",
	       rank, spawned ? "spawned" : "not ours: not pinned", x->blocks, x->iters);
	printf("baseline: forked echo peer over loopback TCP (TCP_NODELAY), %d bytes out, %d back, "
	       "%s I/O\n",
	       ECHO_REQ, ECHO_REP, x->peer.io == ECHO_POLL ? "poll-based non-blocking" : "blocking");
	printf("times in us (median, p99 over all samples); ratio = candidate/baseline median per "
	       "block: median [min..max]\n");
}

static void print_table(int pl, const int enabled[CMD_COUNT], const struct result res[CMD_COUNT])
{
	printf("\n== %s\n", pl_name[pl]);
	printf("%-12s | %9s %9s | %9s %9s | %24s\n", "command", "med", "p99", "ping med", "ping p99",
	       "ratio");
	printf("-------------+---------------------+---------------------+-------------------------\n");
	for (int c = 0; c < CMD_COUNT; c++) {
		const struct result *r = &res[c];
		char rb[48];

		if (!enabled[c] || !r->done)
			continue;
		snprintf(rb, sizeof(rb), "%.3f [%.3f..%.3f]", r->ratio_med, r->ratio_min, r->ratio_max);
		printf("%-12s | %9.2f %9.2f | %9.2f %9.2f | %24s\n", cmd_name[c], r->cand.med, r->cand.p99,
		       r->base.med, r->base.p99, rb);
	}
	fflush(stdout);
}

static void json_list(FILE *f, const double *v, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%.4f", i ? ", " : "", v[i]);
	fputc(']', f);
}

static int write_json(const char *path, const struct ctx *x, const char *rank, int spawned,
		      const int enabled[CMD_COUNT], struct result res[PL_COUNT][CMD_COUNT],
		      const int cpu[2], int parity_ok)
{
	FILE *f = fopen(path, "w");
	int first = 1;

	if (!f) {
		fprintf(stderr, "bench-latency: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\n  \"bench\": \"latency\",\n  \"rank\": \"%s\",\n  \"daemon_pinned\": %s,\n", rank,
		spawned ? "true" : "false");
	fprintf(f, "  \"iters\": %d,\n  \"blocks\": %d,\n  \"cpus\": [%d, %d],\n", x->iters, x->blocks,
		cpu[0], cpu[1]);
	fprintf(f, "  \"baseline\": {\"kind\": \"tcp echo\", \"io\": \"%s\", \"request_bytes\": %d, "
		   "\"reply_bytes\": %d},\n",
		x->peer.io == ECHO_POLL ? "poll" : "blocking", ECHO_REQ, ECHO_REP);
	fprintf(f, "  \"units\": \"microseconds; ratio = candidate median / baseline median per block\",\n");
	fprintf(f, "  \"target_ratio\": %.2f,\n  \"parity_ok\": %s,\n  \"results\": [", TARGET_RATIO,
		parity_ok ? "true" : "false");
	for (int pl = 0; pl < PL_COUNT; pl++) {
		for (int c = 0; c < CMD_COUNT; c++) {
			const struct result *r = &res[pl][c];
			double bm[MAX_BLOCKS], cm[MAX_BLOCKS];

			if (!enabled[c] || !r->done)
				continue;
			for (int b = 0; b < x->blocks; b++) {
				/* ratio[b] = cm/bm; report both block medians. */
				double *tmp = malloc(sizeof(double) * (size_t)x->iters);

				if (!tmp)
					abort();
				memcpy(tmp, r->cand.us + (size_t)b * x->iters, sizeof(double) * (size_t)x->iters);
				cm[b] = median_sorting(tmp, x->iters);
				memcpy(tmp, r->base.us + (size_t)b * x->iters, sizeof(double) * (size_t)x->iters);
				bm[b] = median_sorting(tmp, x->iters);
				free(tmp);
			}
			fprintf(f, "%s\n    {\"placement\": \"%s\", \"command\": \"%s\",\n", first ? "" : ",",
				pl_key[pl], cmd_key[c]);
			first = 0;
			fprintf(f, "     \"median_us\": %.4f, \"p99_us\": %.4f, \"mean_us\": %.4f,\n", r->cand.med,
				r->cand.p99, r->cand.mean);
			fprintf(f, "     \"baseline_median_us\": %.4f, \"baseline_p99_us\": %.4f, "
				   "\"baseline_mean_us\": %.4f,\n",
				r->base.med, r->base.p99, r->base.mean);
			fprintf(f, "     \"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f,\n",
				r->ratio_med, r->ratio_min, r->ratio_max);
			fprintf(f, "     \"block_ratio\": ");
			json_list(f, r->ratio, x->blocks);
			fprintf(f, ",\n     \"block_median_us\": ");
			json_list(f, cm, x->blocks);
			fprintf(f, ",\n     \"baseline_block_median_us\": ");
			json_list(f, bm, x->blocks);
			fprintf(f, "}");
		}
	}
	fprintf(f, "\n  ]\n}\n");
	if (fclose(f) != 0) {
		fprintf(stderr, "bench-latency: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

/* ---- main ------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-latency [options]\n"
		"  --rank HOST:PORT     use a running pprpcd (not pinned; default: start one on 127.0.0.1:0)\n"
		"  --pprpcd PATH        daemon binary to start (default: next to this program, $PPRPCD, PATH)\n"
		"  --iters N            round trips per block and side (default 2000)\n"
		"  --blocks K           interleaved blocks (default 7)\n"
		"  --cmds LIST          fence,get,graph (default all)\n"
		"  --placement P        same | diff | both (default both)\n"
		"  --echo-io MODE       baseline I/O: blocking (default) | poll (libpprpc/libuv pattern)\n"
		"  --json FILE          also write the results as JSON\n"
		"  --help               this text\n"
		"Exit status: 0 ok, 1 a parity check failed, 2 usage or setup error.\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_cmds(const char *s, int enabled[CMD_COUNT])
{
	char buf[128], *save = NULL, *tok;
	int any = 0;

	if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return -1;
	memset(enabled, 0, sizeof(int) * CMD_COUNT);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int c;

		for (c = 0; c < CMD_COUNT; c++)
			if (!strcmp(tok, cmd_key[c]))
				break;
		if (c == CMD_COUNT)
			return -1;
		enabled[c] = any = 1;
	}
	return any ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rank", required_argument, NULL, 'r' },      { "pprpcd", required_argument, NULL, 'p' },
		{ "iters", required_argument, NULL, 'n' },     { "blocks", required_argument, NULL, 'k' },
		{ "cmds", required_argument, NULL, 'c' },      { "placement", required_argument, NULL, 'P' },
		{ "echo-io", required_argument, NULL, 'e' },   { "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
	};
	static struct result res[PL_COUNT][CMD_COUNT];
	const char *rank = NULL, *bin = NULL, *json = NULL;
	char binbuf[4096];
	struct spawned d = { 0 };
	struct ctx x = { .iters = 2000, .blocks = 7, .peer = { .lp = { .fd = -1 } } };
	int enabled[CMD_COUNT] = { 1, 1, 1 }, want_pl[PL_COUNT] = { 1, 1 };
	int opt, ret = 2, parity_ok = 1, target_met = 1, target_known = 0, cpu[2];
	float got[4] = { 0 };

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': rank = optarg; break;
		case 'p': bin = optarg; break;
		case 'j': json = optarg; break;
		case 'n':
			if (parse_int(optarg, 1, MAX_ITERS, &x.iters) < 0) {
				fprintf(stderr, "bench-latency: --iters: expected 1..%d\n", MAX_ITERS);
				return 2;
			}
			break;
		case 'k':
			if (parse_int(optarg, 1, MAX_BLOCKS, &x.blocks) < 0) {
				fprintf(stderr, "bench-latency: --blocks: expected 1..%d\n", MAX_BLOCKS);
				return 2;
			}
			break;
		case 'c':
			if (parse_cmds(optarg, enabled) < 0) {
				fprintf(stderr, "bench-latency: --cmds: expected a list of fence,get,graph\n");
				return 2;
			}
			break;
		case 'P':
			if (!strcmp(optarg, "same") || !strcmp(optarg, "diff") || !strcmp(optarg, "both")) {
				want_pl[PL_SAME] = strcmp(optarg, "diff") != 0;
				want_pl[PL_DIFF] = strcmp(optarg, "same") != 0;
			} else {
				fprintf(stderr, "bench-latency: --placement: expected same, diff or both\n");
				return 2;
			}
			break;
		case 'e':
			if (!strcmp(optarg, "blocking"))
				x.peer.io = ECHO_BLOCKING;
			else if (!strcmp(optarg, "poll"))
				x.peer.io = ECHO_POLL;
			else {
				fprintf(stderr, "bench-latency: --echo-io: expected blocking or poll\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (!bin)
		bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));
	signal(SIGPIPE, SIG_IGN);
	pick_cpus(cpu);
	if (cpu[1] < 0 && want_pl[PL_DIFF]) {
		printf("bench-latency: only one CPU available (nproc %ld): skipping \"different cores\"\n",
		       sysconf(_SC_NPROCESSORS_ONLN));
		want_pl[PL_DIFF] = 0;
	}
	if (!want_pl[PL_SAME] && !want_pl[PL_DIFF]) {
		fprintf(stderr, "bench-latency: nothing to measure\n");
		return 2;
	}

	for (int pl = 0; pl < PL_COUNT; pl++) {
		for (int c = 0; c < CMD_COUNT; c++) {
			size_t n = (size_t)x.iters * (size_t)x.blocks;

			res[pl][c].cand.us = calloc(n, sizeof(double));
			res[pl][c].base.us = calloc(n, sizeof(double));
			res[pl][c].ratio = calloc((size_t)x.blocks, sizeof(double));
			if (!res[pl][c].cand.us || !res[pl][c].base.us || !res[pl][c].ratio) {
				fprintf(stderr, "bench-latency: out of memory\n");
				goto out;
			}
		}
	}

	/* The peer is forked before the connection exists, so it holds no copy
	 * of the client's socket. */
	if (peer_start(&x.peer) < 0) {
		fprintf(stderr, "bench-latency: cannot start the echo peer: %s\n", strerror(errno));
		goto out;
	}
	if (!rank) {
		char err[512];

		if (spawn_daemon(bin, NULL, 20000, &d, err, sizeof(err)) < 0) {
			fprintf(stderr, "bench-latency: %s\n", err);
			spawn_dump_log(&d);
			goto out;
		}
		rank = d.addr;
	}
	{
		char err[256] = "";
		pprpc_connect_opts o = { .client_name = "bench-latency", .err_buf = err,
					 .err_len = sizeof(err) };
		int rc = pprpc_connect(rank, &o, &x.c);

		if (rc < 0) {
			fprintf(stderr, "bench-latency: connect %s: %s (%s)\n", rank, pprpc_strerror(rc), err);
			goto out;
		}
	}
	if (setup_daemon_objects(&x) < 0)
		goto out;

	print_header(&x, rank, d.pid > 0);
	for (int pl = 0; pl < PL_COUNT; pl++) {
		if (!want_pl[pl])
			continue;
		printf("\n");
		if (measure_placement(&x, d.pid > 0 ? &d : NULL, pl, cpu, enabled, res[pl]) < 0)
			goto out;
		print_table(pl, enabled, res[pl]);
	}

	/* Parity of the graph: once, at the end. */
	if (enabled[CMD_GRAPH]) {
		int ok = check_graph(&x, got);

		if (ok < 0)
			goto out;
		if (!ok) {
			parity_ok = 0;
			fprintf(stderr,
				"bench-latency: PARITY FAILURE: graph result {%g, %g, %g, %g} after %" PRIu64
				" runs, want x0 + runs\n",
				got[0], got[1], got[2], got[3], x.graph_runs);
		}
	}
	if (x.get_bad || x.echo_bad) {
		parity_ok = 0;
		fprintf(stderr, "bench-latency: PARITY FAILURE: %" PRIu64 " bad GETs, %" PRIu64
				" bad echoes; first: %s\n",
			x.get_bad, x.echo_bad, x.first_bad);
	}
	for (int c = CMD_FENCE; c <= CMD_GET; c++) {
		if (!enabled[c] || !res[PL_SAME][c].done)
			continue;
		target_known = 1;
		if (res[PL_SAME][c].ratio_med > TARGET_RATIO)
			target_met = 0;
	}
	printf("\nparity: %s (%s%s%s)\n", parity_ok ? "all ok" : "FAILED",
	       enabled[CMD_GET] ? "every GET, " : "", "every echo",
	       enabled[CMD_GRAPH] ? ", graph result at the end" : "");
	if (enabled[CMD_GRAPH])
		printf("graph: %" PRIu64 " runs, result {%g, %g, %g, %g}\n", x.graph_runs, got[0], got[1],
		       got[2], got[3]);
	if (target_known)
		printf("target (FENCE and GET, same core, ratio median <= %.2f): %s\n", TARGET_RATIO,
		       target_met ? "met" : "NOT met");
	ret = parity_ok ? 0 : 1;
out:
	if (json && ret != 2 &&
	    write_json(json, &x, rank, d.pid > 0, enabled, res, cpu, parity_ok) < 0 && ret == 0)
		ret = 2;
	pprpc_close(x.c);
	if (d.pid > 0 || d.dir[0])
		spawn_stop(&d, 0);
	loopback_peer_stop(&x.peer.lp);
	for (int pl = 0; pl < PL_COUNT; pl++) {
		for (int c = 0; c < CMD_COUNT; c++) {
			free(res[pl][c].cand.us);
			free(res[pl][c].base.us);
			free(res[pl][c].ratio);
		}
	}
	return ret;
}

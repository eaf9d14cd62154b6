/*
 * ggml-pprpc/rank.c — one connection to one pprpcd rank: open, lock, its
 * state, and the loud failure every void ggml entry point ends in.
 *
 * Timeouts: every reply is awaited at most PPRPC_TIMEOUT_MS (default
 * 120000) without progress, connecting at most PPRPC_CONNECT_TIMEOUT_MS
 * (5000).  A killed rank closes its socket, which fails the call at once;
 * a rank that stops answering without closing (a stopped process, a hung
 * host, a cut network) is found by the liveness watchdog (monitor.c) in
 * seconds, which ends the wait through the cancel fd.  The timeout is the
 * last bound, for a rank whose loop answers but whose device never
 * finishes: a FENCE after a long graph legitimately waits as long as the
 * graph runs, hence the generous default.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "pg.h"
#include "throw.h"

/* The rank lock this thread holds (at most one at a time): pg_fatal lets
 * it go before the exception leaves. */
static __thread struct pg_rank *held;

int pg_rank_open(struct pg_rank *r, char *err, size_t errlen)
{
	pprpc_connect_opts o = { 0 };
	long tmo, ctmo, spin, host_pages;
	char name[96];
	int rc;

	rc = pg_env_int("PPRPC_TIMEOUT_MS", 120000, 100, 86400000, &tmo, err, errlen);
	if (rc == 0)
		rc = pg_env_int("PPRPC_CONNECT_TIMEOUT_MS", 5000, 100, 600000, &ctmo, err, errlen);
	if (rc == 0)
		rc = pg_env_int("PPRPC_SPIN", 1, 0, 1, &spin, err, errlen);
	if (rc == 0)
		rc = pg_env_int("PPRPC_HOST_PAGES", 1, 0, 1, &host_pages, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(name, sizeof(name), "ggml-pprpc pid %ld", (long)getpid());
	o.client_name = name;
	o.connect_timeout_ms = (int)ctmo;
	o.io_timeout_ms = (int)tmo;
	o.err_buf = err;
	o.err_len = errlen;
	/* the key comes from PPRPC_AUTH_KEY_FILE (read by pprpc_connect) */
	rc = pprpc_connect(r->addr, &o, &r->c);
	if (rc < 0)
		return rc;
	r->timeout_ms = (int)tmo;
	pthread_mutex_init(&r->lock, NULL);
	/* a fault on any rank ends this client's waits at once */
	if (r->fault)
		pprpc_set_cancel_fd(r->c, r->fault->efd);
	pprpc_set_trace(r->c, r->trace);
	pprpc_set_spin(r->c, (int)spin);
	r->host_pages = host_pages && pprpc_same_host(r->c);
	if (getrandom(&r->next_xfer, sizeof(r->next_xfer), 0) != (ssize_t)sizeof(r->next_xfer))
		r->next_xfer = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)r;
	/* keep clear of 0 and of wrapping for a long while */
	r->next_xfer = (r->next_xfer >> 2) | 1;
	return 0;
}

void pg_rank_close(struct pg_rank *r)
{
	if (r->c) {
		pprpc_close(r->c);
		r->c = NULL;
		pthread_mutex_destroy(&r->lock);
	}
}

void pg_lock(struct pg_rank *r)
{
	pthread_mutex_lock(&r->lock);
	held = r;
}

void pg_unlock(struct pg_rank *r)
{
	held = NULL;
	pthread_mutex_unlock(&r->lock);
}

int pg_rank_failed(struct pg_rank *r, int rc)
{
	/* A broken client refuses every later call: the daemon's state for this
	 * session (buffers, graphs) is gone or unreachable, so nothing can go on. */
	if (r->c && pprpc_connection_state(r->c) != PPRPC_CONN_OPEN && !r->dead) {
		r->dead = 1;
		snprintf(r->dead_why, sizeof(r->dead_why), "%s", pprpc_last_error(r->c));
	}
	return rc;
}

static struct pg_fault *fault_of(const struct pg_rank *r)
{
	return r && r->fault ? r->fault : pg_process_fault();
}

/* "rank 1 rank1 (10.0.0.2:50052) device PPRPC1: COMMAND: msg" */
static void context(char *buf, size_t len, const struct pg_rank *r, const char *dev, const char *command,
		    const char *msg)
{
	if (r)
		snprintf(buf, len, "rank %d %s (%s)%s%s: %s: %s", r->index, r->name, r->addr, dev ? " device " : "",
			 dev ? dev : "", command, msg);
	else
		snprintf(buf, len, "%s%s%s%s: %s", dev ? "device " : "", dev ? dev : "", dev ? ": " : "", command, msg);
}

static _Noreturn void leave(struct pg_fault *f)
{
	char why[1100] = "pprpc: ";

	pg_fault_why(f, why + 7, sizeof(why) - 7);
	if (held) {
		struct pg_rank *h = held;

		held = NULL;
		pthread_mutex_unlock(&h->lock);
	}
	/* The cause, whichever call meets it first: a wait on rank 0 that the
	 * watchdog ended is about rank 1, the one that stopped. */
	pg_throw(why);
}

_Noreturn void pg_fatal(const struct pg_rank *r, const char *dev, const char *command, const char *fmt, ...)
{
	struct pg_fault *f = fault_of(r);
	char msg[1024], line[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	context(line, sizeof(line), r, dev, command, msg);
	/* The ggml call that got here has no error return: going on would hand
	 * the caller data that was never written (or never read). */
	pg_fault_raise(f, "%s", line);
	leave(f);
}

_Noreturn void pg_fatal_rc(const struct pg_rank *r, const char *dev, const char *command, int rc)
{
	const char *msg = r && r->dead ? r->dead_why : r && r->c ? pprpc_last_error(r->c) : "";

	if (!msg || !*msg)
		pg_fatal(r, dev, command, "%s", pprpc_strerror(rc));
	/* a dead connection says so first: the rank, not the request, is the problem */
	pg_fatal(r, dev, command, "%s%s", r && r->dead ? "connection to the rank lost: " : "", msg);
}

void pg_check_alive(const struct pg_rank *r, const char *dev, const char *command)
{
	struct pg_fault *f = fault_of(r);

	if (pg_fault_failed(f))
		leave(f);
	if (r->dead)
		pg_fatal(r, dev, command, "connection to the rank was lost earlier: %s", r->dead_why);
}

void pg_rank_fault(const struct pg_rank *r, const char *dev, const char *msg)
{
	char line[1200];

	context(line, sizeof(line), r, dev, "graph_compute", msg);
	pg_fault_raise(fault_of(r), "%s", line);
}

uint64_t pg_rank_xfer_id(struct pg_rank *r)
{
	return r->next_xfer++;
}

int pg_rank_stats(struct pg_rank *r, pprpc_stats **ret)
{
	if (r->dead)
		return PPRPC_ECONN; /* callers report r->dead_why */
	return pg_rank_failed(r, pprpc_stats_get(r->c, ret));
}

/*
 * ggml-pprpc/rank.c — one connection to one pprpcd rank: open, lock, its
 * state, and the loud failure every void ggml entry point ends in.
 *
 * Timeouts: every reply is awaited at most PPRPC_TIMEOUT_MS (default
 * 120000) without progress, connecting at most PPRPC_CONNECT_TIMEOUT_MS
 * (5000).  A killed rank closes its socket, which fails the call at once;
 * the timeout covers a rank that stops answering without closing (a hung
 * host, a cut network).  A FENCE after a long graph legitimately waits as
 * long as the graph runs, hence the generous default.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "pg.h"

int pg_rank_open(struct pg_rank *r, char *err, size_t errlen)
{
	pprpc_connect_opts o = { 0 };
	long tmo, ctmo;
	char name[96];
	int rc;

	rc = pg_env_int("PPRPC_TIMEOUT_MS", 120000, 100, 86400000, &tmo, err, errlen);
	if (rc == 0)
		rc = pg_env_int("PPRPC_CONNECT_TIMEOUT_MS", 5000, 100, 600000, &ctmo, err, errlen);
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
}

void pg_unlock(struct pg_rank *r)
{
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

static void vreport(const struct pg_rank *r, const char *dev, const char *command, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "pprpc: fatal: rank %d %s (%s)%s%s: %s: %s\n", r ? r->index : -1, r ? r->name : "?",
		r ? r->addr : "?", dev ? " device " : "", dev ? dev : "", command, msg);
	fflush(stderr);
}

_Noreturn void pg_fatal(const struct pg_rank *r, const char *dev, const char *command, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(r, dev, command, fmt, ap);
	va_end(ap);
	/* The ggml call that got here has no error return: going on would hand
	 * the caller data that was never written (or never read). */
	abort();
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
	if (r->dead)
		pg_fatal(r, dev, command, "connection to the rank was lost earlier: %s", r->dead_why);
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

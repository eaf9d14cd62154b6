/*
 * ggml-pprpc/monitor.c — the liveness watchdog: is every rank's process
 * still there?
 *
 * The plugin talks to a rank only while llama.cpp calls it, and then waits
 * on one rank at a time: a FENCE on rank 0 can wait for rank 0's RECV of
 * the boundary rank 1 never sends, because rank 1's process is stopped.  The
 * socket of a stopped process stays open and its kernel keeps acknowledging,
 * so nothing fails until a timeout of minutes.  This thread holds a second
 * connection to every rank (a pprpc_client is one thread's) and PINGs each
 * every PPRPC_LIVENESS_MS.  The daemon's event loop answers PING while its
 * devices compute, so a long graph is not a missing answer; a process that
 * is stopped, or a host that is gone, does not answer within
 * PPRPC_LIVENESS_TIMEOUT_MS, and a killed or exiting rank closes the
 * connection.  Either raises the rank fault (fault.c), whose eventfd ends
 * the waits of llama.cpp's thread on every rank at once.  The same holds
 * while the process is idle: a llama-server whose rank died exits (and its
 * restart waits for the rank) instead of answering /health "ok" with a
 * rank it cannot compute on.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pg.h"

struct pg_monitor {
	struct pg_registry *pr;
	pprpc_client *c[PG_MAX_RANKS];
	long interval_ms, timeout_ms;
	pthread_t thread;
};

static void *run(void *arg)
{
	struct pg_monitor *m = arg;
	struct pg_registry *pr = m->pr;

	for (;;) {
		struct pollfd pfd = { .fd = pr->fault.efd, .events = POLLIN };
		int rc = poll(&pfd, 1, (int)m->interval_ms);

		if (rc < 0 && errno != EINTR)
			break;
		if (pg_fault_failed(&pr->fault))
			break; /* raised elsewhere: nothing left to watch */
		for (int i = 0; i < pr->nrank; i++) {
			const struct pg_rank *r = &pr->rank[i];

			rc = pprpc_ping(m->c[i], (int)m->timeout_ms);
			if (rc < 0) {
				pg_fault_raise(&pr->fault, "rank %d %s (%s) device%s %s: liveness: %s", r->index, r->name,
					       r->addr, strchr(r->devs, ',') ? "s" : "", r->devs,
					       pprpc_last_error(m->c[i]));
				goto out;
			}
		}
	}
out:
	/* The connections stay: the process exits soon (fault.c), and closing
	 * them here would race nothing but costs nothing either. */
	return NULL;
}

int pg_monitor_start(struct pg_registry *pr, char *err, size_t errlen)
{
	struct pg_monitor *m;
	long interval, timeout;
	char name[96];
	int rc;

	if (pg_env_int("PPRPC_LIVENESS_MS", 1000, 0, 3600000, &interval, err, errlen) < 0 ||
	    pg_env_int("PPRPC_LIVENESS_TIMEOUT_MS", 4000, 100, 3600000, &timeout, err, errlen) < 0)
		return PPRPC_EINVAL;
	if (interval == 0 || pr->nrank == 0) {
		if (interval == 0)
			PG_LOG_WARN("pprpc: PPRPC_LIVENESS_MS=0: no liveness watchdog; a stopped rank is found after "
				    "PPRPC_TIMEOUT_MS\n");
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	m->pr = pr;
	m->interval_ms = interval;
	m->timeout_ms = timeout;
	snprintf(name, sizeof(name), "ggml-pprpc pid %ld liveness", (long)getpid());
	for (int i = 0; i < pr->nrank; i++) {
		pprpc_connect_opts o = { 0 };
		char why[600] = "";

		o.client_name = name;
		o.io_timeout_ms = (int)timeout;
		o.err_buf = why;
		o.err_len = sizeof(why);
		rc = pprpc_connect(pr->rank[i].addr, &o, &m->c[i]);
		if (rc < 0) {
			snprintf(err, errlen, "rank %d %s (%s): the liveness connection: %s", i, pr->rank[i].name,
				 pr->rank[i].addr, why);
			goto fail;
		}
	}
	rc = pthread_create(&m->thread, NULL, run, m);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the liveness thread: %s", strerror(rc));
		rc = PPRPC_ENOMEM;
		goto fail;
	}
	pthread_detach(m->thread);
	pr->monitor = m;
	PG_LOG_INFO("pprpc: liveness: every rank PINGed every %ld ms, a fault after %ld ms without an answer\n",
		    interval, timeout);
	return 0;
fail:
	for (int i = 0; i < pr->nrank; i++)
		pprpc_close(m->c[i]);
	free(m);
	return rc;
}

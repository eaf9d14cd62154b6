/*
 * libclient/trace.c — the client's half of the request trace: a line per
 * request sent and per reply received, in the daemon's format
 * (daemon/core/trace.h), so bench/llama-vs-rpc/token-trace.py can put the
 * hops of one request side by side:
 *   T_NS PID CONN client TYPE REQ_ID EVENT [INFO]
 * CONN is the rank's address as dialled (HOST:PORT), EVENT send or recv
 * (or what a caller of pprpc_trace_event names: the plugin's graph_start,
 * graph_end).  Lines go through stdio's buffer under a mutex (the plugin
 * drives several clients from several threads) and are flushed at most
 * every 200 ms and at close: a diagnostic, never on when not asked for
 * (a client without a trace tests one pointer).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libclient/client.h"
#include "proto/msgtype.h"
#include "util/clock.h"

#define FLUSH_NS 200000000ull

struct pprpc_trace {
	pthread_mutex_t lock;
	FILE *f;
	long pid;
	uint64_t last_flush;
};

PPRPC_API int pprpc_trace_open(const char *path, pprpc_trace **ret_t)
{
	char name[4200];
	pprpc_trace *t;

	if (!path || !*path || !ret_t)
		return PPRPC_EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return PPRPC_ENOMEM;
	t->pid = (long)getpid();
	snprintf(name, sizeof(name), "%s.%ld", path, t->pid);
	t->f = fopen(name, "w");
	if (!t->f) {
		int rc = errno == ENOMEM ? PPRPC_ENOMEM : PPRPC_EINVAL;

		free(t);
		return rc;
	}
	pthread_mutex_init(&t->lock, NULL);
	fprintf(t->f, "# pprpc client trace v1 pid %ld\n# t_ns pid conn role type req_id event [info]\n", t->pid);
	fflush(t->f);
	*ret_t = t;
	return 0;
}

void client_trace(pprpc_trace *t, const char *conn, uint16_t type, uint64_t id, const char *event)
{
	pprpc_trace_event(t, conn, msg_type_name(type), id, event, NULL);
}

PPRPC_API void pprpc_trace_event(pprpc_trace *t, const char *conn, const char *type, uint64_t id,
				 const char *event, const char *info)
{
	uint64_t now;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	now = util_now_ns();
	fprintf(t->f, "%" PRIu64 " %ld %s client %s %" PRIu64 " %s%s%s\n", now, t->pid, conn && *conn ? conn : "-",
		type, id, event, info ? " " : "", info ? info : "");
	if (now - t->last_flush > FLUSH_NS) {
		fflush(t->f);
		t->last_flush = now;
	}
	pthread_mutex_unlock(&t->lock);
}

PPRPC_API void pprpc_trace_close(pprpc_trace *t)
{
	if (!t)
		return;
	fclose(t->f);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

PPRPC_API void pprpc_set_trace(pprpc_client *c, pprpc_trace *t)
{
	if (c)
		c->trace = t;
}

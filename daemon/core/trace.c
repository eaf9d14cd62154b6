/* daemon/core/trace.c — the request trace (see trace.h). */
#include "daemon/core/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/core/core_impl.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/msgtype.h"
#include "util/clock.h"

/* Records between two ticks: at 20 ms ticks (server.c while draining) to
 * 2 s, 64 Ki of them (2 MiB) hold well over a thousand tokens' requests. */
#define TRACE_CAP 65536

struct trace_rec {
	uint64_t t_ns;
	uint64_t conn;
	uint64_t req_id;
	uint16_t type;
	uint8_t peer;
	uint8_t event;
};

struct trace {
	FILE *f;
	long pid;
	uint32_t n;
	uint64_t dropped;
	uint64_t dropped_said;
	struct trace_rec recs[TRACE_CAP];
};

static const char *const event_names[TRACE_EVENTS] = {
	[TRACE_ARRIVE] = "arrive",
	[TRACE_EXEC_START] = "exec_start",
	[TRACE_EXEC_END] = "exec_end",
	[TRACE_DONE] = "done",
	[TRACE_REPLY] = "reply",
	[TRACE_EXEC_READY] = "exec_ready",
	[TRACE_EXEC_LAUNCHED] = "exec_launched",
};

/* Set once a trace is open: from then on the marks are taken. */
static int marks_on;
static __thread uint64_t marks[TRACE_MARKS];

void trace_mark(int kind)
{
	if (__atomic_load_n(&marks_on, __ATOMIC_RELAXED) && kind >= 0 && kind < TRACE_MARKS)
		marks[kind] = trace_now_ns();
}

void trace_marks_take(uint64_t out[TRACE_MARKS])
{
	for (int i = 0; i < TRACE_MARKS; i++) {
		out[i] = marks[i];
		marks[i] = 0;
	}
}

uint64_t trace_now_ns(void)
{
	return util_now_ns();
}

int trace_open(const char *path, const char *listen, struct trace **ret_t, char *err, size_t errlen)
{
	struct trace *t = calloc(1, sizeof(*t));

	if (!t) {
		snprintf(err, errlen, "trace-file: out of memory");
		return PPRPC_ENOMEM;
	}
	t->f = fopen(path, "w");
	if (!t->f) {
		snprintf(err, errlen, "trace-file %s: %s", path, strerror(errno));
		free(t);
		return PPRPC_EINVAL;
	}
	t->pid = (long)getpid();
	__atomic_store_n(&marks_on, 1, __ATOMIC_RELAXED);
	fprintf(t->f, "# pprpcd trace v1 pid %ld listen %s\n"
		      "# t_ns pid conn role type req_id event\n", t->pid, listen);
	fflush(t->f);
	*ret_t = t;
	return 0;
}

void trace_req(struct pprpcd *d, const struct conn *c, uint16_t type, uint64_t req_id, int event,
	       uint64_t t_ns)
{
	struct trace *t = d->trace;
	struct trace_rec *r;
	int peer = 0;
	uint64_t id = 0;

	if (!t)
		return;
	if (t->n == TRACE_CAP) {
		t->dropped++;
		return;
	}
	d->ops->conn_trace_who(c, &id, &peer);
	r = &t->recs[t->n++];
	r->t_ns = t_ns;
	r->conn = id;
	r->req_id = req_id;
	r->type = type;
	r->peer = (uint8_t)peer;
	r->event = (uint8_t)event;
}

void trace_flush(struct trace *t)
{
	if (!t)
		return;
	/* Formatting on the loop: a few hundred lines a token, into stdio's
	 * buffer; the write is one block per flush. */
	for (uint32_t i = 0; i < t->n; i++) {
		const struct trace_rec *r = &t->recs[i];

		fprintf(t->f, "%" PRIu64 " %ld c%" PRIu64 " %s %s %" PRIu64 " %s\n", r->t_ns, t->pid, r->conn,
			r->peer ? "peer" : "client", msg_type_name(r->type), r->req_id,
			r->event < TRACE_EVENTS ? event_names[r->event] : "?");
	}
	t->n = 0;
	if (t->dropped != t->dropped_said) {
		fprintf(t->f, "# dropped %" PRIu64 " records so far: the buffer of %u was full between flushes\n",
			t->dropped, TRACE_CAP);
		t->dropped_said = t->dropped;
	}
	fflush(t->f);
}

void trace_close(struct trace *t)
{
	if (!t)
		return;
	trace_flush(t);
	fprintf(t->f, "# end: %" PRIu64 " records dropped\n", t->dropped);
	fclose(t->f);
	free(t);
}

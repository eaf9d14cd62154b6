/* daemon/handlers/h_graph.c — GRAPH_CREATE / GRAPH_RUN / GRAPH_FREE. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/objects/buffer.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/exec/stream.h"
#include "daemon/server/dispatch.h"
#include "daemon/objects/graph.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"

void h_graph_create(struct conn *c, struct request *r)
{
	const Pprpc__GraphCreate *m = (const Pprpc__GraphCreate *)r->msg;
	Pprpc__GraphCreateReply rep = PPRPC__GRAPH_CREATE_REPLY__INIT;
	struct graph *g;
	char err[256] = "";
	int rc;

	rc = graph_room(&c->own, err, sizeof(err));
	if (rc >= 0)
		rc = graph_create(c->d, &c->own, m, &g, err, sizeof(err));
	if (rc >= 0)
		rc = graph_register(c->d, &c->own, g, err, sizeof(err));
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.graph = g->handle;
	rep.arena_bytes = g->arena_size;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

struct run_cmd {
	struct qreq qr;
	struct graph *g;
};

static int run_exec(struct qcmd *q)
{
	struct run_cmd *rc = (struct run_cmd *)q;
	int st;

	/* weights mapped from a model file: still the file verified? */
	for (int i = 0; i < rc->g->nbufs; i++)
		if ((st = buffer_map_check(rc->g->bufs[i], q->err, sizeof(q->err))) < 0)
			return st;

	/* On the stream's own device stream, behind whatever it holds (a
	 * timeline wait included); completes from the device (on the CPU,
	 * before the submit returns). */
	rc->g->run_follow = q->stream ? &q->stream->follow : NULL;
	st = device_graph_submit(rc->g->dev, q->stream, rc->g, qreq_device_done, &rc->qr, q->err, sizeof(q->err));
	return st < 0 ? st : QCMD_PENDING;
}

static void run_release(struct qreq *qr)
{
	graph_unref(((struct run_cmd *)qr)->g);
}

void graph_run_queue(struct conn *c, const struct request *r, struct graph *g)
{
	struct run_cmd *rc = calloc(1, sizeof(*rc));

	if (!rc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	rc->g = g;
	graph_ref(g);
	g->dev->graph_runs++;
	rc->qr.release = run_release;
	rc->qr.q.async_ok = !g->sync_run;
	rc->qr.inline_ok = device_completes_inline(g->dev) && g->work <= GRAPH_INLINE_WORK;
	qreq_push(&rc->qr, c, r, g->dev, run_exec);
}

void h_graph_run(struct conn *c, struct request *r)
{
	const Pprpc__GraphRun *m = (const Pprpc__GraphRun *)r->msg;
	struct graph *g = graph_get(c->d, &c->own, m->graph);
	char err[96];

	if (!g) {
		snprintf(err, sizeof(err), "unknown graph handle 0x%016" PRIx64, m->graph);
		qreq_refuse(c, r, PPRPC_EHANDLE, err);
		return;
	}
	graph_run_queue(c, r, g);
}

void h_graph_free(struct conn *c, struct request *r)
{
	const Pprpc__GraphFree *m = (const Pprpc__GraphFree *)r->msg;
	struct graph *g = graph_get(c->d, &c->own, m->graph);
	char err[96];

	if (!g) {
		snprintf(err, sizeof(err), "unknown graph handle 0x%016" PRIx64, m->graph);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EHANDLE, err);
		return;
	}
	graph_retire(c->d, g);
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}

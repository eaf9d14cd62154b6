/* daemon/handlers/h_ggml.c — GGML_GRAPH_CREATE / GGML_SUPPORTS /
 * GGML_ALLOC_SIZE (doc/ggml.md): graph objects (objects/graph.h) whose
 * device's engine does the work (device.h: device_graph_begin). */
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "daemon/device/device.h"
#include "daemon/objects/graph.h"
#include "daemon/pprpcd.h"
#include "daemon/server/conn.h"
#include "daemon/server/server.h"
#include "daemon/server/dispatch.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

/* A ggml graph is created once and re-run (GRAPH_RUN, GRAPH_FREE as for a
 * native graph); the device counts creates against runs.
 *
 * With run set, the create also queues the graph's first run, so a client
 * meeting a new graph (llama.cpp: every new KV length of a prompt) queues
 * on without waiting for the handle: the create costs the rank's loop a few
 * milliseconds for a graph of ~500 nodes, which now overlap the device's
 * previous work instead of idling it for a round trip.  The run is a queued
 * GRAPH_RUN of this request (same id): no reply of its own, a failure is
 * the stream's.  A refused create fails the streams as a refused queued
 * command does (qreq_refuse), or the commands queued behind it would read
 * outputs the graph never wrote. */
/* Creates at least this large (their meta, in bytes) build on libuv's
 * threadpool instead of the loop.  llama.cpp's real graphs are at most
 * 64 KiB (tests/fuzz/corpus/fuzz_ggml_graph/llama-*) and take the loop a
 * few milliseconds: they stay synchronous, with no thread hop added to the
 * path every token takes.  A hostile 1 MiB create costs ~0.1 s of decode
 * and checks, during which the loop would answer no other connection
 * (issue 27.3). */
#define GGML_CREATE_ASYNC_META (128u << 10)

/* The end of a create, on the loop: the graph registered and answered, its
 * first run queued, or the refusal for both. */
static void create_done(struct conn *c, const struct frame_hdr *hdr, const Pprpc__GgmlGraphCreate *m,
			struct graph_job *j)
{
	Pprpc__GraphCreateReply rep = PPRPC__GRAPH_CREATE_REPLY__INIT;
	struct request run = { .hdr = *hdr };
	struct graph *g;
	char err[320] = "";
	int rc;

	run.hdr.type = MSG_GRAPH_RUN;
	run.hdr.flags |= FRAME_F_QUEUED;
	rc = graph_finish(j, &g, err, sizeof(err));
	if (rc >= 0)
		rc = graph_register(c->d, &c->own, g, err, sizeof(err));
	if (rc < 0) {
		reply_error(c, hdr->type, hdr->req_id, rc, err);
		if (m->run)
			qreq_refuse(c, &run, rc, err);
		return;
	}
	rep.graph = g->handle;
	reply_send(c, hdr->type, hdr->req_id, &rep.base, NULL, 0, NULL, NULL);
	if (m->run)
		graph_run_queue(c, &run, g);
}

/* A create off the loop: it owns the request's message and holds the
 * connection, which stays busy (conn_busy_begin) until the job is back. */
struct create_work {
	uv_work_t w;
	struct conn *c;
	struct frame_hdr hdr;
	ProtobufCMessage *msg;
	struct graph_job *j;
};

static void create_work(uv_work_t *w)
{
	struct create_work *cw = w->data;

	graph_build(cw->j);
}

static void create_after(uv_work_t *w, int status)
{
	struct create_work *cw = w->data;
	struct conn *c = cw->c;
	struct pprpcd *d = c->d;

	/* A client gone meanwhile gets nothing: the graph was never
	 * registered, so it and its reservation go here, and the frames that
	 * waited behind it are dropped by conn_busy_end. */
	if (status < 0 || c->closing || c->closed)
		graph_drop(cw->j);
	else
		create_done(c, &cw->hdr, (const Pprpc__GgmlGraphCreate *)cw->msg, cw->j);
	meta_free(cw->msg);
	conn_busy_end(c);
	conn_unref(c);
	free(cw);
	d->async_creates--;
	/* a shutdown that closed every connection waits for the last job */
	pprpcd_conn_gone(d);
}

/* A ggml graph is created once and re-run (GRAPH_RUN, GRAPH_FREE as for a
 * native graph); the device counts creates against runs.
 *
 * With run set, the create also queues the graph's first run, so a client
 * meeting a new graph (llama.cpp: every new KV length of a prompt) queues
 * on without waiting for the handle: the create costs the rank's loop a few
 * milliseconds for a graph of ~500 nodes, which now overlap the device's
 * previous work instead of idling it for a round trip.  The run is a queued
 * GRAPH_RUN of this request (same id): no reply of its own, a failure is
 * the stream's.  A refused create fails the streams as a refused queued
 * command does (qreq_refuse), or the commands queued behind it would read
 * outputs the graph never wrote.
 *
 * A large create builds on libuv's threadpool; its connection's later
 * frames wait for it (conn.c), so on the connection nothing changes but
 * the time. */
void h_ggml_graph_create(struct conn *c, struct request *r)
{
	const Pprpc__GgmlGraphCreate *m = (const Pprpc__GgmlGraphCreate *)r->msg;
	struct request run = { .hdr = r->hdr };
	struct create_work *cw = NULL;
	struct graph_job *j = NULL;
	char err[320] = "";
	int rc;

	run.hdr.type = MSG_GRAPH_RUN;
	run.hdr.flags |= FRAME_F_QUEUED;
	rc = graph_room(&c->own, err, sizeof(err));
	if (rc >= 0)
		rc = graph_begin(c->d, &c->own, GRAPH_GGML, m->device, m, m->n_nodes, &j, err, sizeof(err));
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		if (m->run)
			qreq_refuse(c, &run, rc, err);
		return;
	}
	if (r->hdr.meta_len >= GGML_CREATE_ASYNC_META)
		cw = calloc(1, sizeof(*cw));
	if (cw) {
		cw->w.data = cw;
		cw->c = c;
		cw->hdr = r->hdr;
		cw->msg = r->msg;
		cw->j = j;
		if (uv_queue_work(c->d->loop, &cw->w, create_work, create_after) == 0) {
			/* the job reads m until it is back */
			r->msg = NULL;
			conn_ref(c);
			conn_busy_begin(c);
			c->d->async_creates++;
			return;
		}
		free(cw);
	}
	/* small, or no way off the loop: built here */
	graph_build(j);
	create_done(c, &r->hdr, m, j);
}

void h_ggml_supports(struct conn *c, struct request *r)
{
	const Pprpc__GgmlSupports *m = (const Pprpc__GgmlSupports *)r->msg;
	Pprpc__GgmlSupportsReply rep = PPRPC__GGML_SUPPORTS_REPLY__INIT;
	char why[320] = "";
	bool ok = false;
	int rc = graph_probe(c->d, &c->own, GRAPH_GGML, m->device, GRAPH_PROBE_SUPPORTS, m, &ok, NULL, why, sizeof(why));

	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, why);
		return;
	}
	rep.supported = ok;
	rep.reason = ok ? "" : why;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

void h_ggml_alloc_size(struct conn *c, struct request *r)
{
	const Pprpc__GgmlAllocSize *m = (const Pprpc__GgmlAllocSize *)r->msg;
	Pprpc__GgmlAllocSizeReply rep = PPRPC__GGML_ALLOC_SIZE_REPLY__INIT;
	char err[320] = "";
	uint64_t size = 0;
	int rc = graph_probe(c->d, &c->own, GRAPH_GGML, m->device, GRAPH_PROBE_ALLOC_SIZE, m, NULL, &size, err,
			     sizeof(err));

	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.size = size;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

/* daemon/handlers/h_ggml.c — GGML_GRAPH_CREATE / GGML_SUPPORTS /
 * GGML_ALLOC_SIZE (doc/ggml.md; the work is in daemon/backend/ggml/). */
#include <stdio.h>

#include "daemon/backend/ggml/ggml_serve.h"
#include "daemon/device/device.h"
#include "daemon/objects/graph.h"
#include "daemon/pprpcd.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/exec/qreq.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"
#include "proto/frame.h"
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
void h_ggml_graph_create(struct conn *c, struct request *r)
{
	const Pprpc__GgmlGraphCreate *m = (const Pprpc__GgmlGraphCreate *)r->msg;
	Pprpc__GraphCreateReply rep = PPRPC__GRAPH_CREATE_REPLY__INIT;
	struct request run = *r;
	struct graph *g;
	char err[320] = "";
	int rc;

	run.hdr.type = MSG_GRAPH_RUN;
	run.hdr.flags |= FRAME_F_QUEUED;

	rc = graph_room(&c->own, err, sizeof(err));
	if (rc >= 0)
		rc = ggml_serve_graph_create(c->d, &c->own, m, &g, err, sizeof(err));
	if (rc >= 0)
		rc = graph_register(c->d, &c->own, g, err, sizeof(err));
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		if (m->run)
			qreq_refuse(c, &run, rc, err);
		return;
	}
	rep.graph = g->handle;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
	if (m->run)
		graph_run_queue(c, &run, g);
}

void h_ggml_supports(struct conn *c, struct request *r)
{
	const Pprpc__GgmlSupports *m = (const Pprpc__GgmlSupports *)r->msg;
	Pprpc__GgmlSupportsReply rep = PPRPC__GGML_SUPPORTS_REPLY__INIT;
	char why[320] = "";
	bool ok = false;
	int rc = ggml_serve_supports(c->d, &c->own, m, &ok, why, sizeof(why));

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
	int rc = ggml_serve_alloc_size(c->d, &c->own, m, &size, err, sizeof(err));

	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.size = size;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

/* daemon/handlers/h_ggml.c — GGML_GRAPH_CREATE / GGML_SUPPORTS /
 * GGML_ALLOC_SIZE (doc/ggml.md; the work is in daemon/backend/ggml/). */
#include <stdio.h>

#include "daemon/backend/ggml/ggml_serve.h"
#include "daemon/device/device.h"
#include "daemon/objects/graph.h"
#include "daemon/pprpcd.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"

/* A ggml graph is created once and re-run (GRAPH_RUN, GRAPH_FREE as for a
 * native graph); the device counts creates against runs. */
void h_ggml_graph_create(struct conn *c, struct request *r)
{
	const Pprpc__GgmlGraphCreate *m = (const Pprpc__GgmlGraphCreate *)r->msg;
	Pprpc__GraphCreateReply rep = PPRPC__GRAPH_CREATE_REPLY__INIT;
	struct graph *g;
	char err[320] = "";
	int rc;

	rc = graph_room(&c->own, err, sizeof(err));
	if (rc >= 0)
		rc = ggml_serve_graph_create(c->d, &c->own, m, &g, err, sizeof(err));
	if (rc >= 0)
		rc = graph_register(c->d, &c->own, g, err, sizeof(err));
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.graph = g->handle;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
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

/*
 * libclient/request.c — request handles (pprpc_request) and the sticky
 * async error, the client's bookkeeping as callers see it.
 *
 * A request is a pending (client.h) the caller owns: the progress engine
 * (rpc.c) fills it in whenever its reply passes by, and letting go of one
 * in flight marks it an orphan, which the engine frees on completion.  So
 * no reply ever arrives for memory that is gone (which would leave the
 * stream out of sync), and a caller never has to wait just to free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client.h"
#include "proto/meta.h"

PPRPC_API int pprpc_request_done(const pprpc_request *r)
{
	return r && r->p.done;
}

PPRPC_API int pprpc_request_wait(pprpc_client *c, pprpc_request *r)
{
	int rc;

	if (!c || !r)
		return PPRPC_EINVAL;
	if (r->p.done)
		return r->p.rc;
	rc = rpc_wait(c, &r->p);
	if (!r->p.done) {
		/* Only a failure that did not break the stream leaves it
		 * pending; rpc_wait breaks it on every one it meets today.
		 * Should one ever come back, fail the request rather than
		 * leave the caller a request that can neither finish nor be
		 * waited for again. */
		rpc_forget(c, &r->p);
		r->p.done = 1;
		r->p.rc = rc < 0 ? rc : PPRPC_EINTERNAL;
		snprintf(r->p.err, sizeof(r->p.err), "%.255s", c->err);
	}
	return r->p.rc;
}

PPRPC_API const char *pprpc_request_error(const pprpc_request *r)
{
	return r && r->p.done && r->p.rc < 0 ? r->p.err : "";
}

PPRPC_API int pprpc_request_graph(const pprpc_request *r, pprpc_graph *out)
{
	const Pprpc__GraphCreateReply *rep;

	if (!r || !out || r->p.rep_desc != &pprpc__graph_create_reply__descriptor)
		return PPRPC_EINVAL;
	if (!r->p.done)
		return PPRPC_EBUSY;
	if (r->p.rc < 0)
		return r->p.rc;
	rep = (const Pprpc__GraphCreateReply *)r->p.rep;
	if (!rep || !rep->graph)
		return PPRPC_EPROTO; /* a reply without a handle: not what was asked */
	out->id = rep->graph;
	return 0;
}

PPRPC_API void pprpc_request_free(pprpc_request *r)
{
	if (!r)
		return;
	if (!r->p.done) {
		r->p.orphan = 1; /* rpc.c's complete() frees it */
		return;
	}
	meta_free(r->p.rep);
	free(r);
}

PPRPC_API int pprpc_async_error_peek(const pprpc_client *c)
{
	return c ? c->async_err : PPRPC_EINVAL;
}

PPRPC_API int pprpc_async_error_take(pprpc_client *c, char *msg, size_t msglen)
{
	int rc;

	if (!c)
		return PPRPC_EINVAL;
	rc = c->async_err;
	if (msg && msglen)
		snprintf(msg, msglen, "%s", rc ? c->async_errmsg : "");
	c->async_err = 0;
	c->async_errmsg[0] = '\0';
	return rc;
}

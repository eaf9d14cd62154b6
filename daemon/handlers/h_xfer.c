/*
 * daemon/handlers/h_xfer.c — the transfer part's wire handlers: SEND and RECV
 * (from clients, queued on a device), PULL and PULL_RELEASE (from the peer
 * link of a destination daemon), PULL_CHECK (from a source asking whether a
 * PULL is ours).  Each decodes and validates, then hands
 * over to the source (source.c) or the destination (dest.c).
 */
#include <stdio.h>

#include "daemon/objects/buffer.h"
#include "daemon/request/qreq.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/xfer/xfer.h"
#include "pprpc/types.h"

void h_send(struct conn *c, struct request *r)
{
	const Pprpc__Send *m = (const Pprpc__Send *)r->msg;
	struct dbuf *b;
	char err[256];
	int rc;

	rc = buffer_region(c->d, &c->own, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && m->size == 0) {
		snprintf(err, sizeof(err), "SEND of 0 bytes");
		rc = PPRPC_EINVAL;
	}
	if (rc < 0) {
		qreq_refuse(c, r, rc, err);
		return;
	}
	xsrc_send(c, r, m, b);
}

void h_recv(struct conn *c, struct request *r)
{
	const Pprpc__Recv *m = (const Pprpc__Recv *)r->msg;
	struct dbuf *b;
	char err[256];
	int rc;

	rc = buffer_region(c->d, &c->own, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && (m->size == 0 || !m->src_rank || !*m->src_rank)) {
		snprintf(err, sizeof(err), "RECV needs a size > 0 and a source rank");
		rc = PPRPC_EINVAL;
	}
	if (rc < 0) {
		qreq_refuse(c, r, rc, err);
		return;
	}
	xdst_recv(c, r, m, b);
}

/* A peer pulls a transfer (possibly before its SEND arrived). */
void h_pull(struct conn *c, struct request *r)
{
	xsrc_pull(c, r, (const Pprpc__Pull *)r->msg);
}

/* A source checks that a PULL it got is ours (the SEND named this rank). */
void h_pull_check(struct conn *c, struct request *r)
{
	xdst_pull_check(c, r, (const Pprpc__PullCheck *)r->msg);
}

/* The destination copied an IPC transfer out of our pool, or part of it,
 * or could not (error). */
void h_pull_release(struct conn *c, struct request *r)
{
	xsrc_pull_release(c, r, (const Pprpc__PullRelease *)r->msg);
}

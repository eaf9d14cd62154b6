/* daemon/handlers/h_buffer.c — BUFFER_ALLOC / BUFFER_FREE / BUFFER_CLEAR. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/objects/buffer.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"

void h_buffer_alloc(struct conn *c, struct request *r)
{
	const Pprpc__BufferAlloc *m = (const Pprpc__BufferAlloc *)r->msg;
	Pprpc__BufferAllocReply rep = PPRPC__BUFFER_ALLOC_REPLY__INIT;
	struct device *dev = pprpcd_device(c->d, m->device);
	struct dbuf *b;
	char err[256];
	int rc;

	if (!dev) {
		snprintf(err, sizeof(err), "no device %u (this daemon has %u)", m->device, c->d->ndev);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	rc = buffer_alloc(c->d, &c->own, dev, m->size, &b, err, sizeof(err));
	if (rc < 0) {
		if (rc == PPRPC_EFLOOR)
			LOG(c->d, LOG_NOTICE_, "conn %" PRIu64 ": %s", c->id, err);
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.buffer = b->handle;
	rep.size = b->size;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

void h_buffer_free(struct conn *c, struct request *r)
{
	const Pprpc__BufferFree *m = (const Pprpc__BufferFree *)r->msg;
	struct dbuf *b = buffer_get(c->d, &c->own, m->buffer);
	char err[96];

	if (!b) {
		snprintf(err, sizeof(err), "unknown buffer handle 0x%016" PRIx64, m->buffer);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EHANDLE, err);
		return;
	}
	buffer_retire(c->d, b);
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}

struct clear_cmd {
	struct qreq qr;
	struct dbuf *b;
	int value;
};

static int clear_exec(struct qcmd *q)
{
	struct clear_cmd *cc = (struct clear_cmd *)q;

	return device_fill(cc->b->dev, cc->b->ptr, cc->value, cc->b->size);
}

static void clear_release(struct qreq *qr)
{
	buffer_unref(((struct clear_cmd *)qr)->b);
}

void h_buffer_clear(struct conn *c, struct request *r)
{
	const Pprpc__BufferClear *m = (const Pprpc__BufferClear *)r->msg;
	struct dbuf *b = buffer_get(c->d, &c->own, m->buffer);
	struct clear_cmd *cc;
	char err[96];

	if (!b) {
		snprintf(err, sizeof(err), "unknown buffer handle 0x%016" PRIx64, m->buffer);
		qreq_refuse(c, r, PPRPC_EHANDLE, err);
		return;
	}
	if (m->value > 255) {
		qreq_refuse(c, r, PPRPC_EINVAL, "clear value must be a byte (0..255)");
		return;
	}
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	cc->b = b;
	cc->value = (int)m->value;
	buffer_ref(b);
	cc->qr.release = clear_release;
	qreq_push(&cc->qr, c, r, b->dev, clear_exec);
}

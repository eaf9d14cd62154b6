/* daemon/handlers/h_buffer.c — BUFFER_ALLOC / BUFFER_FREE / BUFFER_CLEAR. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "daemon/objects/buffer.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "daemon/server/server.h"
#include "proto/frame.h"
#include "pprpc/types.h"

/* Host buffers at least this large are allocated on libuv's threadpool:
 * committing and zeroing their pages takes the kernel about 1 s per GiB on
 * a slow host, and the loop answers every connection's PINGs meanwhile (a
 * client's liveness watchdog took a 4 s allocation for a stopped rank). */
#define ALLOC_ASYNC_BYTES ((uint64_t)64 << 20)

static void alloc_reply(struct conn *c, const struct frame_hdr *hdr, const struct dbuf *b)
{
	Pprpc__BufferAllocReply rep = PPRPC__BUFFER_ALLOC_REPLY__INIT;

	rep.buffer = b->handle;
	rep.size = b->size;
	reply_send(c, hdr->type, hdr->req_id, &rep.base, NULL, 0, NULL, NULL);
}

/* An allocation off the loop: the connection holds its later frames (the
 * client waits for the handle anyway) and is referenced until it is back. */
struct alloc_work {
	uv_work_t w;
	struct conn *c;
	struct frame_hdr hdr;
	struct device *dev;
	uint64_t size, fp;
	void *ptr;
	int rc;
};

static void alloc_work(uv_work_t *w)
{
	struct alloc_work *aw = w->data;

	aw->rc = device_alloc_raw(aw->dev, aw->size, &aw->ptr);
}

static void alloc_after(uv_work_t *w, int status)
{
	struct alloc_work *aw = w->data;
	struct conn *c = aw->c;
	struct pprpcd *d = c->d;
	struct dbuf *b;
	char err[256];
	int rc = status < 0 ? PPRPC_EINTERNAL : aw->rc;

	if (rc < 0) {
		device_alloc_unreserve(aw->dev, aw->size);
		snprintf(err, sizeof(err), "%s: allocation of %.1f MiB failed", aw->dev->name, aw->size / 1048576.0);
	} else if (c->closing || c->closed) {
		device_free(aw->dev, aw->ptr, aw->size); /* nobody to give it to */
	} else {
		rc = buffer_alloc_end(d, &c->own, aw->dev, aw->size, aw->fp, aw->ptr, &b, err, sizeof(err));
		if (rc == 0)
			alloc_reply(c, &aw->hdr, b);
	}
	if (rc < 0 && !c->closing && !c->closed)
		reply_error(c, aw->hdr.type, aw->hdr.req_id, rc, err);
	conn_busy_end(c);
	conn_unref(c);
	free(aw);
	d->async_creates--;
	pprpcd_conn_gone(d);
}

void h_buffer_alloc(struct conn *c, struct request *r)
{
	const Pprpc__BufferAlloc *m = (const Pprpc__BufferAlloc *)r->msg;
	struct device *dev = pprpcd_device(c->d, m->device);
	struct alloc_work *aw = NULL;
	struct dbuf *b;
	char err[256];
	uint64_t fp;
	int rc;

	if (!dev) {
		snprintf(err, sizeof(err), "no device %u (this daemon has %u)", m->device, c->d->ndev);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	if (m->file) {
		h_buffer_map(c, r, dev);
		return;
	}
	if (m->size >= ALLOC_ASYNC_BYTES && device_host_visible(dev))
		aw = calloc(1, sizeof(*aw));
	if (aw) {
		rc = buffer_alloc_begin(&c->own, dev, m->size, &fp, err, sizeof(err));
		if (rc == 0) {
			aw->w.data = aw;
			aw->c = c;
			aw->hdr = r->hdr;
			aw->dev = dev;
			aw->size = m->size;
			aw->fp = fp;
			if (uv_queue_work(c->d->loop, &aw->w, alloc_work, alloc_after) == 0) {
				conn_ref(c);
				conn_busy_begin(c);
				c->d->async_creates++;
				return;
			}
			device_alloc_unreserve(dev, m->size);
		}
		free(aw);
		if (rc < 0)
			goto refused;
	}
	rc = buffer_alloc(c->d, &c->own, dev, m->size, &b, err, sizeof(err));
	if (rc < 0)
		goto refused;
	alloc_reply(c, &r->hdr, b);
	return;
refused:
	if (rc == PPRPC_EFLOOR)
		LOG(c->d, LOG_NOTICE_, "conn %" PRIu64 ": %s", c->id, err);
	reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
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

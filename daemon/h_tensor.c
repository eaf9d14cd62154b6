/*
 * daemon/h_tensor.c — TENSOR_SET / TENSOR_GET / TENSOR_COPY.
 *
 * SET receives its bulk straight into the buffer (the region is validated
 * from the meta before a single bulk byte is accepted); GET sends straight
 * from the buffer, holding a reference until the write completed.  Neither
 * copies the payload on the host, which is what lets them run at plain-TCP
 * speed.  COPY can be large, so it runs on the device queue.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/buffer.h"
#include "daemon/conn.h"
#include "daemon/device.h"
#include "daemon/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/qreq.h"
#include "daemon/reply.h"
#include "pprpc_types.h"

int h_tensor_set_bulk(struct conn *c, struct request *r, void **ret_dst)
{
	const Pprpc__TensorSet *m = (const Pprpc__TensorSet *)r->msg;
	struct dbuf *b;
	int rc;

	if (m->size != r->hdr.bulk_len) {
		snprintf(r->errmsg, sizeof(r->errmsg),
			 "TENSOR_SET: bulk of %" PRIu64 " bytes does not match size %" PRIu64,
			 r->hdr.bulk_len, m->size);
		r->err = PPRPC_EPROTO;
		return r->err;
	}
	rc = buffer_region(c->d, c, m->buffer, m->offset, m->size, &b, r->errmsg, sizeof(r->errmsg));
	if (rc < 0) {
		r->err = rc;
		return rc;
	}
	if (!device_host_visible(b->dev)) {
		snprintf(r->errmsg, sizeof(r->errmsg), "TENSOR_SET: %s memory is not host visible", b->dev->name);
		r->err = PPRPC_EUNSUPP;
		return r->err;
	}
	buffer_ref(b);
	r->bulk_buf = b;
	*ret_dst = b->ptr + m->offset;
	return 0;
}

void h_tensor_set(struct conn *c, struct request *r)
{
	const Pprpc__TensorSet *m = (const Pprpc__TensorSet *)r->msg;
	char err[256];
	struct dbuf *b;
	int rc;

	/* A zero-byte SET has no bulk phase: validate it here. */
	if (!r->bulk_buf) {
		if (m->size != 0) {
			reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EPROTO,
				    "TENSOR_SET without its bulk payload");
			return;
		}
		rc = buffer_region(c->d, c, m->buffer, m->offset, 0, &b, err, sizeof(err));
		if (rc < 0) {
			reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
			return;
		}
	}
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}

static void get_sent(void *arg, int status)
{
	(void)status;
	buffer_unref(arg);
}

void h_tensor_get(struct conn *c, struct request *r)
{
	const Pprpc__TensorGet *m = (const Pprpc__TensorGet *)r->msg;
	Pprpc__Empty e = PPRPC__EMPTY__INIT;
	char err[256];
	struct dbuf *b;
	int rc;

	rc = buffer_region(c->d, c, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && m->size > c->d->opts.max_bulk) {
		snprintf(err, sizeof(err), "TENSOR_GET of %" PRIu64 " bytes exceeds the bulk limit %" PRIu64,
			 m->size, c->d->opts.max_bulk);
		rc = PPRPC_ETOOBIG;
	}
	if (rc == 0 && !device_host_visible(b->dev)) {
		snprintf(err, sizeof(err), "TENSOR_GET: %s memory is not host visible", b->dev->name);
		rc = PPRPC_EUNSUPP;
	}
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	buffer_ref(b);
	reply_send(c, r->hdr.type, r->hdr.req_id, &e.base, b->ptr + m->offset, m->size, get_sent, b);
}

struct copy_cmd {
	struct qreq qr;
	struct dbuf *src, *dst;
	uint64_t src_off, dst_off, size;
};

static int copy_exec(struct qcmd *q)
{
	struct copy_cmd *cc = (struct copy_cmd *)q;

	return device_copy(cc->dst->dev, cc->dst->ptr + cc->dst_off, cc->src->ptr + cc->src_off, cc->size);
}

static void copy_release(struct qreq *qr)
{
	struct copy_cmd *cc = (struct copy_cmd *)qr;

	buffer_unref(cc->src);
	buffer_unref(cc->dst);
}

void h_tensor_copy(struct conn *c, struct request *r)
{
	const Pprpc__TensorCopy *m = (const Pprpc__TensorCopy *)r->msg;
	struct dbuf *src, *dst;
	struct copy_cmd *cc;
	char err[256];
	int rc;

	rc = buffer_region(c->d, c, m->src_buffer, m->src_offset, m->size, &src, err, sizeof(err));
	if (rc == 0)
		rc = buffer_region(c->d, c, m->dst_buffer, m->dst_offset, m->size, &dst, err, sizeof(err));
	if (rc == 0 && src->dev != dst->dev) {
		snprintf(err, sizeof(err), "TENSOR_COPY between devices %s and %s is not supported",
			 src->dev->name, dst->dev->name);
		rc = PPRPC_EUNSUPP;
	}
	if (rc < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	cc->src = src;
	cc->dst = dst;
	cc->src_off = m->src_offset;
	cc->dst_off = m->dst_offset;
	cc->size = m->size;
	buffer_ref(src);
	buffer_ref(dst);
	cc->qr.release = copy_release;
	qreq_push(&cc->qr, c, r, dst->dev, copy_exec);
}

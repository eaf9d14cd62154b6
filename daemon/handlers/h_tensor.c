/*
 * daemon/handlers/h_tensor.c — TENSOR_SET / TENSOR_GET / TENSOR_COPY.
 *
 * Fast paths: when nothing of the connection is queued on the device (the
 * stream is idle), SET receives its bulk straight into the buffer (the
 * region is validated from the meta before a single bulk byte is accepted)
 * and a plain GET sends straight from the buffer, holding a reference until
 * the write completed.  Neither copies the payload, which is what lets them
 * run at plain-TCP speed.
 *
 * Otherwise they must take their place in the queue: a SET's bulk is staged
 * and copied in when the queue reaches it, and a GET copies the bytes out at
 * its queue position (later commands may overwrite them) and replies from
 * that copy.  Staging bytes count towards the connection's back-pressure.
 * Every staged byte is reserved under the memory floor (hostmem.h), and a
 * GET makes its copy only when the connection's copies not yet written
 * leave room under max-conn-reply-mib (conn.h: conn_copy_*); until then it
 * waits in its queue, the worker serving other streams.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/trace.h"
#include "daemon/objects/buffer.h"
#include "daemon/objects/hostpage.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "daemon/exec/stream.h"
#include "daemon/weights/weights.h"
#include "proto/frame.h"
#include "pprpc/types.h"

/* The SET's bytes are weights to keep in the weights cache under key. */
static int wants_cache(const struct conn *c, const Pprpc__TensorSet *m)
{
	return m->cache_key.len == 32 && m->size && c->d->weights && wsrc_has_cache(c->d->weights);
}

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
	rc = buffer_region(c->d, &c->own, m->buffer, m->offset, m->size, &b, r->errmsg, sizeof(r->errmsg));
	if (rc < 0) {
		r->err = rc;
		return rc;
	}
	buffer_ref(b);
	r->bulk_buf = b;
	/* Device memory the host cannot address is always staged, and so are
	 * bytes for the weights cache (the worker stores them from there). */
	if (device_host_visible(b->dev) && stream_idle(&c->streams[b->dev->index]) && !wants_cache(c, m)) {
		*ret_dst = b->ptr + m->offset;
		return 0;
	}
	r->stage = hostmem_alloc(&c->d->hostmem, m->size, &rc, r->errmsg, sizeof(r->errmsg));
	if (!r->stage) {
		r->err = rc;
		return r->err;
	}
	r->stage_len = m->size;
	*ret_dst = r->stage;
	return 0;
}

struct set_cmd {
	struct qreq qr;
	struct dbuf *b;
	uint64_t offset, size;
	void *stage;
	struct wsrc *cache;      /* store the bytes in it under key (weights) */
	uint8_t key[32];
};

static int set_exec(struct qcmd *q)
{
	struct set_cmd *sc = (struct set_cmd *)q;
	char err[256];
	int rc;

	if (!sc->size)
		return 0;
	rc = device_upload(sc->b->dev, sc->b->ptr + sc->offset, sc->stage, sc->size);
	/* The cache is a copy for the next load: a store that fails (disk
	 * full, a folder gone) costs that load the bytes, not this SET
	 * (weights.h counts it). */
	if (rc == 0 && sc->cache)
		(void)wsrc_cache_put(sc->cache, sc->key, sc->stage, sc->size, err, sizeof(err));
	return rc;
}

static void set_release(struct qreq *qr)
{
	struct set_cmd *sc = (struct set_cmd *)qr;

	hostmem_free(&qr->c->d->hostmem, sc->stage, sc->size);
	buffer_unref(sc->b);
}

void h_tensor_set(struct conn *c, struct request *r)
{
	const Pprpc__TensorSet *m = (const Pprpc__TensorSet *)r->msg;
	struct set_cmd *sc;
	char err[256];
	struct dbuf *b = r->bulk_buf;
	int rc;

	/* A zero-byte SET has no bulk phase: validate it here. */
	if (!b) {
		if (m->size != 0) {
			qreq_refuse(c, r, PPRPC_EPROTO, "TENSOR_SET without its bulk payload");
			return;
		}
		rc = buffer_region(c->d, &c->own, m->buffer, m->offset, 0, &b, err, sizeof(err));
		if (rc < 0) {
			qreq_refuse(c, r, rc, err);
			return;
		}
		buffer_ref(b);
		r->bulk_buf = b;
	}
	if (!r->stage && device_host_visible(b->dev) && stream_idle(&c->streams[b->dev->index])) {
		/* The bytes are already in place. */
		if (!(r->hdr.flags & FRAME_F_QUEUED))
			reply_ok(c, r->hdr.type, r->hdr.req_id);
		return;
	}
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	sc->b = b;
	sc->offset = m->offset;
	sc->size = r->stage ? m->size : 0;
	sc->stage = r->stage;
	if (sc->stage && wants_cache(c, m)) {
		sc->cache = c->d->weights;
		memcpy(sc->key, m->cache_key.data, sizeof(sc->key));
	}
	sc->qr.staged = sc->size;
	sc->qr.release = set_release;
	/* It writes only its region: a RECV ahead of it lets it go first. */
	sc->qr.q.pass = QPASS_GOES;
	sc->qr.q.rgn_lo = (uintptr_t)(b->ptr + m->offset);
	sc->qr.q.rgn_hi = sc->qr.q.rgn_lo + m->size;
	r->stage = NULL;
	r->stage_len = 0;
	r->bulk_buf = NULL; /* the command owns the reference now */
	qreq_push(&sc->qr, c, r, b->dev, set_exec);
}


static void get_sent(void *arg, int status)
{
	(void)status;
	buffer_unref(arg);
}

/* A GET's copy: this header, then the bytes — or only the header, when
 * the device lent its own page-locked memory holding them (a GPU's
 * download lands there, and the reply is written from it: no copy of the
 * bytes on the host, 608 KB of logits per decoded token).  It outlives the
 * command when it becomes the reply's bulk, until written (copy_sent). */
struct get_copy {
	struct conn *c;      /* referenced while the reply holds the copy */
	struct device *dev;  /* the lender (devices outlive connections) */
	void *lent;          /* the device's memory holding the bytes, or NULL */
	uint64_t n;
	uint8_t bytes[] __attribute__((aligned(16)));
};

struct get_cmd {
	struct qreq qr;
	struct dbuf *b;
	uint64_t offset, size;
	struct get_copy *copy;  /* made by get_exec */
	struct hostpage *page;  /* the bytes land in the client's host page (held) */
	uint8_t *land;          /* there */
};

static void copy_free(struct conn *c, struct get_copy *cp)
{
	struct pprpcd *d = c->d;

	conn_copy_put(c, cp->n);
	if (cp->lent)
		device_download_return(cp->dev, cp->lent);
	hostmem_free(&d->hostmem, cp, sizeof(*cp) + (cp->lent ? 0 : cp->n));
}

/* The copy was written to the client (or the connection is gone). */
static void copy_sent(void *arg, int status)
{
	struct get_copy *cp = arg;
	struct conn *c = cp->c;

	(void)status;
	copy_free(c, cp);
	conn_unref(c);
}

/* Worker: the copy may be made once the connection's copies not yet
 * written leave room for it. */
static int get_ready(struct qcmd *q)
{
	struct get_cmd *gc = (struct get_cmd *)q;

	return gc->land || conn_copy_fits(gc->qr.c, gc->size);
}

static int get_exec(struct qcmd *q)
{
	struct get_cmd *gc = (struct get_cmd *)q;
	struct conn *c = gc->qr.c;
	struct device *dev = gc->b->dev;
	const uint8_t *src = gc->b->ptr + gc->offset;
	void *lent = NULL;
	int rc;

	if (!gc->size)
		return 0;
	if (gc->land)
		return device_download(dev, gc->land, src, gc->size);
	if (!conn_copy_take(c, gc->size))
		return QCMD_AGAIN;  /* another stream's copy took the room first */
	trace_mark(TRACE_MARK_READY);
	if (device_download_lend(dev, src, gc->size, &lent) < 0)
		lent = NULL; /* none to lend (or lent already): a copy of our own */
	gc->copy = hostmem_alloc(&c->d->hostmem, sizeof(*gc->copy) + (lent ? 0 : gc->size), &rc, q->err,
				 sizeof(q->err));
	if (!gc->copy) {
		if (lent)
			device_download_return(dev, lent);
		conn_copy_put(c, gc->size);
		return rc;
	}
	gc->copy->n = gc->size;
	gc->copy->dev = dev;
	gc->copy->lent = lent;
	return lent ? 0 : device_download(dev, gc->copy->bytes, src, gc->size);
}

static void get_reply(struct qreq *qr)
{
	struct get_cmd *gc = (struct get_cmd *)qr;
	Pprpc__Empty e = PPRPC__EMPTY__INIT;
	struct get_copy *cp = gc->copy;

	if (!cp) {
		reply_send(qr->c, qr->q.type, qr->q.req_id, &e.base, NULL, 0, NULL, NULL);
		return;
	}
	/* The copy now belongs to the reply; freed once written. */
	gc->copy = NULL;
	cp->c = qr->c;
	conn_ref(cp->c);
	reply_send(qr->c, qr->q.type, qr->q.req_id, &e.base, cp->lent ? cp->lent : cp->bytes, cp->n, copy_sent, cp);
}

static void get_release(struct qreq *qr)
{
	struct get_cmd *gc = (struct get_cmd *)qr;

	if (gc->copy)
		copy_free(qr->c, gc->copy);
	if (gc->page)
		hostpage_unref(gc->page);
	buffer_unref(gc->b);
}

/* The GET names a host page: where its bytes land (0), or < 0 with err. */
static int get_landing(struct conn *c, const Pprpc__TensorGet *m, struct hostpage **ret_p, uint8_t **ret_dst,
		       char *err, size_t errlen)
{
	struct hostpage *p = hostpage_get(c->d, &c->own, m->host_page);

	if (!p) {
		snprintf(err, errlen, "TENSOR_GET: no such host page");
		return PPRPC_EINVAL;
	}
	*ret_p = p;
	return hostpage_region(p, m->host_page_offset, m->size, ret_dst, err, errlen);
}

void h_tensor_get(struct conn *c, struct request *r)
{
	const Pprpc__TensorGet *m = (const Pprpc__TensorGet *)r->msg;
	Pprpc__Empty e = PPRPC__EMPTY__INIT;
	struct hostpage *page = NULL;
	uint8_t *land = NULL;
	struct get_cmd *gc;
	char err[256];
	struct dbuf *b;
	int rc;

	rc = buffer_region(c->d, &c->own, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && m->host_page)
		rc = get_landing(c, m, &page, &land, err, sizeof(err));
	else if (rc == 0 && m->size > c->d->opts.max_bulk) {
		snprintf(err, sizeof(err), "TENSOR_GET of %" PRIu64 " bytes exceeds the bulk limit %" PRIu64,
			 m->size, c->d->opts.max_bulk);
		rc = PPRPC_ETOOBIG;
	}
	if (rc < 0) {
		/* Every GET gets its reply: the client waits for the bytes. */
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	buffer_ref(b);
	if (!land && !(r->hdr.flags & FRAME_F_QUEUED) && device_host_visible(b->dev) &&
	    stream_idle(&c->streams[b->dev->index])) {
		reply_send(c, r->hdr.type, r->hdr.req_id, &e.base, b->ptr + m->offset, m->size, get_sent, b);
		return;
	}
	gc = calloc(1, sizeof(*gc));
	if (!gc) {
		buffer_unref(b);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	gc->b = b;
	gc->offset = m->offset;
	gc->size = m->size;
	if (land) {
		gc->page = page;
		gc->land = land;
		hostpage_ref(page);
		c->d->stats.host_page_gets++;
		c->d->stats.host_page_bytes += m->size;
	}
	gc->qr.staged = land ? 0 : m->size;
	gc->qr.always_reply = 1;
	gc->qr.reply = get_reply;
	gc->qr.release = get_release;
	gc->qr.q.ready = get_ready;
	qreq_push(&gc->qr, c, r, b->dev, get_exec);
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

	rc = buffer_region(c->d, &c->own, m->src_buffer, m->src_offset, m->size, &src, err, sizeof(err));
	if (rc == 0)
		rc = buffer_region(c->d, &c->own, m->dst_buffer, m->dst_offset, m->size, &dst, err, sizeof(err));
	if (rc == 0 && src->dev != dst->dev) {
		snprintf(err, sizeof(err), "TENSOR_COPY between devices %s and %s is not supported",
			 src->dev->name, dst->dev->name);
		rc = PPRPC_EUNSUPP;
	}
	if (rc < 0) {
		qreq_refuse(c, r, rc, err);
		return;
	}
	cc = calloc(1, sizeof(*cc));
	if (!cc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
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

/*
 * daemon/handlers/h_fill.c — TENSOR_FILL: a tensor's bytes from this rank's
 * own storage (doc/weights.md).
 *
 * The fill takes its place in the connection's queue on the device, like a
 * SET, so it lands after what was queued before it (the padding a client
 * zeroes) and before what comes after (the graphs that read the weights).
 * On the worker it looks for the model file with the client's identity
 * (daemon/weights: verified by content hash, never by name) and reads the
 * range, else the cache entry under the key; into the buffer itself when
 * the host can address it, else through a bounce buffer the device uploads
 * from.  The reply says where the bytes came from, or why they could not be
 * found: that failure is the client's cue to send them, so it fails this
 * request only (the client does not mark it queued: no sticky error), and
 * the bytes it sends next overwrite anything half-read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/device/device.h"
#include "daemon/handlers/filerange.h"
#include "daemon/objects/buffer.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/reply.h"
#include "daemon/weights/weights.h"
#include "proto/frame.h"
#include "pprpc/types.h"

/* Bounce buffer pieces for device memory the host cannot address. */
#define FILL_PIECE ((uint64_t)64 << 20)

struct fill_cmd {
	struct qreq qr;
	struct dbuf *b;
	struct wsrc *w;
	uint64_t offset, size;
	int has_file, has_key;
	struct filesum id;
	uint64_t file_offset;
	char hint[256];
	uint8_t key[32];
	/* the outcome, for the reply */
	uint32_t source;
	char file[256];
	uint64_t ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The file's range into the tensor: straight in, or piece by piece through
 * host memory. */
static int from_file(struct fill_cmd *fc, struct wfile *f, char *err, size_t errlen)
{
	struct device *dev = fc->b->dev;
	struct pprpcd *d = fc->qr.c->d;
	uint64_t piece = fc->size < FILL_PIECE ? fc->size : FILL_PIECE;
	void *bounce;
	int rc = 0;

	if (device_host_visible(dev))
		return wfile_read(fc->w, f, fc->file_offset, fc->size, fc->b->ptr + fc->offset, err, errlen);
	bounce = hostmem_alloc(&d->hostmem, piece, &rc, err, errlen);
	if (!bounce)
		return rc;
	for (uint64_t done = 0; done < fc->size && rc == 0; done += piece) {
		uint64_t n = fc->size - done < piece ? fc->size - done : piece;

		rc = wfile_read(fc->w, f, fc->file_offset + done, n, bounce, err, errlen);
		if (rc == 0)
			rc = device_upload(dev, fc->b->ptr + fc->offset + done, bounce, n);
	}
	hostmem_free(&d->hostmem, bounce, piece);
	return rc;
}

/* The cache entry (checked as a whole: one read into host memory). */
static int from_cache(struct fill_cmd *fc, char *err, size_t errlen)
{
	struct device *dev = fc->b->dev;
	struct pprpcd *d = fc->qr.c->d;
	void *bounce;
	int rc = 0;

	if (device_host_visible(dev))
		return wsrc_cache_get(fc->w, fc->key, fc->size, fc->b->ptr + fc->offset, err, errlen);
	bounce = hostmem_alloc(&d->hostmem, fc->size, &rc, err, errlen);
	if (!bounce)
		return rc;
	rc = wsrc_cache_get(fc->w, fc->key, fc->size, bounce, err, errlen);
	if (rc == 0)
		rc = device_upload(dev, fc->b->ptr + fc->offset, bounce, fc->size);
	hostmem_free(&d->hostmem, bounce, fc->size);
	return rc;
}

static int fill_exec(struct qcmd *q)
{
	struct fill_cmd *fc = (struct fill_cmd *)q;
	char ferr[256] = "", cerr[256] = "";
	uint64_t t0 = now_ns();
	int rc = PPRPC_EUNSUPP;

	if (fc->has_file && wsrc_has_files(fc->w)) {
		struct wfile *f = NULL;

		rc = wsrc_file_find(fc->w, &fc->id, fc->hint[0] ? fc->hint : NULL, &f, ferr, sizeof(ferr));
		if (rc == 0) {
			snprintf(fc->file, sizeof(fc->file), "%s", wfile_name(f));
			rc = from_file(fc, f, ferr, sizeof(ferr));
			wfile_put(f);
		}
		if (rc == 0) {
			fc->source = 1;
			goto out;
		}
	} else if (fc->has_file) {
		snprintf(ferr, sizeof(ferr), "no model-dir on this rank");
	}
	if (fc->has_key && wsrc_has_cache(fc->w)) {
		rc = from_cache(fc, cerr, sizeof(cerr));
		if (rc == 0) {
			fc->source = 2;
			goto out;
		}
	} else if (fc->has_key) {
		snprintf(cerr, sizeof(cerr), "no weights-cache on this rank");
	}
	/* both reasons: the client logs why it has to send the bytes */
	snprintf(q->err, sizeof(q->err), "%s%s%s%s%s", ferr[0] ? "model file: " : "", ferr,
		 ferr[0] && cerr[0] ? "; " : "", cerr[0] ? "cache: " : "", cerr);
	return rc;
out:
	fc->ns = now_ns() - t0;
	return 0;
}

static void fill_reply(struct qreq *qr)
{
	struct fill_cmd *fc = (struct fill_cmd *)qr;
	Pprpc__TensorFillReply rep = PPRPC__TENSOR_FILL_REPLY__INIT;

	rep.source = fc->source;
	rep.file = fc->file;
	rep.read_ns = fc->ns;
	reply_send(qr->c, qr->q.type, qr->q.req_id, &rep.base, NULL, 0, NULL, NULL);
}

static void fill_release(struct qreq *qr)
{
	struct fill_cmd *fc = (struct fill_cmd *)qr;

	qr->c->d->stats.fills++;
	qr->c->d->stats.fills_failed += qr->q.status != 0;
	buffer_unref(fc->b);
}

/* The request's identity and key, checked before anything is queued. */
static int parse(const Pprpc__TensorFill *m, struct fill_cmd *fc, char *err, size_t errlen)
{
	if (m->file) {
		int rc = filerange_parse(m->file, fc->size, "TENSOR_FILL", &fc->id, &fc->file_offset, fc->hint,
					 sizeof(fc->hint), err, errlen);

		if (rc < 0)
			return rc;
		fc->has_file = 1;
	}
	if (m->cache_key.len) {
		if (m->cache_key.len != 32) {
			snprintf(err, errlen, "TENSOR_FILL: a cache key is 32 bytes, not %zu", m->cache_key.len);
			return PPRPC_EINVAL;
		}
		fc->has_key = 1;
		memcpy(fc->key, m->cache_key.data, 32);
	}
	if (!fc->has_file && !fc->has_key) {
		snprintf(err, errlen, "TENSOR_FILL names neither a file nor a cache key");
		return PPRPC_EINVAL;
	}
	return 0;
}

void h_tensor_fill(struct conn *c, struct request *r)
{
	const Pprpc__TensorFill *m = (const Pprpc__TensorFill *)r->msg;
	struct fill_cmd *fc;
	char err[256];
	struct dbuf *b;
	int rc;

	fc = calloc(1, sizeof(*fc));
	if (!fc) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	fc->size = m->size;
	rc = parse(m, fc, err, sizeof(err));
	if (rc == 0)
		rc = buffer_region(c->d, &c->own, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && !c->d->weights) {
		snprintf(err, sizeof(err), "TENSOR_FILL: this rank has neither model-dir nor weights-cache");
		rc = PPRPC_EUNSUPP;
	}
	if (rc == 0 && (r->hdr.flags & FRAME_F_QUEUED)) {
		/* a fill that fails is the client's cue to send the bytes: it
		 * must hear of it, and the queue must not fail with it */
		snprintf(err, sizeof(err), "TENSOR_FILL is answered, never queued without a reply");
		rc = PPRPC_EINVAL;
	}
	if (rc < 0) {
		free(fc);
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	buffer_ref(b);
	fc->b = b;
	fc->w = c->d->weights;
	fc->offset = m->offset;
	fc->qr.reply = fill_reply;
	fc->qr.release = fill_release;
	qreq_push(&fc->qr, c, r, b->dev, fill_exec);
}

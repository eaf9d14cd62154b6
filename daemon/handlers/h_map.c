/*
 * daemon/handlers/h_map.c — BUFFER_ALLOC with a file: a buffer that is this
 * rank's own mapping of a model file's range (doc/weights.md).
 *
 * llama.cpp, given a device that takes host pointers, makes each device's
 * weights one buffer over the range of the mapped model that holds them,
 * tensors at their file offsets.  A rank that has the same file under
 * model-dir (found and verified by identity as for TENSOR_FILL, never by
 * name) maps that range and serves it as the buffer: no byte is read, sent
 * or copied at load, the page cache is shared with every other mapping of
 * the file, and the pages are read when a graph first touches them.
 *
 * The file stays open with the mapping: every GRAPH_RUN that names the
 * buffer first checks it is still the file verified (h_graph.c; an fstat),
 * and one changed since (rewritten in place: the mapping would show the
 * new bytes) fails the run with the reason instead of computing with
 * bytes nobody verified.  The client's process then restarts, and its next
 * load finds no copy with the model's identity: the bytes are sent.
 *
 * The lookup may hash the file once (no sidecar yet): it runs on libuv's
 * threadpool with the mapping, the connection
 * holding its later frames meanwhile as for a large allocation.  A refusal
 * (no model-dir, no such file, a device computing on memory of its own, an
 * offset the device cannot address) is an error with the reason: the
 * client allocates and sends or fills instead.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <uv.h>

#include "daemon/device/device.h"
#include "daemon/handlers/filerange.h"
#include "daemon/objects/buffer.h"
#include "daemon/pprpcd.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/reply.h"
#include "daemon/server/server.h"
#include "daemon/weights/weights.h"
#include "pprpc/types.h"

/* A live mapping: its file, kept open to be checked. */
struct map_rec {
	struct wsrc *ws;
	struct wfile *f;
	struct wahead *ahead; /* what graphs will read, read ahead (NULL: off) */
};

struct map_work {
	uv_work_t w;
	struct conn *c;
	struct frame_hdr hdr;
	struct device *dev;
	struct wsrc *ws;
	struct filesum id;
	uint64_t offset, size;
	char hint[256];
	/* the outcome */
	void *ptr, *map;
	uint64_t maplen;
	struct map_rec *rec;
	char file[256];
	char err[320];
	int rc;
};

static void map_undo(void *ctx, void *map, uint64_t maplen, uint64_t size)
{
	struct map_rec *rec = ctx;

	wahead_stop(rec->ahead);
	wsrc_unmapped(rec->ws, map, size);
	munmap(map, (size_t)maplen);
	wfile_put(rec->f);
	free(rec);
}

static int map_check(void *ctx, char *err, size_t errlen)
{
	const struct map_rec *rec = ctx;

	return wfile_check(rec->f, "since it was mapped as a weights buffer", err, errlen);
}

static void map_want(void *ctx, uint64_t off, uint64_t len)
{
	wahead_want(((struct map_rec *)ctx)->ahead, off, len);
}

static void map_work(uv_work_t *w)
{
	struct map_work *mw = w->data;
	struct wfile *f = NULL;
	uint64_t align = device_info(mw->dev)->ggml_alignment;

	mw->rec = calloc(1, sizeof(*mw->rec));
	if (!mw->rec) {
		snprintf(mw->err, sizeof(mw->err), "out of memory");
		mw->rc = PPRPC_ENOMEM;
		return;
	}
	mw->rc = wsrc_file_find(mw->ws, &mw->id, mw->hint[0] ? mw->hint : NULL, &f, mw->err, sizeof(mw->err));
	if (mw->rc < 0)
		return;
	snprintf(mw->file, sizeof(mw->file), "%s", wfile_name(f));
	mw->rc = wfile_map(mw->ws, f, mw->offset, mw->size, align, &mw->ptr, &mw->map, &mw->maplen, &mw->rec->ahead,
			   mw->err, sizeof(mw->err));
	if (mw->rc < 0) {
		wfile_put(f);
		return;
	}
	mw->rec->ws = mw->ws;
	mw->rec->f = f;
}

static void map_after(uv_work_t *w, int status)
{
	struct map_work *mw = w->data;
	struct conn *c = mw->c;
	struct pprpcd *d = c->d;
	struct buffer_map bm = { mw->map, mw->maplen, mw->rec, map_undo, map_check, map_want };
	struct dbuf *b = NULL;
	int rc = status < 0 ? PPRPC_EINTERNAL : mw->rc;

	if (status < 0)
		snprintf(mw->err, sizeof(mw->err), "the mapping was cancelled");
	if (rc == 0 && (c->closing || c->closed))
		rc = PPRPC_ECANCELED; /* nobody to give it to */
	if (rc == 0)
		rc = buffer_adopt(d, &c->own, mw->dev, mw->ptr, mw->size, &bm, &b, mw->err, sizeof(mw->err));
	if (rc < 0 && mw->map)
		map_undo(mw->rec, mw->map, mw->maplen, mw->size);
	else if (rc < 0)
		free(mw->rec);
	if (!c->closing && !c->closed) {
		if (rc == 0) {
			Pprpc__BufferAllocReply rep = PPRPC__BUFFER_ALLOC_REPLY__INIT;

			rep.buffer = b->handle;
			rep.size = b->size;
			rep.mapped = mw->file;
			LOG(d, LOG_INFO_, "conn %" PRIu64 ": %s: buffer 0x%016" PRIx64 " is %.1f MiB of %s mapped from %" PRIu64,
			    c->id, mw->dev->name, b->handle, mw->size / 1048576.0, mw->file, mw->offset);
			reply_send(c, mw->hdr.type, mw->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
		} else {
			reply_error(c, mw->hdr.type, mw->hdr.req_id, rc, mw->err);
		}
	}
	conn_busy_end(c);
	conn_unref(c);
	free(mw);
	d->async_creates--;
	pprpcd_conn_gone(d);
}

void h_buffer_map(struct conn *c, struct request *r, struct device *dev)
{
	const Pprpc__BufferAlloc *m = (const Pprpc__BufferAlloc *)r->msg;
	struct map_work *mw = calloc(1, sizeof(*mw));
	char err[320];
	int rc = 0;

	if (!mw) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	rc = filerange_parse(m->file, m->size, "BUFFER_ALLOC (file)", &mw->id, &mw->offset, mw->hint,
			     sizeof(mw->hint), err, sizeof(err));
	if (rc == 0 && m->size == 0) {
		snprintf(err, sizeof(err), "buffer size must be > 0");
		rc = PPRPC_EINVAL;
	}
	if (rc == 0 && (!c->d->weights || !wsrc_has_files(c->d->weights))) {
		snprintf(err, sizeof(err), "BUFFER_ALLOC (file): no model-dir on this rank");
		rc = PPRPC_EUNSUPP;
	}
	if (rc == 0 && !c->d->opts.map_model_files) {
		snprintf(err, sizeof(err), "BUFFER_ALLOC (file): map-model-files is 0 on this rank");
		rc = PPRPC_EUNSUPP;
	}
	if (rc == 0 && !device_adopts(dev)) {
		snprintf(err, sizeof(err), "BUFFER_ALLOC (file): %s computes on memory of its own, not on a mapped file",
			 dev->name);
		rc = PPRPC_EUNSUPP;
	}
	if (rc < 0) {
		free(mw);
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	mw->w.data = mw;
	mw->c = c;
	mw->hdr = r->hdr;
	mw->dev = dev;
	mw->ws = c->d->weights;
	mw->size = m->size;
	if (uv_queue_work(c->d->loop, &mw->w, map_work, map_after) < 0) {
		free(mw);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINTERNAL, "cannot queue the mapping");
		return;
	}
	conn_ref(c);
	conn_busy_begin(c);
	c->d->async_creates++;
}

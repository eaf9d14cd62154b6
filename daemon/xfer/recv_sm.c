/* daemon/xfer/recv_sm.c — the destination state machine (see recv_sm.h). */
#include "daemon/xfer/recv_sm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

void recv_sm_init(struct recv_sm *r, uint64_t id, uint64_t size, bool ipc_asked)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->size = size;
	r->ipc_asked = ipc_asked;
	r->direct_from = UINT64_MAX;
}

void recv_sm_fini(struct recv_sm *r)
{
	free(r->ich);
	r->ich = NULL;
	r->nich = r->cap_ich = 0;
}

void recv_sm_fail(struct recv_sm *r, int code, const char *why)
{
	if (r->error)
		return;
	r->error = code;
	snprintf(r->errmsg, sizeof(r->errmsg), "%.250s", why ? why : "");
}

/* An IPC announcement (bytes in the source's pool; nothing follows on the
 * link) or, after them, the empty chunk at offset = size that ends the
 * PULL.  Only when we asked for IPC, in order, one pool per transfer. */
static int on_ipc(struct recv_sm *r, uint64_t bulk_len, const struct xr_chunk_msg *m)
{
	if (!r->ipc_asked || bulk_len || m->offset != r->expect_off)
		return PPRPC_EPROTO;
	r->cur_len = m->size;
	if (m->size == 0)
		return m->offset == r->size && !m->handle_len ? 0 : PPRPC_EPROTO;
	if (m->handle_len != XR_HANDLE || m->size > r->size - m->offset)
		return PPRPC_EPROTO;
	if (r->nich && memcmp(r->handle, m->handle, XR_HANDLE))
		return PPRPC_EPROTO;
	if (r->nich == r->cap_ich) {
		uint32_t cap = r->cap_ich ? 2 * r->cap_ich : 8;
		struct xr_ichunk *n = realloc(r->ich, cap * sizeof(*n));

		if (!n)
			return PPRPC_ENOMEM;
		r->ich = n;
		r->cap_ich = cap;
	}
	memcpy(r->handle, m->handle, XR_HANDLE);
	r->pool_bytes = m->pool_bytes;
	r->ich[r->nich].off = m->offset;
	r->ich[r->nich].len = m->size;
	r->ich[r->nich].pool_off = m->pool_off;
	r->nich++;
	return 0;
}

int recv_sm_on_chunk(struct recv_sm *r, int code, const char *errmsg, uint64_t bulk_len,
		     const struct xr_chunk_msg *m, enum xr_land *ret_land, uint64_t *ret_off)
{
	*ret_land = XR_LAND_NONE;
	*ret_off = 0;
	r->cur_code = code;
	if (code < 0) {
		char why[200];

		snprintf(why, sizeof(why), "the source refused: %.150s", errmsg ? errmsg : "");
		recv_sm_fail(r, code, why);
		return 0;
	}
	r->cur_land = m->landed;
	if (m->landed) {
		/* One answer for the whole transfer, and only to an offer. */
		if (!r->land_offered || bulk_len || m->handle_len || m->offset != 0 || m->size != r->size ||
		    r->expect_off != 0 || r->land_avail)
			return PPRPC_EPROTO;
		r->cur_ipc = false;
		r->cur_len = m->size;
		return 0;
	}
	r->cur_ipc = m->handle_len > 0 || (m->size == 0 && r->nich);
	if (r->cur_ipc)
		return on_ipc(r, bulk_len, m);
	/* Chunks come in order, contiguous, within the transfer. */
	if (m->offset != r->expect_off || m->size != bulk_len || m->size == 0 || m->size > r->size - m->offset)
		return PPRPC_EPROTO;
	r->cur_len = m->size;
	/* Once the RECV runs, the region is its own: later chunks go straight
	 * there, saving the staging copy. */
	if (r->dst_claimed && r->direct_from == UINT64_MAX)
		r->direct_from = m->offset;
	*ret_land = r->dst_claimed ? XR_LAND_DST : XR_LAND_STAGE;
	*ret_off = m->offset;
	return 0;
}

int recv_sm_on_reply_done(struct recv_sm *r, bool more)
{
	int flags = 0;

	if (r->cur_code == 0) {
		r->expect_off += r->cur_len;
		if (r->cur_land)
			r->land_avail = true;
		else if (r->cur_ipc)
			r->ipc_avail = r->expect_off;
		else
			r->arrived = r->expect_off;
		/* IPC chunks after the RECV ended: nobody will copy them. */
		if (r->cur_ipc && r->cur_len && r->finished)
			flags |= XR_DONE_RELEASE_LATE;
		if (!more && r->expect_off != r->size)
			recv_sm_fail(r, PPRPC_EPROTO, "the source ended the transfer early");
	}
	if (!more)
		flags |= XR_DONE_LAST;
	return flags;
}

/* ---- worker ------------------------------------------------------------------ */

bool recv_sm_ready(const struct recv_sm *r, bool stop)
{
	if (!r->started)
		return true;
	return r->arrived > r->copied || r->ipc_avail > r->enq_bytes || r->error || stop ||
	       (r->land_avail && !r->land_copied);
}

void recv_sm_step(struct recv_sm *r, bool dst_visible, bool stop, struct xr_act *a)
{
	uint64_t pending;

	memset(a, 0, sizeof(*a));
	/* Chunks may land straight in host-addressable memory only; from now
	 * on the region belongs to this RECV (its stream waits behind it). */
	if (!r->started) {
		r->started = true;
		if (dst_visible) {
			r->dst_claimed = true;
			a->claim = true;
		}
	}
	if (r->error) {
		a->kind = XR_ACT_FAIL;
		a->status = r->error;
		return;
	}
	if (r->land_avail && !r->land_copied) {
		a->kind = XR_ACT_LAND;
		return;
	}
	/* Start the copy of every chunk announced so far; they run on the
	 * device while more are announced. */
	if (r->ich_enq < r->nich) {
		a->kind = XR_ACT_IPC_COPY;
		a->ich = r->ich[r->ich_enq];
		return;
	}
	/* Wait once all are started, or when the copies not yet released
	 * hold half the source's pool (it may be waiting for those slots to
	 * capture the rest: a transfer larger than its pool). */
	pending = r->enq_bytes - r->copied;
	if (r->nich && pending && (r->enq_bytes >= r->size || pending >= r->pool_bytes / 2)) {
		a->kind = XR_ACT_IPC_WAIT;
		return;
	}
	if (r->arrived > r->copied) {
		/* Chunks that arrived before the RECV ran wait in the stage. */
		uint64_t to = r->arrived < r->direct_from ? r->arrived : r->direct_from;

		if (r->copied < to) {
			a->kind = XR_ACT_UPLOAD;
			a->from = r->copied;
			a->to = to;
			a->upto = r->arrived;
			return;
		}
		r->copied = r->arrived;
	}
	if (r->copied == r->size) {
		a->kind = XR_ACT_DONE;
		return;
	}
	if (stop) {
		a->kind = XR_ACT_FAIL;
		a->status = PPRPC_ECANCELED;
		a->cancelled = true;
		return;
	}
	a->kind = XR_ACT_WAIT;
}

void recv_sm_copy_started(struct recv_sm *r)
{
	r->enq_bytes += r->ich[r->ich_enq].len;
	r->ich_enq++;
}

bool recv_sm_copies_done(struct recv_sm *r)
{
	r->copied = r->enq_bytes;
	r->ipc_copied = r->copied;
	return r->copied < r->size;
}

void recv_sm_copy_failed(struct recv_sm *r, const char *why)
{
	snprintf(r->ipc_err, sizeof(r->ipc_err), "%.199s", why);
}

void recv_sm_uploaded(struct recv_sm *r, const struct xr_act *a)
{
	/* Not r->arrived: bytes that arrived since the step may sit in the
	 * stage (their chunk began before the region was claimed). */
	r->copied = a->upto;
}

void recv_sm_land_copied(struct recv_sm *r)
{
	r->land_copied = true;
	r->copied = r->size;
}

/* ---- loop: releases --------------------------------------------------------------- */

bool recv_sm_release_due(struct recv_sm *r, bool error, uint64_t done)
{
	if (r->release_sent)
		return false;
	if (error || done == r->size)
		r->release_sent = true;
	r->released_upto = done;
	return true;
}

uint64_t recv_sm_progress(const struct recv_sm *r)
{
	uint64_t done = r->ipc_copied;

	return done > r->released_upto && done < r->size ? done : 0;
}

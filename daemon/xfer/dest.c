/*
 * daemon/xfer/dest.c — the destination half's shell around recv_sm: the PULL
 * over the peer link (replies land in the stage or the region, IPC
 * announcements are recorded), the RECV command on its device worker
 * (uploads, IPC copies, their waits), and the PullReleases that give the
 * source its IPC slots back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exec/stream.h"
#include "daemon/objects/buffer.h"
#include "daemon/peer/peer.h"
#include "daemon/core/conn_if.h"
#include "daemon/core/request.h"
#include "daemon/xfer/path.h"
#include "daemon/xfer/xdev.h"
#include "daemon/xfer/xfer_impl.h"
#include "pprpc/types.h"
#include "proto/auth.h"
#include "proto/meta.h"
#include "proto/msgtype.h"
#include "util/expect.h"

/* A held RECV waiting for its lead spins this last stretch (recv_hold_due). */
#define HOLD_SPIN_US 50

/* ---- ranks whose IPC copies failed ------------------------------------------------ */

/* Later transfers from such a rank use the staging path (said once in the
 * log, with the reason). */
struct ipc_block {
	struct ipc_block *next;
	char rank[64];
};

static bool ipc_blocked(const struct xfer *xf, const char *rank)
{
	for (const struct ipc_block *b = xf->blocks; b; b = b->next)
		if (!strcmp(b->rank, rank))
			return true;
	return false;
}

static void ipc_block(struct xfer *xf, const char *rank, const char *why)
{
	struct ipc_block *b;

	if (ipc_blocked(xf, rank) || !(b = calloc(1, sizeof(*b))))
		return;
	snprintf(b->rank, sizeof(b->rank), "%s", rank);
	b->next = xf->blocks;
	xf->blocks = b;
	LOG(xf->d, LOG_WARN_, "IPC from %s does not work (%s): its transfers use the staging path from now on",
	    rank, why);
}

/* ---- releases ---------------------------------------------------------------------- */

static int release_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
			size_t len, void **bulk_dst)
{
	(void)arg, (void)code, (void)errmsg, (void)h, (void)meta, (void)len, (void)bulk_dst;
	return 0;
}

static void release_done(void *arg, const struct frame_hdr *h, int more)
{
	(void)arg, (void)h, (void)more;
}

static void release_fail(void *arg, int code, const char *why)
{
	(void)arg, (void)code, (void)why;
}

/* The source's answer changes nothing here: the RECV is over. */
static const struct preq_ops release_ops = { .meta = release_meta, .done = release_done, .fail = release_fail };

/* Tell the source which of its pool slots may be reused: the copied prefix
 * (done < size: progress), or all of them (final: done = size, or an
 * error). */
static void xrecv_release_ipc(struct xrecv *xr, const char *error, uint64_t done)
{
	Pprpc__PullRelease rel = PPRPC__PULL_RELEASE__INIT;
	struct pprpcd *d = xr->xf->d;
	char err[160];

	if (!recv_sm_release_due(&xr->sm, error != NULL, done))
		return;
	rel.transfer_id = xr->sm.id;
	rel.done = done;
	rel.error = (char *)(error ? error : "");
	if (peer_request(d, xr->peer, MSG_PULL_RELEASE, &rel.base, &release_ops, NULL, err, sizeof(err)) < 0)
		LOG(d, LOG_NOTICE_, "transfer %" PRIu64 ": cannot release the source's GPU staging: %s", xr->sm.id,
		    err);
}

/* Loop: progress releases for RECVs whose workers copied more.  A queued
 * RECV is alive: recv_release takes it off the list before it can go. */
void xdst_progress_pump(struct xfer *xf)
{
	for (;;) {
		struct xrecv *xr;
		uint64_t done = 0;

		pthread_mutex_lock(&xf->lock);
		xr = xf->progress;
		if (xr) {
			xf->progress = xr->progress_next;
			xr->progress_queued = 0;
			done = recv_sm_progress(&xr->sm);
		}
		pthread_mutex_unlock(&xf->lock);
		if (!xr)
			return;
		if (done)
			xrecv_release_ipc(xr, NULL, done);
	}
}

/* ---- the transfer's lifetime ----------------------------------------------------- */

static void xrecv_unref(struct xrecv *xr)
{
	if (--xr->refs > 0)
		return;
	/* Only now: a chunk may still be landing in the region after the
	 * RECV command itself failed or was cancelled. */
	xfer_table_del(&xr->xf->recvs, &xr->node);
	land_settle(xr->xf, &xr->land, xr->land_clean);
	buffer_unref(xr->b);
	hostmem_free(&xr->xf->d->hostmem, xr->stage, xr->sm.size);
	recv_sm_fini(&xr->sm);
	free(xr);
}

static void xrecv_fail(struct xrecv *xr, int code, const char *why)
{
	pthread_mutex_lock(&xr->xf->lock);
	recv_sm_fail(&xr->sm, code, why);
	pthread_mutex_unlock(&xr->xf->lock);
	pprpcd_kick_queues(xr->xf->d);
}

/* ---- a RECV held on the GPU ------------------------------------------------------------ */

/*
 * The device's stream waits for the landing slot's bell and copies the
 * slot into the region (xdev_land_submit); the GRAPH_RUN behind the RECV
 * is launched behind that at once.  The bell is a store by the source, so
 * every way the bytes do not come from it must ring it here, or the
 * stream stays held: the link's bytes go into the slot first (the source
 * could not use the page); a failure (the link lost, an answer that says
 * landed with nothing there, the connection closed, the daemon stopping)
 * is recorded first and the slot's size set to none, so the RECV fails
 * with it and the run behind it reports it ran on what the RECV left.
 */
static void held_ring_failed(struct xrecv *xr, int code, const char *why)
{
	xrecv_fail(xr, code, why);
	land_ring(&xr->land, NULL, 0);
}

/* Loop: the PULL ended (answered says the source put the bytes in the
 * slot). */
static void held_pull_end(struct xrecv *xr, bool answered)
{
	bool full;
	int err;

	if (answered && land_landed(&xr->land, xr->sm.size) != 0)
		return; /* rung by the source (another size: the RECV says so) */
	pthread_mutex_lock(&xr->xf->lock);
	err = xr->sm.error;
	full = !err && !answered && xr->sm.arrived == xr->sm.size;
	pthread_mutex_unlock(&xr->xf->lock);
	if (full) {
		xr->held_by_link = true;
		land_ring(&xr->land, xr->stage, xr->sm.size);
		return;
	}
	if (!err)
		xrecv_fail(xr, PPRPC_EPROTO,
			   answered ? "the source said the bytes landed, and the slot holds none of this transfer"
				    : "the transfer ended without its bytes");
	land_ring(&xr->land, NULL, 0);
}

/* Loop: c closed (NULL: the daemon stops): the held RECVs it had fail. */
void xdst_release_held(struct xfer *xf, const struct conn *c)
{
	for (struct xrecv *xr = xf->held; xr; xr = xr->held_next)
		if (xr->held && (!c || xr->conn == c))
			held_ring_failed(xr, PPRPC_ECANCELED, c ? "the connection closed" : "the daemon is stopping");
}

/* ---- loop: the PULL's replies ------------------------------------------------------- */

static int pull_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
		     size_t len, void **bulk_dst)
{
	struct xrecv *xr = arg;
	struct xr_chunk_msg cm = { 0 };
	ProtobufCMessage *m = NULL;
	enum xr_land land;
	uint64_t off;
	int rc;

	if (code == 0) {
		const Pprpc__PullChunk *pc;

		if (meta_unpack(&pprpc__pull_chunk__descriptor, meta, len, &m) < 0)
			return PPRPC_EPROTO;
		pc = (const Pprpc__PullChunk *)m;
		cm.offset = pc->offset;
		cm.size = pc->size;
		cm.handle = pc->ipc_handle.data;
		cm.handle_len = pc->ipc_handle.len;
		cm.pool_off = pc->ipc_offset;
		cm.pool_bytes = pc->ipc_pool_bytes;
		cm.landed = pc->landed;
		xr->land_refused |= pc->land_refused;
		/* Before anything of a CMA announcement is recorded (the worker
		 * copies what is): it must name the linked process's pool. */
		if (cm.handle_len == XR_HANDLE && xr->cma && xr->sm.ipc_asked && !xr->cma_checked) {
			char why[220];

			rc = xpath_cma_check(xr->xf, xr->peer, cm.handle, why, sizeof(why));
			if (rc < 0) {
				LOG(xr->xf->d, LOG_WARN_, "transfer %" PRIu64 " from %s refused: %s", xr->sm.id, xr->peer, why);
				xrecv_fail(xr, rc, why);
				ipc_block(xr->xf, xr->peer, why);
				meta_free(m);
				return PPRPC_EPROTO; /* the link's stream cannot be trusted */
			}
			xr->cma_checked = true;
		}
	}
	pthread_mutex_lock(&xr->xf->lock);
	rc = recv_sm_on_chunk(&xr->sm, code, errmsg, h->bulk_len, &cm, &land, &off);
	if (rc == 0 && land == XR_LAND_DST)
		*bulk_dst = xr->dst + off;
	else if (rc == 0 && land == XR_LAND_STAGE)
		*bulk_dst = xr->stage + off;
	pthread_mutex_unlock(&xr->xf->lock);
	meta_free(m);
	if (code < 0)
		pprpcd_kick_queues(xr->xf->d);
	return rc;
}

static void pull_done(void *arg, const struct frame_hdr *h, int more)
{
	struct xrecv *xr = arg;
	bool answered, clean;
	int flags;

	(void)h;
	pthread_mutex_lock(&xr->xf->lock);
	flags = recv_sm_on_reply_done(&xr->sm, more);
	answered = xr->sm.land_avail;
	clean = xr->sm.cur_code == 0;
	pthread_mutex_unlock(&xr->xf->lock);
	pprpcd_kick_queues(xr->xf->d);
	if (flags & XR_DONE_RELEASE_LATE)
		xrecv_release_ipc(xr, "the RECV ended before the transfer arrived", 0);
	if (flags & XR_DONE_LAST) {
		/* The source answered for the whole transfer: it writes the
		 * landing slot no more. */
		xr->land_clean = clean;
		if (answered)
			land_answered(xr->xf, &xr->land);
		else if (clean)
			land_unused(xr->xf, &xr->land, xr->land_refused);
		if (xr->held)
			held_pull_end(xr, answered);
		xrecv_unref(xr);
	}
}

static void pull_fail(void *arg, int code, const char *why)
{
	struct xrecv *xr = arg;
	char msg[256];

	snprintf(msg, sizeof(msg), "link to the source %.63s lost: %.120s", xr->peer, why);
	if (xr->held)
		held_ring_failed(xr, code, msg);
	else
		xrecv_fail(xr, code, msg);
	xrecv_unref(xr);
}

static const struct preq_ops pull_ops = { .meta = pull_meta, .done = pull_done, .fail = pull_fail };

/* ---- worker: the RECV command ------------------------------------------------------- */

struct recv_cmd {
	struct qreq qr;
	struct xrecv *xr;
	struct dbuf *b;
	uint64_t offset;
	uint64_t t_first;       /* when the IPC copies not yet waited for began */
	uint64_t wait_from;     /* worker: waits in place for the landing slot since then (0: not begun) */
	bool hold_failed;       /* worker: the device's stream would not hold it */
};

/* Worker, under the queue lock: the first time always (to claim the
 * region for direct landing), then when bytes arrived or it ended. */
static int recv_ready(struct qcmd *q)
{
	struct recv_cmd *rc = (struct recv_cmd *)q;
	struct xrecv *xr = rc->xr;
	bool ready;

	if (xr->held)
		return 1; /* handed to the device at once */
	pthread_mutex_lock(&xr->xf->lock);
	ready = recv_sm_ready(&xr->sm, atomic_load(&xr->xf->d->stopping_workers));
	pthread_mutex_unlock(&xr->xf->lock);
	/* The bytes landed, or the worker may still poll for them. */
	if (!ready && xr->land.pg && !xr->sm.land_copied)
		ready = land_landed(&xr->land, xr->sm.size) != 0 ||
			(rc->wait_from && xfer_now_us() < rc->wait_from + xr->xf->d->opts.land_wait_us);
	return ready;
}

/* Worker: wait in place for the bytes to land (1) or the slot to hold
 * another size (< 0), until `until` (xfer_now_us); 0 when the time is up,
 * the device's queue moved (other work may be ready: the worker looks and
 * comes back while the time lasts), the transfer took another turn, or the
 * stream is cancelled.  Asleep on the page's wake word until poll_from,
 * polling the bell from then on (land.h). */
static int land_wait_until(struct recv_cmd *rc, struct device *dev, uint64_t poll_from, uint64_t until)
{
	struct xrecv *xr = rc->xr;
	struct xfer *xf = xr->xf;
	uint64_t seen = xdev_queue_activity(dev), now;
	int l = 0;

	for (unsigned i = 0; l == 0; i++) {
		bool other;

		if ((l = land_landed(&xr->land, xr->sm.size)) != 0)
			break;
		if (i & 255) {
			cpu_relax();
			continue;
		}
		now = xfer_now_us();
		if (now >= until || atomic_load(&rc->qr.q.stream->canceled) || atomic_load(&xf->d->stopping_workers))
			return 0;
		pthread_mutex_lock(&xf->lock);
		other = xr->sm.error || xr->sm.arrived || xr->sm.ipc_avail || xr->sm.land_avail;
		pthread_mutex_unlock(&xf->lock);
		if (other)
			return 0;
		if (now < poll_from) {
			/* Named to the queue before its count is read: work that
			 * comes after the check moves the word and ends the sleep. */
			uint32_t seq;

			xdev_queue_wake_word(dev, land_wake_word(&xr->land));
			seq = land_wake_seq(&xr->land);
			if (xdev_queue_activity(dev) == seen)
				l = land_sleep(&xr->land, xr->sm.size, seq, poll_from - now);
			xdev_queue_wake_word(dev, NULL);
		}
		if (l == 0 && xdev_queue_activity(dev) != seen)
			return 0;
	}
	return l;
}

/* Worker: wait in place for a RECV's bytes (land_wait_until) for up to
 * land-wait-us from its first wait; a GPU device's worker (poll) polls the
 * bell from shortly before the bytes are expected. */
static int recv_land_wait(struct recv_cmd *rc, struct device *dev, bool poll)
{
	struct xrecv *xr = rc->xr;
	uint64_t until;
	int l;

	if (!rc->wait_from)
		rc->wait_from = xfer_now_us();
	until = rc->wait_from + xr->xf->d->opts.land_wait_us;
	l = land_wait_until(rc, dev, !poll ? until : rc->wait_from + expect_spin_from_us(land_expected_us(&xr->land)),
			    until);
	if (l > 0)
		land_note_wait(&xr->land, xfer_now_us() - rc->wait_from);
	return l;
}

/* Worker: the bytes are in the landing slot (l > 0): into the region. */
static int recv_land_take(struct recv_cmd *rc, struct device *dev, uint8_t *dst, int l)
{
	struct xrecv *xr = rc->xr;
	struct qcmd *q = &rc->qr.q;
	int st;

	if (l <= 0) {
		snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 " from %.63s: %s", xr->sm.id, xr->peer,
			 l < 0 ? "the landing slot holds another size"
			       : "the source said the bytes landed, and the slot holds none of this transfer");
		return PPRPC_EPROTO;
	}
	st = xdev_upload(dev, dst, land_data(&xr->land), xr->sm.size);
	if (st < 0) {
		snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 ": placing the landed bytes failed",
			 xr->sm.id);
		return st;
	}
	pthread_mutex_lock(&xr->xf->lock);
	recv_sm_land_copied(&xr->sm);
	pthread_mutex_unlock(&xr->xf->lock);
	return 0;
}

/* An IPC copy or its wait failed: this RECV fails with the reason, and
 * the rank's later transfers take the staging path (recv_release). */
static int recv_ipc_failed(struct recv_cmd *rc, int st, const char *why)
{
	struct xrecv *xr = rc->xr;

	xr->copy_us += xfer_now_us() - rc->t_first;
	rc->t_first = 0;
	pthread_mutex_lock(&xr->xf->lock);
	recv_sm_copy_failed(&xr->sm, why);
	pthread_mutex_unlock(&xr->xf->lock);
	snprintf(rc->qr.q.err, sizeof(rc->qr.q.err), "RECV of transfer %" PRIu64 " from %.63s by IPC: %.150s",
		 xr->sm.id, xr->peer, why);
	return st;
}

/* Worker: wait for the IPC copies started; their slots may then go back
 * to the source (the loop sends the progress release). */
static int recv_ipc_wait(struct recv_cmd *rc, const struct xpath *p)
{
	struct xrecv *xr = rc->xr;
	struct xfer *xf = xr->xf;
	uint64_t tw = xfer_now_us();
	char why[200] = "";
	bool progress;
	int st;

	st = p->ops->copy_wait(p, why, sizeof(why));
	LOG(xf->d, LOG_DEBUG_, "transfer %" PRIu64 ": IPC copies started %" PRIu64 " us before the wait, waited %" PRIu64
	    " us", xr->sm.id, tw - rc->t_first, xfer_now_us() - tw);
	if (st < 0)
		return recv_ipc_failed(rc, st, why);
	xr->copy_us += xfer_now_us() - rc->t_first;
	rc->t_first = 0;
	pthread_mutex_lock(&xf->lock);
	progress = recv_sm_copies_done(&xr->sm);
	if (progress && !xr->progress_queued) {
		xr->progress_queued = 1;
		xr->progress_next = xf->progress;
		xf->progress = xr;
	}
	pthread_mutex_unlock(&xf->lock);
	if (progress)
		uv_async_send(&xf->async);
	return 0;
}

/* The device's stream got past the bell and the copy (any thread): the
 * bytes are the transfer's if the bell is its generation with its size
 * and nothing failed it meanwhile. */
static void recv_held_done(void *arg, int status, const char *why)
{
	struct recv_cmd *rc = arg;
	struct xrecv *xr = rc->xr;
	uint64_t rung;
	char msg[256];
	int err, l;

	if (status < 0) {
		qreq_device_done(&rc->qr, status, why);
		return;
	}
	pthread_mutex_lock(&xr->xf->lock);
	err = xr->sm.error;
	if (err)
		snprintf(msg, sizeof(msg), "RECV of transfer %" PRIu64 " failed: %.200s", xr->sm.id, xr->sm.errmsg);
	pthread_mutex_unlock(&xr->xf->lock);
	if (err) {
		qreq_device_done(&rc->qr, err, msg);
		return;
	}
	l = land_landed(&xr->land, xr->sm.size);
	if (l <= 0) {
		snprintf(msg, sizeof(msg), "RECV of transfer %" PRIu64 " from %.63s: %s", xr->sm.id, xr->peer,
			 l < 0 ? "the landing slot holds another size" : "the slot holds none of this transfer");
		qreq_device_done(&rc->qr, PPRPC_EPROTO, msg);
		return;
	}
	/* How long it waited, from the source's stamp: the next one's lead
	 * is counted back from it (recv_hold_due). */
	rung = land_rung_us(&xr->land);
	if (rc->wait_from && rung > rc->wait_from)
		land_note_wait(&xr->land, rung - rc->wait_from);
	pthread_mutex_lock(&xr->xf->lock);
	recv_sm_land_copied(&xr->sm);
	pthread_mutex_unlock(&xr->xf->lock);
	qreq_device_done(&rc->qr, 0, NULL);
}

/* Worker: whether a held RECV goes to the device's stream now.  Not
 * sooner than land-hold-lead-us before its bytes are expected, so that the
 * GPU holds a stream on host memory only that long while the lead still
 * covers the next graph's prepare and launch (measured: no faster than
 * holding at once, doc/gpu-wait.md).  Meanwhile the worker sleeps on the
 * page's wake word (the source's ring moves it: the bytes that come early
 * go at once) and polls the last stretch (a wake-up from a timed sleep
 * comes tens of microseconds late here, bench/wake-probe.c).  false: the
 * device's queue moved first; the worker serves it and comes back. */
static bool recv_hold_due(struct recv_cmd *rc, struct device *dev)
{
	struct xrecv *xr = rc->xr;
	uint64_t lead = xr->xf->d->opts.land_hold_lead_us, wait_us = xr->xf->d->opts.land_wait_us;
	uint64_t seen = xdev_queue_activity(dev), est, until;

	if (!rc->wait_from)
		rc->wait_from = xfer_now_us();
	est = land_expected_us(&xr->land);
	if (!lead || est <= lead || !land_wait_ok(&xr->land))
		return true;
	/* No longer than a RECV waits in place at all: the worker serves no
	 * other stream's work meanwhile. */
	until = rc->wait_from + (est - lead < wait_us ? est - lead : wait_us);
	if (land_wait_until(rc, dev, until > HOLD_SPIN_US ? until - HOLD_SPIN_US : 0, until) != 0)
		return true;
	return xfer_now_us() >= until || xdev_queue_activity(dev) == seen;
}

/* Worker: hand the RECV to the device's stream. */
static int recv_hold(struct recv_cmd *rc, struct device *dev, uint8_t *dst)
{
	struct qcmd *q = &rc->qr.q;
	struct xrecv *xr = rc->xr;
	char why[200] = "";
	int st;

	st = xdev_land_submit(dev, q->stream, land_bell(&xr->land), xr->land.gen, dst, land_data(&xr->land),
			      xr->sm.size, recv_held_done, rc, why, sizeof(why));
	if (st == PPRPC_EUNSUPP) {
		/* Nothing on the stream: the worker waits for it as for any
		 * RECV, behind the stream's device work; later RECVs of the
		 * device are not held (recv_release says why). */
		rc->hold_failed = true;
		snprintf(q->err, sizeof(q->err), "%.200s", why);
		atomic_store(&xr->held, false);
		q->async_ok = 0;
		return QCMD_AGAIN;
	}
	if (st < 0) {
		/* A part may be on the stream: the loop's rings still release
		 * it (xr->held stays); later RECVs of the device are not held. */
		rc->hold_failed = true;
		snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 " on the GPU: %.200s", xr->sm.id, why);
		return st;
	}
	q->held = 1;
	return QCMD_PENDING;
}

/* Worker: carry out what recv_sm_step says — land what arrived in the
 * region, copy IPC chunks — and come back (QCMD_AGAIN) while bytes are on
 * their way: the device serves other streams meanwhile; this stream's later
 * commands stay behind the RECV. */
static int recv_exec(struct qcmd *q)
{
	struct recv_cmd *rc = (struct recv_cmd *)q;
	struct xrecv *xr = rc->xr;
	struct xfer *xf = xr->xf;
	struct device *dev = rc->b->dev;
	uint8_t *dst = rc->b->ptr + rc->offset;
	bool visible = xdev_host_visible(dev);
	struct xpath p;

	if (xr->held) {
		if (!recv_hold_due(rc, dev))
			return QCMD_AGAIN;
		return recv_hold(rc, dev, dst);
	}
	xpath_dest(dev, &p);
	/* The bytes may be in the landing slot before the source's answer
	 * comes: the worker waits for them in place a while. */
	if (xr->land.pg && !xr->sm.land_copied) {
		int l = land_landed(&xr->land, xr->sm.size);

		if (l == 0 && xf->d->opts.land_wait_us && land_wait_ok(&xr->land))
			l = recv_land_wait(rc, dev, !visible);
		if (l != 0) {
			int st = recv_land_take(rc, dev, dst, l);

			if (st < 0)
				return st;
		}
	}
	for (;;) {
		uint8_t handle[XR_HANDLE];
		char why[200] = "";
		struct xr_act a;
		int st;

		pthread_mutex_lock(&xf->lock);
		recv_sm_step(&xr->sm, visible, atomic_load(&xf->d->stopping_workers), &a);
		if (a.claim)
			xr->dst = dst;
		if (a.kind == XR_ACT_IPC_COPY)
			memcpy(handle, xr->sm.handle, sizeof(handle));
		if (a.kind == XR_ACT_FAIL && !a.cancelled)
			snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 " failed: %.200s", xr->sm.id,
				 xr->sm.errmsg);
		pthread_mutex_unlock(&xf->lock);
		switch (a.kind) {
		case XR_ACT_FAIL:
			if (a.cancelled)
				snprintf(q->err, sizeof(q->err), "RECV cancelled: shutting down");
			return a.status;
		case XR_ACT_DONE:
			return 0;
		case XR_ACT_WAIT:
			return QCMD_AGAIN;
		case XR_ACT_IPC_COPY:
			/* Started now, they run on the device while more are
			 * announced. */
			if (!rc->t_first)
				rc->t_first = xfer_now_us();
			st = p.ops->copy_in(&p, dst + a.ich.off, handle, a.ich.pool_off, a.ich.len, why, sizeof(why));
			if (st < 0)
				return recv_ipc_failed(rc, st, why);
			pthread_mutex_lock(&xf->lock);
			recv_sm_copy_started(&xr->sm);
			pthread_mutex_unlock(&xf->lock);
			continue;
		case XR_ACT_IPC_WAIT:
			st = recv_ipc_wait(rc, &p);
			if (st < 0)
				return st;
			continue;
		case XR_ACT_LAND:
			st = recv_land_take(rc, dev, dst, land_landed(&xr->land, xr->sm.size));
			if (st < 0)
				return st;
			continue;
		case XR_ACT_UPLOAD:
			st = xdev_upload(dev, dst + a.from, xr->stage + a.from, a.to - a.from);
			if (st < 0) {
				snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 ": placing the bytes failed",
					 xr->sm.id);
				return st;
			}
			pthread_mutex_lock(&xf->lock);
			recv_sm_uploaded(&xr->sm, &a);
			pthread_mutex_unlock(&xf->lock);
			continue;
		}
	}
}

static void recv_release(struct qreq *qr)
{
	struct recv_cmd *rc = (struct recv_cmd *)qr;
	struct xrecv *xr = rc->xr;
	struct xfer *xf = xr->xf;
	char ipc_err[200];
	uint32_t nich;

	pthread_mutex_lock(&xf->lock);
	nich = xr->sm.nich;
	snprintf(ipc_err, sizeof(ipc_err), "%s", xr->sm.ipc_err);
	if (xr->progress_queued) {
		for (struct xrecv **pp = &xf->progress; *pp; pp = &(*pp)->progress_next)
			if (*pp == xr) {
				*pp = xr->progress_next;
				break;
			}
		xr->progress_queued = 0;
	}
	pthread_mutex_unlock(&xf->lock);
	xr->sm.finished = true;
	if (xr->held_listed) {
		for (struct xrecv **pp = &xf->held; *pp; pp = &(*pp)->held_next)
			if (*pp == xr) {
				*pp = xr->held_next;
				break;
			}
		xr->held_listed = false;
	}
	if (rc->hold_failed && !xf->hold_off[xdev_index(rc->b->dev)]) {
		xf->hold_off[xdev_index(rc->b->dev)] = true;
		LOG(xf->d, LOG_WARN_, "%s: RECVs are not held on the GPU from now on: %s", xdev_name(rc->b->dev),
		    qr->q.err);
	}
	if (nich) {
		const char *why = ipc_err[0] ? ipc_err : qr->q.status < 0 ? "the RECV failed" : NULL;

		xrecv_release_ipc(xr, why, why ? 0 : xr->sm.size);
		if (ipc_err[0])
			ipc_block(xf, xr->peer, ipc_err);
	}
	xstats_add(xf->d, xr->peer, "recv",
		   nich ? "ipc" : xr->sm.land_copied && !xr->held_by_link ? "land" : peer_path(xf->d, xr->peer),
		   xr->sm.size, xr->t0_us,
		   xr->copy_us, qr->q.status < 0);
	buffer_unref(rc->b);
	xrecv_unref(xr);
}

/* ---- loop: the RECV request ------------------------------------------------------------ */

void xdst_recv(struct conn *c, struct request *r, const Pprpc__Recv *m, struct dbuf *b)
{
	Pprpc__Pull pull = PPRPC__PULL__INIT;
	struct pprpcd *d = conn_daemon(c);
	struct xfer *xf = d->xfer;
	struct recv_cmd *rc = calloc(1, sizeof(*rc));
	struct xrecv *xr = calloc(1, sizeof(*xr));
	bool ipc;
	char err[256];
	int code = PPRPC_ENOMEM;

	/* The landing stage counts under the memory floor (issue 19.14). */
	snprintf(err, sizeof(err), "out of memory");
	if (rc && xr)
		xr->stage = hostmem_alloc(&d->hostmem, m->size, &code, err, sizeof(err));
	if (!rc || !xr || !xr->stage)
		goto refuse;
	/* GPU to GPU on one host: ask for IPC (the source decides). */
	ipc = xdev_has_ipc(b->dev) && d->boot_id[0] && !ipc_blocked(xf, m->src_rank);
	xr->xf = xf;
	xr->cma = ipc && xdev_host_visible(b->dev);
	recv_sm_init(&xr->sm, m->transfer_id, m->size, ipc);
	xr->refs = 2;   /* the PULL's and the command's */
	xr->t0_us = xfer_now_us();
	snprintf(xr->peer, sizeof(xr->peer), "%s", m->src_rank);
	/* What proves to the source that this PULL is ours (PullCheck). */
	if (auth_random(xr->nonce, sizeof(xr->nonce)) < 0) {
		snprintf(err, sizeof(err), "no randomness for the transfer's nonce");
		code = PPRPC_EINTERNAL;
		goto refuse;
	}
	pull.transfer_id = m->transfer_id;
	pull.size = m->size;
	pull.nonce.data = xr->nonce;
	pull.nonce.len = sizeof(xr->nonce);
	/* A daemon of this host may write small ones into a page of ours. */
	if (d->opts.land && d->boot_id[0] && land_offer(xf, m->src_rank, m->size, &xr->land) == 0) {
		xr->sm.land_offered = true;
		pull.land_host = d->boot_id;
		pull.land_page = (char *)land_page_name(&xr->land);
		pull.land_slot = xr->land.slot;
		pull.land_gen = xr->land.gen;
		/* Held on the GPU while the source uses the page; the bytes
		 * then come by the page or the link, never by IPC. */
		xr->held = d->opts.land_hold && xdev_holds_lands(b->dev) && !xf->hold_off[xdev_index(b->dev)] &&
			   land_wait_ok(&xr->land) && land_pin_for(&xr->land, b->dev) == 0;
		if (xr->held) {
			ipc = false;
			xr->sm.ipc_asked = false;
			xr->cma = false;
		}
	}
	if (ipc)
		pull.ipc_host = d->boot_id;
	xfer_table_add(&xf->recvs, &xr->node, m->transfer_id);
	code = peer_request(d, m->src_rank, MSG_PULL, &pull.base, &pull_ops, xr, err, sizeof(err));
	if (code < 0) {
		xfer_table_del(&xf->recvs, &xr->node);
		goto refuse;
	}
	rc->xr = xr;
	rc->b = b;
	rc->offset = m->offset;
	xr->b = b;
	buffer_ref(b);  /* the command's */
	buffer_ref(b);  /* the transfer's */
	rc->qr.staged = m->size;
	rc->qr.release = recv_release;
	rc->qr.q.ready = recv_ready;
	/* While it waits for the bytes, the stream's next TENSOR_SETs (a
	 * decoded token's inputs) may run if they write elsewhere. */
	rc->qr.q.pass = QPASS_LETS;
	rc->qr.q.rgn_lo = (uintptr_t)(b->ptr + m->offset);
	rc->qr.q.rgn_hi = rc->qr.q.rgn_lo + m->size;
	if (xr->held) {
		/* Pure device work queued behind the stream's. */
		rc->qr.q.async_ok = 1;
		xr->conn = c;
		xr->held_next = xf->held;
		xf->held = xr;
		xr->held_listed = true;
	}
	qreq_push(&rc->qr, c, r, b->dev, recv_exec);
	return;
refuse:
	if (xr) {
		land_settle(xf, &xr->land, true); /* nobody heard of the slot */
		hostmem_free(&d->hostmem, xr->stage, m->size);
		recv_sm_fini(&xr->sm);
		free(xr);
	}
	free(rc);
	qreq_refuse(c, r, code, err);
}

/* A source asks whether a PULL it got is one of ours: the transfer it
 * names belongs to this rank, and it serves the bytes only to this rank's
 * own PULL.  The nonce went only to the source our RECV named. */
void xdst_pull_check(struct conn *c, struct request *r, const Pprpc__PullCheck *m)
{
	struct xfer *xf = conn_daemon(c)->xfer;
	char err[160];

	if (m->nonce.len == XFER_NONCE)
		for (struct xfer_node *n = xfer_table_find(&xf->recvs, m->transfer_id); n;
		     n = xfer_table_find_next(n)) {
			struct xrecv *xr = xfer_container(n, struct xrecv, node);

			if (auth_equal(xr->nonce, m->nonce.data, XFER_NONCE)) {
				reply_ok(c, r->hdr.type, r->hdr.req_id);
				return;
			}
		}
	snprintf(err, sizeof(err), "no RECV here pulls transfer %" PRIu64 " with that nonce", m->transfer_id);
	reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EAUTH, err);
}

void xdst_fini(struct xfer *xf)
{
	while (xf->blocks) {
		struct ipc_block *b = xf->blocks;

		xf->blocks = b->next;
		free(b);
	}
}

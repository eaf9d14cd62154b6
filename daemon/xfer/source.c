/*
 * daemon/xfer/source.c — the source half's shell around send_sm: the SEND
 * command on its device worker (what send_sm_step says: capture, publish in
 * place, make the IPC pool, wait), and on the loop the PULL's replies (each
 * published chunk handed to the puller's link in order), releases, expiry.
 * Who may pull is pull_auth.c's question; a PULL it confirms is attached
 * here (xsrc_attach).
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
#include "proto/errtext.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static struct xsend *xsend_of(struct xfer_node *n)
{
	return n ? xfer_container(n, struct xsend, node) : NULL;
}

static struct xsend *xsend_find(struct xfer *xf, uint64_t id)
{
	return xsend_of(xfer_table_find(&xf->sends, id));
}

static struct xsend *xsend_new(struct xfer *xf, uint64_t id)
{
	struct xsend *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->xf = xf;
	send_sm_init(&x->sm, id, uv_now(xf->d->loop));
	xfer_table_add(&xf->sends, &x->node, id);
	return x;
}

/* ---- destination ranks that pull by IPC (the grace heuristic) ------------------ */

/* Under xf->lock. */
static bool ipc_peer_known(const struct xfer *xf, const char *rank)
{
	for (unsigned i = 0; i < sizeof(xf->ipc_peers) / sizeof(xf->ipc_peers[0]); i++)
		if (rank[0] && !strcmp(xf->ipc_peers[i], rank))
			return true;
	return false;
}

static void ipc_peer_note(struct xfer *xf, const char *rank)
{
	const unsigned n = sizeof(xf->ipc_peers) / sizeof(xf->ipc_peers[0]);

	if (!rank[0] || ipc_peer_known(xf, rank))
		return;
	snprintf(xf->ipc_peers[xf->ipc_peers_next++ % n], sizeof(xf->ipc_peers[0]), "%s", rank);
}

static void xsend_pump(struct xsend *x);

/* ---- loop: failure, slots, freeing ----------------------------------------------- */

void xsrc_fail(struct xsend *x, int status)
{
	pthread_mutex_lock(&x->xf->lock);
	send_sm_fail(&x->sm, status);
	pthread_mutex_unlock(&x->xf->lock);
	pprpcd_kick_queues(x->xf->d);
}

/* A PULL counts against its connection's max-conn-inflight from its
 * arrival (xauth_pull, pull_auth.c) to its end: refused, or its transfer let
 * go of the puller (issue 19.11: a flood of PULLs was counted nowhere). */
static void pull_end(struct conn *c)
{
	conn_wait_end(c);
	conn_unref(c);
}

/* The puller is gone (its link closed, or it was answered with an error):
 * nothing more can be delivered. */
static void xsend_drop_puller(struct xsend *x, int status)
{
	pull_end(x->puller);
	x->puller = NULL;
	pthread_mutex_lock(&x->xf->lock);
	x->sm.pulling = false;
	send_sm_fail(&x->sm, status);
	pthread_mutex_unlock(&x->xf->lock);
	pprpcd_kick_queues(x->xf->d);
}

/* A slot goes back (loop; possibly under xf->lock, so the caller kicks
 * the queues afterwards: a SEND may wait for the slot). */
static void put_slot(void *arg, enum xs_where where, int32_t slot)
{
	struct xsend *x = arg;
	struct xpath p;

	xpath_source(x->xf->d, x->dev, where, &p);
	xpath_slot_put(&p, slot);
}

/* The tensor may change once the SEND completed and no in-place chunk is
 * still being written from it. */
static void release_src(struct xsend *x)
{
	if (x->src_b && x->sm.exec_done && !x->sm.inplace_wire) {
		buffer_unref(x->src_b);
		x->src_b = NULL;
	}
}

void xsrc_maybe_free(struct xsend *x)
{
	struct xfer *xf = x->xf;
	bool finished;

	if (!send_sm_can_free(&x->sm))
		return;
	finished = send_sm_finished(&x->sm);
	if (x->cands) {
		char msg[160];

		snprintf(msg, sizeof(msg), "transfer %" PRIu64 " ended before this PULL was shown to be its rank's",
			 x->sm.id);
		xauth_refuse_all(x, x->sm.status ? x->sm.status : PPRPC_ECANCELED, msg);
	}
	if (x->puller && x->sm.failed && !finished)
		reply_error(x->puller, MSG_PULL, x->pull_req, x->sm.status ? x->sm.status : PPRPC_ECANCELED,
			    "the source side of the transfer failed or was cancelled");
	xstats_add(xf->d, x->peer[0] ? x->peer : "?", "send",
		   x->sm.ipc ? "ipc" : x->sm.mode == XS_LAND ? "land" : x->puller && conn_link_name(x->puller) ? conn_link_name(x->puller) : "tcp", x->sm.size,
		   x->t0_us, 0, !finished);
	if (x->stalled) {
		/* The destination stopped and may still read the IPC slots it was
		 * told of (it copies when it runs again): they never go back, and
		 * new SENDs on this device stop using the pool. */
		uint32_t lost = send_sm_forget_announced(&x->sm);

		if (lost) {
			pthread_mutex_lock(&xf->lock);
			xf->pool_retired[xdev_index(x->dev)] = true;
			pthread_mutex_unlock(&xf->lock);
			LOG(xf->d, LOG_WARN_, "%s: %u IPC pool slots stay out of use (the stopped destination %s may "
			    "still read them); later SENDs on this device do not use IPC", xdev_name(x->dev), lost,
			    x->peer);
		}
	}
	send_sm_put_all(&x->sm, put_slot, x);
	pprpcd_kick_queues(xf->d);
	release_src(x);
	xfer_table_del(&xf->sends, &x->node);
	if (x->puller)
		pull_end(x->puller);
	land_unref(xf, &x->land);
	send_sm_fini(&x->sm);
	free(x);
}

/* A transfer only PULLs made, none of them waiting any more: nothing to
 * keep (it counts in no statistics: nobody sent or received anything). */
void xsrc_discard_if_unasked(struct xsend *x)
{
	if (x->sm.have_send || x->puller || x->cands)
		return;
	xfer_table_del(&x->xf->sends, &x->node);
	send_sm_fini(&x->sm);
	free(x);
}

void xsrc_attach(struct xsend *x, struct conn *c, uint64_t req, uint64_t size, bool ipc_req,
		 const struct xland_offer *land)
{
	struct xfer *xf = x->xf;
	enum xs_pull_check chk;
	uint64_t land_max = 0;
	char err[200];

	pthread_mutex_lock(&xf->lock);
	chk = send_sm_check_pull(&x->sm, size);
	pthread_mutex_unlock(&xf->lock);
	if (chk != XS_PULL_OK) {
		if (chk == XS_PULL_SIZE)
			snprintf(err, sizeof(err), "transfer %" PRIu64 ": the source sends another size (%" PRIu64
				 " bytes, %" PRIu64 " expected)", x->sm.id, x->sm.size, size);
		else
			snprintf(err, sizeof(err), "transfer %" PRIu64 ": already being pulled", x->sm.id);
		reply_error(c, MSG_PULL, req, PPRPC_EINVAL, err);
		pull_end(c);
		/* The rank expects another size: nobody can receive this SEND,
		 * which must not hold staging slots. */
		if (chk == XS_PULL_SIZE && !x->puller) {
			xsrc_fail(x, PPRPC_EINVAL);
			xsrc_maybe_free(x);
		}
		return;
	}
	x->puller = c;
	x->pull_req = req;
	x->progress_ms = uv_now(xf->d->loop);
	x->frames_seen = conn_frames_in(c);
	x->land_refused = land->refused;
	if (land->on) {
		if (land_open(xf, c, land->page, land->slot, land->gen, x->dev, &x->land, err, sizeof(err)) == 0) {
			land_max = LAND_SLOT_BYTES;
		} else {
			/* Said to the destination, which stops waiting on it. */
			x->land_refused = true;
			LOG(xf->d, LOG_DEBUG_, "transfer %" PRIu64 ": the landing slot offered is not used: %s", x->sm.id,
			    err);
		}
	}
	pthread_mutex_lock(&xf->lock);
	send_sm_on_pull(&x->sm, size, ipc_req, land_max);
	if (ipc_req)
		ipc_peer_note(xf, x->peer);
	pthread_mutex_unlock(&xf->lock);
	pprpcd_kick_queues(xf->d);
	xsend_pump(x);
}

/* ---- loop: the PULL's replies ------------------------------------------------------ */

struct chunk_write {
	struct xsend *x;
	uint32_t i;
};

static void chunk_written(void *arg, int status)
{
	struct chunk_write *w = arg;
	struct xsend *x = w->x;
	struct xs_written out;

	pthread_mutex_lock(&x->xf->lock);
	send_sm_on_written(&x->sm, w->i, status, &out);
	pthread_mutex_unlock(&x->xf->lock);
	if (status == 0)
		x->progress_ms = uv_now(x->xf->d->loop);
	if (out.put_slot >= 0)
		put_slot(x, XS_STAGED, out.put_slot);
	if (out.inplace_freed || out.put_slot >= 0 || status)
		pprpcd_kick_queues(x->xf->d);
	if (out.inplace_freed)
		release_src(x);
	xsrc_maybe_free(x);
	free(w);
}

/* Hand every published, unsent chunk of x to its puller, in order. */
static void xsend_pump(struct xsend *x)
{
	/* A send that fails at once (the link is closing) runs chunk_written
	 * inside reply_send_part, and that may free x: hold it until the loop
	 * is done. */
	x->sm.writes_inflight++;
	for (;;) {
		Pprpc__PullChunk pc = PPRPC__PULL_CHUNK__INIT;
		struct chunk_write *w = malloc(sizeof(*w));
		const void *bulk;
		uint64_t nbytes;
		struct xpath p;
		bool more;
		int i = -1;

		pthread_mutex_lock(&x->xf->lock);
		if (w)
			i = send_sm_next_wire(&x->sm, &more);
		else if (send_sm_next_wire_due(&x->sm))
			send_sm_fail(&x->sm, PPRPC_ENOMEM);
		pthread_mutex_unlock(&x->xf->lock);
		if (i < 0) {
			if (!w)
				pprpcd_kick_queues(x->xf->d);
			free(w);
			break;
		}
		w->x = x;
		w->i = (uint32_t)i;
		xpath_source(x->xf->d, x->dev, x->sm.chunks[i].where, &p);
		p.ops->describe(&p, &x->sm.chunks[i], x->tensor, &pc, &bulk, &nbytes);
		pc.land_refused = x->land_refused;
		/* reply_send_part calls chunk_written even if it cannot send. */
		reply_send_part(x->puller, MSG_PULL, x->pull_req, more, &pc.base, bulk, nbytes, chunk_written, w);
	}
	x->sm.writes_inflight--;
	xsrc_maybe_free(x);
}

void xsrc_pump_all(struct xfer *xf)
{
	struct xfer_node *n, *next;

	for (n = xf->sends.head; n; n = next) {
		next = n->next;
		xsend_pump(xsend_of(n));
	}
}

/* ---- worker: the SEND command --------------------------------------------------- */

struct send_cmd {
	struct qreq qr;
	struct xsend *x;
	struct dbuf *b;
	uint64_t offset;
	bool behind;            /* worker: a later command of this stream is queued */
	bool follows;           /* loop: counted in its stream's follow, from push to release */
	uint32_t put_chunk;     /* the chunk the device puts into the landing slot */
};

/* Behind work still on the device (a SEND that may put into a landing
 * slot from the stream: qcmd.async_ok, set by xsrc_send)? */
static bool on_device(const struct qcmd *q)
{
	return q->async_ok && q->stream && atomic_load(&q->stream->pending) > 0;
}

/* A SEND that cannot go to the device behind the work it holds: from now
 * on it waits for that work, as any SEND does (the queue runs it again). */
static int wait_for_run(struct qcmd *q)
{
	q->async_ok = 0;
	return QCMD_AGAIN;
}

/* Is a later command of q's stream queued?  Under the queue lock. */
static bool stream_has_later(const struct qcmd *q)
{
	if (!q->stream)
		return true;
	for (const struct qcmd *c = q->next; c; c = c->next)
		if (c->stream == q->stream)
			return true;
	return false;
}

/* Worker: is a slot free where a capture would go?  (Read without the
 * transfer lock: staging has its own.) */
static void rooms(const struct xsend *x, struct xs_env *e)
{
	struct xpath host, pool;

	xpath_source(x->xf->d, x->dev, XS_STAGED, &host);
	xpath_source(x->xf->d, x->dev, XS_POOL, &pool);
	e->room_host = xpath_has_room(&host);
	e->room_pool = xpath_has_room(&pool);
}

/* Worker, under the queue lock. */
static int send_ready(struct qcmd *q)
{
	struct send_cmd *sc = (struct send_cmd *)q;
	struct xsend *x = sc->x;
	struct xs_env e = { 0 };
	bool ready;

	sc->behind = stream_has_later(q);
	e.behind = sc->behind;
	e.stop = atomic_load(&x->xf->d->stopping_workers);
	e.now_us = xfer_now_us();
	rooms(x, &e);
	pthread_mutex_lock(&x->xf->lock);
	ready = send_sm_ready(&x->sm, &e);
	/* Behind the run, before the PULL: nothing to do until the PULL comes
	 * (it kicks the queue) or the run ends. */
	if (ready && !e.stop && on_device(q) && !x->sm.pulling && !x->sm.failed)
		ready = false;
	pthread_mutex_unlock(&x->xf->lock);
	return ready;
}

static int send_failed(struct qcmd *q, struct xsend *x, const struct xs_act *a)
{
	int st = a->status;

	if (a->why == XS_WHY_CANCELLED)
		snprintf(q->err, sizeof(q->err), "SEND cancelled");
	else if (x->stalled)
		snprintf(q->err, sizeof(q->err), "SEND of transfer %" PRIu64 " failed: the destination %.63s took "
			 "nothing for %" PRIu64 " ms (stopped or wedged?); its link was dropped", x->sm.id, x->peer,
			 x->xf->d->opts.peer_timeout_ms);
	else
		snprintf(q->err, sizeof(q->err), "SEND of transfer %" PRIu64 " to %.63s failed: %s", x->sm.id, x->peer,
			 st == PPRPC_ETIMEDOUT ? "the destination did not pull it within the transfer timeout"
			 : st == PPRPC_ECLOSED ? "the destination's link closed"
					       : pprpc_err_text(st));
	return st;
}

/* Capture chunk a->chunk into a slot of its path and publish it.  The
 * worker blocks only while the ring is full (back-pressure). */
static int send_capture(struct send_cmd *sc, const struct xs_act *a)
{
	struct xsend *x = sc->x;
	struct xfer *xf = x->xf;
	struct qcmd *q = &sc->qr.q;
	struct xs_chunk ch = x->sm.chunks[a->chunk];
	enum xs_where where = a->pool ? XS_POOL : XS_STAGED;
	struct xpath p;
	int slot, rc;

	xpath_source(xf->d, x->dev, where, &p);
	slot = xpath_slot_take(&p);
	if (slot < 0)
		return QCMD_AGAIN; /* another worker took the last one: wait for a free one */
	rc = p.ops->capture(&p, slot, x->tensor + ch.off, ch.len);
	if (rc < 0) {
		xpath_slot_put(&p, slot);
		snprintf(q->err, sizeof(q->err), "SEND: capturing chunk %u failed", a->chunk);
		return rc;
	}
	pthread_mutex_lock(&xf->lock);
	send_sm_published(&x->sm, a->chunk, where, slot);
	if (a->chose_ipc)
		ipc_peer_note(xf, x->peer);
	pthread_mutex_unlock(&xf->lock);
	uv_async_send(&xf->async);
	return 0;
}

/* The device's stream put the bytes into the slot and rang its bell, or
 * failed (any thread: CUDA's callback): the chunk is published as
 * land_put's is; the loop answers the PULL. */
static void send_put_done(void *arg, int status, const char *why)
{
	struct send_cmd *sc = arg;
	struct xsend *x = sc->x;
	struct xfer *xf = x->xf;

	if (status == 0) {
		land_put_woke(&x->land);
		pthread_mutex_lock(&xf->lock);
		send_sm_published(&x->sm, sc->put_chunk, XS_LANDED, -1);
		pthread_mutex_unlock(&xf->lock);
		uv_async_send(&xf->async);
	}
	qreq_device_done(&sc->qr, status, why);
}

/* Worker, behind a run on the device: the landing slot is filled and rung
 * from the stream (land-gpu-send), so the next stage's bytes come when
 * the run ends, with no thread of this daemon between. */
static int send_put_on(struct send_cmd *sc, const struct xs_act *a)
{
	struct xsend *x = sc->x;
	struct qcmd *q = &sc->qr.q;
	const struct xs_chunk *ch = &x->sm.chunks[a->chunk];
	char why[200] = "";
	int rc;

	sc->put_chunk = a->chunk;
	rc = land_put_on(&x->land, x->dev, q->stream, x->tensor + ch->off, ch->len, send_put_done, sc, why,
			 sizeof(why));
	if (rc == PPRPC_EUNSUPP) {
		/* Nothing on the stream: the worker puts it after the run. */
		LOG(x->xf->d, LOG_DEBUG_, "transfer %" PRIu64 ": put after the run: %s", x->sm.id, why);
		return wait_for_run(q);
	}
	if (rc < 0) {
		/* The copy may be on the stream, the bell is not: the SEND
		 * fails, and its answer tells the destination (dest.c rings
		 * its own bell then). */
		snprintf(q->err, sizeof(q->err), "SEND of transfer %" PRIu64 " into %.63s's landing page from the GPU: "
			 "%.100s", x->sm.id, x->peer, why);
		return rc;
	}
	return QCMD_PENDING;
}

/* Worker: carry out what send_sm_step says until it waits or ends. */
static int send_exec(struct qcmd *q)
{
	struct send_cmd *sc = (struct send_cmd *)q;
	struct xsend *x = sc->x;
	struct xfer *xf = x->xf;
	struct pprpcd *d = xf->d;
	/* Behind a run still on the device only the slot may be filled now
	 * (by the device); every other path reads the tensor on the host, so
	 * it waits for the run as any SEND does. */
	bool on_dev = on_device(q);

	for (;;) {
		struct xs_env e = { 0 };
		struct xs_act a;
		const uint8_t *handle;
		struct staging *pool = xdev_ipc_pool_peek(x->dev, &e.pool, &handle);
		int rc;

		e.behind = sc->behind;
		e.stop = atomic_load(&q->stream->canceled) || atomic_load(&d->stopping_workers);
		e.pool_slot = pool ? pool->slot_size : 0;
		e.now_us = xfer_now_us();
		rooms(x, &e);
		pthread_mutex_lock(&xf->lock);
		e.peer_ipc = ipc_peer_known(xf, x->peer);
		if (xf->pool_retired[xdev_index(x->dev)])
			e.pool = -1;
		send_sm_step(&x->sm, &e, &a);
		pthread_mutex_unlock(&xf->lock);
		switch (a.kind) {
		case XS_ACT_FAIL:
			return send_failed(q, x, &a);
		case XS_ACT_DONE:
			return 0;
		case XS_ACT_WAIT:
			return QCMD_AGAIN;
		case XS_ACT_WAIT_UNTIL:
			/* The loop arms a timer for the deadline; the PULL's
			 * arrival kicks the queue earlier. */
			uv_async_send(&xf->async);
			return QCMD_AGAIN;
		case XS_ACT_MAKE_POOL: {
			struct staging *s;

			xdev_ipc_pool(d, x->dev, &s, &handle); /* the next step reads the outcome */
			continue;
		}
		case XS_ACT_IN_PLACE:
			if (on_dev)
				return wait_for_run(q);
			pthread_mutex_lock(&xf->lock);
			send_sm_published(&x->sm, a.chunk, XS_INPLACE, -1);
			pthread_mutex_unlock(&xf->lock);
			uv_async_send(&xf->async);
			continue;
		case XS_ACT_CAPTURE:
			if (on_dev)
				return wait_for_run(q);
			rc = send_capture(sc, &a);
			if (rc != 0)
				return rc;
			continue;
		case XS_ACT_LAND:
			if (on_dev)
				return send_put_on(sc, &a);
			rc = land_put(&x->land, x->dev, x->tensor + x->sm.chunks[a.chunk].off, x->sm.chunks[a.chunk].len);
			if (rc < 0) {
				snprintf(q->err, sizeof(q->err), "SEND of transfer %" PRIu64 ": writing into %.63s's "
					 "landing page failed", x->sm.id, x->peer);
				return rc;
			}
			pthread_mutex_lock(&xf->lock);
			send_sm_published(&x->sm, a.chunk, XS_LANDED, -1);
			pthread_mutex_unlock(&xf->lock);
			uv_async_send(&xf->async);
			continue;
		}
	}
}

static void send_release(struct qreq *qr)
{
	struct send_cmd *sc = (struct send_cmd *)qr;
	struct xsend *x = sc->x;

	if (sc->follows)
		atomic_fetch_sub(&qr->q.stream->follow, 1);
	x->sm.exec_done = true;
	if (qr->q.status < 0 && !x->sm.failed)
		xsrc_fail(x, qr->q.status);
	/* The buffer reference passes to the transfer (release_src). */
	x->src_b = sc->b;
	release_src(x);
	xsend_pump(x);
}

/* ---- loop: the wire's requests ---------------------------------------------------- */

void xsrc_send(struct conn *c, struct request *r, const Pprpc__Send *m, struct dbuf *b)
{
	struct pprpcd *d = conn_daemon(c);
	struct xfer *xf = d->xfer;
	struct xsend *x = xsend_find(xf, m->transfer_id);
	bool fresh = !x, in_use = false;
	bool in_place_ok, ipc_ok;
	struct send_cmd *sc;
	char err[256];
	int rc;

	/* Small SENDs are captured at once: the copy costs less than the
	 * hop to the worker that streaming in place or IPC needs when the
	 * PULL comes, and the loop then answers the PULL by itself. */
	in_place_ok = d->opts.send_in_place && xdev_host_visible(b->dev) && m->size >= d->opts.direct_min;
	ipc_ok = xdev_has_ipc(b->dev) && m->size >= d->opts.direct_min;
	sc = calloc(1, sizeof(*sc));
	if (!x)
		x = sc ? xsend_new(xf, m->transfer_id) : NULL;
	if (!sc || !x) {
		free(sc);
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	pthread_mutex_lock(&xf->lock);
	rc = send_sm_on_send(&x->sm, m->size, d->staging.slot_size, in_place_ok, ipc_ok, &in_use);
	pthread_mutex_unlock(&xf->lock);
	if (rc == PPRPC_EINVAL) {
		snprintf(err, sizeof(err),
			 in_use ? "transfer id %" PRIu64 " is already in use"
				: "transfer %" PRIu64 ": the destination expects another size", m->transfer_id);
		/* The waiting destination learns it too, instead of timing out. */
		if (!in_use && x->puller) {
			char why[200];

			snprintf(why, sizeof(why), "transfer %" PRIu64 ": the source sends another size (%" PRIu64
				 " bytes, %" PRIu64 " expected)", m->transfer_id, m->size, x->sm.size);
			reply_error(x->puller, MSG_PULL, x->pull_req, PPRPC_EINVAL, why);
			xsend_drop_puller(x, 0);
			xsrc_maybe_free(x);
		}
		free(sc);
		qreq_refuse(c, r, rc, err);
		return;
	}
	if (rc < 0) {
		free(sc);
		if (fresh) {
			xfer_table_del(&xf->sends, &x->node);
			send_sm_fini(&x->sm);
			free(x);
		} else {
			/* The early PULL learns why. */
			xsrc_fail(x, rc);
			x->sm.exec_done = true;
			xsrc_maybe_free(x);
		}
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	x->t0_us = xfer_now_us();
	x->dev = b->dev;
	x->tensor = b->ptr + m->offset;
	snprintf(x->peer, sizeof(x->peer), "%s", m->dst_rank ? m->dst_rank : "");
	sc->x = x;
	sc->b = b;
	sc->offset = m->offset;
	buffer_ref(b);
	sc->qr.release = send_release;
	sc->qr.q.ready = send_ready;
	/* PULLs that came first: the SEND names the rank to ask now.  Before
	 * the command is queued: one from a link already shown to be the
	 * rank's attaches at once, and the worker then sees it when it
	 * decides the path (a landing slot it offered, land.h). */
	xauth_send_arrived(x);
	/* A SEND that may land behind its run: the device may put it into
	 * the destination's slot (send_put_on) while the run is on the GPU;
	 * the run's submit sees the count and leaves the thread free. */
	sc->follows = d->opts.land_gpu_send && xdev_holds_lands(b->dev) && m->size <= LAND_SLOT_BYTES;
	sc->qr.q.async_ok = sc->follows;
	qreq_push(&sc->qr, c, r, b->dev, send_exec);
	/* (release, on this loop, comes later) */
	if (sc->follows)
		atomic_fetch_add(&sc->qr.q.stream->follow, 1);
}

/* A PULL (possibly before its SEND arrived): a candidate until the rank the
 * SEND names says it is its own. */
void xsrc_pull(struct conn *c, struct request *r, const Pprpc__Pull *m)
{
	struct pprpcd *d = conn_daemon(c);
	struct xfer *xf = d->xfer;
	struct xsend *x = xsend_find(xf, m->transfer_id);
	char err[200];
	int code = PPRPC_EINVAL;

	/* Nothing an unchecked PULL says may change the transfer (a wrong
	 * size here must not fail the SEND of the rank's real PULL). */
	if (m->size == 0) {
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": empty", m->transfer_id);
	} else if (m->nonce.len != XFER_NONCE) {
		code = PPRPC_EAUTH;
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": a PULL must carry its destination's nonce "
			 "(the source checks it with the rank the SEND names)", m->transfer_id);
	} else if (x && x->puller) {
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": already being pulled", m->transfer_id);
	} else if (x && x->ncands >= XAUTH_MAX_CANDIDATES) {
		code = PPRPC_ELIMIT;
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": %d PULLs already wait to be checked", m->transfer_id,
			 XAUTH_MAX_CANDIDATES);
	} else {
		code = 0;
	}
	if (code == 0 && !x && !(x = xsend_new(xf, m->transfer_id))) {
		code = PPRPC_ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
	}
	if (code < 0) {
		reply_error(c, r->hdr.type, r->hdr.req_id, code, err);
		return;
	}
	xauth_pull(x, c, r->hdr.req_id, m);
}

/* The destination copied an IPC transfer out of our pool (or could not:
 * error).  The slots go back and the PULL ends. */
void xsrc_pull_release(struct conn *c, struct request *r, const Pprpc__PullRelease *m)
{
	Pprpc__PullChunk close = PPRPC__PULL_CHUNK__INIT;
	struct xfer *xf = conn_daemon(c)->xfer;
	struct xsend *x = xsend_find(xf, m->transfer_id);
	bool error = m->error && *m->error, ok = false;
	enum xs_release rel;
	char err[160];

	if (x) {
		pthread_mutex_lock(&xf->lock);
		ok = x->puller == c && send_sm_releasable(&x->sm);
		pthread_mutex_unlock(&xf->lock);
	}
	if (!x || !ok) {
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": no CUDA IPC transfer pulled over this link",
			 m->transfer_id);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	reply_ok(c, r->hdr.type, r->hdr.req_id);
	x->progress_ms = uv_now(conn_daemon(c)->loop);
	pthread_mutex_lock(&xf->lock);
	rel = send_sm_on_release(&x->sm, m->done, error, put_slot, x);
	pthread_mutex_unlock(&xf->lock);
	pprpcd_kick_queues(conn_daemon(c));   /* a SEND may wait for the slots */
	if (rel == XS_REL_PROGRESS)
		return;
	if (rel == XS_REL_FAILED) {
		LOG(conn_daemon(c), LOG_NOTICE_, "transfer %" PRIu64 " to %s over CUDA IPC failed at the destination: %s",
		    x->sm.id, x->peer, error ? m->error : "released before every chunk was sent");
		xsrc_fail(x, PPRPC_EDEVICE);
		xsrc_maybe_free(x);
		return;
	}
	close.offset = x->sm.size;
	reply_send_part(x->puller, MSG_PULL, x->pull_req, 0, &close.base, NULL, 0, NULL, NULL);
	xsrc_maybe_free(x);
}

/* ---- loop: timeouts, closed links, shutdown ---------------------------------------- */

/* A destination that asked for a transfer must take it: while the transfer
 * waits on it (bytes on the wire, IPC slots not released), its connection
 * must show life within peer-timeout-ms — a write completed, a release,
 * or any frame (a destination waiting on us PINGs its quiet link every
 * third of its peer-timeout).  One that does not (stopped, wedged) loses
 * the transfer and the connection: aborting it is the only way to get back
 * the staging slots its unwritten replies hold, and the SEND fails with the
 * reason instead of holding its stream. */
static void check_stalled(struct xsend *x, uint64_t now_ms)
{
	struct xfer *xf = x->xf;
	uint64_t limit = xf->d->opts.peer_timeout_ms, frames;
	bool waits;

	if (!limit || !x->puller || !conn_link_name(x->puller))
		return;
	frames = conn_frames_in(x->puller);
	if (frames != x->frames_seen) {
		x->frames_seen = frames;
		x->progress_ms = now_ms;
	}
	pthread_mutex_lock(&xf->lock);
	waits = send_sm_waits_on_puller(&x->sm);
	if (waits && now_ms - x->progress_ms >= limit) {
		x->stalled = true;
		send_sm_fail(&x->sm, PPRPC_ETIMEDOUT);
	}
	pthread_mutex_unlock(&xf->lock);
	if (!x->stalled)
		return;
	LOG(xf->d, LOG_WARN_, "transfer %" PRIu64 " to %s: the destination took nothing for %" PRIu64
	    " ms (stopped or wedged?); dropping its link", x->sm.id, x->peer, now_ms - x->progress_ms);
	pprpcd_kick_queues(xf->d);
	/* The writes it did not take come back failed, then the connection
	 * closes (xsrc_conn_closed); x goes once both happened. */
	conn_abort(x->puller);
}

void xsrc_expire(struct xfer *xf, uint64_t now_ms)
{
	struct pprpcd *d = xf->d;
	uint64_t limit = d->opts.xfer_timeout_ms;
	struct xfer_node *n, *next;
	char msg[160];

	for (n = xf->sends.head; n; n = n->next) {
		struct xsend *x = xsend_of(n);

		if (!x->stalled)
			check_stalled(x, now_ms);
	}
	if (!limit)
		return;
	for (n = xf->sends.head; n; n = next) {
		struct xsend *x = xsend_of(n);
		enum xs_expiry e;

		next = n->next;
		pthread_mutex_lock(&xf->lock);
		e = send_sm_expired(&x->sm, now_ms, limit, x->cands != NULL);
		pthread_mutex_unlock(&xf->lock);
		if (e == XS_NO_SEND) {
			snprintf(msg, sizeof(msg), "no SEND with transfer id %" PRIu64 " arrived within %" PRIu64 " ms",
				 x->sm.id, limit);
			LOG(d, LOG_NOTICE_, "%s", msg);
			xauth_refuse_all(x, PPRPC_ETIMEDOUT, msg);
			if (x->puller) {
				reply_error(x->puller, MSG_PULL, x->pull_req, PPRPC_ETIMEDOUT, msg);
				xsend_drop_puller(x, PPRPC_ETIMEDOUT);
				xsrc_maybe_free(x);
			} else {
				xsrc_discard_if_unasked(x);
			}
		} else if (e == XS_NOT_PULLED) {
			/* Captured: the slots are freed.  Still waiting to stream
			 * in place: the SEND fails with the reason. */
			LOG(d, LOG_NOTICE_, "transfer %" PRIu64 " to %s was not pulled within %" PRIu64 " ms; dropped",
			    x->sm.id, x->peer, limit);
			xsrc_fail(x, PPRPC_ETIMEDOUT);
			xsrc_maybe_free(x);
		}
	}
}

void xsrc_conn_closed(struct xfer *xf, struct conn *c)
{
	struct xfer_node *n, *next;

	for (n = xf->sends.head; n; n = next) {
		struct xsend *x = xsend_of(n);

		next = n->next;
		xauth_conn_closed(x, c);
		if (x->puller == c) {
			/* The destination went away: nothing more can be delivered. */
			xsend_drop_puller(x, PPRPC_ECLOSED);
			xsrc_maybe_free(x);
		} else {
			xsrc_discard_if_unasked(x);
		}
	}
	xauth_forget_conn(xf, c);
	land_conn_closed(xf, c);
}

uint64_t xsrc_grace_next(struct xfer *xf, uint64_t now_us, bool *ret_due)
{
	uint64_t next = 0;

	*ret_due = false;
	pthread_mutex_lock(&xf->lock);
	for (struct xfer_node *n = xf->sends.head; n; n = n->next) {
		const struct send_sm *s = &xsend_of(n)->sm;

		if (s->mode != XS_UNDECIDED || !s->grace_until_us || s->pulling || s->failed)
			continue;
		if (s->grace_until_us <= now_us)
			*ret_due = true;
		else if (!next || s->grace_until_us < next)
			next = s->grace_until_us;
	}
	pthread_mutex_unlock(&xf->lock);
	return next;
}

/* Sources nobody pulled before shutdown (the destination never asked, or
 * its link died first): the device threads are joined, nothing else can
 * reach them now. */
void xsrc_fini(struct xfer *xf)
{
	while (xf->sends.head) {
		struct xsend *x = xsend_of(xf->sends.head);

		xfer_table_del(&xf->sends, &x->node);
		xauth_drop_all(x);
		if (x->puller)
			pull_end(x->puller);
		send_sm_fini(&x->sm);
		free(x);
	}
	xauth_fini(xf);
}

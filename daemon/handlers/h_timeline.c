/*
 * daemon/handlers/h_timeline.c — TIMELINE_CREATE / _DESTROY / _QUERY, SIGNAL, WAIT,
 * HOST_WAIT and SUBSCRIBE (a peer's wait).
 *
 * Who may use a timeline: its owner (the connection that created it), for
 * everything; and a peer link (role peer), for SUBSCRIBE only — the way a
 * cross-rank WAIT reaches the owner's daemon, naming the handle the owner
 * handed out.  Another client's QUERY, HOST_WAIT or local WAIT on it is
 * refused as an unknown handle, like a buffer or graph of someone else.
 * Handles carry a random 32-bit tag (handles.h), so naming one needs having
 * been given it; a client that must wait on another connection's timeline
 * on the same daemon names the rank (the daemon subscribes to itself).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/peer/peer.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "daemon/objects/timeline.h"
#include "pprpc/types.h"

/* The timeline h, if c may use it (see the top): owner, or a peer link's
 * SUBSCRIBE (peer_ok). */
static struct timeline *lookup(struct conn *c, const struct request *r, uint64_t h, int peer_ok)
{
	struct timeline *t = timeline_get(c->d, h);
	char err[96];

	if (t && (t->owner == &c->own || (peer_ok && c->role == PPRPC__ROLE__ROLE_PEER)))
		return t;
	snprintf(err, sizeof(err), "unknown timeline handle 0x%016" PRIx64, h);
	qreq_refuse(c, r, PPRPC_EHANDLE, err);
	return NULL;
}

void h_timeline_create(struct conn *c, struct request *r)
{
	const Pprpc__TimelineCreate *m = (const Pprpc__TimelineCreate *)r->msg;
	Pprpc__TimelineCreateReply rep = PPRPC__TIMELINE_CREATE_REPLY__INIT;
	struct device *dev = pprpcd_device(c->d, m->device);
	struct timeline *t;
	char err[64];
	int rc;

	if (!dev) {
		snprintf(err, sizeof(err), "no device %u", m->device);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	rc = timeline_create(c->d, &c->own, dev, m->initial, &t);
	if (rc < 0) {
		if (rc == PPRPC_ELIMIT)
			snprintf(err, sizeof(err), "daemon timeline limit (%u) reached", c->d->opts.max_timelines);
		else
			snprintf(err, sizeof(err), "out of memory");
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	rep.timeline = t->handle;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

void h_timeline_destroy(struct conn *c, struct request *r)
{
	const Pprpc__TimelineDestroy *m = (const Pprpc__TimelineDestroy *)r->msg;
	struct timeline *t = lookup(c, r, m->timeline, 0);

	if (!t)
		return;
	timeline_retire(c->d, t);
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}

void h_timeline_query(struct conn *c, struct request *r)
{
	const Pprpc__TimelineQuery *m = (const Pprpc__TimelineQuery *)r->msg;
	Pprpc__TimelineQueryReply rep = PPRPC__TIMELINE_QUERY_REPLY__INIT;
	struct timeline *t = lookup(c, r, m->timeline, 0);

	if (!t)
		return;
	rep.value = timeline_value(c->d, &t->cell);
	/* A SIGNAL the GPU has written shows before its completion callback
	 * published it. */
	if (t->gpu_value && *t->gpu_value > rep.value && !t->cell.error)
		rep.value = *t->gpu_value;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

/* ---- SIGNAL -------------------------------------------------------------- */

struct signal_cmd {
	struct qreq qr;
	struct timeline *t;
	uint64_t value;
};

static void signal_written(void *arg, int status, const char *why)
{
	struct signal_cmd *sc = arg;

	/* The device passed the write: publish (wakes queues and GPU waits;
	 * loop waiters run in release, on the loop). */
	if (status == 0)
		timeline_signal_end(sc->qr.c->d, sc->t, sc->value);
	qreq_device_done(&sc->qr, status, why);
}

static int signal_exec(struct qcmd *q)
{
	struct signal_cmd *sc = (struct signal_cmd *)q;
	struct device *dev = sc->qr.dev;
	int rc;

	rc = timeline_signal_begin(sc->qr.c->d, sc->t, sc->value, q->err, sizeof(q->err));
	if (rc < 0)
		return rc;
	/* Written from the stream, after everything queued before it; without
	 * a slot (the device has no events, or none could be had) only the
	 * completion publishes it. */
	if (sc->t->gpu_value)
		rc = device_write_submit(dev, q->stream, sc->t->gpu_value, sc->value, signal_written, sc, q->err,
					 sizeof(q->err));
	else
		rc = device_wait_submit(dev, q->stream, NULL, signal_written, sc, q->err, sizeof(q->err));
	if (rc < 0)
		return rc;
	if (sc->t->gpu_value)
		__atomic_fetch_add(&dev->gpu_signals, 1, __ATOMIC_RELAXED);
	return QCMD_PENDING;
}

static void signal_release(struct qreq *qr)
{
	struct signal_cmd *sc = (struct signal_cmd *)qr;

	/* Host waits and peers' subscriptions learn of the new value. */
	timeline_notify(qr->c->d, sc->t);
	timeline_unref(sc->t);
}

void h_signal(struct conn *c, struct request *r)
{
	const Pprpc__Signal *m = (const Pprpc__Signal *)r->msg;
	struct timeline *t = lookup(c, r, m->timeline, 0);
	struct signal_cmd *sc;

	if (!t)
		return;
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	sc->t = t;
	sc->value = m->value;
	timeline_ref(t);
	sc->qr.release = signal_release;
	sc->qr.q.async_ok = 1;
	/* The slot the device writes, made here on the loop (the query reads
	 * it); a device without events has none. */
	if (!t->gpu_value && device_holds_waits(t->dev) && device_slot_alloc(t->dev, &t->gpu_value) < 0)
		t->gpu_value = NULL;
	qreq_push(&sc->qr, c, r, t->dev, signal_exec);
}

/* ---- WAIT ------------------------------------------------------------------ */

struct wait_cmd {
	struct qreq qr;
	struct timeline *t;     /* local */
	struct rtl *m;          /* remote */
	const struct tl_cell *cell;
	uint64_t value;
	struct tl_gpu_wait gw;  /* held on the device (device_holds_waits) */
};

static int wait_ready(struct qcmd *q)
{
	struct wait_cmd *wc = (struct wait_cmd *)q;

	return timeline_cell_ready(wc->qr.c->d, wc->cell, wc->value);
}

static void wait_passed(void *arg, int status, const char *why)
{
	struct wait_cmd *wc = arg;
	char err[256];
	int rc = timeline_gpu_wait_end(wc->qr.c->d, &wc->gw, err, sizeof(err));

	/* A device fault wins over how the wait itself ended. */
	if (status < 0)
		qreq_device_done(&wc->qr, status, why);
	else
		qreq_device_done(&wc->qr, rc, rc < 0 ? err : NULL);
}

static int wait_exec(struct qcmd *q)
{
	struct wait_cmd *wc = (struct wait_cmd *)q;
	struct pprpcd *d = wc->qr.c->d;
	struct device *dev = wc->qr.dev;
	volatile uint64_t *slot = NULL;
	int rc;

	wc->gw.cell = wc->cell;
	wc->gw.value = wc->value;
	wc->gw.s = q->stream;
	/* A device that holds waits gets the WAIT with a private slot, unless
	 * it is decided already; elsewhere the queue ran it only once decided
	 * (wait_ready). */
	if (device_holds_waits(dev)) {
		rc = device_slot_alloc(dev, &wc->gw.slot);
		if (rc < 0) {
			snprintf(q->err, sizeof(q->err), "%s: no host-mapped slot left for a GPU-side WAIT",
				 dev->name);
			return rc;
		}
		if (!timeline_gpu_wait_begin(d, &wc->gw))
			slot = wc->gw.slot;
	}
	/* Decided: with nothing of the stream on the device it completes here;
	 * else behind the stream's pending work. */
	if (!slot && queue_stream_pending(q->stream) == 0)
		return timeline_gpu_wait_end(d, &wc->gw, q->err, sizeof(q->err));
	rc = device_wait_submit(dev, q->stream, slot, wait_passed, wc, q->err, sizeof(q->err));
	if (rc < 0) {
		char ignored[64];

		timeline_gpu_wait_end(d, &wc->gw, ignored, sizeof(ignored));
		return rc;
	}
	if (slot)
		__atomic_fetch_add(&dev->gpu_waits, 1, __ATOMIC_RELAXED);
	return QCMD_PENDING;
}

static void wait_release(struct qreq *qr)
{
	struct wait_cmd *wc = (struct wait_cmd *)qr;

	/* The device passed the wait: nothing reads the slot any more. */
	device_slot_free(qr->dev, wc->gw.slot);
	if (wc->t)
		timeline_unref(wc->t);
	if (wc->m)
		peer_mirror_unref(qr->c->d, wc->m);
}

void h_wait(struct conn *c, struct request *r)
{
	const Pprpc__Wait *m = (const Pprpc__Wait *)r->msg;
	struct device *dev = pprpcd_device(c->d, m->device);
	struct wait_cmd *wc;
	char err[160];

	if (!dev) {
		snprintf(err, sizeof(err), "no device %u", m->device);
		qreq_refuse(c, r, PPRPC_EINVAL, err);
		return;
	}
	wc = calloc(1, sizeof(*wc));
	if (!wc) {
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	wc->value = m->value;
	if (m->rank && *m->rank) {
		wc->m = peer_mirror_get(c->d, m->rank, m->timeline, m->value, err, sizeof(err));
		if (!wc->m) {
			free(wc);
			qreq_refuse(c, r, PPRPC_ECONN, err);
			return;
		}
		wc->cell = &wc->m->cell;
	} else {
		wc->t = lookup(c, r, m->timeline, 0);
		if (!wc->t) {
			free(wc);
			return;
		}
		timeline_ref(wc->t);
		wc->cell = &wc->t->cell;
	}
	wc->qr.release = wait_release;
	/* A device that holds waits holds the WAIT on its own stream: the
	 * queue need not hold it back.  Elsewhere the queue runs it once its
	 * value is reached, serving other streams meanwhile: the worker never
	 * blocks on it. */
	wc->qr.q.async_ok = 1;
	wc->qr.q.ready = device_holds_waits(dev) ? NULL : wait_ready;
	qreq_push(&wc->qr, c, r, dev, wait_exec);
}

/* ---- loop-side waits: HOST_WAIT and SUBSCRIBE ------------------------------- */

struct lwait {
	struct lwait *next;         /* c->lwaits */
	struct conn *c;
	struct timeline *t;
	struct tl_waiter *w;
	uint16_t type;
	uint64_t req_id;
	uv_timer_t timer;
	int has_timer;
};

static void lwait_unlink(struct lwait *lw)
{
	for (struct lwait **pp = &lw->c->lwaits; *pp; pp = &(*pp)->next)
		if (*pp == lw) {
			*pp = lw->next;
			conn_wait_end(lw->c);
			return;
		}
}

static void lwait_free(uv_handle_t *h)
{
	struct lwait *lw = h->data;

	conn_unref(lw->c);
	free(lw);
}

static void lwait_fired(void *arg, int status, uint64_t value)
{
	struct lwait *lw = arg;

	lw->w = NULL;
	lwait_unlink(lw);
	if (status < 0) {
		reply_error(lw->c, lw->type, lw->req_id, status,
			    status == PPRPC_ETIMEDOUT ? "timed out before the timeline reached the value"
						      : "the timeline was destroyed");
	} else if (lw->type == MSG_SUBSCRIBE) {
		Pprpc__SubscribeReply rep = PPRPC__SUBSCRIBE_REPLY__INIT;

		rep.value = value;
		reply_send(lw->c, lw->type, lw->req_id, &rep.base, NULL, 0, NULL, NULL);
	} else {
		Pprpc__HostWaitReply rep = PPRPC__HOST_WAIT_REPLY__INIT;

		rep.value = value;
		reply_send(lw->c, lw->type, lw->req_id, &rep.base, NULL, 0, NULL, NULL);
	}
	timeline_unref(lw->t);
	if (lw->has_timer) {
		uv_timer_stop(&lw->timer);
		uv_close((uv_handle_t *)&lw->timer, lwait_free);
	} else {
		conn_unref(lw->c);
		free(lw);
	}
}

static void lwait_timeout(uv_timer_t *tm)
{
	struct lwait *lw = tm->data;

	if (lw->w)
		timeline_cancel_waiter(lw->t, lw->w, PPRPC_ETIMEDOUT);
}

static void add_lwait(struct conn *c, struct request *r, struct timeline *t, uint64_t value,
		      uint32_t timeout_ms)
{
	struct lwait *lw = calloc(1, sizeof(*lw));
	struct tl_waiter *w;

	if (!lw) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	lw->c = c;
	lw->t = t;
	lw->type = r->hdr.type;
	lw->req_id = r->hdr.req_id;
	conn_ref(c);
	timeline_ref(t);
	if (timeout_ms) {
		uv_timer_init(c->d->loop, &lw->timer);
		lw->timer.data = lw;
		lw->has_timer = 1;
	}
	lw->next = c->lwaits;
	c->lwaits = lw;
	conn_wait_begin(c);  /* in flight until answered (conn.h limits) */
	w = timeline_add_waiter(c->d, t, value, lwait_fired, lw);
	/* NULL: it fired at once (already reached) and lw may be freed
	 * already — touch it only while it still waits. */
	if (!w)
		return;
	lw->w = w;
	if (timeout_ms)
		uv_timer_start(&lw->timer, lwait_timeout, timeout_ms, 0);
}

void h_host_wait(struct conn *c, struct request *r)
{
	const Pprpc__HostWait *m = (const Pprpc__HostWait *)r->msg;
	struct timeline *t = lookup(c, r, m->timeline, 0);

	if (t)
		add_lwait(c, r, t, m->value, m->timeout_ms);
}

void h_subscribe(struct conn *c, struct request *r)
{
	const Pprpc__Subscribe *m = (const Pprpc__Subscribe *)r->msg;
	struct timeline *t = lookup(c, r, m->timeline, 1);

	if (t)
		add_lwait(c, r, t, m->value, 0);
}

/* Close hook: a closed connection's pending host waits and subscriptions
 * fail with PPRPC_ECANCELED (their replies are dropped) and let go of it. */
static void cancel_lwaits(struct pprpcd *d, struct conn *c)
{
	(void)d;
	while (c->lwaits) {
		struct lwait *lw = c->lwaits;

		if (lw->w)
			timeline_cancel_waiter(lw->t, lw->w, PPRPC_ECANCELED);
		else
			lwait_unlink(lw);
	}
}

int h_timeline_start(struct pprpcd *d)
{
	return pprpcd_on_conn_close(d, cancel_lwaits);
}

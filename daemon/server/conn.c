/* daemon/server/conn.c — connection lifetime and the decode + validate layer. */
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/conn_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/trace.h"
#include "daemon/request/qreq.h"
#include "daemon/objects/buffer.h"
#include "daemon/pprpcd.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/reply.h"
#include "daemon/server/server.h"
#include "daemon/server/wake_ahead.h"
#include "pprpc/types.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static void refuse(struct request *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void refuse(struct request *r, int code, const char *fmt, ...)
{
	va_list ap;

	if (r->err)
		return;
	r->err = code;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
}

/* A request deferred behind one that runs off the loop (conn_busy_begin):
 * it owns everything request_clear frees. */
struct deferred {
	struct request r;
	struct deferred *next;
};

static void request_clear(struct conn *c, struct request *r)
{
	meta_free(r->msg);
	r->msg = NULL;
	if (r->bulk_buf)
		buffer_unref(r->bulk_buf);
	r->bulk_buf = NULL;
	hostmem_free(&c->d->hostmem, r->stage, r->stage_len);
	r->stage = NULL;
	r->stage_len = 0;
	r->err = 0;
	r->errmsg[0] = '\0';
	r->h = NULL;
	r->load = 0;
}

static void request_reset(struct conn *c)
{
	request_clear(c, &c->cur);
}

static int on_header(void *ctx, const struct frame_hdr *h)
{
	struct conn *c = ctx;
	struct request *r = &c->cur;

	request_reset(c);
	r->hdr = *h;
	/* Requests pipelined behind a fatal one (same read) are not executed. */
	if (c->closing)
		return PPRPC_ECLOSED;
	if (h->flags & (FRAME_F_REPLY | FRAME_F_ERROR)) {
		snprintf(r->errmsg, sizeof(r->errmsg), "a request may not carry the reply/error flags");
		return PPRPC_EPROTO;
	}
	if (!c->hello_done && h->type != MSG_HELLO) {
		snprintf(r->errmsg, sizeof(r->errmsg), "HELLO must be the first message (got %s)",
			 msg_type_name(h->type));
		return PPRPC_EPROTO;
	}
	/* Before the daemon knows who talks (keyed or not), it reads no bulk
	 * and buffers no large metas. */
	if (!c->hello_done && (h->bulk_len || h->meta_len > CONN_HELLO_MAX_META)) {
		snprintf(r->errmsg, sizeof(r->errmsg),
			 "before HELLO is done a frame carries no bulk and at most %u bytes of meta",
			 CONN_HELLO_MAX_META);
		return PPRPC_EPROTO;
	}
	if (c->queued_cmds + c->waits + c->unsent_replies + c->ndeferred >= c->d->opts.max_conn_inflight) {
		snprintf(r->errmsg, sizeof(r->errmsg),
			 "connection in-flight limit (%u) reached: %" PRIu64 " commands queued, %" PRIu64
			 " waits, probes and pulls pending, %" PRIu64 " replies unsent, %" PRIu64
			 " requests deferred; closing",
			 c->d->opts.max_conn_inflight, c->queued_cmds, c->waits, c->unsent_replies, c->ndeferred);
		return PPRPC_ELIMIT;
	}
	r->h = dispatch_lookup(h->type);
	if (!r->h)
		refuse(r, PPRPC_EUNSUPP, "message type %u (%s) is not supported by this daemon",
		       h->type, msg_type_name(h->type));
	else if (h->bulk_len && !r->h->bulk)
		refuse(r, PPRPC_EPROTO, "%s carries no bulk payload (got %" PRIu64 " bytes)",
		       msg_type_name(h->type), h->bulk_len);
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len,
		   void **bulk_dst)
{
	struct conn *c = ctx;
	struct request *r = &c->cur;
	int rc;

	if (r->err)
		return 0;
	rc = meta_unpack(r->h->desc, meta, len, &r->msg);
	if (rc < 0) {
		refuse(r, rc, "%s: malformed meta (%zu bytes)%s", msg_type_name(h->type), len,
		       rc == PPRPC_EINVAL ? ": a string field holds a NUL byte" : "");
		return 0;
	}
	if (h->bulk_len) {
		rc = r->h->bulk(c, r, bulk_dst);
		if (rc < 0) {
			*bulk_dst = NULL;
			refuse(r, rc, "%s refused", msg_type_name(h->type));
		}
	}
	return 0;
}

/* The caller holds a reference: a handler may close the connection. */
static void run_request(struct conn *c, struct request *r)
{
	if (r->err)
		qreq_refuse(c, r, r->err, r->errmsg);
	else
		r->h->run(c, r);
}

/* Keep the frame just read for after the busy request (moved, not copied:
 * c->cur is reset for the next frame). */
static void defer(struct conn *c)
{
	struct deferred *q = calloc(1, sizeof(*q));

	if (!q) {
		/* running it now would break the stream's order */
		LOG(c->d, LOG_ERR_, "conn %" PRIu64 " (%s): out of memory deferring %s; closing", c->id, c->name,
		    msg_type_name(c->cur.hdr.type));
		conn_close(c);
		return;
	}
	q->r = c->cur;
	c->cur.msg = NULL;
	c->cur.bulk_buf = NULL;
	c->cur.stage = NULL;
	c->cur.stage_len = 0;
	*c->defer_tail = q;
	c->defer_tail = &q->next;
	c->ndeferred++;
}

static struct deferred *undefer(struct conn *c)
{
	struct deferred *q = c->defer_head;

	if (!q)
		return NULL;
	c->defer_head = q->next;
	if (!c->defer_head)
		c->defer_tail = &c->defer_head;
	c->ndeferred--;
	return q;
}

static void drop_deferred(struct conn *c)
{
	struct deferred *q;

	while ((q = undefer(c))) {
		request_clear(c, &q->r);
		free(q);
	}
}

_Static_assert(MSG_TYPE_COUNT <= PPRPCD_REQ_TYPES, "pprpcd.h: PPRPCD_REQ_TYPES holds every message type");

/* A client's request, by type, in the phase of its connection: loading
 * until its first graph or boundary request, running from that one on.  A peer's is
 * rank-to-rank work, of neither phase. */
static void count_phase(struct conn *c, struct request *r)
{
	struct pprpcd_req_count *k;

	if (c->role == PPRPC__ROLE__ROLE_PEER)
		return;
	if (r->h && r->h->ends_load)
		c->running = 1;
	r->load = !c->running;
	k = &c->d->stats.by_type[c->running ? PPRPCD_PHASE_RUN : PPRPCD_PHASE_LOAD][r->hdr.type];
	k->requests++;
	if (r->h && r->h->bytes && r->msg)
		k->bytes += r->h->bytes(r->msg);
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	struct conn *c = ctx;
	struct request *r = &c->cur;

	(void)h;
	if (c->d->trace)
		trace_req(c->d, c, r->hdr.type, r->hdr.req_id, TRACE_ARRIVE, trace_now_ns());
	if (c->role != PPRPC__ROLE__ROLE_PEER)
		wake_ahead_frame(c->d);
	c->requests++;
	c->d->stats.requests++;
	if (r->hdr.type < MSG_TYPE_COUNT)
		count_phase(c, r);
	conn_ref(c);
	/* Behind a request still running off the loop, a frame waits: the
	 * client sees its connection's requests run in the order it sent
	 * them (a GRAPH_RUN of the graph being created, a queued command
	 * behind its first run). */
	if (c->busy)
		defer(c);
	else
		run_request(c, r);
	request_reset(c);
	conn_unref(c);
	return 0;
}

static void on_reader_error(void *ctx, int code, uint64_t req_id)
{
	struct conn *c = ctx;
	struct request *r = &c->cur;
	struct frame_hdr raw;
	char msg[256];

	if (c->closing)
		return;
	c->d->stats.protocol_errors++;
	frame_hdr_peek(transport_reader(c->t)->hdr_buf, &raw);
	if (r->errmsg[0] && (code == PPRPC_EPROTO || code == PPRPC_ELIMIT) && !r->err)
		snprintf(msg, sizeof(msg), "%s", r->errmsg);
	else if (code == PPRPC_EVERSION)
		snprintf(msg, sizeof(msg), "protocol version %u is not supported (this daemon speaks %u)",
			 raw.version, PPRPC_PROTO_VERSION);
	else if (code == PPRPC_ETOOBIG)
		snprintf(msg, sizeof(msg),
			 "frame too large: meta %u bytes (max-meta-kib limit %u), bulk %" PRIu64
			 " bytes (max-bulk-mib limit %" PRIu64 ")",
			 raw.meta_len, transport_reader(c->t)->lim.max_meta, raw.bulk_len,
			 transport_reader(c->t)->lim.max_bulk);
	else
		snprintf(msg, sizeof(msg), "malformed frame header (bad magic or flags)");
	LOG(c->d, LOG_NOTICE_, "conn %" PRIu64 " (%s): protocol error: %s; closing", c->id, c->name, msg);
	reply_error(c, raw.type, req_id, code, msg);
	conn_close(c);
}

static void on_close(void *ctx, int status)
{
	struct conn *c = ctx;
	struct pprpcd *d = c->d;

	c->closed = 1;
	/* Queued work of a vanished client is cancelled, not run. */
	for (uint32_t i = 0; i < PPRPCD_CONN_MAX_DEVICES; i++)
		atomic_store(&c->streams[i].canceled, 1);
	/* What the parts keep for c (transfers, waits on a device or on the
	 * loop) goes through their close hooks: this layer calls none of
	 * them by name. */
	pprpcd_conn_closed(d, c);
	LOG(d, LOG_INFO_, "conn %" PRIu64 " (%s) closed%s: %" PRIu64 " requests, %" PRIu64 " errors",
	    c->id, c->name, status ? " on error" : "", c->requests, c->errors);
	/* Resources die with their owner: a vanished client leaks nothing. */
	owner_release(d, &c->own);
	request_reset(c);
	drop_deferred(c);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	c->t = NULL;
	conn_unref(c);
	pprpcd_conn_gone(d);
}

static const struct frame_reader_ops frame_ops = {
	.on_header = on_header,
	.on_meta = on_meta,
	.on_frame = on_frame,
};

static const struct transport_owner owner_ops = {
	.frame = &frame_ops,
	.on_reader_error = on_reader_error,
	.on_close = on_close,
};

void conn_accept(struct pprpcd *d, struct transport_conn *t)
{
	struct frame_limits lim = { .max_meta = d->opts.max_meta, .max_bulk = d->opts.max_bulk };
	struct conn *c;

	if (d->nconns >= d->opts.max_conns && !d->stopping) {
		/* Every connection costs memory and a descriptor before it has
		 * said a word; the cap bounds that.  Logged at powers of two: a
		 * flood must not flood the log too. */
		d->conns_refused++;
		if (!(d->conns_refused & (d->conns_refused - 1)))
			LOG(d, LOG_NOTICE_, "connection from %s closed: max-conns (%u) reached (%" PRIu64 " refused so far)",
			    transport_peer(t), d->opts.max_conns, d->conns_refused);
		transport_close(t);
		return;
	}
	if (d->stopping || !(c = calloc(1, sizeof(*c)))) {
		transport_close(t);
		return;
	}
	c->d = d;
	c->t = t;
	c->refs = 1; /* the transport's */
	c->defer_tail = &c->defer_head;
	c->id = ++d->next_conn_id;
	c->born_ms = uv_now(d->loop);
	owner_init(&c->own, d->opts.max_conn_bytes, d->opts.max_conn_buffers, d->opts.max_conn_graphs);
	d->nconns++;
	snprintf(c->name, sizeof(c->name), "%s", transport_peer(t));
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	d->conns = c;
	d->stats.connections_total++;
	{
		char how[400];

		/* RDMA activation is logged where it happens (notice level);
		 * plain TCP clients only at info. */
		transport_describe(t, how, sizeof(how));
		LOG(d, strcmp(transport_name(t), "tcp") ? LOG_NOTICE_ : LOG_INFO_, "conn %" PRIu64 " from %s over %s",
		    c->id, c->name, how);
	}
	if (transport_start(t, &owner_ops, c, &lim) < 0)
		transport_close(t);
}

void conn_expire_hello(struct pprpcd *d, uint64_t now_ms)
{
	uint64_t limit = d->opts.hello_timeout_ms;

	if (!limit)
		return;
	/* A connection that says nothing (or half a HELLO, or never answers
	 * its challenge) would hold its slot of max-conns for ever. */
	for (struct conn *c = d->conns; c; c = c->next) {
		if (c->hello_done || c->closing || now_ms - c->born_ms < limit)
			continue;
		LOG(d, LOG_NOTICE_, "conn %" PRIu64 " (%s): no HELLO within %" PRIu64 " ms (hello-timeout-ms); closing",
		    c->id, c->name, limit);
		conn_close(c);
	}
}

#define HIGH_CMDS 4096
#define HIGH_STAGED (256ull << 20)

/* Reading is paused for two reasons, each with its own flag — the
 * high-water marks (flow, c->paused) and a request off the loop (c->busy)
 * — and resumes only when neither holds: the one ending must not undo the
 * other. */
static void pause_apply(struct conn *c)
{
	int want = c->paused || c->busy;

	if (!c->t || want == c->read_paused)
		return;
	c->read_paused = want;
	if (want)
		transport_pause(c->t);
	else
		transport_resume(c->t);
}

void conn_busy_begin(struct conn *c)
{
	c->busy = 1;
	pause_apply(c);
}

void conn_busy_end(struct conn *c)
{
	struct deferred *q;

	conn_ref(c);
	c->busy = 0;
	/* in order, until one of them is itself off the loop again */
	while (!c->busy && (q = c->defer_head)) {
		undefer(c);
		if (!c->closing && !c->closed)
			run_request(c, &q->r);
		request_clear(c, &q->r);
		free(q);
	}
	pause_apply(c);
	conn_unref(c);
}

/* Pause reading above the high-water marks, resume below half of them. */
static void flow(struct conn *c)
{
	uint64_t n = c->queued_cmds + c->waits + c->unsent_replies;
	uint64_t high = c->d->opts.max_conn_inflight / 2;

	if (high > HIGH_CMDS)
		high = HIGH_CMDS;
	if (!c->t)
		return;
	if (!c->paused && (n > high || c->staged_bytes > HIGH_STAGED)) {
		c->paused = 1;
		LOG(c->d, LOG_DEBUG_, "conn %" PRIu64 ": paused (%" PRIu64 " in flight)", c->id, n);
		pause_apply(c);
	} else if (c->paused && n <= high / 2 && c->staged_bytes <= HIGH_STAGED / 2) {
		c->paused = 0;
		pause_apply(c);
	}
}

void conn_enqueue_impl(struct conn *c, uint64_t staged)
{
	c->queued_cmds++;
	c->staged_bytes += staged;
	flow(c);
}

void conn_unqueue_impl(struct conn *c, uint64_t staged)
{
	c->queued_cmds--;
	c->staged_bytes -= staged;
	flow(c);
}

void conn_reply_queued(struct conn *c)
{
	c->unsent_replies++;
	flow(c);
}

void conn_reply_sent(struct conn *c)
{
	c->unsent_replies--;
	flow(c);
}

void conn_wait_begin_impl(struct conn *c)
{
	c->waits++;
	flow(c);
}

void conn_wait_end_impl(struct conn *c)
{
	c->waits--;
	flow(c);
}

static int copy_fits(struct conn *c, uint64_t cur, uint64_t n)
{
	uint64_t max = c->d->opts.max_conn_reply_bytes;

	return cur == 0 || (n <= max && cur <= max - n);
}

int conn_copy_fits(struct conn *c, uint64_t n)
{
	if (copy_fits(c, atomic_load(&c->copy_bytes), n))
		return 1;
	/* Say so before looking again: a copy written out meanwhile either
	 * shows in the second look or sees the flag and kicks the queues. */
	atomic_store(&c->copy_waiting, 1);
	return copy_fits(c, atomic_load(&c->copy_bytes), n);
}

int conn_copy_take(struct conn *c, uint64_t n)
{
	uint64_t cur = atomic_load(&c->copy_bytes);

	do {
		if (!copy_fits(c, cur, n))
			return 0;
	} while (!atomic_compare_exchange_weak(&c->copy_bytes, &cur, cur + n));
	return 1;
}

void conn_copy_put(struct conn *c, uint64_t n)
{
	atomic_fetch_sub(&c->copy_bytes, n);
	if (atomic_exchange(&c->copy_waiting, 0))
		pprpcd_kick_queues(c->d);
}

void conn_ref_impl(struct conn *c)
{
	c->refs++;
}

void conn_unref_impl(struct conn *c)
{
	if (--c->refs)
		return;
	/* Nothing of it is in flight any more: its device streams go back. */
	for (uint32_t i = 0; i < c->d->ndev && i < PPRPCD_CONN_MAX_DEVICES; i++)
		device_stream_release(c->d->dev[i], &c->streams[i]);
	free(c);
}

struct stream *conn_stream_impl(struct conn *c, uint32_t dev)
{
	return &c->streams[dev];
}

void conn_count_error_impl(struct conn *c)
{
	c->errors++;
}

uint64_t conn_frames_in_impl(const struct conn *c)
{
	return c->t ? transport_stats(c->t)->frames_in : 0;
}

const char *conn_link_name_impl(const struct conn *c)
{
	return c->t ? transport_name(c->t) : NULL;
}

void conn_trace_who_impl(const struct conn *c, uint64_t *ret_id, int *ret_peer)
{
	*ret_id = c->id;
	*ret_peer = c->role == PPRPC__ROLE__ROLE_PEER;
}

void conn_close(struct conn *c)
{
	c->closing = 1;
	if (c->t)
		transport_close(c->t);
}

void conn_abort_impl(struct conn *c)
{
	c->closing = 1;
	if (c->t)
		transport_abort(c->t);
}

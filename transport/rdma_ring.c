/* transport/rdma_ring.c — TX slots, credits, chunking (see rdma_ring.h). */
#include "transport/rdma_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

/* The design asks for at least this many posted receives where memory
 * allows; below it only the memlock ladder goes. */
#define RX_POSTED_GOAL 24u

int rdma_geom_validate(const struct rdma_geom *g, char *err, size_t errlen)
{
	if (g->chunk < RDMA_CHUNK_MIN || g->chunk > RDMA_CHUNK_MAX || (g->chunk & 4095)) {
		snprintf(err, errlen, "chunk %u is not a multiple of 4 KiB in %u KiB..%u MiB", g->chunk,
			 RDMA_CHUNK_MIN >> 10, RDMA_CHUNK_MAX >> 20);
		return PPRPC_EINVAL;
	}
	if (g->tx_depth < 1 || g->tx_depth > RDMA_TX_DEPTH_MAX) {
		snprintf(err, errlen, "tx_depth %u is not in 1..%u", g->tx_depth, RDMA_TX_DEPTH_MAX);
		return PPRPC_EINVAL;
	}
	if (g->rx_depth < RX_POSTED_GOAL || g->rx_depth > RDMA_RX_DEPTH_MAX) {
		snprintf(err, errlen, "rx_depth %u is not in %u..%u", g->rx_depth, RX_POSTED_GOAL, RDMA_RX_DEPTH_MAX);
		return PPRPC_EINVAL;
	}
	if (g->bulk_threshold &&
	    (g->bulk_threshold < RDMA_BULK_THRESHOLD_MIN || g->bulk_threshold > RDMA_BULK_THRESHOLD_MAX)) {
		snprintf(err, errlen, "bulk threshold %u is not in %u KiB..%u MiB", g->bulk_threshold,
			 RDMA_BULK_THRESHOLD_MIN >> 10, RDMA_BULK_THRESHOLD_MAX >> 20);
		return PPRPC_EINVAL;
	}
	return 0;
}

int rdma_ring_init(struct rdma_ring *r, const struct rdma_geom *own, uint32_t peer_rx_depth,
		   uint32_t peer_chunk, uint8_t *tx_mem)
{
	memset(r, 0, sizeof(*r));
	if (own->tx_depth < 1 || own->rx_depth < RDMA_RX_DEPTH_MIN || own->chunk == 0 ||
	    peer_rx_depth < RDMA_RX_DEPTH_MIN || peer_rx_depth > RDMA_RX_DEPTH_MAX || peer_chunk == 0)
		return PPRPC_EINVAL;
	r->own = *own;
	r->peer_rx_depth = peer_rx_depth;
	r->msg_max = own->chunk < peer_chunk ? own->chunk : peer_chunk;
	r->tx_mem = tx_mem;
	r->credits = peer_rx_depth;
	r->threshold = own->rx_depth / 2 > 2 ? own->rx_depth / 2 : 2;
	r->rx_fifo = calloc(own->rx_depth, sizeof(*r->rx_fifo));
	r->rx_len = calloc(own->rx_depth, sizeof(*r->rx_len));
	r->rx_kind = calloc(own->rx_depth, sizeof(*r->rx_kind));
	if (!r->rx_fifo || !r->rx_len || !r->rx_kind) {
		free(r->rx_fifo);
		free(r->rx_len);
		free(r->rx_kind);
		return PPRPC_ENOMEM;
	}
	r->q_tail = &r->q_head;
	r->done_tail = &r->done_head;
	return 0;
}

void rdma_ring_fini(struct rdma_ring *r)
{
	rdma_ring_fail(r, PPRPC_ECLOSED);
	rdma_ring_run_done(r);
	free(r->rx_fifo);
	free(r->rx_len);
	free(r->rx_kind);
	r->rx_fifo = NULL;
	r->rx_len = NULL;
	r->rx_kind = NULL;
}

int rdma_ring_bulk_enable(struct rdma_ring *r, uint32_t chunk, uint32_t depth, uint8_t *src, uint8_t *land,
			  uint32_t rkey, uint32_t max_reads)
{
	int rc = rdma_bulk_init(&r->bulk, chunk, depth, src, land, rkey, max_reads);

	if (rc == 0)
		r->bulk_on = 1;
	return rc;
}

int rdma_ring_enqueue(struct rdma_ring *r, const struct iovec *iov, int iovcnt, rdma_done_cb done, void *arg)
{
	return rdma_ring_enqueue_bulk(r, iov, iovcnt, SIZE_MAX, done, arg);
}

static int enqueue(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off, int zc,
		   uint32_t rkey, rdma_done_cb done, void *arg);

int rdma_ring_enqueue_bulk(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off,
			   rdma_done_cb done, void *arg)
{
	return enqueue(r, iov, iovcnt, bulk_off, 0, 0, done, arg);
}

int rdma_ring_enqueue_zc(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off, uint32_t rkey,
			 rdma_done_cb done, void *arg)
{
	return enqueue(r, iov, iovcnt, bulk_off, 1, rkey, done, arg);
}

static int enqueue(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off, int zc,
		   uint32_t rkey, rdma_done_cb done, void *arg)
{
	struct rdma_txreq *q;
	size_t total = 0;

	if (r->failed)
		return r->failed;
	if (iovcnt < 1 || iovcnt > RDMA_RING_MAX_IOV || (bulk_off != SIZE_MAX && !r->bulk_on))
		return PPRPC_EINVAL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return PPRPC_ENOMEM;
	for (int i = 0; i < iovcnt; i++) {
		q->iov[i] = iov[i];
		total += iov[i].iov_len;
	}
	q->iovcnt = iovcnt;
	q->total = total;
	q->bulk_off = bulk_off;
	q->zc = zc && bulk_off != SIZE_MAX;
	q->zc_rkey = rkey;
	q->left = total;
	q->done = done;
	q->arg = arg;
	*r->q_tail = q;
	r->q_tail = &q->next;
	r->queued_bytes += total;
	return 0;
}

static void to_done(struct rdma_ring *r, struct rdma_txreq *q, int status)
{
	q->status = status;
	q->next = NULL;
	*r->done_tail = q;
	r->done_tail = &q->next;
}

uint8_t *rdma_ring_tx_slot(const struct rdma_ring *r, uint32_t slot)
{
	return r->tx_mem + (size_t)slot * r->own.chunk;
}

/* Copy up to max of q's next bytes to dst (NULL: only move past them). */
static size_t copy_out(struct rdma_ring *r, struct rdma_txreq *q, uint8_t *dst, size_t max)
{
	size_t len = 0;

	while (q->left && len < max) {
		struct iovec *v = &q->iov[q->cur];
		size_t n = v->iov_len - q->off;

		if (n > max - len)
			n = max - len;
		if (n && dst)
			memcpy(dst + len, (const uint8_t *)v->iov_base + q->off, n);
		len += n;
		q->off += n;
		q->left -= n;
		r->queued_bytes -= n;
		if (q->off == v->iov_len && q->cur + 1 < q->iovcnt) {
			q->cur++;
			q->off = 0;
		}
	}
	return len;
}

/* Bytes of q still to go through the message slots before its bulk part. */
static size_t stream_left(const struct rdma_txreq *q)
{
	size_t sent = q->total - q->left;

	if (q->bulk_off == SIZE_MAX)
		return q->left;
	return sent < q->bulk_off ? q->bulk_off - sent : 0;
}

/* The head request is fully copied or described: done, or (described in
 * place) waiting for its ACKs. */
static void pop_done(struct rdma_ring *r)
{
	struct rdma_txreq *q = r->q_head;

	r->q_head = q->next;
	if (!r->q_head)
		r->q_tail = &r->q_head;
	if (q->zc_out) {
		q->next = r->zc_wait;
		r->zc_wait = q;
		return;
	}
	to_done(r, q, 0);
}

/* An ACK for tag: a zero-copy request may now be done. */
static void zc_acked(struct rdma_ring *r, uint32_t tag)
{
	struct rdma_txreq *q = tag >= r->bulk.depth ? r->bulk.zc_req[tag] : NULL;

	if (!q)
		return;
	r->bulk.zc_req[tag] = NULL;
	if (--q->zc_out || q->left)
		return;
	for (struct rdma_txreq **pp = &r->zc_wait; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			to_done(r, q, 0);
			return;
		}
}

/* Copy queued stream bytes into one slot, up to msg_max, stopping at a
 * request's bulk part; fully copied requests move to the done list. */
static uint32_t fill_slot(struct rdma_ring *r, uint8_t *dst)
{
	uint32_t len = 0;

	while (r->q_head && len < r->msg_max) {
		struct rdma_txreq *q = r->q_head;
		size_t s = stream_left(q);

		if (s > r->msg_max - len)
			s = r->msg_max - len;
		len += (uint32_t)copy_out(r, q, dst + len, s);
		if (q->left)
			break;
		pop_done(r);
	}
	return len;
}

/* Take the next TX slot and a credit for a message of kind k. */
static uint32_t take_slot(struct rdma_ring *r, struct rdma_tx_msg *out, uint32_t kind)
{
	uint32_t slot = (uint32_t)(r->tx_head % r->own.tx_depth);

	out->slot = slot;
	out->credits = r->owed;
	out->kind = kind;
	out->ctrl = 0;
	r->owed = 0;
	r->credits--;
	r->tx_head++;
	r->st.msgs_out++;
	return slot;
}

/* Drop zero-length requests at the head (they need no slot). */
static void skip_empty(struct rdma_ring *r)
{
	while (r->q_head && r->q_head->left == 0) {
		struct rdma_txreq *q = r->q_head;

		r->q_head = q->next;
		if (!r->q_head)
			r->q_tail = &r->q_head;
		to_done(r, q, 0);
	}
}

int rdma_ring_next(struct rdma_ring *r, struct rdma_tx_msg *out)
{
	int can = 0;

	if (r->failed)
		return r->failed;
	skip_empty(r);
	if (r->q_head || (r->bulk_on && rdma_bulk_ack_pending(&r->bulk))) {
		if (rdma_ring_tx_inflight(r) >= r->own.tx_depth)
			r->st.stall_no_slot++;
		else if (r->credits < 2)
			r->st.stall_no_credit++;
		else
			can = 1;
	}
	/* ACKs first: they free the peer's source slots, which its own
	 * sends (maybe the ones we wait for) need. */
	if (can && r->bulk_on && rdma_bulk_ack_pending(&r->bulk)) {
		uint32_t slot = take_slot(r, out, RDMA_MSG_ACK);

		rdma_bulk_ack_take(&r->bulk, rdma_ring_tx_slot(r, slot));
		out->len = RDMA_BULK_ACK_SIZE;
		return 1;
	}
	if (can && r->q_head && !stream_left(r->q_head)) {
		/* The head request is in its bulk part: one source slot's
		 * worth goes by descriptor. */
		struct rdma_txreq *q = r->q_head;
		int src = q->zc ? rdma_bulk_zc_tag(&r->bulk) : rdma_bulk_src_free(&r->bulk);
		uint32_t slot;
		size_t n;

		if (src >= 0 && q->zc) {
			/* In place: one descriptor per iovec piece, up to the
			 * largest a receiver accepts. */
			const struct iovec *v = &q->iov[q->cur];
			const uint8_t *at = (const uint8_t *)v->iov_base + q->off;

			slot = take_slot(r, out, RDMA_MSG_DESC);
			n = v->iov_len - q->off < RDMA_BULK_CHUNK_MAX ? v->iov_len - q->off : RDMA_BULK_CHUNK_MAX;
			n = copy_out(r, q, NULL, n);
			q->zc_out++;
			rdma_bulk_desc_make_zc(&r->bulk, (uint32_t)src, at, q->zc_rkey, (uint32_t)n, q,
					       rdma_ring_tx_slot(r, slot));
			out->len = RDMA_BULK_DESC_SIZE;
			if (!q->left)
				pop_done(r);
			return 1;
		}
		if (src < 0) {
			r->bulk.st.stall_no_src++;
		} else {
			slot = take_slot(r, out, RDMA_MSG_DESC);
			n = copy_out(r, q, rdma_bulk_src_ptr(&r->bulk, (uint32_t)src), r->bulk.chunk);
			rdma_bulk_desc_make(&r->bulk, (uint32_t)src, (uint32_t)n, rdma_ring_tx_slot(r, slot));
			out->len = RDMA_BULK_DESC_SIZE;
			if (!q->left)
				pop_done(r);
			return 1;
		}
	} else if (can && r->q_head) {
		uint32_t slot = take_slot(r, out, RDMA_MSG_DATA);

		out->len = fill_slot(r, rdma_ring_tx_slot(r, slot));
		return 1;
	}
	/* Credits owed and no data to carry them (or data stalled): a
	 * credit-only message, which may use the last credit. */
	if (r->owed >= r->threshold && r->credits >= 1 && !r->ctrl_inflight) {
		out->slot = 0;
		out->len = 0;
		out->credits = r->owed;
		out->kind = RDMA_MSG_DATA;
		out->ctrl = 1;
		r->owed = 0;
		r->credits--;
		r->ctrl_inflight = 1;
		r->st.credit_msgs_out++;
		return 1;
	}
	return 0;
}

int rdma_ring_tx_done(struct rdma_ring *r, int ctrl, int status)
{
	if (r->failed)
		return r->failed;
	if (status < 0) {
		rdma_ring_fail(r, status);
		return status;
	}
	if (ctrl) {
		if (!r->ctrl_inflight)
			goto bad;
		r->ctrl_inflight = 0;
		return 0;
	}
	if (r->tx_tail == r->tx_head)
		goto bad;
	r->tx_tail++;
	return 0;
bad:
	rdma_ring_fail(r, PPRPC_EINTERNAL);
	return PPRPC_EINTERNAL;
}

int rdma_ring_rx_arrived(struct rdma_ring *r, uint32_t slot, uint32_t len, uint32_t imm, const uint8_t *data)
{
	/* Credits in use by us = peer_rx_depth - credits: the peer can return
	 * no more than that. */
	uint32_t in_use = r->peer_rx_depth - r->credits;
	uint32_t credits = imm & RDMA_IMM_CREDITS, kind = imm >> 24;

	if (r->failed)
		return r->failed;
	if (slot >= r->own.rx_depth || len > r->own.chunk || credits > in_use ||
	    r->rx_count >= r->own.rx_depth || kind > RDMA_MSG_ACK || (kind != RDMA_MSG_DATA && !r->bulk_on))
		goto bad;
	r->credits += credits;
	if (kind == RDMA_MSG_ACK) {
		uint32_t tag;

		if (rdma_bulk_ack_in(&r->bulk, data, len, &tag) < 0)
			goto bad;
		zc_acked(r, tag);
		r->owed++;
		r->st.msgs_in++;
		return 1;
	}
	r->rx_kind[slot] = (uint8_t)kind;
	r->rx_len[slot] = len;
	r->rx_fifo[(r->rx_head + r->rx_count) % r->own.rx_depth] = slot;
	r->rx_count++;
	r->st.msgs_in++;
	return 0;
bad:
	rdma_ring_fail(r, PPRPC_EPROTO);
	return PPRPC_EPROTO;
}

uint32_t rdma_ring_rx_kind(const struct rdma_ring *r)
{
	return r->rx_count ? r->rx_kind[r->rx_fifo[r->rx_head]] : RDMA_MSG_DATA;
}

int rdma_ring_rx_peek(const struct rdma_ring *r, uint32_t *ret_slot, uint32_t *ret_len)
{
	uint32_t slot;

	if (!r->rx_count)
		return 0;
	slot = r->rx_fifo[r->rx_head];
	*ret_slot = slot;
	*ret_len = r->rx_len[slot];
	return 1;
}

void rdma_ring_rx_consumed(struct rdma_ring *r)
{
	if (!r->rx_count)
		return;
	r->rx_head = (r->rx_head + 1) % r->own.rx_depth;
	r->rx_count--;
	r->owed++;
}

void rdma_ring_fail(struct rdma_ring *r, int code)
{
	if (!r->failed)
		r->failed = code < 0 ? code : PPRPC_EIO;
	while (r->q_head) {
		struct rdma_txreq *q = r->q_head;

		r->q_head = q->next;
		r->queued_bytes -= q->left;
		to_done(r, q, r->failed);
	}
	r->q_tail = &r->q_head;
	while (r->zc_wait) {
		struct rdma_txreq *q = r->zc_wait;

		r->zc_wait = q->next;
		to_done(r, q, r->failed);
	}
	/* Transfers in progress die with the connection (their READs flush). */
	rdma_bulk_reset(&r->bulk);
}

void rdma_ring_run_done(struct rdma_ring *r)
{
	/* Detach first: a callback may queue more (or fail the ring). */
	while (r->done_head) {
		struct rdma_txreq *list = r->done_head;

		r->done_head = NULL;
		r->done_tail = &r->done_head;
		while (list) {
			struct rdma_txreq *q = list;

			list = q->next;
			if (q->done)
				q->done(q->arg, q->status);
			free(q);
		}
	}
}

/* ---- memlock ladder ---------------------------------------------------------------- */

const char *rdma_ladder_step_name(enum rdma_ladder_step s)
{
	switch (s) {
	case RDMA_STEP_REQUESTED:
		return "requested";
	case RDMA_STEP_SMALLER_DEPTH:
		return "smaller-depth";
	case RDMA_STEP_SINGLE_CHUNK:
		return "single-256k-chunk";
	case RDMA_STEP_TCP:
		return "tcp";
	}
	return "?";
}

uint64_t rdma_geom_bytes(const struct rdma_geom *g)
{
	return ((uint64_t)g->tx_depth + g->rx_depth) * g->chunk;
}

int rdma_ladder_geom(const struct rdma_geom *req, enum rdma_ladder_step s, uint64_t budget,
		     struct rdma_geom *out)
{
	struct rdma_geom g = *req;
	uint64_t slots;
	uint32_t rx_min = req->rx_depth < RX_POSTED_GOAL ? req->rx_depth : RX_POSTED_GOAL;

	switch (s) {
	case RDMA_STEP_REQUESTED:
		break;
	case RDMA_STEP_SMALLER_DEPTH:
		/* Keep the chunk; give up TX depth first (down to 2, still
		 * pipelined), then receives down to the goal of 24. */
		slots = budget / g.chunk;
		/* The requested geometry fit the budget but registering it
		 * failed (an unknown limit): try half of it. */
		if (budget >= rdma_geom_bytes(req)) {
			slots = ((uint64_t)req->tx_depth + req->rx_depth) / 2;
			if (slots < 2u + rx_min)
				slots = 2u + rx_min;
		}
		if (slots < 2u + rx_min)
			return PPRPC_ENOMEM;
		g.tx_depth = slots - rx_min < req->tx_depth ? (uint32_t)(slots - rx_min) : req->tx_depth;
		g.rx_depth = slots - g.tx_depth < req->rx_depth ? (uint32_t)(slots - g.tx_depth) : req->rx_depth;
		if (g.tx_depth == req->tx_depth && g.rx_depth == req->rx_depth)
			return PPRPC_ENOMEM; /* that is the requested step, which did not fit */
		break;
	case RDMA_STEP_SINGLE_CHUNK:
		/* One 256 KiB TX chunk (stop-and-wait), as many receives as fit. */
		g.chunk = RDMA_FALLBACK_CHUNK;
		g.tx_depth = 1;
		slots = budget / g.chunk;
		if (slots < 1u + RDMA_RX_DEPTH_MIN)
			return PPRPC_ENOMEM;
		g.rx_depth = slots - 1 < req->rx_depth ? (uint32_t)(slots - 1) : req->rx_depth;
		break;
	case RDMA_STEP_TCP:
		return PPRPC_ENOMEM;
	}
	if (rdma_geom_bytes(&g) > budget)
		return PPRPC_ENOMEM;
	*out = g;
	return 0;
}

enum rdma_ladder_step rdma_ladder_plan(const struct rdma_geom *req, enum rdma_ladder_step from,
				       uint64_t budget, struct rdma_geom *out)
{
	for (enum rdma_ladder_step s = from; s < RDMA_STEP_TCP; s++)
		if (rdma_ladder_geom(req, s, budget, out) == 0)
			return s;
	return RDMA_STEP_TCP;
}

/*
 * tests/unit/test_rdma_ring.c — the RDMA ring / credit / chunking state
 * machine without hardware.
 *
 * Two rings are joined by a simulated RC wire: a posted message is copied
 * from the sender's TX slot into the receiver's RX slot (in order, as RC
 * delivers), the sender's completion is reported when the test says so, and
 * the receiver consumes messages into an output byte stream.  Every test
 * checks the bytes that came out against the bytes that went in.
 *
 * The bulk path (rdma_bulk.h) runs on the same wire: a DESC message names
 * memory of the sender's source slots (a pointer in this process), and the
 * receiver's READs are memcpy from it, completed at once unless the test
 * holds them (READs in flight when the peer vanishes).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"
#include "transport/rdma_ring.h"

#define MAXQ 4096

struct side {
	struct rdma_ring r;
	struct rdma_geom g;
	uint8_t *tx_mem, *rx_mem;
	/* posted, not yet delivered to the peer (the wire) */
	struct rdma_tx_msg wire[MAXQ];
	unsigned wire_n;
	/* delivered to the peer, completion not yet reported to us */
	int pend_ctrl[MAXQ];
	unsigned pend_n;
	uint8_t *out;          /* consumed bytes */
	size_t out_len, out_cap;
	/* The receive queue: posted RX slots in order.  Messages take them
	 * from the head; a consumed slot (or an ACK's, at once) is re-posted
	 * at the tail, so the order changes once ACKs are in play. */
	uint32_t rq[4096];
	uint32_t rq_head, rq_n;
	/* bulk slots (0 when the test does not enable the bulk path) */
	uint8_t *bulk_src, *bulk_land;
	int hold_reads;        /* READs posted but not completed */
	unsigned reads_held;
};

static void rq_push(struct side *s, uint32_t slot)
{
	s->rq[(s->rq_head + s->rq_n++) % 4096] = slot;
}

static void side_init(struct side *s, struct rdma_geom g, const struct rdma_geom *peer)
{
	memset(s, 0, sizeof(*s));
	s->g = g;
	s->tx_mem = calloc(g.tx_depth, g.chunk);
	s->rx_mem = calloc(g.rx_depth, g.chunk);
	s->out_cap = 1 << 20;
	s->out = malloc(s->out_cap);
	assert_non_null(s->tx_mem);
	assert_non_null(s->rx_mem);
	assert_int_equal(rdma_ring_init(&s->r, &g, peer->rx_depth, peer->chunk, s->tx_mem), 0);
	for (uint32_t i = 0; i < g.rx_depth; i++)
		rq_push(s, i);
}

/* Bulk slots: depth x chunk source and landing. */
static void side_bulk(struct side *s, uint32_t chunk, uint32_t depth, uint32_t max_reads)
{
	s->bulk_src = calloc(depth, chunk);
	s->bulk_land = calloc(depth, chunk);
	assert_non_null(s->bulk_src);
	assert_non_null(s->bulk_land);
	assert_int_equal(rdma_ring_bulk_enable(&s->r, chunk, depth, s->bulk_src, s->bulk_land, 0x1234, max_reads), 0);
}

static void side_fini(struct side *s)
{
	rdma_ring_fini(&s->r);
	free(s->tx_mem);
	free(s->rx_mem);
	free(s->out);
	free(s->bulk_src);
	free(s->bulk_land);
}

/* Post everything a can post now; returns how many messages. */
static unsigned post_all(struct side *a)
{
	struct rdma_tx_msg m;
	unsigned n = 0;
	int rc;

	while ((rc = rdma_ring_next(&a->r, &m)) == 1) {
		assert_true(a->wire_n < MAXQ);
		a->wire[a->wire_n++] = m;
		n++;
	}
	assert_true(rc == 0 || rc == a->r.failed);
	rdma_ring_run_done(&a->r);
	return n;
}

/* The wire delivers a's posted messages into b's RX slots. */
static void deliver(struct side *a, struct side *b)
{
	for (unsigned i = 0; i < a->wire_n; i++) {
		struct rdma_tx_msg *m = &a->wire[i];
		uint32_t slot;
		uint8_t *dst;
		int rc;

		assert_true(b->rq_n > 0);  /* credits guarantee a posted receive */
		slot = b->rq[b->rq_head];
		b->rq_head = (b->rq_head + 1) % 4096;
		b->rq_n--;
		dst = b->rx_mem + (size_t)slot * b->g.chunk;
		if (m->len)
			memcpy(dst, rdma_ring_tx_slot(&a->r, m->slot), m->len);
		rc = rdma_ring_rx_arrived(&b->r, slot, m->len, rdma_imm(m->credits, m->kind), dst);
		assert_true(rc == 0 || rc == 1);
		if (rc == 1)
			rq_push(b, slot);  /* an ACK: handled, re-posted at once */
		a->pend_ctrl[a->pend_n++] = m->ctrl;
	}
	a->wire_n = 0;
}

static void complete_all(struct side *a)
{
	for (unsigned i = 0; i < a->pend_n; i++)
		assert_int_equal(rdma_ring_tx_done(&a->r, a->pend_ctrl[i], 0), 0);
	a->pend_n = 0;
}

static void append(struct side *b, const uint8_t *p, size_t len)
{
	if (b->out_len + len > b->out_cap) {
		b->out_cap = (b->out_len + len) * 2;
		b->out = realloc(b->out, b->out_cap);
		assert_non_null(b->out);
	}
	memcpy(b->out + b->out_len, p, len);
	b->out_len += len;
}

/* Post (and, unless held, complete) the READs b's bulk path asks for. */
static unsigned do_reads(struct side *b)
{
	struct rdma_read rd;
	unsigned n = 0;

	if (!b->r.bulk_on)
		return 0;
	while (rdma_bulk_read_next(&b->r.bulk, &rd)) {
		assert_true(rd.len > 0 && rd.len <= b->r.bulk.chunk);
		assert_int_equal(rd.rkey, 0x1234);
		memcpy(rd.local, (const void *)(uintptr_t)rd.raddr, rd.len);
		if (b->hold_reads)
			b->reads_held++;
		else
			assert_int_equal(rdma_bulk_read_done(&b->r.bulk), 0);
		n++;
	}
	return n;
}

/* b consumes up to max received messages into its output stream (the
 * order rdma_verbs.c's pump keeps: landed bulk first, a DESC queues its
 * READs, stream data waits behind unfinished bulk). */
static unsigned consume(struct side *b, unsigned max)
{
	uint32_t slot, len;
	const uint8_t *p;
	unsigned n = 0;

	for (;;) {
		if (b->r.bulk_on && rdma_bulk_landed_peek(&b->r.bulk, &p, &len)) {
			append(b, p, len);
			rdma_bulk_landed_consumed(&b->r.bulk);
			n++;
			continue;
		}
		if (n >= max || !rdma_ring_rx_peek(&b->r, &slot, &len))
			break;
		if (rdma_ring_rx_kind(&b->r) == RDMA_MSG_DESC) {
			assert_int_equal(rdma_bulk_desc_in(&b->r.bulk, b->rx_mem + (size_t)slot * b->g.chunk, len, 0), 0);
		} else {
			if (rdma_bulk_busy(&b->r.bulk)) {
				if (do_reads(b))
					continue;
				break;
			}
			append(b, b->rx_mem + (size_t)slot * b->g.chunk, len);
		}
		rdma_ring_rx_consumed(&b->r);
		rq_push(b, slot);
		n++;
	}
	return n + do_reads(b);
}

/* Run both directions until nothing moves. */
static void run_until_idle(struct side *a, struct side *b)
{
	for (int guard = 0; guard < 100000; guard++) {
		unsigned moved = post_all(a) + post_all(b);

		deliver(a, b);
		deliver(b, a);
		complete_all(a);
		complete_all(b);
		moved += consume(a, ~0u) + consume(b, ~0u);
		if (!moved)
			return;
	}
	fail_msg("no progress limit reached");
}

struct cb_rec {
	int calls;
	int status;
};

static void done_cb(void *arg, int status)
{
	struct cb_rec *c = arg;

	c->calls++;
	c->status = status;
}

static uint8_t *pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n ? n : 1);

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131u + seed + (i >> 9));
	return p;
}

static const struct rdma_geom G_SMALL = { .chunk = 4096, .tx_depth = 4, .rx_depth = 8 };

/* Many messages, far more than the ring depth: slots and receives wrap
 * around many times; the last chunk is partial. */
static void test_wraparound_partial_last(void **state)
{
	struct side a, b;
	size_t n = 4096 * 100 + 123;
	uint8_t *src = pattern(n, 7);
	struct iovec iov = { src, n };
	struct cb_rec cb = { 0 };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &cb), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, n);
	assert_memory_equal(b.out, src, n);
	assert_int_equal(cb.calls, 1);
	assert_int_equal(cb.status, 0);
	assert_int_equal(a.r.st.msgs_out, 101);   /* 100 full + 1 partial */
	assert_true(a.r.tx_head > 4 * G_SMALL.tx_depth); /* wrapped many times */
	assert_int_equal(a.r.queued_bytes, 0);
	assert_int_equal(rdma_ring_tx_inflight(&a.r), 0);
	/* Credits all came back (no messages in flight). */
	assert_true(a.r.credits + b.r.owed == G_SMALL.rx_depth);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* Small frames coalesce into one slot; a frame split by the chunk boundary
 * continues in the next slot; iovecs of one request are kept in order. */
static void test_coalesce_and_iov(void **state)
{
	struct side a, b;
	uint8_t *x = pattern(10000, 1), *y = pattern(20, 2), *z = pattern(3000, 3);
	struct cb_rec c1 = { 0 }, c2 = { 0 }, c3 = { 0 };
	struct iovec v1[3] = { { y, 20 }, { x, 10000 }, { y, 0 } };
	struct iovec v2 = { z, 3000 };
	struct iovec v3 = { y, 20 };
	uint8_t expect[20 + 10000 + 3000 + 20];

	(void)state;
	memcpy(expect, y, 20);
	memcpy(expect + 20, x, 10000);
	memcpy(expect + 10020, z, 3000);
	memcpy(expect + 13020, y, 20);
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_enqueue(&a.r, v1, 3, done_cb, &c1), 0);
	assert_int_equal(rdma_ring_enqueue(&a.r, &v2, 1, done_cb, &c2), 0);
	assert_int_equal(rdma_ring_enqueue(&a.r, &v3, 1, done_cb, &c3), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, sizeof(expect));
	assert_memory_equal(b.out, expect, sizeof(expect));
	assert_int_equal(a.r.st.msgs_out, 4);  /* 13040 bytes in 4 KiB slots */
	assert_int_equal(c1.calls + c2.calls + c3.calls, 3);
	free(x);
	free(y);
	free(z);
	side_fini(&a);
	side_fini(&b);
}

/* The receiver stops consuming: the sender sends exactly peer_rx_depth - 1
 * messages (the last credit is kept for credit returns), then stalls; once
 * the receiver consumes, credits come back (credit-only message, since b
 * has no data) and the rest flows. */
static void test_credit_exhaustion(void **state)
{
	struct side a, b;
	struct rdma_geom ga = { .chunk = 4096, .tx_depth = 16, .rx_depth = 8 };
	size_t n = 4096 * 40;
	uint8_t *src = pattern(n, 9);
	struct iovec iov = { src, n };
	struct cb_rec cb = { 0 };

	(void)state;
	side_init(&a, ga, &ga);
	side_init(&b, ga, &ga);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &cb), 0);
	for (int round = 0; round < 3; round++) {
		post_all(&a);
		deliver(&a, &b);
		complete_all(&a);
	}
	assert_int_equal(a.r.st.msgs_out, ga.rx_depth - 1);
	assert_int_equal(a.r.credits, 1);
	assert_true(a.r.st.stall_no_credit > 0);
	assert_int_equal(cb.calls, 0);
	/* b consumes two: below the threshold (4), no credit message yet. */
	consume(&b, 2);
	assert_int_equal(post_all(&b), 0);
	/* b consumes the rest: now it owes 7 >= 4 and returns them. */
	consume(&b, ~0u);
	assert_int_equal(post_all(&b), 1);
	assert_int_equal(b.r.st.credit_msgs_out, 1);
	deliver(&b, &a);
	complete_all(&b);
	assert_int_equal(a.r.credits, 8);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, n);
	assert_memory_equal(b.out, src, n);
	assert_int_equal(cb.calls, 1);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* TX slots, not credits, limit: with tx_depth 2 and completions withheld,
 * only 2 messages go; each completion lets one more go. */
static void test_tx_slots_limit(void **state)
{
	struct side a, b;
	struct rdma_geom g = { .chunk = 4096, .tx_depth = 2, .rx_depth = 32 };
	uint8_t *src = pattern(4096 * 5, 3);
	struct iovec iov = { src, 4096 * 5 };

	(void)state;
	side_init(&a, g, &g);
	side_init(&b, g, &g);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, NULL, NULL), 0);
	assert_int_equal(post_all(&a), 2);
	assert_int_equal(post_all(&a), 0);
	assert_true(a.r.st.stall_no_slot > 0);
	deliver(&a, &b);
	assert_int_equal(rdma_ring_tx_done(&a.r, 0, 0), 0);
	a.pend_n--;
	assert_int_equal(post_all(&a), 1);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, 4096 * 5);
	assert_memory_equal(b.out, src, 4096 * 5);
	/* A completion nobody posted is a bug, caught. */
	assert_int_equal(rdma_ring_tx_done(&a.r, 0, 0), PPRPC_EINTERNAL);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* Different chunk sizes: messages are at most the smaller one. */
static void test_asymmetric_chunk(void **state)
{
	struct side a, b;
	struct rdma_geom ga = { .chunk = 16384, .tx_depth = 4, .rx_depth = 8 };
	struct rdma_geom gb = { .chunk = 4096, .tx_depth = 4, .rx_depth = 8 };
	size_t n = 50000;
	uint8_t *src = pattern(n, 5);
	struct iovec iov = { src, n };

	(void)state;
	side_init(&a, ga, &gb);
	side_init(&b, gb, &ga);
	assert_int_equal(a.r.msg_max, 4096);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, NULL, NULL), 0);
	assert_int_equal(rdma_ring_enqueue(&b.r, &iov, 1, NULL, NULL), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, n);
	assert_int_equal(a.out_len, n);
	assert_memory_equal(b.out, src, n);
	assert_memory_equal(a.out, src, n);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* Both directions busy at once with tiny rings: credits ride on data, and
 * nothing deadlocks. */
static void test_bidirectional_no_deadlock(void **state)
{
	struct side a, b;
	struct rdma_geom g = { .chunk = 4096, .tx_depth = 1, .rx_depth = 4 };
	size_t n = 4096 * 64 + 1;
	uint8_t *s1 = pattern(n, 11), *s2 = pattern(n, 12);
	struct iovec v1 = { s1, n }, v2 = { s2, n };

	(void)state;
	side_init(&a, g, &g);
	side_init(&b, g, &g);
	assert_int_equal(rdma_ring_enqueue(&a.r, &v1, 1, NULL, NULL), 0);
	assert_int_equal(rdma_ring_enqueue(&b.r, &v2, 1, NULL, NULL), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, n);
	assert_int_equal(a.out_len, n);
	assert_memory_equal(b.out, s1, n);
	assert_memory_equal(a.out, s2, n);
	free(s1);
	free(s2);
	side_fini(&a);
	side_fini(&b);
}

/* A completion error fails the ring: queued requests fail once, with the
 * error; nothing more is posted; later completions are ignored. */
static void test_completion_error(void **state)
{
	struct side a, b;
	uint8_t *src = pattern(4096 * 20, 4);
	struct iovec iov = { src, 4096 * 20 };
	struct cb_rec c1 = { 0 }, c2 = { 0 };
	struct rdma_tx_msg m;

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &c1), 0);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &c2), 0);
	assert_int_equal(post_all(&a), 4);
	assert_int_equal(rdma_ring_tx_done(&a.r, 0, PPRPC_EIO), PPRPC_EIO);
	rdma_ring_run_done(&a.r);
	assert_int_equal(c1.calls, 1);
	assert_int_equal(c1.status, PPRPC_EIO);
	assert_int_equal(c2.calls, 1);
	assert_int_equal(c2.status, PPRPC_EIO);
	assert_int_equal(rdma_ring_next(&a.r, &m), PPRPC_EIO);
	assert_int_equal(rdma_ring_tx_done(&a.r, 0, 0), PPRPC_EIO);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &c1), PPRPC_EIO);
	assert_int_equal(a.r.queued_bytes, 0);
	free(src);
	side_fini(&a);
	side_fini(&b);
	assert_int_equal(c1.calls, 1);  /* fini does not call it again */
}

/* The peer disappears mid-transfer: part of a large send was delivered,
 * the rest fails (flush); the receiver got a clean prefix; a second fail
 * (DISCONNECTED after the flush errors) changes nothing. */
static void test_peer_gone_mid_transfer(void **state)
{
	struct side a, b;
	size_t n = 4096 * 30;
	uint8_t *src = pattern(n, 6);
	struct iovec iov = { src, n };
	struct cb_rec cb = { 0 };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_enqueue(&a.r, &iov, 1, done_cb, &cb), 0);
	post_all(&a);
	deliver(&a, &b);
	complete_all(&a);
	consume(&b, ~0u);
	post_all(&b);
	deliver(&b, &a);
	complete_all(&b);
	post_all(&a);            /* more in flight when the peer vanishes */
	a.wire_n = 0;
	assert_true(b.out_len > 0 && b.out_len < n);
	assert_memory_equal(b.out, src, b.out_len);
	assert_int_equal(rdma_ring_tx_done(&a.r, 0, PPRPC_ECONN), PPRPC_ECONN);
	rdma_ring_fail(&a.r, PPRPC_EIO);
	rdma_ring_run_done(&a.r);
	assert_int_equal(cb.calls, 1);
	assert_int_equal(cb.status, PPRPC_ECONN);
	assert_int_equal(a.r.failed, PPRPC_ECONN);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* A peer that lies: a bad slot, an oversize message, or credits we never
 * gave it fail the ring with a protocol error. */
static void test_hostile_peer(void **state)
{
	struct side a, b;

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_rx_arrived(&a.r, 0, 10, 1, NULL), PPRPC_EPROTO); /* credits never lent */
	side_fini(&a);
	side_init(&a, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_rx_arrived(&a.r, G_SMALL.rx_depth, 10, 0, NULL), PPRPC_EPROTO);
	side_fini(&a);
	side_init(&b, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_rx_arrived(&b.r, 0, G_SMALL.chunk + 1, 0, NULL), PPRPC_EPROTO);
	side_fini(&b);
}

/* A done callback may queue the next send (re-entrancy). */
struct chain {
	struct rdma_ring *r;
	struct iovec iov;
	int left;
};

static void chain_cb(void *arg, int status)
{
	struct chain *c = arg;

	assert_int_equal(status, 0);
	if (c->left-- > 0)
		assert_int_equal(rdma_ring_enqueue(c->r, &c->iov, 1, chain_cb, c), 0);
}

static void test_requeue_from_callback(void **state)
{
	struct side a, b;
	uint8_t *src = pattern(5000, 8);
	struct chain ch;

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	ch.r = &a.r;
	ch.iov.iov_base = src;
	ch.iov.iov_len = 5000;
	ch.left = 9;
	assert_int_equal(rdma_ring_enqueue(&a.r, &ch.iov, 1, chain_cb, &ch), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, 50000);
	for (int i = 0; i < 10; i++)
		assert_memory_equal(b.out + i * 5000, src, 5000);
	free(src);
	side_fini(&a);
	side_fini(&b);
}

/* ---- the bulk path (rdma_bulk.h) ------------------------------------------------------ */

#define BCHUNK (64u << 10)

/* Frames whose bulk goes by READ, between frames through the slots: the
 * byte stream comes out whole and in order, source slots wrap, the last
 * piece is partial, a bulk split across two iovecs and one starting at
 * byte 0 work; every descriptor is acknowledged and the bytes-by-path
 * counters add up. */
static void test_bulk_roundtrip(void **state)
{
	struct side a, b;
	size_t n1 = 300 * 1024 + 123, n3 = 70 * 1024;
	uint8_t *hdr = pattern(100, 1), *p1 = pattern(n1, 2), *small = pattern(50, 3), *p3 = pattern(n3, 4);
	struct iovec f1[2] = { { hdr, 100 }, { p1, n1 } };
	struct iovec f2 = { small, 50 };
	struct iovec f3[2] = { { p3, 10 * 1024 }, { p3 + 10 * 1024, n3 - 10 * 1024 } };
	struct cb_rec c1 = { 0 }, c2 = { 0 }, c3 = { 0 };
	size_t total = 100 + n1 + 50 + n3;

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	side_bulk(&b, BCHUNK, 2, 2);
	assert_int_equal(rdma_ring_enqueue_bulk(&a.r, f1, 2, 100, done_cb, &c1), 0);
	assert_int_equal(rdma_ring_enqueue(&a.r, &f2, 1, done_cb, &c2), 0);
	assert_int_equal(rdma_ring_enqueue_bulk(&a.r, f3, 2, 0, done_cb, &c3), 0);
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, total);
	assert_memory_equal(b.out, hdr, 100);
	assert_memory_equal(b.out + 100, p1, n1);
	assert_memory_equal(b.out + 100 + n1, small, 50);
	assert_memory_equal(b.out + 150 + n1, p3, n3);
	assert_true(c1.calls == 1 && c2.calls == 1 && c3.calls == 1);
	assert_true(c1.status == 0 && c2.status == 0 && c3.status == 0);
	/* 300 KiB + 123 in 64 KiB pieces: 5; 70 KiB: 2. */
	assert_int_equal(a.r.bulk.st.descs_out, 7);
	assert_int_equal(a.r.bulk.st.acks_in, 7);
	assert_int_equal(b.r.bulk.st.acks_out, 7);
	assert_int_equal(a.r.bulk.st.bytes_out, n1 + n3);
	assert_int_equal(b.r.bulk.st.bytes_in, n1 + n3);
	assert_int_equal(b.r.bulk.st.reads, 7);
	assert_int_equal(a.r.bulk.src_busy, 0);
	assert_false(rdma_bulk_busy(&b.r.bulk));
	assert_int_equal(a.r.queued_bytes, 0);
	free(hdr);
	free(p1);
	free(small);
	free(p3);
	side_fini(&a);
	side_fini(&b);
}

/* The landing slots are smaller than the sender's source slots: one
 * descriptor is pulled in several READs, at most max_reads in flight. */
static void test_bulk_split_reads(void **state)
{
	struct side a, b;
	size_t n = 1000 * 1024;
	uint8_t *p = pattern(n, 9);
	struct iovec iov = { p, n };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, 4 * BCHUNK, 2, 2);
	side_bulk(&b, BCHUNK, 3, 2);
	b.hold_reads = 1;
	assert_int_equal(rdma_ring_enqueue_bulk(&a.r, &iov, 1, 0, NULL, NULL), 0);
	post_all(&a);
	deliver(&a, &b);
	consume(&b, ~0u);
	assert_int_equal(b.reads_held, 2);           /* max_reads, though 3 landing slots */
	assert_int_equal(b.r.bulk.land_inflight, 2);
	b.hold_reads = 0;
	while (b.reads_held) {
		assert_int_equal(rdma_bulk_read_done(&b.r.bulk), 0);
		b.reads_held--;
	}
	run_until_idle(&a, &b);
	assert_int_equal(b.out_len, n);
	assert_memory_equal(b.out, p, n);
	assert_int_equal(a.r.bulk.st.descs_out, 4);  /* 1000 KiB in 256 KiB source slots */
	assert_int_equal(b.r.bulk.st.reads, 16);     /* ... pulled in 64 KiB READs */
	free(p);
	side_fini(&a);
	side_fini(&b);
}

/* Both sides send bulk at once with one source slot each, and small frames
 * between: ACKs go first, so neither waits for the other for ever. */
static void test_bulk_both_ways_one_slot(void **state)
{
	struct side a, b;
	size_t n = 200 * 1024;
	uint8_t *pa = pattern(n, 11), *pb = pattern(n, 12), *s = pattern(300, 13);
	struct iovec va = { pa, n }, vb = { pb, n }, vs = { s, 300 };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 1, 1);
	side_bulk(&b, BCHUNK, 1, 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rdma_ring_enqueue_bulk(&a.r, &va, 1, 0, NULL, NULL), 0);
		assert_int_equal(rdma_ring_enqueue(&a.r, &vs, 1, NULL, NULL), 0);
		assert_int_equal(rdma_ring_enqueue_bulk(&b.r, &vb, 1, 0, NULL, NULL), 0);
		assert_int_equal(rdma_ring_enqueue(&b.r, &vs, 1, NULL, NULL), 0);
	}
	run_until_idle(&a, &b);
	assert_int_equal(a.out_len, 3 * (n + 300));
	assert_int_equal(b.out_len, 3 * (n + 300));
	for (int i = 0; i < 3; i++) {
		assert_memory_equal(b.out + i * (n + 300), pa, n);
		assert_memory_equal(b.out + i * (n + 300) + n, s, 300);
		assert_memory_equal(a.out + i * (n + 300), pb, n);
	}
	free(pa);
	free(pb);
	free(s);
	side_fini(&a);
	side_fini(&b);
}

/* The peer vanishes with READs in flight: the receiver delivered only a
 * clean prefix (nothing of the unfinished descriptor), requests not yet
 * copied into source slots fail with the code, copied ones completed. */
static void test_bulk_peer_gone_mid_read(void **state)
{
	struct side a, b;
	size_t n = 256 * 1024;
	uint8_t *p = pattern(n, 14), *s = pattern(64, 15);
	struct iovec v = { p, n }, vs = { s, 64 };
	struct cb_rec c1 = { 0 }, c2 = { 0 }, c3 = { 0 };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	side_bulk(&b, BCHUNK, 2, 2);
	assert_int_equal(rdma_ring_enqueue(&a.r, &vs, 1, done_cb, &c1), 0);
	assert_int_equal(rdma_ring_enqueue_bulk(&a.r, &v, 1, 0, done_cb, &c2), 0);
	assert_int_equal(rdma_ring_enqueue_bulk(&a.r, &v, 1, 0, done_cb, &c3), 0);
	b.hold_reads = 1;
	post_all(&a);            /* the 64 B, then two descriptors: source slots full */
	rdma_ring_run_done(&a.r);
	assert_int_equal(a.r.bulk.st.descs_out, 2);
	assert_int_equal(a.r.bulk.st.stall_no_src > 0, 1);
	deliver(&a, &b);
	complete_all(&a);
	consume(&b, ~0u);
	assert_int_equal(b.reads_held, 2);
	assert_int_equal(b.out_len, 64);   /* the frame before the bulk */
	assert_memory_equal(b.out, s, 64);
	/* Gone: b's READs flush (a completion error fails its ring), a's
	 * DISCONNECTED fails a's. */
	rdma_ring_fail(&b.r, PPRPC_ECONN);
	rdma_ring_fail(&a.r, PPRPC_ECONN);
	rdma_ring_run_done(&a.r);
	assert_false(rdma_bulk_busy(&b.r.bulk));
	assert_int_equal(consume(&b, ~0u), 0);   /* nothing more is delivered */
	assert_int_equal(b.out_len, 64);
	assert_int_equal(c1.status, 0);
	assert_true(c2.calls == 0 || c2.status == PPRPC_ECONN);  /* partly copied: fails */
	rdma_ring_run_done(&a.r);
	assert_int_equal(c2.calls, 1);
	assert_int_equal(c2.status, PPRPC_ECONN);
	assert_int_equal(c3.calls, 1);
	assert_int_equal(c3.status, PPRPC_ECONN);
	assert_int_equal(a.r.queued_bytes, 0);
	free(p);
	free(s);
	side_fini(&a);
	side_fini(&b);
}

/* Zero-copy: a bulk in memory the peer may READ (owner-declared region)
 * is described in place, in pieces up to the receiver's limit and pulled
 * through the landing slots; its done callback waits for the ACKs (the
 * owner must not reuse the memory before), and fails if the link dies
 * first.  Copied sends behind it are not held up. */
static void test_bulk_zero_copy(void **state)
{
	struct side a, b;
	size_t n = 3 * 1024 * 1024 + 100;
	uint8_t *hdr = pattern(40, 21), *p = pattern(n, 22), *s = pattern(70, 23);
	struct iovec f[2] = { { hdr, 40 }, { p, n } }, vs = { s, 70 };
	struct cb_rec c1 = { 0 }, c2 = { 0 };

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	side_bulk(&b, BCHUNK, 2, 2);
	assert_int_equal(rdma_ring_enqueue_zc(&a.r, f, 2, 40, 0x1234, done_cb, &c1), 0);
	assert_int_equal(rdma_ring_enqueue(&a.r, &vs, 1, done_cb, &c2), 0);
	post_all(&a);
	rdma_ring_run_done(&a.r);
	assert_int_equal(c1.calls, 0);     /* described, not acknowledged */
	assert_int_equal(c2.calls, 1);     /* copied behind it */
	assert_int_equal(a.r.bulk.st.zc_descs_out, 1);
	run_until_idle(&a, &b);
	assert_int_equal(c1.calls, 1);
	assert_int_equal(c1.status, 0);
	assert_int_equal(b.out_len, 40 + n + 70);
	assert_memory_equal(b.out, hdr, 40);
	assert_memory_equal(b.out + 40, p, n);
	assert_memory_equal(b.out + 40 + n, s, 70);
	assert_int_equal(b.r.bulk.st.reads, (n + BCHUNK - 1) / BCHUNK);
	assert_int_equal(a.r.bulk.st.bytes_out, n);
	assert_int_equal(a.r.bulk.src_busy, 0);
	assert_null(a.r.zc_wait);
	/* Again, and the link dies before the ACK. */
	assert_int_equal(rdma_ring_enqueue_zc(&a.r, f, 2, 40, 0x1234, done_cb, &c1), 0);
	post_all(&a);
	rdma_ring_run_done(&a.r);
	assert_int_equal(c1.calls, 1);
	rdma_ring_fail(&a.r, PPRPC_ECONN);
	rdma_ring_run_done(&a.r);
	assert_int_equal(c1.calls, 2);
	assert_int_equal(c1.status, PPRPC_ECONN);
	free(hdr);
	free(p);
	free(s);
	side_fini(&a);
	side_fini(&b);
}

/* Completion errors and a lying peer on the bulk path. */
static void test_bulk_hostile(void **state)
{
	uint32_t tag = 99;
	struct side a, b;
	uint8_t msg[64] = { 0 };
	uint8_t desc[RDMA_BULK_DESC_SIZE];

	(void)state;
	/* DESC / ACK from a peer that never negotiated the bulk path, or an
	 * unknown kind. */
	side_init(&a, G_SMALL, &G_SMALL);
	assert_int_equal(rdma_ring_rx_arrived(&a.r, 0, 24, rdma_imm(0, RDMA_MSG_DESC), msg), PPRPC_EPROTO);
	side_fini(&a);
	side_init(&a, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	assert_int_equal(rdma_ring_rx_arrived(&a.r, 0, 8, rdma_imm(0, 3), msg), PPRPC_EPROTO);
	side_fini(&a);
	/* An ACK for a source slot that holds nothing, or malformed. */
	side_init(&a, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	assert_int_equal(rdma_ring_rx_arrived(&a.r, 0, 8, rdma_imm(0, RDMA_MSG_ACK), msg), PPRPC_EPROTO);
	side_fini(&a);
	side_init(&a, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	rdma_bulk_desc_make(&a.r.bulk, 1, 10, desc);
	assert_int_equal(rdma_bulk_ack_in(&a.r.bulk, msg, 7, &tag), PPRPC_EPROTO);
	msg[3] = 1;   /* tag 1 */
	msg[7] = 2;   /* status 2: no such status */
	assert_int_equal(rdma_bulk_ack_in(&a.r.bulk, msg, 8, &tag), PPRPC_EPROTO);
	msg[7] = 0;
	assert_int_equal(rdma_bulk_ack_in(&a.r.bulk, msg, 8, &tag), 0);
	assert_int_equal(tag, 1);
	assert_int_equal(a.r.bulk.st.bytes_out, 10);
	assert_int_equal(rdma_bulk_ack_in(&a.r.bulk, msg, 8, &tag), PPRPC_EPROTO);  /* twice */
	side_fini(&a);
	/* Descriptors: wrong size, empty, too large, too many; a READ
	 * completion with none in flight. */
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&b, BCHUNK, 2, 2);
	side_init(&a, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	rdma_bulk_desc_make(&a.r.bulk, 0, 100, desc);
	assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE - 1, 0), PPRPC_EPROTO);
	rdma_bulk_desc_make(&a.r.bulk, 0, 0, desc);
	assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE, 0), PPRPC_EPROTO);
	rdma_bulk_desc_make(&a.r.bulk, 0, RDMA_BULK_CHUNK_MAX + 1, desc);
	assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE, 0), PPRPC_EPROTO);
	rdma_bulk_desc_make(&a.r.bulk, 0, 100, desc);
	for (int i = 0; i < RDMA_BULK_DEPTH_MAX; i++)
		assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE, 0), 0);
	assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE, 0), PPRPC_EPROTO);
	assert_int_equal(rdma_bulk_read_done(&b.r.bulk), PPRPC_EINTERNAL);
	side_fini(&a);
	side_fini(&b);
}

/* A receiver that stopped reading (reader error, closing) acknowledges
 * descriptors unread: the sender's slots free up, its requests complete,
 * and no bytes count as moved by READ. */
static void test_bulk_discard(void **state)
{
	uint32_t tag;
	struct side a, b;
	uint8_t desc[RDMA_BULK_DESC_SIZE], ack[RDMA_BULK_ACK_SIZE];

	(void)state;
	side_init(&a, G_SMALL, &G_SMALL);
	side_init(&b, G_SMALL, &G_SMALL);
	side_bulk(&a, BCHUNK, 2, 2);
	side_bulk(&b, BCHUNK, 2, 2);
	rdma_bulk_desc_make(&a.r.bulk, 0, 5000, desc);
	assert_int_equal(rdma_bulk_desc_in(&b.r.bulk, desc, RDMA_BULK_DESC_SIZE, 1), 0);
	assert_false(rdma_bulk_busy(&b.r.bulk));
	assert_true(rdma_bulk_ack_pending(&b.r.bulk));
	rdma_bulk_ack_take(&b.r.bulk, ack);
	assert_int_equal(rdma_bulk_ack_in(&a.r.bulk, ack, RDMA_BULK_ACK_SIZE, &tag), 0);
	assert_int_equal(a.r.bulk.src_busy, 0);
	assert_int_equal(a.r.bulk.st.bytes_out, 0);
	side_fini(&a);
	side_fini(&b);
}

static void test_geom_validate(void **state)
{
	char err[200];
	struct rdma_geom g = { .chunk = 512 << 10, .tx_depth = 8, .rx_depth = 32 };

	(void)state;
	assert_int_equal(rdma_geom_validate(&g, err, sizeof(err)), 0);
	g.rx_depth = 16;
	assert_int_equal(rdma_geom_validate(&g, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "rx_depth"));
	g.rx_depth = 32;
	g.chunk = 1000;
	assert_int_equal(rdma_geom_validate(&g, err, sizeof(err)), PPRPC_EINVAL);
	g.chunk = 512 << 10;
	g.tx_depth = 0;
	assert_int_equal(rdma_geom_validate(&g, err, sizeof(err)), PPRPC_EINVAL);
}

/* The memlock ladder: requested -> smaller depth -> one 256 KiB chunk -> TCP. */
static void test_ladder(void **state)
{
	struct rdma_geom req = { .chunk = 512 << 10, .tx_depth = 8, .rx_depth = 32 }, g;
	const uint64_t MiB = 1 << 20;

	(void)state;
	assert_int_equal(rdma_geom_bytes(&req), 20 * MiB);
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, UINT64_MAX, &g), RDMA_STEP_REQUESTED);
	assert_int_equal(g.tx_depth, 8);
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, 20 * MiB, &g), RDMA_STEP_REQUESTED);
	/* 16 MiB: 32 slots of 512 KiB: tx 8, rx 24. */
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, 16 * MiB, &g), RDMA_STEP_SMALLER_DEPTH);
	assert_int_equal(g.chunk, 512 << 10);
	assert_int_equal(g.tx_depth, 8);
	assert_int_equal(g.rx_depth, 24);
	/* 14 MiB: 28 slots: tx 4, rx 24. */
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, 14 * MiB, &g), RDMA_STEP_SMALLER_DEPTH);
	assert_int_equal(g.tx_depth, 4);
	assert_int_equal(g.rx_depth, 24);
	assert_true(rdma_geom_bytes(&g) <= 14 * MiB);
	/* 8 MiB (a typical default): one 256 KiB chunk, 31 receives. */
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, 8 * MiB, &g), RDMA_STEP_SINGLE_CHUNK);
	assert_int_equal(g.chunk, 256 << 10);
	assert_int_equal(g.tx_depth, 1);
	assert_int_equal(g.rx_depth, 31);
	/* Registration failed at a step that "fit": the caller resumes after it. */
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_SMALLER_DEPTH, UINT64_MAX, &g), RDMA_STEP_SMALLER_DEPTH);
	assert_int_equal(g.tx_depth, 2);
	assert_int_equal(g.rx_depth, 24);
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_SINGLE_CHUNK, UINT64_MAX, &g), RDMA_STEP_SINGLE_CHUNK);
	/* 1 MiB: nothing fits. */
	assert_int_equal(rdma_ladder_plan(&req, RDMA_STEP_REQUESTED, 1 * MiB, &g), RDMA_STEP_TCP);
	assert_string_equal(rdma_ladder_step_name(RDMA_STEP_SINGLE_CHUNK), "single-256k-chunk");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wraparound_partial_last),
		cmocka_unit_test(test_coalesce_and_iov),
		cmocka_unit_test(test_credit_exhaustion),
		cmocka_unit_test(test_tx_slots_limit),
		cmocka_unit_test(test_asymmetric_chunk),
		cmocka_unit_test(test_bidirectional_no_deadlock),
		cmocka_unit_test(test_completion_error),
		cmocka_unit_test(test_peer_gone_mid_transfer),
		cmocka_unit_test(test_hostile_peer),
		cmocka_unit_test(test_requeue_from_callback),
		cmocka_unit_test(test_bulk_roundtrip),
		cmocka_unit_test(test_bulk_split_reads),
		cmocka_unit_test(test_bulk_both_ways_one_slot),
		cmocka_unit_test(test_bulk_peer_gone_mid_read),
		cmocka_unit_test(test_bulk_zero_copy),
		cmocka_unit_test(test_bulk_hostile),
		cmocka_unit_test(test_bulk_discard),
		cmocka_unit_test(test_geom_validate),
		cmocka_unit_test(test_ladder),
	};

	return cmocka_run_group_tests_name("rdma_ring", tests, NULL, NULL);
}

/*
 * tests/unit/test_xfer_core.c — the stage-boundary transfer core (send_sm,
 * recv_sm: daemon/xfer) without sockets, threads or devices.
 *
 * A source and a destination state machine are joined by a simulated peer
 * link: what the source hands to the link (send_sm_next_wire) becomes a
 * PullChunk reply in a queue, delivered to the destination when the test
 * says (recv_sm_on_chunk, the bulk copied where it says, then
 * recv_sm_on_reply_done); the write completes at the source when the test
 * says (send_sm_on_written).  The "workers" are loops that carry out each
 * step's action with memcpy: capture into a slot of a host ring or of an
 * IPC pool (both arrays here), upload from the stage, copy out of the pool.
 * PullReleases go back to the source as send_sm_on_release.  Every transfer
 * checks the bytes that came out against the bytes that went in, and that
 * every slot went back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/xfer/recv_sm.h"
#include "daemon/xfer/send_sm.h"
#include "daemon/xfer/transfer.h"
#include "pprpc/types.h"

#define KIB 1024u
#define MAXQ 4096
#define MAXSLOTS 64

/* A slot allocator over one array (the host ring or the IPC pool). */
struct slots {
	uint8_t *mem;
	uint64_t slot_size;
	int n, used;
	int free_[MAXSLOTS], nfree;
};

static void slots_init(struct slots *s, int n, uint64_t slot_size)
{
	s->mem = calloc((size_t)n, slot_size);
	assert_non_null(s->mem);
	s->slot_size = slot_size;
	s->n = n;
	s->nfree = 0;
	s->used = 0;
	for (int i = n - 1; i >= 0; i--)
		s->free_[s->nfree++] = i;
}

static int slots_get(struct slots *s)
{
	if (!s->nfree)
		return -1;
	s->used++;
	return s->free_[--s->nfree];
}

static void slots_put(struct slots *s, int slot)
{
	assert_true(slot >= 0 && slot < s->n);
	for (int i = 0; i < s->nfree; i++)
		assert_int_not_equal(s->free_[i], slot); /* never given back twice */
	s->free_[s->nfree++] = slot;
	s->used--;
}

static uint8_t *slots_ptr(struct slots *s, int slot)
{
	return s->mem + (uint64_t)slot * s->slot_size;
}

/* One reply on the simulated link. */
struct reply {
	int code;                   /* < 0: an error reply */
	uint32_t chunk;             /* the source's chunk (write completion) */
	int has_chunk;
	struct xr_chunk_msg m;
	uint8_t handle[XR_HANDLE];
	uint8_t *bulk;
	uint64_t bulk_len;
	int more;
};

struct sim {
	/* source */
	struct send_sm s;
	uint8_t *src;               /* the SEND's tensor */
	struct slots ring, pool;
	uint8_t pool_handle[XR_HANDLE];
	struct xs_env env;
	int pool_state;             /* what the worker finds: 0 not made, 1, -1 */
	int pool_made;              /* MAKE_POOL actions seen */
	int chose_ipc;
	/* the link */
	struct reply q[MAXQ];
	unsigned qh, qn;
	uint32_t unwritten[MAXQ];   /* delivered, write not yet completed */
	unsigned nunwritten;
	/* destination */
	struct recv_sm r;
	uint8_t *stage, *dst;
	int releases, final_release;
	uint64_t size;
};

static void put_cb(void *arg, enum xs_where where, int32_t slot)
{
	struct sim *x = arg;

	assert_true(where == XS_STAGED || where == XS_POOL);
	slots_put(where == XS_POOL ? &x->pool : &x->ring, slot);
}

static void fill(uint8_t *p, uint64_t n, uint32_t seed)
{
	uint32_t v = seed * 2654435761u + 1;

	for (uint64_t i = 0; i < n; i++) {
		v = v * 1103515245u + 12345u;
		p[i] = (uint8_t)(v >> 16);
	}
}

/* A source with a SEND of size bytes laid out in the host ring's slots. */
static struct sim *sim_new(uint64_t size, int ring_slots, uint64_t ring_slot, int pool_slots, uint64_t pool_slot)
{
	struct sim *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	x->size = size;
	x->src = malloc(size);
	x->stage = calloc(1, size);
	x->dst = calloc(1, size);
	assert_true(x->src && x->stage && x->dst);
	fill(x->src, size, (uint32_t)size);
	slots_init(&x->ring, ring_slots, ring_slot);
	slots_init(&x->pool, pool_slots ? pool_slots : 1, pool_slot ? pool_slot : 4096);
	memset(x->pool_handle, 0x77, sizeof(x->pool_handle));
	send_sm_init(&x->s, 42, 1000);
	x->env.now_us = 1000000;
	return x;
}

static void sim_free(struct sim *x)
{
	send_sm_fini(&x->s);
	recv_sm_fini(&x->r);
	free(x->ring.mem);
	free(x->pool.mem);
	free(x->src);
	free(x->stage);
	free(x->dst);
	for (unsigned i = 0; i < x->qn; i++)
		free(x->q[(x->qh + i) % MAXQ].bulk);
	free(x);
}

static void do_send(struct sim *x, int in_place_ok, int ipc_ok)
{
	bool in_use;

	assert_int_equal(send_sm_on_send(&x->s, x->size, x->ring.slot_size, in_place_ok, ipc_ok, &in_use), 0);
	assert_false(in_use);
}

/* The destination's RECV sends its PULL, the source attaches it. */
static void do_pull(struct sim *x, int ipc)
{
	recv_sm_init(&x->r, 42, x->size, ipc);
	assert_int_equal(send_sm_check_pull(&x->s, x->size), XS_PULL_OK);
	send_sm_on_pull(&x->s, x->size, ipc, 0);
}

/* What the shell tells the core about free slots. */
static void sim_rooms(struct sim *x)
{
	x->env.room_host = x->ring.nfree > 0;
	x->env.room_pool = x->pool.nfree > 0;
}

static bool src_ready(struct sim *x)
{
	sim_rooms(x);
	return send_sm_ready(&x->s, &x->env);
}

/* The source's worker: carry out actions until it waits or ends.  Returns
 * the last action's kind. */
static enum xs_act_kind src_worker(struct sim *x, struct xs_act *last)
{
	struct xs_act a;

	for (int guard = 0; guard < 100000; guard++) {
		x->env.pool = x->pool_state;
		x->env.pool_slot = x->pool.slot_size;
		sim_rooms(x);
		send_sm_step(&x->s, &x->env, &a);
		if (last)
			*last = a;
		if (a.chose_ipc)
			x->chose_ipc++;
		switch (a.kind) {
		case XS_ACT_FAIL:
		case XS_ACT_DONE:
		case XS_ACT_WAIT:
		case XS_ACT_WAIT_UNTIL:
			return a.kind;
		case XS_ACT_LAND:
			fail_msg("the simulation offers no landing slot");
			return a.kind;
		case XS_ACT_MAKE_POOL:
			x->pool_made++;
			x->pool_state = 1;
			continue;
		case XS_ACT_IN_PLACE:
			send_sm_published(&x->s, a.chunk, XS_INPLACE, -1);
			continue;
		case XS_ACT_CAPTURE: {
			struct slots *sl = a.pool ? &x->pool : &x->ring;
			const struct xs_chunk *ch = &x->s.chunks[a.chunk];
			int slot = slots_get(sl);

			assert_true(slot >= 0);   /* the core asked only with room */
			assert_true(ch->len <= sl->slot_size);
			memcpy(slots_ptr(sl, slot), x->src + ch->off, ch->len);
			send_sm_published(&x->s, a.chunk, a.pool ? XS_POOL : XS_STAGED, slot);
			continue;
		}
		}
	}
	fail_msg("the source worker did not settle");
	return XS_ACT_FAIL;
}

/* The loop: hand what is published to the link. */
static unsigned src_pump(struct sim *x)
{
	unsigned n = 0;
	bool more;
	int i;

	while ((i = send_sm_next_wire(&x->s, &more)) >= 0) {
		const struct xs_chunk *ch = &x->s.chunks[i];
		struct reply *rp = &x->q[(x->qh + x->qn++) % MAXQ];

		assert_true(x->qn < MAXQ);
		memset(rp, 0, sizeof(*rp));
		rp->chunk = (uint32_t)i;
		rp->has_chunk = 1;
		rp->more = more;
		rp->m.offset = ch->off;
		rp->m.size = ch->len;
		if (ch->where == XS_POOL) {
			memcpy(rp->handle, x->pool_handle, XR_HANDLE);
			rp->m.handle = rp->handle;
			rp->m.handle_len = XR_HANDLE;
			rp->m.pool_off = (uint64_t)ch->slot * x->pool.slot_size;
			rp->m.pool_bytes = (uint64_t)x->pool.n * x->pool.slot_size;
		} else {
			/* The bytes as the link reads them now (in place: the
			 * tensor, which later commands may change). */
			const uint8_t *from = ch->where == XS_STAGED ? slots_ptr(&x->ring, ch->slot) : x->src + ch->off;

			rp->bulk = malloc(ch->len);
			assert_non_null(rp->bulk);
			memcpy(rp->bulk, from, ch->len);
			rp->bulk_len = ch->len;
		}
		n++;
	}
	return n;
}

/* The link's writes of delivered chunks complete. */
static void src_written(struct sim *x, int status)
{
	for (unsigned i = 0; i < x->nunwritten; i++) {
		struct xs_written w;

		send_sm_on_written(&x->s, x->unwritten[i], status, &w);
		if (w.put_slot >= 0)
			slots_put(&x->ring, w.put_slot);
	}
	x->nunwritten = 0;
}

/* Deliver up to n replies to the destination (its loop). */
static unsigned link_deliver(struct sim *x, unsigned n)
{
	unsigned k = 0;

	while (x->qn && k < n) {
		struct reply *rp = &x->q[x->qh];
		enum xr_land land;
		uint64_t off;

		x->qh = (x->qh + 1) % MAXQ;
		x->qn--;
		assert_int_equal(recv_sm_on_chunk(&x->r, rp->code, "refused", rp->bulk_len, &rp->m, &land, &off), 0);
		if (rp->bulk_len) {
			assert_int_not_equal(land, XR_LAND_NONE);
			memcpy((land == XR_LAND_DST ? x->dst : x->stage) + off, rp->bulk, rp->bulk_len);
		}
		recv_sm_on_reply_done(&x->r, rp->more);
		if (rp->has_chunk)
			x->unwritten[x->nunwritten++] = rp->chunk;
		free(rp->bulk);
		rp->bulk = NULL;
		k++;
	}
	return k;
}

/* A release from the destination reaches the source. */
static enum xs_release src_release(struct sim *x, uint64_t done, bool error)
{
	x->releases++;
	return send_sm_on_release(&x->s, done, error, put_cb, x);
}

/* The destination's worker; progress releases go to the source at once. */
static enum xr_act_kind dst_worker(struct sim *x, bool visible)
{
	struct xr_act a;

	for (int guard = 0; guard < 100000; guard++) {
		recv_sm_step(&x->r, visible, false, &a);
		switch (a.kind) {
		case XR_ACT_FAIL:
		case XR_ACT_DONE:
		case XR_ACT_WAIT:
			return a.kind;
		case XR_ACT_LAND:
			fail_msg("the simulation offers no landing slot");
			return a.kind;
		case XR_ACT_IPC_COPY:
			assert_memory_equal(x->r.handle, x->pool_handle, XR_HANDLE);
			assert_true(a.ich.pool_off + a.ich.len <= (uint64_t)x->pool.n * x->pool.slot_size);
			memcpy(x->dst + a.ich.off, x->pool.mem + a.ich.pool_off, a.ich.len);
			recv_sm_copy_started(&x->r);
			continue;
		case XR_ACT_IPC_WAIT:
			if (recv_sm_copies_done(&x->r)) {
				uint64_t done = recv_sm_progress(&x->r);

				if (done && recv_sm_release_due(&x->r, false, done))
					assert_int_equal(src_release(x, done, false), XS_REL_PROGRESS);
			}
			continue;
		case XR_ACT_UPLOAD:
			memcpy(x->dst + a.from, x->stage + a.from, a.to - a.from);
			recv_sm_uploaded(&x->r, &a);
			continue;
		}
	}
	fail_msg("the destination worker did not settle");
	return XR_ACT_FAIL;
}

/* The RECV command completed (loop): the final release of an IPC transfer. */
static void dst_finish(struct sim *x, bool failed)
{
	x->r.finished = true;
	if (x->r.nich && recv_sm_release_due(&x->r, failed, failed ? 0 : x->size)) {
		x->final_release++;
		(void)src_release(x, failed ? 0 : x->size, failed);
	}
}

/* Run everything until both sides are done. */
static void run_to_end(struct sim *x, bool visible)
{
	for (int round = 0; round < 10000; round++) {
		enum xs_act_kind sk = src_worker(x, NULL);
		enum xr_act_kind rk;

		src_pump(x);
		link_deliver(x, MAXQ);
		src_written(x, 0);
		rk = dst_worker(x, visible);
		assert_int_not_equal(sk, XS_ACT_FAIL);
		assert_int_not_equal(rk, XR_ACT_FAIL);
		if (sk == XS_ACT_DONE && rk == XR_ACT_DONE) {
			x->s.exec_done = true;
			dst_finish(x, false);
			return;
		}
	}
	fail_msg("the transfer did not finish");
}

static void assert_clean_end(struct sim *x)
{
	assert_memory_equal(x->src, x->dst, x->size);
	assert_true(send_sm_finished(&x->s));
	assert_true(send_sm_can_free(&x->s));
	send_sm_put_all(&x->s, put_cb, x);
	assert_int_equal(x->ring.used, 0);
	assert_int_equal(x->pool.used, 0);
}

/* ---- source: orders and modes ---------------------------------------------------- */

/* SEND first with commands behind it: captured at once, the stream moves
 * on; the PULL comes later and gets the captured bytes, even after the
 * tensor changed. */
static void test_send_first_capture(void **state)
{
	struct sim *x = sim_new(10 * KIB + 3, 16, 4 * KIB, 0, 0);
	uint8_t *orig = malloc(x->size);

	(void)state;
	assert_non_null(orig);
	memcpy(orig, x->src, x->size);
	do_send(x, 1, 0);
	x->env.behind = true;
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	assert_int_equal(x->s.mode, XS_CAPTURE);
	assert_int_equal(x->s.nchunks, 3);
	assert_int_equal(x->ring.used, 3);
	x->s.exec_done = true;
	memset(x->src, 0xEE, x->size);     /* a later command overwrites it */
	assert_int_equal(src_pump(x), 0);  /* nobody pulls yet */
	do_pull(x, 0);
	memcpy(x->src, orig, x->size);     /* what the destination must get */
	run_to_end(x, true);
	assert_clean_end(x);
	free(orig);
	sim_free(x);
}

/* PULL first, nothing behind the SEND: in place, at most the window on
 * the wire; the SEND ends only once its in-place chunks are written. */
static void test_pull_first_in_place(void **state)
{
	struct sim *x = sim_new(40 * KIB, 4, 4 * KIB, 0, 0);
	struct xs_act a;

	(void)state;
	recv_sm_init(&x->r, 42, x->size, false);
	assert_int_equal(send_sm_check_pull(NULL, x->size), XS_PULL_OK);
	send_sm_on_pull(&x->s, x->size, false, 0);
	assert_int_equal(src_pump(x), 0);  /* no SEND yet: nothing to send */
	do_send(x, 1, 0);
	assert_true(src_ready(x));
	assert_true(x->s.exec_ms > 0);     /* the queue reached it */
	assert_int_equal(src_worker(x, &a), XS_ACT_WAIT);
	assert_int_equal(x->s.mode, XS_IN_PLACE);
	assert_int_equal(x->s.inplace_open, XS_INPLACE_WINDOW);
	assert_false(src_ready(x));
	assert_int_equal(x->ring.used, 0);
	assert_int_equal(src_pump(x), XS_INPLACE_WINDOW);
	assert_int_equal(link_deliver(x, MAXQ), XS_INPLACE_WINDOW);
	assert_false(src_ready(x));   /* not written yet */
	src_written(x, 0);
	assert_true(src_ready(x));
	run_to_end(x, true);
	assert_int_equal(x->ring.used, 0);
	assert_clean_end(x);
	sim_free(x);
}

/* In place, then a later command arrives: the rest is captured, but the
 * SEND waits until the in-place chunks on the wire are written — and the
 * destination gets the old bytes everywhere. */
static void test_in_place_then_behind(void **state)
{
	struct sim *x = sim_new(10 * 4 * KIB, 16, 4 * KIB, 0, 0);
	uint8_t *orig = malloc(x->size);

	(void)state;
	assert_non_null(orig);
	memcpy(orig, x->src, x->size);
	do_send(x, 1, 0);
	do_pull(x, 0);
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);
	assert_int_equal(src_pump(x), 2);   /* two in-place chunks read from the tensor now */
	x->env.behind = true;
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);  /* captured the rest, waits for the 2 */
	assert_int_equal(x->s.mode, XS_CAPTURE);
	assert_int_equal(x->ring.used, 8);
	assert_false(src_ready(x));
	link_deliver(x, MAXQ);
	src_written(x, 0);
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	x->s.exec_done = true;
	memset(x->src, 0xEE, x->size);      /* the later command runs */
	run_to_end(x, true);
	memcpy(x->src, orig, x->size);
	assert_clean_end(x);
	free(orig);
	sim_free(x);
}

/* Nothing behind it and no PULL: a large SEND waits (to learn in place or
 * IPC) and counts towards expiry from then; a small one captures at once. */
static void test_wait_for_puller_and_small(void **state)
{
	struct sim *x = sim_new(64 * KIB, 16, 16 * KIB, 0, 0);
	struct sim *y = sim_new(100, 4, 4 * KIB, 0, 0);

	(void)state;
	do_send(x, 1, 1);
	assert_false(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);
	assert_int_equal(x->s.mode, XS_UNDECIDED);
	do_pull(x, 0);
	assert_true(src_ready(x));
	run_to_end(x, true);
	assert_int_equal(x->s.mode, XS_IN_PLACE);
	assert_clean_end(x);
	/* too small for in place or IPC (the shell's XS_DIRECT_MIN rule) */
	do_send(y, 0, 0);
	assert_true(src_ready(y));
	assert_int_equal(src_worker(y, NULL), XS_ACT_DONE);
	assert_int_equal(y->s.mode, XS_CAPTURE);
	y->s.exec_done = true;
	do_pull(y, 0);
	run_to_end(y, false);       /* a GPU region: everything through the stage */
	assert_clean_end(y);
	sim_free(x);
	sim_free(y);
}

/* A ring smaller than the transfer: capture stops at a full ring and
 * resumes as written chunks give their slots back (back-pressure). */
static void test_ring_full_chunking(void **state)
{
	struct sim *x = sim_new(20 * 4 * KIB + 1, 3, 4 * KIB, 0, 0);

	(void)state;
	do_send(x, 0, 0);
	x->env.behind = true;
	assert_int_equal(x->s.nchunks, 21);
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);  /* the ring is full */
	assert_int_equal(x->ring.used, 3);
	/* Not ready until a slot is free: the worker serves others meanwhile
	 * (it never blocks in the allocator). */
	assert_false(src_ready(x));
	do_pull(x, 0);
	assert_false(src_ready(x));
	src_pump(x);
	link_deliver(x, 1);
	src_written(x, 0);
	assert_true(src_ready(x));
	run_to_end(x, false);
	assert_clean_end(x);
	sim_free(x);
}

/* ---- source: IPC ---------------------------------------------------------------- */

/* The destination asks for IPC: the pool is made on first use, chunks are
 * re-laid in its slots, announced (no bytes on the link), copied out; a
 * transfer four times the pool needs the progress releases. */
static void test_ipc_larger_than_pool(void **state)
{
	struct sim *x = sim_new(16 * 8 * KIB, 16, 4 * KIB, 4, 8 * KIB);

	(void)state;
	do_send(x, 1, 1);
	do_pull(x, 1);
	assert_true(src_ready(x));
	run_to_end(x, false);
	assert_int_equal(x->pool_made, 1);
	assert_int_equal(x->chose_ipc, 1);
	assert_int_equal(x->s.mode, XS_IPC);
	assert_true(x->s.ipc);
	assert_int_equal(x->s.nchunks, 16);     /* the pool's 8 KiB slots, not the ring's 4 */
	assert_true(x->releases > 2);           /* progress, then the final one */
	assert_int_equal(x->final_release, 1);
	assert_true(x->s.ipc_released);
	assert_int_equal(x->ring.used, 0);
	assert_clean_end(x);
	sim_free(x);
}

/* Not finished before the release: every chunk written is not enough. */
static void test_ipc_needs_release(void **state)
{
	struct sim *x = sim_new(8 * KIB, 4, 4 * KIB, 4, 4 * KIB);

	(void)state;
	do_send(x, 1, 1);
	do_pull(x, 1);
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	x->s.exec_done = true;
	src_pump(x);
	link_deliver(x, MAXQ);
	src_written(x, 0);
	assert_int_equal(x->s.nwritten, x->s.nchunks);
	assert_false(send_sm_finished(&x->s));
	assert_false(send_sm_can_free(&x->s));
	assert_int_equal(x->pool.used, 2);
	assert_true(send_sm_releasable(&x->s));
	assert_int_equal(dst_worker(x, false), XR_ACT_DONE);
	dst_finish(x, false);
	assert_false(send_sm_releasable(&x->s));
	assert_clean_end(x);
	sim_free(x);
}

/* A failed copy at the destination fails the transfer; a release before
 * every chunk was sent too. */
static void test_ipc_release_errors(void **state)
{
	struct sim *x = sim_new(8 * KIB, 4, 4 * KIB, 4, 4 * KIB);
	struct sim *y = sim_new(8 * KIB, 4, 4 * KIB, 4, 4 * KIB);

	(void)state;
	do_send(x, 1, 1);
	do_pull(x, 1);
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	x->s.exec_done = true;
	src_pump(x);
	link_deliver(x, MAXQ);
	src_written(x, 0);
	assert_int_equal(src_release(x, 0, true), XS_REL_FAILED);
	send_sm_fail(&x->s, PPRPC_EDEVICE);
	assert_true(send_sm_can_free(&x->s));
	assert_false(send_sm_finished(&x->s));
	send_sm_put_all(&x->s, put_cb, x);
	assert_int_equal(x->pool.used, 0);
	/* y: the final release comes while a chunk is still unsent */
	do_send(y, 1, 1);
	do_pull(y, 1);
	assert_int_equal(src_worker(y, NULL), XS_ACT_DONE);
	assert_int_equal(y->s.npublished, 2);
	assert_int_equal(src_release(y, y->size, false), XS_REL_FAILED);
	sim_free(x);
	sim_free(y);
}

/* The grace: commands behind the SEND, a rank known to pull by IPC, no
 * PULL yet — the SEND waits until a deadline (a wake-up, not a spin), then
 * captures into host staging; a PULL within the deadline makes it IPC. */
static void test_ipc_grace(void **state)
{
	struct sim *x = sim_new(64 * KIB, 16, 16 * KIB, 8, 16 * KIB);
	struct sim *y = sim_new(64 * KIB, 16, 16 * KIB, 8, 16 * KIB);
	struct xs_act a;

	(void)state;
	/* x: the PULL never comes within the grace */
	do_send(x, 1, 1);
	x->env.behind = true;
	x->env.peer_ipc = true;
	assert_true(src_ready(x));    /* first look */
	assert_int_equal(src_worker(x, &a), XS_ACT_WAIT_UNTIL);
	assert_true(a.deadline_us == x->env.now_us + XS_IPC_GRACE_US);
	assert_false(src_ready(x));
	x->env.now_us += XS_IPC_GRACE_US - 1;
	assert_false(src_ready(x));
	x->env.now_us += 1;
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	assert_int_equal(x->s.mode, XS_CAPTURE);
	x->s.exec_done = true;
	do_pull(x, 1);              /* late: the bytes are in host staging */
	run_to_end(x, false);
	assert_int_equal(x->pool_made, 0);
	assert_clean_end(x);
	/* y: the PULL comes during the grace */
	do_send(y, 1, 1);
	y->env.behind = true;
	y->env.peer_ipc = true;
	assert_int_equal(src_worker(y, NULL), XS_ACT_WAIT_UNTIL);
	y->env.now_us += 500;
	do_pull(y, 1);
	assert_true(src_ready(y));
	run_to_end(y, false);
	assert_int_equal(y->s.mode, XS_IPC);
	assert_clean_end(y);
	sim_free(x);
	sim_free(y);
}

/* No grace for a rank that never pulled by IPC; an unusable pool makes an
 * IPC request go in place (host memory) instead. */
static void test_ipc_unknown_peer_and_no_pool(void **state)
{
	struct sim *x = sim_new(64 * KIB, 16, 16 * KIB, 8, 16 * KIB);
	struct sim *y = sim_new(64 * KIB, 16, 16 * KIB, 8, 16 * KIB);

	(void)state;
	do_send(x, 1, 1);
	x->env.behind = true;
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	assert_int_equal(x->s.mode, XS_CAPTURE);
	assert_int_equal(x->s.grace_until_us, 0);
	do_send(y, 1, 1);
	do_pull(y, 1);
	y->pool_state = -1;
	run_to_end(y, true);
	assert_int_equal(y->s.mode, XS_IN_PLACE);
	assert_int_equal(y->pool_made, 0);
	assert_clean_end(y);
	sim_free(x);
	sim_free(y);
}

/* The destination stops taking bytes: the transfer waits on its puller (so
 * the shell watches for signs of life), the SEND waits without a worker;
 * once failed, IPC slots the destination was told of never go back, the
 * others do. */
static void test_stopped_destination(void **state)
{
	struct sim *x = sim_new(8 * 8 * KIB, 16, 8 * KIB, 4, 8 * KIB);
	uint32_t unannounced = 0;

	(void)state;
	do_send(x, 1, 1);
	do_pull(x, 1);
	assert_false(send_sm_waits_on_puller(&x->s));
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);    /* the pool (4 slots) is full */
	assert_int_equal(x->pool.used, 4);
	src_pump(x);
	link_deliver(x, 2);                                     /* the destination got 2 of 4 ... */
	src_written(x, 0);
	assert_true(send_sm_waits_on_puller(&x->s));            /* ... announced, not released */
	assert_false(src_ready(x));                             /* no slot: the worker is free */
	/* the destination is declared stopped */
	send_sm_fail(&x->s, PPRPC_ETIMEDOUT);
	assert_false(send_sm_waits_on_puller(&x->s));
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, NULL), XS_ACT_FAIL);
	x->s.exec_done = true;
	/* two replies are still queued on the aborted link: they fail */
	while (x->qn) {
		struct reply *rp = &x->q[x->qh];

		x->unwritten[x->nunwritten++] = rp->chunk;
		x->qh = (x->qh + 1) % MAXQ;
		x->qn--;
	}
	src_written(x, PPRPC_ECLOSED);
	assert_true(send_sm_can_free(&x->s));
	for (uint32_t i = 0; i < x->s.nchunks; i++)
		if (x->s.chunks[i].state == XS_PUBLISHED)
			unannounced++;
	assert_int_equal(unannounced, 0);
	/* all four went on the wire (two delivered, two cancelled): all may be read */
	assert_int_equal(send_sm_forget_announced(&x->s), 4);
	send_sm_put_all(&x->s, put_cb, x);
	assert_int_equal(x->pool.used, 4);                      /* quarantined */
	sim_free(x);
}

/* ---- source: errors, cancellation, expiry ------------------------------------------ */

static void test_send_pull_mismatches(void **state)
{
	struct send_sm s;
	bool in_use;

	(void)state;
	send_sm_init(&s, 7, 0);
	assert_int_equal(send_sm_check_pull(NULL, 0), XS_PULL_EMPTY);
	send_sm_on_pull(&s, 100, false, 0);           /* an early PULL names 100 bytes */
	assert_int_equal(send_sm_check_pull(&s, 100), XS_PULL_BUSY);
	assert_int_equal(send_sm_on_send(&s, 200, 64, 1, 0, &in_use), PPRPC_EINVAL);
	assert_false(in_use);
	assert_false(s.have_send);
	assert_int_equal(send_sm_on_send(&s, 100, 64, 1, 0, &in_use), 0);
	assert_int_equal(s.nchunks, 2);
	assert_int_equal(send_sm_on_send(&s, 100, 64, 1, 0, &in_use), PPRPC_EINVAL);
	assert_true(in_use);
	send_sm_fini(&s);
	send_sm_init(&s, 8, 0);
	assert_int_equal(send_sm_on_send(&s, 100, 64, 1, 0, &in_use), 0);
	assert_int_equal(send_sm_check_pull(&s, 99), XS_PULL_SIZE);
	assert_int_equal(send_sm_check_pull(&s, 100), XS_PULL_OK);
	send_sm_fini(&s);
}

/* A cancelled stream ends the SEND at once; so does a failed transfer,
 * with its reason; nothing more goes on the wire once it failed. */
static void test_cancel_and_fail(void **state)
{
	struct sim *x = sim_new(64 * KIB, 16, 16 * KIB, 0, 0);
	struct xs_act a;

	(void)state;
	do_send(x, 1, 0);
	x->env.stop = true;
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, &a), XS_ACT_FAIL);
	assert_int_equal(a.status, PPRPC_ECANCELED);
	assert_int_equal(a.why, XS_WHY_CANCELLED);
	x->env.stop = false;
	do_pull(x, 0);
	assert_int_equal(src_worker(x, NULL), XS_ACT_WAIT);    /* in place, window full */
	send_sm_fail(&x->s, PPRPC_ETIMEDOUT);
	send_sm_fail(&x->s, PPRPC_ECLOSED);                    /* the first reason stays */
	assert_true(src_ready(x));
	assert_int_equal(src_worker(x, &a), XS_ACT_FAIL);
	assert_int_equal(a.status, PPRPC_ETIMEDOUT);
	assert_int_equal(a.why, XS_WHY_FAILED);
	assert_false(send_sm_next_wire_due(&x->s));
	assert_int_equal(src_pump(x), 0);
	x->s.exec_done = true;
	assert_true(send_sm_can_free(&x->s));
	sim_free(x);
}

/* A failed write fails the transfer; freeing waits for writes in flight
 * and gives back the captured slots never sent. */
static void test_write_failure(void **state)
{
	struct sim *x = sim_new(6 * 4 * KIB, 8, 4 * KIB, 0, 0);

	(void)state;
	do_send(x, 0, 0);
	x->env.behind = true;
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	x->s.exec_done = true;
	do_pull(x, 0);
	/* two replies go out; the first write fails */
	{
		bool more;
		int i0 = send_sm_next_wire(&x->s, &more), i1 = send_sm_next_wire(&x->s, &more);
		struct xs_written w;

		assert_true(i0 == 0 && i1 == 1);
		send_sm_on_written(&x->s, 0, PPRPC_ECONN, &w);
		slots_put(&x->ring, w.put_slot);
		assert_true(x->s.failed);
		assert_int_equal(x->s.status, 0);       /* the link's failure: no code of ours */
		assert_false(send_sm_can_free(&x->s));  /* chunk 1's write is in flight */
		assert_int_equal(send_sm_next_wire(&x->s, &more), -1);
		send_sm_on_written(&x->s, 1, PPRPC_ECONN, &w);
		slots_put(&x->ring, w.put_slot);
	}
	assert_true(send_sm_can_free(&x->s));
	assert_false(send_sm_finished(&x->s));
	assert_int_equal(x->ring.used, 4);
	send_sm_put_all(&x->s, put_cb, x);
	assert_int_equal(x->ring.used, 0);
	sim_free(x);
}

static void test_expiry(void **state)
{
	struct send_sm s;
	struct xs_env e = { .now_us = 0 };
	bool in_use;

	(void)state;
	/* a PULL whose SEND never comes */
	send_sm_init(&s, 1, 1000);
	send_sm_on_pull(&s, 10, false, 0);
	assert_int_equal(send_sm_expired(&s, 1000 + 499, 500, false), XS_KEEP);
	assert_int_equal(send_sm_expired(&s, 1000 + 500, 500, false), XS_NO_SEND);
	assert_int_equal(send_sm_expired(&s, 1000 + 500, 0, false), XS_KEEP);   /* 0 = never */
	send_sm_fail(&s, PPRPC_ETIMEDOUT);
	assert_int_equal(send_sm_expired(&s, 5000, 500, false), XS_KEEP);       /* once */
	send_sm_fini(&s);
	/* PULLs still to be checked wait for a SEND too */
	send_sm_init(&s, 4, 1000);
	assert_int_equal(send_sm_expired(&s, 1600, 500, false), XS_KEEP);
	assert_int_equal(send_sm_expired(&s, 1600, 500, true), XS_NO_SEND);
	send_sm_fini(&s);
	/* a captured SEND nobody pulls: counted from its arrival */
	send_sm_init(&s, 2, 1000);
	assert_int_equal(send_sm_on_send(&s, 10, 64, 0, 0, &in_use), 0);
	s.exec_done = true;
	assert_int_equal(send_sm_expired(&s, 1500, 500, false), XS_NOT_PULLED);
	send_sm_fini(&s);
	/* a SEND queued behind long work: counted from when the queue reached it */
	send_sm_init(&s, 3, 1000);
	assert_int_equal(send_sm_on_send(&s, 1 << 20, 64 * KIB, 1, 0, &in_use), 0);
	assert_int_equal(send_sm_expired(&s, 9000, 500, false), XS_KEEP);       /* not reached yet */
	e.now_us = 9000 * 1000ull;
	assert_false(send_sm_ready(&s, &e));                              /* reached, waits */
	assert_int_equal(s.exec_ms, 9000);
	assert_int_equal(send_sm_expired(&s, 9499, 500, false), XS_KEEP);
	assert_int_equal(send_sm_expired(&s, 9500, 500, false), XS_NOT_PULLED);
	send_sm_fini(&s);
}

/* ---- destination ---------------------------------------------------------------------- */

/* Chunks that arrive before the RECV runs wait in the stage; once it runs,
 * later chunks land in the region — including when a chunk that began
 * before the claim completes after the worker looked. */
static void test_recv_stage_then_direct(void **state)
{
	struct sim *x = sim_new(4 * 4 * KIB, 8, 4 * KIB, 0, 0);
	struct xr_act a;
	enum xr_land land;
	uint64_t off;

	(void)state;
	do_send(x, 0, 0);
	x->env.behind = true;
	assert_int_equal(src_worker(x, NULL), XS_ACT_DONE);
	x->s.exec_done = true;
	do_pull(x, 0);
	assert_int_equal(src_pump(x), 4);
	assert_true(recv_sm_ready(&x->r, false));       /* the first look, always */
	link_deliver(x, 1);                             /* chunk 0 into the stage */
	/* chunk 1's meta arrives (into the stage: not claimed yet) ... */
	{
		struct reply *rp = &x->q[x->qh];

		assert_int_equal(recv_sm_on_chunk(&x->r, 0, NULL, rp->bulk_len, &rp->m, &land, &off), 0);
		assert_int_equal(land, XR_LAND_STAGE);
		memcpy(x->stage + off, rp->bulk, rp->bulk_len);
	}
	/* ... the RECV runs and sees chunk 0 only ... */
	recv_sm_step(&x->r, true, false, &a);
	assert_true(a.claim);
	assert_int_equal(a.kind, XR_ACT_UPLOAD);
	assert_true(a.from == 0 && a.to == 4 * KIB);
	/* ... chunk 1 completes before the upload is reported */
	recv_sm_on_reply_done(&x->r, true);
	memcpy(x->dst + a.from, x->stage + a.from, a.to - a.from);
	recv_sm_uploaded(&x->r, &a);
	free(x->q[x->qh].bulk);
	x->q[x->qh].bulk = NULL;
	x->qh = (x->qh + 1) % MAXQ;
	x->qn--;
	x->unwritten[x->nunwritten++] = 1;
	assert_true(recv_sm_ready(&x->r, false));       /* chunk 1 is still to place */
	/* chunk 2 lands directly in the region */
	{
		struct reply *rp = &x->q[x->qh];

		assert_int_equal(recv_sm_on_chunk(&x->r, 0, NULL, rp->bulk_len, &rp->m, &land, &off), 0);
		assert_int_equal(land, XR_LAND_DST);
		assert_int_equal(x->r.direct_from, 8 * KIB);
		memcpy(x->dst + off, rp->bulk, rp->bulk_len);
		recv_sm_on_reply_done(&x->r, true);
		free(rp->bulk);
		rp->bulk = NULL;
		x->qh = (x->qh + 1) % MAXQ;
		x->qn--;
		x->unwritten[x->nunwritten++] = 2;
	}
	run_to_end(x, true);
	assert_clean_end(x);
	sim_free(x);
}

/* A reply stream that cannot be trusted is refused (the shell then drops
 * the link); an error reply or an early end fails the RECV with a reason. */
static void test_recv_protocol_errors(void **state)
{
	struct recv_sm r;
	struct xr_chunk_msg m = { .offset = 0, .size = 10 };
	uint8_t h1[XR_HANDLE] = { 1 }, h2[XR_HANDLE] = { 2 };
	enum xr_land land;
	uint64_t off;

	(void)state;
	recv_sm_init(&r, 1, 100, false);
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 9, &m, &land, &off), PPRPC_EPROTO);  /* bulk != size */
	m.offset = 10;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 10, &m, &land, &off), PPRPC_EPROTO); /* not in order */
	m.offset = 0;
	m.size = 101;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 101, &m, &land, &off), PPRPC_EPROTO); /* too long */
	m.size = 0;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);  /* empty */
	m.size = 10;
	m.handle = h1;
	m.handle_len = XR_HANDLE;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);  /* IPC not asked */
	m.handle = NULL;
	m.handle_len = 0;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 10, &m, &land, &off), 0);
	assert_int_equal(recv_sm_on_reply_done(&r, false), XR_DONE_LAST);                 /* ends at 10 of 100 */
	assert_int_equal(r.error, PPRPC_EPROTO);
	assert_non_null(strstr(r.errmsg, "ended the transfer early"));
	recv_sm_fini(&r);

	recv_sm_init(&r, 2, 100, false);
	assert_int_equal(recv_sm_on_chunk(&r, PPRPC_ETIMEDOUT, "no SEND arrived", 0, &m, &land, &off), 0);
	assert_int_equal(recv_sm_on_reply_done(&r, false), XR_DONE_LAST);
	assert_int_equal(r.error, PPRPC_ETIMEDOUT);
	assert_non_null(strstr(r.errmsg, "the source refused: no SEND arrived"));
	recv_sm_fail(&r, PPRPC_ECONN, "later");                                          /* first wins */
	assert_int_equal(r.error, PPRPC_ETIMEDOUT);
	recv_sm_fini(&r);

	/* IPC: in one pool, within the transfer; the close only at the end */
	recv_sm_init(&r, 3, 100, true);
	m.handle = h1;
	m.handle_len = XR_HANDLE;
	m.pool_bytes = 1 << 20;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 5, &m, &land, &off), PPRPC_EPROTO);  /* bulk with IPC */
	m.handle_len = 16;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);  /* bad handle */
	m.handle_len = XR_HANDLE;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	assert_int_equal(land, XR_LAND_NONE);
	recv_sm_on_reply_done(&r, true);
	m.offset = 10;
	m.handle = h2;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);  /* another pool */
	m.handle = NULL;
	m.handle_len = 0;
	m.size = 0;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);  /* close too early */
	recv_sm_fini(&r);
}

/* IPC chunks announced after the RECV ended are released at once (with an
 * error); the final release goes out once, progress only forward. */
static void test_recv_releases(void **state)
{
	struct recv_sm r;
	uint8_t h[XR_HANDLE] = { 9 };
	struct xr_chunk_msg m = { .offset = 0, .size = 40, .handle = h, .handle_len = XR_HANDLE,
				  .pool_bytes = 64 };
	enum xr_land land;
	uint64_t off;

	(void)state;
	recv_sm_init(&r, 4, 100, true);
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	assert_int_equal(recv_sm_on_reply_done(&r, true), 0);
	r.ipc_copied = 40;
	assert_int_equal(recv_sm_progress(&r), 40);
	assert_true(recv_sm_release_due(&r, false, 40));
	assert_int_equal(recv_sm_progress(&r), 0);   /* nothing new */
	r.finished = true;
	m.offset = 40;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	assert_int_equal(recv_sm_on_reply_done(&r, true), XR_DONE_RELEASE_LATE);
	assert_true(recv_sm_release_due(&r, true, 0));
	assert_false(recv_sm_release_due(&r, true, 0));  /* once */
	assert_false(recv_sm_release_due(&r, false, 100));
	recv_sm_fini(&r);
}

/* A failed IPC copy: the RECV fails, and the reason is kept for the
 * rank's block. */
static void test_recv_ipc_copy_fails(void **state)
{
	struct recv_sm r;
	uint8_t h[XR_HANDLE] = { 3 };
	struct xr_chunk_msg m = { .offset = 0, .size = 100, .handle = h, .handle_len = XR_HANDLE,
				  .pool_bytes = 1000 };
	struct xr_act a;
	enum xr_land land;
	uint64_t off;

	(void)state;
	recv_sm_init(&r, 5, 100, true);
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_WAIT);
	assert_false(recv_sm_ready(&r, false));
	assert_true(recv_sm_ready(&r, true));            /* shutting down */
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	recv_sm_on_reply_done(&r, true);
	assert_true(recv_sm_ready(&r, false));
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_IPC_COPY);
	assert_true(a.ich.off == 0 && a.ich.len == 100);
	recv_sm_copy_failed(&r, "cudaIpcOpenMemHandle: invalid");
	assert_string_equal(r.ipc_err, "cudaIpcOpenMemHandle: invalid");
	recv_sm_step(&r, false, true, &a);
	assert_int_equal(a.kind, XR_ACT_IPC_COPY);       /* stop is the shell's: it returned the error */
	recv_sm_fini(&r);
}

/* ---- the registry ---------------------------------------------------------------------- */

struct item {
	int tag;
	struct xfer_node node;
};

/* A landing slot (daemon/xfer/land.h): the source copies the whole
 * transfer there in one action and answers once, with no more replies;
 * with a slot too small, or offered after the path was decided, it goes
 * by the usual path. */
static void test_send_land(void **state)
{
	struct send_sm s;
	struct xs_env e = { .room_host = true };
	struct xs_written w;
	struct xs_act a;
	bool in_use, more;

	(void)state;
	send_sm_init(&s, 1, 0);
	assert_int_equal(send_sm_on_send(&s, 100 * KIB, 64 * KIB, 0, 0, &in_use), 0);
	assert_int_equal(s.nchunks, 2);
	send_sm_on_pull(&s, 100 * KIB, false, 256 * KIB);
	assert_true(send_sm_ready(&s, &e));
	send_sm_step(&s, &e, &a);
	assert_int_equal(a.kind, XS_ACT_LAND);
	assert_int_equal(s.nchunks, 1);                 /* one chunk: the whole transfer */
	assert_int_equal(s.chunks[0].len, 100 * KIB);
	send_sm_published(&s, a.chunk, XS_LANDED, -1);
	send_sm_step(&s, &e, &a);
	assert_int_equal(a.kind, XS_ACT_DONE);
	s.exec_done = true;
	assert_int_equal(send_sm_next_wire(&s, &more), 0);
	assert_false(more);                             /* the one answer ends the PULL */
	send_sm_on_written(&s, 0, 0, &w);
	assert_int_equal(w.put_slot, -1);
	assert_true(send_sm_finished(&s));
	assert_true(send_sm_can_free(&s));
	send_sm_fini(&s);

	/* larger than the slot: captured */
	send_sm_init(&s, 2, 0);
	assert_int_equal(send_sm_on_send(&s, 300 * KIB, 64 * KIB, 0, 0, &in_use), 0);
	send_sm_on_pull(&s, 300 * KIB, false, 256 * KIB);
	send_sm_step(&s, &e, &a);
	assert_int_equal(a.kind, XS_ACT_CAPTURE);
	send_sm_fini(&s);

	/* decided before the PULL came (a command behind it): captured */
	send_sm_init(&s, 3, 0);
	assert_int_equal(send_sm_on_send(&s, 4 * KIB, 64 * KIB, 0, 0, &in_use), 0);
	e.behind = true;
	send_sm_step(&s, &e, &a);
	assert_int_equal(a.kind, XS_ACT_CAPTURE);
	send_sm_on_pull(&s, 4 * KIB, false, 256 * KIB);
	send_sm_published(&s, a.chunk, XS_STAGED, 0);
	send_sm_step(&s, &e, &a);
	assert_int_equal(a.kind, XS_ACT_DONE);
	send_sm_fini(&s);
}

/* The destination: a landed answer only to an offer, for the whole
 * transfer, once; the worker may take the bytes before it comes. */
static void test_recv_land(void **state)
{
	struct xr_chunk_msg m = { .offset = 0, .size = 4096, .landed = true };
	enum xr_land land;
	struct recv_sm r;
	struct xr_act a;
	uint64_t off;

	(void)state;
	/* not offered */
	recv_sm_init(&r, 1, 4096, false);
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);
	recv_sm_fini(&r);
	/* offered: wrong size, bytes with it, another offset */
	recv_sm_init(&r, 2, 4096, false);
	r.land_offered = true;
	m.size = 4095;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);
	m.size = 4096;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 4096, &m, &land, &off), PPRPC_EPROTO);
	m.offset = 1;
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);
	m.offset = 0;
	/* the answer, then the worker takes the bytes */
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_WAIT);
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	assert_int_equal(land, XR_LAND_NONE);
	assert_int_equal(recv_sm_on_reply_done(&r, false), XR_DONE_LAST);
	assert_int_equal(r.error, 0);
	assert_true(recv_sm_ready(&r, false));
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_LAND);
	recv_sm_land_copied(&r);
	assert_false(recv_sm_ready(&r, false) && r.arrived); /* nothing on the link */
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_DONE);
	/* a second landed answer is a broken link */
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), PPRPC_EPROTO);
	recv_sm_fini(&r);
	/* taken before the answer came: done at once, and the answer still fits */
	recv_sm_init(&r, 3, 4096, false);
	r.land_offered = true;
	recv_sm_land_copied(&r);
	recv_sm_step(&r, false, false, &a);
	assert_int_equal(a.kind, XR_ACT_DONE);
	assert_int_equal(recv_sm_on_chunk(&r, 0, NULL, 0, &m, &land, &off), 0);
	assert_int_equal(recv_sm_on_reply_done(&r, false), XR_DONE_LAST);
	assert_int_equal(r.error, 0);
	recv_sm_fini(&r);
}

static void test_table(void **state)
{
	struct xfer_table t = { 0 };
	struct item it[600];
	int seen = 0;

	(void)state;
	for (int i = 0; i < 600; i++) {
		it[i].tag = i;
		xfer_table_add(&t, &it[i].node, (uint64_t)(i % 300));
	}
	assert_int_equal(t.count, 600);
	for (uint64_t id = 0; id < 300; id++) {
		struct xfer_node *n = xfer_table_find(&t, id);
		struct item *a, *b;

		assert_non_null(n);
		a = xfer_container(n, struct item, node);
		assert_non_null(n = xfer_table_find_next(n));
		b = xfer_container(n, struct item, node);
		assert_null(xfer_table_find_next(n));
		/* newest first */
		assert_int_equal(a->tag, (int)id + 300);
		assert_int_equal(b->tag, (int)id);
	}
	assert_null(xfer_table_find(&t, 12345));
	for (int i = 0; i < 600; i += 2)
		xfer_table_del(&t, &it[i].node);
	assert_int_equal(t.count, 300);
	for (struct xfer_node *n = t.head; n; n = n->next) {
		assert_int_equal(xfer_container(n, struct item, node)->tag % 2, 1);
		seen++;
	}
	assert_int_equal(seen, 300);
	for (int i = 1; i < 600; i += 2)
		xfer_table_del(&t, &it[i].node);
	assert_null(t.head);
	assert_int_equal(t.count, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_first_capture),
		cmocka_unit_test(test_pull_first_in_place),
		cmocka_unit_test(test_in_place_then_behind),
		cmocka_unit_test(test_wait_for_puller_and_small),
		cmocka_unit_test(test_ring_full_chunking),
		cmocka_unit_test(test_ipc_larger_than_pool),
		cmocka_unit_test(test_ipc_needs_release),
		cmocka_unit_test(test_ipc_release_errors),
		cmocka_unit_test(test_ipc_grace),
		cmocka_unit_test(test_ipc_unknown_peer_and_no_pool),
		cmocka_unit_test(test_stopped_destination),
		cmocka_unit_test(test_send_pull_mismatches),
		cmocka_unit_test(test_cancel_and_fail),
		cmocka_unit_test(test_write_failure),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_recv_stage_then_direct),
		cmocka_unit_test(test_recv_protocol_errors),
		cmocka_unit_test(test_recv_releases),
		cmocka_unit_test(test_recv_ipc_copy_fails),
		cmocka_unit_test(test_send_land),
		cmocka_unit_test(test_recv_land),
		cmocka_unit_test(test_table),
	};

	return cmocka_run_group_tests_name("xfer_core", tests, NULL, NULL);
}

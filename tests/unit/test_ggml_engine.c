/*
 * tests/unit/test_ggml_engine.c — the ggml engine's index guards, in process
 * (daemon/backend/ggml/ggml_guard.c).
 *
 * Graphs made with ggml's constructors, allocated in ggml-cpu buffers here,
 * go through gge_graph_build in their wire form (tests/integration/
 * ggml_wire.c).  For each GET_ROWS the test knows whether its ids can be
 * proven in range at create time (an ARGSORT's indices, no wider than the
 * table), must be checked when the run starts (an input), or only in the
 * middle of the run (computed by something else, or by an ARGSORT whose
 * bytes another node overwrote through an aliasing placement); and that a
 * run computes what ggml computes, or stops with PPRPC_ERANGE.  And which
 * start checks a GPU stream can make into copies of the graph's own
 * (gge_graph_shadow).  And the engine's host buffers: zeros from the
 * start, and zeroed again by giving pages back (gge_buf_zero_pages).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/ggml_load.h"
#include "ggml-alloc.h"
#include "ggml-impl.h"
#include "pprpc/types.h"
#include "tests/integration/ggml_wire.h"

enum { K = 16, E = 8 };

static struct gge_dev *g_dev;
static ggml_backend_t g_cpu;

struct net {
	struct ggml_context *ctx;
	ggml_backend_buffer_t buf;
	struct ggml_cgraph *gf;
	struct gw_graph w;
	struct gge_graph *gg;
	struct ggml_tensor *scores, *emb, *out;
};

static int resolve(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	struct net *n = arg;

	if (handle != 1) {
		snprintf(err, errlen, "unknown buffer %llu", (unsigned long long)handle);
		return PPRPC_EHANDLE;
	}
	ret->buf = n->buf;
	ret->size = ggml_backend_buffer_get_size(n->buf);
	return 0;
}

static void net_init(struct net *n)
{
	struct ggml_init_params p = { .mem_size = 32 * ggml_tensor_overhead() + ggml_graph_overhead(),
				      .no_alloc = true };

	memset(n, 0, sizeof(*n));
	n->ctx = ggml_init(p);
	assert_non_null(n->ctx);
	n->scores = ggml_new_tensor_1d(n->ctx, GGML_TYPE_F32, E);
}

/* Allocate, fill the leaves, serialize, build; returns build's code.  The
 * graph computes first[0..nfirst) in that order, then out; alias_dst, when
 * given, is placed over alias_src's bytes. */
static int net_build(struct net *n, struct ggml_tensor **first, int nfirst, struct ggml_tensor *alias_dst,
		     struct ggml_tensor *alias_src)
{
	struct gw_map map;
	char err[256] = "";
	float s[E], e[K * 16];
	int rc;

	n->gf = ggml_new_graph(n->ctx);
	for (int i = 0; i < nfirst; i++)
		ggml_build_forward_expand(n->gf, first[i]);
	ggml_build_forward_expand(n->gf, n->out);
	n->buf = ggml_backend_alloc_ctx_tensors(n->ctx, g_cpu);
	assert_non_null(n->buf);
	/* a node placed over another's bytes, as a client may place it */
	if (alias_dst)
		alias_dst->data = alias_src->data;
	for (int i = 0; i < E; i++)
		s[i] = (float)((i * 5) % E);
	for (int i = 0; i < K * 16; i++)
		e[i] = (float)i;
	ggml_backend_tensor_set(n->scores, s, 0, sizeof(s));
	ggml_backend_tensor_set(n->emb, e, 0, ggml_nbytes(n->emb));
	map = (struct gw_map){ n->buf, 1 };
	assert_int_equal(gw_serialize(n->gf, &map, 1, 0, &n->w), 0);
	rc = gge_graph_build(g_dev, (const Pprpc__GgmlTensor *const *)n->w.msg.tensors, n->w.msg.n_tensors,
			     n->w.msg.nodes, n->w.msg.n_nodes, resolve, n, &n->gg, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "build: %s\n", err);
	return rc;
}

static void net_free(struct net *n)
{
	gge_graph_free(n->gg);
	gw_free(&n->w);
	ggml_backend_buffer_free(n->buf);
	ggml_free(n->ctx);
}

static void expect_classes(const struct net *n, int start, int proven, int split)
{
	assert_int_equal(gge_guards_count(n->gg, GGE_GUARD_START), start);
	assert_int_equal(gge_guards_count(n->gg, GGE_GUARD_PROVEN), proven);
	assert_int_equal(gge_guards_count(n->gg, GGE_GUARD_SPLIT), split);
}

/* The engine's run gives what ggml gives (out read back after each). */
static void expect_run_matches(struct net *n)
{
	float got[K * 4], want[K * 4];
	char err[256] = "";
	size_t nb = ggml_nbytes(n->out);

	assert_true(nb <= sizeof(got));
	assert_int_equal(gge_graph_compute(g_dev, n->gg, err, sizeof(err)), 0);
	ggml_backend_tensor_get(n->out, got, 0, nb);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, n->gf), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(n->out, want, 0, nb);
	assert_memory_equal(got, want, nb);
}

/* MoE-style: the top-2 of E scores pick rows of an E-row table. */
static void test_argsort_ids_proven(void **state)
{
	struct net n;
	struct ggml_tensor *sorted, *ids;

	(void)state;
	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	sorted = ggml_argsort(n.ctx, n.scores, GGML_SORT_ORDER_DESC);
	ids = ggml_view_1d(n.ctx, sorted, 2, 0);
	n.out = ggml_get_rows(n.ctx, n.emb, ids);
	assert_int_equal(net_build(&n, NULL, 0, NULL, NULL), 0);
	expect_classes(&n, 0, 1, 0);
	expect_run_matches(&n);
	net_free(&n);
}

/* The same indices into a table with fewer rows than scores: not proven. */
static void test_argsort_wider_than_table(void **state)
{
	struct net n;
	struct ggml_tensor *sorted, *ids;
	char err[256] = "";

	(void)state;
	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E - 2);
	sorted = ggml_argsort(n.ctx, n.scores, GGML_SORT_ORDER_DESC);
	ids = ggml_view_1d(n.ctx, sorted, 2, 0);
	n.out = ggml_get_rows(n.ctx, n.emb, ids);
	assert_int_equal(net_build(&n, NULL, 0, NULL, NULL), 0);
	expect_classes(&n, 0, 0, 1);
	/* the scores put indices 7 and 6 (of 8) first: outside 6 rows */
	assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "outside [0, 6)"));
	net_free(&n);
}

/* A node run between the ARGSORT and the GET_ROWS, placed over the
 * ARGSORT's output: the ids are what that node wrote, so they are checked in
 * the run.  The same node placed elsewhere leaves them proven. */
static void aliased(int alias)
{
	struct net n;
	struct ggml_tensor *sorted, *table, *tix, *junk, *first[2];
	int32_t good[4] = { 1, 2, 3, 4 }, bad[4] = { 1, 200, 3, 4 }, pick[2] = { 0, 1 };
	char err[256] = "";

	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	table = ggml_new_tensor_2d(n.ctx, GGML_TYPE_I32, 1, 4);
	tix = ggml_new_tensor_1d(n.ctx, GGML_TYPE_I32, 2);
	sorted = ggml_argsort(n.ctx, n.scores, GGML_SORT_ORDER_DESC);
	junk = ggml_get_rows(n.ctx, table, tix); /* [1, 2] i32: 8 bytes */
	n.out = ggml_get_rows(n.ctx, n.emb, ggml_view_1d(n.ctx, sorted, 2, 0));
	first[0] = sorted;
	first[1] = junk;
	assert_int_equal(net_build(&n, first, 2, alias ? junk : NULL, sorted), 0);
	/* tix is an input: the start guard of junk's own GET_ROWS */
	expect_classes(&n, 1, alias ? 0 : 1, alias ? 1 : 0);
	ggml_backend_tensor_set(tix, pick, 0, sizeof(pick));
	ggml_backend_tensor_set(table, good, 0, sizeof(good));
	expect_run_matches(&n);
	ggml_backend_tensor_set(table, bad, 0, sizeof(bad));
	if (alias) {
		assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), PPRPC_ERANGE);
		assert_non_null(strstr(err, "index 200"));
	} else {
		expect_run_matches(&n);
	}
	net_free(&n);
}

static void test_aliased_ids_checked(void **state)
{
	(void)state;
	aliased(1);
	aliased(0);
}

/* Ids the client wrote: checked when the run starts. */
/* Issue 27.2: a leaf placed over a sort's output is no output of the sort
 * as a backend sees the graph (ggml-cuda's fused MoE top-k writes only the
 * view node's elements), so its indices are checked in the run, not
 * proven; and a sort without GGML_TENSOR_FLAG_COMPUTE never runs, so it
 * proves nothing and writes nothing: its output is an input. */
static void test_sort_proves_only_when_it_runs(void **state)
{
	struct net n;
	struct ggml_tensor *sorted, *leaf, *first[1];

	(void)state;
	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	sorted = ggml_argsort(n.ctx, n.scores, GGML_SORT_ORDER_DESC);
	leaf = ggml_new_tensor_1d(n.ctx, GGML_TYPE_I32, 2);
	n.out = ggml_get_rows(n.ctx, n.emb, leaf);
	first[0] = sorted;
	assert_int_equal(net_build(&n, first, 1, leaf, sorted), 0);
	expect_classes(&n, 0, 0, 1);
	expect_run_matches(&n);
	net_free(&n);

	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	sorted = ggml_argsort(n.ctx, n.scores, GGML_SORT_ORDER_DESC);
	n.out = ggml_get_rows(n.ctx, n.emb, ggml_view_1d(n.ctx, sorted, 2, 0));
	n.gf = NULL;
	{
		struct gw_map map;
		char err[256] = "";
		int ia;

		n.gf = ggml_new_graph(n.ctx);
		ggml_build_forward_expand(n.gf, n.out);
		n.buf = ggml_backend_alloc_ctx_tensors(n.ctx, g_cpu);
		assert_non_null(n.buf);
		map = (struct gw_map){ n.buf, 1 };
		assert_int_equal(gw_serialize(n.gf, &map, 1, 0, &n.w), 0);
		ia = gw_index(&n.w, sorted);
		assert_true(ia >= 0);
		n.w.t[ia].flags &= ~(uint32_t)GGML_TENSOR_FLAG_COMPUTE;
		assert_int_equal(gge_graph_build(g_dev, (const Pprpc__GgmlTensor *const *)n.w.msg.tensors,
						 n.w.msg.n_tensors, n.w.msg.nodes, n.w.msg.n_nodes, resolve, &n, &n.gg, err,
						 sizeof(err)), 0);
	}
	expect_classes(&n, 1, 0, 0);
	net_free(&n);
}

static void test_input_ids_at_start(void **state)
{
	struct net n;
	struct ggml_tensor *ids;
	int32_t good[3] = { 0, 7, 3 }, bad[3] = { 0, 8, 3 };
	char err[256] = "";

	(void)state;
	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	ids = ggml_new_tensor_1d(n.ctx, GGML_TYPE_I32, 3);
	n.out = ggml_get_rows(n.ctx, n.emb, ids);
	assert_int_equal(net_build(&n, NULL, 0, NULL, NULL), 0);
	expect_classes(&n, 1, 0, 0);
	ggml_backend_tensor_set(ids, good, 0, sizeof(good));
	expect_run_matches(&n);
	ggml_backend_tensor_set(ids, bad, 0, sizeof(bad));
	assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "index 8 at [1,0,0,0]"));
	net_free(&n);
}

/* One input ids tensor of 3 indexing two tables, of E and of 4 rows
 * (llama.cpp's KV slots index every layer's cache), built. */
static struct ggml_tensor *shared_ids_net(struct net *n)
{
	struct ggml_tensor *ids, *tall, *first;

	net_init(n);
	tall = ggml_new_tensor_2d(n->ctx, GGML_TYPE_F32, K, E);
	n->emb = ggml_new_tensor_2d(n->ctx, GGML_TYPE_F32, K, 4);
	ids = ggml_new_tensor_1d(n->ctx, GGML_TYPE_I32, 3);
	first = ggml_get_rows(n->ctx, tall, ids);
	n->out = ggml_add(n->ctx, ggml_get_rows(n->ctx, n->emb, ids), first);
	assert_int_equal(net_build(n, &first, 1, NULL, NULL), 0);
	ggml_backend_tensor_set(tall, (float[K * E]){ 0 }, 0, ggml_nbytes(tall));
	return ids;
}

/* Shared ids: read once, against the shorter table, and a value only the
 * taller one has is refused naming the node of the shorter. */
static void test_shared_input_ids(void **state)
{
	struct net n;
	struct ggml_tensor *ids = shared_ids_net(&n);
	int32_t good[3] = { 0, 3, 1 }, bad[3] = { 0, 5, 1 };
	char err[256] = "";

	(void)state;
	expect_classes(&n, 2, 0, 0);
	ggml_backend_tensor_set(ids, good, 0, sizeof(good));
	expect_run_matches(&n);
	ggml_backend_tensor_set(ids, bad, 0, sizeof(bad));
	assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "index 5 at [1,0,0,0]"));
	assert_non_null(strstr(err, "outside [0, 4)"));
	net_free(&n);
}

/* The GPU's index checks (ggml-cuda streams, ggml_cuda_stream.c): shared ids
 * are checked once, against the shorter table, into the graph's own copy,
 * which the graph reads from then on; the client's tensor stays where it
 * was.  Here the copy the GPU would make is made by hand, and the run
 * reads it. */
static void test_gpu_checks_copy(void **state)
{
	struct net n;
	struct ggml_tensor *ids = shared_ids_net(&n);
	int32_t good[3] = { 0, 3, 1 };
	const struct kern_index_check *r;
	const uint8_t *base;
	char err[256] = "";

	(void)state;
	assert_int_equal(gge_guards_gpu_count(n.gg), 1);
	assert_true(gge_graph_async_ok(n.gg));
	assert_int_equal(gge_graph_shadow(g_dev, n.gg, err, sizeof(err)), 0);
	assert_true(n.gg->gpu_ready);
	assert_int_equal(n.gg->ngpu_checks, 1);
	r = &n.gg->gpu_checks[0];
	assert_ptr_equal(r->src, ids->data);
	assert_int_equal(r->bound, 4);
	assert_int_equal(r->is64, 0);
	assert_int_equal(r->ne[0], 3);
	base = ggml_backend_buffer_get_base(n.gg->shadow);
	assert_true((const uint8_t *)r->dst >= base &&
		    (const uint8_t *)r->dst + sizeof(good) <= base + ggml_backend_buffer_get_size(n.gg->shadow));
	ggml_backend_tensor_set(ids, good, 0, sizeof(good));
	memcpy(r->dst, r->src, sizeof(good));
	expect_run_matches(&n);
	net_free(&n);
}

/* Every graph built carries an id of its own for its life (ggml-cuda
 * replays its CUDA graph on it without comparing the nodes): none with
 * graph-reuse 0; with it, two graphs differ, and runs leave the id and
 * every node as they were (what ggml-cuda's replay on the id relies on). */
static void test_graph_ids(void **state)
{
	struct net a, b, c;
	struct ggml_tensor *ids;
	int32_t good[3] = { 0, 3, 1 };
	struct ggml_tensor snap[64];
	uint64_t uid;
	int nn;

	(void)state;
	g_dev->graph_reuse = false;
	shared_ids_net(&c);
	assert_int_equal(c.gg->cg->uid, 0);
	net_free(&c);
	g_dev->graph_reuse = true;
	ids = shared_ids_net(&a);
	shared_ids_net(&b);
	assert_true(a.gg->cg->uid != 0 && b.gg->cg->uid != 0);
	assert_true(a.gg->cg->uid != b.gg->cg->uid);
	uid = a.gg->cg->uid;
	nn = a.gg->cg->n_nodes;
	assert_true(nn <= 64);
	for (int i = 0; i < nn; i++)
		snap[i] = *a.gg->cg->nodes[i];
	ggml_backend_tensor_set(ids, good, 0, sizeof(good));
	expect_run_matches(&a);
	expect_run_matches(&a);
	assert_int_equal(a.gg->cg->uid, uid);
	assert_int_equal(a.gg->cg->n_nodes, nn);
	for (int i = 0; i < nn; i++)
		assert_memory_equal(&snap[i], a.gg->cg->nodes[i], sizeof(snap[i]));
	net_free(&a);
	net_free(&b);
	g_dev->graph_reuse = false;
}

/* Ids a node of the graph overwrites after their user read them: a copy
 * made before the run would go stale within it, so the GPU cannot check
 * them (the run waits for its stream and the host checks, as on ggml-cpu). */
static void test_gpu_checks_refused(void **state)
{
	struct net n;
	struct ggml_tensor *ids, *table, *tix, *user;

	(void)state;
	net_init(&n);
	n.emb = ggml_new_tensor_2d(n.ctx, GGML_TYPE_F32, K, E);
	ids = ggml_new_tensor_1d(n.ctx, GGML_TYPE_I32, 2);
	table = ggml_new_tensor_2d(n.ctx, GGML_TYPE_I32, 1, 4);
	tix = ggml_new_tensor_1d(n.ctx, GGML_TYPE_I32, 2);
	user = ggml_get_rows(n.ctx, n.emb, ids);
	n.out = ggml_get_rows(n.ctx, table, tix); /* [1, 2] i32, placed over ids */
	assert_int_equal(net_build(&n, &user, 1, n.out, ids), 0);
	expect_classes(&n, 2, 0, 0);
	assert_int_equal(gge_guards_gpu_count(n.gg), -1);
	assert_false(gge_graph_async_ok(n.gg));
	net_free(&n);
}

/* A contiguous view [4, 1, 3] of a [4, 3] f32 tensor: ggml's contiguity
 * ignores nb[1] (ne[1] is 1), but a kernel walking its rows as one run uses
 * it (ggml-cpu's SCALE: row i at i * nb[1]).  A stride pointing past the
 * buffer is refused (fuzz_ggml_graph: SCALE read 2 GiB away). */
static void test_row_walk_reach(void **state)
{
	struct net n;
	Pprpc__GgmlTensor w[2], *wp[2] = { &w[0], &w[1] };
	int64_t ne0[4] = { 4, 3, 1, 1 }, ne1[4] = { 4, 1, 3, 1 };
	uint64_t nb0[4] = { 4, 16, 48, 48 }, nb1[4] = { 4, 16, 16, 48 };
	struct gge_wt plan[2];
	char err[256] = "";

	(void)state;
	net_init(&n);
	n.buf = ggml_backend_alloc_buffer(g_cpu, 4096);
	for (int i = 0; i < 2; i++) {
		pprpc__ggml_tensor__init(&w[i]);
		w[i].type = GGML_TYPE_F32;
		w[i].n_ne = w[i].n_nb = 4;
		w[i].view_src = -1;
	}
	w[0].ne = ne0;
	w[0].nb = nb0;
	w[0].buffer = 1;
	w[1].ne = ne1;
	w[1].nb = nb1;
	w[1].view_src = 0;
	/* canonical stride: fine */
	assert_int_equal(gge_wire_check((const Pprpc__GgmlTensor *const *)wp, 2, NULL, 0, GGE_GRAPH, resolve, &n, plan,
					err, sizeof(err)), 0);
	assert_int_equal(plan[1].reach, 48);
	/* within the source's bytes: fine too (the walk stays in them) */
	nb1[1] = 8;
	assert_int_equal(gge_wire_check((const Pprpc__GgmlTensor *const *)wp, 2, NULL, 0, GGE_GRAPH, resolve, &n, plan,
					err, sizeof(err)), 0);
	/* far away: refused */
	nb1[1] = UINT64_C(1) << 31;
	assert_int_equal(gge_wire_check((const Pprpc__GgmlTensor *const *)wp, 2, NULL, 0, GGE_GRAPH, resolve, &n, plan,
					err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "outside its source"));
	/* the same stride on a tensor of its own: outside its buffer */
	w[0].ne = ne1;
	w[0].nb = nb1;
	assert_int_equal(gge_wire_check((const Pprpc__GgmlTensor *const *)wp, 1, NULL, 0, GGE_GRAPH, resolve, &n, plan,
					err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "outside its buffer"));
	ggml_backend_buffer_free(n.buf);
	ggml_free(n.ctx);
}

/* A host buffer of the engine reads as zeros; zeroing a range with ragged
 * ends gives its whole pages back and writes the ends, nothing outside;
 * a range of no whole page, or a buffer of ggml's own, is left to memset. */
static void test_host_buffer_zeros(void **state)
{
	enum { N = 5 * 4096 + 100 };
	static _Alignas(64) uint8_t mem[8192];
	ggml_backend_buffer_t b, other;
	char err[256];
	uint8_t *p;

	(void)state;
	assert_int_equal(gge_buf_alloc(g_dev, N, &b, err, sizeof(err)), 0);
	p = ggml_backend_buffer_get_base(b);
	for (int i = 0; i < N; i++)
		assert_int_equal(p[i], 0);
	memset(p, 0x5a, N);
	if (!GGE_HOST_MAPS) {
		/* ASan: ggml's malloc'ed buffer, zeroed by memset alone */
		assert_int_equal(gge_buf_zero_pages(b, 10, 3 * 4096 + 20), -1);
		gge_buf_free(b);
		return;
	}
	assert_int_equal(gge_buf_zero_pages(b, 10, 3 * 4096 + 20), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(p[i], i >= 10 && i < 10 + 3 * 4096 + 20 ? 0 : 0x5a);
	assert_int_equal(gge_buf_zero_pages(b, 4096 + 8, 100), -1);
	assert_int_equal(p[4096 + 8], 0);
	assert_int_equal(p[4 * 4096 + 50], 0x5a);
	gge_buf_free(b);
	other = ggml_backend_cpu_buffer_from_ptr(mem, sizeof(mem));
	assert_non_null(other);
	assert_int_equal(gge_buf_zero_pages(other, 0, sizeof(mem)), -1);
	ggml_backend_buffer_free(other);
}

static int setup(void **state)
{
	char err[256];

	(void)state;
	/* ggml-cpu is a module of a GGML_BACKEND_DL ggml: loaded first */
	if (gge_backends_load(err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	g_cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
	return g_cpu && gge_dev_open("CPU", 1, &g_dev, err, sizeof(err)) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gge_dev_close(g_dev);
	ggml_backend_free(g_cpu);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argsort_ids_proven),
		cmocka_unit_test(test_argsort_wider_than_table),
		cmocka_unit_test(test_aliased_ids_checked),
		cmocka_unit_test(test_sort_proves_only_when_it_runs),
		cmocka_unit_test(test_input_ids_at_start),
		cmocka_unit_test(test_shared_input_ids),
		cmocka_unit_test(test_gpu_checks_copy),
		cmocka_unit_test(test_gpu_checks_refused),
		cmocka_unit_test(test_graph_ids),
		cmocka_unit_test(test_row_walk_reach),
		cmocka_unit_test(test_host_buffer_zeros),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

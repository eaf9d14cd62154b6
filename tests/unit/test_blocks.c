/*
 * tests/unit/test_blocks.c — the transformer-block builders
 * (libclient/blocks.c) without a daemon: defaults, argument and shape
 * errors, the output's shape and destination, and the ordering invariant
 * that lets a block update its states in place: every node reading a
 * state's bytes comes before every node writing them.  (The numbers are
 * checked end to end by tests/integration/test_hybrid.c.)
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "libclient/graph_builder.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "pprpc_blocks.h"

enum { E = 64, F = 96, T = 5, KH = 1, KVH = 2, DK = 32, DV = 16, KC = 4,
       CQ = KH * DK, CV = KVH * DV, CCH = 2 * CQ + CV,
       AH = 4, AKV = 2, AD = 16, CTX = 32 };

/* Every tensor lives in "buffer" 1 at a distinct offset; only descriptors
 * matter here. */
static int tensor(pprpc_graph_builder *gb, int dtype, int64_t ne0, int64_t ne1, int64_t ne2)
{
	static uint64_t off = 0;
	pprpc_tensor t = pprpc_tensor_make((pprpc_buffer){ 1 }, off, dtype, ne0, ne1, ne2, 1);
	int i = pprpc_gb_tensor(gb, &t);

	off += 1 << 20;
	assert_true(i >= 0);
	return i;
}

/* The tensor idx is, or is a view of, root. */
static bool derives_from(const pprpc_graph_builder *gb, int idx, int root)
{
	while (idx != root && gb->t[idx].view_of)
		idx = gb->t[idx].view_of - 1;
	return idx == root;
}

/* The order of the nodes reading root's bytes (or a view's) and of those
 * writing them: a state read by the block and rewritten for the next run
 * must be read first (reads_first), a KV cache written for this run's
 * tokens must be written first.  Both must happen. */
static void expect_order(const pprpc_graph_builder *gb, int root, bool reads_first,
			 const char *what)
{
	int first_read = -1, last_read = -1, first_write = -1, last_write = -1;

	for (int n = 0; n < gb->nn; n++) {
		for (int s = 0; s < gb->n[n].nsrc; s++)
			if (derives_from(gb, gb->n[n].src[s], root)) {
				if (first_read < 0)
					first_read = n;
				last_read = n;
			}
		if (derives_from(gb, gb->n[n].dst, root)) {
			if (first_write < 0)
				first_write = n;
			last_write = n;
		}
	}
	if (first_read < 0 || first_write < 0 ||
	    (reads_first ? last_read >= first_write : last_write >= first_read))
		fail_msg("%s: reads at nodes %d..%d, writes at nodes %d..%d (want %s first)", what,
			 first_read, last_read, first_write, last_write,
			 reads_first ? "reads" : "writes");
}

static int count_writes(const pprpc_graph_builder *gb, int root)
{
	int n = 0;

	for (int i = 0; i < gb->nn; i++)
		n += derives_from(gb, gb->n[i].dst, root);
	return n;
}

static void expect_out(pprpc_graph_builder *gb, int out, int64_t ne0, int64_t ne1)
{
	pprpc_tensor t;

	assert_int_equal(pprpc_gb_tensor_get(gb, out, &t), 0);
	assert_int_equal(t.dtype, PPRPC_F32);
	assert_int_equal(t.ne[0], ne0);
	assert_int_equal(t.ne[1], ne1);
	/* The block's last node writes its output. */
	assert_int_equal(gb->n[gb->nn - 1].dst, out);
	assert_int_equal(gb->n[gb->nn - 1].op, PPRPC_OP_ADD);
}

static void expect_fail(pprpc_graph_builder *gb, int rc, int code, const char *needle)
{
	if (rc != code)
		fail_msg("got %d (%s), want %d", rc, pprpc_gb_error(gb), code);
	if (!strstr(pprpc_gb_error(gb), needle))
		fail_msg("error \"%s\" does not mention \"%s\"", pprpc_gb_error(gb), needle);
}

static void attn_setup(pprpc_graph_builder *gb, pprpc_attn_block *a, int cache_dtype)
{
	pprpc_attn_block_init(a);
	a->norm_w = tensor(gb, PPRPC_F32, E, 1, 1);
	a->wq = tensor(gb, PPRPC_F16, E, AH * AD, 1);
	a->wk = tensor(gb, PPRPC_Q8_0, E, AKV * AD, 1);
	a->wv = tensor(gb, PPRPC_BF16, E, AKV * AD, 1);
	a->wo = tensor(gb, PPRPC_F32, AH * AD, E, 1);
	a->k_cache = tensor(gb, cache_dtype, AD, AKV, CTX);
	a->v_cache = tensor(gb, cache_dtype, AD, AKV, CTX);
	a->n_embd = E;
	a->n_head = AH;
	a->n_kv_head = AKV;
	a->head_dim = AD;
}

static void test_defaults(void **state)
{
	pprpc_attn_block a;
	pprpc_kda_block k;
	pprpc_mlp_block m;

	(void)state;
	pprpc_attn_block_init(&a);
	pprpc_kda_block_init(&k);
	pprpc_mlp_block_init(&m);
	assert_int_equal(a.wq, -1);
	assert_int_equal(a.k_cache, -1);
	assert_int_equal(a.rope_mode, PPRPC_ROPE_NEOX);
	assert_true(a.rope_base == 10000.0f && a.rope_scale == 1.0f && a.scale == 0.0f);
	assert_int_equal(k.conv_kernel, 4);
	assert_int_equal(k.wg_a, -1);
	assert_int_equal(k.a_log, -1);
	assert_int_equal(k.state_out, -1);
	assert_int_equal(m.w_down, -1);
	assert_true(m.norm_eps == 1e-6f && k.norm_eps == 1e-6f && a.norm_eps == 1e-6f);
}

static void test_attention_block(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_attn_block a;
	int x, pos, out = -7, dst, nodes;

	(void)state;
	for (int dt = 0; dt < 2; dt++) {
		out = -7;
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		attn_setup(gb, &a, dt ? PPRPC_F16 : PPRPC_F32);
		x = tensor(gb, PPRPC_F32, E, T, 1);
		pos = tensor(gb, PPRPC_I32, T, 1, 1);
		dst = tensor(gb, PPRPC_F32, E, T, 1);

		/* Errors leave *out alone. */
		expect_fail(gb, pprpc_gb_attention_block(gb, &a, x, pos, CTX - T + 1, -1, &out),
			    PPRPC_ESHAPE, "exceeds the cache");
		expect_fail(gb, pprpc_gb_attention_block(gb, &a, x, x, 0, -1, &out), PPRPC_ETYPE,
			    "pos");
		a.wv = -1;
		expect_fail(gb, pprpc_gb_attention_block(gb, &a, x, pos, 0, -1, &out), PPRPC_EINVAL,
			    "wv");
		a.wv = a.wk;
		a.v_cache = tensor(gb, dt ? PPRPC_F32 : PPRPC_F16, AD, AKV, CTX);
		expect_fail(gb, pprpc_gb_attention_block(gb, &a, x, pos, 0, -1, &out), PPRPC_ETYPE,
			    "v_cache");
		a.v_cache = tensor(gb, dt ? PPRPC_F16 : PPRPC_F32, AD, AKV, CTX);
		a.n_kv_head = 3;
		expect_fail(gb, pprpc_gb_attention_block(gb, &a, x, pos, 0, -1, &out), PPRPC_ESHAPE,
			    "k_cache");
		a.n_kv_head = AKV;
		assert_int_equal(out, -7);
		assert_int_equal(pprpc_gb_node_count(gb), 0);

		/* n_past + n_tok == n_ctx fits; into a given destination. */
		assert_int_equal(pprpc_gb_attention_block(gb, &a, x, pos, CTX - T, dst, &out), 0);
		assert_int_equal(out, dst);
		expect_out(gb, out, E, T);
		expect_order(gb, a.k_cache, false, "k cache");
		expect_order(gb, a.v_cache, false, "v cache");
		nodes = pprpc_gb_node_count(gb);
		/* norm, gain, 3 projections, 2 ropes, 2 SET_ROWS, attention, wo, add */
		assert_int_equal(nodes, 12);
		pprpc_graph_builder_free(gb);
	}
}

static void kda_setup(pprpc_graph_builder *gb, pprpc_kda_block *k, bool same_state)
{
	pprpc_kda_block_init(k);
	k->norm_w = tensor(gb, PPRPC_F32, E, 1, 1);
	k->wq = tensor(gb, PPRPC_Q8_0, E, CQ, 1);
	k->wk = tensor(gb, PPRPC_F16, E, CQ, 1);
	k->wv = tensor(gb, PPRPC_BF16, E, CV, 1);
	k->conv_q = tensor(gb, PPRPC_F32, KC, CQ, 1);
	k->conv_k = tensor(gb, PPRPC_F16, KC, CQ, 1);
	k->conv_v = tensor(gb, PPRPC_F32, KC, CV, 1);
	k->wg = tensor(gb, PPRPC_F16, E, KVH * DK, 1);
	k->wb = tensor(gb, PPRPC_F32, E, KVH, 1);
	k->wog = tensor(gb, PPRPC_F16, E, CV, 1);
	k->wo = tensor(gb, PPRPC_F16, CV, E, 1);
	k->conv_state_in = tensor(gb, PPRPC_F32, CCH, KC - 1, 1);
	k->conv_state_out = same_state ? k->conv_state_in : tensor(gb, PPRPC_F32, CCH, KC - 1, 1);
	k->state_in = tensor(gb, PPRPC_F32, DK, DV, KVH);
	k->state_out = same_state ? k->state_in : tensor(gb, PPRPC_F32, DK, DV, KVH);
	k->n_embd = E;
	k->h_k = KH;
	k->h_v = KVH;
	k->d_k = DK;
	k->d_v = DV;
}

static void test_kda_block(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_kda_block k;
	int x, out = -7;

	(void)state;
	for (int same = 0; same < 2; same++) {
		int ngdn;

		out = -7;
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		kda_setup(gb, &k, same);
		x = tensor(gb, PPRPC_F32, E, T, 1);

		k.conv_state_in = tensor(gb, PPRPC_F32, CCH, KC, 1);
		expect_fail(gb, pprpc_gb_kda_block(gb, &k, x, -1, &out), PPRPC_ESHAPE,
			    "conv_state_in");
		k.conv_state_in = same ? k.conv_state_out : tensor(gb, PPRPC_F32, CCH, KC - 1, 1);
		k.h_k = 2;
		k.h_v = 3;
		expect_fail(gb, pprpc_gb_kda_block(gb, &k, x, -1, &out), PPRPC_EINVAL, "h_v % h_k");
		k.h_k = KH;
		k.h_v = KVH;
		k.conv_kernel = 1;
		expect_fail(gb, pprpc_gb_kda_block(gb, &k, x, -1, &out), PPRPC_EINVAL, "conv_kernel");
		k.conv_kernel = KC;
		k.a_log = 12345;
		expect_fail(gb, pprpc_gb_kda_block(gb, &k, x, -1, &out), PPRPC_EINVAL, "a_log");
		k.a_log = -1;
		assert_int_equal(out, -7);
		assert_int_equal(pprpc_gb_node_count(gb), 0);

		/* Wrong conv taps are caught with a reason. */
		{
			int saved = k.conv_v;

			k.conv_v = tensor(gb, PPRPC_F32, CV, KC, 1);  /* transposed */
			expect_fail(gb, pprpc_gb_kda_block(gb, &k, x, -1, &out), PPRPC_ESHAPE,
				    "conv taps");
			k.conv_v = saved;
		}
		pprpc_graph_builder_free(gb);

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		kda_setup(gb, &k, same);
		x = tensor(gb, PPRPC_F32, E, T, 1);
		ngdn = 0;
		/* The optional parts, with default conv kernel 4. */
		k.wg_a = tensor(gb, PPRPC_F16, E, 16, 1);
		k.wg = tensor(gb, PPRPC_F16, 16, KVH * DK, 1);
		k.g_bias = tensor(gb, PPRPC_F32, KVH * DK, 1, 1);
		k.a_log = tensor(gb, PPRPC_F32, 1, KVH, 1);
		k.o_norm_w = tensor(gb, PPRPC_F32, DV, 1, 1);
		assert_int_equal(pprpc_gb_kda_block(gb, &k, x, -1, &out), 0);
		expect_out(gb, out, E, T);
		if (same) {
			expect_order(gb, k.conv_state_in, true, "conv state");
			expect_order(gb, k.state_in, true, "recurrent state");
		} else {
			/* Ping-pong: the inputs are only read, the outputs
			 * written (the conv state by one CPY per stream). */
			assert_int_equal(count_writes(gb, k.conv_state_in), 0);
			assert_int_equal(count_writes(gb, k.state_in), 0);
			assert_int_equal(count_writes(gb, k.conv_state_out), 3);
			assert_int_equal(count_writes(gb, k.state_out), 1);
		}
		for (int n = 0; n < gb->nn; n++)
			if (gb->n[n].op == PPRPC_OP_GATED_DELTA_NET) {
				ngdn++;
				/* scale 1/sqrt(d_k), in-op L2 norm */
				assert_true(gb->n[n].p.f[0] == (float)(1.0 / sqrt((double)DK)));
				assert_int_equal(gb->n[n].p.i[0], 1);
			}
		assert_int_equal(ngdn, 1);
		pprpc_graph_builder_free(gb);
	}
}

static void test_mlp_block(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_mlp_block m;
	int x, out = -7;

	(void)state;
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	pprpc_mlp_block_init(&m);
	m.norm_w = tensor(gb, PPRPC_F32, E, 1, 1);
	m.w_gate = tensor(gb, PPRPC_Q8_0, E, F, 1);
	m.w_up = tensor(gb, PPRPC_F16, E, F, 1);
	x = tensor(gb, PPRPC_F32, E, T, 1);
	expect_fail(gb, pprpc_gb_swiglu_mlp(gb, &m, x, -1, &out), PPRPC_EINVAL, "w_down");
	m.w_down = tensor(gb, PPRPC_BF16, F + 32, E, 1);
	/* A down projection of the wrong width: MUL_MAT's reason. */
	assert_int_equal(pprpc_gb_swiglu_mlp(gb, &m, x, -1, &out), PPRPC_ESHAPE);
	assert_int_equal(out, -7);
	pprpc_graph_builder_free(gb);

	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	m.norm_w = tensor(gb, PPRPC_F32, E, 1, 1);
	m.w_gate = tensor(gb, PPRPC_Q8_0, E, F, 1);
	m.w_up = tensor(gb, PPRPC_F16, E, F, 1);
	m.w_down = tensor(gb, PPRPC_BF16, F, E, 1);
	x = tensor(gb, PPRPC_F32, E, 1, 1);  /* one token (decode) */
	assert_int_equal(pprpc_gb_swiglu_mlp(gb, &m, x, -1, &out), 0);
	expect_out(gb, out, E, 1);
	/* norm, gain, gate, up, swiglu, down, add */
	assert_int_equal(pprpc_gb_node_count(gb), 7);
	pprpc_graph_builder_free(gb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_attention_block),
		cmocka_unit_test(test_kda_block),
		cmocka_unit_test(test_mlp_block),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

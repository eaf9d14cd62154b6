/*
 * tests/unit/test_ggml_rules.c — the per-op validation rules of ggml graph
 * nodes (daemon/backend/ggml/rules): nodes built by ggml's own constructors
 * pass, mutated copies (wrong source type or shape, wrong result type, shape
 * or strides, bad op_params, missing or extra sources) are refused with
 * PPRPC_EINVAL and a reason, ops without a rule with PPRPC_EUNSUPP; and a
 * graph of accepted nodes computes on ggml-cpu with the expected results.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

#include "daemon/backend/ggml/ggml_load.h"
#include "daemon/backend/ggml/rules/ggml_rules.h"
#include "pprpc/types.h"

/* the accumulator precision F32: ggml_prec_set_acc from v0.5.0 on (the
 * per-op setters are deprecated there) */
#if PPRPC_LLAMA_RELEASE_NUM >= 500
#define SET_ACC_F32(t) ggml_prec_set_acc((t), GGML_PREC_F32)
#else
#define SET_ACC_F32(t) ((t)->op == GGML_OP_MUL_MAT ? ggml_mul_mat_set_prec((t), GGML_PREC_F32) \
						   : ggml_flash_attn_ext_set_prec((t), GGML_PREC_F32))
#endif

/* ggml-cpu with one thread: a module of a GGML_BACKEND_DL ggml, so loaded
 * first and reached through its registry. */
static ggml_backend_t cpu_backend(void)
{
	typedef void (*set_n_fn)(ggml_backend_t, int);
	char err[256];
	ggml_backend_t cpu;
	set_n_fn set_n;

	if (gge_backends_load(err, sizeof(err)) < 0)
		fail_msg("%s", err);
	cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
	assert_non_null(cpu);
	set_n = (set_n_fn)ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(ggml_backend_get_device(cpu)),
							      "ggml_backend_set_n_threads");
	if (set_n)
		set_n(cpu, 1);
	return cpu;
}

#define F32 GGML_TYPE_F32
#define F16 GGML_TYPE_F16
#define I32 GGML_TYPE_I32

static struct ggml_context *meta_ctx(void)
{
	struct ggml_init_params p = { .mem_size = 32u << 20, .mem_buffer = NULL, .no_alloc = true };
	struct ggml_context *ctx = ggml_init(p);
	assert_non_null(ctx);
	return ctx;
}

static void expect_ok(const struct ggml_tensor *n, const char *what)
{
	char err[256];
	int r = ggml_rules_check(n, err, sizeof(err));
	if (r != 0)
		fail_msg("%s (%s) refused (%d): %s", what, ggml_op_name(n->op), r, err);
}

static void expect_bad(const struct ggml_tensor *n, const char *what)
{
	char err[256];
	int r = ggml_rules_check(n, err, sizeof(err));
	if (r != PPRPC_EINVAL)
		fail_msg("%s (%s): mutation accepted (%d)", what, n->op < GGML_OP_COUNT ? ggml_op_name(n->op) : "?", r);
	if (err[0] == '\0')
		fail_msg("%s: refused without a reason", what);
}

/* Mutate a copy of node (its sources stay shared; a self-reference, as in
 * ggml_cast, is kept pointing at the copy) and expect a refusal. */
#define MUTATE(node, what, ...) do { \
		struct ggml_tensor m_ = *(node); \
		struct ggml_tensor *m = &m_; \
		for (int i_ = 0; i_ < GGML_MAX_SRC; i_++) \
			if (m->src[i_] == (node)) \
				m->src[i_] = m; \
		__VA_ARGS__; \
		expect_bad(m, what); \
	} while (0)

/* The same, for statements that make their own source copies and check
 * inside their scope. */
#define WITH_COPY(node, ...) do { \
		struct ggml_tensor m_ = *(node); \
		struct ggml_tensor *m = &m_; \
		__VA_ARGS__; \
	} while (0)

/* ---- one valid node per op with a rule (more for some) ---- */

enum { SKIP_NB = 1, SKIP_NE = 2, NO_SRC = 4 };

struct sample {
	const char *name;
	struct ggml_tensor *node;
	int skip;
};

#define MAX_SAMPLES 128

static int n_samples;
static struct sample samples[MAX_SAMPLES];

static struct ggml_tensor *add(const char *name, struct ggml_tensor *t, int skip)
{
	assert_true(n_samples < MAX_SAMPLES);
	samples[n_samples++] = (struct sample){ name, t, skip };
	return t;
}

static void build_samples(struct ggml_context *ctx)
{
	n_samples = 0;

	struct ggml_tensor *x = ggml_new_tensor_4d(ctx, F32, 64, 8, 4, 1);
	struct ggml_tensor *x2 = ggml_new_tensor_2d(ctx, F32, 64, 8);
	struct ggml_tensor *x16 = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1);
	struct ggml_tensor *bias = ggml_new_tensor_1d(ctx, F32, 64);

	/* binary */
	add("add", ggml_add(ctx, x, bias), 0);
	add("add_inplace", ggml_add_inplace(ctx, x, bias), 0);
	add("add_f16_f32", ggml_add(ctx, x16, bias), 0);
	add("add_cast", ggml_add_cast(ctx, x16, bias, F32), 0);
	add("sub", ggml_sub(ctx, x, x), 0);
	add("mul", ggml_mul(ctx, x, ggml_new_tensor_4d(ctx, F32, 64, 1, 4, 1)), 0);
	add("div", ggml_div(ctx, x, bias), 0);
	{
		struct ggml_tensor *a = ggml_new_tensor_3d(ctx, F32, 64, 4, 8);
		struct ggml_tensor *b = ggml_new_tensor_2d(ctx, F32, 64, 6);
		struct ggml_tensor *ids = ggml_new_tensor_2d(ctx, I32, 4, 8);
		add("add_id", ggml_add_id(ctx, a, b, ids), 0);
	}
	add("sqr", ggml_sqr(ctx, x), 0);
	add("sqrt", ggml_sqrt(ctx, x), 0);
	add("log", ggml_log(ctx, x), 0);
	add("sin", ggml_sin(ctx, x), 0);
	add("cos", ggml_cos(ctx, x), 0);

	/* reductions and shapes */
	add("sum", ggml_sum(ctx, x), 0);
	add("sum_rows", ggml_sum_rows(ctx, x), 0);
	add("cumsum", ggml_cumsum(ctx, x), 0);
	add("mean", ggml_mean(ctx, x), 0);
	add("argmax", ggml_argmax(ctx, x2), 0);
	add("repeat_4d", ggml_repeat_4d(ctx, ggml_new_tensor_4d(ctx, F32, 64, 2, 1, 1), 64, 4, 4, 1), 0);
	add("repeat", ggml_repeat(ctx, bias, x), 0);
	add("concat", ggml_concat(ctx, x, ggml_new_tensor_4d(ctx, F32, 64, 3, 4, 1), 1), 0);
	add("pad", ggml_pad(ctx, x, 0, 2, 0, 1), 0);
	add("pad_ext", ggml_pad_ext(ctx, x, 1, 2, 0, 0, 0, 0, 0, 0), 0);

	/* norms */
	add("norm", ggml_norm(ctx, x, 1e-5f), 0);
	add("rms_norm", ggml_rms_norm(ctx, x, 1e-6f), 0);
	add("rms_norm_inplace", ggml_rms_norm_inplace(ctx, x, 1e-6f), 0);
	add("group_norm", ggml_group_norm(ctx, x, 2, 1e-6f), 0);
	add("l2_norm", ggml_l2_norm(ctx, x, 1e-6f), 0);

	/* matmul */
	{
		struct ggml_tensor *wq = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 32);
		struct ggml_tensor *wk = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 32);
		struct ggml_tensor *wf = ggml_new_tensor_3d(ctx, F16, 64, 32, 2);
		add("mul_mat_q8_0", ggml_mul_mat(ctx, wq, x), 0);
		add("mul_mat_q4_k", ggml_mul_mat(ctx, wk, ggml_new_tensor_2d(ctx, F32, 256, 5)), 0);
		add("mul_mat_f16_bcast", ggml_mul_mat(ctx, wf, ggml_new_tensor_4d(ctx, F32, 64, 8, 4, 3)), 0);
		struct ggml_tensor *prec = ggml_mul_mat(ctx, wq, x2);
		SET_ACC_F32(prec);
		add("mul_mat_prec", prec, 0);
#if PPRPC_LLAMA_RELEASE_NUM >= 500
		/* v0.5.0: src1 may be quantized to 8 bits, accumulated in BF16 */
		struct ggml_tensor *prec_src = ggml_mul_mat(ctx, wq, x2);
		assert_true(ggml_prec_set_acc(prec_src, GGML_PREC_BF16));
		assert_true(ggml_prec_set_src(prec_src, GGML_PREC_Q8, 1));
		add("mul_mat_prec_src", prec_src, 0);
#endif
		struct ggml_tensor *had = ggml_mul_mat(ctx, ggml_new_tensor_2d(ctx, F32, 64, 64), x2);
		ggml_mul_mat_set_hint(had, GGML_HINT_SRC0_IS_HADAMARD);
		add("mul_mat_hadamard", had, 0);
		add("mul_mat_kq", ggml_mul_mat(ctx, ggml_permute(ctx, ggml_new_tensor_3d(ctx, F16, 64, 4, 32), 0, 2, 1, 3),
					       ggml_permute(ctx, x, 0, 2, 1, 3)), 0);

		struct ggml_tensor *as = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 64, 32, 4);
		struct ggml_tensor *ids = ggml_new_tensor_2d(ctx, I32, 2, 8);
		add("mul_mat_id_bcast", ggml_mul_mat_id(ctx, as, ggml_new_tensor_3d(ctx, F32, 64, 1, 8), ids), 0);
		add("mul_mat_id", ggml_mul_mat_id(ctx, as, ggml_new_tensor_3d(ctx, F32, 64, 2, 8), ids), 0);
		add("out_prod", ggml_out_prod(ctx, ggml_new_tensor_2d(ctx, F32, 16, 8), ggml_new_tensor_2d(ctx, F32, 12, 8)), 0);
	}

	/* unary family */
	add("scale", ggml_scale(ctx, x, 0.5f), 0);
	add("scale_bias", ggml_scale_bias(ctx, x, 0.5f, 1.0f), 0);
	add("scale_inplace", ggml_scale_inplace(ctx, x, 0.0f), 0);
	add("clamp", ggml_clamp(ctx, x, -1.0f, 1.0f), 0);
	add("fill", ggml_fill(ctx, x, 2.0f), 0);
	add("leaky_relu", ggml_leaky_relu(ctx, x, 0.1f, false), 0);
	add("silu", ggml_silu(ctx, x), 0);
	add("silu_f16", ggml_silu(ctx, x16), 0);
	add("gelu", ggml_gelu(ctx, x), 0);
	add("exp", ggml_exp(ctx, x), 0);
	add("sigmoid", ggml_sigmoid(ctx, x), 0);
	add("softplus", ggml_softplus(ctx, x), 0);
	add("tanh", ggml_tanh(ctx, x), 0);
	add("relu", ggml_relu(ctx, x), 0);
	add("neg", ggml_neg(ctx, x), 0);
	add("xielu", ggml_xielu(ctx, x, 0.8f, 0.8f, 0.5f, 1e-6f), 0);
	add("swiglu", ggml_swiglu(ctx, x), 0);
	add("swiglu_swapped", ggml_swiglu_swapped(ctx, x), 0);
	add("swiglu_split", ggml_swiglu_split(ctx, x, x), 0);
	add("geglu_split", ggml_geglu_split(ctx, x, x), 0);
	add("reglu", ggml_reglu(ctx, x16), 0);
	add("swiglu_oai", ggml_swiglu_oai(ctx, x, x, 1.702f, 7.0f), 0);
	add("swiglu_clamp", ggml_swiglu_clamp(ctx, x, x, 7.0f), 0);

	/* copies and views */
	add("cpy_f32_f16", ggml_cpy(ctx, x, ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1)), 0);
	add("cpy_f32_q8_0", ggml_cpy(ctx, x, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 256, 8)), 0);
	add("cpy_q8_0_f32", ggml_cpy(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 8), x2), 0);
	add("cpy_into_view", ggml_cpy(ctx, x2, ggml_view_2d(ctx, x16, 64, 8, x16->nb[1], x16->nb[2])), 0);
	add("cast", ggml_cast(ctx, x, F16), 0);
	add("cont", ggml_cont(ctx, ggml_transpose(ctx, x2)), 0);
	add("cont_2d", ggml_cont_2d(ctx, ggml_permute(ctx, x, 0, 2, 1, 3), 64 * 4, 8), 0);
	add("dup", ggml_dup(ctx, x), 0);
	add("reshape_2d", ggml_reshape_2d(ctx, x, 64 * 8, 4), 0);
	add("reshape_of_view", ggml_reshape_1d(ctx, ggml_view_1d(ctx, x, 128, 256), 128), 0);
	add("view_1d", ggml_view_1d(ctx, x, 100, 4 * 10), SKIP_NB | SKIP_NE);
	add("view_3d", ggml_view_3d(ctx, x, 32, 4, 4, x->nb[1], x->nb[2], 4 * 32), SKIP_NB | SKIP_NE);
	add("view_of_view", ggml_view_2d(ctx, ggml_view_1d(ctx, x, 512, 1024), 16, 4, 64, 128), SKIP_NB | SKIP_NE);
	add("permute", ggml_permute(ctx, x, 0, 2, 1, 3), 0);
	add("permute_3120", ggml_permute(ctx, x, 3, 1, 2, 0), 0);
	add("transpose", ggml_transpose(ctx, x2), 0);

	/* rows */
	{
		struct ggml_tensor *emb = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 100);
		struct ggml_tensor *idx = ggml_new_tensor_1d(ctx, I32, 8);
		add("get_rows_q4_0", ggml_get_rows(ctx, emb, idx), 0);
		add("get_rows_f32_3d", ggml_get_rows(ctx, ggml_new_tensor_3d(ctx, F32, 16, 10, 4),
						     ggml_new_tensor_2d(ctx, I32, 5, 4)), 0);
		add("get_rows_i32", ggml_get_rows(ctx, ggml_new_tensor_2d(ctx, I32, 2, 10), idx), 0);
		struct ggml_tensor *cache = ggml_new_tensor_2d(ctx, F16, 64, 100);
		add("set_rows_i64", ggml_set_rows(ctx, cache, x2, ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 8)), 0);
		add("set_rows_q8_0", ggml_set_rows(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 100), x2, idx), 0);
		add("argsort", ggml_argsort(ctx, x, GGML_SORT_ORDER_DESC), 0);
		add("top_k", ggml_top_k(ctx, x, 4), 0);
		/* one row per head: the sweep's size-1 stride mutation reaches nb[1] */
		add("argsort_1row", ggml_argsort(ctx, ggml_new_tensor_4d(ctx, F32, 64, 1, 4, 1), GGML_SORT_ORDER_ASC), 0);
	}

	/* attention */
	{
		struct ggml_tensor *kq = ggml_new_tensor_3d(ctx, F32, 32, 8, 4);
		struct ggml_tensor *mask = ggml_new_tensor_2d(ctx, F16, 32, 8);
		add("soft_max", ggml_soft_max(ctx, kq), 0);
		struct ggml_tensor *sm = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.0f);
		ggml_soft_max_add_sinks(sm, ggml_new_tensor_1d(ctx, F32, 4));
		add("soft_max_ext_sinks", sm, 0);
		add("soft_max_alibi", ggml_soft_max_ext(ctx, kq, ggml_new_tensor_2d(ctx, F32, 32, 16), 1.0f, 8.0f), 0);

		struct ggml_tensor *q = ggml_new_tensor_4d(ctx, F32, 64, 8, 4, 1);
		struct ggml_tensor *k = ggml_new_tensor_4d(ctx, F16, 64, 32, 2, 1);
		struct ggml_tensor *v = ggml_new_tensor_4d(ctx, F16, 64, 32, 2, 1);
		struct ggml_tensor *fa = ggml_flash_attn_ext(ctx, q, k, v, ggml_new_tensor_4d(ctx, F16, 32, 8, 1, 1),
							     0.125f, 0.0f, 0.0f);
		SET_ACC_F32(fa);
		ggml_flash_attn_ext_add_sinks(fa, ggml_new_tensor_1d(ctx, F32, 4));
		add("flash_attn_ext", fa, 0);
		add("flash_attn_ext_nomask_q8", ggml_flash_attn_ext(ctx, q, ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, 64, 32, 2, 1),
								     ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, 64, 32, 2, 1), NULL, 1.0f, 0.0f, 30.0f), 0);
	}

	/* rope */
	{
		struct ggml_tensor *q = ggml_new_tensor_3d(ctx, F32, 64, 4, 8);
		struct ggml_tensor *pos = ggml_new_tensor_1d(ctx, I32, 8);
		struct ggml_tensor *ff = ggml_new_tensor_1d(ctx, F32, 32); /* ggml-cpu reads ne[0]/2 */
		add("rope_neox", ggml_rope_ext(ctx, q, pos, NULL, 64, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_norm_partial_ff", ggml_rope_ext(ctx, q, pos, ff, 32, GGML_ROPE_TYPE_NORMAL, 4096, 10000.0f, 1.0f, 1.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_offset", ggml_rope_set_offset(ggml_rope_ext(ctx, q, pos, NULL, 32, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f), 16), 0);
		add("rope_inplace_f16", ggml_rope_ext_inplace(ctx, ggml_new_tensor_3d(ctx, F16, 64, 4, 8), pos, NULL, 64, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f), 0);
		int sections[4] = { 8, 12, 12, 0 };
		add("rope_multi", ggml_rope_multi(ctx, q, ggml_new_tensor_1d(ctx, I32, 32), NULL, 64, sections, GGML_ROPE_TYPE_MROPE, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_imrope", ggml_rope_multi(ctx, q, ggml_new_tensor_1d(ctx, I32, 32), NULL, 64, sections, GGML_ROPE_TYPE_IMROPE, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_vision", ggml_rope_multi(ctx, q, ggml_new_tensor_1d(ctx, I32, 32), NULL, 32, sections, GGML_ROPE_TYPE_VISION, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_back", ggml_rope_ext_back(ctx, q, pos, NULL, 64, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f), 0);
		add("rope_on_view", ggml_rope_ext(ctx, ggml_view_3d(ctx, x16, 64, 4, 8, x16->nb[1], x16->nb[1] * 4, 0), pos, NULL, 64, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f), 0);
	}

	/* SET, ARANGE, POOL_2D, DeepSeek's indexer and hyper-connections */
	{
		struct ggml_tensor *a = ggml_new_tensor_3d(ctx, F32, 64, 8, 4);
		struct ggml_tensor *b = ggml_new_tensor_3d(ctx, F32, 64, 2, 4);
		add("set_inplace", ggml_set_inplace(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 6 * a->nb[1]), 0);
		add("set", ggml_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 0), 0);
		add("set_1d", ggml_set_1d(ctx, ggml_new_tensor_1d(ctx, I32, 100), ggml_new_tensor_1d(ctx, I32, 10), 90 * 4), 0);
		add("arange", ggml_arange(ctx, 0.0f, 10.0f, 1.0f), SKIP_NE | NO_SRC);
		add("arange_frac", ggml_arange(ctx, 0.5f, 3.0f, 0.75f), SKIP_NE | NO_SRC);
		add("pool_2d_max", ggml_pool_2d(ctx, ggml_new_tensor_3d(ctx, F32, 64, 8, 4), GGML_OP_POOL_MAX, 16, 1, 16, 1, 0, 0), 0);
		add("pool_2d_avg_pad", ggml_pool_2d(ctx, ggml_new_tensor_3d(ctx, F32, 10, 7, 2), GGML_OP_POOL_AVG, 3, 3, 2, 2, 1, 1), 0);

		struct ggml_tensor *iq = ggml_new_tensor_4d(ctx, F32, 128, 64, 8, 1);
		struct ggml_tensor *ik = ggml_new_tensor_4d(ctx, F16, 128, 1, 32, 1);
		struct ggml_tensor *iw = ggml_new_tensor_4d(ctx, F32, 64, 8, 1, 1);
		struct ggml_tensor *im = ggml_new_tensor_4d(ctx, F16, 32, 8, 1, 1);
		add("lightning_indexer", ggml_lightning_indexer(ctx, iq, ik, iw, im), 0);
		add("dsv4_hc_comb", ggml_dsv4_hc_comb(ctx, ggml_new_tensor_2d(ctx, F32, 24, 8), ggml_new_tensor_1d(ctx, F32, 3),
						     ggml_new_tensor_1d(ctx, F32, 24), 1e-6f, 20), 0);
		add("dsv4_hc_pre", ggml_dsv4_hc_pre(ctx, ggml_new_tensor_3d(ctx, F32, 64, 4, 8), ggml_new_tensor_2d(ctx, F32, 4, 8)), 0);
		add("dsv4_hc_post", ggml_dsv4_hc_post(ctx, ggml_new_tensor_2d(ctx, F32, 64, 8), ggml_new_tensor_3d(ctx, F32, 64, 4, 8),
						     ggml_new_tensor_2d(ctx, F32, 4, 8), ggml_new_tensor_3d(ctx, F32, 4, 4, 8)), 0);
#if PPRPC_LLAMA_RELEASE_NUM >= 500
		/* v0.5.0: the gated pre (qwen4exp), the post without comb */
		add("dsv4_hc_pre_gated", ggml_dsv4_hc_pre_gated(ctx, ggml_new_tensor_3d(ctx, F32, 64, 4, 8),
								ggml_new_tensor_3d(ctx, F32, 64, 4, 8), 0.25f), 0);
		add("dsv4_hc_post_nocomb", ggml_dsv4_hc_post(ctx, ggml_new_tensor_2d(ctx, F32, 64, 8),
							     ggml_new_tensor_3d(ctx, F32, 64, 4, 8),
							     ggml_new_tensor_2d(ctx, F32, 4, 8), NULL), 0);
#endif
	}

	/* misc and state-space */
	add("tri", ggml_tri(ctx, ggml_new_tensor_3d(ctx, F32, 8, 8, 2), GGML_TRI_TYPE_LOWER), 0);
	add("solve_tri", ggml_solve_tri(ctx, ggml_new_tensor_3d(ctx, F32, 8, 8, 2), ggml_new_tensor_3d(ctx, F32, 4, 8, 2), true, true, false), 0);
	add("ssm_conv", ggml_ssm_conv(ctx, ggml_new_tensor_3d(ctx, F32, 3 + 8, 128, 2), ggml_new_tensor_2d(ctx, F32, 4, 128)), 0);
	{
		struct ggml_tensor *s = ggml_new_tensor_4d(ctx, F32, 128, 16, 4, 3);
		struct ggml_tensor *sx = ggml_new_tensor_4d(ctx, F32, 16, 4, 8, 2);
		struct ggml_tensor *dt = ggml_new_tensor_3d(ctx, F32, 4, 8, 2);
		struct ggml_tensor *A = ggml_new_tensor_2d(ctx, F32, 1, 4);
		struct ggml_tensor *B = ggml_new_tensor_4d(ctx, F32, 128, 2, 8, 2);
		struct ggml_tensor *C = ggml_new_tensor_4d(ctx, F32, 128, 2, 8, 2);
		struct ggml_tensor *ids = ggml_new_tensor_1d(ctx, I32, 2);
		add("ssm_scan_mamba2", ggml_ssm_scan(ctx, s, sx, dt, A, B, C, ids, 1), 0);
		add("ssm_scan_k3", ggml_ssm_scan(ctx, s, sx, dt, A, B, C, ids, 3), 0);
		/* one state slot for both sequences: the sweep's size-1 stride
		 * mutation reaches s->nb[3], the result state's write stride */
		add("ssm_scan_1slot", ggml_ssm_scan(ctx, ggml_new_tensor_4d(ctx, F32, 128, 16, 4, 1), sx, dt, A, B, C, ids, 1), 0);
	}
	{
		struct ggml_tensor *q = ggml_new_tensor_4d(ctx, F32, 32, 2, 3, 2);
		struct ggml_tensor *k = ggml_new_tensor_4d(ctx, F32, 32, 2, 3, 2);
		struct ggml_tensor *v = ggml_new_tensor_4d(ctx, F32, 32, 4, 3, 2);
		struct ggml_tensor *g = ggml_new_tensor_4d(ctx, F32, 1, 4, 3, 2);
		struct ggml_tensor *gk = ggml_new_tensor_4d(ctx, F32, 32, 4, 3, 2);
		struct ggml_tensor *beta = ggml_new_tensor_4d(ctx, F32, 1, 4, 3, 2);
		struct ggml_tensor *st = ggml_new_tensor_4d(ctx, F32, 32, 32, 4, 2);
		add("gated_delta_net", ggml_gated_delta_net(ctx, q, k, v, g, beta, st, 1), 0);
		add("gated_delta_net_kda_k2", ggml_gated_delta_net(ctx, q, k, v, gk, beta, st, 2), 0);
	}
}

static struct ggml_tensor *sample(const char *name)
{
	for (int i = 0; i < n_samples; i++)
		if (strcmp(samples[i].name, name) == 0)
			return samples[i].node;
	fail_msg("no sample %s", name);
	return NULL;
}

/* ---- every op in the table passes its constructor-built node ---- */

static void test_every_rule_has_a_passing_sample(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);

	for (int i = 0; i < n_samples; i++)
		expect_ok(samples[i].node, samples[i].name);

	for (int op = 0; op < GGML_OP_COUNT; op++) {
		if (!ggml_rules_has_rule((enum ggml_op)op))
			continue;
		bool seen = false;
		for (int i = 0; i < n_samples && !seen; i++)
			seen = samples[i].node->op == (enum ggml_op)op;
		if (!seen)
			fail_msg("op %s has a rule but no sample", ggml_op_name((enum ggml_op)op));
	}
	ggml_free(ctx);
}

/* ---- mutations every rule must refuse ---- */

static void test_generic_mutations(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *other = ggml_new_tensor_1d(ctx, F32, 64);

	for (int i = 0; i < n_samples; i++) {
		struct ggml_tensor *n = samples[i].node;
		const char *name = samples[i].name;

		if (!(samples[i].skip & NO_SRC))
			MUTATE(n, name, m->src[0] = NULL);
		MUTATE(n, name, m->src[GGML_MAX_SRC - 1] = other);
		MUTATE(n, name, m->type = GGML_TYPE_I8);
		if (!(samples[i].skip & SKIP_NB))
			MUTATE(n, name, m->nb[1] += m->nb[0]);
		if (!(samples[i].skip & SKIP_NE))
			MUTATE(n, name, m->ne[1] += 1);
	}
	ggml_free(ctx);
}

static void test_unsupported_ops(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *x = ggml_new_tensor_2d(ctx, F32, 8, 8);
	char err[128];

	struct ggml_tensor *n = ggml_diag_mask_inf(ctx, x, 0);
	assert_int_equal(ggml_rules_check(n, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_non_null(strstr(err, "DIAG_MASK_INF"));

	struct ggml_tensor m = *ggml_add(ctx, x, x);
	m.op = GGML_OP_COUNT;
	assert_int_equal(ggml_rules_check(&m, err, sizeof(err)), PPRPC_EUNSUPP);
	m.op = (enum ggml_op)-5;
	assert_int_equal(ggml_rules_check(&m, err, sizeof(err)), PPRPC_EUNSUPP);
	m.op = GGML_OP_NONE;
	assert_int_equal(ggml_rules_check(&m, err, sizeof(err)), PPRPC_EUNSUPP);

	/* a tiny error buffer is still terminated */
	char small[4];
	m.op = GGML_OP_ADD;
	m.ne[0] = 3;
	assert_int_equal(ggml_rules_check(&m, small, sizeof(small)), PPRPC_EINVAL);
	assert_int_equal(strlen(small), 3);
	assert_int_equal(ggml_rules_check(&m, NULL, 0), PPRPC_EINVAL);
	ggml_free(ctx);
}

static void test_empty_sources(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	/* an empty K dimension: the result is non-empty, the kernels would sum nothing
	 * (or divide by zero when broadcasting) */
	struct ggml_tensor *n = ggml_mul_mat(ctx, ggml_new_tensor_2d(ctx, F32, 1, 4), ggml_new_tensor_2d(ctx, F32, 1, 3));
	WITH_COPY(n, {
		struct ggml_tensor a = *n->src[0], b = *n->src[1];
		a.ne[0] = b.ne[0] = 0;
		a.nb[1] = a.nb[2] = a.nb[3] = b.nb[1] = b.nb[2] = b.nb[3] = 4;
		m->src[0] = &a;
		m->src[1] = &b;
		expect_bad(m, "empty K");
	});
	/* empty everything is fine (the backends skip empty nodes) */
	expect_ok(ggml_add(ctx, ggml_new_tensor_2d(ctx, F32, 0, 3), ggml_new_tensor_1d(ctx, F32, 0)), "empty add");
	/* ggml_can_mul_mat would divide by a zero ne[2] */
	struct ggml_tensor *mm = ggml_mul_mat(ctx, ggml_new_tensor_3d(ctx, F32, 4, 4, 2), ggml_new_tensor_3d(ctx, F32, 4, 3, 2));
	WITH_COPY(mm, {
		struct ggml_tensor a = *mm->src[0];
		a.ne[2] = 0;
		m->src[0] = &a;
		m->ne[2] = 2;
		expect_bad(m, "zero ne[2]");
	});
	ggml_free(ctx);
}

/* ---- per family ---- */

static void test_binary(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *n = sample("add"), *ip = sample("add_inplace");
	struct ggml_tensor *b2 = ggml_new_tensor_1d(ctx, F32, 48);
	struct ggml_tensor *bi = ggml_new_tensor_1d(ctx, I32, 64);
	struct ggml_tensor *q = ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, 64, 8, 4, 1);

	MUTATE(n, "src1 not broadcastable", m->src[1] = b2);
	MUTATE(n, "src1 I32", m->src[1] = bi);
	MUTATE(n, "quantized src0", { m->src[0] = q; m->type = q->type; m->nb[0] = q->nb[0]; m->nb[1] = q->nb[1];
				      m->nb[2] = q->nb[2]; m->nb[3] = q->nb[3]; });
	MUTATE(n, "result is a view of src1", m->view_src = n->src[1]);
	MUTATE(ip, "in-place at another offset", m->view_offs += 4);
	MUTATE(ip, "in-place over another tensor", m->view_src = b2);
	MUTATE(ip, "in-place strides", m->nb[2] += 4);
	MUTATE(sample("add_cast"), "cast to F16", m->type = F16);
	MUTATE(sample("add_f16_f32"), "F16 + F16-result mismatch", m->src[1] = ggml_new_tensor_1d(ctx, GGML_TYPE_BF16, 64));
	MUTATE(sample("sub"), "sub casts", { m->type = F16; m->nb[0] = 2; m->nb[1] = 128; m->nb[2] = 1024; m->nb[3] = 4096; });

	struct ggml_tensor *aid = sample("add_id");
	MUTATE(aid, "ids I64", m->src[2] = ggml_new_tensor_2d(ctx, GGML_TYPE_I64, 4, 8));
	MUTATE(aid, "ids shape", m->src[2] = ggml_new_tensor_2d(ctx, I32, 5, 8));
	MUTATE(aid, "bias width", m->src[1] = ggml_new_tensor_2d(ctx, F32, 32, 6));
	ggml_free(ctx);
}

static void test_matmul(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *n = sample("mul_mat_q8_0");

	MUTATE(n, "K mismatch", m->src[1] = ggml_new_tensor_2d(ctx, F32, 32, 8));
	MUTATE(n, "transposed src0", m->src[0] = ggml_transpose(ctx, ggml_new_tensor_2d(ctx, F32, 32, 64)));
	MUTATE(n, "src1 F16 with Q8_0 weights", m->src[1] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1));
	MUTATE(n, "src0 I32", m->src[0] = ggml_new_tensor_2d(ctx, I32, 64, 32));
	MUTATE(n, "src0 Q8_K (no vec_dot)", m->src[0] = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_K, 256, 32));
	MUTATE(n, "result F16", m->type = F16);
	MUTATE(n, "precision 3", m->op_params[0] = 3);
	MUTATE(n, "src0 precision", m->op_params[2] = GGML_PREC_F32);
	MUTATE(n, "src1 precision 7", m->op_params[3] = 7);
#if PPRPC_LLAMA_RELEASE_NUM >= 500
	MUTATE(n, "accumulating in Q8", m->op_params[0] = GGML_PREC_Q8);
#else
	MUTATE(n, "src1 precision (none before v0.5.0)", m->op_params[3] = GGML_PREC_F32);
#endif
	MUTATE(n, "hint 7", m->op_params[1] = 7);
	MUTATE(n, "Hadamard of a non-square src0", m->op_params[1] = GGML_HINT_SRC0_IS_HADAMARD);
	MUTATE(sample("mul_mat_f16_bcast"), "batch not broadcastable",
	       m->src[1] = ggml_new_tensor_4d(ctx, F32, 64, 8, 3, 3));
	WITH_COPY(n, {
		struct ggml_tensor b = *n->src[1];
		b.nb[0] = 8;
		m->src[1] = &b;
		expect_bad(m, "src1 nb[0]");
	});

	struct ggml_tensor *id = sample("mul_mat_id");
	MUTATE(id, "ids F32", m->src[2] = ggml_new_tensor_2d(ctx, F32, 2, 8));
	MUTATE(id, "ids tokens", m->src[2] = ggml_new_tensor_2d(ctx, I32, 2, 7));
	MUTATE(id, "ids 3-d", m->src[2] = ggml_new_tensor_3d(ctx, I32, 2, 8, 2));
	MUTATE(id, "src1 not a divisor of ids", m->src[1] = ggml_new_tensor_3d(ctx, F32, 64, 3, 8));
	MUTATE(id, "experts 4-d", m->src[0] = ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, 64, 32, 4, 2));
	MUTATE(id, "result rows", m->ne[0] = 16);
	MUTATE(id, "precision 3", m->op_params[0] = 3);
	MUTATE(id, "src0 precision", m->op_params[2] = GGML_PREC_F32);
	ggml_free(ctx);
}

static void test_unary_family(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *silu = sample("silu");
	struct ggml_tensor *xt = ggml_transpose(ctx, ggml_new_tensor_2d(ctx, F32, 8, 64));
	struct ggml_tensor *xi = ggml_new_tensor_4d(ctx, I32, 64, 8, 4, 1);

	MUTATE(silu, "unary kind out of range", m->op_params[0] = GGML_UNARY_OP_COUNT);
	MUTATE(silu, "unary kind negative", m->op_params[0] = -1);
	MUTATE(silu, "non-contiguous rows", m->src[0] = xt);
	MUTATE(silu, "I32 input", { m->src[0] = xi; m->type = I32; });
	MUTATE(sample("silu_f16"), "F16 in, F32 out", { m->type = F32; m->nb[0] = 4; m->nb[1] = 256; m->nb[2] = 2048; m->nb[3] = 8192; });

	struct ggml_tensor *sw = sample("swiglu"), *sp = sample("swiglu_split");
	MUTATE(sw, "glu kind out of range", m->op_params[0] = GGML_GLU_OP_COUNT);
	MUTATE(sw, "swapped 2", m->op_params[1] = 2);
	MUTATE(sw, "fused result full width", { m->ne[0] = 64; });
	MUTATE(sp, "split swapped", m->op_params[1] = 1);
	MUTATE(sp, "split shapes differ", m->src[1] = ggml_new_tensor_4d(ctx, F32, 64, 8, 2, 1));
	MUTATE(sp, "split types differ", m->src[1] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1));
	MUTATE(sample("swiglu_oai"), "swiglu_oai F16", { m->src[0] = m->src[1] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1);
							 m->type = F16; });

	MUTATE(sample("scale"), "scale F16", { m->src[0] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1); m->type = F16; });
	MUTATE(sample("scale"), "scale of a permuted tensor", m->src[0] = ggml_permute(ctx, ggml_new_tensor_4d(ctx, F32, 64, 4, 8, 1), 0, 2, 1, 3));
	MUTATE(sample("rms_norm"), "rms_norm eps < 0", { float e = -1.0f; memcpy(m->op_params, &e, 4); });
	MUTATE(sample("rms_norm"), "rms_norm eps NaN", { float e = NAN; memcpy(m->op_params, &e, 4); });
	MUTATE(sample("rms_norm"), "rms_norm F16", { m->src[0] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1); m->type = F16; });
	MUTATE(sample("group_norm"), "zero groups", m->op_params[0] = 0);
	MUTATE(sample("clamp"), "clamp I32", { m->src[0] = xi; m->type = I32; });
	ggml_free(ctx);
}

static void test_views(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *v = sample("view_3d"), *p = sample("permute"), *r = sample("reshape_2d");

	MUTATE(v, "view past the end", m->view_offs = ggml_nbytes(v->view_src));
	MUTATE(v, "view offset != op_params", m->view_offs += 4);
	MUTATE(v, "view of another tensor", m->view_src = ggml_new_tensor_1d(ctx, F32, 1 << 16));
	MUTATE(v, "view not a view", m->view_src = NULL);
	MUTATE(v, "view nb[0]", m->nb[0] = 8);
	MUTATE(v, "view type", m->type = GGML_TYPE_I32);
	MUTATE(v, "view larger than its source", m->ne[2] = 1000);
	MUTATE(p, "axes not a permutation", m->op_params[1] = 0);
	MUTATE(p, "axis out of range", m->op_params[3] = 4);
	MUTATE(p, "shape not permuted", { m->ne[1] = p->src[0]->ne[1]; m->ne[2] = p->src[0]->ne[2]; });
	MUTATE(r, "reshape of a non-contiguous tensor", m->src[0] = sample("permute"));
	MUTATE(r, "reshape element count", m->ne[1] = 3);
	MUTATE(r, "reshape at an offset", m->view_offs = 4);
	MUTATE(sample("transpose"), "transpose not swapped", { m->ne[0] = 64; m->ne[1] = 8; });
	ggml_free(ctx);
}

static void test_copies(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *c = sample("cpy_f32_f16"), *cast = sample("cast"), *q = sample("cpy_f32_q8_0");

	MUTATE(c, "element counts differ", m->src[0] = ggml_new_tensor_4d(ctx, F32, 64, 8, 3, 1));
	MUTATE(c, "result not over the destination", m->view_src = NULL);
	MUTATE(c, "I32 to F16", m->src[0] = ggml_new_tensor_4d(ctx, I32, 64, 8, 4, 1));
	MUTATE(cast, "cast to IQ2_XXS", { m->type = GGML_TYPE_IQ2_XXS; });
	MUTATE(q, "quantize rows that are not whole blocks", m->src[0] = ggml_new_tensor_2d(ctx, F32, 16, 128));
	MUTATE(q, "Q8_0 to Q4_0", { m->src[0] = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 256, 8); });
	MUTATE(sample("cont"), "cont element count", m->ne[0] = 4);
	MUTATE(sample("dup"), "dup type", { m->type = F16; m->nb[0] = 2; });
	ggml_free(ctx);
}

static void test_rows(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *g = sample("get_rows_q4_0"), *s = sample("set_rows_i64");

	MUTATE(g, "indices F32", m->src[1] = ggml_new_tensor_1d(ctx, F32, 8));
	MUTATE(g, "indices 4-d", m->src[1] = ggml_new_tensor_4d(ctx, I32, 8, 1, 1, 2));
	MUTATE(g, "result Q4_0", m->type = GGML_TYPE_Q4_0);
	MUTATE(g, "src0 I8", m->src[0] = ggml_new_tensor_2d(ctx, GGML_TYPE_I8, 64, 100));
	MUTATE(s, "indices F32", m->src[1] = ggml_new_tensor_1d(ctx, F32, 8));
	MUTATE(s, "more rows than indices", m->src[1] = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 7));
	MUTATE(s, "rows of another width", m->src[0] = ggml_new_tensor_2d(ctx, F32, 32, 8));
	MUTATE(s, "rows BF16", m->src[0] = ggml_new_tensor_2d(ctx, GGML_TYPE_BF16, 64, 8));
	MUTATE(s, "result not a view of the destination", m->view_src = NULL);
	WITH_COPY(s, {
		struct ggml_tensor ix = *s->src[1];
		ix.ne[1] = 0;
		m->src[1] = &ix;
		expect_bad(m, "zero ne[1]");
	});
	MUTATE(sample("argsort"), "sort order 2", m->op_params[0] = 2);
	MUTATE(sample("argsort"), "argsort F16", m->src[0] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1));
	MUTATE(sample("argsort"), "argsort of a permuted tensor", m->src[0] = ggml_permute(ctx, ggml_new_tensor_4d(ctx, F32, 64, 4, 8, 1), 0, 2, 1, 3));
	MUTATE(sample("top_k"), "k > row", { m->ne[0] = 65; });
	MUTATE(sample("top_k"), "top_k result F32", m->type = F32);
	ggml_free(ctx);
}

static void test_rope(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *r = sample("rope_neox"), *mr = sample("rope_multi"), *ff = sample("rope_norm_partial_ff");

	MUTATE(r, "mode 1", m->op_params[2] = 1);
	MUTATE(r, "mode 4", m->op_params[2] = 4);
	MUTATE(r, "n_dims 0 (ggml-cpu would loop forever)", m->op_params[1] = 0);
	MUTATE(r, "n_dims -2", m->op_params[1] = -2);
	MUTATE(r, "n_dims odd", m->op_params[1] = 31);
	MUTATE(r, "n_dims > ne0", m->op_params[1] = 66);
	MUTATE(r, "offset odd", { m->op_params[1] = 32; m->op_params[15] = 3; });
	MUTATE(r, "offset past the row", { m->op_params[1] = 32; m->op_params[15] = 34; });
	MUTATE(r, "positions I64", m->src[1] = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 8));
	MUTATE(r, "positions count", m->src[1] = ggml_new_tensor_1d(ctx, I32, 7));
	MUTATE(r, "positions 2-d", m->src[1] = ggml_new_tensor_2d(ctx, I32, 8, 2));
	MUTATE(r, "rope of Q8_0", { m->src[0] = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 64, 4, 8); });
	MUTATE(ff, "freq factors too few", m->src[2] = ggml_new_tensor_1d(ctx, F32, 15));
	MUTATE(ff, "freq factors F16", m->src[2] = ggml_new_tensor_1d(ctx, F16, 16));
	MUTATE(mr, "sections all zero (ggml-cpu would divide by zero)", { m->op_params[11] = m->op_params[12] = m->op_params[13] = 0; });
	MUTATE(mr, "negative section", { m->op_params[14] = -40; });
	MUTATE(mr, "sections past the row", { m->op_params[14] = 60; });
	MUTATE(mr, "M-RoPE with one position per token", m->src[1] = ggml_new_tensor_1d(ctx, I32, 8));
	MUTATE(sample("rope_vision"), "vision n_dims", m->op_params[1] = 16);
	MUTATE(sample("rope_offset"), "vision with offset", { m->op_params[2] = GGML_ROPE_TYPE_VISION; });
	ggml_free(ctx);
}

static void test_attention(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *sm = sample("soft_max_ext_sinks"), *fa = sample("flash_attn_ext");

	MUTATE(sm, "mask narrower than the rows", m->src[1] = ggml_new_tensor_2d(ctx, F16, 16, 8));
	MUTATE(sm, "mask shorter than the rows", m->src[1] = ggml_new_tensor_2d(ctx, F16, 32, 4));
	MUTATE(sm, "mask I32", m->src[1] = ggml_new_tensor_2d(ctx, I32, 32, 8));
	MUTATE(sm, "mask heads not dividing", m->src[1] = ggml_new_tensor_3d(ctx, F16, 32, 8, 3));
	MUTATE(sm, "sinks per head", m->src[2] = ggml_new_tensor_1d(ctx, F32, 3));
	MUTATE(sm, "sinks F16", m->src[2] = ggml_new_tensor_1d(ctx, F16, 4));
	MUTATE(sample("soft_max"), "ALiBi without a mask", { float mb = 8.0f; memcpy(&m->op_params[1], &mb, 4); });
	MUTATE(sample("soft_max"), "soft_max of a transposed tensor", m->src[0] = ggml_transpose(ctx, ggml_new_tensor_3d(ctx, F32, 8, 32, 4)));

	MUTATE(fa, "K head size", m->src[1] = ggml_new_tensor_4d(ctx, F16, 32, 32, 2, 1));
	MUTATE(fa, "K heads not dividing", m->src[1] = ggml_new_tensor_4d(ctx, F16, 64, 32, 3, 1));
	MUTATE(fa, "V rows != K rows", m->src[2] = ggml_new_tensor_4d(ctx, F16, 64, 16, 2, 1));
	WITH_COPY(fa, {
		struct ggml_tensor vv = *fa->src[2];
		vv.ne[2] = 0;
		m->src[2] = &vv;
		expect_bad(m, "V ne[2] = 0");
	});
	MUTATE(fa, "mask F32", m->src[3] = ggml_new_tensor_4d(ctx, F32, 32, 8, 1, 1));
	MUTATE(fa, "mask shorter than KV", m->src[3] = ggml_new_tensor_4d(ctx, F16, 16, 8, 1, 1));
	MUTATE(fa, "mask fewer rows than queries", m->src[3] = ggml_new_tensor_4d(ctx, F16, 32, 4, 1, 1));
	MUTATE(fa, "Q F16", m->src[0] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1));
	MUTATE(fa, "K I32", m->src[1] = ggml_new_tensor_4d(ctx, I32, 64, 32, 2, 1));
	MUTATE(fa, "precision 1", m->op_params[3] = 1);
	MUTATE(fa, "n_kv_max negative", m->op_params[4] = -1);
	MUTATE(fa, "sinks count", m->src[4] = ggml_new_tensor_1d(ctx, F32, 2));
	MUTATE(fa, "result not permuted", { m->ne[1] = 8; m->ne[2] = 4; });
	ggml_free(ctx);
}

static void test_ssm(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *conv = sample("ssm_conv"), *scan = sample("ssm_scan_mamba2");
	struct ggml_tensor *gdn = sample("gated_delta_net"), *kda = sample("gated_delta_net_kda_k2");

	MUTATE(conv, "kernel size 6 (ggml-cuda aborts)", { m->src[1] = ggml_new_tensor_2d(ctx, F32, 6, 128); });
	MUTATE(conv, "channels", m->src[1] = ggml_new_tensor_2d(ctx, F32, 4, 64));
	MUTATE(conv, "input shorter than the kernel", { m->src[0] = ggml_new_tensor_3d(ctx, F32, 2, 128, 2); m->ne[1] = 0; });
	MUTATE(conv, "4-d input", m->src[0] = ggml_new_tensor_4d(ctx, F32, 11, 128, 2, 2));

	MUTATE(scan, "K = 0", m->op_params[0] = 0);
	MUTATE(scan, "ids I64", m->src[6] = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 2));
	MUTATE(scan, "ids count", m->src[6] = ggml_new_tensor_1d(ctx, I32, 3));
	MUTATE(scan, "groups not dividing heads", {
		m->src[4] = ggml_new_tensor_4d(ctx, F32, 128, 3, 8, 2);
		m->src[5] = ggml_new_tensor_4d(ctx, F32, 128, 3, 8, 2);
	});
	MUTATE(scan, "B and C differ", m->src[5] = ggml_new_tensor_4d(ctx, F32, 128, 1, 8, 2));
	MUTATE(scan, "Mamba-1 A with K = 3", { m->src[3] = ggml_new_tensor_2d(ctx, F32, 128, 4); m->op_params[0] = 3; });

	MUTATE(gdn, "K = 0", m->op_params[0] = 0);
	MUTATE(gdn, "gate width", m->src[3] = ggml_new_tensor_4d(ctx, F32, 2, 4, 3, 2));
	MUTATE(gdn, "gate heads", m->src[3] = ggml_new_tensor_4d(ctx, F32, 1, 2, 3, 2));
	MUTATE(gdn, "beta tokens", m->src[4] = ggml_new_tensor_4d(ctx, F32, 1, 4, 2, 2));
	MUTATE(gdn, "q head size", m->src[0] = ggml_new_tensor_4d(ctx, F32, 16, 2, 3, 2));
	MUTATE(gdn, "q tokens", m->src[0] = ggml_new_tensor_4d(ctx, F32, 32, 2, 2, 2));
	MUTATE(gdn, "q heads not dividing", {
		m->src[0] = ggml_new_tensor_4d(ctx, F32, 32, 3, 3, 2);
		m->src[1] = ggml_new_tensor_4d(ctx, F32, 32, 3, 3, 2);
	});
	MUTATE(gdn, "state heads", m->src[5] = ggml_new_tensor_4d(ctx, F32, 32, 32, 2, 2));
	MUTATE(gdn, "q F16", m->src[0] = ggml_new_tensor_4d(ctx, F16, 32, 2, 3, 2));
	MUTATE(gdn, "gate not contiguous", m->src[3] = ggml_permute(ctx, ggml_new_tensor_4d(ctx, F32, 1, 3, 4, 2), 0, 2, 1, 3));
	MUTATE(kda, "result rows for K = 1", m->op_params[0] = 1);
	MUTATE(sample("tri"), "tri type 4", m->op_params[0] = 4);
	MUTATE(sample("solve_tri"), "not square", m->src[0] = ggml_new_tensor_3d(ctx, F32, 8, 4, 2));
	ggml_free(ctx);
}

static void test_misc(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *si = sample("set_inplace"), *st = sample("set");

	MUTATE(si, "block past the end", m->op_params[3] = 7 * 256);
	MUTATE(si, "last element starting at nbytes", m->op_params[3] = 6 * 256 + 4);
	MUTATE(si, "negative stride", m->op_params[0] = -256);
	MUTATE(si, "negative offset", m->op_params[3] = -4);
	MUTATE(si, "in-place flag on a new tensor", m->view_src = NULL);
	MUTATE(st, "flag says in-place", m->op_params[4] = 1);
	MUTATE(st, "F16", { m->src[1] = ggml_new_tensor_3d(ctx, F16, 64, 2, 4); });
	MUTATE(st, "src1 bigger", m->src[1] = ggml_new_tensor_3d(ctx, F32, 64, 9, 4));

	struct ggml_tensor *ar = sample("arange");
	MUTATE(ar, "step 0", { float z = 0.0f; memcpy(&m->op_params[2], &z, 4); });
	MUTATE(ar, "step NaN", { float z = NAN; memcpy(&m->op_params[2], &z, 4); });
	MUTATE(ar, "stop < start", { float z = -1.0f; memcpy(&m->op_params[1], &z, 4); });
	MUTATE(ar, "length", m->ne[0] = 11);
	MUTATE(ar, "with a source", m->src[0] = sample("add"));

	struct ggml_tensor *pl = sample("pool_2d_max");
	MUTATE(pl, "pool kind 2", m->op_params[0] = GGML_OP_POOL_COUNT);
	MUTATE(pl, "stride 0", m->op_params[3] = 0);
	MUTATE(pl, "kernel 0 (average divides by it)", m->op_params[1] = 0);
	MUTATE(pl, "kernel wider than the input", { m->op_params[1] = 65; m->ne[0] = 1; });
	MUTATE(pl, "output width", m->ne[0] = 5);
	MUTATE(pl, "input F16", m->src[0] = ggml_new_tensor_3d(ctx, F16, 64, 8, 4));
	MUTATE(pl, "input permuted", m->src[0] = ggml_permute(ctx, ggml_new_tensor_3d(ctx, F32, 64, 4, 8), 0, 2, 1, 3));

	struct ggml_tensor *li = sample("lightning_indexer");
	MUTATE(li, "mask F32", m->src[3] = ggml_new_tensor_4d(ctx, F32, 32, 8, 1, 1));
	MUTATE(li, "mask shorter than KV", m->src[3] = ggml_new_tensor_4d(ctx, F16, 16, 8, 1, 1));
	MUTATE(li, "k with heads", m->src[1] = ggml_new_tensor_4d(ctx, F16, 128, 2, 32, 1));
	MUTATE(li, "weights per head", m->src[2] = ggml_new_tensor_4d(ctx, F32, 32, 8, 1, 1));
	MUTATE(li, "k I32", m->src[1] = ggml_new_tensor_4d(ctx, I32, 128, 1, 32, 1));

	struct ggml_tensor *cb = sample("dsv4_hc_comb"), *pr = sample("dsv4_hc_pre"), *po = sample("dsv4_hc_post");
	MUTATE(cb, "hc 3", m->src[0] = ggml_new_tensor_2d(ctx, F32, 15, 8));
	MUTATE(cb, "n_iter 0", m->op_params[1] = 0);
	MUTATE(cb, "n_iter huge", m->op_params[1] = INT32_MAX);
	MUTATE(cb, "scale too short", m->src[1] = ggml_new_tensor_1d(ctx, F32, 2));
	MUTATE(pr, "weights per token", m->src[1] = ggml_new_tensor_2d(ctx, F32, 4, 7));
	MUTATE(pr, "x 4-d", m->src[0] = ggml_new_tensor_4d(ctx, F32, 64, 4, 8, 2));
	MUTATE(po, "comb shape", m->src[3] = ggml_new_tensor_3d(ctx, F32, 4, 3, 8));
	MUTATE(po, "post F16", m->src[2] = ggml_new_tensor_2d(ctx, F16, 4, 8));
#if PPRPC_LLAMA_RELEASE_NUM >= 500
	struct ggml_tensor *pg = sample("dsv4_hc_pre_gated");
	MUTATE(pr, "ungated scale 0 (a v0.4.0 graph)", { float z = 0.0f; memcpy(&m->op_params[0], &z, 4); });
	MUTATE(pr, "gated flag on ungated weights", m->op_params[1] = 1);
	MUTATE(pg, "gated flag 2", m->op_params[1] = 2);
	MUTATE(pg, "scale NaN", { float z = NAN; memcpy(&m->op_params[0], &z, 4); });
	MUTATE(pg, "gate of another shape", m->src[1] = ggml_new_tensor_3d(ctx, F32, 64, 4, 7));
	MUTATE(pg, "ungated with a gate", m->op_params[1] = 0);
	MUTATE(sample("dsv4_hc_post_nocomb"), "residual shape", m->src[1] = ggml_new_tensor_3d(ctx, F32, 64, 4, 7));
#else
	MUTATE(po, "no comb (v0.5.0 only)", m->src[3] = NULL);
#endif
	ggml_free(ctx);
}

static void test_reduce(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);

	MUTATE(sample("concat"), "dim 4", m->op_params[0] = 4);
	MUTATE(sample("concat"), "dim -1", m->op_params[0] = -1);
	MUTATE(sample("concat"), "types differ", m->src[1] = ggml_new_tensor_4d(ctx, F16, 64, 3, 4, 1));
	MUTATE(sample("concat"), "other dim differs", m->src[1] = ggml_new_tensor_4d(ctx, F32, 64, 3, 2, 1));
	MUTATE(sample("pad"), "negative pad", { m->op_params[1] = -2; m->ne[0] = 62; });
	MUTATE(sample("pad"), "circular 2", m->op_params[8] = 2);
	MUTATE(sample("repeat"), "not a multiple", m->ne[0] = 96);
	MUTATE(sample("sum_rows"), "sum_rows F16", { m->src[0] = ggml_new_tensor_4d(ctx, F16, 64, 8, 4, 1); m->type = F16; });
	MUTATE(sample("argmax"), "argmax 3-d", m->src[0] = ggml_new_tensor_3d(ctx, F32, 64, 8, 2));
	/* rows not float-aligned: ggml-cuda's strided reduction reads them as floats */
	WITH_COPY(sample("sum_rows"), {
		struct ggml_tensor a = *m->src[0];
		a.nb[1] = 64 * 4 + 2;
		m->src[0] = &a;
		expect_bad(m, "sum_rows rows at 2-byte offsets");
	});
	ggml_free(ctx);
}

/* ---- accepted nodes compute on ggml-cpu ---- */

static void fill(struct ggml_tensor *t, float scale, float offs)
{
	float *d = (float *)t->data;
	for (int64_t i = 0; i < ggml_nelements(t); i++)
		d[i] = offs + scale * (float)((i * 37) % 101 - 50) / 50.0f;
}

static void test_cpu_compute(void **state)
{
	struct ggml_init_params p = { .mem_size = 64u << 20, .mem_buffer = NULL, .no_alloc = false };
	struct ggml_context *ctx = ggml_init(p);
	assert_non_null(ctx);
	ggml_backend_t cpu = cpu_backend();
	assert_non_null(cpu);

	const int D = 64, H = 4, T = 8, NKV = 16, V = 100;
	struct ggml_tensor *emb = ggml_new_tensor_2d(ctx, F32, D * H, V);
	struct ggml_tensor *tok = ggml_new_tensor_1d(ctx, I32, T);
	struct ggml_tensor *pos = ggml_new_tensor_1d(ctx, I32, T);
	struct ggml_tensor *norm_w = ggml_new_tensor_1d(ctx, F32, D * H);
	struct ggml_tensor *wq = ggml_new_tensor_2d(ctx, F16, D * H, D * H);
	struct ggml_tensor *wup = ggml_new_tensor_2d(ctx, F32, D * H, 2 * D);
	struct ggml_tensor *kcache = ggml_new_tensor_2d(ctx, F16, D * H, NKV);
	struct ggml_tensor *kidx = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, T);
	struct ggml_tensor *mask = ggml_new_tensor_2d(ctx, F16, NKV, T);
	fill(emb, 1.0f, 0.0f);
	fill(norm_w, 0.5f, 1.0f);
	fill(wup, 0.1f, 0.0f);
	for (int i = 0; i < T; i++) {
		((int32_t *)tok->data)[i] = (i * 13) % V;
		((int32_t *)pos->data)[i] = i;
		((int64_t *)kidx->data)[i] = i + 2;
	}
	{
		float tmp[D * H];
		for (int i = 0; i < D * H; i++)
			tmp[i] = 0.0f;
		for (int r = 0; r < D * H; r++) {
			for (int i = 0; i < D * H; i++)
				tmp[i] = (float)(((r + i) * 7) % 13 - 6) / 64.0f;
			ggml_fp32_to_fp16_row(tmp, (ggml_fp16_t *)((char *)wq->data + r * wq->nb[1]), D * H);
		}
		memset(kcache->data, 0, ggml_nbytes(kcache));
		for (int j = 0; j < T; j++)
			for (int i = 0; i < NKV; i++)
				((ggml_fp16_t *)mask->data)[j * NKV + i] = ggml_fp32_to_fp16(i <= j + 2 ? 0.0f : -INFINITY);
	}

	struct ggml_tensor *x = ggml_get_rows(ctx, emb, tok);
	struct ggml_tensor *xn = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-6f), norm_w);
	struct ggml_tensor *q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, wq, xn), D, H, T);
	struct ggml_tensor *qr = ggml_rope_ext(ctx, q, pos, NULL, D, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
	struct ggml_tensor *kst = ggml_set_rows(ctx, kcache, ggml_reshape_2d(ctx, qr, D * H, T), kidx);
	struct ggml_tensor *k = ggml_view_3d(ctx, kst, D, H, NKV, D * ggml_element_size(kst), kst->nb[1], 0);
	k = ggml_permute(ctx, k, 0, 2, 1, 3);
	struct ggml_tensor *fa = ggml_flash_attn_ext(ctx, ggml_permute(ctx, qr, 0, 2, 1, 3), k, k, mask, 0.125f, 0.0f, 0.0f);
	struct ggml_tensor *up = ggml_mul_mat(ctx, wup, ggml_cont_2d(ctx, fa, D * H, T));
	struct ggml_tensor *act = ggml_swiglu(ctx, up);
	struct ggml_tensor *sm = ggml_soft_max_ext(ctx, act, NULL, 1.0f, 0.0f);
	struct ggml_tensor *top = ggml_top_k(ctx, sm, 4);
	struct ggml_tensor *sc = ggml_scale(ctx, ggml_sum_rows(ctx, sm), 2.0f);
	struct ggml_tensor *cast = ggml_cast(ctx, sc, F16);

	struct ggml_cgraph *gf = ggml_new_graph(ctx);
	ggml_build_forward_expand(gf, top);
	ggml_build_forward_expand(gf, cast);

	for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
		struct ggml_tensor *n = ggml_graph_node(gf, i);
		expect_ok(n, n->name[0] ? n->name : ggml_op_name(n->op));
	}
	assert_int_equal(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);

	/* softmax rows sum to one; scale doubles them; the cast keeps the value */
	for (int t = 0; t < T; t++) {
		assert_float_equal(((float *)sc->data)[t], 2.0f, 1e-4);
		assert_float_equal(ggml_fp16_to_fp32(((ggml_fp16_t *)cast->data)[t]), 2.0f, 1e-3);
	}
	/* get_rows copied the embedding rows */
	for (int t = 0; t < T; t++)
		assert_memory_equal((char *)x->data + t * x->nb[1], (char *)emb->data + ((t * 13) % V) * emb->nb[1], x->nb[1]);
	/* the K cache rows 2..9 hold the roped q rows in F16 */
	for (int t = 0; t < T; t++)
		for (int i = 0; i < D * H; i += 37)
			assert_float_equal(ggml_fp16_to_fp32(((ggml_fp16_t *)((char *)kcache->data + (t + 2) * kcache->nb[1]))[i]),
					   ((float *)qr->data)[t * D * H + i], 2e-2);
	/* top_k picked indices whose values are the row's largest */
	for (int t = 0; t < T; t++) {
		const float *row = (const float *)((char *)sm->data + t * sm->nb[1]);
		const int32_t *ix = (const int32_t *)((char *)top->data + t * top->nb[1]);
		float kth = INFINITY;
		for (int j = 0; j < 4; j++) {
			assert_true(ix[j] >= 0 && ix[j] < D);
			if (row[ix[j]] < kth)
				kth = row[ix[j]];
		}
		int larger = 0;
		for (int j = 0; j < D; j++)
			larger += row[j] > kth;
		assert_true(larger <= 3);
	}

	ggml_backend_free(cpu);
	ggml_free(ctx);
}

/* llama.cpp's backend sampling graphs (llama-sampler.cpp: top-p over sorted
 * logits, penalties through set_rows) reach the device too */
static void test_sampler_graph(void **state)
{
	struct ggml_init_params p = { .mem_size = 16u << 20, .mem_buffer = NULL, .no_alloc = false };
	struct ggml_context *ctx = ggml_init(p);
	assert_non_null(ctx);
	ggml_backend_t cpu = cpu_backend();
	assert_non_null(cpu);

	const int nv = 50;
	struct ggml_tensor *in = ggml_new_tensor_2d(ctx, F32, nv, 1);
	fill(in, 3.0f, 0.0f);

	struct ggml_tensor *logits = ggml_reshape_1d(ctx, in, nv);
	struct ggml_tensor *sorted_idx = ggml_argsort(ctx, logits, GGML_SORT_ORDER_DESC);
	struct ggml_tensor *sorted = ggml_reshape_1d(ctx, ggml_get_rows(ctx, ggml_reshape_2d(ctx, logits, 1, nv), sorted_idx), nv);
	struct ggml_tensor *cand = ggml_get_rows(ctx, ggml_reshape_2d(ctx, sorted_idx, 1, nv), sorted_idx);
	struct ggml_tensor *cdf = ggml_cumsum(ctx, ggml_soft_max(ctx, sorted));
	struct ggml_tensor *mask = ggml_step(ctx, ggml_scale_bias(ctx, cdf, -1.0f, 0.9f));
	struct ggml_tensor *idxf = ggml_clamp(ctx, ggml_sum(ctx, mask), 0.0f, nv - 1);
	struct ggml_tensor *ones = ggml_scale_bias(ctx, idxf, 0.0f, 1.0f);
	struct ggml_tensor *mr = ggml_set_rows(ctx, ggml_reshape_2d(ctx, mask, 1, nv), ones, ggml_cast(ctx, idxf, I32));
	struct ggml_tensor *out = ggml_add(ctx, sorted, ggml_log(ctx, ggml_reshape_1d(ctx, mr, nv)));
	struct ggml_tensor *amax = ggml_argmax(ctx, ggml_reshape_2d(ctx, out, nv, 1));

	struct ggml_cgraph *gf = ggml_new_graph(ctx);
	ggml_build_forward_expand(gf, amax);
	ggml_build_forward_expand(gf, cand);
	for (int i = 0; i < ggml_graph_n_nodes(gf); i++)
		expect_ok(ggml_graph_node(gf, i), ggml_op_name(ggml_graph_node(gf, i)->op));
	assert_int_equal(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);

	/* the CDF ends at 1, the best logit survives the mask */
	assert_float_equal(((float *)cdf->data)[nv - 1], 1.0f, 1e-4);
	assert_int_equal(((int32_t *)amax->data)[0], 0);
	for (int i = 1; i < nv; i++)
		assert_true(((float *)sorted->data)[i - 1] >= ((float *)sorted->data)[i]);
	ggml_backend_free(cpu);
	ggml_free(ctx);
}

/* ---- what the rules accept does not abort ggml-cpu ----
 *
 * For every sample, built with real (zeroed) data: random op_params and
 * smaller shapes of the sources and of the result (ne reduced with the
 * strides kept, so every extent stays inside its allocation, as the
 * structural validator guarantees).  Each variant the rules accept is
 * computed on ggml-cpu in a child process, which must exit normally within
 * a few seconds (an abort, a fault or a hang fails the test). */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static int32_t fuzz_param(void)
{
	static const int32_t ints[] = { 0, 1, -1, 2, 3, 4, 7, 8, 16, 24, 31, 40, 64, 65, 1 << 30, INT32_MIN, INT32_MAX };
	static const float floats[] = { 0.0f, 1.0f, -1.0f, 0.5f, 1e30f, -1e30f, NAN, INFINITY, -INFINITY };
	if (rnd() % 2) {
		int32_t v;
		memcpy(&v, &floats[rnd() % (sizeof(floats) / sizeof(floats[0]))], sizeof(v));
		return v;
	}
	return ints[rnd() % (sizeof(ints) / sizeof(ints[0]))];
}

static int64_t shrink(int64_t ne, int64_t blck)
{
	switch (rnd() % 3) {
	case 0: return 0;
	case 1: return ne > blck ? ne - blck : ne;
	default: return blck;
	}
}

/* Where the variants run: ggml-cpu in a forked child by default;
 * RULES_FUZZ_BACKEND=CUDA0 (any ggml backend name) runs them in this process,
 * with ggml's abort callback jumping back here (a device cannot be forked). */
static sigjmp_buf fuzz_jmp;
static char fuzz_abort_msg[256];

static void fuzz_on_abort(const char *msg)
{
	snprintf(fuzz_abort_msg, sizeof(fuzz_abort_msg), "%s", msg);
	siglongjmp(fuzz_jmp, 1);
}

/* 0: computed, 1: refused (by the rules or, past them, by supports_op),
 * -1: the computation aborted, faulted or hung */
static int try_compute(ggml_backend_t be, bool use_fork, struct ggml_context *ctx, struct ggml_tensor *m,
		       char *why, size_t len)
{
	char err[256];
	if (ggml_rules_check(m, err, sizeof(err)) != 0)
		return 1;
	if (!ggml_backend_supports_op(be, m))
		return 1;
	struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, 8, false);
	/* ggml-cpu skips a node without the flag (ggml-cpu.c:3145): without
	 * it no kernel ran here (ggml_build_forward_expand sets it) */
	m->flags |= GGML_TENSOR_FLAG_COMPUTE;
	ggml_graph_add_node(gf, m);
	if (!use_fork) {
		ggml_abort_callback_t old = ggml_set_abort_callback(fuzz_on_abort);
		if (sigsetjmp(fuzz_jmp, 1)) {
			ggml_set_abort_callback(old);
			snprintf(why, len, "abort: %s", fuzz_abort_msg);
			return -1;
		}
		enum ggml_status st = ggml_backend_graph_compute(be, gf);
		ggml_set_abort_callback(old);
		if (st != GGML_STATUS_SUCCESS) {
			snprintf(why, len, "status %d", (int)st);
			return -1;
		}
		return 0;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(10);
		_exit(ggml_backend_graph_compute(be, gf) == GGML_STATUS_SUCCESS ? 0 : 3);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	snprintf(why, len, "%s %d", WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return -1;
}

static void describe(const struct ggml_tensor *m)
{
	fprintf(stderr, "  node %s %s ne=[%lld,%lld,%lld,%lld] nb=[%zu,%zu,%zu,%zu] params:", ggml_op_name(m->op),
		ggml_type_name(m->type), (long long)m->ne[0], (long long)m->ne[1], (long long)m->ne[2], (long long)m->ne[3],
		m->nb[0], m->nb[1], m->nb[2], m->nb[3]);
	for (int i = 0; i < 16; i++)
		fprintf(stderr, " %d", m->op_params[i]);
	fprintf(stderr, "\n");
	for (int i = 0; i < GGML_MAX_SRC; i++)
		if (m->src[i])
			fprintf(stderr, "  src[%d] %s ne=[%lld,%lld,%lld,%lld] nb=[%zu,%zu,%zu,%zu]\n", i,
				ggml_type_name(m->src[i]->type), (long long)m->src[i]->ne[0], (long long)m->src[i]->ne[1],
				(long long)m->src[i]->ne[2], (long long)m->src[i]->ne[3], m->src[i]->nb[0], m->src[i]->nb[1],
				m->src[i]->nb[2], m->src[i]->nb[3]);
}

/* one of m's sources (not m itself), at random; -1 if none */
static int pick_src(const struct ggml_tensor *m)
{
	int ks[GGML_MAX_SRC], n = 0;
	for (int k = 0; k < GGML_MAX_SRC; k++)
		if (m->src[k] && m->src[k] != m)
			ks[n++] = k;
	return n ? ks[rnd() % n] : -1;
}

static void test_fuzz_compute(void **state)
{
	const char *be_name = getenv("RULES_FUZZ_BACKEND");
	const bool use_fork = !be_name || strcmp(be_name, "CPU") == 0;
	ggml_backend_t cpu;
	if (use_fork) {
		cpu = cpu_backend();
	} else {
		char err[256];
		if (gge_backends_load(err, sizeof(err)) < 0)
			fail_msg("%s", err);
		cpu = ggml_backend_init_by_name(be_name, NULL);
		if (!cpu)
			fail_msg("no ggml backend %s", be_name);
	}
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	/* zeroed data: every index is 0, hence in range */
	ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
	assert_non_null(buf);
	ggml_backend_buffer_clear(buf, 0);

	const int rounds = getenv("RULES_FUZZ_ROUNDS") ? atoi(getenv("RULES_FUZZ_ROUNDS")) : 24;
	if (getenv("RULES_FUZZ_SEED"))
		rng_state = strtoull(getenv("RULES_FUZZ_SEED"), NULL, 0) | 1;
	int computed = 0, refused = 0, died = 0;
	for (int i = 0; i < n_samples; i++) {
		struct ggml_tensor *n = samples[i].node;
		char why[300];

		/* the sample itself computes */
		if (try_compute(cpu, use_fork, ctx, n, why, sizeof(why)) < 0) {
			fprintf(stderr, "%s: valid sample died (%s)\n", samples[i].name, why);
			describe(n);
			died++;
		}
		for (int r = 0; r < rounds; r++) {
			struct ggml_tensor m = *n, srcs[GGML_MAX_SRC];
			for (int k = 0; k < GGML_MAX_SRC; k++)
				if (m.src[k] == n)
					m.src[k] = &m;
			const uint32_t what = rnd() % 7;
			if (what == 3) {
				/* issue 27's F4 class: a size-1 dimension's stride is outside
				 * ggml_nbytes, so any value passes the structural check */
				int k = pick_src(&m);
				if (k < 0)
					continue;
				srcs[k] = *m.src[k];
				const int d = 1 + rnd() % 3;
				if (srcs[k].ne[d] != 1 && m.ne[d] == srcs[k].ne[d]) {
					/* an element-wise op: the result follows the source's shape */
					m.ne[d] = 1;
					if (!m.view_src) {
						m.nb[1] = ggml_row_size(m.type, m.ne[0]);
						for (int e = 2; e < GGML_MAX_DIMS; e++)
							m.nb[e] = m.nb[e - 1] * (size_t)m.ne[e - 1];
					}
				}
				const bool dense = ggml_is_contiguous(&srcs[k]);
				srcs[k].ne[d] = 1;
				if (dense) {
					/* the dims above stay dense (and inside the allocation) */
					size_t next = d == 1 ? ggml_row_size(srcs[k].type, srcs[k].ne[0])
							     : srcs[k].nb[d - 1] * (size_t)srcs[k].ne[d - 1];
					for (int e = d + 1; e < GGML_MAX_DIMS; e++) {
						srcs[k].nb[e] = next;
						next *= (size_t)srcs[k].ne[e];
					}
				}
				const size_t vals[] = { 0, ggml_type_size(srcs[k].type), (size_t)1 << 40 };
				srcs[k].nb[d] = vals[rnd() % 3];
				m.src[k] = &srcs[k];
			} else if (what == 4) {
				/* F3 / F5: parameters measured against the sources' sizes
				 * (pad amounts, n_dims, offsets around a dimension) */
				const struct ggml_tensor *a = m.src[0] ? m.src[0] : &m;
				const int64_t v = a->ne[rnd() % 4] + (int64_t)(rnd() % 3) - 1;
				m.op_params[rnd() % 9] = (int32_t)v;
			} else if (what == 5) {
				/* F1 / F6: another type for a dense source, of the same
				 * block size and no larger rows (its extent stays inside) */
				int k = pick_src(&m);
				if (k < 0 || !ggml_is_contiguous(m.src[k]))
					continue;
				srcs[k] = *m.src[k];
				const enum ggml_type t = (enum ggml_type)(rnd() % GGML_TYPE_COUNT);
				const int64_t blck = ggml_blck_size(t);
				if (blck == 0 || srcs[k].ne[0] % blck != 0 ||
				    ggml_row_size(t, srcs[k].ne[0]) > ggml_row_size(srcs[k].type, srcs[k].ne[0]))
					continue;
				srcs[k].type = t;
				srcs[k].nb[0] = ggml_type_size(t);
				srcs[k].nb[1] = ggml_row_size(t, srcs[k].ne[0]);
				for (int d = 2; d < GGML_MAX_DIMS; d++)
					srcs[k].nb[d] = srcs[k].nb[d - 1] * (size_t)srcs[k].ne[d - 1];
				m.src[k] = &srcs[k];
			} else if (what == 6) {
				/* the stride of a size-1 dimension (contiguity skips it,
				 * flat-row kernels step by it): huge or zero */
				int cand[GGML_MAX_SRC * 3][2], nc = 0;
				for (int k = 0; k < GGML_MAX_SRC; k++)
					for (int d = 1; m.src[k] && m.src[k] != &m && d < GGML_MAX_DIMS; d++)
						if (m.src[k]->ne[d] == 1) {
							cand[nc][0] = k;
							cand[nc++][1] = d;
						}
				if (nc == 0)
					continue;
				const int pick = rnd() % nc, k = cand[pick][0];
				srcs[k] = *m.src[k];
				srcs[k].nb[cand[pick][1]] = rnd() % 2 ? (size_t)1 << 30 : 0;
				m.src[k] = &srcs[k];
			} else if (what == 0) {
				for (int k = 1 + rnd() % 2; k > 0; k--)
					m.op_params[rnd() % 16] = fuzz_param();
			} else if (what == 1) {
				int k = rnd() % GGML_MAX_SRC;
				if (!m.src[k] || m.src[k] == &m)
					continue;
				srcs[k] = *m.src[k];
				const int d = rnd() % 4;
				srcs[k].ne[d] = shrink(srcs[k].ne[d], d == 0 ? ggml_blck_size(srcs[k].type) : 1);
				m.src[k] = &srcs[k];
			} else {
				const int d = rnd() % 4;
				m.ne[d] = shrink(m.ne[d], d == 0 ? ggml_blck_size(m.type) : 1);
			}
			const int res = try_compute(cpu, use_fork, ctx, &m, why, sizeof(why));
			if (res < 0) {
				fprintf(stderr, "%s: accepted variant died (%s)\n", samples[i].name, why);
				describe(&m);
				died++;
			}
			computed += res == 0;
			refused += res == 1;
		}
	}
	fprintf(stderr, "fuzz on %s: %d samples, %d variants computed, %d refused, %d died\n",
		ggml_backend_name(cpu), n_samples, computed, refused, died);
	assert_int_equal(died, 0);
	ggml_backend_buffer_free(buf);
	ggml_backend_free(cpu);
	ggml_free(ctx);
}

/* ---- issue 27's classes: each node below passed the rules of 7c3ca9f ---- */

/* F1: a quantizing copy whose source rows are longer than the destination's:
 * ggml-cpu sizes the scratch row from the destination and fills it from the
 * source (dup_to_q) */
static void test_issue27_quantizing_copy_rows(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	/* the campaign's node: F32 [2^20] into Q8_0 [32, 32768] */
	expect_bad(ggml_cpy(ctx, ggml_new_tensor_1d(ctx, F32, 1 << 20), ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 32, 32768)),
		   "F32 [2^20] to Q8_0 [32, 32768]");
	/* the class: every float source type, several quantized destinations, CPY, DUP-like cast and CONT */
	const enum ggml_type srct[] = { F32, F16, GGML_TYPE_BF16 };
	const enum ggml_type dstt[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_IQ4_NL };
	for (size_t i = 0; i < sizeof(srct) / sizeof(srct[0]); i++)
		for (size_t j = 0; j < sizeof(dstt) / sizeof(dstt[0]); j++) {
			const int64_t qk = ggml_blck_size(dstt[j]);
			/* source rows of 2 blocks into destination rows of 1: refused */
			expect_bad(ggml_cpy(ctx, ggml_new_tensor_2d(ctx, srct[i], 2 * qk, 4),
					    ggml_new_tensor_2d(ctx, dstt[j], qk, 8)), "rows longer than the destination's");
			/* source rows of 1 block into destination rows of 2: the scratch holds them */
			expect_ok(ggml_cpy(ctx, ggml_new_tensor_2d(ctx, srct[i], qk, 8),
					   ggml_new_tensor_2d(ctx, dstt[j], 2 * qk, 4)), "rows shorter than the destination's");
		}
	ggml_free(ctx);
}

/* F6: copies from a type without to_float (Q8_K, Q8_1 and anything ggml.c's
 * type_traits leaves without one) are refused; a sweep of every type pair
 * accepts a dequantizing copy only where to_float exists */
static void test_issue27_copy_needs_to_float(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	expect_bad(ggml_cpy(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_K, 256, 4), ggml_new_tensor_2d(ctx, F32, 256, 4)),
		   "Q8_K to F32");
	expect_bad(ggml_cpy(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_1, 32, 4), ggml_new_tensor_2d(ctx, F32, 32, 4)),
		   "Q8_1 to F32");
	expect_bad(ggml_cast(ctx, ggml_new_tensor_2d(ctx, F32, 256, 4), GGML_TYPE_Q8_K), "F32 to Q8_K");
	expect_ok(ggml_cpy(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 4), ggml_new_tensor_2d(ctx, F32, 256, 4)),
		  "Q4_K to F32");
	int pairs = 0;
	for (int st = 0; st < GGML_TYPE_COUNT; st++) {
		if (ggml_blck_size((enum ggml_type)st) == 0)
			continue; /* removed types */
		const int64_t qs = ggml_blck_size((enum ggml_type)st);
		for (int dt = 0; dt < GGML_TYPE_COUNT; dt++) {
			if (ggml_blck_size((enum ggml_type)dt) == 0)
				continue;
			const int64_t qd = ggml_blck_size((enum ggml_type)dt);
			const int64_t ne0 = qs > qd ? qs : qd;
			struct ggml_tensor *n = ggml_cpy(ctx, ggml_new_tensor_2d(ctx, (enum ggml_type)st, ne0, 2),
							 ggml_new_tensor_2d(ctx, (enum ggml_type)dt, ne0, 2));
			char err[256];
			if (ggml_rules_check(n, err, sizeof(err)) != 0 || st == dt)
				continue;
			pairs++;
			if (ggml_is_quantized((enum ggml_type)st) && !ggml_get_type_traits((enum ggml_type)st)->to_float)
				fail_msg("copy %s -> %s accepted without to_float", ggml_type_name((enum ggml_type)st),
					 ggml_type_name((enum ggml_type)dt));
			if (ggml_is_quantized((enum ggml_type)dt) && !ggml_get_type_traits((enum ggml_type)dt)->to_float)
				fail_msg("copy %s -> %s accepted into a type nothing reads back", ggml_type_name((enum ggml_type)st),
					 ggml_type_name((enum ggml_type)dt));
		}
	}
	assert_true(pairs > 20);
	ggml_free(ctx);
}

/* F3: circular PAD with a left pad larger than the source (the wrapped index
 * goes negative), in every dimension; lp == ne still wraps to 0 */
static void test_issue27_circular_pad(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *x = ggml_new_tensor_4d(ctx, F32, 6, 5, 3, 2);
	for (int d = 0; d < GGML_MAX_DIMS; d++) {
		int lp[4] = { 0, 0, 0, 0 };
		for (int extra = 0; extra <= 2; extra++) {
			lp[d] = (int)x->ne[d] + extra;
			struct ggml_tensor *p = ggml_pad_ext(ctx, x, lp[0], 1, lp[1], 0, lp[2], 1, lp[3], 0);
			p->op_params[8] = 1; /* ggml_pad_ext_circular, whose constructor asserts nothing of lp */
			if (extra == 0)
				expect_ok(p, "circular lp == ne");
			else
				expect_bad(p, "circular lp > ne");
			/* zero padding takes any amount */
			p->op_params[8] = 0;
			expect_ok(p, "zero pad lp > ne");
		}
	}
	ggml_free(ctx);
}

/* F4: POOL_2D over a source whose size-1 dimension has stride 4 or 0 (ggml-cpu
 * walks planes by nb[2] until nbytes); the class: a size-1 dim's stride that
 * a row walk steps by (SCALE over [64,1,4] with nb[1] = 1 GiB) */
static void test_issue27_size1_strides(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *pl = ggml_pool_2d(ctx, ggml_new_tensor_3d(ctx, F32, 64, 8, 1), GGML_OP_POOL_MAX, 16, 1, 16, 1, 0, 0);
	const size_t plane = 64 * 8 * 4;
	const size_t bad2[] = { 4, 0, plane - 4 };
	for (size_t i = 0; i < sizeof(bad2) / sizeof(bad2[0]); i++)
		WITH_COPY(pl, {
			struct ggml_tensor a = *pl->src[0];
			a.nb[2] = a.nb[3] = bad2[i];
			m->src[0] = &a;
			expect_bad(m, "pool_2d plane stride");
		});
	WITH_COPY(pl, {
		struct ggml_tensor a = *pl->src[0];
		a.nb[2] = a.nb[3] = plane * 3; /* one plane, a padded view: the walk ends after it */
		m->src[0] = &a;
		expect_ok(m, "pool_2d single plane in a larger view");
	});
	/* nb[1] of a size-1 dim under larger ones, for every op that asks for a contiguous source */
	struct ggml_tensor *x = ggml_new_tensor_3d(ctx, F32, 64, 1, 4);
	struct ggml_tensor *nodes[] = { ggml_scale(ctx, x, 2.0f), ggml_clamp(ctx, x, -1.0f, 1.0f), ggml_sqr(ctx, x),
					ggml_fill(ctx, x, 1.0f), ggml_leaky_relu(ctx, x, 0.1f, false), ggml_sum(ctx, x) };
	const size_t bad1[] = { 1u << 30, 0, 4 };
	for (size_t k = 0; k < sizeof(nodes) / sizeof(nodes[0]); k++) {
		expect_ok(nodes[k], "dense source");
		for (size_t i = 0; i < sizeof(bad1) / sizeof(bad1[0]); i++)
			WITH_COPY(nodes[k], {
				struct ggml_tensor a = *x;
				a.nb[1] = bad1[i];
				assert_true(ggml_is_contiguous(&a)); /* ggml's own check lets it through */
				m->src[0] = &a;
				expect_bad(m, "size-1 row stride");
			});
		/* a size-1 dim above every larger one keeps any stride */
		WITH_COPY(nodes[k], {
			struct ggml_tensor a = *x;
			a.nb[3] = 12345 * 4;
			m->src[0] = &a;
			expect_ok(m, "trailing size-1 stride");
		});
	}
	ggml_free(ctx);
}

/* F5: ROPE freq factors shorter than ggml-cpu reads (ne[0]/2 in every mode) */
static void test_issue27_rope_freq_factors(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *q = ggml_new_tensor_3d(ctx, F32, 64, 4, 8);
	struct ggml_tensor *pos = ggml_new_tensor_1d(ctx, I32, 8), *pos4 = ggml_new_tensor_1d(ctx, I32, 32);
	int sections[4] = { 8, 12, 12, 0 };
	const int modes[] = { GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX, GGML_ROPE_TYPE_MROPE, GGML_ROPE_TYPE_VISION,
			      GGML_ROPE_TYPE_IMROPE };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		const int mode = modes[i], n_dims = 32; /* vision: ne[0]/2 */
		for (int64_t nff = n_dims / 2; nff <= 33; nff++) {
			struct ggml_tensor *ff = ggml_new_tensor_1d(ctx, F32, nff);
			struct ggml_tensor *r = (mode & GGML_ROPE_TYPE_MROPE)
				? ggml_rope_multi(ctx, q, pos4, ff, n_dims, sections, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f)
				: ggml_rope_ext(ctx, q, pos, ff, n_dims, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
			if (nff < 32)
				expect_bad(r, "freq factors shorter than ne[0]/2");
			else
				expect_ok(r, "freq factors for the whole row");
		}
	}
	ggml_free(ctx);
}


/* found by the sweep once it ran kernels: SET at an offset or with strides
 * that are not whole elements stores misaligned floats (UBSan in ggml-cpu) */
static void test_issue27_set_alignment(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	build_samples(ctx);
	struct ggml_tensor *si = sample("set_inplace");
	MUTATE(si, "offset of 7 bytes", m->op_params[3] = 7);
	MUTATE(si, "nb1 of 255 bytes", m->op_params[0] = 255);
	MUTATE(si, "nb2 of 2 bytes", m->op_params[1] = 2);
	expect_ok(si, "whole-element offset");
	ggml_free(ctx);
}

/* ---- issue 27, point 1 (helper B's rules): preconditions the old rules missed ---- */

/* ARGSORT / TOP_K / ARGMAX walk rows flat at i * nb[1] (ops.cpp:8507, 8577):
 * the stride of a size-1 dimension, which ggml_is_contiguous skips, is
 * stepped for every row; a huge one reads far past the source */
static void test_sort_size1_strides(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	const char *ops[] = { "argsort", "top_k" };
	for (int i = 0; i < 2; i++) {
		struct ggml_tensor *a = ggml_new_tensor_4d(ctx, F32, 64, 1, 4, 1);
		struct ggml_tensor *n = i == 0 ? ggml_argsort(ctx, a, GGML_SORT_ORDER_ASC) : ggml_top_k(ctx, a, 4);
		expect_ok(n, ops[i]);
		assert_true(ggml_is_contiguous(a));
		WITH_COPY(n, {
			struct ggml_tensor src = *a;
			src.nb[1] = (size_t)1 << 30;	/* ne[1] == 1: still "contiguous" to ggml */
			assert_true(ggml_is_contiguous(&src));
			m->src[0] = &src;
			expect_bad(m, "size-1 dimension with a 1 GiB stride");
			src.nb[1] = 0;
			expect_bad(m, "size-1 dimension with a zero stride");
		});
		/* empty rows: nothing to sort (an empty node, which ggml-cuda skips:
		 * a precaution, not a hole) */
		struct ggml_tensor *e = ggml_new_tensor_2d(ctx, F32, 0, 4);
		struct ggml_tensor *ne = i == 0 ? ggml_argsort(ctx, e, GGML_SORT_ORDER_ASC) : ggml_top_k(ctx, e, 0);
		expect_bad(ne, "rows of 0 elements");
	}
	ggml_free(ctx);
}

/* GROUP_NORM: (n_channels + n_groups - 1) / n_groups in int (ops.cpp:4230)
 * overflows for n_groups near INT_MAX, and a task runs per group */
static void test_group_norm_groups(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *x = ggml_new_tensor_4d(ctx, F32, 64, 8, 4, 1);
	struct ggml_tensor *n = ggml_group_norm(ctx, x, 4, 1e-6f);
	expect_ok(n, "group_norm, 4 groups over 4 channels");
	MUTATE(n, "n_groups INT32_MAX", m->op_params[0] = INT32_MAX);
	MUTATE(n, "more groups than channels", m->op_params[0] = 5);
	MUTATE(n, "n_groups -1", m->op_params[0] = -1);
	ggml_free(ctx);
}

/* the norms' ggml-cuda grid is (ne1, ne2, ne3) (norm.cu:283): y and z <= 65535 */
static void test_norm_grid(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *ok = ggml_new_tensor_4d(ctx, F32, 4, 1, 65535, 1);
	expect_ok(ggml_rms_norm(ctx, ok, 1e-6f), "rms_norm, 65535 channels");
	struct ggml_tensor *big = ggml_new_tensor_4d(ctx, F32, 4, 1, 65536, 1);
	expect_bad(ggml_rms_norm(ctx, big, 1e-6f), "rms_norm, 65536 channels");
	expect_bad(ggml_norm(ctx, ggml_new_tensor_4d(ctx, F32, 4, 1, 1, 70000), 1e-6f), "norm, 70000 samples");
	expect_bad(ggml_l2_norm(ctx, big, 1e-6f), "l2_norm, 65536 channels");
	/* SOFT_MAX's grid is (ne1, ne2, ne3) as well (softmax.cu:340) */
	expect_ok(ggml_soft_max(ctx, ok), "soft_max, 65535 heads");
	expect_bad(ggml_soft_max(ctx, big), "soft_max, 65536 heads");
	/* TRI's too (tri.cu:53) */
	expect_ok(ggml_tri(ctx, ggml_new_tensor_4d(ctx, F32, 2, 2, 65535, 1), GGML_TRI_TYPE_LOWER), "tri, 65535 matrices");
	expect_bad(ggml_tri(ctx, ggml_new_tensor_4d(ctx, F32, 2, 2, 65536, 1), GGML_TRI_TYPE_LOWER), "tri, 65536 matrices");
	ggml_free(ctx);
}

/* SSM_SCAN writes the result state at i3 * s->nb[3] (ops.cpp:9821), a
 * stride contiguity skips when s has one slot; ggml-cuda picks its kernel
 * by A->nb[1] (ssm-scan.cu:827) */
static void test_ssm_scan_size1_strides(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *s = ggml_new_tensor_4d(ctx, F32, 128, 16, 4, 1);
	struct ggml_tensor *sx = ggml_new_tensor_4d(ctx, F32, 16, 4, 8, 2);
	struct ggml_tensor *dt = ggml_new_tensor_3d(ctx, F32, 4, 8, 2);
	struct ggml_tensor *A = ggml_new_tensor_2d(ctx, F32, 1, 4);
	struct ggml_tensor *B = ggml_new_tensor_4d(ctx, F32, 128, 2, 8, 2);
	struct ggml_tensor *ids = ggml_new_tensor_1d(ctx, I32, 2);
	struct ggml_tensor *n = ggml_ssm_scan(ctx, s, sx, dt, A, B, B, ids, 1);
	expect_ok(n, "ssm_scan over one state slot");
	WITH_COPY(n, {
		struct ggml_tensor ss = *s;
		ss.nb[3] = (size_t)1 << 30;
		assert_true(ggml_is_contiguous(&ss));
		m->src[0] = &ss;
		expect_bad(m, "one state slot with a 1 GiB stride");
	});
	struct ggml_tensor *A1 = ggml_new_tensor_2d(ctx, F32, 1, 1);
	struct ggml_tensor *sx1 = ggml_new_tensor_4d(ctx, F32, 16, 1, 8, 2);
	struct ggml_tensor *n1 = ggml_ssm_scan(ctx, ggml_new_tensor_4d(ctx, F32, 128, 16, 1, 2), sx1,
					       ggml_new_tensor_3d(ctx, F32, 1, 8, 2), A1,
					       ggml_new_tensor_4d(ctx, F32, 128, 1, 8, 2),
					       ggml_new_tensor_4d(ctx, F32, 128, 1, 8, 2), ids, 2);
	expect_ok(n1, "ssm_scan, one head, K 2");
	WITH_COPY(n1, {
		struct ggml_tensor a = *A1;
		a.nb[1] = 8;	/* Mamba-1's path in ggml-cuda, which asserts K == 1 */
		assert_true(ggml_is_contiguous(&a));
		m->src[3] = &a;
		expect_bad(m, "A [1,1] with nb[1] 8");
	});
	ggml_free(ctx);
}

/* ADD_ID on ggml-cuda: a grid of (ne1, ne2) (add-id.cu:51): rows past
 * ne[3] == 1 are never written and would return the buffer's old bytes;
 * empty rows (an empty node, skipped by ggml-cuda) are refused as a
 * precaution */
static void test_add_id_grid(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *ids = ggml_new_tensor_2d(ctx, I32, 4, 8);
	expect_bad(ggml_add_id(ctx, ggml_new_tensor_4d(ctx, F32, 64, 4, 8, 2), ggml_new_tensor_2d(ctx, F32, 64, 6), ids),
		   "add_id over a 4-d src0");
	expect_bad(ggml_add_id(ctx, ggml_new_tensor_3d(ctx, F32, 0, 4, 8), ggml_new_tensor_2d(ctx, F32, 0, 6), ids),
		   "add_id of empty rows");
	/* GET_ROWS: ggml-cuda asserts ne12 > 0 (getrows.cu:183; the node is
	 * then empty and skipped: a precaution) */
	expect_bad(ggml_get_rows(ctx, ggml_new_tensor_4d(ctx, F32, 16, 10, 4, 0), ggml_new_tensor_3d(ctx, I32, 5, 4, 0)),
		   "get_rows with indices ne[2] 0");
	ggml_free(ctx);
}

/* MUL_MAT on ggml-cuda hands nb01 / nb11 in elements to cuBLAS as lda / ldb
 * (ggml-cuda.cu:1426, 1432), which it refuses below the row length: a
 * single-row src0 or src1 is "contiguous" to ggml with any nb[1] */
static void test_mul_mat_row_strides(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *w = ggml_new_tensor_2d(ctx, F16, 64, 1);
	struct ggml_tensor *x = ggml_new_tensor_2d(ctx, F32, 64, 16);
	struct ggml_tensor *n = ggml_mul_mat(ctx, w, x);
	expect_ok(n, "mul_mat of one weight row");
	WITH_COPY(n, {
		struct ggml_tensor ws = *w;
		ws.nb[1] = 0;
		assert_true(ggml_is_contiguous(&ws));
		m->src[0] = &ws;
		expect_bad(m, "src0 nb[1] 0");
		ws.nb[1] = 2;
		expect_bad(m, "src0 nb[1] below the row");
	});
	struct ggml_tensor *n1 = ggml_mul_mat(ctx, ggml_new_tensor_2d(ctx, F16, 64, 8), ggml_new_tensor_2d(ctx, F32, 64, 1));
	expect_ok(n1, "mul_mat of one token");
	WITH_COPY(n1, {
		struct ggml_tensor xs = *n1->src[1];
		xs.nb[1] = 4;
		m->src[1] = &xs;
		expect_bad(m, "src1 nb[1] below the row");
	});
	ggml_free(ctx);
}

/* MUL_MAT_ID with an F16 src1 over F16 experts: ggml-cpu converts, but
 * ggml-cuda asserts src1 F32 (ggml-cuda.cu:1915) while its supports_op lets
 * F16 x F16 through, so a ggml:CUDA rank aborted */
static void test_mul_mat_id_src1_f32(void **state)
{
	struct ggml_context *ctx = meta_ctx();
	struct ggml_tensor *as = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 64, 32, 4);
	struct ggml_tensor *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 8);
	struct ggml_tensor *ok = ggml_mul_mat_id(ctx, as, ggml_new_tensor_3d(ctx, F32, 64, 2, 8), ids);
	struct ggml_tensor *bad = ggml_mul_mat_id(ctx, as, ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 64, 2, 8), ids);
	expect_ok(ok, "mul_mat_id, F16 experts, F32 src1");
	expect_bad(bad, "mul_mat_id, F16 src1");
	ggml_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_rule_has_a_passing_sample),
		cmocka_unit_test(test_generic_mutations),
		cmocka_unit_test(test_unsupported_ops),
		cmocka_unit_test(test_empty_sources),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_matmul),
		cmocka_unit_test(test_unary_family),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_copies),
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_ssm),
		cmocka_unit_test(test_reduce),
		cmocka_unit_test(test_misc),
		cmocka_unit_test(test_cpu_compute),
		cmocka_unit_test(test_sampler_graph),
		cmocka_unit_test(test_fuzz_compute),
		cmocka_unit_test(test_issue27_quantizing_copy_rows),
		cmocka_unit_test(test_issue27_copy_needs_to_float),
		cmocka_unit_test(test_issue27_circular_pad),
		cmocka_unit_test(test_issue27_size1_strides),
		cmocka_unit_test(test_issue27_rope_freq_factors),
		cmocka_unit_test(test_issue27_set_alignment),
		cmocka_unit_test(test_sort_size1_strides),
		cmocka_unit_test(test_group_norm_groups),
		cmocka_unit_test(test_norm_grid),
		cmocka_unit_test(test_ssm_scan_size1_strides),
		cmocka_unit_test(test_add_id_grid),
		cmocka_unit_test(test_mul_mat_row_strides),
		cmocka_unit_test(test_mul_mat_id_src1_f32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

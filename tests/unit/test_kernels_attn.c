/*
 * tests/unit/test_kernels_attn.c — ATTENTION: the CPU kernel against a
 * float64 reference (naive softmax(q k^T * scale + causal mask) v), over
 * head dims 64/128/256 and odd ones, GQA ratios 1/2/4 and beyond the
 * kernel's head group, prefill and decode, n_past 0 and > 0, f32 and f16
 * caches, permuted q, cache views into larger buffers (row-major,
 * head-major, transposed V), large scores, and the threaded paths; its
 * shape/dtype/parameter rules; the client builder wrapper.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "tests/unit/ref.h"

/* Each output o = sum_t p_t v_t / sum_t p_t (p_t = exp(s_t - max s)) is
 * compared relative to mag = sum_t p_t |v_t| / sum_t p_t, which bounds |o|
 * and does not vanish when o cancels to ~0.  In f32 each score s_t carries
 * an error of a few 2^-24 relative to its own size (a D-term dot product),
 * which exp() turns into a *relative* error of p_t proportional to |s_t|;
 * the exps, the n_kv-term sums and the rescalings add a few 2^-24 each,
 * growing like sqrt(n) for data like ours.  The observed worst case over
 * this file is ~2e-7 per unit of (1 + max |s|) (printed at the end); we
 * allow 1e-5, ~50x margin, while a wrong mask, key, head or scale is off
 * by O(1).  f16 caches are compared with a reference that reads the same
 * f16-rounded values, so the same tolerance applies. */
#define ATTN_REL_TOL 1e-5

/* Big enough for the kernel to go multi-threaded (> 1 << 20 elements). */
#define N_SPLIT_THREADS 4

enum q_layout { Q_CONTIG, Q_PERMUTED, Q_GAPPED };
/* Cache layouts of the [D, n_kv_head, max_ctx] buffer the views come from. */
enum kv_layout {
	KV_ROWS,        /* [D, n_kv_head, ctx]: llama.cpp's K (and V with FA) */
	KV_HEAD_MAJOR,  /* memory [D, ctx, n_kv_head]: per-head planes */
	KV_TRANSPOSED,  /* memory [ctx, D, n_kv_head]: llama.cpp's V without FA */
};

struct attn_case {
	int kv_dtype;
	int64_t D, H, Hkv, n_q, n_past;
	int64_t kv_extra;   /* n_kv = n_past + n_q + kv_extra (masked, NaN-filled) */
	int64_t ctx_extra;  /* buffer holds n_kv + ctx_extra positions (NaN) */
	float scale;        /* 0: 1/sqrt(D) */
	enum q_layout ql;
	enum kv_layout kl, vl;
	int nthreads;
};

static double worst_ratio;  /* max |err| / ((1 + max|s|) * mag) seen */

static const int ident[4] = { 0, 1, 2, 3 };
static const int perm12[4] = { 0, 2, 1, 3 };
static const int scramble[4] = { 1, 0, 2, 3 };
static const int kv_orders[3][4] = {
	[KV_ROWS] = { 0, 1, 2, 3 },
	[KV_HEAD_MAJOR] = { 0, 2, 1, 3 },
	[KV_TRANSPOSED] = { 2, 0, 1, 3 },
};

static struct kern_tensor mk(int dtype, const int64_t ne[4], const int order[4], uint64_t gap,
			     uint64_t pad, uint64_t seed)
{
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, dtype, ne, order, gap, pad), 0);
	if (seed)
		ref_fill(&t, seed);
	return t;
}

/* A cache view: a [D, Hkv, n_kv + ctx_extra] buffer in the given layout,
 * random for positions < n_used and NaN from there on (keys the kernel must
 * not read), viewed as its first n_kv positions. */
static struct kern_tensor mk_cache(int dtype, int64_t D, int64_t Hkv, int64_t n_kv,
				   int64_t n_used, int64_t ctx_extra, enum kv_layout l,
				   uint64_t seed)
{
	const int64_t ne[4] = { D, Hkv, n_kv + ctx_extra, 1 };
	struct kern_tensor t = mk(dtype, ne, kv_orders[l], 1, 0, seed);

	for (int64_t p = n_used; p < ne[2]; p++)
		for (int64_t h = 0; h < Hkv; h++)
			for (int64_t i = 0; i < D; i++)
				ref_set(&t, i, h, p, 0, NAN);
	t.ne[2] = n_kv;
	return t;
}

static struct kern_tensor mk_q(const struct attn_case *c, uint64_t seed)
{
	const int64_t ne[4] = { c->D, c->H, c->n_q, 1 };

	switch (c->ql) {
	case Q_PERMUTED:  /* stored [D, n_q, H], as after a permute */
		return mk(PPRPC_F32, ne, perm12, 1, 0, seed);
	case Q_GAPPED:    /* heads innermost, element gaps, padded runs */
		return mk(PPRPC_F32, ne, scramble, 2, 1, seed);
	default:
		return mk(PPRPC_F32, ne, ident, 1, 0, seed);
	}
}

static struct pprpc_op_params attn_params(float scale, int n_past)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	p.i[0] = n_past;
	return p;
}

static int run_attn(int nthreads, const struct pprpc_op_params *p, struct kern_tensor *q,
		    struct kern_tensor *k, struct kern_tensor *v, struct kern_tensor *dst)
{
	struct kern_cpu_ctx ctx = { .nthreads = nthreads };
	struct kern_tensor *src[3] = { q, k, v };

	return kern_cpu_run(&ctx, PPRPC_OP_ATTENTION, p, src, 3, dst);
}

/* Reference and check, one (query, head) row at a time. */
static void check_rows(const struct kern_tensor *q, const struct kern_tensor *k,
		       const struct kern_tensor *v, const struct kern_tensor *d, double scale,
		       int64_t n_past, const char *what)
{
	int64_t D = q->ne[0], H = q->ne[1], n_q = q->ne[2], rep = H / k->ne[1];
	double *s = malloc((size_t)(n_past + n_q) * sizeof(double));

	assert_non_null(s);
	for (int64_t j = 0; j < n_q; j++) {
		for (int64_t h = 0; h < H; h++) {
			int64_t g = h / rep, nkeys = n_past + j + 1;
			double m = -INFINITY, smax = 0, l = 0;

			for (int64_t t = 0; t < nkeys; t++) {
				double dp = 0;

				for (int64_t i = 0; i < D; i++)
					dp += ref_get(q, i, h, j, 0) * ref_get(k, i, g, t, 0);
				s[t] = dp * scale;
				m = fmax(m, s[t]);
				smax = fmax(smax, fabs(s[t]));
			}
			for (int64_t t = 0; t < nkeys; t++) {
				s[t] = exp(s[t] - m);
				l += s[t];
			}
			for (int64_t i = 0; i < D; i++) {
				double o = 0, mag = 0, got, err;

				for (int64_t t = 0; t < nkeys; t++) {
					double vv = ref_get(v, i, g, t, 0);

					o += s[t] * vv;
					mag += s[t] * fabs(vv);
				}
				o /= l;
				mag /= l;
				got = ref_get(d, i, h, j, 0);
				err = fabs(got - o);
				if (!(err <= ATTN_REL_TOL * (1 + smax) * mag))
					fail_msg("%s: out[%lld,%lld,%lld]: got %.9g want %.9g (mag %.3g, max|s| %.3g)",
						 what, (long long)i, (long long)h, (long long)j,
						 got, o, mag, smax);
				if (mag > 0 && err / ((1 + smax) * mag) > worst_ratio)
					worst_ratio = err / ((1 + smax) * mag);
			}
		}
	}
	free(s);
}

static void run_case(const struct attn_case *c, const char *label)
{
	int64_t n_kv = c->n_past + c->n_q + c->kv_extra;
	const int64_t dne[4] = { c->D, c->H, c->n_q, 1 };
	struct kern_tensor q = mk_q(c, 1000 + c->D + c->H);
	struct kern_tensor k = mk_cache(c->kv_dtype, c->D, c->Hkv, n_kv, c->n_past + c->n_q,
					c->ctx_extra, c->kl, 2000 + c->n_q);
	struct kern_tensor v = mk_cache(c->kv_dtype, c->D, c->Hkv, n_kv, c->n_past + c->n_q,
					c->ctx_extra, c->vl, 3000 + c->n_past);
	struct kern_tensor d = mk(PPRPC_F32, dne, ident, 1, 0, 0);
	float scale = c->scale != 0.0f ? c->scale : (float)(1.0 / sqrt((double)c->D));
	struct pprpc_op_params p = attn_params(scale, (int)c->n_past);
	char name[200];
	int64_t n = kern_tensor_nelements(&d);

	/* NaN-fill dst: an element the kernel forgets to write shows. */
	for (int64_t l = 0; l < n; l++)
		((float *)d.data)[l] = NAN;
	snprintf(name, sizeof(name),
		 "ATTENTION %s %s D=%lld H=%lld Hkv=%lld n_q=%lld n_past=%lld n_kv=%lld scale=%g threads=%d",
		 label, kern_dtype(c->kv_dtype)->name, (long long)c->D, (long long)c->H,
		 (long long)c->Hkv, (long long)c->n_q, (long long)c->n_past, (long long)n_kv,
		 scale, c->nthreads);
	assert_int_equal(run_attn(c->nthreads ? c->nthreads : 1, &p, &q, &k, &v, &d), 0);
	check_rows(&q, &k, &v, &d, scale, c->n_past, name);
	free(q.data);
	free(k.data);
	free(v.data);
	free(d.data);
}

static const int kv_types[2] = { PPRPC_F32, PPRPC_F16 };

/* Head dims x GQA ratios x cache types, for prefill from 0, decode after a
 * long prefix (two tiles of keys), and a prefill chunk after a prefix that
 * crosses a tile boundary. */
static void test_attn_grid(void **state)
{
	const int64_t dims[3] = { 64, 128, 256 }, reps[3] = { 1, 2, 4 };
	const int64_t shapes[3][2] = { { 19, 0 }, { 1, 70 }, { 24, 45 } };  /* n_q, n_past */
	const char *labels[3] = { "prefill", "decode", "chunk after prefix" };

	(void)state;
	for (int t = 0; t < 2; t++)
		for (int di = 0; di < 3; di++)
			for (int ri = 0; ri < 3; ri++)
				for (int si = 0; si < 3; si++) {
					struct attn_case c = {
						.kv_dtype = kv_types[t], .D = dims[di],
						.H = 2 * reps[ri], .Hkv = 2,
						.n_q = shapes[si][0], .n_past = shapes[si][1],
					};

					run_case(&c, labels[si]);
				}
}

/* Permuted / gapped q; caches as views of larger buffers, in the three
 * layouts; keys past n_past + n_q inside the view (NaN) must be masked. */
static void test_attn_layouts(void **state)
{
	const struct { enum q_layout ql; enum kv_layout kl, vl; } lay[] = {
		{ Q_PERMUTED, KV_ROWS, KV_ROWS },
		{ Q_GAPPED, KV_HEAD_MAJOR, KV_HEAD_MAJOR },
		{ Q_PERMUTED, KV_ROWS, KV_TRANSPOSED },
		{ Q_CONTIG, KV_TRANSPOSED, KV_HEAD_MAJOR },
	};

	(void)state;
	for (int t = 0; t < 2; t++) {
		for (size_t li = 0; li < sizeof(lay) / sizeof(lay[0]); li++) {
			struct attn_case c = {
				.kv_dtype = kv_types[t], .D = 64, .H = 8, .Hkv = 2, .n_q = 9,
				.n_past = 40, .kv_extra = 11, .ctx_extra = 77,
				.ql = lay[li].ql, .kl = lay[li].kl, .vl = lay[li].vl,
			};

			run_case(&c, "layout");
			c.n_q = 1;
			c.n_past = 100;
			c.kv_extra = 0;
			run_case(&c, "layout decode");
		}
	}
}

static void test_attn_odd_sizes(void **state)
{
	const struct attn_case cases[] = {
		{ .D = 37, .H = 6, .Hkv = 3, .n_q = 5, .n_past = 7, .ql = Q_PERMUTED },
		{ .D = 1, .H = 3, .Hkv = 1, .n_q = 4, .n_past = 0, .kv_extra = 2 },
		{ .D = 7, .H = 5, .Hkv = 5, .n_q = 3, .n_past = 130, .ctx_extra = 5 },
		{ .D = 129, .H = 4, .Hkv = 4, .n_q = 65, .n_past = 0, .kl = KV_HEAD_MAJOR },
		{ .D = 96, .H = 12, .Hkv = 4, .n_q = 1, .n_past = 0 },  /* one key */
		{ .D = 80, .H = 1, .Hkv = 1, .n_q = 2, .n_past = 63 },  /* keys 64, 65 */
		/* One thread, 40 query heads per kv head: 16-row blocks that span
		 * two queries. */
		{ .D = 64, .H = 40, .Hkv = 1, .n_q = 2, .n_past = 5, .ql = Q_GAPPED },
		{ .D = 32, .H = 34, .Hkv = 2, .n_q = 3, .n_past = 1 },
	};

	(void)state;
	for (int t = 0; t < 2; t++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct attn_case c = cases[i];

			c.kv_dtype = kv_types[t];
			run_case(&c, "odd");
		}
}

/* Scores far beyond what exp() survives in f32 (|s| in the hundreds): only
 * the running-max rescaling keeps the result finite; and peaked softmaxes
 * whose maximum moves from tile to tile. */
static void test_attn_large_scores(void **state)
{
	const float scales[3] = { 2.0f, 8.0f, 40.0f };

	(void)state;
	for (int t = 0; t < 2; t++)
		for (int si = 0; si < 3; si++) {
			struct attn_case c = { .kv_dtype = kv_types[t], .D = 64, .H = 4, .Hkv = 2,
					       .n_q = 7, .n_past = 150, .scale = scales[si] };

			run_case(&c, "large scores");
		}
}

/* Threaded: chunks balanced by key count (prefill), GQA groups split
 * across threads and over the kernel's 16-row blocks (MQA decode, 32 query
 * heads on one kv head). */
static void test_attn_threads(void **state)
{
	const int nthreads[3] = { N_SPLIT_THREADS, 3, 7 };

	(void)state;
	for (int t = 0; t < 2; t++)
		for (int ni = 0; ni < 3; ni++) {
			struct attn_case c = { .kv_dtype = kv_types[t], .D = 128, .H = 8,
					       .Hkv = 2, .n_q = 48, .n_past = 200,
					       .ql = Q_PERMUTED, .nthreads = nthreads[ni] };

			run_case(&c, "threaded prefill");
			c = (struct attn_case){ .kv_dtype = kv_types[t], .D = 128, .H = 32,
						.Hkv = 1, .n_q = 1, .n_past = 300,
						.ctx_extra = 20, .nthreads = nthreads[ni] };
			run_case(&c, "threaded MQA decode");
		}
}

/* ---- rules ------------------------------------------------------------------------ */

static struct kern_tensor T(int dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(kern_tensor_init_contig(&t, dtype, ne), 0);
	return t;
}

static int infer(const struct pprpc_op_params *p, struct kern_tensor q, struct kern_tensor k,
		 struct kern_tensor v, struct kern_tensor *out, char *err)
{
	const struct kern_tensor *src[3] = { &q, &k, &v };

	err[0] = 0;
	return kern_op_infer(PPRPC_OP_ATTENTION, p, src, 3, out, err, 160);
}

static void test_attn_rules(void **state)
{
	struct kern_tensor q = T(PPRPC_F32, 128, 8, 5, 1), k = T(PPRPC_F16, 128, 2, 20, 1);
	struct kern_tensor v = T(PPRPC_F16, 128, 2, 20, 1), out;
	struct pprpc_op_params p = attn_params(0.125f, 15), b;
	const struct kern_tensor *src[3] = { &q, &k, &v };
	char err[160];

	(void)state;
	assert_int_equal(kern_op_nsrc(PPRPC_OP_ATTENTION), 3);
	assert_string_equal(kern_op_name(PPRPC_OP_ATTENTION), "ATTENTION");

	assert_int_equal(infer(&p, q, k, v, &out, err), 0);
	assert_int_equal(out.dtype, PPRPC_F32);
	assert_memory_equal(out.ne, q.ne, sizeof(out.ne));
	assert_true(kern_tensor_is_contiguous(&out));
	assert_int_equal(infer(&p, q, T(PPRPC_F32, 128, 2, 20, 1), T(PPRPC_F32, 128, 2, 20, 1),
			       &out, err), 0);
	/* n_kv > n_past + n_q is allowed (the rest is masked); fewer is not. */
	b = attn_params(0.125f, 0);
	assert_int_equal(infer(&b, q, k, v, &out, err), 0);
	b.i[0] = 16;
	assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_ESHAPE);
	assert_non_null(strstr(err, "n_past"));
	b.i[0] = 0x7fffffff;
	assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_ESHAPE);
	b.i[0] = -1;
	assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_EINVAL);
	assert_int_equal(infer(&p, T(PPRPC_F32, 128, 8, 21, 1), k, v, &out, err), PPRPC_ESHAPE);
	/* scale: zero (forgotten), negative, inf, NaN. */
	{
		const float bad[4] = { 0.0f, -0.125f, INFINITY, NAN };

		for (int i = 0; i < 4; i++) {
			b = attn_params(bad[i], 15);
			assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_EINVAL);
		}
	}
	assert_int_equal(infer(NULL, q, k, v, &out, err), PPRPC_EINVAL);
	b = p;
	b.f[1] = 1.0f;
	assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_EINVAL);
	b = p;
	b.i[1] = 1;
	assert_int_equal(infer(&b, q, k, v, &out, err), PPRPC_EINVAL);

	/* dtypes. */
	assert_int_equal(infer(&p, T(PPRPC_F16, 128, 8, 5, 1), k, v, &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, q, T(PPRPC_BF16, 128, 2, 20, 1), T(PPRPC_BF16, 128, 2, 20, 1),
			       &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, q, T(PPRPC_I32, 128, 2, 20, 1), T(PPRPC_I32, 128, 2, 20, 1),
			       &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, q, k, T(PPRPC_F32, 128, 2, 20, 1), &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, q, T(PPRPC_F32, 128, 2, 20, 1), v, &out, err), PPRPC_ETYPE);

	/* GQA: n_head must be a multiple of n_kv_head. */
	assert_int_equal(infer(&p, T(PPRPC_F32, 128, 6, 5, 1), T(PPRPC_F16, 128, 4, 20, 1),
			       T(PPRPC_F16, 128, 4, 20, 1), &out, err), PPRPC_ESHAPE);
	assert_non_null(strstr(err, "multiple"));
	assert_int_equal(infer(&p, T(PPRPC_F32, 128, 2, 5, 1), T(PPRPC_F16, 128, 4, 20, 1),
			       T(PPRPC_F16, 128, 4, 20, 1), &out, err), PPRPC_ESHAPE);
	/* head_dim, k/v shape agreement, batch dim. */
	assert_int_equal(infer(&p, T(PPRPC_F32, 64, 8, 5, 1), k, v, &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, q, k, T(PPRPC_F16, 64, 2, 20, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, q, k, T(PPRPC_F16, 128, 1, 20, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, q, k, T(PPRPC_F16, 128, 2, 21, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, T(PPRPC_F32, 128, 8, 5, 2), k, v, &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, q, T(PPRPC_F16, 128, 2, 20, 2), T(PPRPC_F16, 128, 2, 20, 2),
			       &out, err), PPRPC_ESHAPE);

	/* Destination. */
	out = T(PPRPC_F32, 128, 8, 5, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ATTENTION, &p, src, 3, &out, err, 160), 0);
	out = T(PPRPC_F32, 1024, 5, 1, 1);  /* the [D * n_head, n_q] view: reshape first */
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ATTENTION, &p, src, 3, &out, err, 160),
			 PPRPC_ESHAPE);
	out = T(PPRPC_F16, 128, 8, 5, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ATTENTION, &p, src, 3, &out, err, 160),
			 PPRPC_ETYPE);
}

/* ---- client builder ------------------------------------------------------------------ */

static void test_attn_builder(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_tensor tq = pprpc_tensor_make((pprpc_buffer){ 1 }, 0, PPRPC_F32, 64, 8, 4, 1);
	pprpc_tensor tc = pprpc_tensor_make((pprpc_buffer){ 2 }, 0, PPRPC_F16, 64, 2, 512, 1), out;
	const int64_t ne[4] = { 64, 2, 36, 1 };
	int q, cache, kv, bad, y;

	(void)state;
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	q = pprpc_gb_tensor(gb, &tq);
	cache = pprpc_gb_tensor(gb, &tc);
	/* The first 36 positions of a 512-position cache. */
	kv = pprpc_gb_view(gb, cache, PPRPC_F16, ne, tc.nb, 0);
	assert_true(q >= 0 && cache >= 0 && kv >= 0);
	y = pprpc_gb_attention(gb, q, kv, kv, 0.125f, 32, -1);
	assert_true(y >= 0);
	assert_int_equal(pprpc_gb_tensor_get(gb, y, &out), 0);
	assert_int_equal(out.dtype, PPRPC_F32);
	assert_int_equal(out.ne[0], 64);
	assert_int_equal(out.ne[1], 8);
	assert_int_equal(out.ne[2], 4);
	assert_int_equal(pprpc_gb_node_count(gb), 1);
	assert_int_equal(pprpc_gb_attention(gb, q, kv, kv, 0.125f, 33, -1), PPRPC_ESHAPE);
	assert_non_null(strstr(pprpc_gb_error(gb), "n_past"));
	bad = pprpc_gb_view(gb, cache, PPRPC_F16, (const int64_t[4]){ 64, 3, 36, 1 },
			    (const uint64_t[4]){ 2, 128, 384, 384 * 36 }, 0);
	assert_true(bad >= 0);
	assert_int_equal(pprpc_gb_attention(gb, q, bad, bad, 0.125f, 32, -1), PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_attention(gb, q, kv, q, 0.125f, 32, -1), PPRPC_ETYPE);
	assert_int_equal(pprpc_gb_node_count(gb), 1);
	pprpc_graph_builder_free(gb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attn_grid),
		cmocka_unit_test(test_attn_layouts),
		cmocka_unit_test(test_attn_odd_sizes),
		cmocka_unit_test(test_attn_large_scores),
		cmocka_unit_test(test_attn_threads),
		cmocka_unit_test(test_attn_rules),
		cmocka_unit_test(test_attn_builder),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	printf("ATTENTION: worst |err| / ((1 + max|s|) * mag) = %.3g (tolerance %.3g)\n",
	       worst_ratio, ATTN_REL_TOL);
	return rc;
}

/*
 * tests/unit/test_kernels_ops_a.c — the transformer ops GET_ROWS, SET_ROWS,
 * CONCAT, RMS_NORM, L2_NORM, SILU, SIGMOID, SOFTPLUS, EXP, GELU, SWIGLU,
 * SOFTMAX, ARGMAX and Q8_0 (quantization, MUL_MAT, GET_ROWS): their shape
 * rules, and the CPU kernels against a float64 reference computed here from
 * the stored (already rounded) inputs, over contiguous and non-contiguous
 * layouts, odd sizes, in-place use, the threaded paths and bad indices.
 * Last, the graph-builder wrappers produce the nodes they promise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "libclient/graph_builder.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "tests/unit/ref.h"

/* ---- tolerances ------------------------------------------------------------
 * All relative to the float64 value of the function at the stored input,
 * with u = 2^-24 the f32 unit roundoff. */

/* SILU, SIGMOID, SOFTPLUS, EXP, SWIGLU: expf/log1pf (glibc: < 1 ulp) plus at
 * most three roundings (1 + e, a division, a product or sum), i.e. ~4u; we
 * allow 8u. */
#define UNARY_REL_TOL 0x1p-21
/* GELU's exp argument z = 2c(x + a x^3) is itself computed in f32 (~3u
 * relative), and sigmoid(z) turns an absolute error dz into a relative one
 * of up to |dz|: the result may be off by another ~3u * |z|.  We allow
 * UNARY_REL_TOL + 8u * |z|. */
#define GELU_Z_TOL 0x1p-21
/* Results in f32's subnormal range carry an absolute error of up to half a
 * subnormal step (2^-150), which no relative bound covers.  SILU, GELU and
 * SWIGLU multiply such a sigmoid (x < -87) by x afterwards, so for them the
 * allowance is this times (1 + |x|) (times |src1| for SWIGLU). */
#define SUBNORMAL_ABS_TOL 0x1p-146
/* RMS_NORM, L2_NORM: the sum of squares is accumulated in double (error
 * ~n * 2^-53, negligible), then the f32 scale and the f32 product are each
 * rounded once: 2u; we allow 4u. */
#define NORM_REL_TOL 0x1p-22
/* SOFTMAX: v = s*x and v - max are rounded in f32, so exp(v - max) carries
 * an absolute argument error of ~u(|v| + |max|) which becomes a relative
 * error of the same size, plus expf, the normalisation and the product
 * (~3u).  We allow 8u * (1 + |v| + |max|). */
#define SOFTMAX_REL_TOL 0x1p-21
/* MUL_MAT with Q8_0 weights against the exact dequantized weights: the
 * kernel's weights are exact (f32(d) * q), so the error is the f32
 * accumulation of K products: for any summation order (8 lanes in the
 * direct kernel, sgemm's blocking otherwise) gamma_K ~= K u times
 * sum |w x|.  We use (K + 1) * 2u, the worst-case bound with a factor 2;
 * for K=1024 that is 1.2e-4 relative to sum |w x|.  Observed: <= 8e-8. */
#define Q8_MM_TOL_PER_K 0x1p-23
/* GET_ROWS, SET_ROWS, CONCAT, ARGMAX move or select values: exact. */

#define N_SPLIT_THREADS 4
/* Just over the kernels' single-thread threshold (1 << 20 elements). */
#define BIG_ROWS 1100
#define BIG_COLS 1000

static const int float_types[3] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16 };
static const int ident[4] = { 0, 1, 2, 3 };
static const int transp[4] = { 1, 0, 2, 3 };
static const int scramble[4] = { 2, 0, 3, 1 };
static const int swap12[4] = { 0, 2, 1, 3 };

static struct kern_tensor mk(int dtype, int64_t a, int64_t b, int64_t c, int64_t d,
			     const int order[4], uint64_t gap, uint64_t pad, uint64_t seed)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(ref_alloc(&t, dtype, ne, order, gap, pad), 0);
	if (seed)
		ref_fill(&t, seed);
	return t;
}

/* A contiguous destination pre-filled with NaN (or 0x7fffffff for i32), so
 * an element the kernel forgets to write is caught. */
static struct kern_tensor mk_dst(int dtype, const int64_t ne[4])
{
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, dtype, ne, NULL, 1, 0), 0);
	ref_poison(&t);
	return t;
}

/* Every element of t multiplied by s (reshape the [-1, 1) test data). */
static void scale_all(const struct kern_tensor *t, double s)
{
	int64_t n = kern_tensor_nelements(t), i[4];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(t->ne, l, i);
		ref_set(t, i[0], i[1], i[2], i[3], ref_get(t, i[0], i[1], i[2], i[3]) * s);
	}
}

static int run_n(int nthreads, int op, const struct pprpc_op_params *p, struct kern_tensor *s0,
		 struct kern_tensor *s1, struct kern_tensor *dst)
{
	struct kern_cpu_ctx ctx = { .nthreads = nthreads };
	struct kern_tensor *src[2] = { s0, s1 };

	return kern_cpu_run(&ctx, op, p, src, s1 ? 2 : 1, dst);
}

/* The destination the op's rule infers for these sources, NaN-filled. */
static struct kern_tensor infer_dst(int op, const struct pprpc_op_params *p,
				    const struct kern_tensor *s0, const struct kern_tensor *s1)
{
	const struct kern_tensor *src[2] = { s0, s1 };
	struct kern_tensor out;
	char err[160];
	int rc = kern_op_infer(op, p, src, s1 ? 2 : 1, &out, err, sizeof(err));

	if (rc != 0)
		fail_msg("%s: infer failed (%d): %s", kern_op_name(op), rc, err);
	return mk_dst(out.dtype, out.ne);
}

static void expect_close(const struct kern_tensor *d, const double *want, const double *tol,
			 const char *what)
{
	int64_t n = kern_tensor_nelements(d), i[4];

	for (int64_t l = 0; l < n; l++) {
		double got;

		ref_unravel(d->ne, l, i);
		got = ref_get(d, i[0], i[1], i[2], i[3]);
		if (!(fabs(got - want[l]) <= tol[l]) &&
		    !(isinf(want[l]) && got == want[l]))
			fail_msg("%s: element %lld [%lld,%lld,%lld,%lld]: got %.9g want %.9g tol %.3g",
				 what, (long long)l, (long long)i[0], (long long)i[1],
				 (long long)i[2], (long long)i[3], got, want[l], tol[l]);
	}
}

static double *dalloc(int64_t n)
{
	double *p = calloc((size_t)n, sizeof(double));

	assert_non_null(p);
	return p;
}

/* ---- elementwise: SILU SIGMOID SOFTPLUS EXP GELU ------------------------------ */

static const double gelu_a = (double)0.044715f;
static const double gelu_c = (double)0.79788456080286535587989211986876f;

static double sigmoid_d(double x)
{
	return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}

/* Reference value, and its tolerance, of op at x. */
static double unary_ref(int op, double x, double *tol)
{
	double v, z = 0;

	switch (op) {
	case PPRPC_OP_SILU:
		v = x * sigmoid_d(x);
		break;
	case PPRPC_OP_SIGMOID:
		v = sigmoid_d(x);
		break;
	case PPRPC_OP_SOFTPLUS:
		v = log1p(exp(-fabs(x))) + fmax(x, 0.0);
		break;
	case PPRPC_OP_EXP:
		v = exp(x);
		break;
	default: /* GELU: 0.5 x (1 + tanh(z / 2)) == x * sigmoid(z) exactly */
		z = 2.0 * gelu_c * (x + gelu_a * x * x * x);
		v = x * sigmoid_d(z);
		break;
	}
	*tol = (UNARY_REL_TOL + GELU_Z_TOL * fabs(z)) * fabs(v) +
	       SUBNORMAL_ABS_TOL * (op == PPRPC_OP_SILU || op == PPRPC_OP_GELU ? 1 + fabs(x) : 1);
	return v;
}

static void check_unary(int op, struct kern_tensor *a, struct kern_tensor *d, int nthreads,
			const char *what)
{
	int64_t n = kern_tensor_nelements(a), i[4];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[128];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(a->ne, l, i);
		want[l] = unary_ref(op, ref_get(a, i[0], i[1], i[2], i[3]), &tol[l]);
	}
	assert_int_equal(run_n(nthreads, op, NULL, a, NULL, d), 0);
	snprintf(name, sizeof(name), "%s %s", kern_op_name(op), what);
	expect_close(d, want, tol, name);
	free(want);
	free(tol);
}

static const int unary_ops[5] = { PPRPC_OP_SILU, PPRPC_OP_SIGMOID, PPRPC_OP_SOFTPLUS,
				  PPRPC_OP_EXP, PPRPC_OP_GELU };

static void test_unary_layouts(void **state)
{
	(void)state;
	for (int o = 0; o < 5; o++) {
		int op = unary_ops[o];
		/* EXP overflows f32 above ~88.7: keep its inputs below. */
		double range = op == PPRPC_OP_EXP ? 80.0 : 30.0;
		struct kern_tensor a, d;

		a = mk(PPRPC_F32, 37, 5, 3, 2, ident, 1, 0, 101);
		scale_all(&a, range);
		d = infer_dst(op, NULL, &a, NULL);
		check_unary(op, &a, &d, 1, "contiguous");
		free(a.data);
		free(d.data);

		/* Scrambled dims, gaps between elements, padded rows. */
		a = mk(PPRPC_F32, 37, 5, 3, 2, scramble, 2, 3, 102);
		scale_all(&a, range);
		d = infer_dst(op, NULL, &a, NULL);
		check_unary(op, &a, &d, 3, "scrambled, 3 threads");
		free(d.data);
		/* In place needs a destination with src0's layout: contiguous. */
		free(a.data);
		a = mk(PPRPC_F32, 33, 2, 1, 1, ident, 1, 0, 103);
		scale_all(&a, range / 4);
		check_unary(op, &a, &a, 1, "in place");
		free(a.data);
	}
}

/* Edge inputs: signed zeros, tiny, huge, where naive formulas overflow
 * (1 + exp(100)) or cancel (1 + tanh(-20)). */
static void test_unary_edges(void **state)
{
	static const float xs[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.5f, -0.5f,
				    1.0f, -1.0f, 5.0f, -5.0f, 15.0f, -15.0f, 20.0f, -20.0f,
				    40.0f, -40.0f, 88.0f, -88.0f, -100.0f, 100.0f, -103.0f,
				    1e4f, -1e4f, 1e20f, -1e20f, FLT_MAX, -FLT_MAX, 3.0e-3f };
	const int n = (int)(sizeof(xs) / sizeof(xs[0]));

	(void)state;
	for (int o = 0; o < 5; o++) {
		int op = unary_ops[o];
		struct kern_tensor a = mk(PPRPC_F32, n, 1, 1, 1, ident, 1, 0, 0), d;
		double *want = dalloc(n), *tol = dalloc(n);

		memcpy(a.data, xs, sizeof(xs));
		d = infer_dst(op, NULL, &a, NULL);
		assert_int_equal(run_n(1, op, NULL, &a, NULL, &d), 0);
		for (int i = 0; i < n; i++) {
			want[i] = unary_ref(op, xs[i], &tol[i]);
			/* Beyond f32's range the answer is inf (exp). */
			if (fabs(want[i]) > FLT_MAX)
				want[i] = copysign(INFINITY, want[i]);
		}
		expect_close(&d, want, tol, kern_op_name(op));
		/* Odd functions keep the zero's sign where the formula does. */
		if (op == PPRPC_OP_SILU || op == PPRPC_OP_GELU)
			assert_true(signbit(((float *)d.data)[1]));
		free(want);
		free(tol);
		free(a.data);
		free(d.data);
	}
}

static void test_unary_nan_inf(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 3, 1, 1, 1, ident, 1, 0, 0), d;
	float *x = a.data, *y;

	(void)state;
	x[0] = NAN;
	x[1] = INFINITY;
	x[2] = -INFINITY;
	for (int o = 0; o < 5; o++) {
		d = infer_dst(unary_ops[o], NULL, &a, NULL);
		y = d.data;
		assert_int_equal(run_n(1, unary_ops[o], NULL, &a, NULL, &d), 0);
		assert_true(isnan(y[0]));
		free(d.data);
	}
	/* Documented limits: sigmoid(+-inf) = 1 / 0, exp(-inf) = 0,
	 * softplus(+inf) = inf. */
	d = infer_dst(PPRPC_OP_SIGMOID, NULL, &a, NULL);
	y = d.data;
	assert_int_equal(run_n(1, PPRPC_OP_SIGMOID, NULL, &a, NULL, &d), 0);
	assert_true(y[1] == 1.0f && y[2] == 0.0f);
	assert_int_equal(run_n(1, PPRPC_OP_EXP, NULL, &a, NULL, &d), 0);
	assert_true(isinf(y[1]) && y[2] == 0.0f);
	assert_int_equal(run_n(1, PPRPC_OP_SOFTPLUS, NULL, &a, NULL, &d), 0);
	assert_true(isinf(y[1]) && y[2] == 0.0f);
	free(d.data);
	free(a.data);
}

static void test_unary_threads(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, transp, 1, 0, 111), d;

	(void)state;
	scale_all(&a, 12.0);
	d = infer_dst(PPRPC_OP_GELU, NULL, &a, NULL);
	check_unary(PPRPC_OP_GELU, &a, &d, N_SPLIT_THREADS, "large transposed, threaded");
	check_unary(PPRPC_OP_SILU, &a, &d, N_SPLIT_THREADS, "large transposed, threaded");
	free(a.data);
	free(d.data);
}

/* ---- SWIGLU ------------------------------------------------------------------- */

static void check_swiglu(struct kern_tensor *a, struct kern_tensor *b, struct kern_tensor *d,
			 int nthreads, const char *what)
{
	int64_t n = kern_tensor_nelements(a), i[4];
	double *want = dalloc(n), *tol = dalloc(n);

	for (int64_t l = 0; l < n; l++) {
		double x, y;

		ref_unravel(a->ne, l, i);
		x = ref_get(a, i[0], i[1], i[2], i[3]);
		y = ref_get(b, i[0], i[1], i[2], i[3]);
		want[l] = x * sigmoid_d(x) * y;
		tol[l] = UNARY_REL_TOL * fabs(want[l]) + SUBNORMAL_ABS_TOL * (1 + fabs(x)) * fabs(y);
	}
	assert_int_equal(run_n(nthreads, PPRPC_OP_SWIGLU, NULL, a, b, d), 0);
	expect_close(d, want, tol, what);
	free(want);
	free(tol);
}

static void test_swiglu(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 29, 6, 3, 1, scramble, 1, 2, 121);
	struct kern_tensor b = mk(PPRPC_F32, 29, 6, 3, 1, transp, 3, 0, 122), d;

	(void)state;
	scale_all(&a, 20.0);
	scale_all(&b, 4.0);
	d = infer_dst(PPRPC_OP_SWIGLU, NULL, &a, &b);
	check_swiglu(&a, &b, &d, 1, "SWIGLU scrambled x transposed");
	check_swiglu(&a, &b, &d, 2, "SWIGLU scrambled x transposed, 2 threads");
	free(a.data);
	free(b.data);
	free(d.data);

	/* In place on either source (same contiguous layout). */
	a = mk(PPRPC_F32, 31, 4, 1, 1, ident, 1, 0, 123);
	b = mk(PPRPC_F32, 31, 4, 1, 1, ident, 1, 0, 124);
	check_swiglu(&a, &b, &a, 1, "SWIGLU in place on src0");
	free(a.data);
	a = mk(PPRPC_F32, 31, 4, 1, 1, ident, 1, 0, 125);
	check_swiglu(&a, &b, &b, 1, "SWIGLU in place on src1");
	free(a.data);
	free(b.data);
}

/* ---- RMS_NORM / L2_NORM ----------------------------------------------------------- */

static void check_norm(int op, struct kern_tensor *a, struct kern_tensor *d, float eps,
		       int nthreads, const char *what)
{
	struct pprpc_op_params p = { .f = { eps } };
	int64_t n = kern_tensor_nelements(a), i[4];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[128];

	for (int64_t l = 0; l < n; l += a->ne[0]) {
		double sum = 0, scale;

		ref_unravel(a->ne, l, i);
		for (int64_t k = 0; k < a->ne[0]; k++) {
			double x = ref_get(a, k, i[1], i[2], i[3]);

			sum += x * x;
		}
		if (op == PPRPC_OP_RMS_NORM)
			scale = 1.0 / sqrt(sum / (double)a->ne[0] + eps);
		else
			scale = 1.0 / fmax(sqrt(sum), eps);
		for (int64_t k = 0; k < a->ne[0]; k++) {
			want[l + k] = ref_get(a, k, i[1], i[2], i[3]) * scale;
			tol[l + k] = NORM_REL_TOL * fabs(want[l + k]);
		}
	}
	assert_int_equal(run_n(nthreads, op, &p, a, NULL, d), 0);
	snprintf(name, sizeof(name), "%s %s eps=%g", kern_op_name(op), what, (double)eps);
	expect_close(d, want, tol, name);
	free(want);
	free(tol);
}

static void test_norms(void **state)
{
	const int ops[2] = { PPRPC_OP_RMS_NORM, PPRPC_OP_L2_NORM };

	(void)state;
	for (int o = 0; o < 2; o++) {
		struct kern_tensor a, d;

		a = mk(PPRPC_F32, 4096, 3, 1, 1, ident, 1, 0, 131);
		d = mk_dst(PPRPC_F32, a.ne);
		check_norm(ops[o], &a, &d, 1e-6f, 1, "hidden 4096");
		check_norm(ops[o], &a, &d, 0.0f, 1, "hidden 4096");
		free(a.data);
		free(d.data);

		a = mk(PPRPC_F32, 37, 5, 3, 2, scramble, 2, 1, 132);
		scale_all(&a, 1e-3);
		d = mk_dst(PPRPC_F32, a.ne);
		check_norm(ops[o], &a, &d, 1e-5f, 2, "scrambled small values");
		/* eps dominating: L2 divides by eps, RMS adds it. */
		check_norm(ops[o], &a, &d, 10.0f, 1, "scrambled, large eps");
		free(a.data);
		free(d.data);

		/* ne[0] = 1, transposed source. */
		a = mk(PPRPC_F32, 1, 7, 1, 1, transp, 1, 0, 133);
		d = mk_dst(PPRPC_F32, a.ne);
		check_norm(ops[o], &a, &d, 1e-6f, 1, "ne0=1");
		free(a.data);
		free(d.data);

		/* A zero row with eps > 0 gives zeros, not NaN. */
		a = mk(PPRPC_F32, 9, 2, 1, 1, ident, 1, 0, 0);
		d = mk_dst(PPRPC_F32, a.ne);
		check_norm(ops[o], &a, &d, 1e-6f, 1, "zero rows");
		for (int k = 0; k < 18; k++)
			assert_true(((float *)d.data)[k] == 0.0f);
		free(d.data);
		/* In place. */
		ref_fill(&a, 134);
		check_norm(ops[o], &a, &a, 1e-6f, 1, "in place");
		free(a.data);

		a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, ident, 1, 0, 135);
		d = mk_dst(PPRPC_F32, a.ne);
		check_norm(ops[o], &a, &d, 1e-6f, N_SPLIT_THREADS, "large threaded");
		free(a.data);
		free(d.data);
	}
}

/* ---- SOFTMAX ----------------------------------------------------------------------- */

static void check_softmax(struct kern_tensor *a, struct kern_tensor *d, float scale, int causal,
			  int past, int nthreads, const char *what)
{
	struct pprpc_op_params p = { .f = { scale }, .i = { causal, past } };
	int64_t n = kern_tensor_nelements(a), i[4], nkv = a->ne[0];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[160];

	for (int64_t l = 0; l < n; l += nkv) {
		int64_t vis = nkv;
		double max = -INFINITY, sum = 0;

		ref_unravel(a->ne, l, i);
		if (causal && i[1] + past + 1 < nkv)
			vis = i[1] + past + 1;
		for (int64_t k = 0; k < vis; k++)
			max = fmax(max, (double)scale * ref_get(a, k, i[1], i[2], i[3]));
		for (int64_t k = 0; k < vis; k++)
			sum += exp((double)scale * ref_get(a, k, i[1], i[2], i[3]) - max);
		for (int64_t k = 0; k < nkv; k++) {
			double v = (double)scale * ref_get(a, k, i[1], i[2], i[3]);

			/* Masked entries must be exactly 0 (tolerance 0). */
			want[l + k] = k < vis ? exp(v - max) / sum : 0.0;
			tol[l + k] = k < vis ? SOFTMAX_REL_TOL * (1 + fabs(v) + fabs(max)) *
							       want[l + k] +
						       SUBNORMAL_ABS_TOL
					     : 0.0;
		}
	}
	assert_int_equal(run_n(nthreads, PPRPC_OP_SOFTMAX, &p, a, NULL, d), 0);
	snprintf(name, sizeof(name), "SOFTMAX %s scale=%g causal=%d past=%d", what, (double)scale,
		 causal, past);
	expect_close(d, want, tol, name);
	free(want);
	free(tol);
}

static void test_softmax(void **state)
{
	struct kern_tensor a, d;

	(void)state;
	/* [n_kv=37, n_q=5, heads 3, 2], values up to +-10. */
	a = mk(PPRPC_F32, 37, 5, 3, 2, ident, 1, 0, 141);
	scale_all(&a, 10.0);
	d = mk_dst(PPRPC_F32, a.ne);
	check_softmax(&a, &d, 1.0f, 0, 0, 1, "plain");
	check_softmax(&a, &d, 0.125f, 0, 0, 1, "scaled");
	check_softmax(&a, &d, -2.0f, 0, 0, 2, "negative scale");
	/* Decode-like: 32 cached positions, 5 new queries: query j sees
	 * 33 + j keys. */
	check_softmax(&a, &d, 0.125f, 1, 32, 1, "causal with past");
	/* A past beyond the row: everything visible. */
	check_softmax(&a, &d, 0.125f, 1, 100, 3, "causal, all visible");
	free(a.data);
	free(d.data);

	/* Square causal (prefill), transposed source with gaps. */
	a = mk(PPRPC_F32, 9, 9, 2, 1, transp, 2, 0, 142);
	scale_all(&a, 30.0);
	d = mk_dst(PPRPC_F32, a.ne);
	check_softmax(&a, &d, 1.0f, 1, 0, 1, "square causal, transposed");
	/* Row 0 sees only key 0: exactly 1. */
	assert_true(((float *)d.data)[0] == 1.0f);
	free(d.data);
	free(a.data);

	/* Large logits would overflow exp without the max shift. */
	a = mk(PPRPC_F32, 16, 3, 1, 1, ident, 1, 0, 143);
	scale_all(&a, 1000.0);
	d = mk_dst(PPRPC_F32, a.ne);
	check_softmax(&a, &d, 1.0f, 0, 0, 1, "large logits");
	free(d.data);
	check_softmax(&a, &a, 0.5f, 1, 2, 1, "in place");
	free(a.data);

	a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, ident, 1, 0, 144);
	scale_all(&a, 5.0);
	d = mk_dst(PPRPC_F32, a.ne);
	check_softmax(&a, &d, 0.7f, 1, 3, N_SPLIT_THREADS, "large threaded");
	free(a.data);
	free(d.data);
}

/* ---- ARGMAX ------------------------------------------------------------------------- */

static void check_argmax(struct kern_tensor *a, int nthreads, const char *what)
{
	struct kern_tensor d = infer_dst(PPRPC_OP_ARGMAX, NULL, a, NULL);
	int64_t rows = a->ne[1] * a->ne[2] * a->ne[3], i[4];
	const int32_t *got = d.data;

	assert_int_equal(d.ne[0], a->ne[1]);
	assert_int_equal(d.ne[1], a->ne[2]);
	assert_int_equal(d.ne[2], a->ne[3]);
	assert_int_equal(d.ne[3], 1);
	assert_int_equal(run_n(nthreads, PPRPC_OP_ARGMAX, NULL, a, NULL, &d), 0);
	for (int64_t r = 0; r < rows; r++) {
		int64_t best = 0;
		double bv = -INFINITY;
		bool any = false;

		ref_unravel(a->ne, r * a->ne[0], i);
		for (int64_t k = 0; k < a->ne[0]; k++) {
			double v = ref_get(a, k, i[1], i[2], i[3]);

			if (!isnan(v) && (!any || v > bv)) {
				any = true;
				best = k;
				bv = v;
			}
		}
		if (got[r] != best)
			fail_msg("ARGMAX %s: row %lld: got %d want %lld", what, (long long)r,
				 (int)got[r], (long long)best);
	}
	free(d.data);
}

static void test_argmax(void **state)
{
	struct kern_tensor a;
	float *x;

	(void)state;
	a = mk(PPRPC_F32, 37, 5, 3, 2, scramble, 2, 1, 151);
	check_argmax(&a, 1, "scrambled");
	check_argmax(&a, 3, "scrambled, 3 threads");
	free(a.data);

	/* Ties, NaNs, infinities, one-element rows. */
	a = mk(PPRPC_F32, 6, 6, 1, 1, ident, 1, 0, 0);
	x = a.data;
	const float rows[6][6] = {
		{ 1, 3, 3, 2, 3, 0 },                            /* tie: 1 */
		{ NAN, 1, NAN, 5, 5, NAN },                      /* NaNs skipped: 3 */
		{ NAN, NAN, NAN, NAN, NAN, NAN },                /* all NaN: 0 */
		{ -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY }, /* 0 */
		{ -1, -2, INFINITY, 7, INFINITY, NAN },          /* 2 */
		{ -0.0f, 0.0f, -5, -1, -0.0f, -3 },              /* -0 == 0: first, 0 */
	};
	memcpy(x, rows, sizeof(rows));
	check_argmax(&a, 1, "specials");
	{
		struct kern_tensor d = infer_dst(PPRPC_OP_ARGMAX, NULL, &a, NULL);
		const int32_t want[6] = { 1, 3, 0, 0, 2, 0 };

		assert_int_equal(run_n(1, PPRPC_OP_ARGMAX, NULL, &a, NULL, &d), 0);
		assert_memory_equal(d.data, want, sizeof(want));
		free(d.data);
	}
	free(a.data);

	a = mk(PPRPC_F32, 1, 4, 1, 1, transp, 1, 0, 152);
	check_argmax(&a, 1, "ne0=1");
	free(a.data);

	a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, transp, 1, 0, 153);
	check_argmax(&a, N_SPLIT_THREADS, "large transposed threaded");
	free(a.data);
}

/* ---- Q8_0 helpers ------------------------------------------------------------------- */

/* The exact value of Q8_0 element (i0, i1, i2, i3): f32(d) * q. */
static double q8_get(const struct kern_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
	const char *blk = (const char *)t->data + (i0 / 32) * t->nb[0] + i1 * t->nb[1] +
			  i2 * t->nb[2] + i3 * t->nb[3];
	uint16_t d;

	memcpy(&d, blk, 2);
	return (double)kern_f16_to_f32(d) * (double)((const int8_t *)(blk + 2))[i0 % 32];
}

static double any_get(const struct kern_tensor *t, int64_t i0, int64_t i1, int64_t i2,
		      int64_t i3)
{
	return t->dtype == PPRPC_Q8_0 ? q8_get(t, i0, i1, i2, i3) : ref_get(t, i0, i1, i2, i3);
}

/* A Q8_0 tensor (layout as mk) holding quantized random values * amp. */
static struct kern_tensor mk_q8(int64_t a, int64_t b, int64_t c, int64_t d, const int order[4],
				uint64_t pad, uint64_t seed, double amp)
{
	struct kern_tensor t = mk(PPRPC_Q8_0, a, b, c, d, order, 1, pad, 0);
	float *row = malloc((size_t)a * sizeof(float));

	assert_non_null(row);
	for (int64_t i3 = 0; i3 < d; i3++)
		for (int64_t i2 = 0; i2 < c; i2++)
			for (int64_t i1 = 0; i1 < b; i1++) {
				for (int64_t k = 0; k < a; k++)
					row[k] = (float)(ref_rand(&seed) * amp);
				assert_int_equal(kern_q8_0_quantize_row(row, ref_ptr(&t, 0, i1, i2, i3),
									a), 0);
			}
	free(row);
	return t;
}

static void test_q8_0_quantize(void **state)
{
	float x[64], y[64];
	struct kern_q8_0_block b[2], keep[2];

	(void)state;
	/* Block 0: x = (j - 16) / 2, amax 8 at j = 0.  Block 1: zeros. */
	for (int j = 0; j < 32; j++) {
		x[j] = (float)(j - 16) * 0.5f;
		x[32 + j] = 0.0f;
	}
	assert_int_equal(kern_q8_0_quantize_row(x, b, 64), 0);
	assert_int_equal(b[0].d, kern_f32_to_f16(8.0f / 127.0f));
	assert_int_equal(b[0].qs[0], -127);      /* -8 */
	assert_int_equal(b[0].qs[16], 0);
	assert_int_equal(b[0].qs[17], 8);        /* 0.5 * 127/8 = 7.94 -> 8 */
	assert_int_equal(b[0].qs[31], 119);      /* 7.5 * 15.875 = 119.06 */
	assert_int_equal(b[1].d, 0);
	for (int j = 0; j < 32; j++)
		assert_int_equal(b[1].qs[j], 0);
	/* Round trip: within half a step of the stored scale (plus the scale's
	 * own f16 rounding, 2^-11 relative, times |q| <= 127). */
	kern_q8_0_dequantize_row(b, y, 64);
	for (int j = 0; j < 64; j++) {
		double d = kern_f16_to_f32(b[j / 32].d);

		assert_true(fabs((double)y[j] - x[j]) <= 0.5 * d + 127 * d * 0x1p-11);
		assert_true((double)y[j] == d * b[j / 32].qs[j % 32]);
	}
	/* ggml rounds half away from zero: 0.5 step -> 1. */
	for (int j = 0; j < 32; j++)
		x[j] = j == 0 ? 127.0f : (j == 1 ? 0.5f : (j == 2 ? -1.5f : 0.0f));
	assert_int_equal(kern_q8_0_quantize_row(x, b, 32), 0);
	assert_int_equal(b[0].qs[0], 127);
	assert_int_equal(b[0].qs[1], 1);
	assert_int_equal(b[0].qs[2], -2);

	/* Failures write nothing. */
	memset(b, 0x5a, sizeof(b));
	memcpy(keep, b, sizeof(b));
	assert_int_equal(kern_q8_0_quantize_row(x, b, 31), PPRPC_EINVAL);
	assert_int_equal(kern_q8_0_quantize_row(x, b, 0), PPRPC_EINVAL);
	assert_int_equal(kern_q8_0_quantize_row(NULL, b, 32), PPRPC_EINVAL);
	for (int j = 0; j < 64; j++)
		x[j] = 1.0f;
	x[40] = NAN;
	assert_int_equal(kern_q8_0_quantize_row(x, b, 64), PPRPC_EINVAL);
	x[40] = INFINITY;
	assert_int_equal(kern_q8_0_quantize_row(x, b, 64), PPRPC_EINVAL);
	x[40] = 1e10f;  /* scale 7.9e7 does not fit f16 */
	assert_int_equal(kern_q8_0_quantize_row(x, b, 64), PPRPC_ERANGE);
	assert_memory_equal(b, keep, sizeof(b));
}

/* ---- MUL_MAT with Q8_0 weights -------------------------------------------------------- */

static void check_mm_q8(struct kern_tensor *w, struct kern_tensor *x, int nthreads,
			const char *what)
{
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
	const int64_t ne[4] = { N, M, x->ne[2], x->ne[3] };
	struct kern_tensor d = mk_dst(PPRPC_F32, ne);
	int64_t n = kern_tensor_nelements(&d), i[4];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[160];

	for (int64_t l = 0; l < n; l++) {
		double sum = 0, mag = 0;

		ref_unravel(d.ne, l, i);
		for (int64_t k = 0; k < K; k++) {
			double ab = q8_get(w, k, i[0], i[2] / r2, i[3] / r3) *
				    ref_get(x, k, i[1], i[2], i[3]);

			sum += ab;
			mag += fabs(ab);
		}
		want[l] = sum;
		tol[l] = Q8_MM_TOL_PER_K * (double)(K + 1) * mag;
	}
	assert_int_equal(run_n(nthreads, PPRPC_OP_MUL_MAT, NULL, w, x, &d), 0);
	snprintf(name, sizeof(name), "MUL_MAT q8_0 K=%lld N=%lld M=%lld %s", (long long)K,
		 (long long)N, (long long)M, what);
	expect_close(&d, want, tol, name);
	free(d.data);
	free(want);
	free(tol);
}

static void test_mul_mat_q8_0(void **state)
{
	/* M on both sides of KERN_Q8_0_DIRECT_MAX_M (16): direct and sgemm. */
	const int64_t ms[5] = { 1, 3, 16, 17, 40 };

	(void)state;
	for (int mi = 0; mi < 5; mi++) {
		int64_t M = ms[mi];
		struct kern_tensor w, x;

		/* Odd N, weights broadcast over both batch dims. */
		w = mk_q8(96, 17, 2, 1, ident, 0, 161, 1.0);
		x = mk(PPRPC_F32, 96, M, 6, 2, ident, 1, 0, 162);
		check_mm_q8(&w, &x, 1, "contiguous, batch broadcast");
		free(x.data);
		/* Scrambled activations with gaps: the direct path packs them. */
		x = mk(PPRPC_F32, 96, M, 2, 1, scramble, 2, 1, 163);
		check_mm_q8(&w, &x, 2, "scrambled src1");
		free(x.data);
		free(w.data);

		/* Weight rows padded by 3 blocks (a row view of a wider matrix),
		 * single block K = 32. */
		w = mk_q8(32, 5, 1, 1, ident, 3, 164, 50.0);
		x = mk(PPRPC_F32, 32, M, 1, 1, ident, 1, 0, 165);
		check_mm_q8(&w, &x, 1, "padded rows, K=32");
		free(w.data);
		free(x.data);

		/* Weight slices interleaved (dims 1 and 2 swapped in memory;
		 * blocks along ne[0] must stay packed). */
		w = mk_q8(64, 3, 4, 1, swap12, 0, 166, 1.0);
		x = mk(PPRPC_F32, 64, M, 4, 1, transp, 1, 0, 167);
		check_mm_q8(&w, &x, 1, "scrambled weights");
		free(w.data);
		free(x.data);
	}
}

static void test_mul_mat_q8_0_large(void **state)
{
	struct kern_tensor w = mk_q8(1024, BIG_ROWS, 1, 1, ident, 0, 171, 1.0);
	struct kern_tensor x;

	(void)state;
	x = mk(PPRPC_F32, 1024, 1, 1, 1, ident, 1, 0, 172);
	check_mm_q8(&w, &x, N_SPLIT_THREADS, "decode, threaded direct");
	free(x.data);
	x = mk(PPRPC_F32, 1024, 20, 1, 1, ident, 1, 0, 173);
	check_mm_q8(&w, &x, N_SPLIT_THREADS, "prefill, threaded sgemm");
	free(x.data);
	free(w.data);
}

/* ---- GET_ROWS ------------------------------------------------------------------------- */

static void set_ids(struct kern_tensor *ids, const int32_t *v)
{
	int64_t n = kern_tensor_nelements(ids), i[4];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(ids->ne, l, i);
		*(int32_t *)ref_ptr(ids, i[0], i[1], i[2], i[3]) = v[l];
	}
}

static int32_t get_id(const struct kern_tensor *ids, int64_t i0, int64_t i1, int64_t i2)
{
	return *(const int32_t *)ref_ptr(ids, i0, i1, i2, 0);
}

static void check_get_rows(struct kern_tensor *tab, struct kern_tensor *ids, int nthreads,
			   const char *what)
{
	struct kern_tensor d = infer_dst(PPRPC_OP_GET_ROWS, NULL, tab, ids);
	int64_t n = kern_tensor_nelements(&d), i[4];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[128];

	assert_int_equal(d.ne[0], tab->ne[0]);
	assert_int_equal(d.ne[1], ids->ne[0]);
	assert_int_equal(d.ne[2], ids->ne[1]);
	assert_int_equal(d.ne[3], ids->ne[2]);
	for (int64_t l = 0; l < n; l++) {
		ref_unravel(d.ne, l, i);
		want[l] = any_get(tab, i[0], get_id(ids, i[1], i[2], i[3]), i[2] % tab->ne[2],
				  i[3] % tab->ne[3]);
	}
	assert_int_equal(run_n(nthreads, PPRPC_OP_GET_ROWS, NULL, tab, ids, &d), 0);
	snprintf(name, sizeof(name), "GET_ROWS %s %s", kern_dtype(tab->dtype)->name, what);
	expect_close(&d, want, tol, name);  /* exact */
	free(d.data);
	free(want);
	free(tol);
}

static void test_get_rows(void **state)
{
	const int32_t idv[30] = { 3, 0, 10, 10, 7, 1, 2, 2, 9, 4, 5, 6, 8, 0, 0,
				  10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4 };

	(void)state;
	for (int t = 0; t < 4; t++) {
		int dt = t < 3 ? float_types[t] : PPRPC_Q8_0;
		int64_t D = dt == PPRPC_Q8_0 ? 64 : 7;
		struct kern_tensor tab, ids;

		/* Table [D, V=11, 3, 1] (dim 3 broadcast), ids [5, 3, 2]
		 * strided. */
		tab = dt == PPRPC_Q8_0 ? mk_q8(D, 11, 3, 1, ident, 0, 181, 2.0)
				       : mk(dt, D, 11, 3, 1, ident, 1, 0, 181);
		ids = mk(PPRPC_I32, 5, 3, 2, 1, scramble, 2, 1, 0);
		set_ids(&ids, idv);
		check_get_rows(&tab, &ids, 1, "batched, strided ids");
		check_get_rows(&tab, &ids, 3, "batched, strided ids, 3 threads");
		free(tab.data);

		/* Embedding lookup: one table, ids [n]; table rows padded (a
		 * row view of a wider table), or transposed for plain types. */
		tab = dt == PPRPC_Q8_0 ? mk_q8(D, 11, 1, 1, ident, 2, 182, 1.0)
				       : mk(dt, D, 11, 1, 1, transp, 1, 0, 182);
		free(ids.data);
		ids = mk(PPRPC_I32, 13, 1, 1, 1, ident, 3, 0, 0);
		set_ids(&ids, idv);
		check_get_rows(&tab, &ids, 1, "embedding");
		free(tab.data);
		free(ids.data);
	}
}

static void test_get_rows_threads(void **state)
{
	struct kern_tensor tab = mk(PPRPC_F16, BIG_COLS, 50, 1, 1, ident, 1, 0, 183);
	struct kern_tensor ids = mk(PPRPC_I32, BIG_ROWS, 1, 1, 1, ident, 1, 0, 0);

	(void)state;
	for (int64_t k = 0; k < BIG_ROWS; k++)
		((int32_t *)ids.data)[k] = (int32_t)((k * 7) % 50);
	check_get_rows(&tab, &ids, N_SPLIT_THREADS, "large threaded");
	free(tab.data);
	free(ids.data);
}

static void test_get_rows_range(void **state)
{
	const int32_t bad[3][4] = { { 0, 1, 11, 2 }, { -1, 0, 0, 0 }, { 0, 0, 0, INT32_MIN } };
	struct kern_tensor tab = mk(PPRPC_F32, 4, 11, 1, 1, ident, 1, 0, 191);
	struct kern_tensor ids = mk(PPRPC_I32, 4, 1, 1, 1, ident, 1, 0, 0), d;

	(void)state;
	d = infer_dst(PPRPC_OP_GET_ROWS, NULL, &tab, &ids);
	for (int b = 0; b < 3; b++) {
		set_ids(&ids, bad[b]);
		assert_int_equal(run_n(1, PPRPC_OP_GET_ROWS, NULL, &tab, &ids, &d), PPRPC_ERANGE);
		/* Checked before any row moves: dst untouched. */
		for (int k = 0; k < 16; k++)
			assert_true(isnan(((float *)d.data)[k]));
	}
	free(tab.data);
	free(ids.data);
	free(d.data);
}

/* ---- SET_ROWS ------------------------------------------------------------------------- */

/* The table after SET_ROWS, by the documented rule (later rows win). */
static void check_set_rows(int tdt, struct kern_tensor *val, struct kern_tensor *ids, int64_t V,
			   int nthreads, const char *what)
{
	struct pprpc_op_params p = { .i = { (int32_t)V, tdt } };
	struct kern_tensor tab = infer_dst(PPRPC_OP_SET_ROWS, &p, val, ids);
	int64_t n, i[4];
	double *want, *tol;
	char name[128];

	assert_int_equal(tab.dtype, tdt);
	assert_int_equal(tab.ne[0], val->ne[0]);
	assert_int_equal(tab.ne[1], V);
	assert_int_equal(tab.ne[2], val->ne[2]);
	assert_int_equal(tab.ne[3], val->ne[3]);
	ref_fill(&tab, 201);  /* the old cache contents */
	n = kern_tensor_nelements(&tab);
	want = dalloc(n);
	tol = dalloc(n);
	for (int64_t l = 0; l < n; l++) {
		ref_unravel(tab.ne, l, i);
		want[l] = ref_get(&tab, i[0], i[1], i[2], i[3]);
	}
	for (int64_t i3 = 0; i3 < val->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < val->ne[2]; i2++)
			for (int64_t r = 0; r < val->ne[1]; r++) {
				int64_t row = get_id(ids, r, i2 % ids->ne[1], i3 % ids->ne[2]);

				for (int64_t k = 0; k < val->ne[0]; k++) {
					double v = ref_get(val, k, r, i2, i3);
					int64_t l = k + tab.ne[0] * (row + V * (i2 + tab.ne[2] * i3));

					/* The value rounded once to the table dtype
					 * by the scalar converter. */

					want[l] = tdt == PPRPC_F16
							  ? kern_f16_to_f32(kern_f32_to_f16((float)v))
						  : tdt == PPRPC_BF16
							  ? kern_bf16_to_f32(kern_f32_to_bf16((float)v))
							  : (float)v;
				}
			}
	assert_int_equal(run_n(nthreads, PPRPC_OP_SET_ROWS, &p, val, ids, &tab), 0);
	snprintf(name, sizeof(name), "SET_ROWS ->%s %s", kern_dtype(tdt)->name, what);
	expect_close(&tab, want, tol, name);  /* exact, untouched rows bit-equal */
	free(tab.data);
	free(want);
	free(tol);
}

static void test_set_rows(void **state)
{
	const int32_t idv[8] = { 4, 0, 9, 5, 1, 8, 2, 7 };
	const int32_t dup[4] = { 3, 6, 3, 3 };

	(void)state;
	for (int t = 0; t < 3; t++) {
		int tdt = float_types[t];
		struct kern_tensor val, ids;

		/* KV-cache write: values [D=7, n=4, 2 heads, 1], ids [4]
		 * shared by both heads; values transposed + padded. */
		val = mk(PPRPC_F32, 7, 4, 2, 1, scramble, 2, 1, 202);
		ids = mk(PPRPC_I32, 4, 1, 1, 1, ident, 2, 0, 0);
		set_ids(&ids, idv);
		check_set_rows(tdt, &val, &ids, 10, 1, "ids broadcast over heads");
		check_set_rows(tdt, &val, &ids, 10, 2, "ids broadcast over heads, 2 threads");
		free(ids.data);
		/* Per-head ids [4, 2]. */
		ids = mk(PPRPC_I32, 4, 2, 1, 1, transp, 1, 0, 0);
		set_ids(&ids, idv);
		check_set_rows(tdt, &val, &ids, 10, 1, "per-head ids");
		free(ids.data);
		/* Repeated ids: the last row wins. */
		ids = mk(PPRPC_I32, 4, 1, 1, 1, ident, 1, 0, 0);
		set_ids(&ids, dup);
		check_set_rows(tdt, &val, &ids, 10, 1, "repeated ids");
		free(ids.data);
		free(val.data);
	}
}

static void test_set_rows_range(void **state)
{
	struct pprpc_op_params p = { .i = { 6, PPRPC_F16 } };
	struct kern_tensor val = mk(PPRPC_F32, 5, 3, 1, 1, ident, 1, 0, 211);
	struct kern_tensor ids = mk(PPRPC_I32, 3, 1, 1, 1, ident, 1, 0, 0), tab;
	const int32_t bad[2][3] = { { 0, 1, 6 }, { 2, -1, 0 } };
	size_t bytes;
	void *keep;

	(void)state;
	tab = infer_dst(PPRPC_OP_SET_ROWS, &p, &val, &ids);
	ref_fill(&tab, 212);
	bytes = (size_t)tab.nb[3] * (size_t)tab.ne[3];
	keep = malloc(bytes);
	memcpy(keep, tab.data, bytes);
	for (int b = 0; b < 2; b++) {
		set_ids(&ids, bad[b]);
		assert_int_equal(run_n(1, PPRPC_OP_SET_ROWS, &p, &val, &ids, &tab), PPRPC_ERANGE);
		/* All-or-nothing: the valid rows before the bad id were not
		 * written either. */
		assert_memory_equal(tab.data, keep, bytes);
	}
	free(keep);
	free(val.data);
	free(ids.data);
	free(tab.data);
}

/* ---- CONCAT --------------------------------------------------------------------------- */

static void check_concat(struct kern_tensor *a, struct kern_tensor *b, int dim, int nthreads,
			 const char *what)
{
	struct pprpc_op_params p = { .i = { dim } };
	struct kern_tensor d = infer_dst(PPRPC_OP_CONCAT, &p, a, b);
	int64_t n = kern_tensor_nelements(&d), i[4];
	double *want = dalloc(n), *tol = dalloc(n);
	char name[128];

	assert_int_equal(d.dtype, a->dtype);
	assert_int_equal(d.ne[dim], a->ne[dim] + b->ne[dim]);
	for (int64_t l = 0; l < n; l++) {
		ref_unravel(d.ne, l, i);
		if (i[dim] < a->ne[dim]) {
			want[l] = ref_get(a, i[0], i[1], i[2], i[3]);
		} else {
			i[dim] -= a->ne[dim];
			want[l] = ref_get(b, i[0], i[1], i[2], i[3]);
		}
	}
	assert_int_equal(run_n(nthreads, PPRPC_OP_CONCAT, &p, a, b, &d), 0);
	snprintf(name, sizeof(name), "CONCAT %s dim %d %s", kern_dtype(a->dtype)->name, dim, what);
	expect_close(&d, want, tol, name);  /* exact */
	free(d.data);
	free(want);
	free(tol);
}

static void test_concat(void **state)
{
	(void)state;
	for (int t = 0; t < 3; t++) {
		int dt = float_types[t];

		for (int dim = 0; dim < 4; dim++) {
			int64_t na[4] = { 5, 3, 2, 2 }, nb[4] = { 5, 3, 2, 2 };
			struct kern_tensor a, b;

			na[dim] = 3;
			nb[dim] = 4;
			a = mk(dt, na[0], na[1], na[2], na[3], scramble, 2, 1, 221);
			b = mk(dt, nb[0], nb[1], nb[2], nb[3], transp, 1, 3, 222);
			check_concat(&a, &b, dim, 1, "scrambled + transposed");
			check_concat(&a, &b, dim, 3, "scrambled + transposed, 3 threads");
			free(a.data);
			free(b.data);
		}
	}
}

static void test_concat_threads(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, BIG_COLS, 600, 1, 1, transp, 1, 0, 231);
	struct kern_tensor b = mk(PPRPC_F32, BIG_COLS, 500, 1, 1, ident, 1, 0, 232);

	(void)state;
	check_concat(&a, &b, 1, N_SPLIT_THREADS, "large threaded");
	free(a.data);
	free(b.data);
}

/* ---- shape rules ------------------------------------------------------------------------ */

static struct kern_tensor T(int dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(kern_tensor_init_contig(&t, dtype, ne), 0);
	return t;
}

static int infer(int op, const struct pprpc_op_params *p, struct kern_tensor a,
		 const struct kern_tensor *b, struct kern_tensor *out, char *err)
{
	const struct kern_tensor *src[2] = { &a, b };

	return kern_op_infer(op, p, src, b ? 2 : 1, out, err, 160);
}

static void assert_shape(const struct kern_tensor *t, int dtype, int64_t a, int64_t b,
			 int64_t c, int64_t d)
{
	assert_int_equal(t->dtype, dtype);
	assert_int_equal(t->ne[0], a);
	assert_int_equal(t->ne[1], b);
	assert_int_equal(t->ne[2], c);
	assert_int_equal(t->ne[3], d);
	assert_true(kern_tensor_is_contiguous(t));
}

static void test_rules(void **state)
{
	struct kern_tensor out, ids, b, w;
	struct pprpc_op_params p;
	char err[160];

	(void)state;
	assert_string_equal(kern_op_name(PPRPC_OP_GET_ROWS), "GET_ROWS");
	assert_int_equal(kern_op_nsrc(PPRPC_OP_SOFTMAX), 1);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_SWIGLU), 2);

	/* GET_ROWS */
	ids = T(PPRPC_I32, 5, 3, 2, 1);
	assert_int_equal(infer(PPRPC_OP_GET_ROWS, NULL, T(PPRPC_Q8_0, 64, 100, 3, 1), &ids, &out,
			       err), 0);
	assert_shape(&out, PPRPC_F32, 64, 5, 3, 2);
	assert_int_equal(infer(PPRPC_OP_GET_ROWS, NULL, T(PPRPC_F16, 8, 100, 2, 1), &ids, &out,
			       err), PPRPC_ESHAPE);
	b = T(PPRPC_F32, 5, 3, 2, 1);
	assert_int_equal(infer(PPRPC_OP_GET_ROWS, NULL, T(PPRPC_F16, 8, 100, 1, 1), &b, &out, err),
			 PPRPC_ETYPE);
	assert_string_equal(err, "GET_ROWS: src1 is f32, must be i32");
	assert_int_equal(infer(PPRPC_OP_GET_ROWS, NULL, T(PPRPC_I32, 8, 100, 1, 1), &ids, &out,
			       err), PPRPC_ETYPE);
	b = T(PPRPC_I32, 5, 1, 1, 2);
	assert_int_equal(infer(PPRPC_OP_GET_ROWS, NULL, T(PPRPC_F32, 8, 100, 1, 1), &b, &out, err),
			 PPRPC_ESHAPE);

	/* SET_ROWS: the table shape comes from i[0] (rows) and i[1] (dtype). */
	memset(&p, 0, sizeof(p));
	p.i[0] = 1000;
	p.i[1] = PPRPC_F16;
	ids = T(PPRPC_I32, 4, 1, 1, 1);
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F32, 128, 4, 8, 1), &ids, &out, err),
			 0);
	assert_shape(&out, PPRPC_F16, 128, 1000, 8, 1);
	p.i[0] = 0;
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F32, 128, 4, 8, 1), &ids, &out, err),
			 PPRPC_EINVAL);
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, NULL, T(PPRPC_F32, 128, 4, 8, 1), &ids, &out,
			       err), PPRPC_EINVAL);
	p.i[0] = 10;
	p.i[1] = PPRPC_Q8_0;
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F32, 128, 4, 1, 1), &ids, &out, err),
			 PPRPC_ETYPE);
	p.i[1] = 99;
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F32, 128, 4, 1, 1), &ids, &out, err),
			 PPRPC_ETYPE);
	p.i[1] = PPRPC_F32;
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F32, 128, 5, 1, 1), &ids, &out, err),
			 PPRPC_ESHAPE);
	assert_int_equal(infer(PPRPC_OP_SET_ROWS, &p, T(PPRPC_F16, 128, 4, 1, 1), &ids, &out, err),
			 PPRPC_ETYPE);
	{
		/* The destination must be exactly the table: same rows,
		 * contiguous. */
		struct kern_tensor v = T(PPRPC_F32, 16, 4, 1, 1), d;
		const struct kern_tensor *src[2] = { &v, &ids };

		p.i[0] = 10;
		d = T(PPRPC_F32, 16, 10, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_SET_ROWS, &p, src, 2, &d, err, 160), 0);
		d = T(PPRPC_F32, 16, 11, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_SET_ROWS, &p, src, 2, &d, err, 160),
				 PPRPC_ESHAPE);
		d = T(PPRPC_F16, 16, 10, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_SET_ROWS, &p, src, 2, &d, err, 160),
				 PPRPC_ETYPE);
	}

	/* CONCAT */
	memset(&p, 0, sizeof(p));
	p.i[0] = 2;
	b = T(PPRPC_BF16, 4, 3, 5, 1);
	assert_int_equal(infer(PPRPC_OP_CONCAT, &p, T(PPRPC_BF16, 4, 3, 2, 1), &b, &out, err), 0);
	assert_shape(&out, PPRPC_BF16, 4, 3, 7, 1);
	assert_int_equal(infer(PPRPC_OP_CONCAT, NULL, T(PPRPC_BF16, 4, 3, 2, 1), &b, &out, err),
			 PPRPC_ESHAPE);
	assert_string_equal(err, "CONCAT: src0.ne[2]=2 != src1.ne[2]=5");
	p.i[0] = 4;
	assert_int_equal(infer(PPRPC_OP_CONCAT, &p, T(PPRPC_BF16, 4, 3, 5, 1), &b, &out, err),
			 PPRPC_EINVAL);
	p.i[0] = 0;
	b = T(PPRPC_F16, 4, 3, 5, 1);
	assert_int_equal(infer(PPRPC_OP_CONCAT, &p, T(PPRPC_F32, 4, 3, 5, 1), &b, &out, err),
			 PPRPC_ETYPE);

	/* Elementwise and norms: f32 only, same shape, params checked. */
	assert_int_equal(infer(PPRPC_OP_SILU, NULL, T(PPRPC_F32, 7, 3, 1, 1), NULL, &out, err), 0);
	assert_shape(&out, PPRPC_F32, 7, 3, 1, 1);
	assert_int_equal(infer(PPRPC_OP_GELU, NULL, T(PPRPC_F16, 7, 3, 1, 1), NULL, &out, err),
			 PPRPC_ETYPE);
	memset(&p, 0, sizeof(p));
	p.f[0] = 1.0f;
	assert_int_equal(infer(PPRPC_OP_EXP, &p, T(PPRPC_F32, 7, 3, 1, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	b = T(PPRPC_F32, 7, 3, 2, 1);
	assert_int_equal(infer(PPRPC_OP_SWIGLU, NULL, T(PPRPC_F32, 7, 3, 1, 1), &b, &out, err),
			 PPRPC_ESHAPE);
	p.f[0] = 1e-6f;
	assert_int_equal(infer(PPRPC_OP_RMS_NORM, &p, T(PPRPC_F32, 7, 3, 1, 1), NULL, &out, err),
			 0);
	p.f[0] = -1e-6f;
	assert_int_equal(infer(PPRPC_OP_RMS_NORM, &p, T(PPRPC_F32, 7, 3, 1, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	p.f[0] = NAN;
	assert_int_equal(infer(PPRPC_OP_L2_NORM, &p, T(PPRPC_F32, 7, 3, 1, 1), NULL, &out, err),
			 PPRPC_EINVAL);

	/* SOFTMAX */
	memset(&p, 0, sizeof(p));
	p.f[0] = 0.125f;
	p.i[0] = 1;
	p.i[1] = 7;
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 0);
	assert_shape(&out, PPRPC_F32, 12, 5, 4, 1);
	p.i[1] = -1;
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	p.i[0] = 0;
	p.i[1] = 3;
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	p.i[0] = 2;
	p.i[1] = 0;
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	p.i[0] = 0;
	p.f[0] = INFINITY;
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 PPRPC_EINVAL);
	p.f[0] = 1.0f;
	p.i[2] = 1;  /* unused */
	assert_int_equal(infer(PPRPC_OP_SOFTMAX, &p, T(PPRPC_F32, 12, 5, 4, 1), NULL, &out, err),
			 PPRPC_EINVAL);

	/* ARGMAX: one i32 per row, rows moved down one dimension. */
	assert_int_equal(infer(PPRPC_OP_ARGMAX, NULL, T(PPRPC_F32, 32000, 5, 2, 3), NULL, &out,
			       err), 0);
	assert_shape(&out, PPRPC_I32, 5, 2, 3, 1);
	assert_int_equal(infer(PPRPC_OP_ARGMAX, NULL, T(PPRPC_I32, 8, 1, 1, 1), NULL, &out, err),
			 PPRPC_ETYPE);
	w = T(PPRPC_F32, 1, 1, 1, 1);
	w.ne[0] = INT64_C(1) << 32;
	w.nb[1] = w.nb[2] = w.nb[3] = 4;
	w.nb[0] = 0;
	assert_int_equal(kern_tensor_check(&w), 0);
	assert_int_equal(infer(PPRPC_OP_ARGMAX, NULL, w, NULL, &out, err), PPRPC_ETOOBIG);

	/* MUL_MAT takes Q8_0 weights; K must be whole blocks (checked by the
	 * descriptor) and equal to the activations'. */
	b = T(PPRPC_F32, 64, 3, 1, 1);
	assert_int_equal(infer(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_Q8_0, 64, 10, 1, 1), &b, &out, err),
			 0);
	assert_shape(&out, PPRPC_F32, 10, 3, 1, 1);
	b = T(PPRPC_F32, 96, 3, 1, 1);
	assert_int_equal(infer(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_Q8_0, 64, 10, 1, 1), &b, &out, err),
			 PPRPC_ESHAPE);
}

/* ---- graph-builder wrappers ----------------------------------------------------------- */

static void test_builder(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_tensor t;
	int x, cache, ids, vals, n, e;

	(void)state;
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	t = pprpc_tensor_make((pprpc_buffer){ 1 }, 0, PPRPC_F32, 64, 4, 1, 1);
	x = pprpc_gb_tensor(gb, &t);
	t = pprpc_tensor_make((pprpc_buffer){ 1 }, 4096, PPRPC_F16, 64, 100, 1, 1);
	cache = pprpc_gb_tensor(gb, &t);
	t = pprpc_tensor_make((pprpc_buffer){ 2 }, 0, PPRPC_I32, 4, 1, 1, 1);
	ids = pprpc_gb_tensor(gb, &t);
	assert_true(x >= 0 && cache >= 0 && ids >= 0);

	n = pprpc_gb_rms_norm(gb, x, 1e-6f, -1);
	assert_true(n >= 0);
	assert_int_equal(gb->n[gb->nn - 1].op, PPRPC_OP_RMS_NORM);
	assert_true(gb->n[gb->nn - 1].p.f[0] == 1e-6f);
	e = pprpc_gb_silu(gb, n, -1);
	assert_true(e >= 0);
	assert_true(pprpc_gb_swiglu(gb, n, e, -1) >= 0);
	assert_true(pprpc_gb_sigmoid(gb, n, -1) >= 0);
	assert_true(pprpc_gb_softplus(gb, n, -1) >= 0);
	assert_true(pprpc_gb_exp(gb, n, -1) >= 0);
	assert_true(pprpc_gb_gelu(gb, n, -1) >= 0);
	assert_true(pprpc_gb_l2_norm(gb, n, 1e-12f, -1) >= 0);
	assert_true(pprpc_gb_concat(gb, n, e, 1, -1) >= 0);
	assert_int_equal(gb->t[gb->nt - 1].t.ne[1], 8);

	/* SET_ROWS writes the cache itself and fills i[0]/i[1] from it. */
	vals = n;
	assert_int_equal(pprpc_gb_set_rows(gb, cache, vals, ids), cache);
	assert_int_equal(gb->n[gb->nn - 1].op, PPRPC_OP_SET_ROWS);
	assert_int_equal(gb->n[gb->nn - 1].dst, cache);
	assert_int_equal(gb->n[gb->nn - 1].p.i[0], 100);
	assert_int_equal(gb->n[gb->nn - 1].p.i[1], PPRPC_F16);
	assert_int_equal(gb->n[gb->nn - 1].src[0], vals);
	assert_int_equal(gb->n[gb->nn - 1].src[1], ids);

	e = pprpc_gb_get_rows(gb, cache, ids, -1);
	assert_true(e >= 0);
	assert_int_equal(gb->t[e].t.ne[0], 64);
	assert_int_equal(gb->t[e].t.ne[1], 4);
	e = pprpc_gb_softmax(gb, n, 0.125f, 1, 60, -1);
	assert_true(e >= 0);
	assert_int_equal(gb->n[gb->nn - 1].p.i[1], 60);
	e = pprpc_gb_argmax(gb, e, -1);
	assert_true(e >= 0);
	assert_int_equal(gb->t[e].t.dtype, PPRPC_I32);
	assert_int_equal(gb->t[e].t.ne[0], 4);

	/* Errors name the op. */
	assert_int_equal(pprpc_gb_softmax(gb, n, 1.0f, 0, 3, -1), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_get_rows(gb, cache, x, -1), PPRPC_ETYPE);
	assert_non_null(strstr(pprpc_gb_error(gb), "GET_ROWS"));
	assert_int_equal(pprpc_gb_set_rows(gb, 999, vals, ids), PPRPC_EINVAL);
	pprpc_graph_builder_free(gb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_unary_layouts),
		cmocka_unit_test(test_unary_edges),
		cmocka_unit_test(test_unary_nan_inf),
		cmocka_unit_test(test_unary_threads),
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_norms),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_argmax),
		cmocka_unit_test(test_q8_0_quantize),
		cmocka_unit_test(test_mul_mat_q8_0),
		cmocka_unit_test(test_mul_mat_q8_0_large),
		cmocka_unit_test(test_get_rows),
		cmocka_unit_test(test_get_rows_threads),
		cmocka_unit_test(test_get_rows_range),
		cmocka_unit_test(test_set_rows),
		cmocka_unit_test(test_set_rows_range),
		cmocka_unit_test(test_concat),
		cmocka_unit_test(test_concat_threads),
		cmocka_unit_test(test_builder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * tests/unit/test_kernels_cpu.c — every CPU kernel against a float64
 * reference computed here from the stored (already rounded) inputs, over
 * contiguous and non-contiguous layouts, f16/bf16 operands, broadcasting,
 * odd sizes, in-place use and the multi-threaded paths.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/unit/ref.h"

/* ADD and MUL of two f32-representable values are single IEEE operations,
 * so the result is the exact value rounded once: relative error <= 2^-24. */
#define ELEM_REL_TOL 0x1p-24
/* SCALE is x*f0 + f1: up to two roundings (one if the compiler fuses them),
 * each at most 2^-24 relative to its own result, bounded by 2^-23 times
 * (|x*f0| + |f1|). */
#define SCALE_TOL 0x1p-23
/* MUL_MAT accumulates K products in f32.  The classic bound for any
 * summation order (blocked or FMA included) is gamma_K * sum|a*b| with
 * gamma_K ~= K * 2^-24; every K used here is <= 1024, and for K = 1024 this
 * is 6.1e-5.  We use K * 2^-23 (twice the bound) per output element. */
#define MM_TOL_PER_K 0x1p-23

#define N_SPLIT_THREADS 4
/* Just over the kernels' single-thread threshold (1 << 20 elements). */
#define BIG_ROWS 1100
#define BIG_COLS 1000

static const int float_types[3] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16 };
static const int ident[4] = { 0, 1, 2, 3 };
static const int transp[4] = { 1, 0, 2, 3 };
static const int scramble[4] = { 2, 0, 3, 1 };

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

/* A contiguous f32 destination pre-filled with NaN, so an element the kernel
 * forgets to write is caught. */
static struct kern_tensor mk_dst(int dtype, const int64_t ne[4])
{
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, dtype, ne, NULL, 1, 0), 0);
	ref_poison(&t);
	return t;
}

static int run(int nthreads, int op, const struct pprpc_op_params *p,
	       struct kern_tensor *s0, struct kern_tensor *s1, struct kern_tensor *dst)
{
	struct kern_cpu_ctx ctx = { .nthreads = nthreads };
	struct kern_tensor *src[2] = { s0, s1 };

	return kern_cpu_run(&ctx, op, p, src, s1 ? 2 : 1, dst);
}

/* Every element of d (logical order) within tol[l] of want[l]. */
static void expect_close(const struct kern_tensor *d, const double *want, const double *tol,
			 const char *what)
{
	int64_t n = kern_tensor_nelements(d), i[4];

	for (int64_t l = 0; l < n; l++) {
		double got;

		ref_unravel(d->ne, l, i);
		got = ref_get(d, i[0], i[1], i[2], i[3]);
		if (!(fabs(got - want[l]) <= tol[l]))
			fail_msg("%s: element %lld [%lld,%lld,%lld,%lld]: got %.9g want %.9g tol %.3g",
				 what, (long long)l, (long long)i[0], (long long)i[1],
				 (long long)i[2], (long long)i[3], got, want[l], tol[l]);
	}
}

/* ---- ADD / MUL ------------------------------------------------------------ */

static void binary_ref(const struct kern_tensor *a, const struct kern_tensor *b, bool mul,
		       double *want, double *tol)
{
	int64_t n = kern_tensor_nelements(a), i[4];

	for (int64_t l = 0; l < n; l++) {
		double x, y;

		ref_unravel(a->ne, l, i);
		x = ref_get(a, i[0], i[1], i[2], i[3]);
		y = ref_get(b, i[0] % b->ne[0], i[1] % b->ne[1], i[2] % b->ne[2],
			    i[3] % b->ne[3]);
		want[l] = mul ? x * y : x + y;
		tol[l] = ELEM_REL_TOL * fabs(want[l]);
	}
}

static void check_binary(int op, struct kern_tensor *a, struct kern_tensor *b, int nthreads,
			 const char *what)
{
	int64_t n = kern_tensor_nelements(a);
	double *want = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
	struct kern_tensor d = mk_dst(PPRPC_F32, a->ne);
	char name[96];

	assert_non_null(want);
	assert_non_null(tol);
	binary_ref(a, b, op == PPRPC_OP_MUL, want, tol);
	assert_int_equal(run(nthreads, op, NULL, a, b, &d), 0);
	snprintf(name, sizeof(name), "%s %s src1=%s", kern_op_name(op), what,
		 kern_dtype(b->dtype)->name);
	expect_close(&d, want, tol, name);
	free(d.data);
	free(want);
	free(tol);
}

static void test_binary_layouts(void **state)
{
	const int ops[2] = { PPRPC_OP_ADD, PPRPC_OP_MUL };

	(void)state;
	for (int o = 0; o < 2; o++) {
		for (int t = 0; t < 3; t++) {
			int bt = float_types[t];
			struct kern_tensor a, b;

			a = mk(PPRPC_F32, 7, 5, 3, 2, ident, 1, 0, 11);
			b = mk(bt, 7, 5, 3, 2, ident, 1, 0, 12);
			check_binary(ops[o], &a, &b, 1, "same shape");
			free(a.data);
			free(b.data);

			/* Scrambled src0, strided and padded src1, broadcast
			 * inside rows (ne0 6 over 3) and over dims 1 and 3. */
			a = mk(PPRPC_F32, 6, 5, 3, 2, scramble, 2, 1, 13);
			b = mk(bt, 3, 1, 3, 1, transp, 3, 2, 14);
			check_binary(ops[o], &a, &b, 1, "scrambled+broadcast");
			check_binary(ops[o], &a, &b, 3, "scrambled+broadcast 3 threads");
			free(a.data);
			free(b.data);

			/* Transposed src0, one value per row of src1. */
			a = mk(PPRPC_F32, 9, 4, 1, 1, transp, 1, 0, 15);
			b = mk(bt, 1, 4, 1, 1, ident, 1, 0, 16);
			check_binary(ops[o], &a, &b, 1, "column broadcast");
			free(b.data);
			b = mk(bt, 1, 1, 1, 1, ident, 1, 0, 17);
			check_binary(ops[o], &a, &b, 1, "scalar");
			free(a.data);
			free(b.data);
		}
	}
}

/* A zero-stride (broadcast view) src1: every row reads the same bytes. */
static void test_binary_zero_stride(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 5, 4, 1, 1, ident, 1, 0, 21);
	struct kern_tensor b = mk(PPRPC_F16, 5, 1, 1, 1, ident, 1, 0, 22);

	(void)state;
	b.ne[1] = 4;
	b.nb[1] = 0;
	check_binary(PPRPC_OP_ADD, &a, &b, 1, "zero-stride src1");
	free(a.data);
	free(b.data);
}

static void test_binary_in_place(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 33, 7, 2, 1, ident, 1, 0, 31);
	struct kern_tensor b = mk(PPRPC_F32, 33, 1, 2, 1, ident, 1, 0, 32);
	struct kern_tensor c = mk(PPRPC_F32, 33, 7, 2, 1, ident, 1, 0, 33);
	int64_t n = kern_tensor_nelements(&a);
	double *want = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));

	(void)state;
	/* dst is src0. */
	binary_ref(&a, &b, false, want, tol);
	assert_int_equal(run(1, PPRPC_OP_ADD, NULL, &a, &b, &a), 0);
	expect_close(&a, want, tol, "ADD in place on src0");
	/* dst is src1 (same shape). */
	binary_ref(&a, &c, true, want, tol);
	assert_int_equal(run(2, PPRPC_OP_MUL, NULL, &a, &c, &c), 0);
	expect_close(&c, want, tol, "MUL in place on src1");
	free(a.data);
	free(b.data);
	free(c.data);
	free(want);
	free(tol);
}

static void test_binary_threads(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, transp, 1, 0, 41);
	struct kern_tensor b = mk(PPRPC_BF16, BIG_COLS, 1, 1, 1, ident, 1, 0, 42);

	(void)state;
	check_binary(PPRPC_OP_ADD, &a, &b, N_SPLIT_THREADS, "large threaded");
	check_binary(PPRPC_OP_MUL, &a, &b, N_SPLIT_THREADS, "large threaded");
	free(a.data);
	free(b.data);
}

/* ---- SCALE ------------------------------------------------------------------ */

static void check_scale(struct kern_tensor *a, struct kern_tensor *d, float s, float c,
			int nthreads, const char *what)
{
	struct pprpc_op_params p = { .f = { s, c } };
	int64_t n = kern_tensor_nelements(a), i[4];
	double *want = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));

	for (int64_t l = 0; l < n; l++) {
		double x;

		ref_unravel(a->ne, l, i);
		x = ref_get(a, i[0], i[1], i[2], i[3]);
		want[l] = x * s + c;
		tol[l] = SCALE_TOL * (fabs(x * s) + fabs(c));
	}
	assert_int_equal(run(nthreads, PPRPC_OP_SCALE, &p, a, NULL, d), 0);
	expect_close(d, want, tol, what);
	free(want);
	free(tol);
}

static void test_scale(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 7, 5, 3, 2, scramble, 2, 3, 51), d;

	(void)state;
	d = mk_dst(PPRPC_F32, a.ne);
	check_scale(&a, &d, 3.5f, -0.25f, 1, "SCALE scrambled");
	check_scale(&a, &d, -1e-3f, 0.0f, 2, "SCALE scrambled 2 threads");
	free(a.data);
	free(d.data);

	a = mk(PPRPC_F32, 17, 3, 1, 1, ident, 1, 0, 52);
	check_scale(&a, &a, 0.5f, 2.0f, 1, "SCALE in place");
	free(a.data);

	a = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, transp, 1, 0, 53);
	d = mk_dst(PPRPC_F32, a.ne);
	check_scale(&a, &d, 1.75f, 1.0f, N_SPLIT_THREADS, "SCALE large threaded");
	free(a.data);
	free(d.data);
}

/* ---- CPY ---------------------------------------------------------------------- */

/* The expected element: the source value rounded once to the destination
 * type by the scalar converter (itself checked against the compiler in
 * test_kernels_tensor), so CPY must be bit-exact. */
static double rounded(int dtype, double v)
{
	switch (dtype) {
	case PPRPC_F16:
		return kern_f16_to_f32(kern_f32_to_f16((float)v));
	case PPRPC_BF16:
		return kern_bf16_to_f32(kern_f32_to_bf16((float)v));
	default:
		return (float)v;
	}
}

static void check_cpy(struct kern_tensor *s, struct kern_tensor *d, int nthreads,
		      const char *what)
{
	struct pprpc_op_params p = { .i = { d->dtype } };
	int64_t n = kern_tensor_nelements(s), i[4];
	double *want = malloc(n * sizeof(double)), *tol = calloc(n, sizeof(double));
	char name[96];

	assert_int_equal(kern_tensor_nelements(d), n);
	for (int64_t l = 0; l < n; l++) {
		ref_unravel(s->ne, l, i);
		want[l] = rounded(d->dtype, ref_get(s, i[0], i[1], i[2], i[3]));
	}
	assert_int_equal(run(nthreads, PPRPC_OP_CPY, &p, s, NULL, d), 0);
	snprintf(name, sizeof(name), "CPY %s->%s %s", kern_dtype(s->dtype)->name,
		 kern_dtype(d->dtype)->name, what);
	expect_close(d, want, tol, name);
	free(want);
	free(tol);
}

static void test_cpy_all_pairs(void **state)
{
	(void)state;
	for (int si = 0; si < 3; si++) {
		for (int di = 0; di < 3; di++) {
			struct kern_tensor s = mk(float_types[si], 5, 7, 3, 2, scramble, 2, 1, 61);
			struct kern_tensor d = mk_dst(float_types[di], s.ne);
			/* Same count, other shape, itself a strided view. */
			struct kern_tensor v = mk(float_types[di], 7, 6, 5, 1, transp, 2, 3, 0);

			check_cpy(&s, &d, 1, "scrambled -> contiguous");
			check_cpy(&s, &v, 1, "scrambled -> reshaped view");
			check_cpy(&s, &v, 3, "scrambled -> reshaped view, 3 threads");
			free(s.data);
			free(d.data);
			free(v.data);
		}
	}
}

/* Same-type copies move bits: NaN payloads (even signalling) survive. */
static void test_cpy_bits(void **state)
{
	const int64_t ne[4] = { 4, 1, 1, 1 };
	struct kern_tensor s = mk(PPRPC_F16, 4, 1, 1, 1, ident, 1, 0, 0), d = mk_dst(PPRPC_F16, ne);
	struct kern_tensor s32 = mk(PPRPC_F32, 2, 1, 1, 1, ident, 1, 0, 0);
	struct kern_tensor d32 = mk(PPRPC_F32, 2, 1, 1, 1, ident, 3, 0, 0);
	const uint16_t h[4] = { 0x7c01, 0xfe03, 0x7c00, 0x0001 };
	const uint32_t f[2] = { 0x7f800001, 0xffc01234 };
	struct pprpc_op_params p16 = { .i = { PPRPC_F16 } }, p32 = { .i = { PPRPC_F32 } };

	(void)state;
	memcpy(s.data, h, sizeof(h));
	memcpy(s32.data, f, sizeof(f));
	assert_int_equal(run(1, PPRPC_OP_CPY, &p16, &s, NULL, &d), 0);
	assert_memory_equal(d.data, h, sizeof(h));
	assert_int_equal(run(1, PPRPC_OP_CPY, &p32, &s32, NULL, &d32), 0);
	assert_memory_equal(d32.data, &f[0], 4);
	assert_memory_equal((char *)d32.data + 12, &f[1], 4);
	free(s.data);
	free(d.data);
	free(s32.data);
	free(d32.data);
}

static void test_cpy_threads(void **state)
{
	struct kern_tensor s = mk(PPRPC_F32, BIG_COLS, BIG_ROWS, 1, 1, transp, 1, 0, 71);
	const int64_t ne[4] = { BIG_ROWS, BIG_COLS, 1, 1 };
	struct kern_tensor d = mk_dst(PPRPC_F16, ne);

	(void)state;
	check_cpy(&s, &d, N_SPLIT_THREADS, "large transposed, threaded");
	free(s.data);
	free(d.data);
}

/* ---- MUL_MAT ------------------------------------------------------------------ */

static void check_mul_mat(struct kern_tensor *w, struct kern_tensor *x, int nthreads,
			  const char *what)
{
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
	const int64_t ne[4] = { N, M, x->ne[2], x->ne[3] };
	struct kern_tensor d = mk_dst(PPRPC_F32, ne);
	int64_t n = kern_tensor_nelements(&d), i[4];
	double *want = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
	char name[128];

	for (int64_t l = 0; l < n; l++) {
		double sum = 0, mag = 0;

		ref_unravel(d.ne, l, i);
		for (int64_t k = 0; k < K; k++) {
			double ab = ref_get(w, k, i[0], i[2] / r2, i[3] / r3) *
				    ref_get(x, k, i[1], i[2], i[3]);

			sum += ab;
			mag += fabs(ab);
		}
		want[l] = sum;
		tol[l] = MM_TOL_PER_K * (double)K * mag;
	}
	assert_int_equal(run(nthreads, PPRPC_OP_MUL_MAT, NULL, w, x, &d), 0);
	snprintf(name, sizeof(name), "MUL_MAT %s K=%lld N=%lld M=%lld %s",
		 kern_dtype(w->dtype)->name, (long long)K, (long long)N, (long long)M, what);
	expect_close(&d, want, tol, name);
	free(d.data);
	free(want);
	free(tol);
}

static void test_mul_mat_layouts(void **state)
{
	(void)state;
	for (int t = 0; t < 3; t++) {
		int wt = float_types[t];
		struct kern_tensor w, x;

		/* Odd sizes, weights broadcast over both batch dims. */
		w = mk(wt, 33, 17, 2, 1, ident, 1, 0, 81);
		x = mk(PPRPC_F32, 33, 5, 6, 2, ident, 1, 0, 82);
		check_mul_mat(&w, &x, 1, "contiguous, batch broadcast");
		free(w.data);
		free(x.data);

		/* Transposed weights, scrambled activations with gaps. */
		w = mk(wt, 33, 17, 3, 1, transp, 1, 0, 83);
		x = mk(PPRPC_F32, 33, 5, 3, 2, scramble, 2, 1, 84);
		check_mul_mat(&w, &x, 2, "transposed src0, scrambled src1");
		free(w.data);
		free(x.data);

		/* Padded rows: usable in place by sgemm with ld > K. */
		w = mk(wt, 33, 17, 1, 1, ident, 1, 7, 85);
		x = mk(PPRPC_F32, 33, 5, 1, 1, ident, 1, 3, 86);
		check_mul_mat(&w, &x, 1, "padded rows");
		free(w.data);
		free(x.data);

		/* Degenerate edges. */
		w = mk(wt, 1, 1, 1, 1, ident, 1, 0, 87);
		x = mk(PPRPC_F32, 1, 1, 1, 1, ident, 1, 0, 88);
		check_mul_mat(&w, &x, 1, "1x1x1");
		free(w.data);
		free(x.data);
		w = mk(wt, 64, 1, 1, 1, transp, 1, 0, 89);
		x = mk(PPRPC_F32, 64, 1, 4, 1, transp, 1, 0, 90);
		check_mul_mat(&w, &x, 1, "N=1 M=1");
		free(w.data);
		free(x.data);
	}
}

/* Zero row stride: every weight row is the same bytes (must be packed,
 * sgemm needs ld >= K). */
static void test_mul_mat_broadcast_rows(void **state)
{
	struct kern_tensor w = mk(PPRPC_F32, 9, 1, 1, 1, ident, 1, 0, 91);
	struct kern_tensor x = mk(PPRPC_F32, 9, 3, 1, 1, ident, 1, 0, 92);

	(void)state;
	w.ne[1] = 4;
	w.nb[1] = 0;
	check_mul_mat(&w, &x, 1, "zero-stride src0 rows");
	free(w.data);
	free(x.data);
}

static void test_mul_mat_large(void **state)
{
	/* Big enough that packing the f16 weights is split across threads. */
	struct kern_tensor w = mk(PPRPC_F16, 1024, BIG_ROWS, 1, 1, ident, 1, 0, 93);
	struct kern_tensor x = mk(PPRPC_F32, 1024, 3, 1, 1, ident, 1, 0, 94);

	(void)state;
	check_mul_mat(&w, &x, N_SPLIT_THREADS, "large f16");
	free(w.data);
	free(x.data);
}

/* ---- errors --------------------------------------------------------------------- */

static void test_run_errors(void **state)
{
	struct kern_tensor a = mk(PPRPC_F32, 4, 3, 1, 1, ident, 1, 0, 1);
	struct kern_tensor b = mk(PPRPC_F32, 5, 3, 1, 1, ident, 1, 0, 2);
	struct kern_tensor d = mk(PPRPC_F32, 4, 3, 1, 1, ident, 1, 0, 0);
	struct kern_tensor *src[2] = { &a, &a };
	struct kern_cpu_ctx ctx = { .nthreads = 1 }, zero = { .nthreads = 0 };
	void *keep;

	(void)state;
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_ADD, NULL, src, 2, &d), 0);
	assert_int_equal(kern_cpu_run(&zero, PPRPC_OP_ADD, NULL, src, 2, &d), PPRPC_EINVAL);
	assert_int_equal(kern_cpu_run(NULL, PPRPC_OP_ADD, NULL, src, 2, &d), PPRPC_EINVAL);
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_NONE, NULL, src, 2, &d), PPRPC_EINVAL);
	assert_int_equal(kern_cpu_run(&ctx, 1000, NULL, src, 2, &d), PPRPC_EINVAL);
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_ADD, NULL, src, 1, &d), PPRPC_EINVAL);
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_ADD, NULL, src, 2, NULL), PPRPC_EINVAL);
	assert_int_equal(run(1, PPRPC_OP_ADD, NULL, &a, &b, &d), PPRPC_ESHAPE);
	assert_int_equal(run(1, PPRPC_OP_MUL_MAT, NULL, &a, &b, &d), PPRPC_ESHAPE);
	keep = a.data;
	a.data = NULL;
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_ADD, NULL, src, 2, &d), PPRPC_EINVAL);
	a.data = keep;
	keep = d.data;
	d.data = NULL;
	assert_int_equal(kern_cpu_run(&ctx, PPRPC_OP_ADD, NULL, src, 2, &d), PPRPC_EINVAL);
	d.data = keep;
	free(a.data);
	free(b.data);
	free(d.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_binary_layouts),
		cmocka_unit_test(test_binary_zero_stride),
		cmocka_unit_test(test_binary_in_place),
		cmocka_unit_test(test_binary_threads),
		cmocka_unit_test(test_scale),
		cmocka_unit_test(test_cpy_all_pairs),
		cmocka_unit_test(test_cpy_bits),
		cmocka_unit_test(test_cpy_threads),
		cmocka_unit_test(test_mul_mat_layouts),
		cmocka_unit_test(test_mul_mat_broadcast_rows),
		cmocka_unit_test(test_mul_mat_large),
		cmocka_unit_test(test_run_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

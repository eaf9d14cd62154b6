/*
 * tests/unit/test_kernels_rope.c — ROPE: the CPU kernel against a float64
 * reference (both modes, partial rotation, linear position scaling, large
 * and negative positions, strided x and positions, in place, threaded), its
 * shape/dtype/parameter rules, and the client builder wrapper.
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

/* A rotated output is a*cos - b*sin (or a*sin + b*cos).  The kernel forms
 * it in double and rounds once: error <= 2^-24 |out| <= 2^-24 (|a| + |b|).
 * We allow 2^-22 (|a| + |b|): room for an implementation that evaluates
 * cos/sin and the products in f32 (about three roundings), but far below
 * any wrong angle, pair or sign.  Elements past n_dims are copied: exact. */
#define ROPE_TOL 0x1p-22

#define N_SPLIT_THREADS 4

static const int ident[4] = { 0, 1, 2, 3 };
static const int scramble[4] = { 2, 0, 1, 3 };

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

/* Contiguous f32 destination pre-filled with NaN (an unwritten element
 * shows). */
static struct kern_tensor mk_dst(const int64_t ne[4])
{
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, PPRPC_F32, ne, NULL, 1, 0), 0);
	ref_poison(&t);
	return t;
}

/* Positions i32 [n], element stride gap, values from vals cycled. */
static struct kern_tensor mk_pos(int64_t n, uint64_t gap, const int32_t *vals, int nvals)
{
	struct kern_tensor t = mk(PPRPC_I32, n, 1, 1, 1, ident, gap, 0, 0);

	for (int64_t k = 0; k < n; k++)
		*(int32_t *)ref_ptr(&t, k, 0, 0, 0) = vals[k % nvals];
	return t;
}

static struct pprpc_op_params rope_params(int mode, int n_dims, float base, float fscale)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.i[0] = mode;
	p.i[1] = n_dims;
	p.f[0] = base;
	p.f[1] = fscale;
	return p;
}

static int run_rope(int nthreads, const struct pprpc_op_params *p, struct kern_tensor *x,
		    struct kern_tensor *pos, struct kern_tensor *dst)
{
	struct kern_cpu_ctx ctx = { .nthreads = nthreads };
	struct kern_tensor *src[2] = { x, pos };

	return kern_cpu_run(&ctx, PPRPC_OP_ROPE, p, src, 2, dst);
}

/* want/tol in dst's logical order, computed from x as stored. */
static void rope_ref(const struct kern_tensor *x, const struct kern_tensor *pos,
		     const struct pprpc_op_params *p, double *want, double *tol)
{
	int64_t D = x->ne[0], H = x->ne[1], T = x->ne[2];
	int mode = p->i[0], n_dims = p->i[1], half = n_dims / 2;

	for (int64_t t = 0; t < T; t++) {
		int32_t ps = *(const int32_t *)ref_ptr(pos, t, 0, 0, 0);

		for (int64_t h = 0; h < H; h++) {
			double *w = want + (t * H + h) * D, *e = tol + (t * H + h) * D;

			for (int64_t i0 = 0; i0 < D; i0++) {
				w[i0] = ref_get(x, i0, h, t, 0);
				e[i0] = 0.0;
			}
			for (int i = 0; i < half; i++) {
				/* base^(-2i/n) as exp(-2i/n * ln base): not the
				 * kernel's pow(), an independent evaluation. */
				double theta = (double)ps * (double)p->f[1] *
					       exp(-2.0 * i / n_dims * log((double)p->f[0]));
				int64_t e0 = mode == PPRPC_ROPE_NEOX ? i : 2 * i;
				int64_t e1 = mode == PPRPC_ROPE_NEOX ? i + half : 2 * i + 1;
				double a = ref_get(x, e0, h, t, 0), b = ref_get(x, e1, h, t, 0);

				w[e0] = a * cos(theta) - b * sin(theta);
				w[e1] = a * sin(theta) + b * cos(theta);
				e[e0] = e[e1] = ROPE_TOL * (fabs(a) + fabs(b));
			}
		}
	}
}

static void expect_close(const struct kern_tensor *d, const double *want, const double *tol,
			 const char *what)
{
	int64_t n = kern_tensor_nelements(d), i[4];

	for (int64_t l = 0; l < n; l++) {
		double got;

		ref_unravel(d->ne, l, i);
		got = ref_get(d, i[0], i[1], i[2], i[3]);
		if (!(fabs(got - want[l]) <= tol[l]))
			fail_msg("%s: element [%lld,%lld,%lld]: got %.9g want %.9g tol %.3g", what,
				 (long long)i[0], (long long)i[1], (long long)i[2], got, want[l],
				 tol[l]);
	}
}

static void check_rope(struct kern_tensor *x, struct kern_tensor *pos,
		       const struct pprpc_op_params *p, int nthreads, bool in_place,
		       const char *what)
{
	int64_t n = kern_tensor_nelements(x);
	double *want = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
	struct kern_tensor d;
	char name[160];

	assert_non_null(want);
	assert_non_null(tol);
	rope_ref(x, pos, p, want, tol);
	if (in_place)
		d = *x;
	else
		d = mk_dst(x->ne);
	assert_int_equal(run_rope(nthreads, p, x, pos, &d), 0);
	snprintf(name, sizeof(name), "ROPE mode %d n_dims %d/%lld base %g scale %g, %s",
		 p->i[0], p->i[1], (long long)x->ne[0], p->f[0], p->f[1], what);
	expect_close(&d, want, tol, name);
	if (!in_place)
		free(d.data);
	free(want);
	free(tol);
}

/* Positions: 0, small, large (where an f32 theta would already be off by
 * 1e-2 rad), negative. */
static const int32_t positions[] = { 0, 1, 7, 4093, 100000, 1 << 20, -3, 31 };
#define NPOS ((int)(sizeof(positions) / sizeof(positions[0])))

static void test_rope_modes_full(void **state)
{
	const int modes[2] = { PPRPC_ROPE_NORMAL, PPRPC_ROPE_NEOX };
	const int64_t dims[3] = { 64, 128, 256 };

	(void)state;
	for (int m = 0; m < 2; m++) {
		for (int di = 0; di < 3; di++) {
			struct kern_tensor x = mk(PPRPC_F32, dims[di], 4, NPOS, 1, ident, 1, 0, 101);
			struct kern_tensor pos = mk_pos(NPOS, 1, positions, NPOS);
			struct pprpc_op_params p = rope_params(modes[m], (int)dims[di], 10000.0f,
							       1.0f);

			check_rope(&x, &pos, &p, 1, false, "contiguous");
			free(x.data);
			free(pos.data);
		}
	}
}

/* Partial rotation (the rest passes through), odd head_dim, linear scaling
 * and another base. */
static void test_rope_partial_scaled(void **state)
{
	const int modes[2] = { PPRPC_ROPE_NORMAL, PPRPC_ROPE_NEOX };
	const struct { int64_t D; int n_dims; float base, fscale; } cases[] = {
		{ 64, 32, 10000.0f, 1.0f },
		{ 128, 64, 500000.0f, 0.25f },
		{ 37, 20, 10000.0f, 0.5f },
		{ 37, 36, 1000.0f, 4.0f },
		{ 2, 2, 10000.0f, 1.0f },
		{ 5, 2, 10.0f, 1.5f },
	};

	(void)state;
	for (int m = 0; m < 2; m++) {
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			struct kern_tensor x = mk(PPRPC_F32, cases[c].D, 3, 5, 1, ident, 1, 0,
						  200 + c);
			struct kern_tensor pos = mk_pos(5, 1, positions + 2, NPOS - 2);
			struct pprpc_op_params p = rope_params(modes[m], cases[c].n_dims,
							       cases[c].base, cases[c].fscale);

			check_rope(&x, &pos, &p, 1, false, "partial/scaled");
			free(x.data);
			free(pos.data);
		}
	}
}

/* x a scrambled, gapped view (e.g. q after a permute); positions strided. */
static void test_rope_strided(void **state)
{
	const int modes[2] = { PPRPC_ROPE_NORMAL, PPRPC_ROPE_NEOX };

	(void)state;
	for (int m = 0; m < 2; m++) {
		struct kern_tensor x = mk(PPRPC_F32, 48, 3, 7, 1, scramble, 2, 1, 301);
		struct kern_tensor pos = mk_pos(7, 3, positions, NPOS);
		struct pprpc_op_params p = rope_params(modes[m], 40, 10000.0f, 1.0f);

		check_rope(&x, &pos, &p, 1, false, "scrambled x, strided positions");
		check_rope(&x, &pos, &p, 3, false, "scrambled x, 3 threads");
		free(x.data);
		free(pos.data);
	}
}

static void test_rope_in_place(void **state)
{
	const int modes[2] = { PPRPC_ROPE_NORMAL, PPRPC_ROPE_NEOX };

	(void)state;
	for (int m = 0; m < 2; m++) {
		struct kern_tensor x = mk(PPRPC_F32, 64, 4, 6, 1, ident, 1, 0, 401);
		struct kern_tensor pos = mk_pos(6, 1, positions, NPOS);
		struct pprpc_op_params p = rope_params(modes[m], 48, 10000.0f, 1.0f);

		check_rope(&x, &pos, &p, 1, true, "in place");
		free(x.data);
		free(pos.data);
	}
}

/* Over the single-thread threshold: rows split across threads, and a
 * range may start in the middle of a token's heads. */
static void test_rope_threads(void **state)
{
	struct kern_tensor x = mk(PPRPC_F32, 128, 9, 1000, 1, ident, 1, 0, 501);
	struct kern_tensor pos = mk_pos(1000, 1, positions, NPOS);
	struct pprpc_op_params p = rope_params(PPRPC_ROPE_NEOX, 128, 10000.0f, 1.0f);

	(void)state;
	check_rope(&x, &pos, &p, N_SPLIT_THREADS, false, "large threaded");
	p = rope_params(PPRPC_ROPE_NORMAL, 96, 10000.0f, 0.125f);
	check_rope(&x, &pos, &p, 7, false, "large threaded, 7 threads");
	free(x.data);
	free(pos.data);
}

/* ---- rules ------------------------------------------------------------------------ */

static struct kern_tensor T(int dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(kern_tensor_init_contig(&t, dtype, ne), 0);
	return t;
}

static int infer(const struct pprpc_op_params *p, struct kern_tensor x, struct kern_tensor pos,
		 struct kern_tensor *out, char *err)
{
	const struct kern_tensor *src[2] = { &x, &pos };

	err[0] = 0;
	return kern_op_infer(PPRPC_OP_ROPE, p, src, 2, out, err, 160);
}

static void test_rope_rules(void **state)
{
	struct kern_tensor x = T(PPRPC_F32, 128, 8, 5, 1), pos = T(PPRPC_I32, 5, 1, 1, 1), out;
	struct pprpc_op_params p = rope_params(PPRPC_ROPE_NEOX, 64, 10000.0f, 1.0f), b;
	const struct kern_tensor *src[2] = { &x, &pos };
	char err[160];

	(void)state;
	assert_int_equal(kern_op_nsrc(PPRPC_OP_ROPE), 2);
	assert_string_equal(kern_op_name(PPRPC_OP_ROPE), "ROPE");

	assert_int_equal(infer(&p, x, pos, &out, err), 0);
	assert_int_equal(out.dtype, PPRPC_F32);
	assert_memory_equal(out.ne, x.ne, sizeof(out.ne));
	assert_true(kern_tensor_is_contiguous(&out));
	/* Non-contiguous x is fine; the output is contiguous. */
	{
		struct kern_tensor xv = x;

		xv.ne[1] = 5;
		xv.ne[2] = 8;
		xv.nb[1] = x.nb[2];
		xv.nb[2] = x.nb[1];
		pos = T(PPRPC_I32, 8, 1, 1, 1);
		assert_int_equal(infer(&p, xv, pos, &out, err), 0);
		assert_true(kern_tensor_is_contiguous(&out));
		pos = T(PPRPC_I32, 5, 1, 1, 1);
	}
	b = p;
	b.i[1] = 128;
	assert_int_equal(infer(&b, x, pos, &out, err), 0);

	/* n_dims: odd, zero, negative, larger than head_dim. */
	b = p;
	b.i[1] = 63;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
	assert_non_null(strstr(err, "n_dims"));
	b.i[1] = 0;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
	b.i[1] = -2;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
	b.i[1] = 130;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_ESHAPE);
	assert_non_null(strstr(err, "head_dim"));
	/* Modes other than 0 and 2 (ggml's MROPE 8, vision 24, ...). */
	for (int m = -1; m <= 24; m++) {
		b = p;
		b.i[0] = m;
		assert_int_equal(infer(&b, x, pos, &out, err),
				 m == 0 || m == 2 ? 0 : PPRPC_EINVAL);
	}
	/* freq_base and freq_scale: zero (forgotten), negative, inf, NaN. */
	{
		const float bad[4] = { 0.0f, -1.0f, INFINITY, NAN };

		for (int k = 0; k < 4; k++) {
			b = p;
			b.f[0] = bad[k];
			assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
			b = p;
			b.f[1] = bad[k];
			assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
		}
	}
	assert_int_equal(infer(NULL, x, pos, &out, err), PPRPC_EINVAL);
	/* Unused parameters must be zero. */
	b = p;
	b.f[2] = 1.0f;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);
	b = p;
	b.i[2] = 1;
	assert_int_equal(infer(&b, x, pos, &out, err), PPRPC_EINVAL);

	/* Positions: count mismatch, not 1-D, wrong dtype. */
	assert_int_equal(infer(&p, x, T(PPRPC_I32, 4, 1, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_non_null(strstr(err, "position"));
	assert_int_equal(infer(&p, x, T(PPRPC_I32, 6, 1, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, x, T(PPRPC_I32, 5, 2, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, x, T(PPRPC_I32, 1, 5, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer(&p, x, T(PPRPC_F32, 5, 1, 1, 1), &out, err), PPRPC_ETYPE);
	/* x: wrong dtype, batch dim. */
	assert_int_equal(infer(&p, T(PPRPC_F16, 128, 8, 5, 1), pos, &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, T(PPRPC_BF16, 128, 8, 5, 1), pos, &out, err), PPRPC_ETYPE);
	assert_int_equal(infer(&p, T(PPRPC_F32, 128, 8, 5, 2), pos, &out, err), PPRPC_ESHAPE);

	/* Destination: the inferred one, else rejected. */
	out = T(PPRPC_F32, 128, 8, 5, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ROPE, &p, src, 2, &out, err, 160), 0);
	out = T(PPRPC_F32, 128, 5, 8, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ROPE, &p, src, 2, &out, err, 160),
			 PPRPC_ESHAPE);
	out = T(PPRPC_F16, 128, 8, 5, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ROPE, &p, src, 2, &out, err, 160),
			 PPRPC_ETYPE);
	out = T(PPRPC_F32, 128, 8, 5, 1);
	out.nb[1] *= 2;
	out.nb[2] *= 2;
	out.nb[3] *= 2;
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ROPE, &p, src, 2, &out, err, 160),
			 PPRPC_ESHAPE);
}

/* ---- client builder ------------------------------------------------------------------ */

static void test_rope_builder(void **state)
{
	pprpc_graph_builder *gb;
	pprpc_tensor tx = pprpc_tensor_make((pprpc_buffer){ 1 }, 0, PPRPC_F32, 64, 4, 3, 1);
	pprpc_tensor tp = pprpc_tensor_make((pprpc_buffer){ 2 }, 0, PPRPC_I32, 3, 1, 1, 1);
	pprpc_tensor tbad = pprpc_tensor_make((pprpc_buffer){ 2 }, 0, PPRPC_I32, 4, 1, 1, 1), out;
	int x, pos, bad, y;

	(void)state;
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	x = pprpc_gb_tensor(gb, &tx);
	pos = pprpc_gb_tensor(gb, &tp);
	bad = pprpc_gb_tensor(gb, &tbad);
	assert_true(x >= 0 && pos >= 0 && bad >= 0);
	y = pprpc_gb_rope(gb, x, pos, PPRPC_ROPE_NEOX, 32, 10000.0f, 0.5f, -1);
	assert_true(y >= 0);
	assert_int_equal(pprpc_gb_tensor_get(gb, y, &out), 0);
	assert_int_equal(out.dtype, PPRPC_F32);
	assert_int_equal(out.ne[0], 64);
	assert_int_equal(out.ne[1], 4);
	assert_int_equal(out.ne[2], 3);
	assert_int_equal(pprpc_gb_node_count(gb), 1);
	/* In place on x. */
	assert_int_equal(pprpc_gb_rope(gb, x, pos, PPRPC_ROPE_NORMAL, 64, 10000.0f, 1.0f, x), x);
	assert_int_equal(pprpc_gb_rope(gb, x, pos, PPRPC_ROPE_NEOX, 33, 10000.0f, 1.0f, -1),
			 PPRPC_EINVAL);
	assert_non_null(strstr(pprpc_gb_error(gb), "n_dims"));
	assert_int_equal(pprpc_gb_rope(gb, x, bad, PPRPC_ROPE_NEOX, 32, 10000.0f, 1.0f, -1),
			 PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_node_count(gb), 2);
	pprpc_graph_builder_free(gb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rope_modes_full),
		cmocka_unit_test(test_rope_partial_scaled),
		cmocka_unit_test(test_rope_strided),
		cmocka_unit_test(test_rope_in_place),
		cmocka_unit_test(test_rope_threads),
		cmocka_unit_test(test_rope_rules),
		cmocka_unit_test(test_rope_builder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

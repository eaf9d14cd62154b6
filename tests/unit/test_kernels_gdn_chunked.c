/*
 * tests/unit/test_kernels_gdn_chunked.c — GATED_DELTA_NET's chunked (WY /
 * UT) CPU form: against a float64 reference of the recurrence (ops.h) and
 * against the serial kernel, for GDN and KDA gates, every chunk length,
 * ragged tails, several sequences, strongly negative gates; the path
 * choice and its counters; the i[1] / i[2] rules.
 *
 * Tolerance: as tests/unit/test_kernels_gdn.c, per element
 *     |got - want| <= RTOL * (|want| + M),  RTOL = 1e-5,
 * M = |scale| * sum_i |S_ij q_i| for an output element (the magnitude its
 * final dot product sums) and the RMS of its (sequence, head) state matrix
 * for a state element.  The chunked form reorders the same sums into
 * sgemms and a triangular solve; its decays are products of per-token
 * factors <= 1 (no exp of a difference of cumulative sums).  GDN_VERBOSE=1
 * prints the worst err / (|want| + M) per case.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "tests/unit/ref_gdn.h"

#define RTOL 1e-5

struct ccase {
	int64_t dk, dv, hk, hv, T, B;
	bool kda, l2, strided;
	bool tiled;       /* i[3] = 1: value head h reads q/k head h % hk */
	int chunk;        /* i[1]; 0 = automatic */
	int serial;       /* i[2] */
	float gmin;       /* gates in [gmin, 0] */
	bool extreme;     /* KDA: some channels at -30 / -inf, others ~0 */
	int nthreads;
	uint64_t seed;
};

struct cin {
	struct kern_tensor src[6];
};

static void cin_free(struct cin *in)
{
	for (int i = 0; i < 6; i++)
		free(in->src[i].data);
}

static void make_inputs(const struct ccase *c, struct cin *in)
{
	const int64_t G = c->kda ? c->dk : 1;
	const int64_t ne[6][4] = {
		{ c->dk, c->hk, c->T, c->B }, { c->dk, c->hk, c->T, c->B },
		{ c->dv, c->hv, c->T, c->B }, { G, c->hv, c->T, c->B },
		{ 1, c->hv, c->T, c->B }, { c->dk, c->dv, c->hv, c->B },
	};
	static const int perm[6][4] = { { 1, 0, 2, 3 }, { 2, 0, 1, 3 }, { 0, 2, 1, 3 },
					{ 1, 2, 0, 3 }, { 3, 2, 1, 0 }, { 1, 0, 2, 3 } };
	uint64_t seed = c->seed;
	struct kern_tensor *s = in->src;

	for (int i = 0; i < 6; i++)
		assert_int_equal(ref_alloc(&s[i], PPRPC_F32, ne[i], c->strided ? perm[i] : NULL,
					   c->strided && i % 2 ? 2 : 1, 0), 0);
	ref_fill_range(&s[0], seed++, -1, 1);
	ref_fill_range(&s[1], seed++, -1, 1);
	if (!c->l2)
		ref_normalise_rows(&s[1]);  /* unit-length k, as a model's own norm leaves it */
	ref_fill_range(&s[2], seed++, -1, 1);
	ref_fill_range(&s[3], seed++, c->gmin, 0);
	if (c->extreme) {
		/* Per channel: a third of the channels decay at -30 per token,
		 * a few tokens hit -inf, the rest barely decay. */
		uint64_t r = seed++;

		for (int64_t b = 0; b < c->B; b++)
			for (int64_t t = 0; t < c->T; t++)
				for (int64_t h = 0; h < c->hv; h++)
					for (int64_t i = 0; i < G; i++) {
						double u = 0.5 * (ref_rand(&r) + 1.0), g;

						g = i % 3 == 0 ? -30.0 + u : i % 3 == 1 ? -0.01 * u
											  : -3.0 * u;
						if (t % 37 == 5 && i % 7 == 0)
							g = -INFINITY;
						ref_set(&s[3], i, h, t, b, g);
					}
	}
	ref_fill_range(&s[4], seed++, 0.02, 0.98);
	ref_fill_range(&s[5], seed++, -0.5, 0.5);
}

static float case_scale(const struct ccase *c)
{
	return (float)(1.0 / sqrt((double)c->dk));
}

static struct pprpc_op_params params(const struct ccase *c)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = case_scale(c);
	if (c->l2) {
		p.i[0] = 1;
		p.f[1] = 1e-6f;
	}
	p.i[1] = c->chunk;
	p.i[2] = c->serial;
	p.i[3] = c->tiled;
	return p;
}

static int64_t packed_len(const struct ccase *c)
{
	return c->dv * c->hv * c->T * c->B + c->dk * c->dv * c->hv * c->B;
}

static struct kern_tensor mk_packed(int64_t n)
{
	const int64_t ne[4] = { n, 1, 1, 1 };
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, PPRPC_F32, ne, NULL, 1, 0), 0);
	for (int64_t l = 0; l < n; l++)
		((float *)t.data)[l] = NAN;
	return t;
}

static int run(const struct ccase *c, const struct pprpc_op_params *p, struct cin *in,
	       struct kern_tensor *dst, struct kern_gdn_stats *st)
{
	struct kern_cpu_ctx ctx = { .nthreads = c->nthreads ? c->nthreads : 1, .gdn_stats = st };
	struct kern_tensor *sp[6] = { &in->src[0], &in->src[1], &in->src[2], &in->src[3],
				      &in->src[4], &in->src[5] };

	return kern_cpu_run(&ctx, PPRPC_OP_GATED_DELTA_NET, p, sp, 6, dst);
}

static bool verbose(void)
{
	const char *e = getenv("GDN_VERBOSE");

	return e && *e == '1';
}

static void name_of(const struct ccase *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s dk=%lld dv=%lld hk=%lld hv=%lld T=%lld B=%lld C=%d l2=%d%s%s%s",
		 c->kda ? "KDA" : "GDN", (long long)c->dk, (long long)c->dv, (long long)c->hk,
		 (long long)c->hv, (long long)c->T, (long long)c->B, c->chunk, c->l2,
		 c->strided ? " strided" : "", c->extreme ? " extreme-gates" : "", c->tiled ? " tiled" : "");
}

/* got (packed) against the reference; returns the worst err / bound. */
static double compare(const struct ccase *c, const float *got, const double *want,
		      const double *mag, double tol, const char *what)
{
	const int64_t n = packed_len(c), n_o = c->dv * c->hv * c->T * c->B;
	double worst = 0;
	char name[200];

	name_of(c, name, sizeof(name));
	for (int64_t l = 0; l < n; l++) {
		double bound = fabs(want[l]) + mag[l], err = fabs(got[l] - want[l]);

		if (!(err <= tol * bound))
			fail_msg("%s %s: %s element %lld: got %.9g want %.9g (err %.3g, bound %.3g)",
				 name, what, l < n_o ? "o" : "state",
				 (long long)(l < n_o ? l : l - n_o), (double)got[l], want[l], err,
				 tol * bound);
		if (bound > 0 && err / bound > worst)
			worst = err / bound;
	}
	if (verbose())
		printf("  %-72s %s worst err/bound %.3g\n", name, what, worst);
	return worst;
}

/* Run chunked (as c says) and serial; both against float64, and the chunked
 * result against the serial one.  The counters must show the chunked path
 * with c->chunk (or the default). */
static void check(const struct ccase *c)
{
	const int64_t n = packed_len(c);
	struct ccase cs = *c;
	struct pprpc_op_params p = params(c), ps;
	struct kern_tensor d_ch = mk_packed(n), d_se = mk_packed(n);
	double *want = malloc((size_t)n * sizeof(double)), *mag = malloc((size_t)n * sizeof(double));
	double *se = malloc((size_t)n * sizeof(double));
	struct kern_gdn_stats st = { 0 };
	struct cin in;
	int ci = (c->chunk ? c->chunk : KERN_GDN_CHUNK_DEFAULT) / 32;  /* 16,32,64 -> 0,1,2 */

	assert_true(want && mag && se);
	make_inputs(c, &in);
	assert_int_equal(ref_gdn_bcast(in.src, c->kda, c->l2, c->tiled, case_scale(c), want, mag), 0);
	assert_int_equal(run(c, &p, &in, &d_ch, &st), 0);
	assert_int_equal(st.chunked[ci], 1);
	assert_int_equal(st.serial, 0);
	compare(c, d_ch.data, want, mag, RTOL, "chunked-vs-f64");

	cs.chunk = 0;
	cs.serial = 1;
	ps = params(&cs);
	assert_int_equal(run(&cs, &ps, &in, &d_se, &st), 0);
	assert_int_equal(st.serial, 1);
	compare(c, d_se.data, want, mag, RTOL, "serial-vs-f64");
	/* Chunked against the serial f32 kernel, bound from the reference. */
	for (int64_t l = 0; l < n; l++)
		se[l] = ((float *)d_se.data)[l];
	compare(c, d_ch.data, se, mag, 2 * RTOL, "chunked-vs-serial");

	cin_free(&in);
	free(d_ch.data);
	free(d_se.data);
	free(want);
	free(mag);
	free(se);
}

/* ---- parity ----------------------------------------------------------- */

/* The spec's grid: T in {1, 2, 31, 32, 33, 128, 512, 2048}, head dims 64
 * and 128, GDN and KDA, two value heads per q/k head, default chunk. */
static void test_parity_grid(void **state)
{
	static const int64_t Ts[] = { 1, 2, 31, 32, 33, 128, 512, 2048 };
	int idx = 0;

	(void)state;
	for (int kda = 0; kda < 2; kda++)
		for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++)
			for (int64_t d = 64; d <= 128; d += 64, idx++) {
				const int64_t T = Ts[ti];
				struct ccase c = {
					.dk = d, .dv = d, .T = T, .kda = kda,
					/* long runs with few heads keep make test fast */
					.hk = T >= 512 ? 1 : 2, .hv = T >= 512 ? 2 : 4,
					.B = T >= 512 ? 1 : 2, .l2 = idx % 2,
					/* ggml's head order on every other short case */
					.tiled = T < 512 && idx % 4 >= 2,
					.chunk = KERN_GDN_CHUNK_DEFAULT,
					.gmin = idx % 3 == 0 ? -0.02f : -1.0f,
					.nthreads = 2, .seed = 7000 + 31 * (uint64_t)idx,
				};

				if (T == 2048 && d == 64)
					continue;  /* one long case per kind is enough */
				check(&c);
			}
}

/* Every chunk length, with ragged tails (T not a multiple of C, shorter than
 * one chunk, one past a boundary) and d_k != d_v. */
static void test_chunk_lengths_tails(void **state)
{
	static const int64_t Ts[] = { 15, 17, 47, 65, 100 };
	int idx = 0;

	(void)state;
	for (int kda = 0; kda < 2; kda++)
		for (int ch = 16; ch <= 64; ch *= 2)
			for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++, idx++) {
				struct ccase c = {
					.dk = idx % 2 ? 48 : 64, .dv = idx % 2 ? 80 : 32, .hk = 1,
					.hv = 2, .T = Ts[ti], .B = 2, .kda = kda, .l2 = true,
					.strided = idx % 4 == 1, .chunk = ch, .gmin = -0.7f,
					.nthreads = 1 + idx % 3, .seed = 100 + (uint64_t)idx,
				};

				check(&c);
			}
}

/* Strongly negative and -inf gates, per channel (KDA) and per head (GDN
 * down to -30): no overflow, no NaN, still the reference. */
static void test_extreme_gates(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++)
		for (int ch = 16; ch <= 64; ch *= 2) {
			struct ccase c = { .dk = 64, .dv = 64, .hk = 1, .hv = 2, .T = 150, .B = 1,
					   .kda = kda, .l2 = true, .chunk = ch,
					   .gmin = -30.0f, .extreme = kda, .nthreads = 2,
					   .seed = 4000 + (uint64_t)(ch + kda) };

			check(&c);
		}
}

/* No decay over a long run: the state only accumulates. */
static void test_no_decay(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		struct ccase c = { .dk = 128, .dv = 128, .hk = 1, .hv = 1, .T = 512, .B = 1,
				   .kda = kda, .l2 = true, .chunk = 64, .gmin = 0.0f,
				   .nthreads = 1, .seed = 91 + (uint64_t)kda };

		check(&c);
	}
}

/* ---- structure -------------------------------------------------------- */

static void expect_same_bits(const float *a, const float *b, int64_t n, const char *what)
{
	for (int64_t l = 0; l < n; l++)
		if (memcmp(&a[l], &b[l], sizeof(float)) != 0)
			fail_msg("%s: element %lld differs: %.9g vs %.9g", what, (long long)l,
				 (double)a[l], (double)b[l]);
}

/* Two sequences with different content in one call: each equals the
 * one-sequence call on its own, bit for bit, and the result does not
 * depend on the thread count. */
static void test_batch_and_threads(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		struct ccase c = { .dk = 64, .dv = 64, .hk = 1, .hv = 3, .T = 70, .B = 2,
				   .kda = kda, .l2 = true, .chunk = 32, .gmin = -0.5f,
				   .nthreads = 1, .seed = 300 + (uint64_t)kda };
		struct ccase c1 = c;
		const int64_t n = packed_len(&c), n_o = c.dv * c.hv * c.T * c.B;
		struct pprpc_op_params p = params(&c);
		struct kern_tensor d1 = mk_packed(n), d3 = mk_packed(n), one;
		struct cin in, in1;

		make_inputs(&c, &in);
		assert_int_equal(run(&c, &p, &in, &d1, NULL), 0);
		c.nthreads = 3;
		assert_int_equal(run(&c, &p, &in, &d3, NULL), 0);
		expect_same_bits(d1.data, d3.data, n, "3 threads vs 1");

		/* Sequence 1 alone: views of the second sequence. */
		c1.B = 1;
		for (int s = 0; s < 6; s++) {
			in1.src[s] = in.src[s];
			in1.src[s].ne[3] = 1;
			in1.src[s].data = (char *)in.src[s].data + in.src[s].nb[3];
		}
		one = mk_packed(packed_len(&c1));
		assert_int_equal(run(&c1, &p, &in1, &one, NULL), 0);
		expect_same_bits((float *)d1.data + n_o / 2, one.data, n_o / 2, "sequence 1: o");
		expect_same_bits((float *)d1.data + n_o + c.dk * c.dv * c.hv,
				 (float *)one.data + n_o / 2, c.dk * c.dv * c.hv,
				 "sequence 1: state");
		/* and the two sequences differ */
		assert_true(memcmp(d1.data, (float *)d1.data + n_o / 2,
				   (size_t)(n_o / 2) * sizeof(float)) != 0);
		cin_free(&in);
		free(d1.data);
		free(d3.data);
		free(one.data);
	}
}

/* State in / state out: T split into calls (chunked each) equals one call
 * within tolerance, and the final state of the first call feeds the next. */
static void test_state_carry(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		struct ccase c = { .dk = 64, .dv = 32, .hk = 1, .hv = 2, .T = 200, .B = 2,
				   .kda = kda, .l2 = true, .chunk = 64, .gmin = -0.3f,
				   .nthreads = 2, .seed = 800 + (uint64_t)kda };
		const int64_t cut = 77, n = packed_len(&c), n_o = c.dv * c.hv * c.T * c.B;
		const int64_t n_s = c.dk * c.dv * c.hv * c.B;
		double *want = malloc((size_t)n * sizeof(double)), *mag = malloc((size_t)n * sizeof(double));
		float *got = malloc((size_t)n * sizeof(float));
		struct pprpc_op_params p = params(&c);
		struct ccase part = c;
		struct cin in, pin;
		struct kern_tensor d[2];
		const int64_t t0s[2] = { 0, cut }, nts[2] = { cut, c.T - cut };

		assert_true(want && mag && got);
		make_inputs(&c, &in);
		assert_int_equal(ref_gdn(in.src, c.kda, c.l2, case_scale(&c), want, mag), 0);
		for (int call = 0; call < 2; call++) {
			const int64_t s_ne[4] = { c.dk, c.dv, c.hv, c.B };

			part.T = nts[call];
			for (int s = 0; s < 5; s++) {
				pin.src[s] = in.src[s];
				pin.src[s].ne[2] = nts[call];
				pin.src[s].data = (char *)in.src[s].data + t0s[call] * in.src[s].nb[2];
			}
			if (call == 0) {
				pin.src[5] = in.src[5];
			} else {
				assert_int_equal(kern_tensor_init_contig(&pin.src[5], PPRPC_F32, s_ne), 0);
				pin.src[5].data = (float *)d[0].data + c.dv * c.hv * cut * c.B;
			}
			d[call] = mk_packed(packed_len(&part));
			assert_int_equal(run(&part, &p, &pin, &d[call], NULL), 0);
			for (int64_t b = 0; b < c.B; b++)
				memcpy(got + (b * c.T + t0s[call]) * c.hv * c.dv,
				       (float *)d[call].data + b * nts[call] * c.hv * c.dv,
				       (size_t)(nts[call] * c.hv * c.dv) * sizeof(float));
		}
		memcpy(got + n_o, (float *)d[1].data + c.dv * c.hv * (c.T - cut) * c.B,
		       (size_t)n_s * sizeof(float));
		compare(&c, got, want, mag, RTOL, "split-77+123");
		cin_free(&in);
		free(d[0].data);
		free(d[1].data);
		free(want);
		free(mag);
		free(got);
	}
}

/* ---- path choice ------------------------------------------------------ */

static void test_dispatch_counters(void **state)
{
	struct ccase c = { .dk = 32, .dv = 16, .hk = 1, .hv = 2, .B = 1, .kda = true,
			   .l2 = true, .gmin = -0.5f, .nthreads = 1, .seed = 55 };
	struct kern_gdn_stats st = { 0 }, snap;
	const int def = KERN_GDN_CHUNK_DEFAULT / 32;

	(void)state;
	/* Decode and short inputs: serial; long: chunked, default C. */
	for (int pass = 0; pass < 4; pass++) {
		c.T = pass == 0 ? 1 : pass == 1 ? KERN_GDN_CHUNK_MIN_T - 1
			: pass == 2 ? KERN_GDN_CHUNK_MIN_T : 3 * KERN_GDN_CHUNK_MIN_T + 5;
		{
			struct pprpc_op_params p = params(&c);
			struct kern_tensor d = mk_packed(packed_len(&c));
			struct cin in;

			make_inputs(&c, &in);
			assert_int_equal(run(&c, &p, &in, &d, &st), 0);
			cin_free(&in);
			free(d.data);
		}
	}
	kern_gdn_stats_read(&st, &snap);
	assert_int_equal(snap.serial, 2);
	assert_int_equal(snap.chunked[def], 2);

	/* i[2] = 1 at long T: serial.  i[1] = 16 at T = 1: chunked. */
	{
		struct ccase c2 = c;
		struct pprpc_op_params p;
		struct kern_tensor d;
		struct cin in;

		c2.T = 200;
		c2.serial = 1;
		p = params(&c2);
		d = mk_packed(packed_len(&c2));
		make_inputs(&c2, &in);
		assert_int_equal(run(&c2, &p, &in, &d, &st), 0);
		assert_int_equal(st.serial, 3);
		cin_free(&in);
		free(d.data);

		c2.T = 1;
		c2.serial = 0;
		c2.chunk = 16;
		p = params(&c2);
		d = mk_packed(packed_len(&c2));
		make_inputs(&c2, &in);
		assert_int_equal(run(&c2, &p, &in, &d, &st), 0);
		assert_int_equal(st.chunked[0], 1 + (def == 0 ? 2 : 0));
		cin_free(&in);
		free(d.data);
	}

	/* A NaN gate: the serial form runs (counted as a fallback) and gives
	 * its exact result: NaN only from that token on. */
	{
		struct ccase c3 = c;
		struct pprpc_op_params p;
		struct kern_tensor d, ds;
		struct cin in;
		const int64_t bad_t = 100;

		c3.T = 160;
		c3.chunk = 32;
		p = params(&c3);
		d = mk_packed(packed_len(&c3));
		ds = mk_packed(packed_len(&c3));
		make_inputs(&c3, &in);
		ref_set(&in.src[3], 3, 1, bad_t, 0, NAN);
		assert_int_equal(run(&c3, &p, &in, &d, &st), 0);
		assert_int_equal(st.fallback[KERN_GDN_FB_NAN_GATE], 1);
		c3.chunk = 0;
		c3.serial = 1;
		p = params(&c3);
		assert_int_equal(run(&c3, &p, &in, &ds, &st), 0);
		expect_same_bits(d.data, ds.data, packed_len(&c3), "NaN gate: fallback = serial");
		for (int64_t l = 0; l < c3.dv * c3.hv * bad_t; l++)
			assert_false(isnan(((float *)d.data)[l]));
		assert_true(isnan(((float *)d.data)[c3.dv * c3.hv * bad_t + c3.dv]));
		cin_free(&in);
		free(d.data);
		free(ds.data);
	}
	assert_string_equal(kern_gdn_fallback_name(KERN_GDN_FB_NAN_GATE), "nan-gate");
	assert_string_equal(kern_gdn_fallback_name(KERN_GDN_FB_COUNT), "?");
}

/* ---- rules ------------------------------------------------------------- */

static void test_rules_chunk_params(void **state)
{
	struct ccase c = { .dk = 8, .dv = 4, .hk = 1, .hv = 2, .T = 5, .B = 1, .l2 = false,
			   .gmin = -1.0f, .seed = 9 };
	static const int ok_chunk[] = { 0, 16, 32, 64 }, bad_chunk[] = { 1, 8, 48, 128, -16 };
	struct cin in;
	struct kern_tensor out;
	const struct kern_tensor *sp[6];
	char err[200];

	(void)state;
	make_inputs(&c, &in);
	for (int s = 0; s < 6; s++)
		sp[s] = &in.src[s];
	for (size_t i = 0; i < sizeof(ok_chunk) / sizeof(ok_chunk[0]); i++) {
		struct pprpc_op_params p = params(&c);

		p.i[1] = ok_chunk[i];
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), 0);
	}
	for (size_t i = 0; i < sizeof(bad_chunk) / sizeof(bad_chunk[0]); i++) {
		struct pprpc_op_params p = params(&c);

		p.i[1] = bad_chunk[i];
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "i[1]"));
	}
	{
		struct pprpc_op_params p = params(&c);

		p.i[2] = 1;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), 0);
		p.i[2] = 2;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "i[2]"));
		p.i[2] = 1;
		p.i[1] = 32;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "exclude"));
		/* i[3] is the head order (0 or 1); i[4] the CUDA chunked form's
		 * precision (0 or 1); i[5] on are unused. */
		p = params(&c);
		p.i[3] = 1;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), 0);
		p.i[3] = 2;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "i[3]"));
		p = params(&c);
		p.i[4] = 1;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), 0);
		p.i[4] = 2;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "i[4]"));
		p = params(&c);
		p.i[5] = 1;
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, sp, 6, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
		assert_non_null(strstr(err, "i[5]"));
	}
	cin_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rules_chunk_params),
		cmocka_unit_test(test_dispatch_counters),
		cmocka_unit_test(test_parity_grid),
		cmocka_unit_test(test_chunk_lengths_tails),
		cmocka_unit_test(test_extreme_gates),
		cmocka_unit_test(test_no_decay),
		cmocka_unit_test(test_batch_and_threads),
		cmocka_unit_test(test_state_carry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

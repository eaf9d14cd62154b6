/*
 * tests/unit/test_kernels_gdn.c — GATED_DELTA_NET: shape and parameter
 * rules, the CPU kernel against a float64 reference of the recurrence
 * written here (GDN and KDA gates, head sharing, in-op L2 norm, strided
 * and fused-projection views, carried state), and the graph-builder
 * helpers that pack and unpack its output.
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
#include "tests/unit/ref_gdn.h"

/* Tolerance.  The kernel keeps the state in f32 and evaluates each step as
 * two d_k-long f32 dot products per state column.  A dot product's rounding
 * is bounded by gamma_{d_k} * sum |terms| (~ d_k * 2^-24, 7.6e-6 for
 * d_k = 128, worst case; typically sqrt(d_k) times less), and the delta
 * rule with ||k|| <= 1, 0 < beta < 1 and decay <= 1 does not amplify the
 * state error from step to step (I - beta k k^T and D are contractions), so
 * errors accumulate at most additively over T and in practice as a random
 * walk.  Per element we therefore require
 *     |got - want| <= RTOL * (|want| + M)
 * where M is the magnitude of what the element sums: for an output o_j,
 * |scale| * sum_i |S_ij q_i| (the final dot product); for a state element,
 * the RMS of its (sequence, head) state matrix.  RTOL = 1e-5 (f32 has
 * 6e-8 unit roundoff).  GDN_VERBOSE=1 prints the worst err / (|want| + M)
 * per case: about 1.2e-6 at most here (T = 256 without decay), so RTOL
 * leaves an 8x margin for other summation orders (the CUDA and chunked
 * kernels are held to the same bound). */
#define RTOL 1e-5

#define N_THREADS 4

enum layout { LAYOUT_CONTIG, LAYOUT_FUSED, LAYOUT_STRIDED, LAYOUT_COUNT };

static const char *const layout_names[LAYOUT_COUNT] = { "contiguous", "fused-views",
							"strided" };

struct gdn_case {
	int64_t dk, dv, hk, hv, T, B;
	bool kda, l2;
	bool tiled;      /* i[3] = 1: value head h reads q/k head h % hk */
	enum layout layout;
	float scale;
	float gmin;      /* gates drawn in [gmin, 0] */
	int nthreads;
	uint64_t seed;
};

/* The six sources over memory owned here. */
struct gdn_in {
	struct kern_tensor src[6];  /* q, k, v, g, beta, state */
	void *mem[7];
	int nmem;
};

static void in_free(struct gdn_in *in)
{
	for (int i = 0; i < in->nmem; i++)
		free(in->mem[i]);
	in->nmem = 0;
}

static struct kern_tensor alloc_own(struct gdn_in *in, const int64_t ne[4], const int order[4],
				    uint64_t gap, uint64_t pad)
{
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, PPRPC_F32, ne, order, gap, pad), 0);
	in->mem[in->nmem++] = t.data;
	return t;
}

/* A view of a [W, T, B] projection output: ne {a, b, T, B} starting at
 * element off of each row. */
static struct kern_tensor fused_view(float *base, int64_t off, int64_t a, int64_t b, int64_t T,
				     int64_t B, uint64_t row, uint64_t seq)
{
	struct kern_tensor t = { .dtype = PPRPC_F32, .ne = { a, b, T, B } };

	t.nb[0] = sizeof(float);
	t.nb[1] = (uint64_t)a * sizeof(float);
	t.nb[2] = row * sizeof(float);
	t.nb[3] = seq * sizeof(float);
	t.data = base + off;
	assert_int_equal(kern_tensor_check(&t), 0);
	return t;
}

static void make_inputs(const struct gdn_case *c, struct gdn_in *in)
{
	const int64_t G = c->kda ? c->dk : 1;
	const int64_t ne_q[4] = { c->dk, c->hk, c->T, c->B }, ne_v[4] = { c->dv, c->hv, c->T, c->B };
	const int64_t ne_g[4] = { G, c->hv, c->T, c->B }, ne_b[4] = { 1, c->hv, c->T, c->B };
	const int64_t ne_s[4] = { c->dk, c->dv, c->hv, c->B };
	struct kern_tensor *s = in->src;
	uint64_t seed = c->seed;

	memset(in, 0, sizeof(*in));
	switch (c->layout) {
	case LAYOUT_CONTIG:
		s[0] = alloc_own(in, ne_q, NULL, 1, 0);
		s[1] = alloc_own(in, ne_q, NULL, 1, 0);
		s[2] = alloc_own(in, ne_v, NULL, 1, 0);
		s[3] = alloc_own(in, ne_g, NULL, 1, 0);
		s[4] = alloc_own(in, ne_b, NULL, 1, 0);
		s[5] = alloc_own(in, ne_s, NULL, 1, 0);
		break;
	case LAYOUT_FUSED: {
		/* One projection row per token: [q | k | v | g | beta | 3 spare],
		 * and a gap between sequences. */
		const int64_t oq = 0, ok = oq + c->dk * c->hk, ov = ok + c->dk * c->hk;
		const int64_t og = ov + c->dv * c->hv, ob = og + G * c->hv, row = ob + c->hv + 3;
		const uint64_t seq = (uint64_t)(row * c->T + 5);
		const int pad_order[4] = { 0, 1, 2, 3 };
		float *base = calloc((size_t)(seq * c->B), sizeof(float));

		assert_non_null(base);
		in->mem[in->nmem++] = base;
		s[0] = fused_view(base, oq, c->dk, c->hk, c->T, c->B, row, seq);
		s[1] = fused_view(base, ok, c->dk, c->hk, c->T, c->B, row, seq);
		s[2] = fused_view(base, ov, c->dv, c->hv, c->T, c->B, row, seq);
		s[3] = fused_view(base, og, G, c->hv, c->T, c->B, row, seq);
		s[4] = fused_view(base, ob, 1, c->hv, c->T, c->B, row, seq);
		s[5] = alloc_own(in, ne_s, pad_order, 1, 3);  /* padded columns */
		break;
	}
	default: {
		static const int o_q[4] = { 1, 0, 2, 3 }, o_k[4] = { 2, 0, 1, 3 };
		static const int o_v[4] = { 0, 2, 1, 3 }, o_g[4] = { 1, 2, 0, 3 };
		static const int o_b[4] = { 3, 2, 1, 0 }, o_s[4] = { 1, 0, 2, 3 };

		s[0] = alloc_own(in, ne_q, o_q, 2, 0);
		s[1] = alloc_own(in, ne_q, o_k, 1, 1);
		s[2] = alloc_own(in, ne_v, o_v, 1, 2);
		s[3] = alloc_own(in, ne_g, o_g, 2, 1);
		s[4] = alloc_own(in, ne_b, o_b, 3, 0);
		s[5] = alloc_own(in, ne_s, o_s, 1, 0);  /* state stored transposed */
		break;
	}
	}

	if (c->l2) {
		/* Unnormalised, of varied length; one all-zero q and k row
		 * exercises eps (x / eps = 0). */
		ref_fill_range(&s[0], seed++, -3, 3);
		ref_fill_range(&s[1], seed++, -2, 2);
		for (int64_t i = 0; i < c->dk; i++) {
			ref_set(&s[0], i, 0, 0, 0, 0.0);
			ref_set(&s[1], i, 0, 0, 0, 0.0);
		}
	} else {
		ref_fill_range(&s[0], seed++, -1, 1);
		ref_fill_range(&s[1], seed++, -1, 1);
		ref_normalise_rows(&s[1]);
	}
	ref_fill_range(&s[2], seed++, -1, 1);
	ref_fill_range(&s[3], seed++, c->gmin, 0);
	ref_fill_range(&s[4], seed++, 0.02, 0.98);
	ref_fill_range(&s[5], seed++, -0.5, 0.5);
}

static struct pprpc_op_params gdn_params(const struct gdn_case *c)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = c->scale;
	p.i[3] = c->tiled;
	if (c->l2) {
		p.i[0] = 1;
		p.f[1] = 1e-6f;
	}
	return p;
}

static int64_t packed_len(const struct gdn_case *c)
{
	return c->dv * c->hv * c->T * c->B + c->dk * c->dv * c->hv * c->B;
}

/* A packed destination pre-filled with NaN: an element the kernel forgets
 * to write fails the comparison. */
static struct kern_tensor mk_packed(int64_t n)
{
	const int64_t ne[4] = { n, 1, 1, 1 };
	struct kern_tensor t;

	assert_int_equal(ref_alloc(&t, PPRPC_F32, ne, NULL, 1, 0), 0);
	for (int64_t l = 0; l < n; l++)
		((float *)t.data)[l] = NAN;
	return t;
}

static int run_gdn(int nthreads, const struct pprpc_op_params *p, struct kern_tensor *src,
		   struct kern_tensor *dst)
{
	struct kern_cpu_ctx ctx = { .nthreads = nthreads };
	struct kern_tensor *sp[6] = { &src[0], &src[1], &src[2], &src[3], &src[4], &src[5] };

	return kern_cpu_run(&ctx, PPRPC_OP_GATED_DELTA_NET, p, sp, 6, dst);
}

static bool verbose(void)
{
	const char *e = getenv("GDN_VERBOSE");

	return e && *e == '1';
}

static void case_name(const struct gdn_case *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s dk=%lld dv=%lld hk=%lld hv=%lld%s T=%lld B=%lld l2=%d %s thr=%d",
		 c->kda ? "KDA" : "GDN", (long long)c->dk, (long long)c->dv, (long long)c->hk,
		 (long long)c->hv, c->tiled ? " tiled" : "", (long long)c->T, (long long)c->B, c->l2,
		 layout_names[c->layout], c->nthreads);
}

/* Returns the worst err / (RTOL-free bound) ratio seen. */
static double check_case(const struct gdn_case *c)
{
	const int64_t n = packed_len(c), n_o = c->dv * c->hv * c->T * c->B;
	struct pprpc_op_params p = gdn_params(c);
	struct kern_tensor dst = mk_packed(n);
	double *want = malloc((size_t)n * sizeof(double)), *mag = malloc((size_t)n * sizeof(double));
	double worst = 0;
	struct gdn_in in;
	char name[160];

	assert_non_null(want);
	assert_non_null(mag);
	case_name(c, name, sizeof(name));
	make_inputs(c, &in);
	assert_int_equal(ref_gdn_bcast(in.src, c->kda, c->l2, c->tiled, c->scale, want, mag), 0);
	assert_int_equal(run_gdn(c->nthreads, &p, in.src, &dst), 0);
	for (int64_t l = 0; l < n; l++) {
		double got = ((float *)dst.data)[l], bound = fabs(want[l]) + mag[l];
		double err = fabs(got - want[l]);

		if (!(err <= RTOL * bound))
			fail_msg("%s: %s element %lld: got %.9g want %.9g (err %.3g, bound %.3g)",
				 name, l < n_o ? "o" : "state", (long long)(l < n_o ? l : l - n_o),
				 got, want[l], err, RTOL * bound);
		if (bound > 0 && err / bound > worst)
			worst = err / bound;
	}
	if (verbose())
		printf("  %-70s worst err/bound %.3g\n", name, worst);
	in_free(&in);
	free(dst.data);
	free(want);
	free(mag);
	return worst;
}

/* ---- the kernel against the reference --------------------------------- */

static void test_gdn_matrix(void **state)
{
	static const int64_t Ts[] = { 1, 2, 31, 32, 33, 128 };
	static const int64_t dims[][2] = { { 64, 64 }, { 128, 128 }, { 48, 80 } };
	double worst = 0, w;
	int idx = 0, ncases = 0;

	(void)state;
	for (int kda = 0; kda < 2; kda++)
		for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++)
			for (int di = 0; di < 3; di++)
				for (int rep = 1; rep <= 2; rep++)
					for (int64_t B = 1; B <= 2; B++)
						for (int l2 = 0; l2 < 2; l2++, idx++) {
							struct gdn_case c = {
								.dk = dims[di][0], .dv = dims[di][1],
								.hk = 2, .hv = 2 * rep, .T = Ts[ti],
								.B = B, .kda = kda, .l2 = l2,
								/* half the shared-head cases in ggml's order */
								.tiled = rep == 2 && idx % 4 >= 2,
								.layout = (enum layout)(idx % LAYOUT_COUNT),
								.scale = idx % 5 == 0 ? 0.75f
									: (float)(1.0 / sqrt((double)dims[di][0])),
								/* slow and fast decay */
								.gmin = idx % 2 ? -0.05f : -1.5f,
								.nthreads = (idx / 3) % 2 ? N_THREADS : 1,
								.seed = 1000 + 17 * (uint64_t)idx,
							};

							w = check_case(&c);
							if (w > worst)
								worst = w;
							ncases++;
						}
	if (verbose())
		printf("  %d cases, worst err/bound %.3g (RTOL %.1g)\n", ncases, worst, RTOL);
}

/* Decay disabled (g = 0) over a long run: the state only accumulates, the
 * hardest case for error growth. */
static void test_gdn_no_decay(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		struct gdn_case c = { .dk = 128, .dv = 128, .hk = 1, .hv = 2, .T = 256, .B = 1,
				      .kda = kda, .l2 = true, .layout = LAYOUT_FUSED,
				      .scale = 0.088388f, .gmin = 0.0f, .nthreads = N_THREADS,
				      .seed = 77 + (uint64_t)kda };

		check_case(&c);
	}
}

/* The same packed bytes as another run (bit for bit). */
static void expect_same_bits(const float *a, const float *b, int64_t n, const char *what)
{
	if (memcmp(a, b, (size_t)n * sizeof(float)) != 0) {
		for (int64_t l = 0; l < n; l++)
			if (memcmp(&a[l], &b[l], sizeof(float)) != 0)
				fail_msg("%s: element %lld differs: %.9g vs %.9g", what, (long long)l,
					 a[l], b[l]);
	}
}

/* Restrict a source to tokens [t0, t0 + nt) (a view: same strides). */
static struct kern_tensor token_slice(const struct kern_tensor *t, int64_t t0, int64_t nt)
{
	struct kern_tensor s = *t;

	s.data = (char *)t->data + t0 * t->nb[2];
	s.ne[2] = nt;
	return s;
}

/* Run c's T tokens in ncalls pieces [cuts[i], cuts[i+1]), each call's state
 * part feeding the next call's state source, and expect exactly the
 * one-call result (o and final state).  A property of the serial form
 * (i[2] = 1): the chunked one's chunk boundaries move with the split
 * (test_kernels_gdn_chunked.c checks it to tolerance). */
static void check_split(const struct gdn_case *c, const int64_t *cuts, int ncalls)
{
	const int64_t n_o = c->dv * c->hv * c->T * c->B, n_s = c->dk * c->dv * c->hv * c->B;
	const int64_t s_ne[4] = { c->dk, c->dv, c->hv, c->B };
	struct pprpc_op_params p = gdn_params(c);

	p.i[2] = 1;  /* serial */
	struct kern_tensor whole = mk_packed(packed_len(c)), prev = { 0 };
	struct kern_tensor state_view;
	struct gdn_in in;
	float *o_parts = malloc((size_t)n_o * sizeof(float));

	assert_non_null(o_parts);
	assert_int_equal(cuts[0], 0);
	assert_int_equal(cuts[ncalls], c->T);
	make_inputs(c, &in);
	assert_int_equal(run_gdn(1, &p, in.src, &whole), 0);

	state_view = in.src[5];
	for (int call = 0; call < ncalls; call++) {
		int64_t t0 = cuts[call], nt = cuts[call + 1] - t0;
		int64_t pn_o = c->dv * c->hv * nt * c->B;
		struct kern_tensor src[6], dst = mk_packed(pn_o + n_s);

		for (int s = 0; s < 5; s++)
			src[s] = token_slice(&in.src[s], t0, nt);
		src[5] = state_view;
		assert_int_equal(run_gdn(call % 2 ? N_THREADS : 1, &p, src, &dst), 0);
		/* Scatter this call's o into [d_v, H_v, T, B]. */
		for (int64_t b = 0; b < c->B; b++)
			memcpy(o_parts + (b * c->T + t0) * c->hv * c->dv,
			       (float *)dst.data + b * nt * c->hv * c->dv,
			       (size_t)(nt * c->hv * c->dv) * sizeof(float));
		/* The next call reads this call's state part. */
		assert_int_equal(kern_tensor_init_contig(&state_view, PPRPC_F32, s_ne), 0);
		state_view.data = (float *)dst.data + pn_o;
		free(prev.data);
		prev = dst;
	}
	expect_same_bits(whole.data, o_parts, n_o, "split: o");
	expect_same_bits((float *)whole.data + n_o, state_view.data, n_s, "split: final state");
	free(prev.data);
	free(o_parts);
	free(whole.data);
	in_free(&in);
}

/* Running T tokens in pieces gives exactly the one-call result: T1 + T2,
 * and token by token (decode). */
static void test_gdn_split_state(void **state)
{
	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		for (int mode = 0; mode < 2; mode++) {
			struct gdn_case c = { .dk = 64, .dv = 48, .hk = 1, .hv = 2, .T = 64, .B = 2,
					      .kda = kda, .l2 = mode == 0,
					      .layout = mode ? LAYOUT_FUSED : LAYOUT_STRIDED,
					      .scale = 0.125f, .gmin = -0.3f, .nthreads = 1,
					      .seed = 500 + 10 * (uint64_t)kda + (uint64_t)mode };
			/* mode 0: 31 + 33 tokens; mode 1: 8 one-token calls
			 * then the rest. */
			static const int64_t cuts0[] = { 0, 31, 64 };
			static const int64_t cuts1[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 64 };

			check_split(&c, mode ? cuts1 : cuts0, mode ? 9 : 2);
		}
	}
}

/* Long sequences (prefill lengths): T = 512 and 2048 against the float64
 * reference with the same per-element bound (errors must not grow with T
 * beyond it), including a decay-free run, the hardest case for growth; and
 * 2048 tokens as four 512-token calls with the state carried, bit-identical
 * to one call.  Few heads keep the run time near a second. */
static void test_gdn_long(void **state)
{
	static const struct gdn_case cases[] = {
		{ .dk = 128, .dv = 128, .hk = 1, .hv = 2, .T = 512, .B = 1, .kda = false, .l2 = true,
		  .layout = LAYOUT_FUSED, .scale = 0.088388f, .gmin = -0.1f, .nthreads = N_THREADS,
		  .seed = 5120 },
		{ .dk = 128, .dv = 64, .hk = 1, .hv = 2, .T = 512, .B = 1, .kda = true, .l2 = true,
		  .layout = LAYOUT_STRIDED, .scale = 0.088388f, .gmin = -0.5f, .nthreads = 1,
		  .seed = 5121 },
		{ .dk = 64, .dv = 64, .hk = 1, .hv = 1, .T = 2048, .B = 1, .kda = false, .l2 = true,
		  .layout = LAYOUT_CONTIG, .scale = 0.125f, .gmin = -0.05f, .nthreads = 1,
		  .seed = 20480 },
		{ .dk = 64, .dv = 32, .hk = 1, .hv = 2, .T = 2048, .B = 1, .kda = true, .l2 = true,
		  .layout = LAYOUT_FUSED, .scale = 0.125f, .gmin = -0.2f, .nthreads = N_THREADS,
		  .seed = 20481 },
		{ .dk = 128, .dv = 32, .hk = 1, .hv = 1, .T = 2048, .B = 1, .kda = true, .l2 = true,
		  .layout = LAYOUT_CONTIG, .scale = 0.088388f, .gmin = 0.0f, .nthreads = 1,
		  .seed = 20482 },
	};
	static const int64_t cuts[] = { 0, 512, 1024, 1536, 2048 };
	struct gdn_case split = cases[3];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
	split.seed = 20483;
	check_split(&split, cuts, 4);
}

/* Splitting items over threads changes nothing: bit-identical results. */
static void test_gdn_threads_identical(void **state)
{
	struct gdn_case c = { .dk = 128, .dv = 128, .hk = 2, .hv = 6, .T = 40, .B = 2,
			      .kda = true, .l2 = true, .layout = LAYOUT_FUSED,
			      .scale = 0.088388f, .gmin = -0.2f, .seed = 4242 };
	struct pprpc_op_params p = gdn_params(&c);
	struct kern_tensor d1 = mk_packed(packed_len(&c)), d2 = mk_packed(packed_len(&c));
	struct kern_tensor d3 = mk_packed(packed_len(&c));
	struct gdn_in in;

	(void)state;
	make_inputs(&c, &in);
	assert_int_equal(run_gdn(1, &p, in.src, &d1), 0);
	assert_int_equal(run_gdn(N_THREADS, &p, in.src, &d2), 0);
	assert_int_equal(run_gdn(7, &p, in.src, &d3), 0);
	expect_same_bits(d1.data, d2.data, packed_len(&c), "4 threads vs 1");
	expect_same_bits(d1.data, d3.data, packed_len(&c), "7 threads vs 1");
	in_free(&in);
	free(d1.data);
	free(d2.data);
	free(d3.data);
}

/* A gate > 0 acts as 0 (decay exactly 1), however large, +inf included: the
 * result is bit-identical to the run with those gates set to 0 and finite.
 * A gate of -inf zeroes the state (decay 0) and matches the reference. */
static void test_gdn_gate_clamp(void **state)
{
	static const double bad[] = { 1e-3, 1.0, 88.8, 1e30, INFINITY };

	(void)state;
	for (int kda = 0; kda < 2; kda++) {
		struct gdn_case c = { .dk = 32, .dv = 16, .hk = 1, .hv = 2, .T = 9, .B = 2,
				      .kda = kda, .l2 = false, .layout = LAYOUT_CONTIG,
				      .scale = 0.5f, .gmin = -0.5f, .nthreads = 1,
				      .seed = 900 + (uint64_t)kda };
		const int64_t n = packed_len(&c);
		struct pprpc_op_params p = gdn_params(&c);
		struct kern_tensor zero = mk_packed(n), pos = mk_packed(n);
		struct kern_tensor *g;
		struct gdn_in in;
		int64_t cnt = 0, ne_g;
		float *got;

		make_inputs(&c, &in);
		g = &in.src[3];
		ne_g = kern_tensor_nelements(g);
		/* Every third gate element 0 ... */
		for (int64_t l = 0; l < ne_g; l += 3) {
			int64_t i[4];

			ref_unravel(g->ne, l, i);
			ref_set(g, i[0], i[1], i[2], i[3], 0.0);
		}
		assert_int_equal(run_gdn(1, &p, in.src, &zero), 0);
		/* ... then positive instead. */
		for (int64_t l = 0; l < ne_g; l += 3) {
			int64_t i[4];

			ref_unravel(g->ne, l, i);
			ref_set(g, i[0], i[1], i[2], i[3], bad[cnt++ % 5]);
		}
		assert_int_equal(run_gdn(1, &p, in.src, &pos), 0);
		expect_same_bits(zero.data, pos.data, n, "positive gates vs zero gates");
		got = pos.data;
		for (int64_t l = 0; l < n; l++)
			assert_true(isfinite(got[l]));
		in_free(&in);
		free(zero.data);
		free(pos.data);

		/* -inf gates at token 4: the state restarts from k u^T. */
		c.seed += 50;
		{
			const int64_t m = packed_len(&c), n_o = c.dv * c.hv * c.T * c.B;
			struct kern_tensor d = mk_packed(m);
			double *want = malloc((size_t)m * sizeof(double));
			double *mag = malloc((size_t)m * sizeof(double));

			assert_non_null(want);
			assert_non_null(mag);
			make_inputs(&c, &in);
			g = &in.src[3];
			for (int64_t b = 0; b < c.B; b++)
				for (int64_t h = 0; h < c.hv; h++)
					for (int64_t i = 0; i < g->ne[0]; i++)
						ref_set(g, i, h, 4, b, -INFINITY);
			assert_int_equal(ref_gdn(in.src, c.kda, c.l2, c.scale, want, mag), 0);
			assert_int_equal(run_gdn(1, &p, in.src, &d), 0);
			for (int64_t l = 0; l < m; l++) {
				double x = ((float *)d.data)[l];

				if (!(fabs(x - want[l]) <= RTOL * (fabs(want[l]) + mag[l])))
					fail_msg("-inf gate: %s element %lld: got %.9g want %.9g",
						 l < n_o ? "o" : "state", (long long)l, x, want[l]);
			}
			free(want);
			free(mag);
			free(d.data);
			in_free(&in);
		}
	}
}

/* ---- shape and parameter rules ---------------------------------------- */

struct shp {
	struct kern_tensor t[6];
};

static struct kern_tensor T4(int dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(kern_tensor_init_contig(&t, dtype, ne), 0);
	return t;
}

/* A valid set: d_k 8, d_v 6, H_k 2, H_v 4, T 5, B 3, gate width gw. */
static struct shp good(int64_t gw)
{
	struct shp s;

	s.t[0] = T4(PPRPC_F32, 8, 2, 5, 3);
	s.t[1] = T4(PPRPC_F32, 8, 2, 5, 3);
	s.t[2] = T4(PPRPC_F32, 6, 4, 5, 3);
	s.t[3] = T4(PPRPC_F32, gw, 4, 5, 3);
	s.t[4] = T4(PPRPC_F32, 1, 4, 5, 3);
	s.t[5] = T4(PPRPC_F32, 8, 6, 4, 3);
	return s;
}

static int infer(const struct shp *s, const struct pprpc_op_params *p, struct kern_tensor *out,
		 char *err)
{
	const struct kern_tensor *src[6] = { &s->t[0], &s->t[1], &s->t[2],
					     &s->t[3], &s->t[4], &s->t[5] };

	err[0] = 0;
	return kern_op_infer(PPRPC_OP_GATED_DELTA_NET, p, src, 6, out, err, 200);
}

static struct pprpc_op_params prm(float scale, int l2, float eps)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	p.i[0] = l2;
	p.f[1] = eps;
	return p;
}

#define EXPECT_REJECT(s, p, code, needle)                                         \
	do {                                                                          \
		struct kern_tensor o_ = { 0 };                                        \
		char e_[200];                                                         \
		assert_int_equal(infer(&(s), (p), &o_, e_), (code));                  \
		if (!strstr(e_, (needle)))                                            \
			fail_msg("reason \"%s\" does not mention \"%s\"", e_, (needle)); \
	} while (0)

static void test_gdn_rules_accept(void **state)
{
	struct pprpc_op_params p = prm(0.35f, 0, 0);
	struct kern_tensor out, dst;
	struct shp s;
	char err[200];
	int64_t n_o, n_s;

	(void)state;
	assert_int_equal(kern_op_nsrc(PPRPC_OP_GATED_DELTA_NET), 6);
	assert_string_equal(kern_op_name(PPRPC_OP_GATED_DELTA_NET), "GATED_DELTA_NET");
	for (int kda = 0; kda < 2; kda++) {
		s = good(kda ? 8 : 1);
		assert_int_equal(infer(&s, &p, &out, err), 0);
		/* o [6,4,5,3] = 360, state [8,6,4,3] = 576 */
		assert_int_equal(out.dtype, PPRPC_F32);
		assert_int_equal(out.ne[0], 360 + 576);
		assert_int_equal(out.ne[1], 1);
		assert_int_equal(out.ne[2], 1);
		assert_int_equal(out.ne[3], 1);
		assert_true(kern_tensor_is_contiguous(&out));
	}
	assert_int_equal(kern_gdn_layout(8, 6, 4, 5, 3, &n_o, &n_s), 0);
	assert_int_equal(n_o, 360);
	assert_int_equal(n_s, 576);
	assert_int_equal(kern_gdn_layout(1 << 20, 1 << 20, 1 << 20, 1, 1, &n_o, &n_s),
			 PPRPC_ETOOBIG);
	assert_int_equal(kern_gdn_layout(0, 1, 1, 1, 1, &n_o, &n_s), PPRPC_EINVAL);

	/* H_v == H_k, in-op L2 norm, d_k 1 (either gate width). */
	s = good(1);
	s.t[2] = T4(PPRPC_F32, 6, 2, 5, 3);
	s.t[3] = T4(PPRPC_F32, 1, 2, 5, 3);
	s.t[4] = T4(PPRPC_F32, 1, 2, 5, 3);
	s.t[5] = T4(PPRPC_F32, 8, 6, 2, 3);
	p = prm(-2.0f, 1, 1e-6f);
	assert_int_equal(infer(&s, &p, &out, err), 0);
	assert_int_equal(out.ne[0], 6 * 2 * 5 * 3 + 8 * 6 * 2 * 3);
	/* The split precision of CUDA's chunked form (the CPU ignores it). */
	p.i[4] = 1;
	assert_int_equal(infer(&s, &p, &out, err), 0);

	/* Non-contiguous sources are fine (a transposed state). */
	s = good(8);
	s.t[5] = T4(PPRPC_F32, 6, 8, 4, 3);
	{
		int64_t ne = s.t[5].ne[0];
		uint64_t nb = s.t[5].nb[0];

		s.t[5].ne[0] = s.t[5].ne[1];
		s.t[5].nb[0] = s.t[5].nb[1];
		s.t[5].ne[1] = ne;
		s.t[5].nb[1] = nb;
	}
	p = prm(1.0f, 0, 0);
	assert_int_equal(infer(&s, &p, &out, err), 0);

	/* Destination: contiguous 1-D of the packed size only. */
	s = good(1);
	{
		const struct kern_tensor *src[6] = { &s.t[0], &s.t[1], &s.t[2],
						     &s.t[3], &s.t[4], &s.t[5] };

		dst = T4(PPRPC_F32, 936, 1, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &p, src, 6, &dst, err,
						   sizeof(err)), 0);
		dst = T4(PPRPC_F32, 360, 1, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &p, src, 6, &dst, err,
						   sizeof(err)), PPRPC_ESHAPE);
		dst = T4(PPRPC_F32, 468, 2, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &p, src, 6, &dst, err,
						   sizeof(err)), PPRPC_ESHAPE);
		dst = T4(PPRPC_F16, 936, 1, 1, 1);
		assert_int_equal(kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &p, src, 6, &dst, err,
						   sizeof(err)), PPRPC_ETYPE);
		dst = T4(PPRPC_F32, 936, 1, 1, 1);
		dst.nb[0] = 8;  /* strided: not contiguous */
		dst.nb[1] = dst.nb[2] = dst.nb[3] = 8 * 936;
		assert_int_equal(kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &p, src, 6, &dst, err,
						   sizeof(err)), PPRPC_ESHAPE);
		/* Five sources is not the op. */
		assert_int_equal(kern_op_infer(PPRPC_OP_GATED_DELTA_NET, &p, src, 5, &out, err,
					       sizeof(err)), PPRPC_EINVAL);
	}
}

static void test_gdn_rules_reject(void **state)
{
	struct pprpc_op_params p = prm(0.5f, 0, 0), bad;
	struct shp s;

	(void)state;
	/* Dtypes. */
	for (int i = 0; i < 6; i++) {
		s = good(8);
		s.t[i] = T4(PPRPC_F16, s.t[i].ne[0], s.t[i].ne[1], s.t[i].ne[2], s.t[i].ne[3]);
		EXPECT_REJECT(s, &p, PPRPC_ETYPE, "must be f32");
	}
	/* Head mismatch: k heads != q heads; H_v not a multiple of H_k. */
	s = good(1);
	s.t[1] = T4(PPRPC_F32, 8, 4, 5, 3);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "k (src1)");
	s = good(1);
	s.t[2] = T4(PPRPC_F32, 6, 3, 5, 3);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "not a multiple");
	s = good(1);
	s.t[0] = T4(PPRPC_F32, 8, 3, 5, 3);
	s.t[1] = s.t[0];
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "not a multiple");
	/* q/k head dims differ. */
	s = good(1);
	s.t[1] = T4(PPRPC_F32, 7, 2, 5, 3);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "k (src1)");
	/* Tokens or sequences disagree. */
	s = good(1);
	s.t[2] = T4(PPRPC_F32, 6, 4, 4, 3);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "v (src2)");
	s = good(1);
	s.t[2] = T4(PPRPC_F32, 6, 4, 5, 1);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "v (src2)");
	/* Gate width neither 1 nor d_k; gate heads/tokens wrong. */
	s = good(2);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "gate width");
	s = good(6);  /* d_v, not d_k */
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "gate width");
	s = good(8);
	s.t[3] = T4(PPRPC_F32, 8, 2, 5, 3);  /* per q/k head, not value head */
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "g (src3)");
	s = good(1);
	s.t[3] = T4(PPRPC_F32, 1, 4, 5, 2);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "g (src3)");
	/* beta: one per value head and token. */
	s = good(1);
	s.t[4] = T4(PPRPC_F32, 4, 5, 3, 1);  /* [H_v, T, B] without the leading 1 */
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "beta (src4)");
	s = good(1);
	s.t[4] = T4(PPRPC_F32, 1, 2, 5, 3);
	EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "beta (src4)");
	/* State: each dimension wrong in turn, and the transpose of a
	 * non-square state. */
	{
		static const int64_t st[5][4] = {
			{ 7, 6, 4, 3 }, { 8, 5, 4, 3 }, { 8, 6, 2, 3 }, { 8, 6, 4, 1 }, { 6, 8, 4, 3 },
		};

		for (int i = 0; i < 5; i++) {
			s = good(1);
			s.t[5] = T4(PPRPC_F32, st[i][0], st[i][1], st[i][2], st[i][3]);
			EXPECT_REJECT(s, &p, PPRPC_ESHAPE, "state (src5)");
		}
	}
	/* Parameters. */
	s = good(1);
	bad = prm(0.0f, 0, 0);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "scale");
	EXPECT_REJECT(s, NULL, PPRPC_EINVAL, "scale");
	bad = prm(NAN, 0, 0);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "scale");
	bad = prm(INFINITY, 0, 0);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "scale");
	bad = prm(1.0f, 2, 1e-6f);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[0]");
	bad = prm(1.0f, -1, 1e-6f);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[0]");
	bad = prm(1.0f, 1, 0.0f);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "eps");
	bad = prm(1.0f, 1, -1e-6f);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "eps");
	bad = prm(1.0f, 1, NAN);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "eps");
	bad = prm(1.0f, 0, 1e-6f);
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "eps");
	bad = prm(1.0f, 0, 0);
	bad.f[2] = 1.0f;
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "f[2]");
	bad = prm(1.0f, 0, 0);
	bad.i[1] = 1;
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[1]");
	bad = prm(1.0f, 0, 0);
	bad.i[3] = 2;
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[3]");
	bad = prm(1.0f, 0, 0);
	bad.i[4] = 2;
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[4]");
	bad = prm(1.0f, 0, 0);
	bad.i[5] = 1;
	EXPECT_REJECT(s, &bad, PPRPC_EINVAL, "i[5]");
}

/* The kernel entry re-validates: a bad shape never reaches the loop. */
static void test_gdn_run_rejects(void **state)
{
	struct gdn_case c = { .dk = 8, .dv = 4, .hk = 1, .hv = 2, .T = 3, .B = 1,
			      .layout = LAYOUT_CONTIG, .scale = 1.0f, .gmin = -1.0f,
			      .seed = 3 };
	struct pprpc_op_params p = gdn_params(&c);
	struct kern_tensor dst = mk_packed(packed_len(&c)), small;
	struct gdn_in in;

	(void)state;
	make_inputs(&c, &in);
	assert_int_equal(run_gdn(1, &p, in.src, &dst), 0);
	in.src[5].ne[2] = 1;  /* state for one head */
	assert_int_equal(run_gdn(1, &p, in.src, &dst), PPRPC_ESHAPE);
	in.src[5].ne[2] = 2;
	small = dst;
	small.ne[0] -= 1;
	assert_int_equal(run_gdn(1, &p, in.src, &small), PPRPC_ESHAPE);
	p.f[0] = 0.0f;
	assert_int_equal(run_gdn(1, &p, in.src, &dst), PPRPC_EINVAL);
	in_free(&in);
	free(dst.data);
}

/* ---- graph-builder helpers --------------------------------------------- */

static void test_gdn_builder(void **state)
{
	/* d_k 16, d_v 8, H_k 2, H_v 4, T 3, B 2 from one fused projection
	 * [2*16*2 + 8*4 + 4 + 4 = 104, T, B] in buffer 7. */
	const int64_t dk = 16, dv = 8, hk = 2, hv = 4, T = 3, B = 2, W = 104;
	const int64_t n_o = dv * hv * T * B, n_s = dk * dv * hv * B;
	pprpc_graph_builder *gb;
	pprpc_tensor proj = pprpc_tensor_make((pprpc_buffer){ 7 }, 256, PPRPC_F32, W, T, B, 1);
	pprpc_tensor st = pprpc_tensor_make((pprpc_buffer){ 7 }, 1 << 20, PPRPC_F32, dk, dv, hv, B), got;
	int ip, is, q, k, v, g, beta, packed, oi = -1, si = -1, nodes;
	int64_t ne[4];
	uint64_t nb[4];

	(void)state;
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	ip = pprpc_gb_tensor(gb, &proj);
	is = pprpc_gb_tensor(gb, &st);
	assert_true(ip >= 0 && is >= 0);
	nb[0] = 4;
	nb[2] = (uint64_t)W * 4;
	nb[3] = (uint64_t)(W * T) * 4;
	ne[2] = T;
	ne[3] = B;
	ne[0] = dk;
	ne[1] = hk;
	nb[1] = (uint64_t)dk * 4;
	q = pprpc_gb_view(gb, ip, PPRPC_F32, ne, nb, 0);
	k = pprpc_gb_view(gb, ip, PPRPC_F32, ne, nb, (uint64_t)(dk * hk) * 4);
	ne[0] = dv;
	ne[1] = hv;
	nb[1] = (uint64_t)dv * 4;
	v = pprpc_gb_view(gb, ip, PPRPC_F32, ne, nb, (uint64_t)(2 * dk * hk) * 4);
	ne[0] = 1;
	nb[1] = 4;
	g = pprpc_gb_view(gb, ip, PPRPC_F32, ne, nb, (uint64_t)(2 * dk * hk + dv * hv) * 4);
	beta = pprpc_gb_view(gb, ip, PPRPC_F32, ne, nb, (uint64_t)(2 * dk * hk + dv * hv + hv) * 4);
	assert_true(q >= 0 && k >= 0 && v >= 0 && g >= 0 && beta >= 0);

	/* Wrong: v as the gate (width d_v). */
	assert_int_equal(pprpc_gb_gated_delta_net(gb, q, k, v, v, beta, is, 0.25f, 1, -1),
			 PPRPC_ESHAPE);
	assert_non_null(strstr(pprpc_gb_error(gb), "gate width"));
	/* Wrong: scale 0. */
	assert_int_equal(pprpc_gb_gated_delta_net(gb, q, k, v, g, beta, is, 0.0f, 1, -1),
			 PPRPC_EINVAL);
	nodes = pprpc_gb_node_count(gb);
	assert_int_equal(nodes, 0);

	packed = pprpc_gb_gated_delta_net(gb, q, k, v, g, beta, is, 0.25f, 1, -1);
	assert_true(packed >= 0);
	assert_int_equal(pprpc_gb_node_count(gb), 1);
	assert_int_equal(pprpc_gb_tensor_get(gb, packed, &got), 0);
	assert_int_equal(got.dtype, PPRPC_F32);
	assert_int_equal(got.ne[0], n_o + n_s);
	assert_int_equal(got.ne[1], 1);

	/* Views with the wrong dimensions are refused, outputs untouched. */
	assert_int_equal(pprpc_gb_gdn_views(gb, packed, dv, hv, T + 1, B, dk, &oi, &si),
			 PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_gdn_views(gb, packed, dv, hv, T, B, 0, &oi, &si), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_gdn_views(gb, 9999, dv, hv, T, B, dk, &oi, &si), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_gdn_views(gb, q, dk, hk, T, B, 1, &oi, &si), PPRPC_ESHAPE);
	assert_int_equal(oi, -1);
	assert_int_equal(si, -1);

	assert_int_equal(pprpc_gb_gdn_views(gb, packed, dv, hv, T, B, dk, &oi, &si), 0);
	assert_int_equal(pprpc_gb_tensor_get(gb, oi, &got), 0);
	assert_int_equal(got.dtype, PPRPC_F32);
	assert_int_equal(got.ne[0], dv);
	assert_int_equal(got.ne[1], hv);
	assert_int_equal(got.ne[2], T);
	assert_int_equal(got.ne[3], B);
	assert_int_equal(got.nb[0], 4);
	assert_int_equal(got.nb[3], (uint64_t)(dv * hv * T) * 4);
	assert_int_equal(got.offset, 0);
	assert_int_equal(pprpc_gb_tensor_get(gb, si, &got), 0);
	assert_int_equal(got.ne[0], dk);
	assert_int_equal(got.ne[1], dv);
	assert_int_equal(got.ne[2], hv);
	assert_int_equal(got.ne[3], B);
	assert_int_equal(got.nb[1], (uint64_t)dk * 4);
	assert_int_equal(got.offset, (uint64_t)n_o * 4);

	/* The state view feeds the next step (ping-pong), and o is usable by
	 * later ops. */
	packed = pprpc_gb_gated_delta_net(gb, q, k, v, g, beta, si, 0.25f, 0, -1);
	assert_true(packed >= 0);
	assert_true(pprpc_gb_scale(gb, oi, 2.0f, 0.0f, -1) >= 0);
	assert_int_equal(pprpc_gb_node_count(gb), 3);
	pprpc_graph_builder_free(gb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gdn_rules_accept),
		cmocka_unit_test(test_gdn_rules_reject),
		cmocka_unit_test(test_gdn_run_rejects),
		cmocka_unit_test(test_gdn_matrix),
		cmocka_unit_test(test_gdn_no_decay),
		cmocka_unit_test(test_gdn_split_state),
		cmocka_unit_test(test_gdn_long),
		cmocka_unit_test(test_gdn_threads_identical),
		cmocka_unit_test(test_gdn_gate_clamp),
		cmocka_unit_test(test_gdn_builder),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * tests/unit/test_ggml_gdn_engine.c — ggml's GATED_DELTA_NET on pprpc's kernels in
 * the ggml engine, in process (daemon/backend/ggml/ggml_gdn.c).
 *
 * Graphs shaped as llama.cpp's fused delta net (Kimi-Linear's KDA,
 * Qwen3.5's GDN with fewer q/k than value heads): q and k through L2_NORM,
 * beta through SIGMOID, the op, then the output read through a view + CONT
 * and the new state copied into a state cache, as build_delta_net_fused
 * and its callers do.  Each graph is run by the engine, then by ggml-cpu
 * here over the same tensors, and the two results compared:
 *   - where pprpc's kernel ran (its counters say which form), within
 *     TOL_MAX of the output's RMS per element and TOL_NMSE overall, for the
 *     op's packed output, the CONT of o and the state cache;
 *   - where ggml's kernel ran (the engine's reason counted), bit for bit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/ggml_gdn.h"
#include "daemon/backend/ggml/ggml_load.h"
#include "ggml-alloc.h"
#include "pprpc/types.h"
#include "tests/integration/ggml_wire.h"

/* pprpc's CPU kernels are fp32 as ggml's, in another summation order (and
 * the chunked form in another association): per element within 2e-5 of
 * the part's RMS, and an NMSE (sum err^2 / sum want^2) below 1e-11.  The
 * worst seen here (GDN_VERBOSE=1 prints every case) are 4.1e-6 (KDA,
 * S = 128, T = 50) and 4.1e-14; test-backend-ops allows this op an NMSE of
 * 1e-7. */
#define TOL_MAX 2e-5
#define TOL_NMSE 1e-11

static struct gge_dev *g_dev;
static ggml_backend_t g_cpu;
static struct kern_gdn_stats g_native;
static uint64_t g_ggml[GGE_GDN_WHY_COUNT];

struct shape {
	int64_t S, Hk, Hv, T, B;
	int64_t Bq;          /* sequences of q/k (B, or 1 to broadcast) */
	int32_t K;           /* snapshot slots */
	bool kda;            /* per-channel gate */
	float gmin, gmax;    /* gates in [gmin, gmax] */
	uint32_t seed;
};

struct net {
	struct shape sh;
	struct ggml_context *ctx;
	ggml_backend_buffer_t buf;
	struct ggml_cgraph *gf;
	struct gw_graph w;
	struct gge_graph *gg;
	struct ggml_tensor *qr, *kr, *v, *g, *br, *s0, *gdn, *o, *cache_cpy, *cache;
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

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static void fill(struct ggml_tensor *t, uint32_t *seed, float lo, float hi)
{
	const int64_t n = ggml_nelements(t);
	float *x = malloc((size_t)n * sizeof(float));

	assert_non_null(x);
	for (int64_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * frand(seed);
	ggml_backend_tensor_set(t, x, 0, (size_t)n * sizeof(float));
	free(x);
}

/* The graph of build_delta_net_fused for sh; returns build's code. */
static int net_build(struct net *n, const struct shape *sh)
{
	const int64_t S = sh->S, Hv = sh->Hv, T = sh->T, B = sh->B;
	struct ggml_init_params p = { .mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead(),
				      .no_alloc = true };
	struct ggml_tensor *q, *k, *beta, *ov, *sv;
	struct gw_map map;
	uint32_t seed = sh->seed;
	char err[256] = "";
	int rc;

	memset(n, 0, sizeof(*n));
	n->sh = *sh;
	n->ctx = ggml_init(p);
	assert_non_null(n->ctx);
	n->qr = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, sh->Hk, T, sh->Bq);
	n->kr = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, sh->Hk, T, sh->Bq);
	n->v = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, Hv, T, B);
	n->g = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, sh->kda ? S : 1, Hv, T, B);
	n->br = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, 1, Hv, T, B);
	n->s0 = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, S, Hv, B);
	n->cache = ggml_new_tensor_1d(n->ctx, GGML_TYPE_F32, S * S * Hv * B);
	q = ggml_l2_norm(n->ctx, n->qr, 1e-6f);
	k = ggml_l2_norm(n->ctx, n->kr, 1e-6f);
	beta = ggml_sigmoid(n->ctx, n->br);
	n->gdn = ggml_gated_delta_net(n->ctx, q, k, n->v, n->g, beta, n->s0, sh->K);
	ov = ggml_view_4d(n->ctx, n->gdn, S, Hv, T, B, ggml_row_size(GGML_TYPE_F32, S),
			  ggml_row_size(GGML_TYPE_F32, S * Hv), ggml_row_size(GGML_TYPE_F32, S * Hv * T), 0);
	sv = ggml_view_4d(n->ctx, n->gdn, S, S, Hv, B, ggml_row_size(GGML_TYPE_F32, S),
			  ggml_row_size(GGML_TYPE_F32, S * S), ggml_row_size(GGML_TYPE_F32, S * S * Hv),
			  ggml_row_size(GGML_TYPE_F32, S * Hv * T * B));
	n->o = ggml_cont(n->ctx, ov);
	n->cache_cpy = ggml_cpy(n->ctx, sv, ggml_view_1d(n->ctx, n->cache, S * S * Hv * B, 0));
	n->gf = ggml_new_graph(n->ctx);
	ggml_build_forward_expand(n->gf, n->cache_cpy);
	ggml_build_forward_expand(n->gf, n->o);
	n->buf = ggml_backend_alloc_ctx_tensors(n->ctx, g_cpu);
	assert_non_null(n->buf);
	fill(n->qr, &seed, -1.0f, 1.0f);
	fill(n->kr, &seed, -1.0f, 1.0f);
	fill(n->v, &seed, -1.0f, 1.0f);
	fill(n->g, &seed, sh->gmin, sh->gmax);
	fill(n->br, &seed, -2.0f, 2.0f);
	fill(n->s0, &seed, -0.5f, 0.5f);
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

static float *read_all(const struct ggml_tensor *t)
{
	float *x = malloc(ggml_nbytes(t));

	assert_non_null(x);
	ggml_backend_tensor_get(t, x, 0, ggml_nbytes(t));
	return x;
}

static bool verbose(void)
{
	const char *e = getenv("GDN_VERBOSE");

	return e && *e == '1';
}

/* got against want over [0, n): per element against the RMS, and NMSE. */
static void close_enough(const float *got, const float *want, int64_t n, const char *what, const char *name)
{
	double ss = 0, se = 0, worst = 0, rms;
	int64_t at = 0;

	for (int64_t i = 0; i < n; i++)
		ss += (double)want[i] * want[i];
	rms = sqrt(ss / (double)n);
	assert_true(rms > 0);
	for (int64_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);

		se += e * e;
		if (!(e / rms <= worst)) {
			worst = e / rms;
			at = i;
		}
	}
	if (verbose())
		printf("  %-44s %-6s max err/rms %.3g, nmse %.3g\n", name, what, worst, se / ss);
	if (!(worst <= TOL_MAX) || !(se / ss <= TOL_NMSE))
		fail_msg("%s: %s element %lld: got %.9g want %.9g (err/rms %.3g, nmse %.3g)", name, what,
			 (long long)at, got[at], want[at], worst, se / ss);
}

static void shape_name(const struct shape *sh, char *buf, size_t len)
{
	snprintf(buf, len, "%s S=%lld H=%lld/%lld T=%lld B=%lld%s K=%d", sh->kda ? "KDA" : "GDN",
		 (long long)sh->S, (long long)sh->Hk, (long long)sh->Hv, (long long)sh->T, (long long)sh->B,
		 sh->Bq != sh->B ? " q-bcast" : "", sh->K);
}

static uint64_t native_runs(void)
{
	struct kern_gdn_stats s;
	uint64_t n;

	kern_gdn_stats_read(&g_native, &s);
	n = s.serial;
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		n += s.chunked[i];
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		n += s.fallback[i];
	return n;
}

/* Build sh with the setting mode, run it twice through the engine and once
 * with ggml-cpu; expect pprpc's kernel (want_why < 0: the form want_form,
 * 0 serial, 1 chunked) or ggml's for reason want_why. */
static void check(const struct shape *sh, int mode, int want_why, int want_form)
{
	struct kern_gdn_stats before;
	uint64_t ggml_before[GGE_GDN_WHY_COUNT];
	float *got_d, *got_o, *got_c, *want_d, *want_o, *want_c;
	char name[120], err[256] = "";
	struct net n;
	int64_t n_o;

	shape_name(sh, name, sizeof(name));
	gge_dev_gdn_config(g_dev, mode, &g_native, g_ggml, 0);
	assert_int_equal(net_build(&n, sh), 0);
	n_o = sh->S * sh->Hv * sh->T * sh->B;
	kern_gdn_stats_read(&g_native, &before);
	memcpy(ggml_before, g_ggml, sizeof(ggml_before));
	for (int r = 0; r < 2; r++)
		assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), 0);
	got_d = read_all(n.gdn);
	got_o = read_all(n.o);
	got_c = read_all(n.cache);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, n.gf), GGML_STATUS_SUCCESS);
	want_d = read_all(n.gdn);
	want_o = read_all(n.o);
	want_c = read_all(n.cache);
	if (want_why < 0) {
		struct kern_gdn_stats after;
		uint64_t chunked = 0, b_chunked = 0;

		kern_gdn_stats_read(&g_native, &after);
		for (int i = 0; i < KERN_GDN_NCHUNK; i++) {
			chunked += after.chunked[i];
			b_chunked += before.chunked[i];
		}
		assert_int_equal(after.serial - before.serial, want_form == 0 ? 2 : 0);
		assert_int_equal(chunked - b_chunked, want_form == 1 ? 2 : 0);
		for (int w = 0; w < GGE_GDN_WHY_COUNT; w++)
			assert_int_equal(g_ggml[w], ggml_before[w]);
		/* the op's o and state; then what later nodes read of them */
		close_enough(got_d, want_d, n_o, "o", name);
		close_enough(got_d + n_o, want_d + n_o, sh->S * sh->S * sh->Hv * sh->B, "state", name);
		close_enough(got_o, want_o, n_o, "cont", name);
		close_enough(got_c, want_c, sh->S * sh->S * sh->Hv * sh->B, "cache", name);
	} else {
		for (int w = 0; w < GGE_GDN_WHY_COUNT; w++)
			assert_int_equal(g_ggml[w] - ggml_before[w], w == want_why ? 2 : 0);
		assert_memory_equal(got_d, want_d, ggml_nbytes(n.gdn));
		assert_memory_equal(got_o, want_o, ggml_nbytes(n.o));
		assert_memory_equal(got_c, want_c, ggml_nbytes(n.cache));
		if (verbose())
			printf("  %-44s ggml's kernel (reason %d), bit-identical\n", name, want_why);
	}
	free(got_d);
	free(got_o);
	free(got_c);
	free(want_d);
	free(want_o);
	free(want_c);
	net_free(&n);
}

/* Kimi-Linear's KDA: equal q/k and value heads, per-channel gates; T
 * around the chunk length (16) and not a multiple of it, and several
 * sequences. */
static void test_kda_native(void **state)
{
	static const int64_t Ts[] = { 2, 15, 16, 17, 33, 100 };
	uint32_t seed = 10;

	(void)state;
	for (size_t i = 0; i < sizeof(Ts) / sizeof(Ts[0]); i++)
		for (int64_t B = 1; B <= 2; B++) {
			struct shape sh = { .S = 64, .Hk = 4, .Hv = 4, .T = Ts[i], .B = B, .Bq = B, .K = 1,
					    .kda = true, .gmin = -3.0f, .gmax = -1e-3f, .seed = seed++ };

			check(&sh, GGE_GDN_AUTO, -1, 1);
		}
	/* head size 128 as Kimi's, and a small one */
	{
		struct shape sh = { .S = 128, .Hk = 2, .Hv = 2, .T = 50, .B = 1, .Bq = 1, .K = 1,
				    .kda = true, .gmin = -1.0f, .gmax = -1e-3f, .seed = seed++ };

		check(&sh, GGE_GDN_AUTO, -1, 1);
		sh.S = 16;
		sh.T = 40;
		check(&sh, GGE_GDN_ON, -1, 1);
	}
}

/* The scalar gate, and ggml's head order: value head h reads q/k head
 * h % H_k (Qwen3.5: fewer q/k heads, repeated as a block). */
static void test_gdn_tiled_heads(void **state)
{
	uint32_t seed = 40;

	(void)state;
	for (int kda = 0; kda < 2; kda++)
		for (int64_t T = 1; T <= 37; T += 36) {
			struct shape sh = { .S = 32, .Hk = 2, .Hv = 6, .T = T, .B = 2, .Bq = 2, .K = 1,
					    .kda = kda, .gmin = -2.0f, .gmax = -1e-3f, .seed = seed++ };

			check(&sh, GGE_GDN_ON, -1, T == 1 ? 0 : 1);
		}
}

/* Decode (T = 1): auto leaves it to ggml, on runs pprpc's serial form;
 * with K > 1 and T = 1 only the first snapshot slot is written, as
 * pprpc's packed output does. */
static void test_decode(void **state)
{
	struct shape sh = { .S = 64, .Hk = 4, .Hv = 4, .T = 1, .B = 2, .Bq = 2, .K = 1,
			    .kda = true, .gmin = -2.0f, .gmax = -1e-3f, .seed = 70 };

	(void)state;
	check(&sh, GGE_GDN_AUTO, GGE_GDN_WHY_AUTO, 0);
	check(&sh, GGE_GDN_ON, -1, 0);
	sh.K = 3;
	check(&sh, GGE_GDN_ON, -1, 0);
}

/* What stays with ggml: the setting off; snapshots of intermediate states
 * (K > 1, T > 1); q/k broadcast over sequences; gates outside the shared
 * domain (a positive one, NaN, -inf), checked per run. */
static void test_fallbacks(void **state)
{
	struct shape sh = { .S = 32, .Hk = 2, .Hv = 2, .T = 20, .B = 2, .Bq = 2, .K = 1,
			    .kda = true, .gmin = -2.0f, .gmax = -1e-3f, .seed = 90 };
	static const float bad[3] = { 0.25f, NAN, -INFINITY };

	(void)state;
	check(&sh, GGE_GDN_OFF, GGE_GDN_WHY_OFF, 0);
	sh.K = 4;
	check(&sh, GGE_GDN_ON, GGE_GDN_WHY_SHAPE, 0);
	sh.K = 1;
	sh.Bq = 1;
	check(&sh, GGE_GDN_ON, GGE_GDN_WHY_SHAPE, 0);
	sh.Bq = 2;
	/* gates drawn up to 0.5: some positive */
	sh.gmax = 0.5f;
	check(&sh, GGE_GDN_AUTO, GGE_GDN_WHY_GATE, 0);
	sh.gmax = -1e-3f;
	for (int i = 0; i < 3; i++) {
		struct net n;
		uint64_t gate = g_ggml[GGE_GDN_WHY_GATE], runs = native_runs();
		char err[256] = "";
		float *got, *want;

		gge_dev_gdn_config(g_dev, GGE_GDN_AUTO, &g_native, g_ggml, 0);
		assert_int_equal(net_build(&n, &sh), 0);
		/* one good run, then one bad gate in the middle */
		assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), 0);
		assert_int_equal(native_runs(), runs + 1);
		ggml_backend_tensor_set(n.g, &bad[i], 7 * sizeof(float), sizeof(float));
		assert_int_equal(gge_graph_compute(g_dev, n.gg, err, sizeof(err)), 0);
		assert_int_equal(g_ggml[GGE_GDN_WHY_GATE], gate + 1);
		assert_int_equal(native_runs(), runs + 1);
		got = read_all(n.gdn);
		assert_int_equal(ggml_backend_graph_compute(g_cpu, n.gf), GGML_STATUS_SUCCESS);
		want = read_all(n.gdn);
		assert_memory_equal(got, want, ggml_nbytes(n.gdn));
		free(got);
		free(want);
		net_free(&n);
	}
}

/* The setting in words, for STATS. */
static void test_status(void **state)
{
	char buf[200];

	(void)state;
	gge_dev_gdn_config(g_dev, GGE_GDN_AUTO, NULL, NULL, 0);
	gge_dev_gdn_status(g_dev, buf, sizeof(buf));
	assert_string_equal(buf, "auto (pprpc's CPU kernels)");
	gge_dev_gdn_config(g_dev, GGE_GDN_OFF, NULL, NULL, 0);
	gge_dev_gdn_status(g_dev, buf, sizeof(buf));
	assert_string_equal(buf, "off");
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
		cmocka_unit_test(test_kda_native),
		cmocka_unit_test(test_gdn_tiled_heads),
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_fallbacks),
		cmocka_unit_test(test_status),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

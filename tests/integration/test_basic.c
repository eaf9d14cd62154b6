/*
 * Integration: real pprpcd processes on 127.0.0.1 driven through libpprpc —
 * buffers, set/get round trips (1 byte .. 256 MiB), graphs, concurrent
 * clients, disconnect frees, the memory floor, several daemons at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "tests/integration/harness.h"
#include "util/hash.h"
#include "util/version.h"

#define MIB (1024ull * 1024ull)

static struct tdaemon g_d;

static int setup(void **state)
{
	(void)state;
	return tdaemon_start(&g_d, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return tdaemon_stop(&g_d) == 0 ? 0 : -1;
}

static pprpc_client *connect_ok(const struct tdaemon *d)
{
	pprpc_client *c = NULL;
	char err[256] = "";
	pprpc_connect_opts o = { .client_name = "test", .err_buf = err, .err_len = sizeof(err) };
	int rc = pprpc_connect(d->addr, &o, &c);

	if (rc < 0)
		fprintf(stderr, "connect %s: %s\n", d->addr, err);
	assert_int_equal(rc, 0);
	return c;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static void test_hello(void **state)
{
	pprpc_client *c = connect_ok(&g_d);
	pprpc_device_info di;
	pprpc_caps caps;

	(void)state;
	assert_int_equal(pprpc_device_count(c), 1);
	assert_int_equal(pprpc_device_get(c, 0, &di), 0);
	assert_string_equal(di.name, "cpu");
	assert_true(di.total_bytes > 0);
	assert_int_equal(di.floor_bytes, 1536 * MIB);
	assert_int_equal(pprpc_get_caps(c, &caps), 0);
	/* Advertised exactly when provided. */
	assert_true(caps.async);
	assert_true(caps.events);
	assert_true(caps.p2p);
	assert_false(caps.rdma);
	assert_string_equal(pprpc_daemon_version(c), PPRPC_VERSION);
	pprpc_close(c);
}

static void test_set_get_sizes(void **state)
{
	static const uint64_t sizes[] = { 1, 2, 3, 4095, 4096, 4097, 65535, 65536, 65537, 1 * MIB + 7,
					  16 * MIB, 256 * MIB };
	pprpc_client *c = connect_ok(&g_d);

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k];
		uint8_t *src = malloc(n), *dst = malloc(n);
		pprpc_buffer b;

		assert_non_null(src);
		assert_non_null(dst);
		fill(src, n, k + 1);
		memset(dst, 0xEE, n);
		assert_int_equal(pprpc_buffer_alloc(c, 0, n, &b), 0);
		assert_int_equal(pprpc_tensor_set(c, b, 0, src, n), 0);
		assert_int_equal(pprpc_tensor_get(c, b, 0, dst, n), 0);
		assert_true(fnv1a64(src, n) == fnv1a64(dst, n));
		assert_memory_equal(src, dst, n);
		assert_int_equal(pprpc_buffer_free(c, b), 0);
		free(src);
		free(dst);
	}
	pprpc_close(c);
}

static void test_regions_copy_clear(void **state)
{
	pprpc_client *c = connect_ok(&g_d);
	uint8_t src[1000], out[1000], zero[1000];
	pprpc_buffer a, b;

	(void)state;
	memset(zero, 0, sizeof(zero));
	fill(src, sizeof(src), 9);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &a), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &b), 0);
	/* Fresh buffers read as zeros. */
	assert_int_equal(pprpc_tensor_get(c, a, 0, out, sizeof(out)), 0);
	assert_memory_equal(out, zero, sizeof(out));
	/* Set at an odd offset, copy to another offset of another buffer. */
	assert_int_equal(pprpc_tensor_set(c, a, 13, src, sizeof(src)), 0);
	assert_int_equal(pprpc_tensor_copy(c, a, 13, b, 3000, 1000), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 3000, out, 1000), 0);
	assert_memory_equal(out, src, 1000);
	/* The last byte of the buffer is addressable, one past is not. */
	assert_int_equal(pprpc_tensor_set(c, a, 4095, src, 1), 0);
	assert_int_equal(pprpc_tensor_set(c, a, 4096, src, 1), PPRPC_ERANGE);
	assert_int_equal(pprpc_tensor_copy(c, a, 3500, b, 0, 1000), PPRPC_ERANGE);
	assert_non_null(strstr(pprpc_last_error(c), "outside buffer"));
	/* Zero-length set/get inside the buffer are fine. */
	assert_int_equal(pprpc_tensor_set(c, a, 10, NULL, 0), 0);
	assert_int_equal(pprpc_tensor_get(c, a, 10, NULL, 0), 0);
	assert_int_equal(pprpc_buffer_clear(c, b, 0xAB), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 4000, out, 96), 0);
	for (int i = 0; i < 96; i++)
		assert_int_equal(out[i], 0xAB);
	assert_int_equal(pprpc_buffer_free(c, a), 0);
	assert_int_equal(pprpc_buffer_free(c, a), PPRPC_EHANDLE);
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	pprpc_close(c);
}

/* y = W^T x + bias, then scaled, with W f16 [K,N], x f32 [K,M]; plus a
 * permuted view read by CPY.  Checked against a double reference. */
static void test_graph(void **state)
{
	enum { K = 67, N = 33, M = 5 };
	pprpc_client *c = connect_ok(&g_d);
	float w32[K * N], x[K * M], bias[N], y[N * M], yt[N * M];
	uint16_t w16[K * N];
	pprpc_graph_builder *gb;
	pprpc_buffer bw, bx, bb, by, byt;
	pprpc_tensor tw, tx, tb, ty, tyt;
	pprpc_graph g;
	int iw, ix, ib, iy, iyt, mm, sum, sc;
	pprpc_stats *st;

	(void)state;
	srand(7);
	for (int i = 0; i < K * N; i++) {
		/* Values exactly representable in f16, so the reference is exact. */
		w32[i] = (float)((rand() % 64) - 32) / 16.0f;
		union { float f; uint32_t u; } v = { w32[i] };
		uint32_t sign = (v.u >> 16) & 0x8000, exp = (v.u >> 23) & 0xff, man = v.u & 0x7fffff;
		w16[i] = v.u == 0 || v.u == 0x80000000u ? (uint16_t)sign
							 : (uint16_t)(sign | ((exp - 112) << 10) | (man >> 13));
	}
	for (int i = 0; i < K * M; i++)
		x[i] = (float)((rand() % 200) - 100) / 50.0f;
	for (int i = 0; i < N; i++)
		bias[i] = (float)i * 0.25f;

	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(w16), &bw), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(x), &bx), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(bias), &bb), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(y), &by), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(yt), &byt), 0);
	assert_int_equal(pprpc_tensor_set(c, bw, 0, w16, sizeof(w16)), 0);
	assert_int_equal(pprpc_tensor_set(c, bx, 0, x, sizeof(x)), 0);
	assert_int_equal(pprpc_tensor_set(c, bb, 0, bias, sizeof(bias)), 0);

	tw = pprpc_tensor_make(bw, 0, PPRPC_F16, K, N, 1, 1);
	tx = pprpc_tensor_make(bx, 0, PPRPC_F32, K, M, 1, 1);
	tb = pprpc_tensor_make(bb, 0, PPRPC_F32, N, 1, 1, 1);
	ty = pprpc_tensor_make(by, 0, PPRPC_F32, N, M, 1, 1);
	tyt = pprpc_tensor_make(byt, 0, PPRPC_F32, M, N, 1, 1);
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	iw = pprpc_gb_tensor(gb, &tw);
	ix = pprpc_gb_tensor(gb, &tx);
	ib = pprpc_gb_tensor(gb, &tb);
	iy = pprpc_gb_tensor(gb, &ty);
	iyt = pprpc_gb_tensor(gb, &tyt);
	mm = pprpc_gb_mul_mat(gb, iw, ix, -1);
	assert_true(mm >= 0);
	sum = pprpc_gb_add(gb, mm, ib, -1);
	assert_true(sum >= 0);
	sc = pprpc_gb_scale(gb, sum, 0.5f, 1.0f, iy);
	assert_int_equal(sc, iy);
	/* Transposed copy of the scratch result: a permuted (non-contiguous) read. */
	assert_true(pprpc_gb_cpy(gb, pprpc_gb_permute2(gb, sum, 0, 1), PPRPC_F32, iyt) >= 0);
	/* A shape error (K mismatch) and a type error are caught while building. */
	assert_int_equal(pprpc_gb_mul_mat(gb, iw, iy, -1), PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_mul_mat(gb, iw, iw, -1), PPRPC_ETYPE);
	assert_true(strlen(pprpc_gb_error(gb)) > 0);
	assert_int_equal(pprpc_graph_create(c, 0, gb, &g), 0);
	pprpc_graph_builder_free(gb);

	for (int run = 0; run < 3; run++) {
		assert_int_equal(pprpc_graph_run(c, g), 0);
		assert_int_equal(pprpc_tensor_get(c, by, 0, y, sizeof(y)), 0);
		assert_int_equal(pprpc_tensor_get(c, byt, 0, yt, sizeof(yt)), 0);
		for (int m = 0; m < M; m++)
			for (int n = 0; n < N; n++) {
				double ref = 0;

				for (int k = 0; k < K; k++)
					ref += (double)w32[n * K + k] * x[m * K + k];
				ref += bias[n];
				/* f32 accumulation of 67 products: 1e-4 relative is
				 * generous yet catches any indexing error. */
				assert_true(fabs(y[m * N + n] - (ref * 0.5 + 1.0)) <= 1e-4 * (1 + fabs(ref)));
				assert_true(fabs(yt[n * M + m] - ref) <= 1e-4 * (1 + fabs(ref)));
			}
	}
	assert_int_equal(pprpc_stats_get(c, &st), 0);
	assert_true(pprpc_stats_u64(st, "devices", 0, "graph_creates") >= 1);
	assert_true(pprpc_stats_u64(st, "devices", 0, "graph_runs") >= 3);
	/* where device 0's time went: GRAPH_RUN's account has every run */
	{
		int found = 0;

		for (int i = 0; i < pprpc_stats_count(st, "exec_times"); i++)
			if (pprpc_stats_u64(st, "exec_times", i, "device") == 0 &&
			    !strcmp(pprpc_stats_str(st, "exec_times", i, "type"), "GRAPH_RUN")) {
				assert_true(pprpc_stats_u64(st, "exec_times", i, "execs") >= 3);
				assert_true(pprpc_stats_u64(st, "exec_times", i, "ns") > 0);
				found = 1;
			}
		assert_true(found);
	}
	pprpc_stats_free(st);
	assert_int_equal(pprpc_fence(c, 0), 0);
	assert_int_equal(pprpc_graph_free(c, g), 0);
	assert_int_equal(pprpc_graph_run(c, g), PPRPC_EHANDLE);
	pprpc_close(c);
}

/* A row of STATS request_counts / device 0's exec_times (0 when absent). */
static uint64_t req_count(const pprpc_stats *s, const char *type, const char *field)
{
	for (int i = 0; i < pprpc_stats_count(s, "request_counts"); i++)
		if (!strcmp(pprpc_stats_str(s, "request_counts", i, "type"), type))
			return pprpc_stats_u64(s, "request_counts", i, field);
	return 0;
}

static uint64_t exec_count(const pprpc_stats *s, const char *type, const char *field)
{
	for (int i = 0; i < pprpc_stats_count(s, "exec_times"); i++)
		if (pprpc_stats_u64(s, "exec_times", i, "device") == 0 &&
		    !strcmp(pprpc_stats_str(s, "exec_times", i, "type"), type))
			return pprpc_stats_u64(s, "exec_times", i, field);
	return 0;
}

/* STATS splits a client's requests at its connection's first graph or
 * boundary request: before it they load (buffers, weights), from it on
 * they run.  What llama-vs-rpc reports as a run's load and its decode.
 * Deltas between an observer's snapshots: the daemon serves the other
 * tests too, and the observer, which runs no graph, stays loading. */
static void test_load_run_split(void **state)
{
	enum { N = 256 };
	pprpc_client *obs = connect_ok(&g_d), *c;
	float x[N], y[N];
	pprpc_buffer bx, by, b2;
	pprpc_tensor tx, ty;
	pprpc_graph_builder *gb;
	pprpc_graph g;
	pprpc_stats *s0, *s1;
	int ix, iy;

	(void)state;
	for (int i = 0; i < N; i++)
		x[i] = (float)i;
	assert_int_equal(pprpc_stats_get(obs, &s0), 0);
	c = connect_ok(&g_d);
	/* load: two buffers, a weight, a cleared buffer (a queued command) */
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(x), &bx), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(y), &by), 0);
	assert_int_equal(pprpc_tensor_set(c, bx, 0, x, sizeof(x)), 0);
	assert_int_equal(pprpc_buffer_clear(c, by, 0), 0);
	/* run: the graph, then an input, a clear, a buffer and the output */
	tx = pprpc_tensor_make(bx, 0, PPRPC_F32, N, 1, 1, 1);
	ty = pprpc_tensor_make(by, 0, PPRPC_F32, N, 1, 1, 1);
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	ix = pprpc_gb_tensor(gb, &tx);
	iy = pprpc_gb_tensor(gb, &ty);
	assert_int_equal(pprpc_gb_scale(gb, ix, 2.0f, 0.0f, iy), iy);
	assert_int_equal(pprpc_graph_create(c, 0, gb, &g), 0);
	pprpc_graph_builder_free(gb);
	assert_int_equal(pprpc_graph_run(c, g), 0);
	assert_int_equal(pprpc_tensor_get(c, by, 0, y, 100), 0);
	for (int i = 0; i < 25; i++)
		assert_true(y[i] == 2.0f * (float)i);
	assert_int_equal(pprpc_tensor_set(c, bx, 0, x, 40), 0);
	assert_int_equal(pprpc_buffer_clear(c, by, 0), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 1024, &b2), 0);
	assert_int_equal(pprpc_fence(c, 0), 0);
	assert_int_equal(pprpc_stats_get(obs, &s1), 0);

#define D(type, field) (req_count(s1, type, field) - req_count(s0, type, field))
	assert_int_equal(D("BUFFER_ALLOC", "load_requests"), 2);
	assert_int_equal(D("BUFFER_ALLOC", "load_bytes"), sizeof(x) + sizeof(y));
	assert_int_equal(D("BUFFER_ALLOC", "run_requests"), 1);
	assert_int_equal(D("BUFFER_ALLOC", "run_bytes"), 1024);
	assert_int_equal(D("TENSOR_SET", "load_requests"), 1);
	assert_int_equal(D("TENSOR_SET", "load_bytes"), sizeof(x));
	assert_int_equal(D("TENSOR_SET", "run_requests"), 1);
	assert_int_equal(D("TENSOR_SET", "run_bytes"), 40);
	assert_int_equal(D("BUFFER_CLEAR", "load_requests"), 1);
	assert_int_equal(D("BUFFER_CLEAR", "run_requests"), 1);
	/* the graph request is the first of the run */
	assert_int_equal(D("GRAPH_CREATE", "load_requests"), 0);
	assert_int_equal(D("GRAPH_CREATE", "run_requests"), 1);
	assert_int_equal(D("GRAPH_RUN", "run_requests"), 1);
	assert_int_equal(D("TENSOR_GET", "run_requests"), 1);
	assert_int_equal(D("TENSOR_GET", "run_bytes"), 100);
	assert_int_equal(D("TENSOR_GET", "load_requests"), 0);
	/* the observer's own STATS: a connection that never ran a graph */
	assert_int_equal(D("STATS", "load_requests"), 1);
	assert_int_equal(D("STATS", "run_requests"), 0);
#undef D
#define E(type, field) (exec_count(s1, type, field) - exec_count(s0, type, field))
	/* both clears ran on the queue, the first as load */
	assert_int_equal(E("BUFFER_CLEAR", "execs"), 2);
	assert_int_equal(E("BUFFER_CLEAR", "load_execs"), 1);
	assert_true(E("BUFFER_CLEAR", "load_ns") > 0);
	assert_true(E("BUFFER_CLEAR", "load_ns") <= E("BUFFER_CLEAR", "ns"));
	assert_true(E("GRAPH_RUN", "execs") >= 1);
	assert_int_equal(E("GRAPH_RUN", "load_execs"), 0);
#undef E
	pprpc_stats_free(s0);
	pprpc_stats_free(s1);
	pprpc_close(c);
	pprpc_close(obs);
}

struct worker_arg {
	const struct tdaemon *d;
	int id;
	int failures;
};

static void *worker(void *p)
{
	struct worker_arg *a = p;
	pprpc_client *c = NULL;
	enum { SZ = 1 << 20 };
	uint8_t *src = malloc(SZ), *dst = malloc(SZ);
	pprpc_buffer b;

	if (!src || !dst || pprpc_connect(a->d->addr, NULL, &c) < 0 || pprpc_buffer_alloc(c, 0, SZ, &b) < 0) {
		a->failures++;
		goto out;
	}
	for (int it = 0; it < 20; it++) {
		fill(src, SZ, (uint64_t)a->id * 1000 + it);
		if (pprpc_tensor_set(c, b, 0, src, SZ) < 0 || pprpc_tensor_get(c, b, 0, dst, SZ) < 0 ||
		    memcmp(src, dst, SZ) != 0)
			a->failures++;
	}
out:
	pprpc_close(c);
	free(src);
	free(dst);
	return NULL;
}

static void test_concurrent_clients(void **state)
{
	enum { NT = 8 };
	pthread_t th[NT];
	struct worker_arg args[NT];

	(void)state;
	for (int i = 0; i < NT; i++) {
		args[i] = (struct worker_arg){ &g_d, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
}

static uint64_t allocated(pprpc_client *c)
{
	pprpc_stats *s;
	uint64_t v;

	assert_int_equal(pprpc_stats_get(c, &s), 0);
	v = pprpc_stats_u64(s, "devices", 0, "allocated_bytes");
	pprpc_stats_free(s);
	return v;
}

static void test_disconnect_frees(void **state)
{
	pprpc_client *obs = connect_ok(&g_d), *c = connect_ok(&g_d);
	uint64_t before = allocated(obs);
	pprpc_buffer b;
	pprpc_graph_builder *gb;
	pprpc_tensor t;
	pprpc_graph g;

	(void)state;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pprpc_buffer_alloc(c, 0, 8 * MIB, &b), 0);
	/* A graph with scratch space holds memory too. */
	t = pprpc_tensor_make(b, 0, PPRPC_F32, 1024, 1024, 1, 1);
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	assert_true(pprpc_gb_scale(gb, pprpc_gb_tensor(gb, &t), 2.0f, 0.0f, -1) >= 0);
	assert_int_equal(pprpc_graph_create(c, 0, gb, &g), 0);
	pprpc_graph_builder_free(gb);
	assert_true(allocated(obs) >= before + 36 * MIB);
	pprpc_close(c);
	/* The daemon notices the close asynchronously. */
	for (int i = 0; i < 200 && allocated(obs) != before; i++)
		usleep(10000);
	assert_int_equal(allocated(obs), before);
	pprpc_close(obs);
}

static void test_memory_floor(void **state)
{
	struct tdaemon d;
	static const char *const args[] = { "--memory-floor-mib", "1048576", NULL };
	pprpc_client *c;
	pprpc_buffer b;

	(void)state;
	/* A 1 TiB floor: nothing can be allocated. */
	assert_int_equal(tdaemon_start(&d, args), 0);
	c = connect_ok(&d);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &b), PPRPC_EFLOOR);
	assert_non_null(strstr(pprpc_last_error(c), "memory floor"));
	/* The connection and the daemon carry on. */
	assert_int_equal(pprpc_fence(c, 0), 0);
	pprpc_close(c);
	assert_int_equal(tdaemon_stop(&d), 0);
}

/* Three daemons, one graph each, results chained through the client. */
static void test_three_daemons(void **state)
{
	struct tdaemon d[3];
	pprpc_client *c[3];
	float v[256], out[256];

	(void)state;
	for (int i = 0; i < 256; i++)
		v[i] = (float)i;
	for (int r = 0; r < 3; r++) {
		assert_int_equal(tdaemon_start(&d[r], NULL), 0);
		c[r] = connect_ok(&d[r]);
	}
	for (int r = 0; r < 3; r++) {
		pprpc_buffer b;
		pprpc_graph_builder *gb;
		pprpc_tensor t;
		pprpc_graph g;

		assert_int_equal(pprpc_buffer_alloc(c[r], 0, sizeof(v), &b), 0);
		assert_int_equal(pprpc_tensor_set(c[r], b, 0, v, sizeof(v)), 0);
		t = pprpc_tensor_make(b, 0, PPRPC_F32, 256, 1, 1, 1);
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		int it = pprpc_gb_tensor(gb, &t);
		assert_int_equal(pprpc_gb_scale(gb, it, 2.0f, 1.0f, it), it); /* in place */
		assert_int_equal(pprpc_graph_create(c[r], 0, gb, &g), 0);
		pprpc_graph_builder_free(gb);
		assert_int_equal(pprpc_graph_run(c[r], g), 0);
		assert_int_equal(pprpc_tensor_get(c[r], b, 0, v, sizeof(v)), 0);
	}
	for (int i = 0; i < 256; i++) {
		/* ((2i+1)*2+1)*2+1 = 8i + 7 */
		out[i] = 8.0f * i + 7.0f;
		assert_true(v[i] == out[i]);
	}
	for (int r = 0; r < 3; r++) {
		pprpc_close(c[r]);
		assert_int_equal(tdaemon_stop(&d[r]), 0);
	}
}

/* A client pinging at a steady pace: the daemon learns it and is awake when
 * the next one is due (wake-ahead); the windows it opened and the pings that
 * came inside one, from its log at exit.  Pings every 2 ms: windows, and
 * most pings inside one; 0.7 and 1.8 ms apart in turn: the same; every
 * 30 ms (slower than the 20 ms it keeps a pace for): none; wake-ahead 0: no
 * line at all. */
static void pace_pings(const char *const *flags, int n, int gap_us, int gap2_us, uint64_t *ret_windows,
		       uint64_t *ret_hits, int *ret_line)
{
	struct tdaemon d;
	pprpc_client *c;
	char *log, *at;
	unsigned long long w = 0, h = 0;

	assert_int_equal(tdaemon_start(&d, flags), 0);
	c = connect_ok(&d);
	for (int i = 0; i < n; i++) {
		/* gap2: every other gap, two bursts a period (a token's requests, its FENCE) */
		struct timespec ts = { 0, (long)(i % 2 ? gap2_us : gap_us) * 1000 };

		assert_int_equal(pprpc_ping(c, 5000), 0);
		nanosleep(&ts, NULL);
	}
	pprpc_close(c);
	assert_int_equal(tdaemon_stop_log(&d, &log), 0);
	at = strstr(log, "wake-ahead: ");
	*ret_line = at != NULL;
	if (at)
		assert_int_equal(sscanf(at, "wake-ahead: %llu windows opened, %llu bursts came inside one", &w, &h), 2);
	free(log);
	*ret_windows = w;
	*ret_hits = h;
}

static void test_wake_ahead(void **state)
{
	static const char *const off[] = { "--wake-ahead", "0", NULL };
	uint64_t w, h;
	int line;

	(void)state;
	pace_pings(NULL, 300, 2000, 2000, &w, &h, &line);
	print_message("wake-ahead, a ping every 2 ms: %llu windows, %llu pings inside one (of 300)\n",
		      (unsigned long long)w, (unsigned long long)h);
	assert_true(line);
	/* a loaded host sleeps longer than asked now and then: generous */
	assert_true(w >= 150);
	assert_true(h >= 100);
	assert_true(h <= w);
	/* bursts 0.7 and 1.8 ms apart in turn: foretold from two back */
	pace_pings(NULL, 300, 700, 1800, &w, &h, &line);
	print_message("wake-ahead, pings 0.7 and 1.8 ms apart in turn: %llu windows, %llu pings inside one (of 300)\n",
		      (unsigned long long)w, (unsigned long long)h);
	assert_true(w >= 150);
	assert_true(h >= 100);
	assert_true(h <= w);
	pace_pings(NULL, 12, 30000, 30000, &w, &h, &line);
	assert_true(line);
	assert_int_equal(w, 0);
	pace_pings(off, 50, 2000, 2000, &w, &h, &line);
	assert_false(line);
}

static void test_daemon_flags(void **state)
{
	struct tdaemon d;
	static const char *const bad_listen[] = { "--listen", "not-an-address:xyz", NULL };
	static const char *const bad_dev[] = { "--devices", "tpu", NULL };

	(void)state;
	/* Both must fail to start (the harness reports the log). */
	assert_int_equal(tdaemon_start(&d, bad_listen), -1);
	assert_int_equal(tdaemon_start(&d, bad_dev), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_set_get_sizes),
		cmocka_unit_test(test_regions_copy_clear),
		cmocka_unit_test(test_graph),
		cmocka_unit_test(test_load_run_split),
		cmocka_unit_test(test_concurrent_clients),
		cmocka_unit_test(test_disconnect_frees),
		cmocka_unit_test(test_memory_floor),
		cmocka_unit_test(test_three_daemons),
		cmocka_unit_test(test_daemon_flags),
		cmocka_unit_test(test_wake_ahead),
	};

	return cmocka_run_group_tests_name("integration_basic", tests, setup, teardown);
}

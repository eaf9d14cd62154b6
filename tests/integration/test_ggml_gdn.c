/*
 * Integration: ggml's GATED_DELTA_NET on pprpc's chunked kernels in a real
 * pprpcd serving ggml:CPU (--ggml-native-gdn, doc/ggml.md).
 *
 * A graph shaped as llama.cpp's Kimi-Linear layer builds it (q and k
 * through L2_NORM, beta through SIGMOID, the fused op with K = 1, its
 * output read through a view + CONT and its state copied into a state
 * cache) is made with ggml in this process, sent in wire form, created
 * once and run; ggml-cpu computes the same graph here.  Checked:
 *   - with auto, prefill lengths (T around and past the chunk length, T not
 *     a multiple of it, one and two sequences) run on pprpc's chunked form
 *     (STATS gdn_chunked counts every run, no gdn_ggml_* moves) and match
 *     ggml-cpu within TOL_MAX of the RMS per element and TOL_NMSE overall;
 *   - decode (T = 1) stays with ggml (gdn_ggml_auto), as do state snapshots
 *     of intermediate tokens (K > 1: gdn_ggml_shape) and a run whose gates
 *     are not all <= 0 (gdn_ggml_gate), each bit-identical to ggml-cpu;
 *   - a daemon with the default (off) runs everything with ggml's kernel
 *     (gdn_ggml_off) and says "off" in gdn_native.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <math.h>

#include "daemon/backend/ggml/ggml_load.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "tests/integration/ggml_wire.h"
#include "tests/integration/harness.h"
#include "tests/integration/wire.h"

/* As tests/unit/test_ggml_gdn_engine.c: fp32 both, other summation orders
 * (worst seen here 5.1e-6 and 4.5e-14, with the daemon's 2 threads). */
#define TOL_MAX 2e-5
#define TOL_NMSE 1e-11

static struct tdaemon g_auto;  /* --ggml-native-gdn auto */
static ggml_backend_t g_cpu;

/* A daemon's view of one connection. */
struct link {
	int fd;
	uint64_t req;
};

struct shape {
	int64_t S, H, T, B;
	int32_t K;
	float gmax;         /* gates in [-2, gmax] */
	uint32_t seed;
};

struct net {
	struct shape sh;
	struct ggml_context *ctx;
	ggml_backend_buffer_t buf;
	uint64_t remote;
	struct ggml_cgraph *gf;
	struct gw_graph w;
	uint64_t graph;
	struct ggml_tensor *in[6];   /* q, k raw; v, g, beta raw, state */
	struct ggml_tensor *gdn, *o, *cache;
};

/* GATED_DELTA_NET counters of device 0. */
struct gdn_counts {
	uint64_t serial, chunked, fallback, off, autos, shape, gate, nomem;
	char native[200];
};

/* ---- raw requests ------------------------------------------------------------ */

static int call(struct link *l, uint16_t type, const ProtobufCMessage *msg, const void *bulk, size_t bulk_len,
		const ProtobufCMessageDescriptor *rd, ProtobufCMessage **rep, char *errmsg, size_t errlen)
{
	struct wire_reply r;
	int rc = wire_call(l->fd, type, ++l->req, msg, bulk, bulk_len, &r);

	assert_int_equal(rc, 0);
	if (r.is_error) {
		if (errmsg)
			snprintf(errmsg, errlen, "%s", r.msg);
		rc = r.code;
	} else if (rd) {
		assert_int_equal(wire_reply_unpack(&r, rd, rep), 0);
	}
	wire_reply_free(&r);
	return rc;
}

static void link_open(struct link *l, const struct tdaemon *d)
{
	l->fd = traw_connect(d);
	l->req = 100;
	assert_true(l->fd >= 0);
	assert_int_equal(wire_hello(l->fd), 0);
}

static uint64_t alloc_remote(struct link *l, uint64_t size)
{
	Pprpc__BufferAlloc a = PPRPC__BUFFER_ALLOC__INIT;
	ProtobufCMessage *rep = NULL;
	char err[256] = "";
	uint64_t h;

	a.device = 0;
	a.size = size;
	if (call(l, MSG_BUFFER_ALLOC, &a.base, NULL, 0, &pprpc__buffer_alloc_reply__descriptor, &rep, err,
		 sizeof(err)) != 0)
		fail_msg("BUFFER_ALLOC: %s", err);
	h = ((Pprpc__BufferAllocReply *)rep)->buffer;
	meta_free(rep);
	return h;
}

static uint64_t offset_of(const struct net *n, const struct ggml_tensor *t)
{
	return (uint64_t)((const uint8_t *)t->data - (const uint8_t *)ggml_backend_buffer_get_base(n->buf));
}

static void upload(struct link *l, const struct net *n, const struct ggml_tensor *t)
{
	Pprpc__TensorSet s = PPRPC__TENSOR_SET__INIT;

	s.buffer = n->remote;
	s.offset = offset_of(n, t);
	s.size = ggml_nbytes(t);
	assert_int_equal(call(l, MSG_TENSOR_SET, &s.base, t->data, ggml_nbytes(t), NULL, NULL, NULL, 0), 0);
}

static float *download(struct link *l, const struct net *n, const struct ggml_tensor *t)
{
	Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
	struct wire_reply r;
	float *x = malloc(ggml_nbytes(t));

	assert_non_null(x);
	g.buffer = n->remote;
	g.offset = offset_of(n, t);
	g.size = ggml_nbytes(t);
	assert_int_equal(wire_call(l->fd, MSG_TENSOR_GET, ++l->req, &g.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.bulk_len, ggml_nbytes(t));
	memcpy(x, r.bulk, ggml_nbytes(t));
	wire_reply_free(&r);
	return x;
}

static void run_remote(struct link *l, const struct net *n)
{
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;
	char err[256] = "";

	r.graph = n->graph;
	if (call(l, MSG_GRAPH_RUN, &r.base, NULL, 0, NULL, NULL, err, sizeof(err)) != 0)
		fail_msg("GRAPH_RUN: %s", err);
}

static void counts(struct link *l, struct gdn_counts *c)
{
	Pprpc__Stats s = PPRPC__STATS__INIT;
	ProtobufCMessage *rep = NULL;
	const Pprpc__DeviceStats *d;

	assert_int_equal(call(l, MSG_STATS, &s.base, NULL, 0, &pprpc__stats_reply__descriptor, &rep, NULL, 0), 0);
	assert_true(((Pprpc__StatsReply *)rep)->n_devices >= 1);
	d = ((Pprpc__StatsReply *)rep)->devices[0];
	*c = (struct gdn_counts){ d->gdn_serial, d->gdn_chunked, d->gdn_fallback, d->gdn_ggml_off, d->gdn_ggml_auto,
				  d->gdn_ggml_shape, d->gdn_ggml_gate, d->gdn_ggml_nomem, "" };
	snprintf(c->native, sizeof(c->native), "%s", d->gdn_native ? d->gdn_native : "");
	meta_free(rep);
}

/* ---- the layer ----------------------------------------------------------------- */

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static void fill(struct ggml_tensor *t, uint32_t *seed, float lo, float hi)
{
	float *x = t->data;

	for (int64_t i = 0; i < ggml_nelements(t); i++)
		x[i] = lo + (hi - lo) * frand(seed);
}

/* Build sh locally and remotely (inputs uploaded, graph created). */
static void net_make(struct link *l, struct net *n, const struct shape *sh)
{
	const int64_t S = sh->S, H = sh->H, T = sh->T, B = sh->B;
	struct ggml_init_params p = { .mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead(),
				      .no_alloc = true };
	ProtobufCMessage *rep = NULL;
	struct ggml_tensor *ov, *sv;
	struct gw_map map;
	uint32_t seed = sh->seed;
	char err[256] = "";

	memset(n, 0, sizeof(*n));
	n->sh = *sh;
	n->ctx = ggml_init(p);
	assert_non_null(n->ctx);
	n->in[0] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, H, T, B);
	n->in[1] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, H, T, B);
	n->in[2] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, H, T, B);
	n->in[3] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, H, T, B);  /* KDA: per channel */
	n->in[4] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, 1, H, T, B);
	n->in[5] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, S, H, B);
	n->cache = ggml_new_tensor_1d(n->ctx, GGML_TYPE_F32, S * S * H * B);
	n->gdn = ggml_gated_delta_net(n->ctx, ggml_l2_norm(n->ctx, n->in[0], 1e-6f),
				      ggml_l2_norm(n->ctx, n->in[1], 1e-6f), n->in[2], n->in[3],
				      ggml_sigmoid(n->ctx, n->in[4]), n->in[5], sh->K);
	ov = ggml_view_4d(n->ctx, n->gdn, S, H, T, B, ggml_row_size(GGML_TYPE_F32, S),
			  ggml_row_size(GGML_TYPE_F32, S * H), ggml_row_size(GGML_TYPE_F32, S * H * T), 0);
	sv = ggml_view_4d(n->ctx, n->gdn, S, S, H, B, ggml_row_size(GGML_TYPE_F32, S),
			  ggml_row_size(GGML_TYPE_F32, S * S), ggml_row_size(GGML_TYPE_F32, S * S * H),
			  ggml_row_size(GGML_TYPE_F32, S * H * T * B));
	n->o = ggml_cont(n->ctx, ov);
	n->gf = ggml_new_graph(n->ctx);
	ggml_build_forward_expand(n->gf, ggml_cpy(n->ctx, sv, ggml_view_1d(n->ctx, n->cache, S * S * H * B, 0)));
	ggml_build_forward_expand(n->gf, n->o);
	n->buf = ggml_backend_alloc_ctx_tensors(n->ctx, g_cpu);
	assert_non_null(n->buf);
	fill(n->in[0], &seed, -1.0f, 1.0f);
	fill(n->in[1], &seed, -1.0f, 1.0f);
	fill(n->in[2], &seed, -1.0f, 1.0f);
	fill(n->in[3], &seed, -2.0f, sh->gmax);
	fill(n->in[4], &seed, -2.0f, 2.0f);
	fill(n->in[5], &seed, -0.5f, 0.5f);
	n->remote = alloc_remote(l, ggml_backend_buffer_get_size(n->buf));
	for (int i = 0; i < 6; i++)
		upload(l, n, n->in[i]);
	map = (struct gw_map){ n->buf, n->remote };
	assert_int_equal(gw_serialize(n->gf, &map, 1, 0, &n->w), 0);
	if (call(l, MSG_GGML_GRAPH_CREATE, &n->w.msg.base, NULL, 0, &pprpc__graph_create_reply__descriptor, &rep, err,
		 sizeof(err)) != 0)
		fail_msg("GGML_GRAPH_CREATE: %s", err);
	n->graph = ((Pprpc__GraphCreateReply *)rep)->graph;
	meta_free(rep);
}

static void net_free(struct link *l, struct net *n)
{
	Pprpc__GraphFree f = PPRPC__GRAPH_FREE__INIT;
	Pprpc__BufferFree b = PPRPC__BUFFER_FREE__INIT;

	f.graph = n->graph;
	assert_int_equal(call(l, MSG_GRAPH_FREE, &f.base, NULL, 0, NULL, NULL, NULL, 0), 0);
	b.buffer = n->remote;
	assert_int_equal(call(l, MSG_BUFFER_FREE, &b.base, NULL, 0, NULL, NULL, NULL, 0), 0);
	gw_free(&n->w);
	ggml_backend_buffer_free(n->buf);
	ggml_free(n->ctx);
}

/* got against want over n floats: per element against the RMS, and NMSE. */
static void close_enough(const float *got, const float *want, int64_t n, const char *what, const struct shape *sh)
{
	double ss = 0, se = 0, worst = 0;

	for (int64_t i = 0; i < n; i++)
		ss += (double)want[i] * want[i];
	for (int64_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);

		se += e * e;
		if (!(e <= worst))
			worst = e;
	}
	worst /= sqrt(ss / (double)n);
	printf("  KDA S=%lld H=%lld T=%lld B=%lld %-5s max err/rms %.3g, nmse %.3g\n", (long long)sh->S,
	       (long long)sh->H, (long long)sh->T, (long long)sh->B, what, worst, se / ss);
	if (!(worst <= TOL_MAX) || !(se / ss <= TOL_NMSE))
		fail_msg("%s: max err/rms %.3g (bound %.1g), nmse %.3g (bound %.1g)", what, worst, TOL_MAX, se / ss,
			 TOL_NMSE);
}

/* Run n runs times remotely, then ggml-cpu here; compare (exact: bit for
 * bit, else within the tolerance). */
static void run_and_compare(struct link *l, struct net *n, int runs, bool exact)
{
	const int64_t n_o = n->sh.S * n->sh.H * n->sh.T * n->sh.B, n_s = n->sh.S * n->sh.S * n->sh.H * n->sh.B;
	float *got_d, *got_o, *got_c;

	for (int r = 0; r < runs; r++)
		run_remote(l, n);
	got_d = download(l, n, n->gdn);
	got_o = download(l, n, n->o);
	got_c = download(l, n, n->cache);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, n->gf), GGML_STATUS_SUCCESS);
	if (exact) {
		assert_memory_equal(got_d, n->gdn->data, ggml_nbytes(n->gdn));
		assert_memory_equal(got_o, n->o->data, ggml_nbytes(n->o));
		assert_memory_equal(got_c, n->cache->data, ggml_nbytes(n->cache));
	} else {
		close_enough(got_d, n->gdn->data, n_o, "o", &n->sh);
		close_enough(got_d + n_o, (const float *)n->gdn->data + n_o, n_s, "state", &n->sh);
		close_enough(got_o, n->o->data, n_o, "cont", &n->sh);
		close_enough(got_c, n->cache->data, n_s, "cache", &n->sh);
	}
	free(got_d);
	free(got_o);
	free(got_c);
}

/* ---- tests ----------------------------------------------------------------------- */

/* Prefill lengths on pprpc's chunked form, each graph run three times. */
static void test_prefill_native(void **state)
{
	static const int64_t Ts[] = { 16, 17, 50, 100 };
	struct gdn_counts a, b;
	struct link l;
	uint32_t seed = 1;

	(void)state;
	link_open(&l, &g_auto);
	counts(&l, &a);
	assert_non_null(strstr(a.native, "auto (pprpc's CPU kernels)"));
	for (size_t i = 0; i < sizeof(Ts) / sizeof(Ts[0]); i++)
		for (int64_t B = 1; B <= 2; B++) {
			struct shape sh = { .S = 128, .H = 4, .T = Ts[i], .B = B, .K = 1, .gmax = -1e-3f,
					    .seed = seed++ };
			struct net n;

			net_make(&l, &n, &sh);
			run_and_compare(&l, &n, 3, false);
			net_free(&l, &n);
		}
	counts(&l, &b);
	assert_int_equal(b.chunked - a.chunked, 3 * 8);
	assert_int_equal(b.serial - a.serial, 0);
	assert_int_equal(b.fallback - a.fallback, 0);
	assert_int_equal(b.off + b.autos + b.shape + b.gate + b.nomem, a.off + a.autos + a.shape + a.gate + a.nomem);
	close(l.fd);
}

/* What auto leaves to ggml's kernel, each counted with its reason. */
static void test_ggml_kept(void **state)
{
	struct shape decode = { .S = 128, .H = 4, .T = 1, .B = 2, .K = 1, .gmax = -1e-3f, .seed = 50 };
	struct shape snaps = { .S = 64, .H = 2, .T = 20, .B = 1, .K = 4, .gmax = -1e-3f, .seed = 51 };
	struct shape pos = { .S = 64, .H = 2, .T = 20, .B = 1, .K = 1, .gmax = 0.5f, .seed = 52 };
	struct gdn_counts a, b;
	struct link l;
	struct net n;

	(void)state;
	link_open(&l, &g_auto);
	counts(&l, &a);
	net_make(&l, &n, &decode);
	run_and_compare(&l, &n, 2, true);
	net_free(&l, &n);
	net_make(&l, &n, &snaps);
	run_and_compare(&l, &n, 1, true);
	net_free(&l, &n);
	net_make(&l, &n, &pos);
	run_and_compare(&l, &n, 1, true);
	net_free(&l, &n);
	counts(&l, &b);
	assert_int_equal(b.autos - a.autos, 2);
	assert_int_equal(b.shape - a.shape, 1);
	assert_int_equal(b.gate - a.gate, 1);
	assert_int_equal(b.chunked + b.serial + b.fallback, a.chunked + a.serial + a.fallback);
	close(l.fd);
}

/* The default: ggml's kernel everywhere. */
static void test_default_off(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--threads", "1", NULL };
	struct shape sh = { .S = 128, .H = 4, .T = 50, .B = 1, .K = 1, .gmax = -1e-3f, .seed = 60 };
	struct gdn_counts c;
	struct tdaemon d;
	struct link l;
	struct net n;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	link_open(&l, &d);
	net_make(&l, &n, &sh);
	run_and_compare(&l, &n, 2, true);
	net_free(&l, &n);
	counts(&l, &c);
	assert_string_equal(c.native, "off");
	assert_int_equal(c.off, 2);
	assert_int_equal(c.chunked + c.serial + c.fallback + c.autos + c.shape + c.gate + c.nomem, 0);
	close(l.fd);
	assert_int_equal(tdaemon_stop(&d), 0);
}

static int setup(void **state)
{
	char lerr[256];
	static const char *const extra[] = { "--devices", "ggml:CPU", "--threads", "2", "--ggml-native-gdn", "auto",
					     NULL };

	(void)state;
	/* the local reference: ggml-cpu, a module of a GGML_BACKEND_DL ggml */
	if (gge_backends_load(lerr, sizeof(lerr)) < 0) {
		fprintf(stderr, "%s\n", lerr);
		return -1;
	}
	g_cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
	if (!g_cpu)
		return -1;
	return tdaemon_start(&g_auto, extra);
}

static int teardown(void **state)
{
	int st = tdaemon_stop(&g_auto);

	(void)state;
	ggml_backend_free(g_cpu);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefill_native),
		cmocka_unit_test(test_ggml_kept),
		cmocka_unit_test(test_default_off),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * Integration: the ggml engine (doc/ggml.md) against a real pprpcd serving
 * ggml:CPU next to the native cpu device.
 *
 * A small llama-like graph (GET_ROWS, MUL_MAT with f16 weights, ROPE over
 * heads, ADD with a broadcast bias, SCALE, SOFT_MAX, TRANSPOSE + CONT, CPY to
 * f16) is built
 * with ggml in this process, computed here by ggml-cpu, and sent in its wire
 * form (ggml_wire.c) to the daemon: created once, run with new inputs each
 * time, its output compared with the local one.  Then hostile variants of
 * the same graph are refused with the codes doc/ggml.md names while the
 * daemon keeps serving; index guards, queues, sticky errors, FENCE, WAIT on
 * a timeline, the probes, HELLO's ggml fields, the statistics and the
 * memory floor are checked on the ggml device.
 *
 * Everything ggml-specific goes over raw frames (tests/integration/wire.h);
 * timelines of a second connection come from libpprpc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/backend/ggml/ggml_load.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "pprpc.h"
#include "tests/integration/ggml_wire.h"
#include "tests/integration/harness.h"
#include "tests/integration/wire.h"

/* The model: E [K, V] f32 embeddings, W [K, M] f16 weights, b [M] f32 bias,
 * ids [T] i32 tokens, pos [T] i32 positions; q = rope(mul_mat(W,
 * get_rows(E, ids)) as [8, M/8, T] heads, pos); out [T, M] f16 =
 * cpy(cont(transpose(soft_max(scale(q + b, 1/8))))). */
enum { K = 64, V = 50, M = 32, T = 8 };
#define DEV_GGML 0u
#define DEV_CPU 1u

static struct tdaemon g_d;
static ggml_backend_t g_cpu;
/* The daemon's ggml device: ggml:CPU, or PPRPC_TEST_GGML_DEVICE (ggml:CUDA0
 * on a GPU host: its streams hold WAITs and check indices on the GPU).
 * Results are ggml-cpu's bit for bit on ggml:CPU, within F16_TOL of them
 * elsewhere (other kernels, the same f16 output). */
static const char *g_dev = "ggml:CPU";
static bool g_exact = true;
#define F16_TOL 4e-3

struct model {
	struct ggml_context *cw, *cc;
	ggml_backend_buffer_t bw, bc;           /* weights; inputs and compute */
	uint64_t rw, rc;                        /* their remote buffers */
	struct ggml_cgraph *gf;
	struct ggml_tensor *E, *W, *b, *ids, *pos, *mm, *add, *out;
	struct gw_graph wg;
	int fd;
	uint64_t req;
};

/* ---- raw requests ------------------------------------------------------------ */

/* Send m and read its reply: 0, or the error code (reason in msg). */
static int call(struct model *m, uint16_t type, const ProtobufCMessage *msg, const void *bulk, size_t bulk_len,
		const ProtobufCMessageDescriptor *rd, ProtobufCMessage **rep, char *errmsg, size_t errlen)
{
	struct wire_reply r;
	int rc = wire_call(m->fd, type, ++m->req, msg, bulk, bulk_len, &r);

	assert_int_equal(rc, 0);
	assert_int_equal(r.h.req_id, m->req);
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

/* Send m queued: no reply unless it is refused at once (then the next
 * FENCE reports it).  Returns the request id. */
static uint64_t send_queued(struct model *m, uint16_t type, const ProtobufCMessage *msg, const void *bulk,
			    size_t bulk_len)
{
	assert_int_equal(wire_send_flags(m->fd, type, FRAME_F_QUEUED, ++m->req, msg, bulk, bulk_len), 0);
	return m->req;
}

static uint64_t alloc_remote(struct model *m, uint32_t dev, uint64_t size, int *code, char *errmsg, size_t errlen)
{
	Pprpc__BufferAlloc a = PPRPC__BUFFER_ALLOC__INIT;
	ProtobufCMessage *rep = NULL;
	uint64_t h = 0;

	a.device = dev;
	a.size = size;
	*code = call(m, MSG_BUFFER_ALLOC, &a.base, NULL, 0, &pprpc__buffer_alloc_reply__descriptor, &rep, errmsg,
		     errlen);
	if (*code == 0) {
		h = ((Pprpc__BufferAllocReply *)rep)->buffer;
		meta_free(rep);
	}
	return h;
}

static void set_remote(struct model *m, uint64_t buf, uint64_t off, const void *p, size_t n)
{
	Pprpc__TensorSet s = PPRPC__TENSOR_SET__INIT;

	s.buffer = buf;
	s.offset = off;
	s.size = n;
	assert_int_equal(call(m, MSG_TENSOR_SET, &s.base, p, n, NULL, NULL, NULL, 0), 0);
}

static void get_remote(struct model *m, uint64_t buf, uint64_t off, void *p, size_t n)
{
	Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
	struct wire_reply r;

	g.buffer = buf;
	g.offset = off;
	g.size = n;
	assert_int_equal(wire_call(m->fd, MSG_TENSOR_GET, ++m->req, &g.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.bulk_len, n);
	memcpy(p, r.bulk, n);
	wire_reply_free(&r);
}

/* A local tensor's bytes, written to the same place of its remote buffer. */
static void upload(struct model *m, const struct ggml_tensor *t)
{
	uint64_t remote = t->buffer == m->bw ? m->rw : m->rc;
	uint64_t off = (uint64_t)((uint8_t *)t->data - (uint8_t *)ggml_backend_buffer_get_base(t->buffer));

	set_remote(m, remote, off, t->data, ggml_nbytes(t));
}

static int create(struct model *m, uint64_t *graph, char *errmsg, size_t errlen)
{
	ProtobufCMessage *rep = NULL;
	int rc = call(m, MSG_GGML_GRAPH_CREATE, &m->wg.msg.base, NULL, 0, &pprpc__graph_create_reply__descriptor,
		      &rep, errmsg, errlen);

	if (rc == 0) {
		*graph = ((Pprpc__GraphCreateReply *)rep)->graph;
		meta_free(rep);
	}
	return rc;
}

static int run(struct model *m, uint64_t graph, char *errmsg, size_t errlen)
{
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;

	r.graph = graph;
	return call(m, MSG_GRAPH_RUN, &r.base, NULL, 0, NULL, NULL, errmsg, errlen);
}

static void free_graph(struct model *m, uint64_t graph)
{
	Pprpc__GraphFree f = PPRPC__GRAPH_FREE__INIT;

	f.graph = graph;
	assert_int_equal(call(m, MSG_GRAPH_FREE, &f.base, NULL, 0, NULL, NULL, NULL, 0), 0);
}

static int fence(struct model *m, uint64_t *failed_cmd, char *errmsg, size_t errlen)
{
	Pprpc__Fence f = PPRPC__FENCE__INIT;
	struct wire_reply r;
	int rc;

	f.device = DEV_GGML;
	assert_int_equal(wire_call(m->fd, MSG_FENCE, ++m->req, &f.base, NULL, 0, &r), 0);
	rc = r.is_error ? r.code : 0;
	if (failed_cmd)
		*failed_cmd = r.command;
	if (errmsg)
		snprintf(errmsg, errlen, "%s", r.msg);
	wire_reply_free(&r);
	return rc;
}

/* Device dev's graph creates and runs from STATS. */
static void stats(struct model *m, uint32_t dev, uint64_t *creates, uint64_t *runs, uint64_t *allocated)
{
	Pprpc__Stats s = PPRPC__STATS__INIT;
	ProtobufCMessage *rep = NULL;
	const Pprpc__StatsReply *sr;

	assert_int_equal(call(m, MSG_STATS, &s.base, NULL, 0, &pprpc__stats_reply__descriptor, &rep, NULL, 0), 0);
	sr = (const Pprpc__StatsReply *)rep;
	assert_true(dev < sr->n_devices);
	*creates = sr->devices[dev]->graph_creates;
	*runs = sr->devices[dev]->graph_runs;
	*allocated = sr->devices[dev]->allocated_bytes;
	meta_free(rep);
}

/* ---- the model, built and computed locally ------------------------------------ */

static struct ggml_context *ctx_new(size_t ntensors)
{
	struct ggml_init_params p = {
		.mem_size = ntensors * ggml_tensor_overhead() + ggml_graph_overhead(),
		.mem_buffer = NULL,
		.no_alloc = true,
	};
	struct ggml_context *c = ggml_init(p);

	assert_non_null(c);
	return c;
}

static float frand(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* New inputs (seed): embeddings and ids; the weights stay. */
static void fill_inputs(struct model *m, uint32_t seed)
{
	float e[K * V];
	int32_t ids[T], pos[T];

	for (int i = 0; i < K * V; i++)
		e[i] = frand(&seed) * 4.0f;
	for (int i = 0; i < T; i++) {
		frand(&seed);
		ids[i] = (int32_t)((seed >> 8) % V);
		pos[i] = (int32_t)(seed % 64) + i;
	}
	ggml_backend_tensor_set(m->E, e, 0, sizeof(e));
	ggml_backend_tensor_set(m->ids, ids, 0, sizeof(ids));
	ggml_backend_tensor_set(m->pos, pos, 0, sizeof(pos));
}

static void model_build(struct model *m, int fd)
{
	struct ggml_tensor *x, *y, *z, *s, *p, *t, *o;
	ggml_fp16_t w[K * M];
	float b[M];
	uint32_t seed = 7;

	memset(m, 0, sizeof(*m));
	m->fd = fd;
	m->req = 100;
	m->cw = ctx_new(8);
	m->cc = ctx_new(32);
	m->E = ggml_new_tensor_2d(m->cw, GGML_TYPE_F32, K, V);
	m->W = ggml_new_tensor_2d(m->cw, GGML_TYPE_F16, K, M);
	m->b = ggml_new_tensor_1d(m->cw, GGML_TYPE_F32, M);
	ggml_set_name(m->E, "tok_embd");
	ggml_set_name(m->W, "w");
	ggml_set_name(m->b, "b");
	m->ids = ggml_new_tensor_1d(m->cc, GGML_TYPE_I32, T);
	ggml_set_name(m->ids, "ids");
	m->pos = ggml_new_tensor_1d(m->cc, GGML_TYPE_I32, T);
	ggml_set_name(m->pos, "pos");
	x = ggml_get_rows(m->cc, m->E, m->ids);
	y = m->mm = ggml_mul_mat(m->cc, m->W, x);
	y = ggml_rope_ext(m->cc, ggml_reshape_3d(m->cc, y, 8, M / 8, T), m->pos, NULL, 8, 0, 0, 10000.0f, 1.0f,
			  0.0f, 1.0f, 32.0f, 1.0f);
	z = m->add = ggml_add(m->cc, ggml_reshape_2d(m->cc, y, M, T), m->b);
	s = ggml_scale(m->cc, z, 0.125f);
	p = ggml_soft_max(m->cc, s);
	t = ggml_cont(m->cc, ggml_transpose(m->cc, p));
	o = ggml_new_tensor_2d(m->cc, GGML_TYPE_F16, T, M);
	ggml_set_name(o, "out");
	m->out = ggml_cpy(m->cc, t, o);
	m->gf = ggml_new_graph(m->cc);
	ggml_build_forward_expand(m->gf, m->out);
	m->bw = ggml_backend_alloc_ctx_tensors(m->cw, g_cpu);
	m->bc = ggml_backend_alloc_ctx_tensors(m->cc, g_cpu);
	assert_non_null(m->bw);
	assert_non_null(m->bc);
	for (int i = 0; i < K * M; i++)
		w[i] = ggml_fp32_to_fp16(frand(&seed));
	for (int i = 0; i < M; i++)
		b[i] = frand(&seed);
	ggml_backend_tensor_set(m->W, w, 0, sizeof(w));
	ggml_backend_tensor_set(m->b, b, 0, sizeof(b));
	fill_inputs(m, 1);
}

/* The remote side: buffers as large as the local ones, the weights in
 * place, the graph in wire form. */
static void model_remote(struct model *m)
{
	struct gw_map map[2];
	int code;

	m->rw = alloc_remote(m, DEV_GGML, ggml_backend_buffer_get_size(m->bw), &code, NULL, 0);
	assert_int_equal(code, 0);
	m->rc = alloc_remote(m, DEV_GGML, ggml_backend_buffer_get_size(m->bc), &code, NULL, 0);
	assert_int_equal(code, 0);
	upload(m, m->W);
	upload(m, m->b);
	map[0] = (struct gw_map){ m->bw, m->rw };
	map[1] = (struct gw_map){ m->bc, m->rc };
	assert_int_equal(gw_serialize(m->gf, map, 2, DEV_GGML, &m->wg), 0);
}

static void model_free(struct model *m)
{
	gw_free(&m->wg);
	ggml_backend_buffer_free(m->bw);
	ggml_backend_buffer_free(m->bc);
	ggml_free(m->cw);
	ggml_free(m->cc);
}

/* The model's output, remote against local (g_exact: identical). */
static void expect_out(const ggml_fp16_t *got, const ggml_fp16_t *want, size_t n)
{
	double maxd = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)ggml_fp16_to_fp32(want[i]) - ggml_fp16_to_fp32(got[i]));

		maxd = d > maxd ? d : maxd;
	}
	if (g_exact)
		assert_true(maxd == 0.0);
	else
		assert_true(maxd <= F16_TOL);
}

/* Compute locally, run remotely (inputs uploaded first), compare. */
static void run_and_compare(struct model *m, uint64_t graph)
{
	ggml_fp16_t want[T * M], got[T * M];
	uint64_t off = (uint64_t)((uint8_t *)m->out->data - (uint8_t *)ggml_backend_buffer_get_base(m->bc));
	char err[256] = "";

	upload(m, m->E);
	upload(m, m->ids);
	upload(m, m->pos);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, m->gf), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(m->out, want, 0, sizeof(want));
	assert_int_equal(run(m, graph, err, sizeof(err)), 0);
	get_remote(m, m->rc, off, got, sizeof(got));
	for (int r = 0; r < T; r++) {
		double sum = 0;

		for (int c = 0; c < M; c++)
			sum += ggml_fp16_to_fp32(want[c * T + r]);
		/* the local result is a softmax: each token's row sums to 1 */
		assert_true(sum > 0.98 && sum < 1.02);
	}
	/* The same kernels on the same inputs: identical. */
	expect_out(got, want, T * M);
}

/* ---- daemon per file ------------------------------------------------------------ */

static int setup(void **state)
{
	char lerr[256];
	static char devices[96];
	static const char *extra[] = { "--devices", devices, "--threads", "2", NULL };
	const char *env = getenv("PPRPC_TEST_GGML_DEVICE");

	(void)state;
	if (env && *env) {
		g_dev = env;
		g_exact = strcmp(env, "ggml:CPU") == 0;
	}
	snprintf(devices, sizeof(devices), "%s,cpu", g_dev);
	/* the local reference: ggml-cpu, a module of a GGML_BACKEND_DL ggml */
	if (gge_backends_load(lerr, sizeof(lerr)) < 0) {
		fprintf(stderr, "%s\n", lerr);
		return -1;
	}
	g_cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
	if (!g_cpu)
		return -1;
	return tdaemon_start(&g_d, extra);
}

static int teardown(void **state)
{
	int st = tdaemon_stop(&g_d);

	(void)state;
	ggml_backend_free(g_cpu);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int open_model(struct model *m)
{
	int fd = traw_connect(&g_d);

	assert_true(fd >= 0);
	assert_int_equal(wire_hello(fd), 0);
	model_build(m, fd);
	model_remote(m);
	return fd;
}

static void close_model(struct model *m)
{
	close(m->fd);
	model_free(m);
}

/* ---- tests ------------------------------------------------------------------ */

/* HELLO describes the ggml device with its buffer type's facts. */
static void test_hello(void **state)
{
	int fd = traw_connect(&g_d);
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	ProtobufCMessage *rep = NULL;
	const Pprpc__HelloReply *hr;
	ggml_backend_buffer_type_t buft = ggml_backend_get_default_buffer_type(g_cpu);
	struct wire_reply r;

	(void)state;
	h.proto_version = PPRPC_PROTO_VERSION;
	h.client_name = "test_ggml";
	assert_int_equal(wire_call(fd, MSG_HELLO, 1, &h.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__hello_reply__descriptor, &rep), 0);
	hr = (const Pprpc__HelloReply *)rep;
	assert_int_equal(hr->n_devices, 2);
	assert_string_equal(hr->devices[0]->kind, "ggml");
	assert_string_equal(hr->devices[0]->name, g_dev);
	assert_true(hr->devices[0]->total_bytes > 0 && hr->devices[0]->free_bytes <= hr->devices[0]->total_bytes);
	if (g_exact) {
		assert_int_equal(hr->devices[0]->ggml_alignment, ggml_backend_buft_get_alignment(buft));
		assert_int_equal(hr->devices[0]->ggml_max_size, ggml_backend_buft_get_max_size(buft));
		assert_int_equal(hr->devices[0]->ggml_dev_type, GGML_BACKEND_DEVICE_TYPE_CPU);
		/* host memory: the same accounting as the native cpu device */
		assert_int_equal(hr->devices[0]->total_bytes, hr->devices[1]->total_bytes);
	} else {
		assert_int_equal(hr->devices[0]->ggml_dev_type, GGML_BACKEND_DEVICE_TYPE_GPU);
	}
	assert_string_equal(hr->devices[1]->kind, "cpu");
	meta_free(rep);
	wire_reply_free(&r);
	close(fd);
}

/* PPRPC_GGML_SEED_DIR=dir: write the model's graph as a seed of the fuzz
 * target tests/fuzz/fuzz_ggml_graph.c (weights in its buffer 3, the rest
 * in its buffer 2; run when accepted). */
static void save_seed(struct model *m)
{
	const char *dir = getenv("PPRPC_GGML_SEED_DIR");
	uint64_t *saved = calloc(m->wg.msg.n_tensors + 1, sizeof(*saved));
	uint8_t *buf;
	size_t n;
	char path[512];
	FILE *f;

	if (!dir || !saved) {
		free(saved);
		return;
	}
	for (size_t i = 0; i < m->wg.msg.n_tensors; i++) {
		saved[i] = m->wg.t[i].buffer;
		if (saved[i])
			m->wg.t[i].buffer = saved[i] == m->rw ? 3 : 2;
	}
	n = meta_size(&m->wg.msg.base);
	buf = malloc(n + 2);
	assert_non_null(buf);
	buf[0] = 2;
	buf[1] = (uint8_t)gw_index(&m->wg, m->mm);
	meta_pack(&m->wg.msg.base, buf + 2);
	snprintf(path, sizeof(path), "%s/test_ggml-model", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, n + 2, f), n + 2);
	fclose(f);
	for (size_t i = 0; i < m->wg.msg.n_tensors; i++)
		m->wg.t[i].buffer = saved[i];
	free(buf);
	free(saved);
}

/* Created once, run with new inputs several times: the local result each
 * time; the device counts one create and every run. */
static void test_graph_matches_local(void **state)
{
	struct model m;
	uint64_t g = 0, c0, r0, a0, c1, r1, a1;
	char err[256] = "";

	(void)state;
	open_model(&m);
	save_seed(&m);
	stats(&m, DEV_GGML, &c0, &r0, &a0);
	assert_true(a0 >= ggml_backend_buffer_get_size(m.bw) + ggml_backend_buffer_get_size(m.bc));
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	for (uint32_t seed = 1; seed <= 4; seed++) {
		fill_inputs(&m, seed);
		run_and_compare(&m, g);
	}
	stats(&m, DEV_GGML, &c1, &r1, &a1);
	assert_int_equal(c1 - c0, 1);
	assert_int_equal(r1 - r0, 4);
	/* the native device saw none of it */
	stats(&m, DEV_CPU, &c0, &r0, &a0);
	assert_int_equal(c0, 0);
	free_graph(&m, g);
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_EHANDLE);
	close_model(&m);
}

/* One hostile variant: mutate, expect code (and a word of the reason),
 * restore; the good graph still creates and runs. */
#define HOSTILE(m, field, bad, code, word)                                                   \
	do {                                                                                 \
		__typeof__(field) saved_ = (field);                                          \
		uint64_t g_ = 0;                                                             \
		char e_[320] = "";                                                           \
		(field) = (bad);                                                             \
		assert_int_equal(create((m), &g_, e_, sizeof(e_)), (code));                  \
		if (!strstr(e_, (word))) {                                                   \
			fprintf(stderr, "reason '%s' lacks '%s'\n", e_, (word));             \
			fail();                                                              \
		}                                                                            \
		(field) = saved_;                                                            \
	} while (0)

static void test_hostile_graphs(void **state)
{
	struct model m;
	Pprpc__GgmlTensor *t;
	int iw, iid, imm, iout, itr;
	int64_t ne_saved;
	int32_t src_saved;
	uint64_t g = 0;
	char err[320] = "";

	(void)state;
	open_model(&m);
	iw = gw_index(&m.wg, m.W);
	iid = gw_index(&m.wg, m.ids);
	imm = gw_index(&m.wg, m.mm);
	iout = gw_index(&m.wg, m.out);
	itr = gw_index(&m.wg, m.out->src[0]->src[0]); /* the transpose view */
	assert_true(iw >= 0 && iid >= 0 && imm >= 0 && iout >= 0 && itr >= 0);
	assert_int_equal(m.wg.t[itr].op, GGML_OP_TRANSPOSE);
	t = m.wg.t;

	/* a graph of another ggml release, or one that does not say */
	HOSTILE(&m, m.wg.msg.ggml_version, (char *)"0.0.1", PPRPC_EVERSION, "the graph comes from ggml 0.0.1");
	HOSTILE(&m, m.wg.msg.ggml_version, (char *)"", PPRPC_EVERSION, "(not said)");
	/* types */
	HOSTILE(&m, t[iw].type, 4u, PPRPC_ETYPE, "removed ggml type");
	HOSTILE(&m, t[iw].type, 9999u, PPRPC_ETYPE, "ggml type");
	HOSTILE(&m, t[iid].type, (uint32_t)GGML_TYPE_Q4_0, PPRPC_ESHAPE, "block"); /* ne0 8 is not a block of 32 */
	/* ne / nb */
	HOSTILE(&m, t[iw].ne[1], -3, PPRPC_ESHAPE, "negative");
	HOSTILE(&m, t[iw].n_ne, (size_t)3, PPRPC_ESHAPE, "4 entries");
	HOSTILE(&m, t[iw].nb[1], (uint64_t)(K * 2 + 1), PPRPC_ESHAPE, "alignment");
	HOSTILE(&m, t[iw].ne[2], INT64_C(1) << 50, PPRPC_ETOOBIG, "too large");
	HOSTILE(&m, t[iw].nb[1], UINT64_C(1) << 62, PPRPC_ETOOBIG, "overflows");
	/* extents */
	HOSTILE(&m, t[iw].offset, (uint64_t)ggml_backend_buffer_get_size(m.bw) - 64, PPRPC_ERANGE, "outside its buffer");
	HOSTILE(&m, t[iw].ne[1], (int64_t)M * 64, PPRPC_ERANGE, "outside its buffer");
	HOSTILE(&m, t[itr].view_offs, (uint64_t)64, PPRPC_ERANGE, "outside its source");
	HOSTILE(&m, t[iout].view_offs, (uint64_t)2, PPRPC_ERANGE, "outside its source");
	/* topology */
	src_saved = t[imm].src[1];
	HOSTILE(&m, t[imm].src[1], (int32_t)imm, PPRPC_EGRAPH, "does not precede");
	HOSTILE(&m, t[imm].src[1], (int32_t)(m.wg.msg.n_tensors - 1), PPRPC_EGRAPH, "does not precede");
	HOSTILE(&m, t[itr].view_src, (int32_t)itr + 1, PPRPC_EGRAPH, "does not precede");
	assert_int_equal(t[imm].src[1], src_saved);
	HOSTILE(&m, m.wg.nodes[1], m.wg.nodes[0], PPRPC_EGRAPH, "not after");
	/* the product written over its own input */
	HOSTILE(&m, t[imm].offset, t[gw_index(&m.wg, m.mm->src[1])].offset + 4, PPRPC_EGRAPH, "overlaps source 1");
	HOSTILE(&m, m.wg.nodes[0], (int32_t)iw, PPRPC_EINVAL, "has no op");
	/* ops and their rules */
	HOSTILE(&m, t[imm].op, (uint32_t)GGML_OP_COUNT + 5, PPRPC_EUNSUPP, "unknown ggml op");
	HOSTILE(&m, t[imm].op, (uint32_t)GGML_OP_CROSS_ENTROPY_LOSS, PPRPC_EUNSUPP, "CROSS_ENTROPY_LOSS");
	HOSTILE(&m, t[imm].op, (uint32_t)GGML_OP_MAP_CUSTOM1, PPRPC_EUNSUPP, "MAP_CUSTOM1");
	ne_saved = t[gw_index(&m.wg, m.add)].ne[0];
	HOSTILE(&m, t[gw_index(&m.wg, m.add)].ne[0], ne_saved - 1, PPRPC_EINVAL, "ADD");
	HOSTILE(&m, t[imm].flags, 0x40, PPRPC_EINVAL, "flags");
	HOSTILE(&m, t[imm].op_params.len, (size_t)65, PPRPC_EINVAL, "op_params");
	/* buffers */
	HOSTILE(&m, t[iw].buffer, m.rw ^ 0x55, PPRPC_EHANDLE, "unknown buffer handle");
	{
		int code;
		uint64_t native = alloc_remote(&m, DEV_CPU, ggml_backend_buffer_get_size(m.bw), &code, NULL, 0);

		assert_int_equal(code, 0);
		HOSTILE(&m, t[iw].buffer, native, PPRPC_EINVAL, "lives on cpu");
	}
	HOSTILE(&m, t[iw].buffer, (uint64_t)0, PPRPC_EINVAL, "no buffer");
	/* devices */
	HOSTILE(&m, m.wg.msg.device, DEV_CPU, PPRPC_EUNSUPP, "not a ggml device");
	HOSTILE(&m, m.wg.msg.device, 7u, PPRPC_EINVAL, "no device");
	{
		/* a native graph for the ggml device */
		Pprpc__GraphCreate gc = PPRPC__GRAPH_CREATE__INIT;
		Pprpc__Node node = PPRPC__NODE__INIT, *np = &node;

		gc.device = DEV_GGML;
		gc.n_nodes = 1;
		gc.nodes = &np;
		assert_int_equal(call(&m, MSG_GRAPH_CREATE, &gc.base, NULL, 0, NULL, NULL, err, sizeof(err)),
				 PPRPC_EUNSUPP);
		assert_non_null(strstr(err, "runs ggml graphs"));
	}

	/* Still serving, and the good graph works. */
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	fill_inputs(&m, 11);
	run_and_compare(&m, g);
	assert_true(tdaemon_alive(&g_d));
	close_model(&m);
}

/* An id outside the embedding table fails the run with PPRPC_ERANGE
 * (ggml-cpu would abort in GET_ROWS); fixed ids run again. */
static void test_index_guard(void **state)
{
	struct model m;
	uint64_t g = 0;
	int32_t ids[T];
	char err[320] = "";

	(void)state;
	open_model(&m);
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	for (int i = 0; i < T; i++)
		ids[i] = i;
	ids[5] = V;
	ggml_backend_tensor_set(m.ids, ids, 0, sizeof(ids));
	upload(&m, m.ids);
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "GET_ROWS"));
	assert_non_null(strstr(err, "outside [0, 50)"));
	ids[5] = -1;
	ggml_backend_tensor_set(m.ids, ids, 0, sizeof(ids));
	upload(&m, m.ids);
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	fill_inputs(&m, 3);
	run_and_compare(&m, g);
	assert_true(tdaemon_alive(&g_d));
	close_model(&m);
}

/* Ids computed inside the graph: rows of an i32 table picked by input ids,
 * then used to pick embedding rows.  The first ids are checked before the
 * run (an input); the second only exist once the first GET_ROWS ran, so the
 * run is cut there and they are checked in between: a bad table entry fails
 * the run after the first segment wrote its output, and nothing after. */
static void test_split_guard(void **state)
{
	struct model m;
	struct ggml_context *ctx = ctx_new(16);
	struct ggml_tensor *table, *ids, *ids2, *emb, *rows, *out;
	struct ggml_cgraph *gf;
	ggml_backend_buffer_t lb;
	struct gw_map map[1];
	int32_t tab[20], in[T], got_ids[T];
	float e[K * V], want[K * T], got[K * T];
	uint64_t g = 0, rb, base;
	uint32_t seed = 3;
	char err[320] = "";
	int code;

	(void)state;
	m.fd = traw_connect(&g_d);
	m.req = 100;
	assert_true(m.fd >= 0);
	assert_int_equal(wire_hello(m.fd), 0);
	table = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 1, 20);
	ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
	emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, V);
	rows = ggml_get_rows(ctx, table, ids);             /* [1, T] i32 */
	ids2 = ggml_reshape_1d(ctx, rows, T);
	out = ggml_scale(ctx, ggml_get_rows(ctx, emb, ids2), 2.0f);
	gf = ggml_new_graph(ctx);
	ggml_build_forward_expand(gf, out);
	lb = ggml_backend_alloc_ctx_tensors(ctx, g_cpu);
	assert_non_null(lb);
	base = (uint64_t)(uintptr_t)ggml_backend_buffer_get_base(lb);
	rb = alloc_remote(&m, DEV_GGML, ggml_backend_buffer_get_size(lb), &code, NULL, 0);
	assert_int_equal(code, 0);
	map[0] = (struct gw_map){ lb, rb };
	assert_int_equal(gw_serialize(gf, map, 1, DEV_GGML, &m.wg), 0);
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);

	for (int i = 0; i < 20; i++)
		tab[i] = (i * 7) % V;
	for (int i = 0; i < T; i++)
		in[i] = (i * 3) % 20;
	for (int i = 0; i < K * V; i++)
		e[i] = frand(&seed);
	ggml_backend_tensor_set(table, tab, 0, sizeof(tab));
	ggml_backend_tensor_set(ids, in, 0, sizeof(in));
	ggml_backend_tensor_set(emb, e, 0, sizeof(e));
	set_remote(&m, rb, 0, ggml_backend_buffer_get_base(lb), ggml_backend_buffer_get_size(lb));
	assert_int_equal(ggml_backend_graph_compute(g_cpu, gf), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(out, want, 0, sizeof(want));
	assert_int_equal(run(&m, g, err, sizeof(err)), 0);
	get_remote(&m, rb, (uintptr_t)out->data - base, got, sizeof(got));
	assert_memory_equal(got, want, sizeof(got));

	/* a table entry past the embeddings: caught between the segments */
	tab[(size_t)in[2]] = V + 7;
	set_remote(&m, rb, (uintptr_t)table->data - base, tab, sizeof(tab));
	memset(got, 0, sizeof(got));
	set_remote(&m, rb, (uintptr_t)out->data - base, got, sizeof(got));
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "GET_ROWS"));
	assert_non_null(strstr(err, "index 57"));
	assert_non_null(strstr(err, "outside [0, 50)"));
	get_remote(&m, rb, (uintptr_t)rows->data - base, got_ids, sizeof(got_ids));
	assert_int_equal(got_ids[2], V + 7);   /* the first segment ran */
	get_remote(&m, rb, (uintptr_t)out->data - base, got, sizeof(got));
	for (int i = 0; i < K * T; i++)        /* the second did not */
		assert_true(got[i] == 0.0f);

	/* an input id past the table: caught before anything runs */
	tab[(size_t)in[2]] = 1;
	set_remote(&m, rb, (uintptr_t)table->data - base, tab, sizeof(tab));
	in[0] = 20;
	set_remote(&m, rb, (uintptr_t)ids->data - base, in, sizeof(in));
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "outside [0, 20)"));
	get_remote(&m, rb, (uintptr_t)rows->data - base, got_ids, sizeof(got_ids));
	assert_int_equal(got_ids[2], V + 7);   /* untouched */

	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
}

/* Queued SET/RUN: a failing run is the stream's sticky error, what follows
 * is skipped, FENCE reports the first failure and clears it. */
static void test_queue_sticky(void **state)
{
	struct model m;
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;
	Pprpc__TensorSet s = PPRPC__TENSOR_SET__INIT;
	uint64_t g = 0, bad, failed = 0, off_ids;
	int32_t ids[T];
	char err[320] = "";

	(void)state;
	open_model(&m);
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	off_ids = (uint64_t)((uint8_t *)m.ids->data - (uint8_t *)ggml_backend_buffer_get_base(m.bc));
	for (int i = 0; i < T; i++)
		ids[i] = V + i;
	r.graph = g;
	s.buffer = m.rc;
	s.offset = off_ids;
	s.size = sizeof(ids);
	/* three good runs queued, then bad ids, a run, good ids, a run */
	for (int i = 0; i < 3; i++)
		send_queued(&m, MSG_GRAPH_RUN, &r.base, NULL, 0);
	send_queued(&m, MSG_TENSOR_SET, &s.base, ids, sizeof(ids));
	bad = send_queued(&m, MSG_GRAPH_RUN, &r.base, NULL, 0);
	for (int i = 0; i < T; i++)
		ids[i] = i;
	send_queued(&m, MSG_TENSOR_SET, &s.base, ids, sizeof(ids));
	send_queued(&m, MSG_GRAPH_RUN, &r.base, NULL, 0);
	assert_int_equal(fence(&m, &failed, err, sizeof(err)), PPRPC_ERANGE);
	assert_int_equal(failed, bad);
	assert_non_null(strstr(err, "GET_ROWS"));
	/* cleared; the ids the skipped SET would have written are not there */
	assert_int_equal(fence(&m, NULL, NULL, 0), 0);
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	fill_inputs(&m, 5);
	run_and_compare(&m, g);
	close_model(&m);
}

/* Where the device does its part on the GPU (ggml-cuda: STATS async_status
 * "on"), its count `key` (gpu_waits: WAITs held; gpu_recvs: RECVs held;
 * gpu_sends: SENDs put into a landing slot) is at least `more` past *last
 * (UINT64_MAX: past 0, the first call); elsewhere the queue does it and
 * the count stays 0. */
static void gpu_count_seen(pprpc_client *c, const char *key, uint64_t *last, uint64_t more)
{
	pprpc_stats *st = NULL;
	uint64_t n;
	bool on;

	assert_int_equal(pprpc_stats_get(c, &st), 0);
	on = strcmp(pprpc_stats_str(st, "devices", DEV_GGML, "async_status"), "on") == 0;
	n = pprpc_stats_u64(st, "devices", DEV_GGML, key);
	fprintf(stderr, "note: %s: %s %llu (%s)\n", pprpc_stats_str(st, "devices", DEV_GGML, "info.name"), key,
		(unsigned long long)n, on ? "on the GPU" : "by the queue");
	if (on)
		assert_true(n >= (*last == UINT64_MAX ? more : *last + more));
	else
		assert_int_equal(n, 0);
	*last = n;
	pprpc_stats_free(st);
}

/* The two connections of test_wait_holds_run: m's stream, and c2's
 * timeline t2 that m's WAITs name; m's SIGNALs go to its own t1. */
struct held {
	struct model *m;
	pprpc_client *c2;
	pprpc_timeline t2;
	uint64_t t1, graph;
};

/* Queued on m: WAIT for t2 >= wv, the run, SIGNAL t1 = sv.  Held: nothing
 * of them ran after 300 ms (a HOST_WAIT for sv times out); c2's SIGNAL of
 * wv releases them, and the FENCE behind them reports no failure. */
static void held_run(struct held *h, uint64_t wv, uint64_t sv)
{
	Pprpc__Wait w = PPRPC__WAIT__INIT;
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;
	Pprpc__Signal sg = PPRPC__SIGNAL__INIT;
	Pprpc__HostWait hw = PPRPC__HOST_WAIT__INIT;
	ProtobufCMessage *rep = NULL;
	char err[320] = "";

	w.device = DEV_GGML;
	w.timeline = h->t2.id;
	w.value = wv;
	w.rank = g_d.addr;
	r.graph = h->graph;
	sg.timeline = h->t1;
	sg.value = sv;
	send_queued(h->m, MSG_WAIT, &w.base, NULL, 0);
	send_queued(h->m, MSG_GRAPH_RUN, &r.base, NULL, 0);
	send_queued(h->m, MSG_SIGNAL, &sg.base, NULL, 0);
	hw.timeline = h->t1;
	hw.value = sv;
	hw.timeout_ms = 300;
	assert_int_equal(call(h->m, MSG_HOST_WAIT, &hw.base, NULL, 0, &pprpc__host_wait_reply__descriptor, &rep, err,
			      sizeof(err)), PPRPC_ETIMEDOUT);
	assert_int_equal(pprpc_signal(h->c2, h->t2, wv), 0);
	hw.timeout_ms = 5000;
	assert_int_equal(call(h->m, MSG_HOST_WAIT, &hw.base, NULL, 0, &pprpc__host_wait_reply__descriptor, &rep, err,
			      sizeof(err)), 0);
	meta_free(rep);
	assert_int_equal(fence(h->m, NULL, NULL, 0), 0);
}

/* The remote output (at off in the compute buffer) against the local run. */
static void expect_remote_out(struct model *m, uint64_t off)
{
	ggml_fp16_t want[T * M], got[T * M], zero[T * M];

	memset(zero, 0, sizeof(zero));
	get_remote(m, m->rc, off, got, sizeof(got));
	assert_int_equal(ggml_backend_graph_compute(g_cpu, m->gf), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(m->out, want, 0, sizeof(want));
	expect_out(got, want, T * M);
	assert_memory_not_equal(got, zero, sizeof(got));
}

/* A queued WAIT on another connection's timeline holds the graph run behind
 * it; the SIGNAL releases it and the result is there.  Timelines are their
 * owner's: the WAIT names this daemon as the rank (it subscribes over a
 * link to itself), and the SIGNAL behind the run is watched by its owner. */
static void test_wait_holds_run(void **state)
{
	struct model m;
	pprpc_connect_opts o = { .client_name = "test_ggml" };
	struct held h = { .m = &m };
	Pprpc__Wait w = PPRPC__WAIT__INIT;
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;
	Pprpc__TimelineCreate tc = PPRPC__TIMELINE_CREATE__INIT;
	ProtobufCMessage *rep = NULL;
	ggml_fp16_t zero[T * M];
	int32_t bad[T], got_ids[T];
	uint64_t off = 0, waits = UINT64_MAX;
	char err[320] = "";

	(void)state;
	open_model(&m);
	off = (uint64_t)((uint8_t *)m.out->data - (uint8_t *)ggml_backend_buffer_get_base(m.bc));
	assert_int_equal(pprpc_connect(g_d.addr, &o, &h.c2), 0);
	assert_int_equal(pprpc_timeline_create(h.c2, DEV_GGML, 0, &h.t2), 0);
	tc.device = DEV_GGML;
	assert_int_equal(call(&m, MSG_TIMELINE_CREATE, &tc.base, NULL, 0, &pprpc__timeline_create_reply__descriptor,
			      &rep, NULL, 0), 0);
	h.t1 = ((Pprpc__TimelineCreateReply *)rep)->timeline;
	meta_free(rep);
	assert_int_equal(create(&m, &h.graph, err, sizeof(err)), 0);
	fill_inputs(&m, 9);
	upload(&m, m.E);
	upload(&m, m.ids);
	upload(&m, m.pos);
	memset(zero, 0, sizeof(zero));
	set_remote(&m, m.rc, off, zero, sizeof(zero));
	held_run(&h, 1, 1);
	expect_remote_out(&m, off);
	gpu_count_seen(h.c2, "gpu_waits", &waits, 1);

	/* Ids outside the table behind a held WAIT: where the WAIT is held
	 * on the GPU they are checked there (nothing of them exists on the
	 * host when the run is enqueued); the run fails as on the host, and
	 * the client's ids are left as they were. */
	for (int i = 0; i < T; i++)
		bad[i] = i;
	bad[3] = V + 4;
	ggml_backend_tensor_set(m.ids, bad, 0, sizeof(bad));
	upload(&m, m.ids);
	w.device = DEV_GGML;
	w.timeline = h.t2.id;
	w.value = 2;
	w.rank = g_d.addr;
	r.graph = h.graph;
	send_queued(&m, MSG_WAIT, &w.base, NULL, 0);
	send_queued(&m, MSG_GRAPH_RUN, &r.base, NULL, 0);
	usleep(200 * 1000); /* the WAIT is held by then */
	assert_int_equal(pprpc_signal(h.c2, h.t2, 2), 0);
	assert_int_equal(fence(&m, NULL, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "GET_ROWS"));
	assert_non_null(strstr(err, "index 54 at [3,0,0,0]"));
	assert_non_null(strstr(err, "outside [0, 50)"));
	get_remote(&m, m.rc, (uint64_t)((uint8_t *)m.ids->data - (uint8_t *)ggml_backend_buffer_get_base(m.bc)), got_ids,
		   sizeof(got_ids));
	assert_memory_equal(got_ids, bad, sizeof(bad));
	/* Good ids queued behind another held WAIT run as before. */
	fill_inputs(&m, 10);
	upload(&m, m.E);
	upload(&m, m.ids);
	upload(&m, m.pos);
	held_run(&h, 3, 2);
	expect_remote_out(&m, off);
	gpu_count_seen(h.c2, "gpu_waits", &waits, 2);
	pprpc_close(h.c2);
	close_model(&m);
}

static int connect_to(struct tdaemon *d, struct model *m);

/* The two stages of test_two_ranks and test_chain_runs: rank A runs
 * h = mul_mat(W, get_rows(E, ids)) (g1; g1b the same with ids outside
 * the table, into hb) and SENDs h; rank B RECVs it into hin and runs
 * out = soft_max(scale(hin)) (g2).  want: out computed here in one piece. */
struct stages {
	struct ggml_context *c1, *c2;
	struct ggml_tensor *h, *hin, *out;
	struct ggml_cgraph *g1, *g1b, *g2;
	ggml_backend_buffer_t l1, l2;
	uint64_t base1, base2;
	float want[M * T];
	/* remote: A's buffer and graphs, B's */
	uint64_t ra, rb, ga, gbad, gb;
};

static void stages_build(struct stages *st)
{
	struct ggml_init_params p1 = {
		.mem_size = 12 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(),
		.no_alloc = true,
	};
	struct ggml_tensor *E, *W, *ids, *idsb;
	uint32_t seed = 21;
	float e[K * V];
	ggml_fp16_t wv[K * M];
	int32_t iv[T];

	memset(st, 0, sizeof(*st));
	st->c1 = ggml_init(p1);
	st->c2 = ctx_new(8);
	assert_true(st->c1 && st->c2);
	E = ggml_new_tensor_2d(st->c1, GGML_TYPE_F32, K, V);
	W = ggml_new_tensor_2d(st->c1, GGML_TYPE_F16, K, M);
	ids = ggml_new_tensor_1d(st->c1, GGML_TYPE_I32, T);
	idsb = ggml_new_tensor_1d(st->c1, GGML_TYPE_I32, T);
	st->h = ggml_mul_mat(st->c1, W, ggml_get_rows(st->c1, E, ids));
	st->g1 = ggml_new_graph(st->c1);
	ggml_build_forward_expand(st->g1, st->h);
	st->g1b = ggml_new_graph(st->c1);
	ggml_build_forward_expand(st->g1b, ggml_mul_mat(st->c1, W, ggml_get_rows(st->c1, E, idsb)));
	st->hin = ggml_new_tensor_2d(st->c2, GGML_TYPE_F32, M, T);
	st->out = ggml_soft_max(st->c2, ggml_scale(st->c2, st->hin, 0.125f));
	st->g2 = ggml_new_graph(st->c2);
	ggml_build_forward_expand(st->g2, st->out);
	st->l1 = ggml_backend_alloc_ctx_tensors(st->c1, g_cpu);
	st->l2 = ggml_backend_alloc_ctx_tensors(st->c2, g_cpu);
	assert_true(st->l1 && st->l2);
	st->base1 = (uint64_t)(uintptr_t)ggml_backend_buffer_get_base(st->l1);
	st->base2 = (uint64_t)(uintptr_t)ggml_backend_buffer_get_base(st->l2);
	for (int i = 0; i < K * V; i++)
		e[i] = frand(&seed);
	for (int i = 0; i < K * M; i++)
		wv[i] = ggml_fp32_to_fp16(frand(&seed));
	for (int i = 0; i < T; i++)
		iv[i] = (i * 11) % V;
	ggml_backend_tensor_set(E, e, 0, sizeof(e));
	ggml_backend_tensor_set(W, wv, 0, sizeof(wv));
	ggml_backend_tensor_set(ids, iv, 0, sizeof(iv));
	iv[5] = V + 4;
	ggml_backend_tensor_set(idsb, iv, 0, sizeof(iv));
	/* the reference, in one piece */
	assert_int_equal(ggml_backend_graph_compute(g_cpu, st->g1), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_copy(st->h, st->hin);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, st->g2), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(st->out, st->want, 0, sizeof(st->want));
}

/* A's buffer and graphs on its DEV_GGML, B's on its device bdev. */
static void stages_remote(struct stages *st, struct model *a, struct model *b, uint32_t bdev)
{
	struct gw_graph w;
	struct gw_map map = { st->l1, 0 };
	char err[320] = "";
	int code;

	st->ra = alloc_remote(a, DEV_GGML, ggml_backend_buffer_get_size(st->l1), &code, NULL, 0);
	assert_int_equal(code, 0);
	st->rb = alloc_remote(b, bdev, ggml_backend_buffer_get_size(st->l2), &code, NULL, 0);
	assert_int_equal(code, 0);
	set_remote(a, st->ra, 0, ggml_backend_buffer_get_base(st->l1), ggml_backend_buffer_get_size(st->l1));
	map.remote = st->ra;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(gw_serialize(i ? st->g1b : st->g1, &map, 1, DEV_GGML, &w), 0);
		a->wg = w;
		assert_int_equal(create(a, i ? &st->gbad : &st->ga, err, sizeof(err)), 0);
		gw_free(&w);
	}
	map = (struct gw_map){ st->l2, st->rb };
	assert_int_equal(gw_serialize(st->g2, &map, 1, bdev, &w), 0);
	b->wg = w;
	assert_int_equal(create(b, &st->gb, err, sizeof(err)), 0);
	gw_free(&w);
	memset(&a->wg, 0, sizeof(a->wg));
	memset(&b->wg, 0, sizeof(b->wg));
}

static void stages_free(struct stages *st)
{
	ggml_backend_buffer_free(st->l1);
	ggml_backend_buffer_free(st->l2);
	ggml_free(st->c1);
	ggml_free(st->c2);
}

/* Queued on B: RECV of transfer id from A into hin, the run.  On A: the
 * run (graph g), SEND of h as transfer id to B. */
static void stage_b(struct stages *st, struct model *b, uint64_t id, const char *src)
{
	Pprpc__Recv rcv = PPRPC__RECV__INIT;
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;

	rcv.device = 0;
	rcv.buffer = st->rb;
	rcv.offset = (uintptr_t)st->hin->data - st->base2;
	rcv.size = ggml_nbytes(st->h);
	rcv.transfer_id = id;
	rcv.src_rank = (char *)src;
	send_queued(b, MSG_RECV, &rcv.base, NULL, 0);
	r.graph = st->gb;
	send_queued(b, MSG_GRAPH_RUN, &r.base, NULL, 0);
}

static void stage_a(struct stages *st, struct model *a, uint64_t g, uint64_t id, const char *dst)
{
	Pprpc__GraphRun r = PPRPC__GRAPH_RUN__INIT;
	Pprpc__Send snd = PPRPC__SEND__INIT;

	r.graph = g;
	send_queued(a, MSG_GRAPH_RUN, &r.base, NULL, 0);
	if (!dst)
		return;
	snd.device = DEV_GGML;
	snd.buffer = st->ra;
	snd.offset = (uintptr_t)st->h->data - st->base1;
	snd.size = ggml_nbytes(st->h);
	snd.transfer_id = id;
	snd.dst_rank = (char *)dst;
	send_queued(a, MSG_SEND, &snd.base, NULL, 0);
}

/* B's output against want: bit for bit where A is ggml-cpu. */
static void stages_check(struct stages *st, struct model *b)
{
	float got[M * T];

	get_remote(b, st->rb, (uintptr_t)st->out->data - st->base2, got, sizeof(got));
	if (g_exact) {
		assert_memory_equal(got, st->want, sizeof(got));
	} else {
		/* rank A (g_dev) computed h with its own kernels */
		for (int i = 0; i < M * T; i++)
			assert_true(fabsf(got[i] - st->want[i]) <= F16_TOL);
	}
}

/* Two stages on two daemons, as llama.cpp splits a model (struct stages):
 * all of it queued, each rank's commands in order; B's output is what
 * ggml computes in one piece here. */
static void test_two_ranks(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--threads", "1", NULL };
	struct tdaemon db;
	struct model a, b;
	struct stages st;
	char err[320] = "";

	(void)state;
	assert_int_equal(tdaemon_start(&db, extra), 0);
	connect_to(&g_d, &a);
	connect_to(&db, &b);
	stages_build(&st);
	stages_remote(&st, &a, &b, 0);
	stage_b(&st, &b, 77, g_d.addr);
	stage_a(&st, &a, st.ga, 77, db.addr);
	assert_int_equal(fence(&a, NULL, err, sizeof(err)), 0);
	assert_int_equal(fence(&b, NULL, err, sizeof(err)), 0);
	stages_check(&st, &b);
	close(a.fd);
	close(b.fd);
	stages_free(&st);
	assert_int_equal(tdaemon_stop(&db), 0);
}

/*
 * The chain of two ggml stages with landing slots (land-hold and
 * land-gpu-send on both daemons, on the device under test): B's RECVs held
 * with its runs behind them; A's runs each followed by the SEND the GPU
 * puts into B's slot, all behind a WAIT held on A's stream — more of them
 * in flight than a stream keeps index-check reports for (16:
 * ggml_cuda_stream.c, FAULT_RING), their completions beside the stream.
 * The last of A's runs has an id outside its table: A's FENCE reports
 * PPRPC_ERANGE naming GET_ROWS, while every round before it reached B
 * (B's FENCE clean, its output the one-piece result).  Then a round of
 * both runs again.  On ggml:CPU the workers do the same without the GPU.
 */
static void test_chain_runs(void **state)
{
	enum { ROUNDS = 17 };
	static char devs[96];
	static const char *const extra[] = { "--devices", devs, "--threads", "2", "--land-hold", "1",
					     "--land-gpu-send", "1", NULL };
	struct tdaemon da, db;
	struct model a, b;
	struct stages st;
	pprpc_client *ca, *cb;
	pprpc_timeline t;
	Pprpc__Wait w = PPRPC__WAIT__INIT;
	uint64_t sends = UINT64_MAX, recvs = UINT64_MAX;
	float zero[M * T];
	char err[320] = "";

	(void)state;
	if (access("/dev/shm", W_OK) != 0) {
		print_message("SKIP: no writable /dev/shm for landing pages here\n");
		skip();
	}
	snprintf(devs, sizeof(devs), "%s,cpu", g_dev);
	assert_int_equal(tdaemon_start(&da, extra), 0);
	assert_int_equal(tdaemon_start(&db, extra), 0);
	connect_to(&da, &a);
	connect_to(&db, &b);
	assert_int_equal(pprpc_connect(da.addr, NULL, &ca), 0);
	assert_int_equal(pprpc_connect(db.addr, NULL, &cb), 0);
	assert_int_equal(pprpc_timeline_create(ca, DEV_GGML, 0, &t), 0);
	gpu_count_seen(ca, "gpu_sends", &sends, 0);
	gpu_count_seen(cb, "gpu_recvs", &recvs, 0);
	stages_build(&st);
	stages_remote(&st, &a, &b, DEV_GGML);
	/* the link checked: later PULLs reach A before its SENDs */
	stage_b(&st, &b, 500, da.addr);
	stage_a(&st, &a, st.ga, 500, db.addr);
	assert_int_equal(fence(&a, NULL, err, sizeof(err)), 0);
	assert_int_equal(fence(&b, NULL, err, sizeof(err)), 0);
	stages_check(&st, &b);

	memset(zero, 0, sizeof(zero));
	set_remote(&b, st.rb, (uintptr_t)st.out->data - st.base2, zero, sizeof(zero));
	for (uint64_t i = 0; i < ROUNDS; i++)
		stage_b(&st, &b, 501 + i, da.addr);
	w.device = DEV_GGML;
	w.timeline = t.id;
	w.value = 1;
	w.rank = da.addr;
	send_queued(&a, MSG_WAIT, &w.base, NULL, 0);
	for (uint64_t i = 0; i < ROUNDS; i++)
		stage_a(&st, &a, st.ga, 501 + i, db.addr);
	stage_a(&st, &a, st.gbad, 0, NULL);
	usleep(200 * 1000); /* all of it on A's stream, behind the WAIT */
	assert_int_equal(pprpc_signal(ca, t, 1), 0);
	assert_int_equal(fence(&a, NULL, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "GET_ROWS"));
	assert_int_equal(fence(&b, NULL, err, sizeof(err)), 0);
	stages_check(&st, &b);

	set_remote(&b, st.rb, (uintptr_t)st.out->data - st.base2, zero, sizeof(zero));
	stage_b(&st, &b, 600, da.addr);
	stage_a(&st, &a, st.ga, 600, db.addr);
	assert_int_equal(fence(&a, NULL, err, sizeof(err)), 0);
	assert_int_equal(fence(&b, NULL, err, sizeof(err)), 0);
	stages_check(&st, &b);
	gpu_count_seen(ca, "gpu_sends", &sends, 1);
	gpu_count_seen(cb, "gpu_recvs", &recvs, 1);

	pprpc_close(ca);
	pprpc_close(cb);
	close(a.fd);
	close(b.fd);
	stages_free(&st);
	assert_int_equal(tdaemon_stop(&da), 0);
	assert_int_equal(tdaemon_stop(&db), 0);
}

/* GGML_SUPPORTS and GGML_ALLOC_SIZE on tensors that have no memory yet. */
static void test_probes(void **state)
{
	struct model m;
	Pprpc__GgmlSupports q = PPRPC__GGML_SUPPORTS__INIT;
	Pprpc__GgmlAllocSize a = PPRPC__GGML_ALLOC_SIZE__INIT;
	ProtobufCMessage *rep = NULL;
	int imm;
	char err[320] = "";

	(void)state;
	open_model(&m);
	imm = gw_index(&m.wg, m.mm);
	/* as ggml asks before allocating: no buffers */
	for (size_t i = 0; i < m.wg.msg.n_tensors; i++) {
		m.wg.t[i].buffer = 0;
		m.wg.t[i].offset = 0;
	}
	q.device = DEV_GGML;
	q.n_tensors = m.wg.msg.n_tensors;
	q.tensors = m.wg.msg.tensors;
	q.node = imm;
	assert_int_equal(call(&m, MSG_GGML_SUPPORTS, &q.base, NULL, 0, &pprpc__ggml_supports_reply__descriptor, &rep,
			      err, sizeof(err)), 0);
	assert_true(((Pprpc__GgmlSupportsReply *)rep)->supported);
	meta_free(rep);
	/* an op without a rule (training, in every rule set): not supported,
	 * and why */
	m.wg.t[imm].op = GGML_OP_CROSS_ENTROPY_LOSS;
	assert_int_equal(call(&m, MSG_GGML_SUPPORTS, &q.base, NULL, 0, &pprpc__ggml_supports_reply__descriptor, &rep,
			      err, sizeof(err)), 0);
	assert_false(((Pprpc__GgmlSupportsReply *)rep)->supported);
	assert_non_null(strstr(((Pprpc__GgmlSupportsReply *)rep)->reason, "CROSS_ENTROPY_LOSS"));
	meta_free(rep);
	m.wg.t[imm].op = GGML_OP_MUL_MAT;
	/* malformed requests are errors */
	q.node = (int32_t)m.wg.msg.n_tensors;
	assert_int_equal(call(&m, MSG_GGML_SUPPORTS, &q.base, NULL, 0, NULL, NULL, err, sizeof(err)), PPRPC_EINVAL);
	q.node = imm;
	m.wg.t[imm].ne[3] = -1;
	assert_int_equal(call(&m, MSG_GGML_SUPPORTS, &q.base, NULL, 0, NULL, NULL, err, sizeof(err)), PPRPC_ESHAPE);
	m.wg.t[imm].ne[3] = 1;

	a.device = DEV_GGML;
	a.n_tensors = m.wg.msg.n_tensors;
	a.tensors = m.wg.msg.tensors;
	a.node = imm;
	assert_int_equal(call(&m, MSG_GGML_ALLOC_SIZE, &a.base, NULL, 0, &pprpc__ggml_alloc_size_reply__descriptor,
			      &rep, err, sizeof(err)), 0);
	assert_int_equal(((Pprpc__GgmlAllocSizeReply *)rep)->size,
			 ggml_backend_buft_get_alloc_size(ggml_backend_get_default_buffer_type(g_cpu), m.mm));
	meta_free(rep);
	/* An op node the rules refuse never reaches the buffer type's
	 * get_alloc_size as that op (ggml-cuda's asserts on a FLASH_ATTN_EXT
	 * without K: seen on an H200, it aborted pprpcd): it is answered as
	 * a plain tensor of its shape.  Here the matmul loses a source. */
	m.wg.t[imm].src[1] = -1;
	assert_int_equal(call(&m, MSG_GGML_ALLOC_SIZE, &a.base, NULL, 0, &pprpc__ggml_alloc_size_reply__descriptor,
			      &rep, err, sizeof(err)), 0);
	assert_int_equal(((Pprpc__GgmlAllocSizeReply *)rep)->size, ggml_nbytes(m.mm));
	meta_free(rep);
	assert_int_equal(call(&m, MSG_GGML_SUPPORTS, &q.base, NULL, 0, &pprpc__ggml_supports_reply__descriptor, &rep,
			      err, sizeof(err)), 0);
	assert_false(((Pprpc__GgmlSupportsReply *)rep)->supported);
	meta_free(rep);
	m.wg.t[imm].src[1] = gw_index(&m.wg, m.mm->src[1]);
	a.device = DEV_CPU;
	assert_int_equal(call(&m, MSG_GGML_ALLOC_SIZE, &a.base, NULL, 0, NULL, NULL, err, sizeof(err)), PPRPC_EUNSUPP);
	close_model(&m);
}

/* BUFFER_CLEAR and TENSOR_COPY on ggml buffers. */
static void test_clear_copy(void **state)
{
	struct model m;
	Pprpc__BufferClear bc = PPRPC__BUFFER_CLEAR__INIT;
	Pprpc__TensorCopy cp = PPRPC__TENSOR_COPY__INIT;
	uint8_t in[4096], out[4096], want[4096];
	uint64_t b;
	int code;

	(void)state;
	open_model(&m);
	b = alloc_remote(&m, DEV_GGML, sizeof(in) * 2, &code, NULL, 0);
	assert_int_equal(code, 0);
	/* fresh buffers read as zeros */
	get_remote(&m, b, 0, out, sizeof(out));
	memset(want, 0, sizeof(want));
	assert_memory_equal(out, want, sizeof(out));
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + 1);
	set_remote(&m, b, 0, in, sizeof(in));
	/* overlapping copy: memmove semantics */
	cp.src_buffer = b;
	cp.dst_buffer = b;
	cp.src_offset = 0;
	cp.dst_offset = 100;
	cp.size = sizeof(in);
	assert_int_equal(call(&m, MSG_TENSOR_COPY, &cp.base, NULL, 0, NULL, NULL, NULL, 0), 0);
	get_remote(&m, b, 100, out, sizeof(out));
	assert_memory_equal(out, in, sizeof(in));
	bc.buffer = b;
	bc.value = 0xa5;
	assert_int_equal(call(&m, MSG_BUFFER_CLEAR, &bc.base, NULL, 0, NULL, NULL, NULL, 0), 0);
	get_remote(&m, b, 4000, out, sizeof(out));
	memset(want, 0xa5, sizeof(want));
	assert_memory_equal(out, want, sizeof(out));
	close_model(&m);
}

/* The memory floor refuses a ggml buffer as it refuses a native one. */
static void test_memory_floor(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--memory-floor-mib", "1048576", NULL };
	struct tdaemon d;
	struct model m = { 0 };
	char err[320] = "";
	int code;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	m.fd = traw_connect(&d);
	assert_true(m.fd >= 0);
	assert_int_equal(wire_hello(m.fd), 0);
	alloc_remote(&m, DEV_GGML, 1 << 20, &code, err, sizeof(err));
	assert_int_equal(code, PPRPC_EFLOOR);
	assert_non_null(strstr(err, "memory floor"));
	assert_non_null(strstr(err, "ggml:CPU"));
	close(m.fd);
	assert_int_equal(tdaemon_stop(&d), 0);
}

/* A graph's ggml context counts against the connection's memory limit:
 * creating the same graph over and over is refused once it is full. */
static void test_graph_charge(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--max-conn-mib", "1", NULL };
	struct tdaemon d;
	struct model m;
	uint64_t g;
	char err[320] = "";
	int rc = 0, n;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	m.fd = traw_connect(&d);
	assert_true(m.fd >= 0);
	assert_int_equal(wire_hello(m.fd), 0);
	model_build(&m, m.fd);
	model_remote(&m);
	for (n = 0; n < 1000 && (rc = create(&m, &g, err, sizeof(err))) == 0; n++)
		;
	assert_int_equal(rc, PPRPC_ELIMIT);
	assert_non_null(strstr(err, "connection memory limit"));
	/* page-rounded contexts: far fewer than 1 MiB of bare graphs */
	assert_true(n > 4 && n < 256);
	close_model(&m);
	assert_int_equal(tdaemon_stop(&d), 0);
}

/* GGML_GRAPH_CREATE with run set queues the graph's first run: the handle
 * comes back at once, the FENCE covers the run, the output is the local
 * one, and the device counts one create and one run.  A refused create
 * with run set fails the stream (the FENCE names the create's request) as
 * well as answering the error, so nothing queued behind it runs unseen. */
static void test_create_run(void **state)
{
	ggml_fp16_t want[T * M], got[T * M];
	uint64_t off, g = 0, failed = 0, c0, r0, c1, r1, a;
	ProtobufCMessage *rep = NULL;
	char err[320] = "";
	struct model m;
	uint64_t req;

	(void)state;
	open_model(&m);
	off = (uint64_t)((uint8_t *)m.out->data - (uint8_t *)ggml_backend_buffer_get_base(m.bc));
	fill_inputs(&m, 9);
	upload(&m, m.E);
	upload(&m, m.ids);
	upload(&m, m.pos);
	assert_int_equal(ggml_backend_graph_compute(g_cpu, m.gf), GGML_STATUS_SUCCESS);
	ggml_backend_tensor_get(m.out, want, 0, sizeof(want));
	stats(&m, DEV_GGML, &c0, &r0, &a);
	m.wg.msg.run = 1;
	assert_int_equal(call(&m, MSG_GGML_GRAPH_CREATE, &m.wg.msg.base, NULL, 0, &pprpc__graph_create_reply__descriptor,
			      &rep, err, sizeof(err)), 0);
	g = ((Pprpc__GraphCreateReply *)rep)->graph;
	meta_free(rep);
	assert_true(g != 0);
	assert_int_equal(fence(&m, NULL, err, sizeof(err)), 0);
	get_remote(&m, m.rc, off, got, sizeof(got));
	expect_out(got, want, T * M);
	stats(&m, DEV_GGML, &c1, &r1, &a);
	assert_int_equal(c1 - c0, 1);
	assert_int_equal(r1 - r0, 1);
	/* the handle is an ordinary graph's: it runs again */
	m.wg.msg.run = 0;
	run_and_compare(&m, g);

	/* refused (no such device): an error reply, and the stream fails */
	m.wg.msg.run = 1;
	m.wg.msg.device = 99;
	req = m.req + 1;
	assert_int_equal(call(&m, MSG_GGML_GRAPH_CREATE, &m.wg.msg.base, NULL, 0, &pprpc__graph_create_reply__descriptor,
			      &rep, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "no device 99"));
	assert_int_equal(fence(&m, &failed, err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(failed, req);
	assert_non_null(strstr(err, "no device 99"));
	assert_int_equal(fence(&m, NULL, NULL, 0), 0);
	m.wg.msg.device = DEV_GGML;
	m.wg.msg.run = 0;
	close_model(&m);
}

/* An unknown ggml device is reported (HELLO's unavailable says why), the
 * others are served; with none left the daemon does not start. */
static void test_device_names(void **state)
{
	static const char *const bad[] = { "--devices", "ggml:NoSuchDevice", NULL };
	static const char *const mixed[] = { "--devices", "cpu,ggml:NoSuchDevice", NULL };
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	ProtobufCMessage *rep = NULL;
	const Pprpc__HelloReply *hr;
	struct wire_reply r;
	struct tdaemon d;
	int fd;

	(void)state;
	assert_true(tdaemon_start(&d, bad) < 0);
	tdaemon_stop(&d);
	assert_int_equal(tdaemon_start(&d, mixed), 0);
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	h.proto_version = PPRPC_PROTO_VERSION;
	assert_int_equal(wire_call(fd, MSG_HELLO, 1, &h.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__hello_reply__descriptor, &rep), 0);
	hr = (const Pprpc__HelloReply *)rep;
	assert_int_equal(hr->n_devices, 1);
	assert_string_equal(hr->devices[0]->name, "cpu");
	assert_int_equal(hr->n_unavailable, 1);
	assert_non_null(strstr(hr->unavailable[0], "unknown ggml device 'NoSuchDevice'"));
	assert_non_null(strstr(hr->unavailable[0], "ggml:CPU"));
	meta_free(rep);
	wire_reply_free(&r);
	close(fd);
	assert_int_equal(tdaemon_stop(&d), 0);
}

/* ---- issue 27: what the engine must not trust ----------------------------------- */

/* A local graph over one buffer, sent to daemon d's connection m->fd: its
 * remote buffer in *ret_rb (size of the local one), its wire form in m->wg. */
static struct ggml_cgraph *push_local(struct model *m, struct ggml_context *ctx, struct ggml_tensor *out,
				      ggml_backend_buffer_t *ret_lb, uint64_t *ret_rb)
{
	/* a small graph fits ctx_new's default graph; a long one was given
	 * room for 16384 nodes */
	struct ggml_cgraph *gf = ggml_get_mem_size(ctx) - ggml_used_mem(ctx) >= ggml_graph_overhead_custom(16384, false) ?
		ggml_new_graph_custom(ctx, 16384, false) : ggml_new_graph(ctx);
	struct gw_map map[1];
	int code;

	ggml_build_forward_expand(gf, out);
	*ret_lb = ggml_backend_alloc_ctx_tensors(ctx, g_cpu);
	assert_non_null(*ret_lb);
	*ret_rb = alloc_remote(m, DEV_GGML, ggml_backend_buffer_get_size(*ret_lb), &code, NULL, 0);
	assert_int_equal(code, 0);
	map[0] = (struct gw_map){ *ret_lb, *ret_rb };
	assert_int_equal(gw_serialize(gf, map, 1, DEV_GGML, &m->wg), 0);
	return gf;
}

static int connect_to(struct tdaemon *d, struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->fd = traw_connect(d);
	m->req = 1000;
	assert_true(m->fd >= 0);
	assert_int_equal(wire_hello(m->fd), 0);
	return m->fd;
}

/* 27.2: an ARGSORT that does not run (no GGML_TENSOR_FLAG_COMPUTE: ggml-cpu
 * skips it) proves nothing: the client's bytes in its output are checked
 * as data before GET_ROWS follows them (7c3ca9f: GGML_ASSERT abort). */
static void test_uncomputed_sort(void **state)
{
	struct model m;
	struct ggml_context *ctx = ctx_new(16);
	struct ggml_tensor *keys, *emb, *idx, *out;
	ggml_backend_buffer_t lb;
	uint64_t g = 0, rb, base;
	int32_t bad[4] = { 0, 1000000, 2, 3 };
	char err[320] = "";
	int ia;

	(void)state;
	connect_to(&g_d, &m);
	keys = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
	emb = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 4);
	idx = ggml_argsort(ctx, keys, GGML_SORT_ORDER_ASC);
	out = ggml_get_rows(ctx, emb, idx);
	push_local(&m, ctx, out, &lb, &rb);
	base = (uint64_t)(uintptr_t)ggml_backend_buffer_get_base(lb);
	ia = gw_index(&m.wg, idx);
	assert_true(ia >= 0);
	/* as it is: the sort runs, its indices are proven, the run is fine */
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	assert_int_equal(run(&m, g, err, sizeof(err)), 0);
	free_graph(&m, g);
	/* the sort does not run: the bytes are the client's */
	m.wg.t[ia].flags &= ~(uint32_t)GGML_TENSOR_FLAG_COMPUTE;
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	set_remote(&m, rb, (uintptr_t)idx->data - base, bad, sizeof(bad));
	assert_int_equal(run(&m, g, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "index 1000000"));
	assert_true(tdaemon_alive(&g_d));
	free_graph(&m, g);
	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
}

/* 27.7: MUL_MAT_ID's ggml-cpu plan is n_as x ids ne0 x ne1 x 8 bytes
 * (2 TiB here, from 40 MiB of buffers): refused at create with the
 * memory floor named (7c3ca9f: accepted, the run's new[] threw
 * std::bad_alloc and the rank terminated). */
static void test_mmid_plan(void **state)
{
	struct model m;
	struct ggml_context *ctx = ctx_new(16);
	struct ggml_tensor *as, *b, *ids, *out;
	ggml_backend_buffer_t lb;
	uint64_t g = 0, rb;
	char err[320] = "";
	int code;

	/* ggml-cpu plans experts x used x tokens x 8 bytes (2 TiB here); a
	 * GPU's pool takes used x tokens rows of src1 and dst (ggml-cuda's
	 * sorted copies): past an H200's 143 GB at 1000 x 2^20 rows (250 GiB;
	 * ggml-cuda takes fewer than 1024 experts per token) */
	bool gpu = strncmp(g_dev, "ggml:CUDA", 9) == 0;
	int64_t used = gpu ? 1000 : 512, tokens = gpu ? 1 << 20 : 8192;

	(void)state;
	connect_to(&g_d, &m);
	as = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 32, 1, 1 << 16);
	b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 32, 1, tokens);
	ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, used, tokens);
	out = ggml_mul_mat_id(ctx, as, b, ids);
	push_local(&m, ctx, out, &lb, &rb);
	code = create(&m, &g, err, sizeof(err));
	assert_int_equal(code, PPRPC_EFLOOR);
	assert_non_null(strstr(err, gpu ? "ggml scratch" : "work buffer"));
	assert_non_null(strstr(err, "memory floor"));
	assert_true(tdaemon_alive(&g_d));
	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
}

/* 27.8: max-graph-gflop bounds ggml graphs as native ones: a MUL_MAT of
 * 2.1 Gflop is refused at create under a bound of 1 (7c3ca9f: accepted). */
static void test_work_bound(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--max-graph-gflop", "1", NULL };
	struct tdaemon d;
	struct model m;
	struct ggml_context *ctx = ctx_new(16);
	struct ggml_tensor *a, *b, *out;
	ggml_backend_buffer_t lb;
	uint64_t g = 0, rb;
	char err[320] = "";

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	connect_to(&d, &m);
	a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 512);
	b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 512);
	out = ggml_mul_mat(ctx, a, b);
	push_local(&m, ctx, out, &lb, &rb);
	assert_int_equal(create(&m, &g, err, sizeof(err)), PPRPC_ELIMIT);
	assert_non_null(strstr(err, "graph work limit (max-graph-gflop 1"));
	assert_non_null(strstr(err, "about 2 Gflop"));
	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
	assert_int_equal(tdaemon_stop(&d), 0);
}


/* 27.9: a graph's ggml context is reserved under the memory floor before
 * it is allocated: with 96 MiB above the floor, graphs of 8000 nodes
 * (~3.5 MiB of context each) are refused with EFLOOR well before 200 of
 * them (7c3ca9f: all 200 created, ~700 MiB past the floor). */
static void test_context_floor(void **state)
{
	static char floor[32];
	static const char *const extra[] = { "--devices", "ggml:CPU", "--memory-floor-mib", floor, NULL };
	struct tdaemon d;
	struct model m;
	struct ggml_init_params ip = { 8200 * ggml_tensor_overhead() + ggml_graph_overhead_custom(16384, false), NULL,
				       true };
	struct ggml_context *ctx = ggml_init(ip);
	struct ggml_tensor *x, *y;
	ggml_backend_buffer_t lb;
	uint64_t g = 0, rb;
	char err[320] = "";
	int rc = 0, n;

	(void)state;
	/* 96 MiB above the floor once a daemon has started: what starting one
	 * takes (ggml's backends; libggml-cuda's and the driver's maps on a
	 * GPU host are more than 96 MiB) is measured on a first daemon */
	snprintf(floor, sizeof(floor), "0");
	assert_int_equal(tdaemon_start(&d, extra), 0);
	snprintf(floor, sizeof(floor), "%llu", (unsigned long long)(tmem_available_mib() - 96));
	assert_int_equal(tdaemon_stop(&d), 0);
	assert_int_equal(tdaemon_start(&d, extra), 0);
	connect_to(&d, &m);
	x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
	y = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
	for (int i = 0; i < 8000; i++)
		x = ggml_add(ctx, x, y);
	push_local(&m, ctx, x, &lb, &rb);
	for (n = 0; n < 200 && (rc = create(&m, &g, err, sizeof(err))) == 0; n++)
		;
	assert_int_equal(rc, PPRPC_EFLOOR);
	assert_non_null(strstr(err, "ggml context"));
	assert_non_null(strstr(err, "memory floor"));
	assert_true(n < 60);
	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
	assert_int_equal(tdaemon_stop(&d), 0);
}

static int free_remote(struct model *m, uint64_t buf)
{
	Pprpc__BufferFree f = PPRPC__BUFFER_FREE__INIT;

	f.buffer = buf;
	return call(m, MSG_BUFFER_FREE, &f.base, NULL, 0, NULL, NULL, NULL, 0);
}

/* A buffer a graph holds stays charged to the connection after BUFFER_FREE
 * until the graph lets it go (7c3ca9f: the charge went at BUFFER_FREE, so
 * --max-conn-mib 64 held 480 MiB). */
static void test_held_buffer_charge(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--max-conn-mib", "64", NULL };
	struct tdaemon d;
	struct model m;
	struct ggml_context *ctx = ctx_new(16);
	struct ggml_tensor *a, *out;
	ggml_backend_buffer_t lb;
	uint64_t g = 0, rb, again;
	char err[320] = "";
	int code;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	connect_to(&d, &m);
	a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5 << 20);   /* 40 MiB with out */
	out = ggml_scale(ctx, a, 2.0f);
	push_local(&m, ctx, out, &lb, &rb);
	assert_int_equal(create(&m, &g, err, sizeof(err)), 0);
	assert_int_equal(free_remote(&m, rb), 0);
	/* the graph still holds the 40 MiB: 40 more do not fit in 64 */
	alloc_remote(&m, DEV_GGML, 40 << 20, &code, err, sizeof(err));
	assert_int_equal(code, PPRPC_ELIMIT);
	assert_non_null(strstr(err, "connection memory limit"));
	assert_int_equal(run(&m, g, err, sizeof(err)), 0);
	free_graph(&m, g);
	/* now it is really freed */
	again = alloc_remote(&m, DEV_GGML, 40 << 20, &code, err, sizeof(err));
	assert_int_equal(code, 0);
	assert_int_equal(free_remote(&m, again), 0);
	close(m.fd);
	gw_free(&m.wg);
	ggml_backend_buffer_free(lb);
	ggml_free(ctx);
	assert_int_equal(tdaemon_stop(&d), 0);
}

/* ---- long creates off the loop (issue 27.3) ------------------------------- */

/* A chain of n nodes over x, y [8] f32 and ids [1] i32: ADDs of y to x
 * (out = x + n y), or GET_ROWS of row ids[0] (the index guards make these
 * the slow ones to build: ~60 ms for the chain below on one core, where the
 * ADDs take ~13).  Either create is near max-meta-kib's 1 MiB (about 127
 * bytes a node), the size that took the loop ~0.1 s on 7c3ca9f. */
#define CHAIN_NODES 7500
enum { CHAIN_ADD, CHAIN_ROWS };

struct chain {
	struct ggml_context *ctx;
	struct ggml_tensor *x, *y, *ids, *out;
	ggml_backend_buffer_t lb;
	uint64_t rb;
};

static void chain_build(struct model *m, struct chain *ch, int n, int op)
{
	struct ggml_init_params p = {
		.mem_size = (size_t)(n + 16) * ggml_tensor_overhead() + ggml_graph_overhead_custom(16384, false),
		.mem_buffer = NULL,
		.no_alloc = true,
	};
	struct ggml_tensor *cur;
	float one[8];
	int32_t zero = 0;
	uintptr_t base;

	ch->ctx = ggml_init(p);
	assert_non_null(ch->ctx);
	ch->x = ggml_new_tensor_1d(ch->ctx, GGML_TYPE_F32, 8);
	ch->y = ggml_new_tensor_1d(ch->ctx, GGML_TYPE_F32, 8);
	ch->ids = ggml_new_tensor_1d(ch->ctx, GGML_TYPE_I32, 1);
	cur = ch->x;
	for (int i = 0; i < n; i++)
		cur = op == CHAIN_ROWS ? ggml_get_rows(ch->ctx, cur, ch->ids) : ggml_add(ch->ctx, cur, ch->y);
	ch->out = cur;
	push_local(m, ch->ctx, ch->out, &ch->lb, &ch->rb);
	base = (uintptr_t)ggml_backend_buffer_get_base(ch->lb);
	for (int i = 0; i < 8; i++)
		one[i] = 1.0f;
	set_remote(m, ch->rb, (uintptr_t)ch->x->data - base, one, sizeof(one));
	if (op == CHAIN_ROWS)
		set_remote(m, ch->rb, (uintptr_t)ch->ids->data - base, &zero, sizeof(zero));
	else
		set_remote(m, ch->rb, (uintptr_t)ch->y->data - base, one, sizeof(one));
}

static void chain_free(struct model *m, struct chain *ch)
{
	gw_free(&m->wg);
	ggml_backend_buffer_free(ch->lb);
	ggml_free(ch->ctx);
}

static uint64_t out_offset(const struct chain *ch)
{
	return (uintptr_t)ch->out->data - (uintptr_t)ggml_backend_buffer_get_base(ch->lb);
}

/* The first of fds a and b to become readable within timeout_ms: 1 for a,
 * 2 for b, 3 for both at once, 0 for neither. */
static int first_readable(int a, int b, int timeout_ms)
{
	struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };

	if (poll(p, 2, timeout_ms) <= 0)
		return 0;
	return (p[0].revents ? 1 : 0) | (p[1].revents ? 2 : 0);
}

/* 27.3: a 1 MiB create builds off the loop: another connection's PING,
 * sent while it builds, is answered before the create is (7c3ca9f: the loop
 * was busy for the whole build, the PING answered after it). */
static void test_long_create_off_loop(void **state)
{
	struct model a, b;
	struct chain ch;
	struct wire_reply r;
	Pprpc__Empty ping = PPRPC__EMPTY__INIT;
	int64_t t0, tb = 0, ta = 0;
	size_t len;
	int first;

	(void)state;
	connect_to(&g_d, &a);
	connect_to(&g_d, &b);
	chain_build(&a, &ch, CHAIN_NODES, CHAIN_ROWS);
	len = protobuf_c_message_get_packed_size(&a.wg.msg.base);
	print_message("create meta: %zu bytes\n", len);
	assert_true(len >= (128u << 10) && len <= PPRPC_MAX_META);
	/* the create's own time, alone */
	t0 = wire_now_ms();
	assert_int_equal(wire_call(a.fd, MSG_GGML_GRAPH_CREATE, ++a.req, &a.wg.msg.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	wire_reply_free(&r);
	ta = wire_now_ms() - t0;
	/* again, with B's PING behind it: the daemon has A's frame by the
	 * time B writes (10 ms; the build takes 30 to 140, see the print) */
	t0 = wire_now_ms();
	assert_int_equal(wire_send_msg(a.fd, MSG_GGML_GRAPH_CREATE, ++a.req, &a.wg.msg.base, NULL, 0), 0);
	usleep(10000);
	assert_int_equal(wire_send_msg(b.fd, MSG_PING, ++b.req, &ping.base, NULL, 0), 0);
	first = first_readable(a.fd, b.fd, WIRE_TIMEOUT_MS);
	assert_int_equal(wire_read_reply(b.fd, &r, WIRE_TIMEOUT_MS), 0);
	tb = wire_now_ms() - t0;
	assert_false(r.is_error);
	assert_int_equal(r.h.req_id, b.req);
	wire_reply_free(&r);
	assert_int_equal(wire_read_reply(a.fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.req_id, a.req);
	wire_reply_free(&r);
	print_message("create of %zu bytes, %d nodes: %lld ms alone; B's PING answered %lld ms after A wrote\n", len,
		      CHAIN_NODES, (long long)ta, (long long)tb);
	/* B first, alone: A's reply had not come when B's did */
	assert_int_equal(first, 2);
	assert_true(tdaemon_alive(&g_d));
	close(a.fd);
	close(b.fd);
	chain_free(&a, &ch);
}

/* The connection's own order holds around a create off the loop: its
 * first run (run set), a FENCE and a queued GET of the output sent right
 * behind it see the graph computed. */
static void test_long_create_order(void **state)
{
	Pprpc__Fence f = PPRPC__FENCE__INIT;
	Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
	struct model a;
	struct chain ch;
	struct wire_reply r;
	uint64_t rq_create, rq_fence, rq_get;
	float got[8];

	(void)state;
	connect_to(&g_d, &a);
	/* 2000 nodes: 250 KiB, past the threshold, and a run that is short
	 * even on a loaded host (each node is a barrier of ggml-cpu's threads) */
	chain_build(&a, &ch, 2000, CHAIN_ADD);
	a.wg.msg.run = 1;
	g.buffer = ch.rb;
	g.offset = out_offset(&ch);
	g.size = sizeof(got);
	f.device = DEV_GGML;
	rq_create = ++a.req;
	assert_int_equal(wire_send_msg(a.fd, MSG_GGML_GRAPH_CREATE, rq_create, &a.wg.msg.base, NULL, 0), 0);
	rq_fence = ++a.req;
	assert_int_equal(wire_send_msg(a.fd, MSG_FENCE, rq_fence, &f.base, NULL, 0), 0);
	rq_get = send_queued(&a, MSG_TENSOR_GET, &g.base, NULL, 0);
	assert_int_equal(wire_read_reply(a.fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.req_id, rq_create);
	wire_reply_free(&r);
	assert_int_equal(wire_read_reply(a.fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.req_id, rq_fence);
	wire_reply_free(&r);
	assert_int_equal(wire_read_reply(a.fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.req_id, rq_get);
	assert_int_equal(r.h.bulk_len, sizeof(got));
	memcpy(got, r.bulk, sizeof(got));
	wire_reply_free(&r);
	for (int i = 0; i < 8; i++)
		assert_true(got[i] == 1.0f + 2000);
	a.wg.msg.run = 0;
	close(a.fd);
	chain_free(&a, &ch);
}

/* A client that leaves while its create builds off the loop: the graph
 * and its reservation go, the daemon serves on, and a daemon stopped with
 * creates in flight exits cleanly (LeakSanitizer sees every byte at exit
 * in the ASan build). */
static void test_long_create_close(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", NULL };
	Pprpc__Empty ping = PPRPC__EMPTY__INIT;
	struct tdaemon d;
	struct model a, b, k;
	struct chain ch, chb, chk;
	struct wire_reply r;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	connect_to(&d, &b);
	/* closed before, while and (the third, perhaps) after its ~60 ms
	 * build; each names buffers of its own, so the build is the full one */
	for (int i = 0; i < 3; i++) {
		connect_to(&d, &k);
		chain_build(&k, &chk, CHAIN_NODES, CHAIN_ROWS);
		assert_int_equal(wire_send_msg(k.fd, MSG_GGML_GRAPH_CREATE, ++k.req, &k.wg.msg.base, NULL, 0), 0);
		/* and a frame deferred behind it */
		assert_int_equal(wire_send_msg(k.fd, MSG_PING, ++k.req, &ping.base, NULL, 0), 0);
		usleep(30000 * (unsigned)i);
		close(k.fd);
		chain_free(&k, &chk);
	}
	assert_int_equal(wire_call(b.fd, MSG_PING, ++b.req, &ping.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	wire_reply_free(&r);
	assert_true(tdaemon_alive(&d));
	/* stopped while two creates build */
	connect_to(&d, &a);
	chain_build(&a, &ch, CHAIN_NODES, CHAIN_ROWS);
	chain_build(&b, &chb, CHAIN_NODES, CHAIN_ROWS);
	assert_int_equal(wire_send_msg(a.fd, MSG_GGML_GRAPH_CREATE, ++a.req, &a.wg.msg.base, NULL, 0), 0);
	assert_int_equal(wire_send_msg(b.fd, MSG_GGML_GRAPH_CREATE, ++b.req, &b.wg.msg.base, NULL, 0), 0);
	usleep(20000);
	assert_int_equal(tdaemon_stop(&d), 0);
	close(a.fd);
	close(b.fd);
	chain_free(&a, &ch);
	chain_free(&b, &chb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_graph_matches_local),
		cmocka_unit_test(test_hostile_graphs),
		cmocka_unit_test(test_index_guard),
		cmocka_unit_test(test_split_guard),
		cmocka_unit_test(test_queue_sticky),
		cmocka_unit_test(test_create_run),
		cmocka_unit_test(test_wait_holds_run),
		cmocka_unit_test(test_two_ranks),
		cmocka_unit_test(test_chain_runs),
		cmocka_unit_test(test_probes),
		cmocka_unit_test(test_clear_copy),
		cmocka_unit_test(test_memory_floor),
		cmocka_unit_test(test_graph_charge),
		cmocka_unit_test(test_device_names),
		cmocka_unit_test(test_uncomputed_sort),
		cmocka_unit_test(test_mmid_plan),
		cmocka_unit_test(test_work_bound),
		cmocka_unit_test(test_context_floor),
		cmocka_unit_test(test_held_buffer_charge),
		cmocka_unit_test(test_long_create_off_loop),
		cmocka_unit_test(test_long_create_order),
		cmocka_unit_test(test_long_create_close),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

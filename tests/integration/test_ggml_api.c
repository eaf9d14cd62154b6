/*
 * tests/integration/test_ggml_api.c — libpprpc's public API for ggml
 * backends (pprpc_ggml.h; requests, connection state and the sticky async
 * error in pprpc.h) against a real pprpcd serving ggml:CPU: what
 * libggml-pprpc.so is built on, seen from the outside.
 *
 * The graph is ggml's ADD of two f32 rows, written in wire form by hand
 * (ggml's numbering from its header; nothing of ggml runs here).
 *
 * test_map_file: a buffer that is the rank's mapping of its model-dir copy
 * (pprpc_buffer_map_file, doc/weights.md): the file's bytes, writes that
 * stay the rank's, each refusal with its reason, a graph computing with
 * it, and a run refused once the file changed under the mapping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml.h"
#include "pprpc.h"
#include "pprpc_ggml.h"
#include "pprpc_weights.h"
#include "tests/integration/harness.h"

#define DEV 0
#define N 4

static struct tdaemon g_d;
static pprpc_client *g_c;
static pprpc_buffer g_buf;

/* a, b and out = a + b, each N floats, at offsets 0, 16, 32 of g_buf. */
struct add_graph {
	pprpc_ggml_tensor t[3];
	int32_t node;
	pprpc_ggml_graph_desc g;
};

static void row(pprpc_ggml_tensor *t, uint64_t offset, const char *name)
{
	memset(t, 0, sizeof(*t));
	t->type = GGML_TYPE_F32;
	t->op = GGML_OP_NONE;
	t->ne[0] = N;
	t->ne[1] = t->ne[2] = t->ne[3] = 1;
	t->nb[0] = sizeof(float);
	t->nb[1] = t->nb[2] = t->nb[3] = N * sizeof(float);
	t->view_src = -1;
	t->buffer = g_buf;
	t->offset = offset;
	t->name = name;
}

static void add_graph_make(struct add_graph *a)
{
	row(&a->t[0], 0, "a");
	row(&a->t[1], 16, "b");
	row(&a->t[2], 32, "out");
	a->t[2].op = GGML_OP_ADD;
	a->t[2].flags = GGML_TENSOR_FLAG_COMPUTE;
	a->t[2].src[0] = 0;
	a->t[2].src[1] = 1;
	a->t[2].n_src = 2;
	a->node = 2;
	memset(&a->g, 0, sizeof(a->g));
	a->g.device = DEV;
	a->g.tensors = a->t;
	a->g.n_tensors = 3;
	a->g.nodes = &a->node;
	a->g.n_nodes = 1;
	a->g.ggml_version = PPRPC_GGML_VERSION;
}

static void inputs(float base)
{
	float in[2 * N];

	for (int i = 0; i < N; i++) {
		in[i] = base + (float)i;
		in[N + i] = 10.0f * (float)(i + 1);
	}
	assert_int_equal(pprpc_tensor_set(g_c, g_buf, 0, in, sizeof(in)), 0);
}

static void expect_sum(float base)
{
	float out[N];

	assert_int_equal(pprpc_tensor_get(g_c, g_buf, 32, out, sizeof(out)), 0);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == base + (float)i + 10.0f * (float)(i + 1));
}

static void test_create_and_run(void **state)
{
	struct add_graph a;
	pprpc_graph g = { 0 };

	(void)state;
	add_graph_make(&a);
	inputs(1.0f);
	assert_int_equal(pprpc_ggml_graph_create(g_c, &a.g, &g), 0);
	assert_true(g.id != 0);
	assert_int_equal(pprpc_graph_run(g_c, g), 0);
	expect_sum(1.0f);
	assert_int_equal(pprpc_graph_free(g_c, g), 0);
}

/* The create queues the run; the handle comes with a reply nobody waited
 * for, read by the calls after it. */
static void test_create_run_request(void **state)
{
	struct add_graph a;
	pprpc_request *r = NULL;
	pprpc_graph g = { 0 };
	pprpc_caps caps;

	(void)state;
	assert_int_equal(pprpc_get_caps(g_c, &caps), 0);
	if (!caps.ggml_create_run)
		skip();
	add_graph_make(&a);
	inputs(2.0f);
	assert_int_equal(pprpc_ggml_graph_create_run(g_c, &a.g, &r), 0);
	assert_non_null(r);
	if (!pprpc_request_done(r))
		assert_int_equal(pprpc_request_graph(r, &g), PPRPC_EBUSY);
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
	expect_sum(2.0f);
	assert_int_equal(pprpc_request_wait(g_c, r), 0);
	assert_string_equal(pprpc_request_error(r), "");
	assert_int_equal(pprpc_request_graph(r, &g), 0);
	assert_true(g.id != 0);
	pprpc_request_free(r);
	/* the handle runs again like any graph's */
	inputs(3.0f);
	assert_int_equal(pprpc_graph_run_async(g_c, g), 0);
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
	expect_sum(3.0f);
	assert_int_equal(pprpc_graph_free(g_c, g), 0);
}

/* A refused create with run fails its request with the rank's reason and
 * the queue (the next synchronize), and the connection goes on. */
static void test_refused_create_run(void **state)
{
	struct add_graph a;
	pprpc_request *r = NULL;
	pprpc_graph g;
	int rc;

	(void)state;
	add_graph_make(&a);
	a.t[2].src[1] = 9; /* a source that is not there */
	assert_int_equal(pprpc_ggml_graph_create_run(g_c, &a.g, &r), 0);
	rc = pprpc_request_wait(g_c, r);
	assert_true(rc < 0);
	assert_true(strlen(pprpc_request_error(r)) > 0);
	assert_int_equal(pprpc_request_graph(r, &g), rc);
	pprpc_request_free(r);
	assert_true(pprpc_synchronize(g_c, DEV) < 0);
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
	assert_int_equal(pprpc_connection_state(g_c), PPRPC_CONN_OPEN);
}

/* A request let go in flight: its reply, when it comes, finds it still
 * registered (the stream stays in sync) and frees it (no leak under ASan). */
static void test_orphan(void **state)
{
	struct add_graph a;
	pprpc_request *r = NULL;
	pprpc_timeline t;

	(void)state;
	add_graph_make(&a);
	inputs(4.0f);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pprpc_ggml_graph_create_run(g_c, &a.g, &r), 0);
		/* nothing read since the send (the socket was never full) */
		assert_false(pprpc_request_done(r));
		pprpc_request_free(r);
	}
	pprpc_request_free(NULL);
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
	expect_sum(4.0f);
	assert_int_equal(pprpc_timeline_create(g_c, DEV, 0, &t), 0);
	assert_int_equal(pprpc_timeline_destroy(g_c, t), 0);
	assert_int_equal(pprpc_connection_state(g_c), PPRPC_CONN_OPEN);
}

static void test_op_queries(void **state)
{
	struct add_graph a;
	pprpc_ggml_op_desc op;
	uint64_t size = 0;
	char why[128] = "x";
	int ok = -1;

	(void)state;
	add_graph_make(&a);
	for (int i = 0; i < 3; i++) {
		a.t[i].buffer.id = 0;
		a.t[i].offset = 0;
		a.t[i].flags = 0;
		a.t[i].name = NULL;
	}
	op = (pprpc_ggml_op_desc){ .device = DEV, .tensors = a.t, .n_tensors = 3, .node = 2 };
	assert_int_equal(pprpc_ggml_op_supported(g_c, &op, &ok, why, sizeof(why)), 0);
	assert_int_equal(ok, 1);
	assert_string_equal(why, "");
	assert_int_equal(pprpc_ggml_op_alloc_size(g_c, &op, &size), 0);
	assert_int_equal(size, N * sizeof(float));
	/* a malformed question is the validator's to refuse */
	op.node = 7;
	assert_true(pprpc_ggml_op_supported(g_c, &op, &ok, NULL, 0) < 0);
	assert_true(strlen(pprpc_last_error(g_c)) > 0);
}

/* The packed form is the message's fields alone: equal descriptions pack
 * equal, any field changes it; the bounds on the caller's arrays hold. */
static void test_pack(void **state)
{
	struct add_graph a, b;
	uint8_t *pa = NULL, *pb = NULL;
	size_t la = 0, lb = 0;
	pprpc_request *r = NULL;
	pprpc_graph g;

	(void)state;
	add_graph_make(&a);
	add_graph_make(&b);
	assert_int_equal(pprpc_ggml_graph_pack(&a.g, &pa, &la), 0);
	assert_int_equal(pprpc_ggml_graph_pack(&b.g, &pb, &lb), 0);
	assert_true(la > 0 && la < PPRPC_MAX_META);
	assert_int_equal(la, lb);
	assert_memory_equal(pa, pb, la);
	free(pb);
	b.t[1].offset = 20;
	assert_int_equal(pprpc_ggml_graph_pack(&b.g, &pb, &lb), 0);
	assert_true(la != lb || memcmp(pa, pb, la) != 0);
	free(pa);
	free(pb);
	b.t[2].n_src = PPRPC_GGML_MAX_SRC + 1;
	assert_int_equal(pprpc_ggml_graph_pack(&b.g, &pb, &lb), PPRPC_EINVAL);
	assert_int_equal(pprpc_ggml_graph_create(g_c, &b.g, &g), PPRPC_EINVAL);
	assert_int_equal(pprpc_ggml_graph_create_run(g_c, &b.g, &r), PPRPC_EINVAL);
	assert_null(r);
	b.t[2].n_src = 2;
	b.t[2].op_params_len = PPRPC_GGML_MAX_OP_PARAMS + 1;
	b.t[2].op_params = pa; /* never read: refused first */
	assert_int_equal(pprpc_ggml_graph_pack(&b.g, &pb, &lb), PPRPC_EINVAL);
	/* refused before anything was sent: the stream is as it was */
	assert_int_equal(pprpc_connection_state(g_c), PPRPC_CONN_OPEN);
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
}

/* A queued read the rank refuses is the sticky async error, read and
 * cleared through a call. */
static void test_async_error(void **state)
{
	pprpc_buffer bogus = { g_buf.id ^ 0x5a5a0000u };
	pprpc_timeline t;
	char msg[256] = "x";
	float out[N];
	int rc;

	(void)state;
	assert_int_equal(pprpc_async_error_peek(g_c), 0);
	assert_int_equal(pprpc_async_error_take(g_c, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "");
	assert_int_equal(pprpc_tensor_get_async(g_c, bogus, 0, out, sizeof(out)), 0);
	/* a call after it reads its reply on the way to its own */
	assert_int_equal(pprpc_timeline_create(g_c, DEV, 0, &t), 0);
	rc = pprpc_async_error_peek(g_c);
	assert_true(rc < 0);
	assert_int_equal(pprpc_async_error_take(g_c, msg, sizeof(msg)), rc);
	assert_true(strlen(msg) > 0);
	assert_int_equal(pprpc_async_error_peek(g_c), 0);
	assert_int_equal(pprpc_timeline_destroy(g_c, t), 0);
	(void)pprpc_synchronize(g_c, DEV); /* the queue's own account, if any */
	assert_int_equal(pprpc_synchronize(g_c, DEV), 0);
}

/* A rank that goes away: the state says so, requests and calls fail. */
static void test_connection_state(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--threads", "1", NULL };
	struct tdaemon d;
	pprpc_client *c = NULL;
	pprpc_ggml_graph_desc g;
	pprpc_request *r = NULL;

	(void)state;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	assert_int_equal(pprpc_connect(d.addr, NULL, &c), 0);
	assert_int_equal(pprpc_connection_state(c), PPRPC_CONN_OPEN);
	assert_true(pprpc_daemon_max_bulk(c) > 0);
	tdaemon_stop(&d);
	assert_true(pprpc_synchronize(c, DEV) < 0);
	assert_int_equal(pprpc_connection_state(c), PPRPC_CONN_BROKEN);
	memset(&g, 0, sizeof(g));
	assert_int_equal(pprpc_ggml_graph_create_run(c, &g, &r), PPRPC_ECONN);
	assert_null(r);
	pprpc_close(c);
}

static uint64_t stat_of(pprpc_client *c, const char *list, int item, const char *name)
{
	pprpc_stats *s = NULL;
	uint64_t v;

	assert_int_equal(pprpc_stats_get(c, &s), 0);
	v = pprpc_stats_u64(s, list, item, name);
	pprpc_stats_free(s);
	return v;
}

static void test_map_file(void **state)
{
	static char dir[] = "/tmp/pprpc-map-XXXXXX";
	enum { SIZE = 3 << 20, OFF = 4096 + 64, LEN = (1 << 20) + 32 };
	const char *extra[] = { "--devices", "ggml:CPU,cpu", "--threads", "1", "--model-dir", NULL, NULL };
	uint8_t *bytes = malloc(SIZE), *got = malloc(LEN), back[64];
	char path[128], err[256], mapped[256] = "";
	pprpc_fill src = { 0 };
	pprpc_file_id id, bad;
	pprpc_buffer b;
	pprpc_client *c;
	struct tdaemon d;
	int fd;

	(void)state;
	assert_true(bytes && got);
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < SIZE / 4; i++) {
		float v = (float)(i % 1000) * 0.5f;

		memcpy(bytes + 4 * i, &v, 4);
	}
	snprintf(path, sizeof(path), "%s/w.bin", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, SIZE), SIZE);
	close(fd);
	assert_int_equal(pprpc_file_identify(path, NULL, 1, &id, NULL, err, sizeof(err)), 0);
	extra[5] = dir;
	assert_int_equal(tdaemon_start(&d, extra), 0);
	assert_int_equal(pprpc_connect(d.addr, NULL, &c), 0);
	/* the ggml:CPU device maps, the native one does not */
	assert_int_equal(stat_of(c, "devices", 0, "info.maps_files"), 1);
	assert_int_equal(stat_of(c, "devices", 1, "info.maps_files"), 0);

	src.file = &id;
	src.file_offset = OFF;
	src.hint = "w.bin";
	assert_int_equal(pprpc_buffer_map_file(c, 0, LEN, &src, &b, mapped, sizeof(mapped)), 0);
	assert_string_equal(mapped, "w.bin");
	assert_int_equal(pprpc_tensor_get(c, b, 0, got, LEN), 0);
	assert_memory_equal(got, bytes + OFF, LEN);
	assert_int_equal(stat_of(c, NULL, 0, "weights.maps"), 1);
	assert_int_equal(stat_of(c, NULL, 0, "weights.mapped_bytes"), LEN);
	/* a write is the rank's: read back, the file unchanged */
	memset(back, 0xa5, sizeof(back));
	assert_int_equal(pprpc_tensor_set(c, b, 100, back, sizeof(back)), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 64, got, 128), 0);
	assert_memory_equal(got, bytes + OFF + 64, 36);
	assert_memory_equal(got + 36, back, sizeof(back));
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, 256, OFF), 256);
	close(fd);
	assert_memory_equal(got, bytes + OFF, 256);
	/* outside the buffer */
	assert_int_equal(pprpc_tensor_get(c, b, LEN - 8, got, 16), PPRPC_ERANGE);
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	assert_int_equal(stat_of(c, NULL, 0, "weights.mapped_bytes"), 0);

	/* refusals, each with its reason */
	assert_int_equal(pprpc_buffer_map_file(c, 0, LEN, &src, &b, NULL, 0), 0);
	assert_int_equal(pprpc_buffer_map_file(c, 1, LEN, &src, &b, NULL, 0), PPRPC_EUNSUPP);
	assert_non_null(strstr(pprpc_last_error(c), "memory of its own"));
	bad = id;
	bad.content_sha256[0] ^= 1;
	src.file = &bad;
	assert_int_equal(pprpc_buffer_map_file(c, 0, LEN, &src, &b, NULL, 0), PPRPC_EHANDLE);
	assert_non_null(strstr(pprpc_last_error(c), "other content"));
	src.file = &id;
	src.file_offset = 48;
	assert_int_equal(pprpc_buffer_map_file(c, 0, LEN, &src, &b, NULL, 0), PPRPC_EINVAL);
	assert_non_null(strstr(pprpc_last_error(c), "not aligned"));
	src.file_offset = SIZE - 16;
	assert_int_equal(pprpc_buffer_map_file(c, 0, LEN, &src, &b, NULL, 0), PPRPC_ERANGE);
	src.file_offset = OFF;
	{
		pprpc_buffer none;

		assert_int_equal(pprpc_buffer_map_file(c, 0, 0, &src, &none, NULL, 0), PPRPC_EINVAL);
	}
	assert_int_equal(stat_of(c, NULL, 0, "weights.maps"), 2);

	/* out = w + x, w the mapped file's first floats: computed; then the
	 * file rewritten in place: the next run is refused, and says why */
	{
		struct add_graph a;
		pprpc_buffer o;
		pprpc_graph g = { 0 };
		float x[N] = { 1, 2, 3, 4 }, out[N], w[N];

		assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &o), 0);
		add_graph_make(&a);
		a.t[0].buffer = b;
		a.t[1].buffer = o;
		a.t[1].offset = 0;
		a.t[2].buffer = o;
		assert_int_equal(pprpc_tensor_set(c, o, 0, x, sizeof(x)), 0);
		assert_int_equal(pprpc_ggml_graph_create(c, &a.g, &g), 0);
		assert_int_equal(pprpc_graph_run(c, g), 0);
		assert_int_equal(pprpc_tensor_get(c, o, 32, out, sizeof(out)), 0);
		memcpy(w, bytes + OFF, sizeof(w));
		for (int i = 0; i < N; i++)
			assert_true(out[i] == w[i] + x[i]);
		fd = open(path, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, "x", 1, 100), 1);
		{
			struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1234567890, .tv_nsec = 0 } };

			assert_int_equal(futimens(fd, ts), 0);
		}
		close(fd);
		assert_int_equal(pprpc_graph_run(c, g), PPRPC_EIO);
		assert_non_null(strstr(pprpc_last_error(c), "w.bin: changed under the rank (since it was mapped"));
	}
	pprpc_close(c);
	assert_int_equal(tdaemon_stop(&d), 0);
	/* no model-dir */
	assert_int_equal(pprpc_buffer_map_file(g_c, 0, LEN, &src, &b, NULL, 0), PPRPC_EUNSUPP);
	assert_non_null(strstr(pprpc_last_error(g_c), "no model-dir"));
	assert_int_equal(stat_of(g_c, "devices", 0, "info.maps_files"), 0);
	unlink(path);
	snprintf(path, sizeof(path), "%s/w.bin.pprpc-sum", dir);
	unlink(path);
	rmdir(dir);
	free(bytes);
	free(got);
}

static int setup(void **state)
{
	static const char *const extra[] = { "--devices", "ggml:CPU", "--threads", "1", NULL };
	pprpc_connect_opts o = { .client_name = "test_ggml_api" };

	(void)state;
	if (tdaemon_start(&g_d, extra) < 0)
		return -1;
	if (pprpc_connect(g_d.addr, &o, &g_c) < 0)
		return -1;
	return pprpc_buffer_alloc(g_c, DEV, 4096, &g_buf);
}

static int teardown(void **state)
{
	int st;

	(void)state;
	pprpc_close(g_c);
	st = tdaemon_stop(&g_d);
	return st == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_and_run),
		cmocka_unit_test(test_map_file),
		cmocka_unit_test(test_create_run_request),
		cmocka_unit_test(test_refused_create_run),
		cmocka_unit_test(test_orphan),
		cmocka_unit_test(test_op_queries),
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_async_error),
		cmocka_unit_test(test_connection_state),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

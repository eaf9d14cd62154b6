/*
 * tests/integration/test_limits.c — per-connection and per-graph limits
 * against a real pprpcd on loopback.
 *
 * One daemon with small limits; each test hits one limit, checks the code
 * (PPRPC_ELIMIT, or PPRPC_ETOOBIG for a frame) and that the message names
 * the limit, and that the daemon keeps serving other connections (and the
 * same connection, where the limit is not fatal).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "tests/integration/harness.h"
#include "tests/integration/wire.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

static int group_setup(void **state)
{
	static const char *const extra[] = {
		"--max-conn-buffers", "8", "--max-conn-mib", "1", "--max-conn-graphs", "2",
		"--max-graph-nodes", "4", "--max-conn-inflight", "64", "--max-meta-kib", "4", NULL,
	};
	struct tdaemon *d = calloc(1, sizeof(*d));

	if (!d || tdaemon_start(d, extra) < 0) {
		free(d);
		return -1;
	}
	*state = d;
	return 0;
}

static int group_teardown(void **state)
{
	struct tdaemon *d = *state;
	int alive = tdaemon_alive(d), st = tdaemon_stop(d);

	free(d);
	return alive && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static pprpc_client *open_client(const struct tdaemon *d)
{
	pprpc_connect_opts o = { .client_name = "limits", .io_timeout_ms = 10000 };
	pprpc_client *c = NULL;

	assert_int_equal(pprpc_connect(d->addr, &o, &c), 0);
	return c;
}

static void expect_limit(pprpc_client *c, int rc, const char *msg)
{
	if (rc != PPRPC_ELIMIT || !strstr(pprpc_last_error(c), msg))
		fprintf(stderr, "got %d '%s', expected PPRPC_ELIMIT '%s'\n", rc, pprpc_last_error(c), msg);
	assert_int_equal(rc, PPRPC_ELIMIT);
	assert_non_null(strstr(pprpc_last_error(c), msg));
}

/* Another connection is served normally. */
static void assert_serves(const struct tdaemon *d)
{
	pprpc_client *c = open_client(d);
	uint8_t out[512], in[512];
	pprpc_buffer b;

	assert_true(tdaemon_alive((struct tdaemon *)d));
	memset(out, 0x3c, sizeof(out));
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(out), &b), 0);
	assert_int_equal(pprpc_tensor_set(c, b, 0, out, sizeof(out)), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 0, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(out));
	pprpc_close(c);
}

static void test_conn_buffers(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = open_client(d), *c2 = open_client(d);
	pprpc_buffer b[9], x;

	for (int i = 0; i < 8; i++)
		assert_int_equal(pprpc_buffer_alloc(c, 0, 100, &b[i]), 0);
	expect_limit(c, pprpc_buffer_alloc(c, 0, 100, &b[8]), "connection buffer limit (8) reached");
	/* the limit is per connection */
	assert_int_equal(pprpc_buffer_alloc(c2, 0, 100, &x), 0);
	/* and a freed slot is usable again */
	assert_int_equal(pprpc_buffer_free(c, b[0]), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 100, &b[0]), 0);
	pprpc_close(c);
	pprpc_close(c2);
	assert_serves(d);
}

static void test_conn_bytes(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = open_client(d);
	long page = sysconf(_SC_PAGESIZE);
	pprpc_buffer a, b;

	/* 1 MiB - page + 1 bytes cost a whole 1 MiB once page-rounded: one
	 * more byte does not fit although the sizes add up to less. */
	assert_int_equal(pprpc_buffer_alloc(c, 0, MIB - (uint64_t)page + 1, &a), 0);
	expect_limit(c, pprpc_buffer_alloc(c, 0, 1, &b), "connection memory limit (1 MiB) reached");
	assert_int_equal(pprpc_buffer_free(c, a), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 600 * KIB, &a), 0);
	expect_limit(c, pprpc_buffer_alloc(c, 0, 600 * KIB, &b), "connection memory limit");
	/* A graph's scratch arena is charged too: 512 KiB of scratch on top of
	 * 600 KiB of buffers does not fit. */
	{
		pprpc_graph_builder *gb = NULL;
		pprpc_tensor ts = pprpc_tensor_make(a, 0, PPRPC_F32, 128 * 1024, 1, 1, 1);
		pprpc_graph g;
		int s, t;

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		s = pprpc_gb_tensor(gb, &ts);
		t = pprpc_gb_scale(gb, s, 2.0f, 0.0f, -1);   /* scratch output, 512 KiB */
		assert_true(t >= 0);
		expect_limit(c, pprpc_graph_create(c, 0, gb, &g), "connection memory limit");
		assert_int_equal(pprpc_buffer_free(c, a), 0);
		assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &a), 0);
		ts = pprpc_tensor_make(a, 0, PPRPC_F32, 1024, 1, 1, 1);
		pprpc_graph_builder_free(gb);
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		s = pprpc_gb_tensor(gb, &ts);
		assert_true(pprpc_gb_scale(gb, s, 2.0f, 0.0f, -1) >= 0);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &g), 0);
		assert_int_equal(pprpc_graph_free(c, g), 0);
		pprpc_graph_builder_free(gb);
	}
	pprpc_close(c);
	assert_serves(d);
}

/* A chain of n SCALE nodes from buffer a to buffer b through scratch. */
static int make_chain(pprpc_client *c, pprpc_buffer a, pprpc_buffer b, int n, pprpc_graph *out)
{
	pprpc_graph_builder *gb = NULL;
	pprpc_tensor ta = pprpc_tensor_make(a, 0, PPRPC_F32, 16, 1, 1, 1);
	pprpc_tensor tb = pprpc_tensor_make(b, 0, PPRPC_F32, 16, 1, 1, 1);
	int x, y, rc;

	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	x = pprpc_gb_tensor(gb, &ta);
	y = pprpc_gb_tensor(gb, &tb);
	for (int i = 0; i < n; i++)
		x = pprpc_gb_scale(gb, x, 1.0f, 1.0f, i == n - 1 ? y : -1);
	assert_true(x >= 0);
	assert_int_equal(pprpc_gb_node_count(gb), n);
	rc = pprpc_graph_create(c, 0, gb, out);
	pprpc_graph_builder_free(gb);
	return rc;
}

static void test_graphs(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = open_client(d);
	pprpc_buffer a, b;
	pprpc_graph g1, g2, g3;
	float in[16], res[16];

	assert_int_equal(pprpc_buffer_alloc(c, 0, 64, &a), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 64, &b), 0);
	expect_limit(c, make_chain(c, a, b, 5, &g1), "graph node limit (4) exceeded: the graph has 5 nodes");
	assert_int_equal(make_chain(c, a, b, 4, &g1), 0);
	assert_int_equal(make_chain(c, a, b, 1, &g2), 0);
	expect_limit(c, make_chain(c, a, b, 1, &g3), "connection graph limit (2) reached");
	/* Refusals leave the connection working: run the 4-node graph. */
	for (int i = 0; i < 16; i++)
		in[i] = (float)i;
	assert_int_equal(pprpc_tensor_set(c, a, 0, in, sizeof(in)), 0);
	assert_int_equal(pprpc_graph_run(c, g1), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 0, res, sizeof(res)), 0);
	for (int i = 0; i < 16; i++)
		assert_true(res[i] == (float)i + 4.0f);
	assert_int_equal(pprpc_graph_free(c, g2), 0);
	assert_int_equal(make_chain(c, a, b, 1, &g3), 0);
	pprpc_close(c);
	assert_serves(d);
}

/* Queued commands behind a WAIT that never ends, sent in one write without
 * reading: the daemon pauses reading at 32 (half the limit), the frames it
 * already read take it to 64, and the next is refused and the connection
 * closed. */
static void test_inflight(void **state)
{
	struct tdaemon *d = *state;
	Pprpc__TimelineCreate tc = PPRPC__TIMELINE_CREATE__INIT;
	Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;
	Pprpc__Wait w = PPRPC__WAIT__INIT;
	Pprpc__BufferClear bc = PPRPC__BUFFER_CLEAR__INIT;
	ProtobufCMessage *m = NULL;
	struct wire_reply r;
	uint8_t frames[200 * 64], meta[64];
	size_t off = 0, mlen;
	int fd = traw_connect(d), found = 0;

	assert_true(fd >= 0);
	assert_int_equal(wire_hello(fd), 0);
	assert_int_equal(wire_call(fd, MSG_TIMELINE_CREATE, 2, &tc.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__timeline_create_reply__descriptor, &m), 0);
	w.timeline = ((Pprpc__TimelineCreateReply *)m)->timeline;
	w.value = 1;
	meta_free(m);
	wire_reply_free(&r);
	ba.size = 64;
	assert_int_equal(wire_call(fd, MSG_BUFFER_ALLOC, 3, &ba.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__buffer_alloc_reply__descriptor, &m), 0);
	bc.buffer = ((Pprpc__BufferAllocReply *)m)->buffer;
	meta_free(m);
	wire_reply_free(&r);

	mlen = meta_pack(&w.base, meta);
	wire_hdr(frames, PPRPC_PROTO_VERSION, MSG_WAIT, FRAME_F_QUEUED, (uint32_t)mlen, 0, 4);
	memcpy(frames + FRAME_HDR_SIZE, meta, mlen);
	off = FRAME_HDR_SIZE + mlen;
	mlen = meta_pack(&bc.base, meta);
	for (int i = 0; i < 150; i++) {
		wire_hdr(frames + off, PPRPC_PROTO_VERSION, MSG_BUFFER_CLEAR, FRAME_F_QUEUED, (uint32_t)mlen, 0,
			 10 + (uint64_t)i);
		memcpy(frames + off + FRAME_HDR_SIZE, meta, mlen);
		off += FRAME_HDR_SIZE + mlen;
	}
	assert_true(off < 64 * 1024);  /* one read of the daemon */
	assert_int_equal(wire_send_all(fd, frames, off, WIRE_TIMEOUT_MS), 0);
	while (wire_read_reply(fd, &r, WIRE_TIMEOUT_MS) == 0) {
		if (r.is_error && r.code == PPRPC_ELIMIT) {
			fprintf(stderr, "in-flight refusal: %s\n", r.msg);
			assert_non_null(strstr(r.msg, "connection in-flight limit (64) reached"));
			found = 1;
		}
		wire_reply_free(&r);
	}
	assert_true(found);
	close(fd);
	assert_serves(d);

	/* Host waits that are never released count as well. */
	{
		Pprpc__HostWait hw = PPRPC__HOST_WAIT__INIT;

		fd = traw_connect(d);
		assert_true(fd >= 0);
		assert_int_equal(wire_hello(fd), 0);
		assert_int_equal(wire_call(fd, MSG_TIMELINE_CREATE, 2, &tc.base, NULL, 0, &r), 0);
		assert_int_equal(wire_reply_unpack(&r, &pprpc__timeline_create_reply__descriptor, &m), 0);
		hw.timeline = ((Pprpc__TimelineCreateReply *)m)->timeline;
		hw.value = 1;
		meta_free(m);
		wire_reply_free(&r);
		mlen = meta_pack(&hw.base, meta);
		for (off = 0; off + FRAME_HDR_SIZE + mlen <= sizeof(frames) && off < 100 * (FRAME_HDR_SIZE + mlen);
		     off += FRAME_HDR_SIZE + mlen) {
			wire_hdr(frames + off, PPRPC_PROTO_VERSION, MSG_HOST_WAIT, 0, (uint32_t)mlen, 0, 10 + off);
			memcpy(frames + off + FRAME_HDR_SIZE, meta, mlen);
		}
		assert_int_equal(wire_send_all(fd, frames, off, WIRE_TIMEOUT_MS), 0);
		found = 0;
		while (wire_read_reply(fd, &r, WIRE_TIMEOUT_MS) == 0) {
			if (r.is_error && r.code == PPRPC_ELIMIT && strstr(r.msg, "64 waits, probes and pulls pending"))
				found = 1;
			wire_reply_free(&r);
		}
		assert_true(found);
		close(fd);
		assert_serves(d);
	}
}

/* A meta larger than max-meta-kib: a frame error (PPRPC_ETOOBIG) naming the
 * setting; that connection is closed, others are served. */
static void test_meta_size(void **state)
{
	struct tdaemon *d = *state;
	uint8_t *meta = calloc(1, 5000);
	struct wire_reply r;
	int fd = traw_connect(d);

	assert_non_null(meta);
	assert_true(fd >= 0);
	assert_int_equal(wire_hello(fd), 0);
	assert_int_equal(wire_send_rawmeta(fd, MSG_GRAPH_CREATE, 2, meta, 5000, NULL, 0), 0);
	assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_ETOOBIG);
	assert_non_null(strstr(r.msg, "max-meta-kib limit 4096"));
	wire_reply_free(&r);
	assert_int_equal(wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL), 0);
	close(fd);
	free(meta);
	assert_serves(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_buffers),
		cmocka_unit_test(test_conn_bytes),
		cmocka_unit_test(test_graphs),
		cmocka_unit_test(test_inflight),
		cmocka_unit_test(test_meta_size),
	};

	return cmocka_run_group_tests_name("integration_limits", tests, group_setup, group_teardown);
}

/*
 * tests/integration/test_badinput.c — hostile and malformed input against a
 * real pprpcd on loopback.
 *
 * The contract (DESIGN.md "Wire protocol", CONVENTIONS.md "Hostile input"):
 *   - a protocol-level error (bad magic, version, flags, oversize lengths,
 *     HELLO missing) is answered with an error reply where possible and the
 *     connection is closed;
 *   - a request-level error (unknown type, malformed meta, bad handle, bad
 *     region, invalid graph) is answered with an error reply and the
 *     connection keeps working;
 *   - nothing crashes the daemon, and a vanished client leaks nothing.
 *
 * Every test ends by checking that the daemon is alive and serves a normal
 * client (allocate, write, read back, compare, free).  Leak checks compare
 * STATS (connections, device buffers, allocated bytes) against a baseline
 * taken before the test, waiting for asynchronous close processing.
 *
 * One daemon per group (setup/teardown); teardown also requires a clean
 * exit on SIGTERM, so a daemon that crashed or wedged fails the group.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "tests/integration/harness.h"
#include "tests/integration/tracked.h"
#include "tests/integration/wire.h"

#define MIB (1024ull * 1024ull)
/* The daemons of this file accept at most this much bulk per frame. */
#define MAX_BULK_MIB 64
#define SETTLE_MS 10000

/* ---- daemon per group ------------------------------------------------------ */

static int group_setup(void **state)
{
	/* Per-connection limits as high as the daemon's: the limit tests
	 * below exercise the global tables (test_limits.c the others). */
	static const char *const extra[] = { "--max-bulk-mib", "64", "--threads", "2", "--max-conn-buffers", "65536",
					     "--max-conn-graphs", "4096", NULL };
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
	int alive = tdaemon_alive(d);
	int st = tdaemon_stop(d);

	free(d);
	if (!alive || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "pprpcd did not survive the group or did not exit cleanly (alive %d, status 0x%x)\n",
			alive, st);
		return -1;
	}
	return 0;
}

/* ---- per-test cleanup: tests/integration/tracked.h ------------------------------ */

/* ---- normal clients --------------------------------------------------------- */

static pprpc_client *client_open(struct tdaemon *d)
{
	return tclient_open(d, "badinput", WIRE_TIMEOUT_MS);
}

/* ---- stats snapshots ----------------------------------------------------------- */

struct snap {
	uint64_t nconn;
	uint64_t buffers;
	uint64_t allocated;
	uint64_t protocol_errors;
	uint64_t request_errors;
	uint64_t connections_total;
};

static void snap_get(pprpc_client *c, struct snap *s)
{
	pprpc_stats *st = NULL;

	assert_int_equal(pprpc_stats_get(c, &st), 0);
	assert_non_null(st);
	assert_true(pprpc_stats_count(st, "devices") >= 1);
	memset(s, 0, sizeof(*s));
	s->nconn = (uint64_t)pprpc_stats_count(st, "connections");
	for (int i = 0; i < pprpc_stats_count(st, "devices"); i++) {
		s->buffers += pprpc_stats_u64(st, "devices", i, "buffers");
		s->allocated += pprpc_stats_u64(st, "devices", i, "allocated_bytes");
	}
	s->protocol_errors = pprpc_stats_u64(st, NULL, 0, "protocol_errors");
	s->request_errors = pprpc_stats_u64(st, NULL, 0, "request_errors");
	s->connections_total = pprpc_stats_u64(st, NULL, 0, "connections_total");
	pprpc_stats_free(st);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait until connections, buffers and allocated bytes are back at base (a
 * closed connection is cleaned up asynchronously), then assert they are. */
static void wait_baseline(pprpc_client *c, const struct snap *base, struct snap *now)
{
	int64_t deadline = wire_now_ms() + SETTLE_MS;

	for (;;) {
		snap_get(c, now);
		if (now->nconn == base->nconn && now->buffers == base->buffers &&
		    now->allocated == base->allocated)
			break;
		if (wire_now_ms() > deadline)
			break;
		sleep_ms(20);
	}
	if (now->nconn != base->nconn || now->buffers != base->buffers || now->allocated != base->allocated)
		fprintf(stderr,
			"not back to baseline after %d ms: connections %" PRIu64 " (was %" PRIu64 "), buffers %" PRIu64
			" (was %" PRIu64 "), allocated %" PRIu64 " (was %" PRIu64 ")\n",
			SETTLE_MS, now->nconn, base->nconn, now->buffers, base->buffers, now->allocated,
			base->allocated);
	assert_int_equal(now->nconn, base->nconn);
	assert_int_equal(now->buffers, base->buffers);
	assert_int_equal(now->allocated, base->allocated);
}

/* ---- raw connections ------------------------------------------------------------- */

static int raw_open(struct tdaemon *d)
{
	int fd = traw_connect(d);

	assert_true(fd >= 0);
	track_fd(fd);
	return fd;
}

static int raw_open_hello(struct tdaemon *d)
{
	int fd = raw_open(d);

	assert_int_equal(wire_hello(fd), 0);
	return fd;
}

/* Read the next reply; it must be an error reply with `code` answering
 * (type, req_id). */
static void expect_error(int fd, uint16_t type, uint64_t req_id, int code)
{
	struct wire_reply r;
	int rc = wire_read_reply(fd, &r, WIRE_TIMEOUT_MS);

	if (rc != 0)
		fprintf(stderr, "expected an error reply %d (%s), reading failed: %d\n", code,
			pprpc_strerror(code), rc);
	assert_int_equal(rc, 0);
	if (!r.is_error || r.code != code)
		fprintf(stderr, "expected error %d (%s) for type %u, got %s code %d: %s\n", code,
			pprpc_strerror(code), type, r.is_error ? "error" : "success", r.code, r.msg);
	assert_true(r.is_error);
	assert_int_equal(r.code, code);
	assert_int_equal(r.h.bulk_len, 0);
	assert_int_equal(r.h.type, type);
	assert_int_equal(r.h.req_id, req_id);
	assert_int_equal(r.command, req_id);
	assert_true(r.msg[0] != '\0');  /* every error carries a message */
	wire_reply_free(&r);
}

/* Read the next reply; it must be a success reply answering (type, req_id). */
static void expect_ok(int fd, uint16_t type, uint64_t req_id)
{
	struct wire_reply r;
	int rc = wire_read_reply(fd, &r, WIRE_TIMEOUT_MS);

	assert_int_equal(rc, 0);
	if (r.is_error)
		fprintf(stderr, "expected success for type %u, got error %d: %s\n", type, r.code, r.msg);
	assert_false(r.is_error);
	assert_int_equal(r.h.type, type);
	assert_int_equal(r.h.req_id, req_id);
	wire_reply_free(&r);
}

/* The daemon closes the connection: orderly EOF, no further bytes. */
static void expect_closed(int fd)
{
	uint64_t extra = 0;
	int rc = wire_wait_closed(fd, WIRE_TIMEOUT_MS, &extra);

	if (rc != 0)
		fprintf(stderr, "expected an orderly close, got %d (%s)\n", rc,
			rc == -ETIMEDOUT ? "still open" : strerror(-rc));
	assert_int_equal(rc, 0);
	assert_int_equal(extra, 0);
}

/* The raw connection still works: a STATS request on it succeeds. */
static void expect_alive_conn(int fd, uint64_t req_id)
{
	Pprpc__Stats s = PPRPC__STATS__INIT;
	struct wire_reply r;
	ProtobufCMessage *m = NULL;

	assert_int_equal(wire_call(fd, MSG_STATS, req_id, &s.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.type, MSG_STATS);
	assert_int_equal(r.h.req_id, req_id);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__stats_reply__descriptor, &m), 0);
	assert_true(((const Pprpc__StatsReply *)m)->n_devices >= 1);
	meta_free(m);
	wire_reply_free(&r);
}

static uint64_t raw_buffer_alloc(int fd, uint64_t req_id, uint64_t size)
{
	Pprpc__BufferAlloc a = PPRPC__BUFFER_ALLOC__INIT;
	struct wire_reply r;
	ProtobufCMessage *m = NULL;
	uint64_t h;

	a.device = 0;
	a.size = size;
	assert_int_equal(wire_call(fd, MSG_BUFFER_ALLOC, req_id, &a.base, NULL, 0, &r), 0);
	if (r.is_error)
		fprintf(stderr, "BUFFER_ALLOC %" PRIu64 ": %d %s\n", size, r.code, r.msg);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__buffer_alloc_reply__descriptor, &m), 0);
	h = ((const Pprpc__BufferAllocReply *)m)->buffer;
	assert_true(h != 0);
	meta_free(m);
	wire_reply_free(&r);
	return h;
}

/* Send a header with the given fields (and nothing else), expect an error
 * reply with `code` (echoing req_id when echo_id), then an orderly close. */
static void hdr_refused(struct tdaemon *d, int hello, const char magic[4], uint16_t version, uint16_t type,
			uint32_t flags, uint32_t meta_len, uint64_t bulk_len, uint64_t req_id, int code,
			uint64_t want_id)
{
	uint8_t hdr[FRAME_HDR_SIZE];
	struct wire_reply r;
	int fd = hello ? raw_open_hello(d) : raw_open(d);

	wire_hdr(hdr, version, type, flags, meta_len, bulk_len, req_id);
	if (magic)
		memcpy(hdr, magic, 4);
	assert_int_equal(wire_send_all(fd, hdr, sizeof(hdr), WIRE_TIMEOUT_MS), 0);
	assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
	if (!r.is_error || r.code != code)
		fprintf(stderr, "header refusal: expected %d, got %s %d: %s\n", code,
			r.is_error ? "error" : "success", r.code, r.msg);
	assert_true(r.is_error);
	assert_int_equal(r.code, code);
	assert_int_equal(r.h.req_id, want_id);
	assert_true(r.msg[0] != '\0');
	wire_reply_free(&r);
	expect_closed(fd);
	raw_close(fd);
}

/* ======================================================================== */
/* 1-4: header-level protocol errors                                         */
/* ======================================================================== */

static void test_bad_magic(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap before, after;

	snap_get(c, &before);
	/* Before and after HELLO; the request id cannot be trusted without the
	 * magic, so the reply carries 0. */
	hdr_refused(d, 0, "XPR1", 1, MSG_HELLO, 0, 0, 0, 77, PPRPC_EPROTO, 0);
	hdr_refused(d, 1, "PPR2", 1, MSG_STATS, 0, 0, 0, 78, PPRPC_EPROTO, 0);
	hdr_refused(d, 1, "\0\0\0\0", 0, 0, 0, 0, 0, 0, PPRPC_EPROTO, 0);
	/* An HTTP request, the classic wrong client. */
	{
		static const char http[] = "GET / HTTP/1.1\r\nHost: pprpc.test\r\nAccept: */*\r\n\r\n";
		int fd = raw_open(d);
		struct wire_reply r;

		assert_int_equal(wire_send_all(fd, http, sizeof(http) - 1, WIRE_TIMEOUT_MS), 0);
		assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
		assert_true(r.is_error);
		assert_int_equal(r.code, PPRPC_EPROTO);
		wire_reply_free(&r);
		assert_true(wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL) != -ETIMEDOUT);
		raw_close(fd);
	}
	wait_baseline(c, &before, &after);
	assert_true(after.protocol_errors >= before.protocol_errors + 4);
	client_close(c);
	assert_serves(d, "badinput");
}

static void test_wrong_version(void **state)
{
	struct tdaemon *d = *state;

	hdr_refused(d, 0, NULL, 2, MSG_HELLO, 0, 0, 0, 0x1234, PPRPC_EVERSION, 0x1234);
	hdr_refused(d, 1, NULL, 2, MSG_STATS, 0, 0, 0, 0x55, PPRPC_EVERSION, 0x55);
	hdr_refused(d, 0, NULL, 0, MSG_HELLO, 0, 0, 0, 9, PPRPC_EVERSION, 9);
	hdr_refused(d, 0, NULL, 0xffff, MSG_HELLO, 0, 0, 0, 10, PPRPC_EVERSION, 10);
	assert_serves(d, "badinput");
}

/* Flags a request may not carry, and a bulk flag that disagrees with the
 * bulk length: the stream cannot be trusted, EPROTO and close. */
static void test_bad_flags(void **state)
{
	struct tdaemon *d = *state;

	hdr_refused(d, 1, NULL, 1, MSG_STATS, 0x80, 0, 0, 5, PPRPC_EPROTO, 5);
	hdr_refused(d, 1, NULL, 1, MSG_STATS, FRAME_F_REPLY, 0, 0, 6, PPRPC_EPROTO, 6);
	hdr_refused(d, 1, NULL, 1, MSG_STATS, FRAME_F_ERROR, 0, 0, 7, PPRPC_EPROTO, 7);
	/* bulk flag without bulk, bulk without the flag */
	hdr_refused(d, 1, NULL, 1, MSG_TENSOR_SET, FRAME_F_BULK, 0, 0, 8, PPRPC_EPROTO, 8);
	hdr_refused(d, 1, NULL, 1, MSG_TENSOR_SET, 0, 0, 16, 9, PPRPC_EPROTO, 9);
	assert_serves(d, "badinput");
}

static void test_oversize_meta(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap before, after;

	snap_get(c, &before);
	hdr_refused(d, 1, NULL, 1, MSG_GRAPH_CREATE, 0, 2u << 20, 0, 11, PPRPC_ETOOBIG, 11);
	hdr_refused(d, 1, NULL, 1, MSG_GRAPH_CREATE, 0, PPRPC_MAX_META + 1, 0, 12, PPRPC_ETOOBIG, 12);
	hdr_refused(d, 1, NULL, 1, MSG_GRAPH_CREATE, 0, UINT32_MAX, 0, 13, PPRPC_ETOOBIG, 13);
	/* Before HELLO the limits are checked first as well. */
	hdr_refused(d, 0, NULL, 1, MSG_HELLO, 0, UINT32_MAX, 0, 14, PPRPC_ETOOBIG, 14);
	wait_baseline(c, &before, &after);
	client_close(c);
	assert_serves(d, "badinput");
}

static void test_oversize_bulk(void **state)
{
	struct tdaemon *d = *state;

	/* Over the configured maximum (--max-bulk-mib 64). */
	hdr_refused(d, 1, NULL, 1, MSG_TENSOR_SET, FRAME_F_BULK, 0, (MAX_BULK_MIB + 1) * MIB, 21,
		    PPRPC_ETOOBIG, 21);
	hdr_refused(d, 1, NULL, 1, MSG_TENSOR_SET, FRAME_F_BULK, 0, MAX_BULK_MIB * MIB + 1, 22,
		    PPRPC_ETOOBIG, 22);
	hdr_refused(d, 1, NULL, 1, MSG_TENSOR_SET, FRAME_F_BULK, 0, UINT64_MAX, 23, PPRPC_ETOOBIG, 23);
	/* A type that never carries bulk, with an enormous bulk. */
	hdr_refused(d, 1, NULL, 1, MSG_STATS, FRAME_F_BULK, 0, UINT64_MAX / 2, 24, PPRPC_ETOOBIG, 24);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 5: truncated frames                                                        */
/* ======================================================================== */

static void test_truncated(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap base, now;
	uint8_t hdr[FRAME_HDR_SIZE];
	int fd;

	snap_get(c, &base);

	/* (a) half a header, then close */
	fd = raw_open(d);
	wire_hdr(hdr, 1, MSG_HELLO, 0, 10, 0, 1);
	assert_int_equal(wire_send_all(fd, hdr, FRAME_HDR_SIZE / 2, WIRE_TIMEOUT_MS), 0);
	raw_close(fd);
	fd = raw_open_hello(d);
	assert_int_equal(wire_send_all(fd, hdr, 5, WIRE_TIMEOUT_MS), 0);
	raw_close(fd);
	wait_baseline(c, &base, &now);

	/* (b) header + part of the meta (a 1 MiB meta announced: the reader may
	 * reserve it, and must release it), then close */
	{
		uint8_t junk[1000];

		memset(junk, 0x12, sizeof(junk));
		fd = raw_open_hello(d);
		wire_hdr(hdr, 1, MSG_GRAPH_CREATE, 0, PPRPC_MAX_META, 0, 2);
		assert_int_equal(wire_send_parts(fd, hdr, junk, sizeof(junk), NULL, 0), 0);
		raw_close(fd);
		fd = raw_open_hello(d);
		wire_hdr(hdr, 1, MSG_BUFFER_ALLOC, 0, 100, 0, 2);
		assert_int_equal(wire_send_parts(fd, hdr, junk, 10, NULL, 0), 0);
		raw_close(fd);
	}
	wait_baseline(c, &base, &now);

	/* (c) header + meta + part of the bulk into a buffer of this
	 * connection, then close: the buffer (and the reference the pending
	 * bulk holds on it) must be released. */
	{
		const uint64_t bsize = 8 * MIB;
		Pprpc__TensorSet ts = PPRPC__TENSOR_SET__INIT;
		uint8_t meta[64], *part = calloc(1, MIB);
		size_t mlen;
		uint64_t b;

		assert_non_null(part);
		fd = raw_open_hello(d);
		b = raw_buffer_alloc(fd, 2, bsize);
		snap_get(c, &now);
		assert_int_equal(now.nconn, base.nconn + 1);
		assert_int_equal(now.buffers, base.buffers + 1);
		assert_int_equal(now.allocated, base.allocated + bsize);

		ts.buffer = b;
		ts.offset = 0;
		ts.size = bsize;
		mlen = meta_pack(&ts.base, meta);
		wire_hdr(hdr, 1, MSG_TENSOR_SET, FRAME_F_BULK, (uint32_t)mlen, bsize, 3);
		assert_int_equal(wire_send_parts(fd, hdr, meta, mlen, part, MIB), 0);
		/* Let the daemon take the partial bulk in before the close. */
		sleep_ms(50);
		raw_close(fd);
		wait_baseline(c, &base, &now);

		/* (d) the same with a second connection that also left a
		 * half-received request on a refused region (bulk discarded). */
		fd = raw_open_hello(d);
		b = raw_buffer_alloc(fd, 2, 4096);
		ts.buffer = b;
		ts.offset = 1 << 20; /* outside: refused, bulk read and discarded */
		ts.size = MIB;
		mlen = meta_pack(&ts.base, meta);
		wire_hdr(hdr, 1, MSG_TENSOR_SET, FRAME_F_BULK, (uint32_t)mlen, MIB, 3);
		assert_int_equal(wire_send_parts(fd, hdr, meta, mlen, part, MIB / 2), 0);
		sleep_ms(20);
		raw_close(fd);
		free(part);
	}
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 6-8: unknown types, HELLO ordering and version                             */
/* ======================================================================== */

static void test_unknown_type(void **state)
{
	struct tdaemon *d = *state;
	int fd = raw_open_hello(d);
	static const uint8_t meta[] = { 0x08, 0x01, 0x10, 0x02 };
	uint8_t bulk[3000];

	memset(bulk, 0xab, sizeof(bulk));
	assert_int_equal(wire_send_rawmeta(fd, 999, 100, NULL, 0, NULL, 0), 0);
	expect_error(fd, 999, 100, PPRPC_EUNSUPP);
	expect_alive_conn(fd, 101);

	/* With a meta and a bulk: both are consumed, the stream stays in sync. */
	assert_int_equal(wire_send_rawmeta(fd, 200, 102, meta, sizeof(meta), bulk, sizeof(bulk)), 0);
	expect_error(fd, 200, 102, PPRPC_EUNSUPP);
	expect_alive_conn(fd, 103);

	/* Type 0, the largest type, and types past the last one served. */
	assert_int_equal(wire_send_rawmeta(fd, MSG_NONE, 104, NULL, 0, NULL, 0), 0);
	expect_error(fd, MSG_NONE, 104, PPRPC_EUNSUPP);
	assert_int_equal(wire_send_rawmeta(fd, 0xffff, 105, meta, sizeof(meta), NULL, 0), 0);
	expect_error(fd, 0xffff, 105, PPRPC_EUNSUPP);
	assert_int_equal(wire_send_rawmeta(fd, MSG_TYPE_COUNT + 100, 106, NULL, 0, NULL, 0), 0);
	expect_error(fd, MSG_TYPE_COUNT + 100, 106, PPRPC_EUNSUPP);
	assert_int_equal(wire_send_rawmeta(fd, MSG_TYPE_COUNT, 107, NULL, 0, NULL, 0), 0);
	expect_error(fd, MSG_TYPE_COUNT, 107, PPRPC_EUNSUPP);

	/* Pipelined: several bad requests back to back, then a good one; the
	 * replies come in order. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(wire_send_rawmeta(fd, (uint16_t)(300 + i), 200 + i, meta, sizeof(meta),
						   bulk, (size_t)i * 500), 0);
	for (int i = 0; i < 5; i++)
		expect_error(fd, (uint16_t)(300 + i), 200 + i, PPRPC_EUNSUPP);
	expect_alive_conn(fd, 300);
	raw_close(fd);
	assert_serves(d, "badinput");
}

static void test_request_before_hello(void **state)
{
	struct tdaemon *d = *state;
	Pprpc__Stats s = PPRPC__STATS__INIT;
	Pprpc__BufferAlloc a = PPRPC__BUFFER_ALLOC__INIT;
	int fd;

	fd = raw_open(d);
	assert_int_equal(wire_send_msg(fd, MSG_STATS, 31, &s.base, NULL, 0), 0);
	expect_error(fd, MSG_STATS, 31, PPRPC_EPROTO);
	expect_closed(fd);
	raw_close(fd);

	fd = raw_open(d);
	a.size = 4096;
	assert_int_equal(wire_send_msg(fd, MSG_BUFFER_ALLOC, 32, &a.base, NULL, 0), 0);
	expect_error(fd, MSG_BUFFER_ALLOC, 32, PPRPC_EPROTO);
	expect_closed(fd);
	raw_close(fd);

	/* An unknown type before HELLO is still "HELLO first". */
	fd = raw_open(d);
	assert_int_equal(wire_send_rawmeta(fd, 999, 33, NULL, 0, NULL, 0), 0);
	expect_error(fd, 999, 33, PPRPC_EPROTO);
	expect_closed(fd);
	raw_close(fd);
	assert_serves(d, "badinput");
}

static void test_hello_version(void **state)
{
	struct tdaemon *d = *state;
	int fd;

	fd = raw_open(d);
	assert_int_equal(wire_hello_version(fd, 2), PPRPC_EVERSION);
	expect_closed(fd);
	raw_close(fd);

	fd = raw_open(d);
	assert_int_equal(wire_hello_version(fd, 0), PPRPC_EVERSION);
	expect_closed(fd);
	raw_close(fd);

	fd = raw_open(d);
	assert_int_equal(wire_hello_version(fd, UINT32_MAX), PPRPC_EVERSION);
	expect_closed(fd);
	raw_close(fd);

	/* A second HELLO is refused; the connection stays usable. */
	fd = raw_open_hello(d);
	{
		Pprpc__Hello h = PPRPC__HELLO__INIT;

		h.proto_version = 1;
		assert_int_equal(wire_send_msg(fd, MSG_HELLO, 40, &h.base, NULL, 0), 0);
		expect_error(fd, MSG_HELLO, 40, PPRPC_EPROTO);
		expect_alive_conn(fd, 41);
	}
	raw_close(fd);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 9-10: handles and regions through the client API                           */
/* ======================================================================== */

/* Every buffer-taking call with handle h fails with EHANDLE; c stays usable
 * (checked on buffer ok, whose bytes must be unchanged). */
static void assert_bad_buffer_handle(pprpc_client *c, pprpc_buffer h, pprpc_buffer ok)
{
	uint8_t data[64], back[64];

	memset(data, 0x5a, sizeof(data));
	assert_int_equal(pprpc_buffer_free(c, h), PPRPC_EHANDLE);
	assert_true(pprpc_last_error(c)[0] != '\0');
	assert_int_equal(pprpc_buffer_clear(c, h, 1), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_get(c, h, 0, back, sizeof(back)), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_set(c, h, 0, data, sizeof(data)), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_set(c, h, 0, data, 0), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_copy(c, h, 0, ok, 0, 16), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_copy(c, ok, 0, h, 0, 16), PPRPC_EHANDLE);
	assert_int_equal(pprpc_tensor_copy(c, h, 0, h, 0, 16), PPRPC_EHANDLE);
	/* still usable, and the good buffer untouched (pattern i & 0xff) */
	assert_int_equal(pprpc_tensor_get(c, ok, 0, back, sizeof(back)), 0);
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], (uint8_t)i);
}

static void fill_pattern(pprpc_client *c, pprpc_buffer b, size_t n)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)i;
	assert_int_equal(pprpc_tensor_set(c, b, 0, p, n), 0);
	free(p);
}

static void check_pattern(pprpc_client *c, pprpc_buffer b, size_t n)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	assert_int_equal(pprpc_tensor_get(c, b, 0, p, n), 0);
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)i) {
			fprintf(stderr, "buffer byte %zu is 0x%02x, expected 0x%02x\n", i, p[i], (uint8_t)i);
			fail();
		}
	free(p);
}

/* A valid graph: dst = src * 2 over f32[n] tensors in two buffers. */
static int make_scale_graph(pprpc_client *c, pprpc_buffer src, pprpc_buffer dst, int64_t n, pprpc_graph *out)
{
	pprpc_graph_builder *gb = NULL;
	pprpc_tensor ts = pprpc_tensor_make(src, 0, PPRPC_F32, n, 1, 1, 1);
	pprpc_tensor td = pprpc_tensor_make(dst, 0, PPRPC_F32, n, 1, 1, 1);
	int a, b, rc;

	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	a = pprpc_gb_tensor(gb, &ts);
	b = pprpc_gb_tensor(gb, &td);
	assert_true(a >= 0 && b >= 0);
	assert_int_equal(pprpc_gb_scale(gb, a, 2.0f, 0.0f, b), b);
	rc = pprpc_graph_create(c, 0, gb, out);
	pprpc_graph_builder_free(gb);
	return rc;
}

static void test_bad_handles(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d), *c2;
	pprpc_buffer ok = { 0 }, stale = { 0 }, fresh = { 0 }, other = { 0 }, gsrc = { 0 }, gdst = { 0 };
	pprpc_graph g = { 0 };
	struct snap base, now;
	uint8_t back[64];

	snap_get(c, &base);
	c2 = client_open(d);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &ok), 0);
	fill_pattern(c, ok, 4096);

	/* random and structurally odd handles */
	{
		const pprpc_buffer bad[] = {
			{ 0 },
			{ 0x0123456789abcdefull },
			{ UINT64_MAX },
			{ ok.id ^ (1ull << 32) },                               /* wrong generation */
			{ (ok.id & ~0xffffffffull) | 0xffffffffull },          /* slot far past the table */
			{ (ok.id & 0x00ffffffffffffffull) | (2ull << 56) },    /* right slot, graph kind */
			{ (ok.id & 0x00ffffffffffffffull) | (0xffull << 56) }, /* unknown kind */
			{ ok.id & 0xffffffffull },                             /* no kind, no generation */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			assert_bad_buffer_handle(c, bad[i], ok);
	}

	/* stale: freed, then reused slot with a new generation */
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &stale), 0);
	assert_int_equal(pprpc_buffer_free(c, stale), 0);
	assert_bad_buffer_handle(c, stale, ok);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &fresh), 0);
	assert_true(fresh.id != stale.id);
	assert_bad_buffer_handle(c, stale, ok);
	assert_int_equal(pprpc_tensor_get(c, fresh, 0, back, sizeof(back)), 0); /* zeroed, usable */
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], 0);
	assert_int_equal(pprpc_buffer_free(c, fresh), 0);
	assert_int_equal(pprpc_buffer_free(c, fresh), PPRPC_EHANDLE); /* double free */

	/* a graph handle used as a buffer, a buffer handle used as a graph
	 * (the types keep a caller from doing this by mistake; the daemon
	 * must still refuse it) */
	assert_int_equal(pprpc_buffer_alloc(c, 0, 256, &gsrc), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 256, &gdst), 0);
	assert_int_equal(make_scale_graph(c, gsrc, gdst, 64, &g), 0);
	assert_bad_buffer_handle(c, (pprpc_buffer){ g.id }, ok);
	assert_int_equal(pprpc_graph_run(c, (pprpc_graph){ ok.id }), PPRPC_EHANDLE);
	assert_int_equal(pprpc_graph_free(c, (pprpc_graph){ ok.id }), PPRPC_EHANDLE);
	assert_int_equal(pprpc_graph_run(c, (pprpc_graph){ 0x0123456789abcdefull }), PPRPC_EHANDLE);
	assert_int_equal(pprpc_graph_run(c, g), 0);
	assert_int_equal(pprpc_graph_free(c, g), 0);
	assert_int_equal(pprpc_graph_run(c, g), PPRPC_EHANDLE);  /* stale graph */
	assert_int_equal(pprpc_graph_free(c, g), PPRPC_EHANDLE);

	/* another connection's buffer: refused, and left intact for its owner */
	assert_int_equal(pprpc_buffer_alloc(c2, 0, 4096, &other), 0);
	fill_pattern(c2, other, 4096);
	assert_bad_buffer_handle(c, other, ok);
	{
		pprpc_graph g2 = { 0 };

		assert_int_equal(make_scale_graph(c, other, gdst, 64, &g2), PPRPC_EHANDLE);
		assert_int_equal(make_scale_graph(c, gsrc, other, 64, &g2), PPRPC_EHANDLE);
	}
	check_pattern(c2, other, 4096);
	/* and the other way round */
	assert_bad_buffer_handle(c2, ok, other);
	check_pattern(c, ok, 4096);

	assert_int_equal(pprpc_buffer_free(c2, other), 0);
	client_close(c2);
	assert_int_equal(pprpc_buffer_free(c, gsrc), 0);
	assert_int_equal(pprpc_buffer_free(c, gdst), 0);
	assert_int_equal(pprpc_buffer_free(c, ok), 0);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

static void test_bad_regions(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	pprpc_buffer b = { 0 }, b2 = { 0 };
	const uint64_t n = 4096;
	uint8_t tmp[256];
	const struct {
		uint64_t off, size;
	} bad[] = {
		{ n + 1, 1 },                 /* offset beyond the end */
		{ n + 1, 0 },
		{ 1ull << 40, 16 },
		{ n - 100, 200 },             /* size beyond the end */
		{ 0, n + 1 },
		{ n, 1 },
		{ UINT64_MAX - 7, 16 },       /* offset + size wraps */
		{ UINT64_MAX, 1 },
		{ 16, UINT64_MAX - 7 },       /* size wraps (GET/COPY only: no bulk) */
	};

	assert_int_equal(pprpc_buffer_alloc(c, 0, n, &b), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, n, &b2), 0);
	fill_pattern(c, b, n);
	memset(tmp, 0xee, sizeof(tmp));

	/* the edges themselves are fine */
	assert_int_equal(pprpc_tensor_get(c, b, n - 1, tmp, 1), 0);
	assert_int_equal(tmp[0], (uint8_t)(n - 1));
	assert_int_equal(pprpc_tensor_get(c, b, n, tmp, 0), 0);
	assert_int_equal(pprpc_tensor_set(c, b, n, tmp, 0), 0);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t off = bad[i].off, size = bad[i].size;

		if (size <= sizeof(tmp)) {
			/* SET sends `size` bytes of bulk: the daemon reads and
			 * discards them, and the stream stays in sync. */
			memset(tmp, 0xee, sizeof(tmp));
			assert_int_equal(pprpc_tensor_set(c, b, off, tmp, size), PPRPC_ERANGE);
			assert_int_equal(pprpc_tensor_get(c, b, off, tmp, size), PPRPC_ERANGE);
		} else {
			/* A GET whose size the test cannot hold goes raw below;
			 * COPY carries no bulk either way. */
		}
		assert_int_equal(pprpc_tensor_copy(c, b, off, b2, 0, size), PPRPC_ERANGE);
		assert_int_equal(pprpc_tensor_copy(c, b, 0, b2, off, size), PPRPC_ERANGE);
	}
	assert_int_equal(pprpc_tensor_copy(c, b, 0, b2, 1, n), PPRPC_ERANGE);
	assert_int_equal(pprpc_tensor_copy(c, b, 1, b2, 0, n), PPRPC_ERANGE);
	/* the contents did not change */
	check_pattern(c, b, n);

	/* Huge GET sizes over a raw connection (the reply would not fit a
	 * test buffer if the daemon got it wrong). */
	{
		int fd = raw_open_hello(d);
		uint64_t rb = raw_buffer_alloc(fd, 2, n);
		Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
		uint64_t id = 10;

		g.buffer = rb;
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			g.offset = bad[i].off;
			g.size = bad[i].size;
			assert_int_equal(wire_send_msg(fd, MSG_TENSOR_GET, id, &g.base, NULL, 0), 0);
			expect_error(fd, MSG_TENSOR_GET, id, PPRPC_ERANGE);
			id++;
		}
		g.offset = 0;
		g.size = UINT64_MAX;
		assert_int_equal(wire_send_msg(fd, MSG_TENSOR_GET, id, &g.base, NULL, 0), 0);
		expect_error(fd, MSG_TENSOR_GET, id, PPRPC_ERANGE);
		expect_alive_conn(fd, ++id);
		raw_close(fd);
	}
	/* a GET larger than the bulk limit in a buffer that holds it */
	{
		pprpc_buffer big = { 0 };

		assert_int_equal(pprpc_buffer_alloc(c, 0, (MAX_BULK_MIB + 1) * MIB, &big), 0);
		{
			int fd = raw_open_hello(d);
			uint64_t rb = raw_buffer_alloc(fd, 2, (MAX_BULK_MIB + 1) * MIB);
			Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;

			g.buffer = rb;
			g.size = (MAX_BULK_MIB + 1) * MIB;
			assert_int_equal(wire_send_msg(fd, MSG_TENSOR_GET, 3, &g.base, NULL, 0), 0);
			expect_error(fd, MSG_TENSOR_GET, 3, PPRPC_ETOOBIG);
			expect_alive_conn(fd, 4);
			raw_close(fd);
		}
		assert_int_equal(pprpc_buffer_free(c, big), 0);
	}
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	assert_int_equal(pprpc_buffer_free(c, b2), 0);
	client_close(c);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 11-12: bulk/meta disagreement and malformed metas                          */
/* ======================================================================== */

static void test_bulk_mismatch(void **state)
{
	struct tdaemon *d = *state;
	int fd = raw_open_hello(d);
	uint64_t b = raw_buffer_alloc(fd, 2, 4096);
	Pprpc__TensorSet ts = PPRPC__TENSOR_SET__INIT;
	Pprpc__TensorGet tg = PPRPC__TENSOR_GET__INIT;
	Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;
	uint8_t bulk[256];
	struct wire_reply r;

	memset(bulk, 0x77, sizeof(bulk));
	ts.buffer = b;

	/* meta says 100, bulk is 64 */
	ts.size = 100;
	assert_int_equal(wire_send_msg(fd, MSG_TENSOR_SET, 10, &ts.base, bulk, 64), 0);
	expect_error(fd, MSG_TENSOR_SET, 10, PPRPC_EPROTO);
	expect_alive_conn(fd, 11);
	/* meta says 64, bulk is 200 */
	ts.size = 64;
	assert_int_equal(wire_send_msg(fd, MSG_TENSOR_SET, 12, &ts.base, bulk, 200), 0);
	expect_error(fd, MSG_TENSOR_SET, 12, PPRPC_EPROTO);
	expect_alive_conn(fd, 13);
	/* meta says 100, no bulk at all */
	ts.size = 100;
	assert_int_equal(wire_send_msg(fd, MSG_TENSOR_SET, 14, &ts.base, NULL, 0), 0);
	expect_error(fd, MSG_TENSOR_SET, 14, PPRPC_EPROTO);
	expect_alive_conn(fd, 15);
	/* a type that takes no bulk, with bulk */
	ba.size = 4096;
	assert_int_equal(wire_send_msg(fd, MSG_BUFFER_ALLOC, 16, &ba.base, bulk, sizeof(bulk)), 0);
	expect_error(fd, MSG_BUFFER_ALLOC, 16, PPRPC_EPROTO);
	assert_int_equal(wire_send_msg(fd, MSG_STATS, 17, NULL, bulk, 10), 0);
	expect_error(fd, MSG_STATS, 17, PPRPC_EPROTO);
	expect_alive_conn(fd, 18);

	/* none of the discarded bulk reached the buffer */
	tg.buffer = b;
	tg.size = 4096;
	assert_int_equal(wire_call(fd, MSG_TENSOR_GET, 19, &tg.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(r.h.bulk_len, 4096);
	assert_non_null(r.bulk);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(r.bulk[i], 0);
	wire_reply_free(&r);
	/* and a matching SET works on the same connection */
	ts.size = 64;
	assert_int_equal(wire_send_msg(fd, MSG_TENSOR_SET, 20, &ts.base, bulk, 64), 0);
	expect_ok(fd, MSG_TENSOR_SET, 20);
	raw_close(fd);
	assert_serves(d, "badinput");
}

static void test_malformed_meta(void **state)
{
	struct tdaemon *d = *state;
	int fd = raw_open_hello(d);
	static const uint8_t ff[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t trunc_varint[] = { 0x10, 0x80 };
	static const uint8_t short_len[] = { 0x0a, 0x05, 'a' };
	static const uint8_t field0[] = { 0x00, 0x01 };
	static const uint8_t wiretype7[] = { 0x0f, 0x01 };
	static const uint8_t graph_badlen[] = { 0x12, 0x7f, 0x00 };
	static const uint8_t graph_nested_bad[] = { 0x12, 0x02, 0x10, 0x80 };
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = {
		{ ff, sizeof(ff) },
		{ trunc_varint, sizeof(trunc_varint) },
		{ short_len, sizeof(short_len) },
		{ field0, sizeof(field0) },
		{ wiretype7, sizeof(wiretype7) },
	};
	const uint16_t types[] = { MSG_BUFFER_ALLOC, MSG_BUFFER_FREE, MSG_TENSOR_GET, MSG_TENSOR_COPY,
				   MSG_GRAPH_CREATE, MSG_GRAPH_RUN, MSG_FENCE, MSG_STATS, MSG_HELLO };
	uint64_t id = 100;
	uint8_t bulk[512];

	memset(bulk, 0x42, sizeof(bulk));
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			assert_int_equal(wire_send_rawmeta(fd, types[t], id, bad[i].p, bad[i].n, NULL, 0), 0);
			expect_error(fd, types[t], id, PPRPC_EPROTO);
			id++;
		}
	expect_alive_conn(fd, id++);

	/* GraphCreate with a tensor whose length runs past the meta, and a
	 * nested message with a broken field */
	assert_int_equal(wire_send_rawmeta(fd, MSG_GRAPH_CREATE, id, graph_badlen, sizeof(graph_badlen), NULL, 0), 0);
	expect_error(fd, MSG_GRAPH_CREATE, id, PPRPC_EPROTO);
	id++;
	assert_int_equal(wire_send_rawmeta(fd, MSG_GRAPH_CREATE, id, graph_nested_bad, sizeof(graph_nested_bad),
					   NULL, 0), 0);
	expect_error(fd, MSG_GRAPH_CREATE, id, PPRPC_EPROTO);
	id++;

	/* TENSOR_SET with a malformed meta and a bulk: the bulk is discarded */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(wire_send_rawmeta(fd, MSG_TENSOR_SET, id, bad[i].p, bad[i].n, bulk, sizeof(bulk)), 0);
		expect_error(fd, MSG_TENSOR_SET, id, PPRPC_EPROTO);
		id++;
	}
	expect_alive_conn(fd, id++);

	/* A full-size (1 MiB) meta claiming half a million empty tensors, and
	 * one claiming half a million empty nodes: bounded decode, refused as
	 * too big, connection intact. */
	{
		uint8_t *m = malloc(PPRPC_MAX_META);

		assert_non_null(m);
		for (size_t i = 0; i < PPRPC_MAX_META; i += 2) {
			m[i] = 0x12; /* field 2 (tensors), length-delimited */
			m[i + 1] = 0x00;
		}
		assert_int_equal(wire_send_rawmeta(fd, MSG_GRAPH_CREATE, id, m, PPRPC_MAX_META, NULL, 0), 0);
		expect_error(fd, MSG_GRAPH_CREATE, id, PPRPC_ETOOBIG);
		id++;
		for (size_t i = 0; i < PPRPC_MAX_META; i += 2)
			m[i] = 0x1a; /* field 3 (nodes) */
		assert_int_equal(wire_send_rawmeta(fd, MSG_GRAPH_CREATE, id, m, PPRPC_MAX_META, NULL, 0), 0);
		expect_error(fd, MSG_GRAPH_CREATE, id, PPRPC_ETOOBIG);
		id++;
		free(m);
	}
	expect_alive_conn(fd, id++);

	/* A malformed HELLO (as the first message) is a request-level error:
	 * a proper HELLO afterwards is accepted. */
	{
		int fd2 = raw_open(d);

		assert_int_equal(wire_send_rawmeta(fd2, MSG_HELLO, 1, ff, sizeof(ff), NULL, 0), 0);
		expect_error(fd2, MSG_HELLO, 1, PPRPC_EPROTO);
		assert_int_equal(wire_hello(fd2), 0);
		expect_alive_conn(fd2, 2);
		raw_close(fd2);
	}
	raw_close(fd);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 13: graphs                                                                 */
/* ======================================================================== */

#define RG_MAX 8

/* A GraphCreate message built field by field, so any field can be wrong. */
struct rgraph {
	Pprpc__GraphCreate m;
	Pprpc__Tensor t[RG_MAX];
	Pprpc__Tensor *tp[RG_MAX];
	int64_t ne[RG_MAX][PPRPC_MAX_DIMS + 1];
	uint64_t nb[RG_MAX][PPRPC_MAX_DIMS + 1];
	Pprpc__Node n[RG_MAX];
	Pprpc__Node *np[RG_MAX];
	int32_t src[RG_MAX][PPRPC_MAX_SRC + 1];
	float f[RG_MAX][PPRPC_OP_MAX_F];
	int32_t i[RG_MAX][PPRPC_OP_MAX_I];
};

static void rg_init(struct rgraph *g)
{
	memset(g, 0, sizeof(*g));
	pprpc__graph_create__init(&g->m);
	g->m.tensors = g->tp;
	g->m.nodes = g->np;
}

static uint32_t dt_size(int dtype)
{
	return dtype == PPRPC_F16 || dtype == PPRPC_BF16 ? 2 : 4;
}

/* A contiguous tensor (buffer 0 = scratch). */
static int rg_tensor(struct rgraph *g, int dtype, int64_t ne0, int64_t ne1, uint64_t buffer, uint64_t offset)
{
	int k = (int)g->m.n_tensors++;
	Pprpc__Tensor *t = &g->t[k];

	assert_true(k < RG_MAX);
	pprpc__tensor__init(t);
	t->dtype = (uint32_t)dtype;
	g->ne[k][0] = ne0;
	g->ne[k][1] = ne1;
	g->ne[k][2] = 1;
	g->ne[k][3] = 1;
	g->nb[k][0] = dt_size(dtype);
	g->nb[k][1] = g->nb[k][0] * (uint64_t)ne0;
	g->nb[k][2] = g->nb[k][1] * (uint64_t)ne1;
	g->nb[k][3] = g->nb[k][2];
	t->n_ne = PPRPC_MAX_DIMS;
	t->ne = g->ne[k];
	t->n_nb = PPRPC_MAX_DIMS;
	t->nb = g->nb[k];
	t->buffer = buffer;
	t->offset = offset;
	g->tp[k] = t;
	return k;
}

/* A contiguous view of tensor `parent` (any index, even a later one). */
static int rg_view(struct rgraph *g, int parent, int dtype, int64_t ne0, int64_t ne1, uint64_t offset)
{
	int k = rg_tensor(g, dtype, ne0, ne1, 0, offset);

	g->t[k].view_of = (uint32_t)(parent + 1);
	return k;
}

static int rg_node(struct rgraph *g, uint32_t op, const int32_t *src, int nsrc, int32_t dst)
{
	int k = (int)g->m.n_nodes++;
	Pprpc__Node *n = &g->n[k];

	assert_true(k < RG_MAX && nsrc <= PPRPC_MAX_SRC + 1);
	pprpc__node__init(n);
	n->op = op;
	memcpy(g->src[k], src, (size_t)nsrc * sizeof(int32_t));
	n->src = g->src[k];
	n->n_src = (size_t)nsrc;
	n->dst = dst;
	n->fparams = g->f[k];
	n->iparams = g->i[k];
	g->np[k] = n;
	return k;
}

static int rg_scale(struct rgraph *g, int32_t src, int32_t dst, float f0)
{
	int k = rg_node(g, PPRPC_OP_SCALE, &src, 1, dst);

	g->f[k][0] = f0;
	g->n[k].n_fparams = 1;
	return k;
}

static int rg_bin(struct rgraph *g, uint32_t op, int32_t a, int32_t b, int32_t dst)
{
	int32_t s[2] = { a, b };

	return rg_node(g, op, s, 2, dst);
}

/* Send it; returns 0 (and *ret_graph) or the error code.  The same raw
 * connection is used for every case: a refused graph never ends it. */
static int rg_send(int fd, uint64_t *id, struct rgraph *g, uint64_t *ret_graph)
{
	struct wire_reply r;
	int rc;

	assert_int_equal(wire_call(fd, MSG_GRAPH_CREATE, ++*id, &g->m.base, NULL, 0, &r), 0);
	assert_int_equal(r.h.req_id, *id);
	assert_int_equal(r.h.type, MSG_GRAPH_CREATE);
	if (r.is_error) {
		assert_true(r.msg[0] != '\0');
		rc = r.code;
	} else {
		ProtobufCMessage *m = NULL;

		assert_int_equal(wire_reply_unpack(&r, &pprpc__graph_create_reply__descriptor, &m), 0);
		if (ret_graph)
			*ret_graph = ((const Pprpc__GraphCreateReply *)m)->graph;
		meta_free(m);
		rc = 0;
	}
	wire_reply_free(&r);
	return rc;
}

#define RG_EXPECT(code, g)                                                                 \
	do {                                                                               \
		int rc_ = rg_send(fd, &id, (g), NULL);                                     \
		if (rc_ != (code))                                                         \
			fprintf(stderr, "%s:%d: graph case: expected %d (%s), got %d (%s)\n", \
				__FILE__, __LINE__, (code), pprpc_strerror(code), rc_,     \
				pprpc_strerror(rc_));                                      \
		assert_int_equal(rc_, (code));                                             \
		expect_alive_conn(fd, ++id);                                               \
	} while (0)

static void test_graphs_raw(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap base, now;
	int fd;
	uint64_t id = 10, A, B, gh = 0;
	struct rgraph g;
	int t0, t1, t2;

	snap_get(c, &base);
	fd = raw_open_hello(d);
	A = raw_buffer_alloc(fd, 2, 4096);
	B = raw_buffer_alloc(fd, 3, 4096);

	/* the well-formed baseline: B = A * 2, and it runs */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 2.0f);
	assert_int_equal(rg_send(fd, &id, &g, &gh), 0);
	{
		Pprpc__GraphRun run = PPRPC__GRAPH_RUN__INIT;

		run.graph = gh;
		assert_int_equal(wire_send_msg(fd, MSG_GRAPH_RUN, ++id, &run.base, NULL, 0), 0);
		expect_ok(fd, MSG_GRAPH_RUN, id);
	}

	/* use before define: node 0 reads scratch t1, which node 1 writes */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	rg_scale(&g, t1, t2, 1.0f);
	rg_scale(&g, t0, t1, 1.0f);
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* a cycle: t1 = t0 + t2, t2 = t0 + t1 */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	rg_bin(&g, PPRPC_OP_ADD, t0, t2, t1);
	rg_bin(&g, PPRPC_OP_ADD, t0, t1, t2);
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* a self-loop: t1 = t1 * 2 with t1 scratch */
	rg_init(&g);
	rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	rg_scale(&g, t1, t1, 2.0f);
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* source index out of range (past the end, negative, huge) */
	{
		const int32_t srcs[] = { 2, 7, -1, INT32_MIN, INT32_MAX };

		for (size_t i = 0; i < sizeof(srcs) / sizeof(srcs[0]); i++) {
			rg_init(&g);
			rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
			t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
			rg_scale(&g, srcs[i], t1, 1.0f);
			RG_EXPECT(PPRPC_EGRAPH, &g);
		}
	}
	/* destination index out of range */
	{
		const int32_t dsts[] = { 2, 100, -1, INT32_MIN, INT32_MAX };

		for (size_t i = 0; i < sizeof(dsts) / sizeof(dsts[0]); i++) {
			rg_init(&g);
			t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
			rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
			rg_scale(&g, t0, dsts[i], 1.0f);
			RG_EXPECT(PPRPC_EGRAPH, &g);
		}
	}
	/* wrong number of sources */
	{
		int32_t s[PPRPC_MAX_SRC + 1] = { 0, 0, 0, 0, 0 };

		rg_init(&g);
		rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
		t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
		rg_node(&g, PPRPC_OP_ADD, s, 1, t1);
		RG_EXPECT(PPRPC_EINVAL, &g);
		g.n[0].n_src = 0;
		RG_EXPECT(PPRPC_EINVAL, &g);
		g.n[0].n_src = 3;
		RG_EXPECT(PPRPC_EINVAL, &g);
		g.n[0].n_src = PPRPC_MAX_SRC + 1;
		RG_EXPECT(PPRPC_EINVAL, &g);
		g.n[0].op = PPRPC_OP_SCALE;
		g.n[0].n_src = 2;
		RG_EXPECT(PPRPC_EINVAL, &g);
	}
	/* unknown op */
	{
		const uint32_t ops[] = { PPRPC_OP_NONE, PPRPC_OP_COUNT, 77, 0x80000000u, UINT32_MAX };

		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
			int32_t s[1] = { 0 };

			rg_init(&g);
			rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
			t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
			rg_node(&g, ops[i], s, 1, t1);
			RG_EXPECT(PPRPC_EINVAL, &g);
		}
	}
	/* too many parameters */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	{
		static float many[PPRPC_OP_MAX_F + 4];

		g.n[0].fparams = many;
		g.n[0].n_fparams = PPRPC_OP_MAX_F + 4;
		RG_EXPECT(PPRPC_EINVAL, &g);
	}
	/* MUL_MAT with K mismatch: w [8,4], x [6,3] */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 6, 3, B, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 4, 3, 0, 0);
	rg_bin(&g, PPRPC_OP_MUL_MAT, t0, t1, t2);
	RG_EXPECT(PPRPC_ESHAPE, &g);
	/* a destination of the wrong shape */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 4, 8, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	RG_EXPECT(PPRPC_ESHAPE, &g);
	/* ADD without broadcastable shapes */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 3, 4, B, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	rg_bin(&g, PPRPC_OP_ADD, t0, t1, t2);
	RG_EXPECT(PPRPC_ESHAPE, &g);
	/* dtype not supported: ADD with an I32 src0, CPY to I32, f16 dst */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_I32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	rg_bin(&g, PPRPC_OP_ADD, t0, t1, t2);
	RG_EXPECT(PPRPC_ETYPE, &g);
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_I32, 8, 4, B, 0);
	{
		int k = rg_node(&g, PPRPC_OP_CPY, &t0, 1, t1);

		g.i[k][0] = PPRPC_I32;
		g.n[k].n_iparams = 1;
	}
	RG_EXPECT(PPRPC_ETYPE, &g);
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F16, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	RG_EXPECT(PPRPC_ETYPE, &g);

	/* a tensor region outside its buffer */
	{
		const struct {
			int64_t ne0, ne1;
			uint64_t off;
		} rr[] = {
			{ 1024, 2, 0 },               /* 8 KiB in a 4 KiB buffer */
			{ 8, 4, 4000 },               /* runs past the end */
			{ 8, 4, 4096 },               /* starts at the end */
			{ 8, 4, UINT64_MAX - 15 },    /* offset + extent wraps */
		};

		for (size_t i = 0; i < sizeof(rr) / sizeof(rr[0]); i++) {
			rg_init(&g);
			t0 = rg_tensor(&g, PPRPC_F32, rr[i].ne0, rr[i].ne1, A, rr[i].off);
			t1 = rg_tensor(&g, PPRPC_F32, rr[i].ne0, rr[i].ne1, 0, 0);
			rg_scale(&g, t0, t1, 1.0f);
			RG_EXPECT(PPRPC_ERANGE, &g);
		}
		/* the same as the destination */
		for (size_t i = 1; i < sizeof(rr) / sizeof(rr[0]); i++) {
			rg_init(&g);
			t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
			t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, rr[i].off);
			rg_scale(&g, t0, t1, 1.0f);
			RG_EXPECT(PPRPC_ERANGE, &g);
		}
	}
	/* a view outside its parent */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_view(&g, t0, PPRPC_F32, 8, 4, 4);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t1, t2, 1.0f);
	RG_EXPECT(PPRPC_ERANGE, &g);

	/* ne / nb with the wrong number of entries */
	{
		const size_t counts[][2] = { { 3, 4 }, { 4, 3 }, { 0, 0 }, { 5, 4 }, { 4, 5 }, { 1, 4 } };

		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			rg_init(&g);
			t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
			t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
			rg_scale(&g, t0, t1, 1.0f);
			g.t[0].n_ne = counts[i][0];
			g.t[0].n_nb = counts[i][1];
			RG_EXPECT(PPRPC_EINVAL, &g);
		}
	}
	/* invalid descriptors: unknown dtype, ne 0, negative ne, a stride that
	 * is not a multiple of the element size */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	g.t[0].dtype = 99;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.t[0].dtype = UINT32_MAX;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.t[0].dtype = PPRPC_F32;
	g.ne[0][1] = 0;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.ne[0][1] = -4;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.ne[0][1] = 4;
	g.nb[0][1] = 33;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.nb[0][1] = 32;
	/* an element count that overflows */
	g.ne[0][0] = INT64_C(1) << 40;
	g.ne[0][1] = INT64_C(1) << 40;
	RG_EXPECT(PPRPC_ETOOBIG, &g);

	/* a view pointing forward, at itself, or with a buffer */
	rg_init(&g);
	t0 = rg_view(&g, 2, PPRPC_F32, 8, 4, 0);   /* views tensor 2 */
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	rg_scale(&g, t0, t1, 1.0f);
	RG_EXPECT(PPRPC_EGRAPH, &g);
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_view(&g, 1, PPRPC_F32, 8, 4, 0);   /* views itself */
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t1, t2, 1.0f);
	RG_EXPECT(PPRPC_EGRAPH, &g);
	g.t[1].view_of = UINT32_MAX;
	RG_EXPECT(PPRPC_EGRAPH, &g);
	g.t[1].view_of = 1;
	g.t[1].buffer = A;                          /* a view with its own buffer */
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* zero nodes, with and without tensors */
	rg_init(&g);
	RG_EXPECT(PPRPC_EINVAL, &g);
	rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	RG_EXPECT(PPRPC_EINVAL, &g);

	/* no such device */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	g.m.device = 9;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.m.device = UINT32_MAX;
	RG_EXPECT(PPRPC_EINVAL, &g);
	g.m.device = 0;

	/* bad buffer handles inside a graph */
	g.t[0].buffer = 0x0123456789abcdefull;
	RG_EXPECT(PPRPC_EHANDLE, &g);
	g.t[0].buffer = gh;                         /* a graph handle */
	RG_EXPECT(PPRPC_EHANDLE, &g);
	g.t[0].buffer = A;

	/* a tensor written by two nodes */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 1.0f);
	rg_scale(&g, t0, t1, 2.0f);
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* MUL_MAT writing over its own source */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 8, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 8, B, 0);
	rg_bin(&g, PPRPC_OP_MUL_MAT, t0, t1, t1);
	RG_EXPECT(PPRPC_EGRAPH, &g);

	/* scratch space: a 64 GiB scratch tensor (written from a broadcast
	 * view with zero strides) must be refused by the memory floor, and
	 * scratch tensors whose placement overflows 64 bits as too big */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_view(&g, t0, PPRPC_F32, INT64_C(1) << 30, 16, 0);
	memset(g.nb[t1], 0, sizeof(g.nb[t1]));
	t2 = rg_tensor(&g, PPRPC_F32, INT64_C(1) << 30, 16, 0, 0);
	rg_scale(&g, t1, t2, 1.0f);
	RG_EXPECT(PPRPC_EFLOOR, &g);
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	for (int k = 0; k < 5; k++)
		rg_tensor(&g, PPRPC_F32, INT64_C(1) << 30, INT64_C(1) << 30, 0, 0);  /* 2^62 bytes each */
	rg_scale(&g, t0, t0 + 1, 1.0f);
	RG_EXPECT(PPRPC_ETOOBIG, &g);

	/* after all of that the connection still creates and runs graphs */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 4, B, 0);
	rg_scale(&g, t0, t1, 2.0f);
	rg_bin(&g, PPRPC_OP_ADD, t1, t0, t2);
	assert_int_equal(rg_send(fd, &id, &g, &gh), 0);
	{
		Pprpc__GraphRun run = PPRPC__GRAPH_RUN__INIT;

		run.graph = gh;
		assert_int_equal(wire_send_msg(fd, MSG_GRAPH_RUN, ++id, &run.base, NULL, 0), 0);
		expect_ok(fd, MSG_GRAPH_RUN, id);
	}
	/* A graph keeps its buffers alive: free A while the graph exists,
	 * then run it (must not touch freed memory: a crash would show) and
	 * close with the graph still alive. */
	{
		Pprpc__BufferFree bf = PPRPC__BUFFER_FREE__INIT;
		Pprpc__GraphRun run = PPRPC__GRAPH_RUN__INIT;
		struct wire_reply r;

		bf.buffer = A;
		assert_int_equal(wire_send_msg(fd, MSG_BUFFER_FREE, ++id, &bf.base, NULL, 0), 0);
		expect_ok(fd, MSG_BUFFER_FREE, id);
		run.graph = gh;
		assert_int_equal(wire_call(fd, MSG_GRAPH_RUN, ++id, &run.base, NULL, 0, &r), 0);
		assert_true(!r.is_error || r.code == PPRPC_EHANDLE);
		wire_reply_free(&r);
	}
	expect_alive_conn(fd, ++id);
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* Two separate tensor entries naming the same bytes of one buffer: a
 * MUL_MAT whose destination aliases its source through a second entry must
 * be refused exactly like the direct case above (ops.h: the destination
 * may not overlap a source unless it is exactly the same bytes of an
 * elementwise op). */
static void test_graph_alias_through_buffer(void **state)
{
	struct tdaemon *d = *state;
	int fd = raw_open_hello(d);
	uint64_t id = 10, A = raw_buffer_alloc(fd, 2, 4096), B = raw_buffer_alloc(fd, 3, 4096);
	struct rgraph g;
	int t0, t1, t2;

	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 8, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 8, B, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 8, A, 0);   /* same bytes as t0 */
	rg_bin(&g, PPRPC_OP_MUL_MAT, t0, t1, t2);
	RG_EXPECT(PPRPC_EGRAPH, &g);
	/* partially overlapping: dst starts 64 bytes into src0 */
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 8, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 8, B, 0);
	t2 = rg_tensor(&g, PPRPC_F32, 8, 8, A, 64);
	rg_bin(&g, PPRPC_OP_MUL_MAT, t0, t1, t2);
	RG_EXPECT(PPRPC_EGRAPH, &g);
	raw_close(fd);
	assert_serves(d, "badinput");
}

/* Graph errors through the client API: the builder catches shape and type
 * errors where they are made; the daemon catches what the builder cannot
 * know (buffer sizes, handles, topology of explicit destinations). */
static void test_graphs_client(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	pprpc_buffer A = { 0 }, B = { 0 }, I = { 0 }, dead = { 0 };
	pprpc_graph_builder *gb = NULL;
	pprpc_graph gh = { 0 };
	pprpc_tensor ta, tb, ti;
	int a, b, i, s;
	float in[32], out[32];

	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &A), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &B), 0);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &I), 0);
	for (int k = 0; k < 32; k++)
		in[k] = (float)k - 10.5f;
	assert_int_equal(pprpc_tensor_set(c, A, 0, in, sizeof(in)), 0);

	ta = pprpc_tensor_make(A, 0, PPRPC_F32, 8, 4, 1, 1);
	tb = pprpc_tensor_make(B, 0, PPRPC_F32, 6, 3, 1, 1);
	ti = pprpc_tensor_make(I, 0, PPRPC_I32, 8, 4, 1, 1);

	/* builder-side refusals */
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	a = pprpc_gb_tensor(gb, &ta);
	b = pprpc_gb_tensor(gb, &tb);
	i = pprpc_gb_tensor(gb, &ti);
	assert_true(a >= 0 && b >= 0 && i >= 0);
	assert_int_equal(pprpc_gb_mul_mat(gb, a, b, -1), PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_add(gb, i, a, -1), PPRPC_ETYPE);
	assert_int_equal(pprpc_gb_add(gb, a, b, -1), PPRPC_ESHAPE);
	assert_int_equal(pprpc_gb_op(gb, 77, &a, 1, NULL, -1), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_op(gb, PPRPC_OP_ADD, &a, 1, NULL, -1), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_scale(gb, 99, 1.0f, 0.0f, -1), PPRPC_EINVAL);
	assert_int_equal(pprpc_gb_node_count(gb), 0);
	/* zero nodes reach the daemon, which refuses them */
	assert_int_equal(pprpc_graph_create(c, 0, gb, &gh), PPRPC_EINVAL);
	assert_true(pprpc_last_error(c)[0] != '\0');
	pprpc_graph_builder_free(gb);

	/* daemon-side: a region outside its buffer */
	{
		pprpc_tensor off = pprpc_tensor_make(A, 4000, PPRPC_F32, 8, 4, 1, 1);

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		a = pprpc_gb_tensor(gb, &off);
		assert_true(pprpc_gb_scale(gb, a, 2.0f, 0.0f, -1) >= 0);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &gh), PPRPC_ERANGE);
		pprpc_graph_builder_free(gb);
	}
	/* daemon-side: a freed buffer, an unknown device */
	assert_int_equal(pprpc_buffer_alloc(c, 0, 4096, &dead), 0);
	assert_int_equal(pprpc_buffer_free(c, dead), 0);
	assert_int_equal(make_scale_graph(c, dead, B, 32, &gh), PPRPC_EHANDLE);
	{
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		a = pprpc_gb_tensor(gb, &ta);
		assert_true(pprpc_gb_scale(gb, a, 2.0f, 0.0f, -1) >= 0);
		assert_int_equal(pprpc_graph_create(c, 7, gb, &gh), PPRPC_EINVAL);
		pprpc_graph_builder_free(gb);
	}
	/* daemon-side topology: a tensor written twice; MUL_MAT in place */
	{
		pprpc_tensor tb2 = pprpc_tensor_make(B, 0, PPRPC_F32, 8, 4, 1, 1);
		pprpc_tensor sq = pprpc_tensor_make(A, 0, PPRPC_F32, 8, 8, 1, 1);
		pprpc_tensor sq2 = pprpc_tensor_make(B, 0, PPRPC_F32, 8, 8, 1, 1);

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		a = pprpc_gb_tensor(gb, &ta);
		b = pprpc_gb_tensor(gb, &tb2);
		assert_int_equal(pprpc_gb_scale(gb, a, 2.0f, 0.0f, b), b);
		assert_int_equal(pprpc_gb_scale(gb, a, 3.0f, 0.0f, b), b);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &gh), PPRPC_EGRAPH);
		pprpc_graph_builder_free(gb);

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		a = pprpc_gb_tensor(gb, &sq);
		b = pprpc_gb_tensor(gb, &sq2);
		assert_int_equal(pprpc_gb_mul_mat(gb, a, b, b), b);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &gh), PPRPC_EGRAPH);
		pprpc_graph_builder_free(gb);
	}

	/* after all refusals: a valid graph gives the right numbers */
	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	a = pprpc_gb_tensor(gb, &ta);
	{
		pprpc_tensor tb2 = pprpc_tensor_make(B, 0, PPRPC_F32, 8, 4, 1, 1);

		b = pprpc_gb_tensor(gb, &tb2);
	}
	s = pprpc_gb_scale(gb, a, 2.0f, 1.0f, -1);
	assert_true(s >= 0);
	assert_int_equal(pprpc_gb_add(gb, s, a, b), b);
	assert_int_equal(pprpc_graph_create(c, 0, gb, &gh), 0);
	pprpc_graph_builder_free(gb);
	assert_int_equal(pprpc_graph_run(c, gh), 0);
	assert_int_equal(pprpc_tensor_get(c, B, 0, out, sizeof(out)), 0);
	for (int k = 0; k < 32; k++)
		assert_true(out[k] == in[k] * 2.0f + 1.0f + in[k]);
	assert_int_equal(pprpc_graph_free(c, gh), 0);

	assert_int_equal(pprpc_buffer_free(c, A), 0);
	assert_int_equal(pprpc_buffer_free(c, B), 0);
	assert_int_equal(pprpc_buffer_free(c, I), 0);
	client_close(c);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 14: a flood of random bytes                                               */
/* ======================================================================== */

#define FLOOD_CONNS 20
#define FLOOD_BYTES (1u << 20)

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

struct flood {
	struct tdaemon *d;
	int idx;
	uint64_t seed;
	int send_rc;      /* 0, or -EPIPE/-ECONNRESET once the daemon closed */
	int close_rc;     /* from wire_wait_closed */
	uint64_t sent;
	size_t prefix;    /* bytes of valid framing before the noise */
};

static void *flood_run(void *arg)
{
	struct flood *f = arg;
	uint8_t *buf = malloc(FLOOD_BYTES);
	size_t pre = 0;  /* bytes of valid framing at the start */
	int fd;

	f->close_rc = -EIO;
	if (!buf)
		return NULL;
	for (size_t i = 0; i < FLOOD_BYTES; i += 8) {
		uint64_t v = xorshift(&f->seed);

		memcpy(buf + i, &v, 8);
	}
	/* Variants: pure noise; a valid HELLO, then noise; a valid header with
	 * a noise meta, then noise; HELLO, then a TENSOR_SET header whose
	 * 256 KiB bulk will be discarded, then noise. */
	switch (f->idx % 4) {
	case 0:
		break;
	case 1:
	case 3: {
		Pprpc__Hello h = PPRPC__HELLO__INIT;
		uint8_t *p = buf;

		h.proto_version = PPRPC_PROTO_VERSION;
		h.client_name = "flood";
		wire_hdr(p, 1, MSG_HELLO, 0, (uint32_t)meta_size(&h.base), 0, 1);
		pre = FRAME_HDR_SIZE + meta_pack(&h.base, p + FRAME_HDR_SIZE);
		if (f->idx % 4 == 3) {
			wire_hdr(buf + pre, 1, MSG_TENSOR_SET, FRAME_F_BULK, 24, 256 * 1024, 2);
			pre += FRAME_HDR_SIZE;   /* then 24 bytes of noise meta, 256 KiB noise bulk */
		}
		break;
	}
	case 2:
		wire_hdr(buf, 1, MSG_HELLO, 0, 1000, 0, 1);
		pre = FRAME_HDR_SIZE;
		break;
	}
	f->prefix = pre;
	fd = traw_connect(f->d);
	if (fd < 0) {
		free(buf);
		return NULL;
	}
	f->send_rc = 0;
	for (size_t off = 0; off < FLOOD_BYTES && f->send_rc == 0; off += 65536) {
		f->send_rc = wire_send_all(fd, buf + off, 65536, WIRE_TIMEOUT_MS);
		if (f->send_rc == 0)
			f->sent += 65536;
	}
	f->close_rc = wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL);
	close(fd);
	free(buf);
	return NULL;
}

static void test_random_flood(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct flood fl[FLOOD_CONNS];
	pthread_t th[FLOOD_CONNS];
	struct snap base, now;

	snap_get(c, &base);
	for (int i = 0; i < FLOOD_CONNS; i++) {
		memset(&fl[i], 0, sizeof(fl[i]));
		fl[i].d = d;
		fl[i].idx = i;
		fl[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		assert_int_equal(pthread_create(&th[i], NULL, flood_run, &fl[i]), 0);
	}
	for (int i = 0; i < FLOOD_CONNS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < FLOOD_CONNS; i++) {
		/* the daemon closed every one of them (orderly or by reset:
		 * it stops reading, so unread noise may turn the close into a
		 * reset) and no sender was left blocked */
		if (fl[i].close_rc == -ETIMEDOUT || fl[i].close_rc == -EIO || fl[i].send_rc == -ETIMEDOUT)
			fprintf(stderr, "flood conn %d (valid prefix %zu): send %d, close %d, sent %" PRIu64 "\n", i,
				fl[i].prefix, fl[i].send_rc, fl[i].close_rc, fl[i].sent);
		assert_true(fl[i].close_rc == 0 || fl[i].close_rc == -ECONNRESET);
		assert_true(fl[i].send_rc != -ETIMEDOUT);
	}
	wait_baseline(c, &base, &now);
	assert_true(now.protocol_errors >= base.protocol_errors + FLOOD_CONNS);
	assert_true(now.connections_total >= base.connections_total + FLOOD_CONNS);
	/* the stats connection itself was never disturbed */
	snap_get(c, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* 15: a client that never reads its replies                                  */
/* ======================================================================== */

static uint64_t daemon_rss_kib(const struct tdaemon *d)
{
	char path[64], line[256];
	uint64_t kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %" SCNu64, &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void test_never_reads(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	const int nget = 1000;
	const uint64_t sz = MIB;
	struct snap base, now;
	uint64_t rss0, rss1, b;
	uint8_t *frames, meta[64];
	size_t mlen, flen, off = 0;
	Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
	int fd;

	snap_get(c, &base);
	rss0 = daemon_rss_kib(d);
	fd = raw_open_hello(d);
	b = raw_buffer_alloc(fd, 2, sz);
	g.buffer = b;
	g.size = sz;
	mlen = meta_pack(&g.base, meta);
	flen = FRAME_HDR_SIZE + mlen;
	frames = malloc(flen * (size_t)nget);
	assert_non_null(frames);
	for (int i = 0; i < nget; i++) {
		wire_hdr(frames + off, 1, MSG_TENSOR_GET, 0, (uint32_t)mlen, 0, 100 + (uint64_t)i);
		memcpy(frames + off + FRAME_HDR_SIZE, meta, mlen);
		off += flen;
	}
	assert_int_equal(wire_send_all(fd, frames, off, WIRE_TIMEOUT_MS), 0);
	free(frames);

	/* The daemon serves others meanwhile and holds the connection's buffer. */
	sleep_ms(300);
	snap_get(c, &now);
	assert_int_equal(now.nconn, base.nconn + 1);
	assert_int_equal(now.buffers, base.buffers + 1);
	rss1 = daemon_rss_kib(d);
	/* 1 GiB of replies is queued; they are sent from the buffer itself, so
	 * the daemon must not have copied them (generous bound). */
	if (rss0 && rss1)
		assert_true(rss1 < rss0 + 256 * 1024);
	assert_serves(d, "badinput");

	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* Same, but the client half-reads a reply's bulk before closing. */
static void test_close_mid_reply(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap base, now;
	Pprpc__TensorGet g = PPRPC__TENSOR_GET__INIT;
	uint8_t part[4096];
	int fd;

	snap_get(c, &base);
	fd = raw_open_hello(d);
	g.buffer = raw_buffer_alloc(fd, 2, 32 * MIB);
	g.size = 32 * MIB;
	for (int i = 0; i < 8; i++)
		assert_int_equal(wire_send_msg(fd, MSG_TENSOR_GET, 10 + (uint64_t)i, &g.base, NULL, 0), 0);
	assert_int_equal(wire_recv_all(fd, part, sizeof(part), WIRE_TIMEOUT_MS), (ssize_t)sizeof(part));
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* Many connections that connect and vanish without a byte, or after HELLO
 * with buffers allocated. */
static void test_connection_churn(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap base, now;

	snap_get(c, &base);
	for (int i = 0; i < 50; i++) {
		int fd = raw_open(d);

		raw_close(fd);
	}
	for (int i = 0; i < 10; i++) {
		int fd = raw_open_hello(d);

		raw_buffer_alloc(fd, 2, 65536);
		raw_buffer_alloc(fd, 3, 1 * MIB);
		raw_close(fd);
	}
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}


/* ======================================================================== */
/* Extra: bad values, pipelining past a fatal error, odd HELLO fields,       */
/* closing with queued device work                                           */
/* ======================================================================== */

static void test_bad_values(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	pprpc_buffer b = { 0 };
	struct snap base, now;

	snap_get(c, &base);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 0, &b), PPRPC_EINVAL);
	assert_int_equal(pprpc_buffer_alloc(c, 0, UINT64_MAX, &b), PPRPC_EFLOOR);
	assert_int_equal(pprpc_buffer_alloc(c, 0, 1ull << 60, &b), PPRPC_EFLOOR);
	assert_int_equal(pprpc_buffer_alloc(c, 5, 4096, &b), PPRPC_EINVAL);
	assert_int_equal(pprpc_buffer_alloc(c, UINT32_MAX, 4096, &b), PPRPC_EINVAL);
	assert_int_equal(b.id, 0);  /* out-parameters are written only on success */
	assert_int_equal(pprpc_fence(c, 9), PPRPC_EINVAL);
	assert_int_equal(pprpc_fence(c, 0), 0);
	{
		int fd = raw_open_hello(d);
		Pprpc__BufferClear bc = PPRPC__BUFFER_CLEAR__INIT;

		bc.buffer = raw_buffer_alloc(fd, 2, 4096);
		bc.value = 256;
		assert_int_equal(wire_send_msg(fd, MSG_BUFFER_CLEAR, 3, &bc.base, NULL, 0), 0);
		expect_error(fd, MSG_BUFFER_CLEAR, 3, PPRPC_EINVAL);
		bc.value = UINT32_MAX;
		assert_int_equal(wire_send_msg(fd, MSG_BUFFER_CLEAR, 4, &bc.base, NULL, 0), 0);
		expect_error(fd, MSG_BUFFER_CLEAR, 4, PPRPC_EINVAL);
		bc.value = 255;
		assert_int_equal(wire_send_msg(fd, MSG_BUFFER_CLEAR, 5, &bc.base, NULL, 0), 0);
		expect_ok(fd, MSG_BUFFER_CLEAR, 5);
		raw_close(fd);
	}
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* Append one well-formed request frame to buf (returns the new length). */
static size_t put_frame(uint8_t *buf, size_t len, uint16_t type, uint64_t req_id, const ProtobufCMessage *m)
{
	size_t mlen = m ? meta_size(m) : 0;

	wire_hdr(buf + len, 1, type, 0, (uint32_t)mlen, 0, req_id);
	if (m)
		meta_pack(m, buf + len + FRAME_HDR_SIZE);
	return len + FRAME_HDR_SIZE + mlen;
}

/* Requests that arrive in the same read as a request that closes the
 * connection must not be executed: the error reply is the last thing the
 * client gets, and nothing the ignored requests would have allocated is
 * left behind. */
static void test_pipelined_after_fatal(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	Pprpc__Hello bad = PPRPC__HELLO__INIT, good = PPRPC__HELLO__INIT;
	Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;
	Pprpc__Stats st = PPRPC__STATS__INIT;
	struct snap base, now;
	uint8_t buf[1024];
	size_t n = 0;
	int fd;

	snap_get(c, &base);
	bad.proto_version = 2;
	good.proto_version = 1;
	ba.size = 1 * MIB;
	n = put_frame(buf, n, MSG_HELLO, 1, &bad.base);
	n = put_frame(buf, n, MSG_HELLO, 2, &good.base);
	n = put_frame(buf, n, MSG_BUFFER_ALLOC, 3, &ba.base);
	n = put_frame(buf, n, MSG_STATS, 4, &st.base);
	fd = raw_open(d);
	assert_int_equal(wire_send_all(fd, buf, n, WIRE_TIMEOUT_MS), 0);
	expect_error(fd, MSG_HELLO, 1, PPRPC_EVERSION);
	expect_closed(fd);
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* A header-level error in the middle of a batch: the requests before it are
 * answered, nothing after it is. */
static void test_pipelined_after_bad_header(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	Pprpc__Hello good = PPRPC__HELLO__INIT;
	Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;
	Pprpc__Stats st = PPRPC__STATS__INIT;
	struct snap base, now;
	uint8_t buf[1024];
	size_t n = 0;
	int fd;

	snap_get(c, &base);
	good.proto_version = 1;
	ba.size = 1 * MIB;
	n = put_frame(buf, n, MSG_HELLO, 1, &good.base);
	n = put_frame(buf, n, MSG_STATS, 2, &st.base);
	wire_hdr(buf + n, 7, MSG_STATS, 0, 0, 0, 3);  /* version 7 */
	n += FRAME_HDR_SIZE;
	n = put_frame(buf, n, MSG_BUFFER_ALLOC, 4, &ba.base);
	fd = raw_open(d);
	assert_int_equal(wire_send_all(fd, buf, n, WIRE_TIMEOUT_MS), 0);
	expect_ok(fd, MSG_HELLO, 1);
	expect_ok(fd, MSG_STATS, 2);
	expect_error(fd, MSG_STATS, 3, PPRPC_EVERSION);
	expect_closed(fd);
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* HELLO with a huge, non-UTF-8 client name, an unknown role and a large
 * auth proof: whatever the answer, STATS (which reports the name) keeps
 * working for everyone. */
static void test_hello_odd_fields(void **state)
{
	struct tdaemon *d = *state;
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	const size_t nlen = 3000, plen = 600;
	char *name = malloc(200 * 1024 + 1);
	uint8_t *proof = malloc(100 * 1024);
	struct wire_reply r;
	pprpc_client *c;
	struct snap s;
	int fd;

	assert_non_null(name);
	assert_non_null(proof);
	memset(name, 0xff, nlen);
	name[nlen] = '\0';
	memcpy(name, "%s%n%s", 6);
	memset(proof, 0xa5, 100 * 1024);
	h.proto_version = 1;
	h.role = (Pprpc__Role)7;
	h.client_name = name;
	h.auth_proof.data = proof;
	h.auth_proof.len = plen;
	fd = raw_open(d);
	assert_int_equal(wire_call(fd, MSG_HELLO, 1, &h.base, NULL, 0, &r), 0);
	assert_int_equal(r.h.req_id, 1);
	wire_reply_free(&r);
	c = client_open(d);
	snap_get(c, &s);
	assert_true(s.nconn >= 2);
	client_close(c);
	raw_close(fd);
	/* Beyond 4 KiB, before HELLO is done: refused and closed, key or not
	 * (the daemon buffers no large meta for whoever has not said HELLO). */
	memset(name, 0xff, 200 * 1024);
	name[200 * 1024] = '\0';
	h.auth_proof.len = 100 * 1024;
	fd = raw_open(d);
	assert_int_equal(wire_call(fd, MSG_HELLO, 1, &h.base, NULL, 0, &r), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_EPROTO);
	wire_reply_free(&r);
	expect_closed(fd);
	raw_close(fd);
	free(name);
	free(proof);
	assert_serves(d, "badinput");
}

/* Close while device work of this connection is still queued: graph runs,
 * copies, clears and a fence.  Everything completes or is dropped, and the
 * buffers, the graph and its arena are all released. */
static void test_close_with_queued_work(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	const int64_t n = 256;
	struct snap base, now;
	struct rgraph g;
	uint64_t id = 10, W, X, Y, gh = 0;
	int t0, t1, t2, t3, fd;

	snap_get(c, &base);
	fd = raw_open_hello(d);
	W = raw_buffer_alloc(fd, 2, (uint64_t)(n * n * 4));
	X = raw_buffer_alloc(fd, 3, (uint64_t)(n * n * 4));
	Y = raw_buffer_alloc(fd, 4, (uint64_t)(n * n * 4));
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, n, n, W, 0);
	t1 = rg_tensor(&g, PPRPC_F32, n, n, X, 0);
	t2 = rg_tensor(&g, PPRPC_F32, n, n, 0, 0);    /* scratch: needs an arena */
	t3 = rg_tensor(&g, PPRPC_F32, n, n, Y, 0);
	rg_bin(&g, PPRPC_OP_MUL_MAT, t0, t1, t2);
	rg_bin(&g, PPRPC_OP_MUL_MAT, t2, t1, t3);
	assert_int_equal(rg_send(fd, &id, &g, &gh), 0);
	snap_get(c, &now);
	assert_true(now.allocated > base.allocated + 3 * (uint64_t)(n * n * 4)); /* arena counted */
	{
		Pprpc__GraphRun run = PPRPC__GRAPH_RUN__INIT;
		Pprpc__TensorCopy cp = PPRPC__TENSOR_COPY__INIT;
		Pprpc__BufferClear bc = PPRPC__BUFFER_CLEAR__INIT;
		Pprpc__BufferFree bf = PPRPC__BUFFER_FREE__INIT;
		Pprpc__GraphFree gf = PPRPC__GRAPH_FREE__INIT;
		Pprpc__Fence fe = PPRPC__FENCE__INIT;

		run.graph = gh;
		cp.src_buffer = W;
		cp.dst_buffer = Y;
		cp.size = (uint64_t)(n * n * 4);
		bc.buffer = X;
		bc.value = 1;
		for (int i = 0; i < 20; i++) {
			assert_int_equal(wire_send_msg(fd, MSG_GRAPH_RUN, ++id, &run.base, NULL, 0), 0);
			assert_int_equal(wire_send_msg(fd, MSG_TENSOR_COPY, ++id, &cp.base, NULL, 0), 0);
			assert_int_equal(wire_send_msg(fd, MSG_BUFFER_CLEAR, ++id, &bc.base, NULL, 0), 0);
		}
		/* free what is still in use by queued commands */
		bf.buffer = W;
		assert_int_equal(wire_send_msg(fd, MSG_BUFFER_FREE, ++id, &bf.base, NULL, 0), 0);
		gf.graph = gh;
		assert_int_equal(wire_send_msg(fd, MSG_GRAPH_RUN, ++id, &run.base, NULL, 0), 0);
		assert_int_equal(wire_send_msg(fd, MSG_GRAPH_FREE, ++id, &gf.base, NULL, 0), 0);
		assert_int_equal(wire_send_msg(fd, MSG_FENCE, ++id, &fe.base, NULL, 0), 0);
	}
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

/* ======================================================================== */
/* Extra: handle-table limits                                                */
/* ======================================================================== */

/* Send `count` copies of one request frame back to back, then read all the
 * replies; returns how many succeeded, and every failure must be `code`. */
static int pipeline_count(int fd, uint16_t type, const ProtobufCMessage *m, int count, int code)
{
	size_t mlen = meta_size(m), flen = FRAME_HDR_SIZE + mlen;
	uint8_t *frames = malloc(flen * (size_t)count);
	int ok = 0;

	assert_non_null(frames);
	for (int i = 0; i < count; i++) {
		wire_hdr(frames + flen * (size_t)i, 1, type, 0, (uint32_t)mlen, 0, 1000 + (uint64_t)i);
		meta_pack(m, frames + flen * (size_t)i + FRAME_HDR_SIZE);
	}
	assert_int_equal(wire_send_all(fd, frames, flen * (size_t)count, 30000), 0);
	free(frames);
	for (int i = 0; i < count; i++) {
		struct wire_reply r;

		assert_int_equal(wire_read_reply(fd, &r, 30000), 0);
		assert_int_equal(r.h.req_id, 1000 + (uint64_t)i);
		if (r.is_error) {
			if (r.code != code)
				fprintf(stderr, "request %d: error %d (%s), expected %d\n", i, r.code, r.msg, code);
			assert_int_equal(r.code, code);
		} else {
			ok++;
		}
		wire_reply_free(&r);
	}
	return ok;
}

static void test_graph_limit(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	struct snap base, now;
	struct rgraph g;
	uint64_t A, B;
	int fd, ok, t0, t1;

	snap_get(c, &base);
	fd = raw_open_hello(d);
	A = raw_buffer_alloc(fd, 2, 4096);
	B = raw_buffer_alloc(fd, 3, 4096);
	rg_init(&g);
	t0 = rg_tensor(&g, PPRPC_F32, 8, 4, A, 0);
	t1 = rg_tensor(&g, PPRPC_F32, 8, 4, 0, 0);   /* with an arena each */
	rg_scale(&g, t0, t1, 2.0f);
	ok = pipeline_count(fd, MSG_GRAPH_CREATE, &g.m.base, 4096 + 10, PPRPC_ELIMIT);
	assert_int_equal(ok, 4096);  /* pprpcd's default graph limit */
	(void)B;
	expect_alive_conn(fd, 7);
	raw_close(fd);
	wait_baseline(c, &base, &now);
	/* the slots are free again */
	{
		pprpc_buffer a = { 0 }, b = { 0 };
		pprpc_graph gh = { 0 };

		assert_int_equal(pprpc_buffer_alloc(c, 0, 256, &a), 0);
		assert_int_equal(pprpc_buffer_alloc(c, 0, 256, &b), 0);
		assert_int_equal(make_scale_graph(c, a, b, 64, &gh), 0);
		assert_int_equal(pprpc_graph_free(c, gh), 0);
		assert_int_equal(pprpc_buffer_free(c, a), 0);
		assert_int_equal(pprpc_buffer_free(c, b), 0);
	}
	client_close(c);
	assert_serves(d, "badinput");
}

static void test_buffer_limit(void **state)
{
	struct tdaemon *d = *state;
	pprpc_client *c = client_open(d);
	Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;
	struct snap base, now;
	int64_t t0 = wire_now_ms();
	int fd, ok;

	snap_get(c, &base);
	fd = raw_open_hello(d);
	ba.size = 1;
	ok = pipeline_count(fd, MSG_BUFFER_ALLOC, &ba.base, 65536 + 10, PPRPC_ELIMIT);
	assert_int_equal(ok, 65536 - (int)base.buffers);  /* pprpcd's default buffer limit */
	expect_alive_conn(fd, 7);
	fprintf(stderr, "buffer limit: %d allocations in %lld ms\n", ok, (long long)(wire_now_ms() - t0));
	raw_close(fd);
	wait_baseline(c, &base, &now);
	client_close(c);
	assert_serves(d, "badinput");
}

int main(void)
{
	const struct CMUnitTest framing[] = {
		cmocka_unit_test_teardown(test_bad_magic, tracked_cleanup),
		cmocka_unit_test_teardown(test_wrong_version, tracked_cleanup),
		cmocka_unit_test_teardown(test_bad_flags, tracked_cleanup),
		cmocka_unit_test_teardown(test_oversize_meta, tracked_cleanup),
		cmocka_unit_test_teardown(test_oversize_bulk, tracked_cleanup),
		cmocka_unit_test_teardown(test_truncated, tracked_cleanup),
		cmocka_unit_test_teardown(test_unknown_type, tracked_cleanup),
		cmocka_unit_test_teardown(test_request_before_hello, tracked_cleanup),
		cmocka_unit_test_teardown(test_hello_version, tracked_cleanup),
		cmocka_unit_test_teardown(test_bulk_mismatch, tracked_cleanup),
		cmocka_unit_test_teardown(test_malformed_meta, tracked_cleanup),
		cmocka_unit_test_teardown(test_bad_values, tracked_cleanup),
		cmocka_unit_test_teardown(test_pipelined_after_fatal, tracked_cleanup),
		cmocka_unit_test_teardown(test_pipelined_after_bad_header, tracked_cleanup),
		cmocka_unit_test_teardown(test_hello_odd_fields, tracked_cleanup),
	};
	const struct CMUnitTest objects[] = {
		cmocka_unit_test_teardown(test_bad_handles, tracked_cleanup),
		cmocka_unit_test_teardown(test_bad_regions, tracked_cleanup),
		cmocka_unit_test_teardown(test_graphs_raw, tracked_cleanup),
		cmocka_unit_test_teardown(test_graphs_client, tracked_cleanup),
		cmocka_unit_test_teardown(test_graph_alias_through_buffer, tracked_cleanup),
		cmocka_unit_test_teardown(test_graph_limit, tracked_cleanup),
		cmocka_unit_test_teardown(test_buffer_limit, tracked_cleanup),
	};
	const struct CMUnitTest abuse[] = {
		cmocka_unit_test_teardown(test_random_flood, tracked_cleanup),
		cmocka_unit_test_teardown(test_never_reads, tracked_cleanup),
		cmocka_unit_test_teardown(test_close_mid_reply, tracked_cleanup),
		cmocka_unit_test_teardown(test_connection_churn, tracked_cleanup),
		cmocka_unit_test_teardown(test_close_with_queued_work, tracked_cleanup),
	};
	int failed = 0;

	failed += cmocka_run_group_tests_name("badinput_framing", framing, group_setup, group_teardown);
	failed += cmocka_run_group_tests_name("badinput_objects", objects, group_setup, group_teardown);
	failed += cmocka_run_group_tests_name("badinput_abuse", abuse, group_setup, group_teardown);
	return failed ? 1 : 0;
}

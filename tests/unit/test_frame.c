/*
 * tests/unit/test_frame.c — the 32-byte frame header codec: byte layout (the
 * wire contract of DESIGN.md), round trip of every field, and each refusal
 * of frame_hdr_decode with the code it must return.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "pprpc/types.h"
#include "proto/frame.h"

static const struct frame_limits lim_default = { .max_meta = PPRPC_MAX_META,
						 .max_bulk = 16u << 20 };

static struct frame_hdr sample(void)
{
	return (struct frame_hdr){
		.version = PPRPC_PROTO_VERSION,
		.type = MSG_TENSOR_SET,
		.flags = FRAME_F_BULK,
		.meta_len = 0x0a0b0c,
		.bulk_len = 0x00c0ffee,
		.req_id = 0x0102030405060708ull,
	};
}

static void test_layout(void **state)
{
	struct frame_hdr h = {
		.version = 0x0201,
		.type = 0x0403,
		.flags = 0x08070605,
		.meta_len = 0x0c0b0a09,
		.bulk_len = 0x14131211100f0e0dull,
		.req_id = 0x1c1b1a1918171615ull,
	};
	uint8_t b[FRAME_HDR_SIZE];
	const uint8_t want[FRAME_HDR_SIZE] = {
		'P', 'P', 'R', '1',                             /* magic at 0 */
		0x01, 0x02,                                     /* version at 4 */
		0x03, 0x04,                                     /* type at 6 */
		0x05, 0x06, 0x07, 0x08,                         /* flags at 8 */
		0x09, 0x0a, 0x0b, 0x0c,                         /* meta len at 12 */
		0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, /* bulk len at 16 */
		0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, /* req id at 24 */
	};

	(void)state;
	assert_int_equal(FRAME_HDR_SIZE, 32);
	memset(b, 0xee, sizeof(b));
	frame_hdr_encode(&h, b);
	assert_memory_equal(b, want, FRAME_HDR_SIZE);
}

static void test_layout_real_header(void **state)
{
	struct frame_hdr h = { .version = 1, .type = MSG_GRAPH_RUN, .flags = FRAME_F_REPLY,
			       .meta_len = 3, .bulk_len = 0, .req_id = 42 };
	uint8_t b[FRAME_HDR_SIZE];
	const uint8_t want[FRAME_HDR_SIZE] = {
		'P', 'P', 'R', '1', 1, 0, 9, 0, 1, 0, 0, 0, 3, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0,
	};

	(void)state;
	frame_hdr_encode(&h, b);
	assert_memory_equal(b, want, FRAME_HDR_SIZE);
}

static void test_roundtrip(void **state)
{
	const struct frame_hdr cases[] = {
		sample(),
		{ .version = 1, .type = 0, .flags = 0, .meta_len = 0, .bulk_len = 0, .req_id = 0 },
		{ .version = 1, .type = 0xffff, .flags = FRAME_F_KNOWN, .meta_len = PPRPC_MAX_META,
		  .bulk_len = 16u << 20, .req_id = UINT64_MAX },
		{ .version = 1, .type = MSG_HELLO, .flags = FRAME_F_REPLY | FRAME_F_ERROR,
		  .meta_len = 1, .bulk_len = 0, .req_id = 1ull << 63 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[FRAME_HDR_SIZE];
		struct frame_hdr out, peek;
		uint64_t rid = 0xdead;

		memset(&out, 0x5a, sizeof(out));
		frame_hdr_encode(&cases[i], b);
		assert_int_equal(frame_hdr_decode(b, &lim_default, &out, &rid), 0);
		assert_int_equal(out.version, cases[i].version);
		assert_int_equal(out.type, cases[i].type);
		assert_int_equal(out.flags, cases[i].flags);
		assert_int_equal(out.meta_len, cases[i].meta_len);
		assert_true(out.bulk_len == cases[i].bulk_len);
		assert_true(out.req_id == cases[i].req_id);
		assert_true(rid == cases[i].req_id);

		frame_hdr_peek(b, &peek);
		assert_int_equal(peek.version, cases[i].version);
		assert_int_equal(peek.type, cases[i].type);
		assert_int_equal(peek.flags, cases[i].flags);
		assert_int_equal(peek.meta_len, cases[i].meta_len);
		assert_true(peek.bulk_len == cases[i].bulk_len);
		assert_true(peek.req_id == cases[i].req_id);
	}
}

static void test_ret_req_id_optional(void **state)
{
	struct frame_hdr h = sample(), out;
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim_default, &out, NULL), 0);
	assert_true(out.req_id == h.req_id);
	b[4] = 2;
	assert_int_equal(frame_hdr_decode(b, &lim_default, &out, NULL), PPRPC_EVERSION);
}

/* Decode must not write *out on failure. */
static void expect_refused(const uint8_t *b, const struct frame_limits *lim, int code)
{
	struct frame_hdr out, untouched;

	memset(&out, 0xa5, sizeof(out));
	untouched = out;
	assert_int_equal(frame_hdr_decode(b, lim, &out, NULL), code);
	assert_memory_equal(&out, &untouched, sizeof(out));
}

static void test_bad_magic(void **state)
{
	struct frame_hdr h = sample();
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	for (int i = 0; i < 4; i++) {
		uint64_t rid = 77;

		frame_hdr_encode(&h, b);
		b[i] ^= 0x20; /* "pPR1", "PpR1", ... */
		expect_refused(b, &lim_default, PPRPC_EPROTO);
		/* no request id from a header whose magic is wrong */
		assert_int_equal(frame_hdr_decode(b, &lim_default, &(struct frame_hdr){ 0 }, &rid),
				 PPRPC_EPROTO);
		assert_int_equal(rid, 77);
	}
	memset(b, 0, sizeof(b));
	expect_refused(b, &lim_default, PPRPC_EPROTO);
}

static void test_wrong_version(void **state)
{
	const uint16_t versions[] = { 0, 2, 0x0100, 0xffff };
	struct frame_hdr h = sample();
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		uint64_t rid = 0;

		h.version = versions[i];
		frame_hdr_encode(&h, b);
		expect_refused(b, &lim_default, PPRPC_EVERSION);
		assert_int_equal(frame_hdr_decode(b, &lim_default, &(struct frame_hdr){ 0 }, &rid),
				 PPRPC_EVERSION);
		/* the request id is still returned so the error reply can echo it */
		assert_true(rid == h.req_id);
	}
}

static void test_unknown_flags(void **state)
{
	struct frame_hdr h = sample();
	uint8_t b[FRAME_HDR_SIZE];
	uint64_t rid = 0;

	(void)state;
	for (int bit = 0; bit < 32; bit++) {
		if ((1u << bit) & FRAME_F_KNOWN)
			continue;
		h = sample();
		h.flags |= 1u << bit;
		frame_hdr_encode(&h, b);
		expect_refused(b, &lim_default, PPRPC_EPROTO);
	}
	h = sample();
	h.flags = 0xffffffffu;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim_default, &(struct frame_hdr){ 0 }, &rid),
			 PPRPC_EPROTO);
	assert_true(rid == h.req_id); /* magic matched: the id is known */
}

static void test_bulk_flag_consistency(void **state)
{
	struct frame_hdr h = sample(), out;
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	/* flag set, length 0 */
	h.flags = FRAME_F_BULK;
	h.bulk_len = 0;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim_default, PPRPC_EPROTO);
	/* length set, no flag */
	h.flags = FRAME_F_REPLY;
	h.bulk_len = 1;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim_default, PPRPC_EPROTO);
	/* a huge length without the flag is a protocol error, not a size error */
	h.flags = 0;
	h.bulk_len = UINT64_MAX;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim_default, PPRPC_EPROTO);
	/* both consistent */
	h.flags = FRAME_F_BULK | FRAME_F_REPLY;
	h.bulk_len = 1;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim_default, &out, NULL), 0);
	h.flags = 0;
	h.bulk_len = 0;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim_default, &out, NULL), 0);
}

static void test_meta_limits(void **state)
{
	struct frame_limits lim = { .max_meta = 100, .max_bulk = 1000 };
	struct frame_limits over = { .max_meta = UINT32_MAX, .max_bulk = 1000 };
	struct frame_hdr h = sample(), out;
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	h.flags = 0;
	h.bulk_len = 0;

	h.meta_len = 100;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim, &out, NULL), 0);
	assert_int_equal(out.meta_len, 100);

	h.meta_len = 101;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim, PPRPC_ETOOBIG);

	/* 1 MiB is a hard cap even when the configured limit is larger */
	h.meta_len = PPRPC_MAX_META;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &over, &out, NULL), 0);
	h.meta_len = PPRPC_MAX_META + 1;
	frame_hdr_encode(&h, b);
	expect_refused(b, &over, PPRPC_ETOOBIG);
	h.meta_len = UINT32_MAX;
	frame_hdr_encode(&h, b);
	expect_refused(b, &over, PPRPC_ETOOBIG);
	expect_refused(b, &lim_default, PPRPC_ETOOBIG);
}

static void test_bulk_limits(void **state)
{
	struct frame_limits lim = { .max_meta = 100, .max_bulk = 1000 };
	struct frame_hdr h = sample(), out;
	uint8_t b[FRAME_HDR_SIZE];

	(void)state;
	h.meta_len = 10;
	h.flags = FRAME_F_BULK;

	h.bulk_len = 1000;
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_hdr_decode(b, &lim, &out, NULL), 0);
	assert_true(out.bulk_len == 1000);

	h.bulk_len = 1001;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim, PPRPC_ETOOBIG);

	h.bulk_len = UINT64_MAX;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim, PPRPC_ETOOBIG);

	lim.max_bulk = 0; /* no bulk at all accepted */
	h.bulk_len = 1;
	frame_hdr_encode(&h, b);
	expect_refused(b, &lim, PPRPC_ETOOBIG);
}

/* peek reads whatever is there, even a header decode refuses. */
static void test_peek_unvalidated(void **state)
{
	uint8_t b[FRAME_HDR_SIZE];
	struct frame_hdr h;

	(void)state;
	for (int i = 0; i < FRAME_HDR_SIZE; i++)
		b[i] = (uint8_t)(0xf0 + i);
	frame_hdr_peek(b, &h);
	assert_int_equal(h.version, 0xf5f4);
	assert_int_equal(h.type, 0xf7f6);
	assert_int_equal(h.flags, 0xfbfaf9f8u);
	assert_int_equal(h.meta_len, 0xfffefdfcu);
	{
		/* bytes 16..23 are 0x00..0x07 (0xf0 + i wraps), 24..31 are 0x08..0x0f */
		uint64_t want_bulk = 0, want_id = 0;

		for (int i = 7; i >= 0; i--) {
			want_bulk = (want_bulk << 8) | (uint8_t)(0xf0 + 16 + i);
			want_id = (want_id << 8) | (uint8_t)(0xf0 + 24 + i);
		}
		assert_true(h.bulk_len == want_bulk);
		assert_true(h.req_id == want_id);
	}
	assert_int_equal(frame_hdr_decode(b, &lim_default, &(struct frame_hdr){ 0 }, NULL),
			 PPRPC_EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_layout_real_header),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_ret_req_id_optional),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_unknown_flags),
		cmocka_unit_test(test_bulk_flag_consistency),
		cmocka_unit_test(test_meta_limits),
		cmocka_unit_test(test_bulk_limits),
		cmocka_unit_test(test_peek_unvalidated),
	};

	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}

/*
 * tests/unit/test_frame_reader.c — the incremental frame parser.
 *
 * Every callback is recorded as a line of text (type, request id, the meta
 * bytes, the bulk bytes as they landed), so "the same frames, whatever the
 * pieces" is one string comparison.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/frame_reader.h"

/* ---- recording receiver ------------------------------------------------- */

#define POOL_SIZE 4096

struct rec {
	char *log;
	size_t log_len, log_cap;
	unsigned n_header, n_meta, n_frame;
	/* bulk destinations are carved from pool, one fresh region per frame,
	 * with a guard byte after each region */
	uint8_t pool[POOL_SIZE];
	size_t pool_used;
	uint8_t *cur_dst;
	int discard_bulk;   /* on_meta leaves *bulk_dst NULL */
	/* make the n-th call (1-based) of a callback fail; 0 = never */
	unsigned fail_header_at, fail_meta_at, fail_frame_at;
	int fail_code;
};

static void logf_(struct rec *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = r->log_cap - r->log_len;

		va_start(ap, fmt);
		n = vsnprintf(r->log ? r->log + r->log_len : NULL, room, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if ((size_t)n < room)
			break;
		r->log_cap = (r->log_cap + (size_t)n + 1) * 2;
		r->log = realloc(r->log, r->log_cap);
		assert_non_null(r->log);
	}
	r->log_len += (size_t)n;
}

static void log_hex(struct rec *r, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		logf_(r, "%02x", p[i]);
}

static int on_header(void *ctx, const struct frame_hdr *h)
{
	struct rec *r = ctx;

	r->n_header++;
	logf_(r, "H type=%u id=%llu flags=%u meta=%u bulk=%llu\n", h->type,
	      (unsigned long long)h->req_id, h->flags, h->meta_len,
	      (unsigned long long)h->bulk_len);
	if (r->fail_header_at && r->n_header == r->fail_header_at)
		return r->fail_code;
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len,
		   void **bulk_dst)
{
	struct rec *r = ctx;

	r->n_meta++;
	assert_int_equal(len, h->meta_len);
	assert_null(*bulk_dst); /* the reader starts it at NULL */
	logf_(r, "M type=%u id=%llu len=%zu ", h->type, (unsigned long long)h->req_id, len);
	log_hex(r, meta, len);
	logf_(r, "\n");
	r->cur_dst = NULL;
	if (h->bulk_len && !r->discard_bulk) {
		assert_true(h->bulk_len + 1 <= POOL_SIZE - r->pool_used);
		r->cur_dst = r->pool + r->pool_used;
		memset(r->cur_dst, 0xcc, h->bulk_len + 1);
		r->pool_used += h->bulk_len + 1;
		*bulk_dst = r->cur_dst;
	}
	if (r->fail_meta_at && r->n_meta == r->fail_meta_at)
		return r->fail_code;
	return 0;
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	struct rec *r = ctx;

	r->n_frame++;
	logf_(r, "F type=%u id=%llu bulk=", h->type, (unsigned long long)h->req_id);
	if (r->cur_dst) {
		log_hex(r, r->cur_dst, h->bulk_len);
		/* nothing written past the destination */
		assert_int_equal(r->cur_dst[h->bulk_len], 0xcc);
	} else {
		logf_(r, "-");
	}
	logf_(r, "\n");
	r->cur_dst = NULL;
	if (r->fail_frame_at && r->n_frame == r->fail_frame_at)
		return r->fail_code;
	return 0;
}

static const struct frame_reader_ops rec_ops = {
	.on_header = on_header,
	.on_meta = on_meta,
	.on_frame = on_frame,
};

static const struct frame_limits lim = { .max_meta = 1024, .max_bulk = 1024 };

static void rec_reset(struct rec *r)
{
	free(r->log);
	memset(r, 0, sizeof(*r));
}

/* ---- frame builder --------------------------------------------------------- */

struct stream {
	uint8_t b[2048];
	size_t len;
};

static size_t add_frame_hdr(struct stream *s, const struct frame_hdr *h, const void *meta,
			    const void *bulk)
{
	size_t start = s->len;

	assert_true(FRAME_HDR_SIZE + h->meta_len + h->bulk_len <= sizeof(s->b) - s->len);
	frame_hdr_encode(h, s->b + s->len);
	s->len += FRAME_HDR_SIZE;
	if (h->meta_len)
		memcpy(s->b + s->len, meta, h->meta_len);
	s->len += h->meta_len;
	if (h->bulk_len)
		memcpy(s->b + s->len, bulk, h->bulk_len);
	s->len += h->bulk_len;
	return start;
}

static size_t add_frame(struct stream *s, uint16_t type, uint64_t id, const void *meta,
			uint32_t mlen, const void *bulk, uint64_t blen)
{
	struct frame_hdr h = {
		.version = PPRPC_PROTO_VERSION,
		.type = type,
		.flags = blen ? FRAME_F_BULK : 0,
		.meta_len = mlen,
		.bulk_len = blen,
		.req_id = id,
	};

	return add_frame_hdr(s, &h, meta, bulk);
}

/* Three frames: meta + bulk, meta only, neither. */
static void three_frames(struct stream *s)
{
	static const uint8_t meta1[] = { 0x08, 0x01, 0x10, 0x02, 0x18, 0x07 };
	static const uint8_t bulk1[] = { 'a', 'b', 'c', 'd', 'e', 'f', 'g' };
	static const uint8_t meta2[] = { 0x08, 0x2a };

	s->len = 0;
	add_frame(s, MSG_TENSOR_SET, 1001, meta1, sizeof(meta1), bulk1, sizeof(bulk1));
	add_frame(s, MSG_GRAPH_RUN, 1002, meta2, sizeof(meta2), NULL, 0);
	add_frame(s, MSG_STATS, 1003, NULL, 0, NULL, 0);
}

static const char three_frames_log[] =
	"H type=5 id=1001 flags=4 meta=6 bulk=7\n"
	"M type=5 id=1001 len=6 080110021807\n"
	"F type=5 id=1001 bulk=61626364656667\n"
	"H type=9 id=1002 flags=0 meta=2 bulk=0\n"
	"M type=9 id=1002 len=2 082a\n"
	"F type=9 id=1002 bulk=-\n"
	"H type=12 id=1003 flags=0 meta=0 bulk=0\n"
	"M type=12 id=1003 len=0 \n"
	"F type=12 id=1003 bulk=-\n";

/* Feed s in pieces cut at the given offsets (ascending); return the log. */
static char *run_pieces(const struct stream *s, const size_t *cuts, size_t ncuts,
			uint64_t *ret_frames)
{
	struct frame_reader fr;
	struct rec r = { 0 };
	size_t at = 0;
	char *log;

	frame_reader_init(&fr, &rec_ops, &r, &lim);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : s->len;

		assert_int_equal(frame_reader_feed(&fr, s->b + at, end - at), 0);
		at = end;
	}
	assert_true(frame_reader_idle(&fr));
	*ret_frames = fr.frames;
	frame_reader_fini(&fr);
	logf_(&r, "%s", ""); /* make sure the log exists even when empty */
	log = r.log;
	r.log = NULL;
	rec_reset(&r);
	return log;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_whole(void **state)
{
	struct stream s;
	uint64_t frames;
	char *log;

	(void)state;
	three_frames(&s);
	log = run_pieces(&s, NULL, 0, &frames);
	assert_string_equal(log, three_frames_log);
	assert_int_equal(frames, 3);
	free(log);
}

static void test_byte_by_byte(void **state)
{
	struct stream s;
	size_t cuts[sizeof(s.b)];
	uint64_t frames;
	char *log;

	(void)state;
	three_frames(&s);
	for (size_t i = 0; i < s.len; i++)
		cuts[i] = i;
	log = run_pieces(&s, cuts, s.len, &frames);
	assert_string_equal(log, three_frames_log);
	assert_int_equal(frames, 3);
	free(log);
}

static void test_every_split(void **state)
{
	struct stream s;
	uint64_t frames;

	(void)state;
	three_frames(&s);
	/* one cut anywhere (including empty first and last pieces) */
	for (size_t a = 0; a <= s.len; a++) {
		char *log = run_pieces(&s, &a, 1, &frames);

		assert_string_equal(log, three_frames_log);
		assert_int_equal(frames, 3);
		free(log);
	}
	/* two cuts anywhere */
	for (size_t a = 0; a <= s.len; a++) {
		for (size_t b = a; b <= s.len; b++) {
			size_t cuts[2] = { a, b };
			char *log = run_pieces(&s, cuts, 2, &frames);

			assert_string_equal(log, three_frames_log);
			free(log);
		}
	}
}

static void test_frames_counter_and_idle(void **state)
{
	struct frame_reader fr;
	struct rec r = { 0 };
	struct stream s;

	(void)state;
	three_frames(&s);
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	assert_true(frame_reader_idle(&fr));
	assert_int_equal(fr.frames, 0);
	/* a feed of nothing is fine */
	assert_int_equal(frame_reader_feed(&fr, NULL, 0), 0);
	assert_true(frame_reader_idle(&fr));
	/* first frame: header only → not idle, no frame yet */
	assert_int_equal(frame_reader_feed(&fr, s.b, FRAME_HDR_SIZE), 0);
	assert_false(frame_reader_idle(&fr));
	assert_int_equal(fr.frames, 0);
	assert_int_equal(r.n_header, 1);
	assert_int_equal(r.n_meta, 0);
	/* rest of everything in one go: three frames in total */
	assert_int_equal(frame_reader_feed(&fr, s.b + FRAME_HDR_SIZE, s.len - FRAME_HDR_SIZE), 0);
	assert_true(frame_reader_idle(&fr));
	assert_int_equal(fr.frames, 3);
	assert_int_equal(r.n_header, 3);
	assert_int_equal(r.n_meta, 3);
	assert_int_equal(r.n_frame, 3);
	/* and once more: the counter keeps counting, the meta buffer is reused */
	assert_int_equal(frame_reader_feed(&fr, s.b, s.len), 0);
	assert_int_equal(fr.frames, 6);
	frame_reader_fini(&fr);
	frame_reader_fini(&fr); /* fini twice is harmless */
	rec_reset(&r);
}

static void test_zero_meta_with_bulk(void **state)
{
	static const uint8_t bulk[] = { 1, 2, 3 };
	struct frame_reader fr;
	struct rec r = { 0 };
	struct stream s = { .len = 0 };

	(void)state;
	add_frame(&s, MSG_TENSOR_SET, 7, NULL, 0, bulk, sizeof(bulk));
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	/* header alone: on_meta (len 0) happens at once, bulk still awaited */
	assert_int_equal(frame_reader_feed(&fr, s.b, FRAME_HDR_SIZE), 0);
	assert_int_equal(r.n_meta, 1);
	assert_int_equal(r.n_frame, 0);
	assert_int_equal(fr.state, FR_BULK);
	assert_int_equal(frame_reader_feed(&fr, s.b + FRAME_HDR_SIZE, 3), 0);
	assert_int_equal(r.n_frame, 1);
	assert_string_equal(r.log, "H type=5 id=7 flags=4 meta=0 bulk=3\n"
				   "M type=5 id=7 len=0 \n"
				   "F type=5 id=7 bulk=010203\n");
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void test_bulk_to_destination(void **state)
{
	uint8_t bulk[200];
	struct frame_reader fr;
	struct rec r = { 0 };
	struct stream s = { .len = 0 };
	uint8_t *dst;

	(void)state;
	for (size_t i = 0; i < sizeof(bulk); i++)
		bulk[i] = (uint8_t)(i * 7 + 3);
	add_frame(&s, MSG_TENSOR_SET, 9, "\x08\x01", 2, bulk, sizeof(bulk));
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	/* odd pieces of 13 bytes */
	for (size_t at = 0; at < s.len; at += 13)
		assert_int_equal(frame_reader_feed(&fr, s.b + at, s.len - at < 13 ? s.len - at : 13), 0);
	assert_int_equal(fr.frames, 1);
	dst = r.pool; /* first (only) region */
	assert_memory_equal(dst, bulk, sizeof(bulk));
	assert_int_equal(dst[sizeof(bulk)], 0xcc);
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void test_bulk_discarded(void **state)
{
	uint8_t bulk[100];
	struct stream s = { .len = 0 };

	(void)state;
	memset(bulk, 0x77, sizeof(bulk));
	add_frame(&s, MSG_TENSOR_SET, 1, "\x08\x01", 2, bulk, sizeof(bulk));
	add_frame(&s, MSG_FENCE, 2, "\x08\x00", 2, NULL, 0);
	add_frame(&s, MSG_TENSOR_SET, 3, NULL, 0, bulk, 5);

	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct frame_reader fr;
		struct rec r = { .discard_bulk = 1 };

		frame_reader_init(&fr, &rec_ops, &r, &lim);
		if (bytewise) {
			for (size_t i = 0; i < s.len; i++)
				assert_int_equal(frame_reader_feed(&fr, s.b + i, 1), 0);
		} else {
			assert_int_equal(frame_reader_feed(&fr, s.b, s.len), 0);
		}
		assert_int_equal(fr.frames, 3);
		assert_true(frame_reader_idle(&fr));
		assert_string_equal(r.log, "H type=5 id=1 flags=4 meta=2 bulk=100\n"
					   "M type=5 id=1 len=2 0801\n"
					   "F type=5 id=1 bulk=-\n"
					   "H type=11 id=2 flags=0 meta=2 bulk=0\n"
					   "M type=11 id=2 len=2 0800\n"
					   "F type=11 id=2 bulk=-\n"
					   "H type=5 id=3 flags=4 meta=0 bulk=5\n"
					   "M type=5 id=3 len=0 \n"
					   "F type=5 id=3 bulk=-\n");
		/* nothing was written anywhere */
		assert_int_equal(r.pool_used, 0);
		frame_reader_fini(&fr);
		rec_reset(&r);
	}
}

static void test_window_advance(void **state)
{
	uint8_t bulk[64];
	struct frame_reader fr;
	struct rec r = { 0 };
	struct stream s = { .len = 0 };
	size_t bulk_at;
	void *p = NULL;
	size_t n = 99;

	(void)state;
	for (size_t i = 0; i < sizeof(bulk); i++)
		bulk[i] = (uint8_t)(0x40 + i);
	add_frame(&s, MSG_TENSOR_SET, 5, "\x08\x01", 2, bulk, sizeof(bulk));
	bulk_at = FRAME_HDR_SIZE + 2;
	add_frame(&s, MSG_GRAPH_RUN, 6, "\x08\x02", 2, NULL, 0);

	frame_reader_init(&fr, &rec_ops, &r, &lim);
	/* no window before the bulk part */
	frame_reader_window(&fr, &p, &n);
	assert_int_equal(n, 0);
	assert_int_equal(frame_reader_feed(&fr, s.b, bulk_at), 0);
	frame_reader_window(&fr, &p, &n);
	assert_ptr_equal(p, r.pool);
	assert_int_equal(n, sizeof(bulk));

	/* the transport writes 10 bytes straight into the window */
	memcpy(p, bulk, 10);
	assert_int_equal(frame_reader_advance(&fr, 10), 0);
	frame_reader_window(&fr, &p, &n);
	assert_ptr_equal(p, r.pool + 10);
	assert_int_equal(n, sizeof(bulk) - 10);

	/* feed and window may be mixed: 4 bytes through feed */
	assert_int_equal(frame_reader_feed(&fr, s.b + bulk_at + 10, 4), 0);
	frame_reader_window(&fr, &p, &n);
	assert_ptr_equal(p, r.pool + 14);
	assert_int_equal(n, sizeof(bulk) - 14);

	/* advance of 0 is allowed and changes nothing */
	assert_int_equal(frame_reader_advance(&fr, 0), 0);
	assert_int_equal(r.n_frame, 0);

	/* the rest completes the frame */
	memcpy(p, bulk + 14, n);
	assert_int_equal(frame_reader_advance(&fr, n), 0);
	assert_int_equal(r.n_frame, 1);
	assert_int_equal(fr.frames, 1);
	assert_true(frame_reader_idle(&fr));
	frame_reader_window(&fr, &p, &n);
	assert_int_equal(n, 0);

	/* and the reader goes on with the next frame */
	assert_int_equal(frame_reader_feed(&fr, s.b + bulk_at + sizeof(bulk),
					   s.len - bulk_at - sizeof(bulk)), 0);
	assert_int_equal(fr.frames, 2);
	assert_string_equal(r.log, "H type=5 id=5 flags=4 meta=2 bulk=64\n"
				   "M type=5 id=5 len=2 0801\n"
				   "F type=5 id=5 bulk="
				   "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
				   "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f\n"
				   "H type=9 id=6 flags=0 meta=2 bulk=0\n"
				   "M type=9 id=6 len=2 0802\n"
				   "F type=9 id=6 bulk=-\n");
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void test_advance_too_far(void **state)
{
	static const uint8_t bulk[8] = { 0 };
	struct frame_reader fr;
	struct rec r = { 0 };
	struct stream s = { .len = 0 };
	void *p;
	size_t n;

	(void)state;
	add_frame(&s, MSG_TENSOR_SET, 5, NULL, 0, bulk, sizeof(bulk));
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	assert_int_equal(frame_reader_feed(&fr, s.b, FRAME_HDR_SIZE), 0);
	assert_int_equal(frame_reader_advance(&fr, 3), 0);
	/* 5 left: 6 is too far */
	assert_int_equal(frame_reader_advance(&fr, 6), PPRPC_EINTERNAL);
	assert_int_equal(fr.state, FR_FAILED);
	assert_int_equal(r.n_frame, 0);
	/* sticky, for advance and feed alike */
	assert_int_equal(frame_reader_advance(&fr, 1), PPRPC_EINTERNAL);
	assert_int_equal(frame_reader_feed(&fr, s.b, s.len), PPRPC_EINTERNAL);
	assert_int_equal(frame_reader_feed(&fr, NULL, 0), PPRPC_EINTERNAL);
	frame_reader_window(&fr, &p, &n);
	assert_int_equal(n, 0);
	assert_int_equal(r.n_header, 1);
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void test_advance_without_window(void **state)
{
	static const uint8_t bulk[8] = { 0 };
	struct stream s = { .len = 0 };

	(void)state;
	add_frame(&s, MSG_TENSOR_SET, 5, NULL, 0, bulk, sizeof(bulk));
	/* between frames */
	{
		struct frame_reader fr;
		struct rec r = { 0 };

		frame_reader_init(&fr, &rec_ops, &r, &lim);
		assert_int_equal(frame_reader_advance(&fr, 1), PPRPC_EINTERNAL);
		assert_int_equal(frame_reader_feed(&fr, s.b, s.len), PPRPC_EINTERNAL);
		frame_reader_fini(&fr);
		rec_reset(&r);
	}
	/* in a bulk that is being discarded (no destination, so no window) */
	{
		struct frame_reader fr;
		struct rec r = { .discard_bulk = 1 };
		void *p;
		size_t n = 1;

		frame_reader_init(&fr, &rec_ops, &r, &lim);
		assert_int_equal(frame_reader_feed(&fr, s.b, FRAME_HDR_SIZE), 0);
		frame_reader_window(&fr, &p, &n);
		assert_int_equal(n, 0);
		assert_int_equal(frame_reader_advance(&fr, 1), PPRPC_EINTERNAL);
		frame_reader_fini(&fr);
		rec_reset(&r);
	}
}

/* A callback that fails stops the reader there: nothing after it is parsed,
 * and the error comes back from every later call. */
static void check_callback_failure(unsigned fh, unsigned fm, unsigned ff, unsigned want_h,
				   unsigned want_m, unsigned want_f, uint64_t want_frames,
				   uint64_t want_err_id)
{
	struct frame_reader fr;
	struct rec r = { .fail_header_at = fh, .fail_meta_at = fm, .fail_frame_at = ff,
			 .fail_code = -1234 };
	struct stream s;

	three_frames(&s);
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	assert_int_equal(frame_reader_feed(&fr, s.b, s.len), -1234);
	assert_int_equal(fr.state, FR_FAILED);
	assert_int_equal(fr.error, -1234);
	assert_int_equal(r.n_header, want_h);
	assert_int_equal(r.n_meta, want_m);
	assert_int_equal(r.n_frame, want_f);
	assert_int_equal(fr.frames, want_frames);
	assert_true(fr.error_req_id == want_err_id);
	/* sticky */
	assert_int_equal(frame_reader_feed(&fr, s.b, s.len), -1234);
	assert_int_equal(frame_reader_feed(&fr, NULL, 0), -1234);
	assert_int_equal(frame_reader_advance(&fr, 0), -1234);
	assert_int_equal(r.n_header, want_h);
	assert_int_equal(r.n_meta, want_m);
	assert_int_equal(r.n_frame, want_f);
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void test_callback_failure_sticky(void **state)
{
	(void)state;
	check_callback_failure(1, 0, 0, 1, 0, 0, 0, 1001);
	check_callback_failure(2, 0, 0, 2, 1, 1, 1, 1002);
	check_callback_failure(0, 1, 0, 1, 1, 0, 0, 1001);
	check_callback_failure(0, 3, 0, 3, 3, 2, 2, 1003);
	/* on_frame fails after the frame was counted */
	check_callback_failure(0, 0, 1, 1, 1, 1, 1, 1001);
	check_callback_failure(0, 0, 3, 3, 3, 3, 3, 1003);
}

static void test_callback_failure_bytewise(void **state)
{
	struct frame_reader fr;
	struct rec r = { .fail_meta_at = 2, .fail_code = PPRPC_EPROTO };
	struct stream s;
	size_t i;
	int rc = 0;

	(void)state;
	three_frames(&s);
	frame_reader_init(&fr, &rec_ops, &r, &lim);
	for (i = 0; i < s.len && rc == 0; i++)
		rc = frame_reader_feed(&fr, s.b + i, 1);
	assert_int_equal(rc, PPRPC_EPROTO);
	/* it failed on the last meta byte of frame 2 */
	assert_int_equal(i, 32 + 6 + 7 + 32 + 2);
	for (; i < s.len; i++)
		assert_int_equal(frame_reader_feed(&fr, s.b + i, 1), PPRPC_EPROTO);
	assert_int_equal(r.n_header, 2);
	assert_int_equal(r.n_frame, 1);
	assert_true(fr.error_req_id == 1002);
	frame_reader_fini(&fr);
	rec_reset(&r);
}

static void check_header_error(const struct frame_hdr *bad, const uint8_t *magic, int want,
			       uint64_t want_err_id)
{
	struct stream s = { .len = 0 };
	size_t at;

	add_frame(&s, MSG_GRAPH_RUN, 55, "\x08\x02", 2, NULL, 0);
	/* the bad header alone: its lengths are never honoured */
	at = s.len;
	frame_hdr_encode(bad, s.b + at);
	s.len += FRAME_HDR_SIZE;
	if (magic)
		memcpy(s.b + at, magic, 4);
	/* a valid frame after the bad one is never seen */
	add_frame(&s, MSG_GRAPH_RUN, 56, "\x08\x02", 2, NULL, 0);

	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct frame_reader fr;
		struct rec r = { 0 };
		int rc = 0;

		frame_reader_init(&fr, &rec_ops, &r, &lim);
		if (bytewise) {
			for (size_t i = 0; i < s.len && rc == 0; i++)
				rc = frame_reader_feed(&fr, s.b + i, 1);
		} else {
			rc = frame_reader_feed(&fr, s.b, s.len);
		}
		assert_int_equal(rc, want);
		assert_int_equal(fr.error, want);
		assert_true(fr.error_req_id == want_err_id);
		assert_int_equal(fr.frames, 1);
		assert_int_equal(r.n_header, 1); /* on_header not called for the bad one */
		assert_int_equal(frame_reader_feed(&fr, s.b, s.len), want);
		frame_reader_fini(&fr);
		rec_reset(&r);
	}
}

static void test_header_errors(void **state)
{
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = MSG_TENSOR_SET,
			       .flags = 0, .meta_len = 0, .bulk_len = 0, .req_id = 0xabcdef };
	struct frame_hdr v;

	(void)state;
	/* bad magic: the id is unknown (0), not the previous frame's */
	check_header_error(&h, (const uint8_t *)"PPR2", PPRPC_EPROTO, 0);
	check_header_error(&h, (const uint8_t *)"\0\0\0\0", PPRPC_EPROTO, 0);
	/* wrong version: the id is known */
	v = h;
	v.version = 2;
	check_header_error(&v, NULL, PPRPC_EVERSION, 0xabcdef);
	/* unknown flag */
	v = h;
	v.flags = 1u << 7;
	check_header_error(&v, NULL, PPRPC_EPROTO, 0xabcdef);
	/* bulk flag without bulk */
	v = h;
	v.flags = FRAME_F_BULK;
	check_header_error(&v, NULL, PPRPC_EPROTO, 0xabcdef);
	/* meta over the reader's limit (1024) */
	v = h;
	v.meta_len = 1025;
	check_header_error(&v, NULL, PPRPC_ETOOBIG, 0xabcdef);
	/* bulk over the reader's limit (1024) */
	v = h;
	v.flags = FRAME_F_BULK;
	v.bulk_len = 1025;
	check_header_error(&v, NULL, PPRPC_ETOOBIG, 0xabcdef);
	v.bulk_len = UINT64_MAX;
	check_header_error(&v, NULL, PPRPC_ETOOBIG, 0xabcdef);
}

/* A configured meta limit above 1 MiB is clamped to 1 MiB. */
static void test_meta_limit_clamped(void **state)
{
	const struct frame_limits big = { .max_meta = UINT32_MAX, .max_bulk = 0 };
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = MSG_HELLO,
			       .meta_len = PPRPC_MAX_META + 1, .req_id = 3 };
	uint8_t b[FRAME_HDR_SIZE];
	struct frame_reader fr;
	struct rec r = { 0 };

	(void)state;
	frame_reader_init(&fr, &rec_ops, &r, &big);
	assert_int_equal(fr.lim.max_meta, PPRPC_MAX_META);
	frame_hdr_encode(&h, b);
	assert_int_equal(frame_reader_feed(&fr, b, sizeof(b)), PPRPC_ETOOBIG);
	assert_int_equal(fr.error_req_id, 3);
	assert_int_equal(r.n_header, 0);
	frame_reader_fini(&fr);
	rec_reset(&r);
}

/* A meta of exactly 1 MiB arriving in pieces is reassembled. */
static void test_meta_one_mib_split(void **state)
{
	const struct frame_limits big = { .max_meta = PPRPC_MAX_META, .max_bulk = 0 };
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = MSG_GRAPH_CREATE,
			       .meta_len = PPRPC_MAX_META, .req_id = 4 };
	size_t total = FRAME_HDR_SIZE + PPRPC_MAX_META;
	uint8_t *b = malloc(total);
	struct frame_reader fr;
	struct rec r = { 0 };
	uint64_t sum = 0;
	const char *hex;

	(void)state;
	assert_non_null(b);
	frame_hdr_encode(&h, b);
	for (size_t i = 0; i < PPRPC_MAX_META; i++)
		b[FRAME_HDR_SIZE + i] = (uint8_t)(i % 251);
	frame_reader_init(&fr, &rec_ops, &r, &big);
	for (size_t at = 0; at < total; at += 65537)
		assert_int_equal(frame_reader_feed(&fr, b + at, total - at < 65537 ? total - at : 65537), 0);
	assert_int_equal(fr.frames, 1);
	assert_int_equal(r.n_meta, 1);
	/* the recorded meta hex equals the bytes sent */
	hex = strstr(r.log, "len=1048576 ");
	assert_non_null(hex);
	hex += strlen("len=1048576 ");
	for (size_t i = 0; i < PPRPC_MAX_META; i++) {
		unsigned v;

		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		if (v != b[FRAME_HDR_SIZE + i])
			fail_msg("meta byte %zu: %02x != %02x", i, v, b[FRAME_HDR_SIZE + i]);
		sum += v;
	}
	assert_true(sum > 0);
	frame_reader_fini(&fr);
	rec_reset(&r);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_every_split),
		cmocka_unit_test(test_frames_counter_and_idle),
		cmocka_unit_test(test_zero_meta_with_bulk),
		cmocka_unit_test(test_bulk_to_destination),
		cmocka_unit_test(test_bulk_discarded),
		cmocka_unit_test(test_window_advance),
		cmocka_unit_test(test_advance_too_far),
		cmocka_unit_test(test_advance_without_window),
		cmocka_unit_test(test_callback_failure_sticky),
		cmocka_unit_test(test_callback_failure_bytewise),
		cmocka_unit_test(test_header_errors),
		cmocka_unit_test(test_meta_limit_clamped),
		cmocka_unit_test(test_meta_one_mib_split),
	};

	return cmocka_run_group_tests_name("frame_reader", tests, NULL, NULL);
}

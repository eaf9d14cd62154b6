/*
 * tests/fuzz/fuzz_frame.c — libFuzzer target for the receive path: the
 * incremental frame reader, the header codec and the bounded meta decoder.
 *
 * Input layout:
 *   byte 0  control
 *           bits 0-3  piece size: 0 = the whole rest in one feed, else pieces
 *                     of 1 .. 2^bits bytes drawn from a generator seeded by byte 1
 *           bit 4     receive bulk through frame_reader_window/advance (as a
 *                     transport reading straight into the destination does)
 *           bit 5     now and then advance one byte past the window (must fail)
 *           bit 6     discard every bulk (destination NULL)
 *           bit 7     a meta that does not decode stops the reader
 *   byte 1  seed of the piece sizes
 *   rest    the byte stream, as received from a peer
 *
 * Besides "no crash, no leak, no out-of-bounds access", the target checks the
 * reader's contract and aborts when it is broken: lengths within the limits,
 * callbacks in order, frames counted, errors sticky, windows inside the
 * destination.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/frame_reader.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

#define MAX_META PPRPC_MAX_META
#define MAX_BULK (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Request message of each type, as the daemon's dispatch table has them. */
static const ProtobufCMessageDescriptor *const req_desc[MSG_TYPE_COUNT] = {
	[MSG_HELLO] = &pprpc__hello__descriptor,
	[MSG_BUFFER_ALLOC] = &pprpc__buffer_alloc__descriptor,
	[MSG_BUFFER_FREE] = &pprpc__buffer_free__descriptor,
	[MSG_BUFFER_CLEAR] = &pprpc__buffer_clear__descriptor,
	[MSG_TENSOR_SET] = &pprpc__tensor_set__descriptor,
	[MSG_TENSOR_GET] = &pprpc__tensor_get__descriptor,
	[MSG_TENSOR_COPY] = &pprpc__tensor_copy__descriptor,
	[MSG_GRAPH_CREATE] = &pprpc__graph_create__descriptor,
	[MSG_GRAPH_RUN] = &pprpc__graph_run__descriptor,
	[MSG_GRAPH_FREE] = &pprpc__graph_free__descriptor,
	[MSG_FENCE] = &pprpc__fence__descriptor,
	[MSG_STATS] = &pprpc__stats__descriptor,
	[MSG_HOST_PAGE_MAP] = &pprpc__host_page_map__descriptor,
	[MSG_HOST_PAGE_UNMAP] = &pprpc__host_page_unmap__descriptor,
};

/* Where accepted bulk lands; one for the whole process, like a staging area. */
static uint8_t scratch[MAX_BULK];

enum { CTL_PIECE = 0x0f, CTL_WINDOW = 0x10, CTL_OVERRUN = 0x20, CTL_DISCARD = 0x40,
       CTL_STRICT = 0x80 };

struct fctx {
	unsigned ctl;
	uint64_t headers, metas, frames;
	int in_frame;       /* on_header seen, on_frame not yet */
	int have_dst;
	uint64_t bulk_len;
};

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static int on_header(void *ctx, const struct frame_hdr *h)
{
	struct fctx *f = ctx;

	CHECK(!f->in_frame);
	CHECK(h->version == PPRPC_PROTO_VERSION);
	CHECK(h->meta_len <= MAX_META);
	CHECK(h->bulk_len <= MAX_BULK);
	CHECK(!(h->flags & ~(uint32_t)FRAME_F_KNOWN));
	CHECK(!(h->flags & FRAME_F_BULK) == !h->bulk_len);
	f->headers++;
	f->in_frame = 1;
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len,
		   void **bulk_dst)
{
	struct fctx *f = ctx;
	int decoded = 1;

	CHECK(f->in_frame);
	CHECK(len == h->meta_len);
	CHECK(*bulk_dst == NULL);
	f->metas++;
	if (h->type < MSG_TYPE_COUNT && req_desc[h->type]) {
		ProtobufCMessage *m = NULL;
		int rc = meta_unpack(req_desc[h->type], meta, len, &m);

		/* PPRPC_EINVAL: a string field holding a NUL (proto/meta.h) */
		CHECK(rc == 0 || rc == PPRPC_EPROTO || rc == PPRPC_ETOOBIG || rc == PPRPC_EINVAL);
		if (rc == 0) {
			CHECK(m && m->descriptor == req_desc[h->type]);
			/* what decoded must encode again within the same bounds */
			CHECK(meta_size(m) <= (size_t)MAX_META * 16);
			meta_free(m);
		} else {
			decoded = 0;
			if (f->ctl & CTL_STRICT)
				return rc;
		}
	}
	f->have_dst = 0;
	f->bulk_len = h->bulk_len;
	if (h->bulk_len && decoded && !(f->ctl & CTL_DISCARD) && h->bulk_len <= sizeof(scratch)) {
		*bulk_dst = scratch;
		f->have_dst = 1;
	}
	return 0;
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	struct fctx *f = ctx;

	CHECK(f->in_frame);
	CHECK(f->bulk_len == h->bulk_len);
	f->frames++;
	f->in_frame = 0;
	f->have_dst = 0;
	return 0;
}

static const struct frame_reader_ops ops = {
	.on_header = on_header,
	.on_meta = on_meta,
	.on_frame = on_frame,
};

static uint32_t next_rand(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct frame_limits lim = { .max_meta = MAX_META, .max_bulk = MAX_BULK };
	struct frame_reader fr;
	struct fctx f = { 0 };
	uint32_t seed;
	int rc = 0;

	if (size < 2)
		return 0;
	f.ctl = data[0];
	seed = data[1];
	data += 2;
	size -= 2;

	frame_reader_init(&fr, &ops, &f, &lim);
	while (size > 0 && rc == 0) {
		size_t piece = size;
		unsigned bits = f.ctl & CTL_PIECE;

		if (bits)
			piece = 1 + next_rand(&seed) % (1u << bits);
		if (piece > size)
			piece = size;

		if (f.ctl & CTL_WINDOW) {
			void *p = NULL;
			size_t n = 0;

			frame_reader_window(&fr, &p, &n);
			CHECK(n == 0 || f.have_dst);
			if (n > 0) {
				CHECK((uint8_t *)p >= scratch && n <= sizeof(scratch) &&
				      (size_t)((uint8_t *)p - scratch) <= sizeof(scratch) - n);
				if ((f.ctl & CTL_OVERRUN) && next_rand(&seed) % 8 == 0) {
					rc = frame_reader_advance(&fr, n + 1);
					CHECK(rc == PPRPC_EINTERNAL);
					break;
				}
				if (piece > n)
					piece = n;
				memcpy(p, data, piece);
				rc = frame_reader_advance(&fr, piece);
				data += piece;
				size -= piece;
				continue;
			}
		}
		rc = frame_reader_feed(&fr, data, piece);
		data += piece;
		size -= piece;
	}

	CHECK(fr.frames == f.frames);
	CHECK(f.headers >= f.frames && f.headers - f.frames <= 1);
	CHECK(f.metas >= f.frames && f.metas <= f.headers);
	if (rc < 0) {
		/* the error is sticky */
		CHECK(fr.state == FR_FAILED && fr.error == rc);
		CHECK(frame_reader_feed(&fr, (const uint8_t *)"PPR1", 4) == rc);
		CHECK(frame_reader_advance(&fr, 0) == rc);
	} else {
		CHECK(rc == 0);
		CHECK(!f.in_frame || !frame_reader_idle(&fr));
	}
	frame_reader_fini(&fr);
	return 0;
}

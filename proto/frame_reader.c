/* proto/frame_reader.c — incremental frame parser (see frame_reader.h). */
#include "proto/frame_reader.h"

#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

void frame_reader_init(struct frame_reader *r, const struct frame_reader_ops *ops, void *ctx,
		       const struct frame_limits *lim)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->ctx = ctx;
	r->lim = *lim;
	if (r->lim.max_meta > PPRPC_MAX_META)
		r->lim.max_meta = PPRPC_MAX_META;
	r->state = FR_HEADER;
}

void frame_reader_fini(struct frame_reader *r)
{
	free(r->meta);
	r->meta = NULL;
	r->meta_cap = 0;
}

static int fail(struct frame_reader *r, int err)
{
	r->state = FR_FAILED;
	r->error = err;
	return err;
}

/* The frame is complete: tell the receiver and start the next one. */
static int finish_frame(struct frame_reader *r)
{
	struct frame_hdr h = r->hdr;
	int rc;

	r->state = FR_HEADER;
	r->hdr_got = 0;
	r->meta_got = 0;
	r->bulk_dst = NULL;
	r->bulk_got = 0;
	r->frames++;
	rc = r->ops->on_frame(r->ctx, &h);
	return rc < 0 ? fail(r, rc) : 0;
}

static int meta_done(struct frame_reader *r, const uint8_t *meta)
{
	void *dst = NULL;
	int rc = r->ops->on_meta(r->ctx, &r->hdr, meta, r->hdr.meta_len, &dst);

	if (rc < 0)
		return fail(r, rc);
	if (r->hdr.bulk_len == 0)
		return finish_frame(r);
	r->bulk_dst = dst;
	r->bulk_got = 0;
	r->state = FR_BULK;
	return 0;
}

static int header_done(struct frame_reader *r)
{
	uint64_t req_id = 0;
	int rc = frame_hdr_decode(r->hdr_buf, &r->lim, &r->hdr, &req_id);

	r->error_req_id = req_id;
	if (rc < 0)
		return fail(r, rc);
	rc = r->ops->on_header(r->ctx, &r->hdr);
	if (rc < 0)
		return fail(r, rc);
	r->meta_got = 0;
	r->state = FR_META;
	return 0;
}

/* Grow the meta buffer to hold `need` bytes; need <= lim.max_meta was
 * checked by frame_hdr_decode, so the allocation is bounded. */
static int meta_reserve(struct frame_reader *r, size_t need)
{
	uint8_t *p;

	if (need <= r->meta_cap)
		return 0;
	p = realloc(r->meta, need);
	if (!p)
		return PPRPC_ENOMEM;
	r->meta = p;
	r->meta_cap = need;
	return 0;
}

int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len)
{
	int rc;

	while (len > 0 || r->state == FR_META) {
		switch (r->state) {
		case FR_FAILED:
			return r->error;
		case FR_HEADER: {
			size_t n = FRAME_HDR_SIZE - r->hdr_got;

			if (n > len)
				n = len;
			memcpy(r->hdr_buf + r->hdr_got, data, n);
			r->hdr_got += n;
			data += n;
			len -= n;
			if (r->hdr_got == FRAME_HDR_SIZE && (rc = header_done(r)) < 0)
				return rc;
			break;
		}
		case FR_META: {
			size_t need = r->hdr.meta_len - r->meta_got;
			size_t n = need < len ? need : len;

			/* The whole meta is in this piece: hand it over in place. */
			if (r->meta_got == 0 && n == need) {
				if ((rc = meta_done(r, data)) < 0)
					return rc;
				data += n;
				len -= n;
				break;
			}
			if (n == 0)
				return 0;
			if ((rc = meta_reserve(r, r->hdr.meta_len)) < 0)
				return fail(r, rc);
			memcpy(r->meta + r->meta_got, data, n);
			r->meta_got += n;
			data += n;
			len -= n;
			if (r->meta_got == r->hdr.meta_len && (rc = meta_done(r, r->meta)) < 0)
				return rc;
			break;
		}
		case FR_BULK: {
			uint64_t need = r->hdr.bulk_len - r->bulk_got;
			size_t n = need < len ? (size_t)need : len;

			if (r->bulk_dst)
				memcpy(r->bulk_dst + r->bulk_got, data, n);
			r->bulk_got += n;
			data += n;
			len -= n;
			if (r->bulk_got == r->hdr.bulk_len && (rc = finish_frame(r)) < 0)
				return rc;
			break;
		}
		}
	}
	return r->state == FR_FAILED ? r->error : 0;
}

void frame_reader_window(const struct frame_reader *r, void **ret_ptr, size_t *ret_len)
{
	uint64_t left;

	if (r->state != FR_BULK || !r->bulk_dst) {
		*ret_len = 0;
		return;
	}
	left = r->hdr.bulk_len - r->bulk_got;
	*ret_ptr = r->bulk_dst + r->bulk_got;
	*ret_len = left > SIZE_MAX ? SIZE_MAX : (size_t)left;
}

int frame_reader_advance(struct frame_reader *r, size_t n)
{
	if (r->state == FR_FAILED)
		return r->error;
	if (r->state != FR_BULK || !r->bulk_dst || n > r->hdr.bulk_len - r->bulk_got)
		return fail(r, PPRPC_EINTERNAL);
	r->bulk_got += n;
	if (r->bulk_got == r->hdr.bulk_len)
		return finish_frame(r);
	return 0;
}

bool frame_reader_idle(const struct frame_reader *r)
{
	return r->state == FR_HEADER && r->hdr_got == 0;
}

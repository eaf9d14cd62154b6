/* proto/frame.c — frame header codec (see frame.h). */
#include "proto/frame.h"

#include <stddef.h>
#include <string.h>

#include "pprpc/types.h"

/* The header as it lies on the wire; only used to pin the layout. */
struct frame_wire {
	uint8_t magic[4];
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t meta_len;
	uint64_t bulk_len;
	uint64_t req_id;
};
_Static_assert(sizeof(struct frame_wire) == FRAME_HDR_SIZE, "frame header is 32 bytes");
_Static_assert(offsetof(struct frame_wire, version) == 4, "version at 4");
_Static_assert(offsetof(struct frame_wire, type) == 6, "type at 6");
_Static_assert(offsetof(struct frame_wire, flags) == 8, "flags at 8");
_Static_assert(offsetof(struct frame_wire, meta_len) == 12, "meta length at 12");
_Static_assert(offsetof(struct frame_wire, bulk_len) == 16, "bulk length at 16");
_Static_assert(offsetof(struct frame_wire, req_id) == 24, "request id at 24");
_Static_assert(MSG_TYPE_COUNT <= UINT16_MAX, "types fit 16 bits");

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) | ((uint32_t)get16(p + 2) << 16); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32); }

void frame_hdr_encode(const struct frame_hdr *h, uint8_t out[FRAME_HDR_SIZE])
{
	out[0] = FRAME_MAGIC0;
	out[1] = FRAME_MAGIC1;
	out[2] = FRAME_MAGIC2;
	out[3] = FRAME_MAGIC3;
	put16(out + offsetof(struct frame_wire, version), h->version);
	put16(out + offsetof(struct frame_wire, type), h->type);
	put32(out + offsetof(struct frame_wire, flags), h->flags);
	put32(out + offsetof(struct frame_wire, meta_len), h->meta_len);
	put64(out + offsetof(struct frame_wire, bulk_len), h->bulk_len);
	put64(out + offsetof(struct frame_wire, req_id), h->req_id);
}

void frame_hdr_peek(const uint8_t in[FRAME_HDR_SIZE], struct frame_hdr *h)
{
	h->version = get16(in + offsetof(struct frame_wire, version));
	h->type = get16(in + offsetof(struct frame_wire, type));
	h->flags = get32(in + offsetof(struct frame_wire, flags));
	h->meta_len = get32(in + offsetof(struct frame_wire, meta_len));
	h->bulk_len = get64(in + offsetof(struct frame_wire, bulk_len));
	h->req_id = get64(in + offsetof(struct frame_wire, req_id));
}

int frame_hdr_decode(const uint8_t in[FRAME_HDR_SIZE], const struct frame_limits *lim,
		     struct frame_hdr *out, uint64_t *ret_req_id)
{
	struct frame_hdr h;

	if (in[0] != FRAME_MAGIC0 || in[1] != FRAME_MAGIC1 || in[2] != FRAME_MAGIC2 ||
	    in[3] != FRAME_MAGIC3)
		return PPRPC_EPROTO;
	frame_hdr_peek(in, &h);
	if (ret_req_id)
		*ret_req_id = h.req_id;

	if (h.version != PPRPC_PROTO_VERSION)
		return PPRPC_EVERSION;
	if (h.flags & ~(uint32_t)FRAME_F_KNOWN)
		return PPRPC_EPROTO;
	if (!(h.flags & FRAME_F_BULK) != !h.bulk_len)
		return PPRPC_EPROTO;
	if (h.meta_len > lim->max_meta || h.meta_len > PPRPC_MAX_META)
		return PPRPC_ETOOBIG;
	if (h.bulk_len > lim->max_bulk)
		return PPRPC_ETOOBIG;
	*out = h;
	return 0;
}

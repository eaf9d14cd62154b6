/*
 * proto/frame.h — the frame codec.
 *
 * A frame is a 32-byte little-endian header, a protobuf-c `meta` message and
 * an optional raw `bulk` payload.  The header layout is the wire contract
 * (DESIGN.md); struct frame_wire pins it byte for byte, and the codec reads
 * and writes it with explicit little-endian accessors so host endianness and
 * padding never matter.
 */
#ifndef PPRPC_PROTO_FRAME_H
#define PPRPC_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto/msgtype.h"

#define FRAME_HDR_SIZE 32
#define FRAME_MAGIC0 'P'
#define FRAME_MAGIC1 'P'
#define FRAME_MAGIC2 'R'
#define FRAME_MAGIC3 '1'

/* Decoded header (host order). */
struct frame_hdr {
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t meta_len;
	uint64_t bulk_len;
	uint64_t req_id;
};

/* Limits applied to every received header before anything is allocated. */
struct frame_limits {
	uint32_t max_meta;   /* <= PPRPC_MAX_META */
	uint64_t max_bulk;
};

void frame_hdr_encode(const struct frame_hdr *h, uint8_t out[FRAME_HDR_SIZE]);

/* Decode and validate a received header: magic, version, known flags, lengths
 * within limits, bulk flag consistent with bulk length.  Writes *out only on
 * success (except the request id, which is written whenever the magic
 * matched, so that an error reply can still echo it).  Returns 0,
 * PPRPC_EPROTO, PPRPC_EVERSION or PPRPC_ETOOBIG. */
int frame_hdr_decode(const uint8_t in[FRAME_HDR_SIZE], const struct frame_limits *lim,
		     struct frame_hdr *out, uint64_t *ret_req_id);

/* Read the header fields without validating anything (for error messages
 * about a header that frame_hdr_decode refused). */
void frame_hdr_peek(const uint8_t in[FRAME_HDR_SIZE], struct frame_hdr *out);

#endif

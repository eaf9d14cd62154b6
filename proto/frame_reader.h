/*
 * proto/frame_reader.h — incremental frame parser.
 *
 * Bytes are fed in whatever pieces the transport received them; the reader
 * reassembles header and meta and hands the bulk part to a destination that
 * the receiver chooses after seeing the meta (its on_meta callback), so that
 * tensor bytes land straight in their final memory.  A transport that can
 * read directly into memory asks for the current bulk window
 * (frame_reader_window) and reports what it wrote (frame_reader_advance):
 * then bulk bytes are never copied at all.
 *
 * The reader holds no socket and no event loop: it is what the fuzz target
 * drives.  Nothing it reads is trusted: every length is checked against the
 * limits before any allocation.
 */
#ifndef PPRPC_PROTO_FRAME_READER_H
#define PPRPC_PROTO_FRAME_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/frame.h"

struct frame_reader_ops {
	/* The header is valid (magic, version, limits).  Return 0 to go on or a
	 * negative code to stop the connection (protocol error). */
	int (*on_header)(void *ctx, const struct frame_hdr *h);
	/* The meta is complete (valid only during the call).  When the frame has
	 * bulk, set *bulk_dst to memory of hdr->bulk_len bytes to receive it, or
	 * leave it NULL to have the bulk discarded (a refused request).  Return
	 * 0, or a negative code to stop the connection. */
	int (*on_meta)(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len,
		       void **bulk_dst);
	/* The whole frame (bulk included) has arrived. */
	int (*on_frame)(void *ctx, const struct frame_hdr *h);
};

enum frame_reader_state { FR_HEADER, FR_META, FR_BULK, FR_FAILED };

struct frame_reader {
	const struct frame_reader_ops *ops;
	void *ctx;
	struct frame_limits lim;
	enum frame_reader_state state;
	struct frame_hdr hdr;
	uint8_t hdr_buf[FRAME_HDR_SIZE];
	size_t hdr_got;
	uint8_t *meta;        /* grows up to lim.max_meta, kept between frames */
	size_t meta_cap;
	size_t meta_got;
	uint8_t *bulk_dst;    /* NULL: discard */
	uint64_t bulk_got;
	uint64_t frames;      /* complete frames delivered */
	int error;            /* first error once FR_FAILED */
	uint64_t error_req_id;
};

void frame_reader_init(struct frame_reader *r, const struct frame_reader_ops *ops, void *ctx,
		       const struct frame_limits *lim);
void frame_reader_fini(struct frame_reader *r);

/* Consume len bytes.  Returns 0, or the negative code that stopped the
 * reader (sticky: later calls return it again).  r->error_req_id is the
 * request id of the frame being parsed when it failed (0 if unknown). */
int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t len);

/* When the reader is receiving bulk into a destination, the unfilled part of
 * it; else *ret_len = 0. */
void frame_reader_window(const struct frame_reader *r, void **ret_ptr, size_t *ret_len);

/* n bytes were written directly into the window.  Returns as feed. */
int frame_reader_advance(struct frame_reader *r, size_t n);

/* True between frames (nothing partially received). */
bool frame_reader_idle(const struct frame_reader *r);

#endif

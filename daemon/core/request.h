/*
 * daemon/core/request.h — one request as every part that serves it sees it:
 * its frame header, its decoded meta and where its bulk went.
 *
 * The connection layer (server/conn.c) fills it and owns what it points to;
 * handlers and the parts they hand a request to (request/qreq.c, xfer/)
 * read it while the handler runs and copy what they keep.
 */
#ifndef PPRPC_DAEMON_CORE_REQUEST_H
#define PPRPC_DAEMON_CORE_REQUEST_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "proto/frame.h"

struct dbuf;
struct handler;

struct request {
	struct frame_hdr hdr;
	const struct handler *h;
	ProtobufCMessage *msg;      /* decoded meta, freed after the handler */
	int err;                    /* refused before run: reply this */
	char errmsg[256];
	struct dbuf *bulk_buf;      /* receiving bulk (reference held) */
	void *stage;                /* bulk staged for a queued write (owned until handed over) */
	uint64_t stage_len;         /* its bytes, reserved in the daemon's hostmem */
	/* sent by a client connection still loading (before its first graph
	 * or boundary request): its queued commands' exec time counts as load
	 * too (STATS) */
	uint8_t load;
};

#endif

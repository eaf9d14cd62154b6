/*
 * tests/integration/wire.h — raw frames for malformed-input tests.
 *
 * The client library only ever sends well-formed frames, so tests that feed
 * the daemon bad input build frames by hand here: headers with any field
 * value, metas that are arbitrary bytes, bulk that disagrees with the meta.
 * Everything is blocking I/O with a deadline (poll), so a daemon that stops
 * answering fails the test instead of hanging it.  Sends use MSG_NOSIGNAL:
 * the daemon closing a connection mid-send must not kill the test process.
 *
 * Header-only helpers (static functions) so each test file stays one unit.
 */
#ifndef PPRPC_TESTS_WIRE_H
#define PPRPC_TESTS_WIRE_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

#define WIRE_TIMEOUT_MS 10000
/* Largest reply bulk a test reads into memory (larger ones are discarded). */
#define WIRE_MAX_KEEP_BULK (64ull << 20)

static inline int64_t wire_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is readable/writable or the deadline passes.  Returns 1
 * ready, 0 timed out, -errno. */
static inline int wire_wait(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int64_t left = deadline - wire_now_ms();
		int rc;

		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

/* Send all n bytes.  0, -ETIMEDOUT or -errno (EPIPE / ECONNRESET once the
 * daemon closed the connection). */
static inline int wire_send_all(int fd, const void *data, size_t n, int timeout_ms)
{
	const uint8_t *p = data;
	int64_t deadline = wire_now_ms() + timeout_ms;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = wire_wait(fd, POLLOUT, deadline);

			if (w == 0)
				return -ETIMEDOUT;
			if (w < 0)
				return w;
			continue;
		}
		return k < 0 ? -errno : -EPIPE;
	}
	return 0;
}

/* Receive exactly n bytes.  Returns n, fewer when the peer closed first
 * (orderly EOF), -ETIMEDOUT or -errno (ECONNRESET). */
static inline ssize_t wire_recv_all(int fd, void *data, size_t n, int timeout_ms)
{
	uint8_t *p = data;
	size_t got = 0;
	int64_t deadline = wire_now_ms() + timeout_ms;

	while (got < n) {
		ssize_t k = recv(fd, p + got, n - got, MSG_DONTWAIT);

		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (k == 0)
			return (ssize_t)got;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wire_wait(fd, POLLIN, deadline);

			if (w == 0)
				return -ETIMEDOUT;
			if (w < 0)
				return w;
			continue;
		}
		return -errno;
	}
	return (ssize_t)got;
}

/* Read and throw away until the daemon closes the connection.  Returns 0
 * for an orderly close (recv returned 0), -ECONNRESET for a reset,
 * -ETIMEDOUT if it stayed open; *ret_discarded (may be NULL) gets the
 * number of bytes that arrived before the close. */
static inline int wire_wait_closed(int fd, int timeout_ms, uint64_t *ret_discarded)
{
	uint8_t sink[65536];
	uint64_t total = 0;
	int64_t deadline = wire_now_ms() + timeout_ms;

	for (;;) {
		ssize_t k = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);

		if (k > 0) {
			total += (uint64_t)k;
			continue;
		}
		if (k == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
			if (ret_discarded)
				*ret_discarded = total;
			/* A reset is a close too: the daemon closed with our
			 * unread bytes in its socket, and the kernel said so. */
			return k == 0 || errno == ECONNRESET ? 0 : -errno;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wire_wait(fd, POLLIN, deadline);

			if (w == 0) {
				if (ret_discarded)
					*ret_discarded = total;
				return -ETIMEDOUT;
			}
		}
	}
}

/* Encode a header with arbitrary field values (frame_hdr_encode always
 * writes the right magic; wire_hdr_magic overrides it afterwards). */
static inline void wire_hdr(uint8_t out[FRAME_HDR_SIZE], uint16_t version, uint16_t type, uint32_t flags,
		     uint32_t meta_len, uint64_t bulk_len, uint64_t req_id)
{
	struct frame_hdr h = {
		.version = version,
		.type = type,
		.flags = flags,
		.meta_len = meta_len,
		.bulk_len = bulk_len,
		.req_id = req_id,
	};

	frame_hdr_encode(&h, out);
}

/* Send header + meta bytes + bulk bytes exactly as given (no consistency
 * between header and payload is enforced: that is the point). */
static inline int wire_send_parts(int fd, const uint8_t hdr[FRAME_HDR_SIZE], const void *meta, size_t meta_len,
			   const void *bulk, size_t bulk_len)
{
	int rc = wire_send_all(fd, hdr, FRAME_HDR_SIZE, WIRE_TIMEOUT_MS);

	if (rc == 0 && meta_len)
		rc = wire_send_all(fd, meta, meta_len, WIRE_TIMEOUT_MS);
	if (rc == 0 && bulk_len)
		rc = wire_send_all(fd, bulk, bulk_len, WIRE_TIMEOUT_MS);
	return rc;
}

/* A well-formed frame: version 1, flags (QUEUED, REPLY, ...) plus the bulk
 * flag iff bulk_len, the meta's encoding (m may be NULL for an empty meta). */
static inline int wire_send_flags(int fd, uint16_t type, uint32_t flags, uint64_t req_id, const ProtobufCMessage *m,
				  const void *bulk, size_t bulk_len)
{
	uint8_t hdr[FRAME_HDR_SIZE];
	size_t mlen = m ? meta_size(m) : 0;
	uint8_t *meta = malloc(mlen ? mlen : 1);
	int rc;

	if (!meta)
		return -ENOMEM;
	if (m)
		meta_pack(m, meta);
	wire_hdr(hdr, PPRPC_PROTO_VERSION, type, flags | (bulk_len ? FRAME_F_BULK : 0), (uint32_t)mlen, bulk_len,
		 req_id);
	rc = wire_send_parts(fd, hdr, meta, mlen, bulk, bulk_len);
	free(meta);
	return rc;
}

/* A well-formed request frame (no flags but bulk). */
static inline int wire_send_msg(int fd, uint16_t type, uint64_t req_id, const ProtobufCMessage *m,
			 const void *bulk, size_t bulk_len)
{
	return wire_send_flags(fd, type, 0, req_id, m, bulk, bulk_len);
}

/* A well-formed frame whose meta is the given raw bytes. */
static inline int wire_send_rawmeta(int fd, uint16_t type, uint64_t req_id, const void *meta, size_t meta_len,
			     const void *bulk, size_t bulk_len)
{
	uint8_t hdr[FRAME_HDR_SIZE];

	wire_hdr(hdr, PPRPC_PROTO_VERSION, type, bulk_len ? FRAME_F_BULK : 0, (uint32_t)meta_len,
		 bulk_len, req_id);
	return wire_send_parts(fd, hdr, meta, meta_len, bulk, bulk_len);
}

struct wire_reply {
	struct frame_hdr h;
	uint8_t *meta;        /* h.meta_len bytes */
	uint8_t *bulk;        /* h.bulk_len bytes when <= WIRE_MAX_KEEP_BULK, else NULL */
	int is_error;         /* FRAME_F_ERROR set */
	int code;             /* ErrorReply.code when is_error */
	uint64_t command;     /* ErrorReply.command */
	uint32_t command_type;
	char msg[256];        /* ErrorReply.message */
};

static inline void wire_reply_free(struct wire_reply *r)
{
	free(r->meta);
	free(r->bulk);
	r->meta = NULL;
	r->bulk = NULL;
}

/* Read one reply frame.  Returns 0, -ECONNRESET / -EPIPE when the
 * connection ended (0 bytes of a header: -EPIPE), -ETIMEDOUT, or -EPROTO
 * when what arrived is not a valid reply frame. */
static inline int wire_read_reply(int fd, struct wire_reply *r, int timeout_ms)
{
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = UINT64_MAX };
	uint8_t hb[FRAME_HDR_SIZE];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	n = wire_recv_all(fd, hb, sizeof(hb), timeout_ms);
	if (n < 0)
		return (int)n;
	if (n < (ssize_t)sizeof(hb))
		return n == 0 ? -EPIPE : -EPROTO;
	if (frame_hdr_decode(hb, &lim, &r->h, NULL) < 0 || !(r->h.flags & FRAME_F_REPLY))
		return -EPROTO;
	r->is_error = !!(r->h.flags & FRAME_F_ERROR);
	r->meta = malloc(r->h.meta_len ? r->h.meta_len : 1);
	if (!r->meta)
		return -ENOMEM;
	n = wire_recv_all(fd, r->meta, r->h.meta_len, timeout_ms);
	if (n != (ssize_t)r->h.meta_len)
		return n < 0 ? (int)n : -EPIPE;
	if (r->h.bulk_len) {
		uint64_t left = r->h.bulk_len;

		if (r->h.bulk_len <= WIRE_MAX_KEEP_BULK) {
			r->bulk = malloc((size_t)r->h.bulk_len);
			if (!r->bulk)
				return -ENOMEM;
			n = wire_recv_all(fd, r->bulk, (size_t)r->h.bulk_len, timeout_ms);
			if (n != (ssize_t)r->h.bulk_len)
				return n < 0 ? (int)n : -EPIPE;
		} else {
			static uint8_t sink[1 << 16];

			while (left) {
				size_t k = left < sizeof(sink) ? (size_t)left : sizeof(sink);

				n = wire_recv_all(fd, sink, k, timeout_ms);
				if (n != (ssize_t)k)
					return n < 0 ? (int)n : -EPIPE;
				left -= k;
			}
		}
	}
	if (r->is_error) {
		ProtobufCMessage *m = NULL;

		if (meta_unpack(&pprpc__error_reply__descriptor, r->meta, r->h.meta_len, &m) < 0)
			return -EPROTO;
		const Pprpc__ErrorReply *e = (const Pprpc__ErrorReply *)m;

		r->code = e->code;
		r->command = e->command;
		r->command_type = e->command_type;
		snprintf(r->msg, sizeof(r->msg), "%s", e->message ? e->message : "");
		meta_free(m);
	}
	return 0;
}

/* Decode a successful reply's meta as message type d (free with meta_free). */
static inline int wire_reply_unpack(const struct wire_reply *r, const ProtobufCMessageDescriptor *d,
			     ProtobufCMessage **out)
{
	return meta_unpack(d, r->meta, r->h.meta_len, out);
}

/* Send a well-formed request and read its reply. */
static inline int wire_call(int fd, uint16_t type, uint64_t req_id, const ProtobufCMessage *m, const void *bulk,
		     size_t bulk_len, struct wire_reply *r)
{
	int rc = wire_send_msg(fd, type, req_id, m, bulk, bulk_len);

	if (rc < 0) {
		memset(r, 0, sizeof(*r));
		return rc;
	}
	return wire_read_reply(fd, r, WIRE_TIMEOUT_MS);
}

/* HELLO with the given protocol version in the meta.  Returns 0 for a
 * successful HELLO reply, the ErrorReply code for an error reply, or a
 * negative errno-style value for a broken exchange. */
static inline int wire_hello_version(int fd, uint32_t proto_version)
{
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	struct wire_reply r;
	int rc;

	h.proto_version = proto_version;
	h.role = PPRPC__ROLE__ROLE_CLIENT;
	h.client_name = "wire";
	rc = wire_call(fd, MSG_HELLO, 1, &h.base, NULL, 0, &r);
	if (rc == 0 && (r.h.type != MSG_HELLO || r.h.req_id != 1))
		rc = -EPROTO;
	if (rc == 0 && r.is_error)
		rc = r.code;
	if (rc == 0) {
		ProtobufCMessage *m = NULL;

		if (wire_reply_unpack(&r, &pprpc__hello_reply__descriptor, &m) < 0)
			rc = -EPROTO;
		else if (((const Pprpc__HelloReply *)m)->proto_version != PPRPC_PROTO_VERSION)
			rc = -EPROTO;
		meta_free(m);
	}
	wire_reply_free(&r);
	return rc;
}

static inline int wire_hello(int fd)
{
	return wire_hello_version(fd, PPRPC_PROTO_VERSION);
}

#endif

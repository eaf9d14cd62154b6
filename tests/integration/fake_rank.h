/*
 * tests/integration/fake_rank.h — a rank played by the test: a listener on
 * 127.0.0.1 (ephemeral port) that a daemon opens its peer link to, and
 * that answers (or not) as the test says, with raw frames (wire.h).  For
 * hostile-rank tests: lying PULL answers, a rank that never answers HELLO.
 *
 * Header-only helpers (static functions) so each test file stays one unit.
 */
#ifndef PPRPC_TESTS_FAKE_RANK_H
#define PPRPC_TESTS_FAKE_RANK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "tests/integration/wire.h"

struct fake_rank {
	int lfd;                /* the listener */
	int fd;                 /* the accepted peer link (-1: none) */
	uint16_t port;
	char addr[32];          /* "127.0.0.1:PORT": the rank's name */
};

static inline int fake_rank_listen(struct fake_rank *f)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int one = 1;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (f->lfd < 0)
		return -errno;
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f->lfd, 8) < 0 ||
	    getsockname(f->lfd, (struct sockaddr *)&sa, &sl) < 0) {
		close(f->lfd);
		return -errno;
	}
	f->port = ntohs(sa.sin_port);
	snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%u", f->port);
	return 0;
}

static inline void fake_rank_close(struct fake_rank *f)
{
	if (f->fd >= 0)
		close(f->fd);
	if (f->lfd >= 0)
		close(f->lfd);
	f->fd = f->lfd = -1;
}

/* Take the daemon's connection (a new one replaces the old). */
static inline int fake_rank_accept(struct fake_rank *f, int timeout_ms)
{
	int w = wire_wait(f->lfd, POLLIN, wire_now_ms() + timeout_ms), one = 1;

	if (w <= 0)
		return w ? w : -ETIMEDOUT;
	if (f->fd >= 0)
		close(f->fd);
	f->fd = accept(f->lfd, NULL, NULL);
	if (f->fd < 0)
		return -errno;
	setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* One request frame: its header and meta (bulk read and dropped). */
static inline int fake_read_request(int fd, struct frame_hdr *h, uint8_t **ret_meta, int timeout_ms)
{
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = 1ull << 30 };
	uint8_t hb[FRAME_HDR_SIZE], *meta;
	ssize_t n = wire_recv_all(fd, hb, sizeof(hb), timeout_ms);

	if (n != (ssize_t)sizeof(hb))
		return n < 0 ? (int)n : -EPIPE;
	if (frame_hdr_decode(hb, &lim, h, NULL) < 0 || (h->flags & FRAME_F_REPLY))
		return -EPROTO;
	meta = malloc(h->meta_len ? h->meta_len : 1);
	if (!meta)
		return -ENOMEM;
	n = wire_recv_all(fd, meta, h->meta_len, timeout_ms);
	if (n != (ssize_t)h->meta_len) {
		free(meta);
		return n < 0 ? (int)n : -EPIPE;
	}
	for (uint64_t left = h->bulk_len; left;) {
		uint8_t sink[4096];
		size_t k = left < sizeof(sink) ? (size_t)left : sizeof(sink);

		if (wire_recv_all(fd, sink, k, timeout_ms) != (ssize_t)k) {
			free(meta);
			return -EPIPE;
		}
		left -= k;
	}
	*ret_meta = meta;
	return 0;
}

/* A reply to request (type, req_id): flags beyond REPLY (MORE, ERROR), a
 * meta message (may be NULL), bulk. */
static inline int fake_reply(int fd, uint16_t type, uint64_t req_id, uint32_t flags, const ProtobufCMessage *m,
			     const void *bulk, size_t bulk_len)
{
	return wire_send_flags(fd, type, FRAME_F_REPLY | flags, req_id, m, bulk, bulk_len);
}

/* Read requests until one of type comes: PINGs and HELLOs on the way are
 * answered, anything else is dropped unanswered.  *ret_msg: the decoded
 * meta (meta_free it). */
static inline int fake_expect(struct fake_rank *f, uint16_t type, const ProtobufCMessageDescriptor *desc,
			      struct frame_hdr *h, ProtobufCMessage **ret_msg, int timeout_ms)
{
	int64_t deadline = wire_now_ms() + timeout_ms;

	for (;;) {
		int64_t left = deadline - wire_now_ms();
		uint8_t *meta = NULL;
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = fake_read_request(f->fd, h, &meta, (int)left);
		if (rc < 0)
			return rc;
		if (h->type == type) {
			rc = desc ? meta_unpack(desc, meta, h->meta_len, ret_msg) : 0;
			free(meta);
			return rc < 0 ? -EPROTO : 0;
		}
		free(meta);
		if (h->type == MSG_HELLO) {
			Pprpc__HelloReply rep = PPRPC__HELLO_REPLY__INIT;

			rep.proto_version = PPRPC_PROTO_VERSION;
			rep.daemon_version = "fake-rank";
			rc = fake_reply(f->fd, MSG_HELLO, h->req_id, 0, &rep.base, NULL, 0);
		} else if (h->type == MSG_PING) {
			rc = fake_reply(f->fd, MSG_PING, h->req_id, 0, NULL, NULL, 0);
		}
		if (rc < 0)
			return rc;
	}
}

#endif

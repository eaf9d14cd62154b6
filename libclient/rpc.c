/*
 * libclient/rpc.c — the client's progress engine.
 *
 * All I/O happens in the calling thread, no helper thread: a call writes its
 * frame with writev (tensor bytes straight from the caller's memory) and
 * then makes progress on the socket until its reply is complete.  Replies
 * are parsed by the same incremental frame reader the daemon uses and
 * matched to pending requests by id; a reply's bulk is received straight
 * into the memory its request named.  Whenever the socket cannot take more
 * bytes, incoming replies are drained, so queuing much work can never
 * deadlock against a daemon that waits for us to read.
 *
 * Replies are trusted no more than the daemon trusts requests: unknown ids,
 * wrong types or a bulk of the wrong size leave the stream out of sync, and
 * the client is marked broken.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "libclient/client.h"
#include "proto/frame.h"
#include "proto/meta.h"
#include "util/clock.h"

int client_fail(pprpc_client *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return code;
}

static void pend_remove(pprpc_client *c, struct pending *p)
{
	struct pending **pp = &c->pend_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			if (c->pend_tail == p)
				c->pend_tail = prev;
			p->next = NULL;
			return;
		}
	}
}

static void complete(pprpc_client *c, struct pending *p)
{
	p->done = 1;
	pend_remove(c, p);
	if (p->orphan) {
		meta_free(p->rep);
		free(p); /* struct pprpc_request starts with its pending */
		return;
	}
	if (!p->async)
		return;
	c->async_outstanding--;
	if (p->rc < 0 && !c->async_err) {
		c->async_err = p->rc;
		snprintf(c->async_errmsg, sizeof(c->async_errmsg), "%s", p->err);
	}
	meta_free(p->rep);
	free(p);
}

/* The stream is unusable: fail everything that waits, with msg as the
 * reason. */
static int broken_msg(pprpc_client *c, int code, const char *msg)
{
	int rc = code == PPRPC_ECLOSED || code == PPRPC_EPROTO ? PPRPC_ECONN : code;

	if (!c->broken) {
		c->broken = 1;
		client_fail(c, rc, "%s", msg);
	}
	while (c->pend_head) {
		struct pending *p = c->pend_head;

		p->rc = rc;
		snprintf(p->err, sizeof(p->err), "%.255s", c->err);
		complete(c, p);
	}
	return rc;
}

static int broken(pprpc_client *c, int code, const char *what)
{
	char msg[256];

	if (code == PPRPC_EPROTO)
		what = "reply stream out of sync";
	snprintf(msg, sizeof(msg), "%s: %s", what,
		 code == PPRPC_ECLOSED     ? "connection closed by the daemon"
		 : code == PPRPC_ECANCELED ? "cancelled (the caller gave up on this connection)"
					   : pprpc_strerror(code));
	return broken_msg(c, code, msg);
}

/* broken() for a failed syscall: the reason (connection reset, broken
 * pipe) says more than "I/O error". */
static int broken_errno(pprpc_client *c, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s: %s", what, strerror(errno));
	return broken_msg(c, PPRPC_EIO, msg);
}

static struct pending *pend_find(pprpc_client *c, uint64_t id)
{
	for (struct pending *p = c->pend_head; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

static int on_header(void *ctx, const struct frame_hdr *h)
{
	pprpc_client *c = ctx;
	struct pending *p = pend_find(c, h->req_id);

	if (!(h->flags & FRAME_F_REPLY) || !p || p->type != h->type)
		return PPRPC_EPROTO;
	c->cur = p;
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len, void **bulk_dst)
{
	pprpc_client *c = ctx;
	struct pending *p = c->cur;
	ProtobufCMessage *m = NULL;

	if (h->flags & FRAME_F_ERROR) {
		const Pprpc__ErrorReply *e;

		if (meta_unpack(&pprpc__error_reply__descriptor, meta, len, &m) < 0) {
			p->rc = PPRPC_EPROTO;
			snprintf(p->err, sizeof(p->err), "malformed error reply");
			return 0;
		}
		e = (const Pprpc__ErrorReply *)m;
		p->rc = e->code < 0 && e->code > -PPRPC_E_COUNT_ ? e->code : PPRPC_EPROTO;
		snprintf(p->err, sizeof(p->err), "%s", e->message ? e->message : "");
		if (e->auth_challenge.len == sizeof(p->challenge)) {
			memcpy(p->challenge, e->auth_challenge.data, sizeof(p->challenge));
			p->has_challenge = 1;
		}
		meta_free(m);
		return 0; /* a bulk on an error reply is discarded */
	}
	if (h->bulk_len != p->bulk_len)
		return PPRPC_EPROTO;
	if (p->rep_desc && meta_unpack(p->rep_desc, len ? meta : (const uint8_t *)"", len, &p->rep) < 0) {
		p->rc = PPRPC_EPROTO;
		snprintf(p->err, sizeof(p->err), "malformed reply meta");
	}
	*bulk_dst = p->bulk;
	return 0;
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	pprpc_client *c = ctx;

	if (c->trace)
		client_trace(c->trace, c->addr, h->type, h->req_id, "recv");
	complete(c, c->cur);
	c->cur = NULL;
	return 0;
}

static const struct frame_reader_ops reply_ops = {
	.on_header = on_header,
	.on_meta = on_meta,
	.on_frame = on_frame,
};

int rpc_init(pprpc_client *c)
{
	/* Reply sizes are checked against each request, not a global cap. */
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = UINT64_MAX };

	c->inbuf = malloc(CLIENT_INBUF);
	if (!c->inbuf)
		return PPRPC_ENOMEM;
	frame_reader_init(&c->reader, &reply_ops, c, &lim);
	return 0;
}

void rpc_fini(pprpc_client *c)
{
	while (c->pend_head) {
		struct pending *p = c->pend_head;

		p->rc = PPRPC_ECLOSED;
		complete(c, p);
	}
	frame_reader_fini(&c->reader);
	free(c->inbuf);
	c->inbuf = NULL;
}

/* Read whatever has arrived, without blocking.  Large bulks are received
 * straight into their destination (the reader's window). */
static int progress_read(pprpc_client *c)
{
	for (;;) {
		void *win;
		size_t wlen;
		ssize_t n;
		int rc;

		frame_reader_window(&c->reader, &win, &wlen);
		if (wlen >= 4096) {
			n = recv(c->fd, win, wlen, MSG_DONTWAIT);
			if (n > 0) {
				rc = frame_reader_advance(&c->reader, (size_t)n);
				goto check;
			}
		} else {
			n = recv(c->fd, c->inbuf, CLIENT_INBUF, MSG_DONTWAIT);
			if (n > 0) {
				rc = frame_reader_feed(&c->reader, c->inbuf, (size_t)n);
				goto check;
			}
		}
		if (n == 0)
			return broken(c, PPRPC_ECLOSED, "reading replies");
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR)
			continue;
		return broken_errno(c, "reading replies");
check:
		if (rc < 0)
			return broken(c, PPRPC_EPROTO, "");
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_us(void)
{
	return util_now_ns() / 1000u;
}

/* When a wait spins rather than sleeps (util/expect.h): from..until, us of
 * CLOCK_MONOTONIC; from == until: never. */
struct spin {
	uint64_t from, until;
};

/* Wait for the socket (readable, plus writable when want_write), then read
 * what arrived.  Returns 1 if writable, 0 if not, or a negative code.  A
 * readable cancel fd (liveness.c) ends the wait and the connection.  Inside
 * sp's window the wait only looks (and yields the CPU to whatever else
 * wants it); before it, it sleeps until the window opens at most. */
static int progress(pprpc_client *c, int want_write, int64_t deadline, const struct spin *sp)
{
	struct pollfd pfd[2] = {
		{ .fd = c->fd, .events = POLLIN | (want_write ? POLLOUT : 0) },
		{ .fd = c->cancel_fd, .events = POLLIN },
	};
	int64_t tmo_us = -1;
	struct timespec ts;
	int rc;

	if (deadline >= 0) {
		int64_t left = deadline - now_ms();

		if (left <= 0)
			return PPRPC_ETIMEDOUT;
		tmo_us = (left > 1000000 ? 1000000 : left) * 1000;
	}
	if (sp && sp->from < sp->until) {
		uint64_t now = now_us();

		if (now < sp->from && (tmo_us < 0 || (int64_t)(sp->from - now) < tmo_us))
			tmo_us = (int64_t)(sp->from - now);
		else if (now >= sp->from && now < sp->until) {
			tmo_us = 0;
			sched_yield();
		}
	}
	ts.tv_sec = tmo_us / 1000000;
	ts.tv_nsec = (tmo_us % 1000000) * 1000;
	rc = ppoll(pfd, c->cancel_fd >= 0 ? 2 : 1, tmo_us < 0 ? NULL : &ts, NULL);
	if (rc < 0)
		return errno == EINTR ? 0 : broken(c, PPRPC_EIO, "poll");
	if (c->cancel_fd >= 0 && (pfd[1].revents & (POLLIN | POLLERR | POLLHUP)))
		return broken(c, PPRPC_ECANCELED, "waiting for the daemon");
	if (rc == 0)
		return deadline >= 0 && now_ms() >= deadline ? PPRPC_ETIMEDOUT : 0;
	if (pfd[0].revents & (POLLIN | POLLERR | POLLHUP)) {
		rc = progress_read(c);
		if (rc < 0)
			return rc;
	}
	return (pfd[0].revents & POLLOUT) ? 1 : 0;
}

/* The window a wait on estimate e, begun at t0, spins in (none when spinning
 * is off or nothing was learnt yet). */
static struct spin spin_window(const pprpc_client *c, const struct expect *e, uint64_t t0)
{
	uint64_t est = c->spin ? expect_us(e) : 0;

	if (!est)
		return (struct spin){ 0, 0 };
	return (struct spin){ t0 + expect_spin_from_us(est), t0 + est + expect_margin_us(est) };
}

static int write_all(pprpc_client *c, struct iovec *iov, int iovcnt)
{
	int64_t deadline = c->io_timeout_ms > 0 ? now_ms() + c->io_timeout_ms : -1;

	while (iovcnt > 0) {
		/* sendmsg with MSG_NOSIGNAL: a daemon that went away must fail
		 * the call, not kill the caller's process with SIGPIPE. */
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);

		if (n < 0) {
			int rc;

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return broken_errno(c, "sending request");
			rc = progress(c, 1, deadline, NULL);
			if (rc == PPRPC_ETIMEDOUT)
				return broken(c, rc, "sending request");
			if (rc < 0)
				return rc;
			continue;
		}
		/* Progress resets the deadline: only a stalled socket times out. */
		if (deadline >= 0)
			deadline = now_ms() + c->io_timeout_ms;
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int rpc_send(pprpc_client *c, uint16_t type, uint32_t flags, const ProtobufCMessage *req,
	     const void *bulk, uint64_t blen, struct pending *p)
{
	size_t mlen = meta_size(req);
	uint8_t small[FRAME_HDR_SIZE + 512], *head = small;
	struct frame_hdr h = {
		.version = PPRPC_PROTO_VERSION,
		.type = type,
		.flags = flags | (blen ? FRAME_F_BULK : 0),
		.meta_len = (uint32_t)mlen,
		.bulk_len = blen,
		.req_id = ++c->next_id,
	};
	struct iovec iov[2];
	int rc;

	if (c->broken)
		return client_fail(c, PPRPC_ECONN, "connection is closed or out of sync");
	if (mlen > PPRPC_MAX_META)
		return client_fail(c, PPRPC_ETOOBIG, "request meta of %zu bytes exceeds %u", mlen,
				   PPRPC_MAX_META);
	if (FRAME_HDR_SIZE + mlen > sizeof(small) && !(head = malloc(FRAME_HDR_SIZE + mlen)))
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	frame_hdr_encode(&h, head);
	meta_pack(req, head + FRAME_HDR_SIZE);
	if (p) {
		p->id = h.req_id;
		p->type = type;
		p->done = 0;
		p->rc = 0;
		p->rep = NULL;
		p->has_challenge = 0;
		p->err[0] = '\0';
		p->next = NULL;
		if (c->pend_tail)
			c->pend_tail->next = p;
		else
			c->pend_head = p;
		c->pend_tail = p;
		if (p->async)
			c->async_outstanding++;
	}
	if (c->trace)
		client_trace(c->trace, c->addr, type, h.req_id, "send");
	iov[0].iov_base = head;
	iov[0].iov_len = FRAME_HDR_SIZE + mlen;
	iov[1].iov_base = (void *)bulk;
	iov[1].iov_len = (size_t)blen;
	rc = write_all(c, iov, blen ? 2 : 1);
	if (head != small)
		free(head);
	return rc;
}

int rpc_wait(pprpc_client *c, struct pending *p)
{
	int64_t deadline = c->io_timeout_ms > 0 ? now_ms() + c->io_timeout_ms : -1;
	struct expect *e = &c->wait_est[p->type < MSG_TYPE_COUNT ? p->type : MSG_NONE];
	uint64_t t0 = now_us();
	struct spin sp = spin_window(c, e, t0);

	while (!p->done) {
		int rc = progress(c, 0, deadline, &sp);

		if (rc == PPRPC_ETIMEDOUT)
			/* The reply may still come: the stream is out of sync. */
			return broken(c, rc, "waiting for a reply");
		if (rc < 0 && !p->done)
			return rc;
	}
	expect_note(e, now_us() - t0);
	return p->rc;
}

void rpc_forget(pprpc_client *c, struct pending *p)
{
	if (!p->done)
		pend_remove(c, p);
}

int rpc_drain(pprpc_client *c)
{
	int64_t deadline = c->io_timeout_ms > 0 ? now_ms() + c->io_timeout_ms : -1;
	/* async replies: the slot of no request type */
	struct expect *e = &c->wait_est[MSG_NONE];
	uint64_t t0 = now_us();
	struct spin sp = spin_window(c, e, t0);

	if (!c->async_outstanding)
		return 0;
	while (c->async_outstanding) {
		int rc = progress(c, 0, deadline, &sp);

		if (rc == PPRPC_ETIMEDOUT)
			return broken(c, rc, "waiting for replies");
		if (rc < 0)
			return rc;
	}
	expect_note(e, now_us() - t0);
	return 0;
}

int rpc_call(pprpc_client *c, uint16_t type, const ProtobufCMessage *req, const void *out_bulk,
	     uint64_t out_len, const ProtobufCMessageDescriptor *rep_desc, ProtobufCMessage **ret_rep,
	     void *in_bulk, uint64_t in_len)
{
	struct pending p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.rep_desc = ret_rep ? rep_desc : NULL;
	p.bulk = in_bulk;
	p.bulk_len = in_len;
	c->err[0] = '\0';
	rc = rpc_send(c, type, 0, req, out_bulk, out_len, &p);
	if (rc == 0)
		rc = rpc_wait(c, &p);
	if (!p.done) {
		/* Still registered (write failed before broken() ran): forget it. */
		pend_remove(c, &p);
		return rc < 0 ? rc : PPRPC_EINTERNAL;
	}
	if (p.rc < 0) {
		meta_free(p.rep);
		return client_fail(c, p.rc, "%s", p.err);
	}
	if (ret_rep)
		*ret_rep = p.rep;
	return 0;
}

int rpc_call_u64(pprpc_client *c, uint16_t type, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *rep_desc, size_t off, uint64_t *out)
{
	ProtobufCMessage *m = NULL;
	int rc = rpc_call(c, type, req, NULL, 0, rep_desc, &m, NULL, 0);

	if (rc < 0)
		return rc;
	memcpy(out, (const char *)m + off, sizeof(*out));
	meta_free(m);
	return 0;
}

PPRPC_API void pprpc_set_spin(pprpc_client *c, int on)
{
	if (c)
		c->spin = on != 0;
}

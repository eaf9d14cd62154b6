/*
 * transport/tcp_uv.c — TCP transport over libuv streams.
 *
 * Receive path: libuv asks for memory before each read (alloc_cb).  While a
 * frame's bulk is being received into a known destination, we hand libuv
 * that destination directly, so tensor bytes go from the socket into the
 * buffer with no intermediate copy; otherwise a small per-connection input
 * buffer collects headers and metas (several small frames per read).
 *
 * Close is graceful: reading stops at once, queued replies (an error reply
 * in particular) are written first, then the handle is closed and the owner
 * told.
 */
#include "transport/tcp_uv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pprpc/types.h"
#include "util/addr.h"
#include "transport/transport_impl.h"

#define INBUF_SIZE (64 * 1024)
/* Below this a direct read is not worth an extra syscall per frame. */
#define DIRECT_MIN 4096
/* One read into a destination is capped so a huge bulk is still read in
 * pieces the loop can interleave with other connections. */
#define DIRECT_MAX (64u << 20)

struct tcp_conn {
	struct transport_conn base;
	uv_tcp_t h;
	uint8_t *inbuf;
	int reading;          /* uv_read_start active */
	int paused;           /* owner asked for back-pressure */
	int failed;           /* the frame reader failed (reported to the owner) */
	int close_status;
	unsigned pending_writes;
};

struct tcp_write {
	uv_write_t req;
	struct tcp_conn *c;
	transport_send_cb done;
	void *arg;
	size_t bytes;
};

struct tcp_listener {
	uv_tcp_t h;
	tcp_accept_cb cb;
	void *ctx;
};

static const struct transport_ops tcp_ops;

static void on_closed(uv_handle_t *h)
{
	struct tcp_conn *c = h->data;

	if (c->base.owner && c->base.owner->on_close)
		c->base.owner->on_close(c->base.owner_ctx, c->close_status);
	frame_reader_fini(&c->base.reader);
	free(c->inbuf);
	free(c);
}

static void maybe_finish_close(struct tcp_conn *c)
{
	if (c->base.closing == 1 && c->pending_writes == 0) {
		c->base.closing = 2;
		uv_close((uv_handle_t *)&c->h, on_closed);
	}
}

static void close_with(struct tcp_conn *c, int status)
{
	if (c->base.closing)
		return;
	c->base.closing = 1;
	c->close_status = status;
	if (c->reading)
		uv_read_stop((uv_stream_t *)&c->h);
	c->reading = 0;
	maybe_finish_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct tcp_conn *c = h->data;
	void *p;
	size_t n;

	(void)suggested;
	frame_reader_window(&c->base.reader, &p, &n);
	if (n >= DIRECT_MIN) {
		buf->base = p;
		buf->len = n < DIRECT_MAX ? n : DIRECT_MAX;
		return;
	}
	buf->base = (char *)c->inbuf;
	buf->len = INBUF_SIZE;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct tcp_conn *c = s->data;
	int rc;

	if (nread == 0 || c->base.closing)
		return;
	if (nread < 0) {
		close_with(c, nread == UV_EOF ? 0 : PPRPC_EIO);
		return;
	}
	if (buf->base == (char *)c->inbuf)
		rc = transport_feed(&c->base, c->inbuf, (size_t)nread);
	else
		rc = transport_advance(&c->base, (size_t)nread);
	/* A broken stream cannot be resynchronised: read nothing more from
	 * this peer; the owner answers (if it can) and closes.  Reported even
	 * when the owner paused reading while this read was being parsed (a
	 * limit hit after back-pressure set in), and only once. */
	if (rc < 0 && !c->failed) {
		c->failed = 1;
		if (c->reading)
			uv_read_stop(s);
		c->reading = 0;
		c->base.owner->on_reader_error(c->base.owner_ctx, rc, c->base.reader.error_req_id);
	}
}

static int tcp_start(struct transport_conn *bc)
{
	struct tcp_conn *c = (struct tcp_conn *)bc;
	int rc;

	if (c->reading || c->base.closing)
		return 0;
	rc = uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read);
	if (rc < 0)
		return PPRPC_EIO;
	c->reading = 1;
	return 0;
}

static void on_written(uv_write_t *req, int status)
{
	struct tcp_write *w = req->data;
	struct tcp_conn *c = w->c;

	c->pending_writes--;
	if (status == 0)
		c->base.stats.bytes_out += w->bytes;
	if (w->done)
		w->done(w->arg, status == 0 ? 0 : PPRPC_EIO);
	free(w);
	if (status < 0 && !c->base.closing)
		close_with(c, PPRPC_EIO);
	maybe_finish_close(c);
}

static int tcp_send(struct transport_conn *bc, const struct iovec *iov, int iovcnt,
		    transport_send_cb done, void *arg)
{
	struct tcp_conn *c = (struct tcp_conn *)bc;
	uv_buf_t bufs[8];
	struct tcp_write *w;
	size_t total = 0;
	int i, rc;

	if (c->base.closing >= 2 || iovcnt < 1 || iovcnt > 8)
		return c->base.closing ? PPRPC_ECLOSED : PPRPC_EINVAL;
	w = malloc(sizeof(*w));
	if (!w)
		return PPRPC_ENOMEM;
	for (i = 0; i < iovcnt; i++) {
		bufs[i] = uv_buf_init(iov[i].iov_base, (unsigned)iov[i].iov_len);
		bufs[i].len = iov[i].iov_len; /* uv_buf_init takes unsigned: keep size_t */
		total += iov[i].iov_len;
	}
	w->c = c;
	w->done = done;
	w->arg = arg;
	w->bytes = total;
	w->req.data = w;
	rc = uv_write(&w->req, (uv_stream_t *)&c->h, bufs, (unsigned)iovcnt, on_written);
	if (rc < 0) {
		free(w);
		return PPRPC_EIO;
	}
	c->pending_writes++;
	c->base.stats.frames_out++;
	return 0;
}

static int tcp_pause(struct transport_conn *bc)
{
	struct tcp_conn *c = (struct tcp_conn *)bc;

	c->paused = 1;
	if (c->reading)
		uv_read_stop((uv_stream_t *)&c->h);
	c->reading = 0;
	return 0;
}

static int tcp_resume(struct transport_conn *bc)
{
	struct tcp_conn *c = (struct tcp_conn *)bc;

	c->paused = 0;
	if (c->base.reader.state == FR_FAILED)
		return 0;
	return tcp_start(bc);
}

static void tcp_close(struct transport_conn *bc)
{
	close_with((struct tcp_conn *)bc, 0);
}

/* Do not wait for the writes: uv_close cancels them (their callbacks run
 * with UV_ECANCELED before on_closed), and SO_LINGER 0 resets the
 * connection, so the peer learns at once that what it did not read is
 * gone. */
static void tcp_abort(struct transport_conn *bc)
{
	struct tcp_conn *c = (struct tcp_conn *)bc;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	uv_os_fd_t fd;

	if (c->base.closing >= 2)
		return;
	if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (!c->base.closing)
		close_with(c, PPRPC_ECLOSED);
	if (c->base.closing == 1) {
		c->base.closing = 2;
		uv_close((uv_handle_t *)&c->h, on_closed);
	}
}

static const struct transport_ops tcp_ops = {
	.name = "tcp",
	.start = tcp_start,
	.send = tcp_send,
	.pause = tcp_pause,
	.resume = tcp_resume,
	.close = tcp_close,
	.abort = tcp_abort,
	.info = transport_info_basic,
};

static void on_connection(uv_stream_t *server, int status)
{
	struct tcp_listener *l = server->data;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	struct tcp_conn *c;

	if (status < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (c)
		c->inbuf = malloc(INBUF_SIZE);
	if (!c || !c->inbuf) {
		/* Out of memory: accept and drop, or the listen socket stays
		 * readable and we spin. */
		uv_tcp_t *tmp = malloc(sizeof(*tmp));

		if (c)
			free(c);
		if (tmp) {
			uv_tcp_init(server->loop, tmp);
			uv_accept(server, (uv_stream_t *)tmp);
			uv_close((uv_handle_t *)tmp, (uv_close_cb)free);
		}
		return;
	}
	c->base.ops = &tcp_ops;
	uv_tcp_init(server->loop, &c->h);
	c->h.data = c;
	if (uv_accept(server, (uv_stream_t *)&c->h) < 0) {
		c->base.closing = 2;
		uv_close((uv_handle_t *)&c->h, on_closed);
		return;
	}
	uv_tcp_nodelay(&c->h, 1);
	if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &sslen) == 0)
		addr_format((struct sockaddr *)&ss, c->base.peer, sizeof(c->base.peer));
	l->cb(l->ctx, &c->base);
}

int tcp_listen(uv_loop_t *loop, const char *host, uint16_t port, tcp_accept_cb cb, void *ctx,
	       struct tcp_listener **ret_listener, uint16_t *ret_port, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int namelen = sizeof(ss);
	struct tcp_listener *l;
	int rc;

	if (addr_resolve(host, port, &ss, &sl) < 0) {
		snprintf(err, errlen, "cannot resolve listen address '%s'", host);
		return PPRPC_EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return PPRPC_ENOMEM;
	l->cb = cb;
	l->ctx = ctx;
	uv_tcp_init(loop, &l->h);
	l->h.data = l;
	rc = uv_tcp_bind(&l->h, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&l->h, 128, on_connection);
	if (rc < 0) {
		snprintf(err, errlen, "cannot listen on %s:%u: %s", host, port, uv_strerror(rc));
		uv_close((uv_handle_t *)&l->h, (uv_close_cb)free);
		return rc == UV_EADDRINUSE ? PPRPC_EBUSY : PPRPC_EIO;
	}
	uv_tcp_getsockname(&l->h, (struct sockaddr *)&ss, &namelen);
	*ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						    : ((struct sockaddr_in *)&ss)->sin_port);
	*ret_listener = l;
	return 0;
}

void tcp_listener_close(struct tcp_listener *l)
{
	if (l)
		uv_close((uv_handle_t *)&l->h, (uv_close_cb)free);
}

struct tcp_connecting {
	uv_connect_t req;
	struct tcp_conn *c;
	tcp_connect_cb cb;
	void *ctx;
};

static void free_handle_conn(uv_handle_t *h)
{
	struct tcp_conn *c = h->data;

	free(c->inbuf);
	free(c);
}

static void on_connected(uv_connect_t *req, int status)
{
	struct tcp_connecting *cr = req->data;
	struct tcp_conn *c = cr->c;
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	char err[160];

	if (status < 0) {
		snprintf(err, sizeof(err), "connect failed: %s", uv_strerror(status));
		cr->cb(cr->ctx, NULL, PPRPC_ECONN, err);
		uv_close((uv_handle_t *)&c->h, free_handle_conn);
		free(cr);
		return;
	}
	uv_tcp_nodelay(&c->h, 1);
	if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &sslen) == 0)
		addr_format((struct sockaddr *)&ss, c->base.peer, sizeof(c->base.peer));
	cr->cb(cr->ctx, &c->base, 0, NULL);
	free(cr);
}

int tcp_connect(uv_loop_t *loop, const char *host, uint16_t port, tcp_connect_cb cb, void *ctx)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct tcp_connecting *cr;
	struct tcp_conn *c;
	int rc;

	if (addr_resolve(host, port, &ss, &sl) < 0)
		return PPRPC_EINVAL;
	cr = calloc(1, sizeof(*cr));
	c = calloc(1, sizeof(*c));
	if (c)
		c->inbuf = malloc(INBUF_SIZE);
	if (!cr || !c || !c->inbuf) {
		free(cr);
		if (c)
			free(c->inbuf);
		free(c);
		return PPRPC_ENOMEM;
	}
	c->base.ops = &tcp_ops;
	uv_tcp_init(loop, &c->h);
	c->h.data = c;
	cr->c = c;
	cr->cb = cb;
	cr->ctx = ctx;
	cr->req.data = cr;
	rc = uv_tcp_connect(&cr->req, &c->h, (struct sockaddr *)&ss, on_connected);
	if (rc < 0) {
		uv_close((uv_handle_t *)&c->h, free_handle_conn);
		free(cr);
		return PPRPC_ECONN;
	}
	return 0;
}

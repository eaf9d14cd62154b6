/* transport/transport.c — vtable dispatch and shared accounting. */
#include "transport/transport_impl.h"

#include "pprpc_types.h"

int transport_unsupported(struct transport_conn *c)
{
	(void)c;
	return PPRPC_EUNSUPP;
}

int transport_start(struct transport_conn *c, const struct transport_owner *owner, void *ctx,
		    const struct frame_limits *lim)
{
	c->owner = owner;
	c->owner_ctx = ctx;
	frame_reader_init(&c->reader, owner->frame, ctx, lim);
	return c->ops->start(c);
}

int transport_send(struct transport_conn *c, const struct iovec *iov, int iovcnt,
		   transport_send_cb done, void *arg)
{
	return c->ops->send(c, iov, iovcnt, done, arg);
}

int transport_pause(struct transport_conn *c) { return c->ops->pause(c); }
int transport_resume(struct transport_conn *c) { return c->ops->resume(c); }
void transport_close(struct transport_conn *c) { c->ops->close(c); }
const struct transport_stats *transport_stats(struct transport_conn *c)
{
	c->stats.frames_in = c->reader.frames;
	return &c->stats;
}
const char *transport_name(const struct transport_conn *c) { return c->ops->name; }
const char *transport_peer(const struct transport_conn *c) { return c->peer; }
size_t transport_send_queue(const struct transport_conn *c) { return c->ops->send_queue(c); }

int transport_feed(struct transport_conn *c, const uint8_t *data, size_t len)
{
	c->stats.bytes_in += len;
	return frame_reader_feed(&c->reader, data, len);
}

int transport_advance(struct transport_conn *c, size_t n)
{
	c->stats.bytes_in += n;
	c->stats.direct_bulk_bytes += n;
	return frame_reader_advance(&c->reader, n);
}

const struct frame_reader *transport_reader(const struct transport_conn *c)
{
	return &c->reader;
}

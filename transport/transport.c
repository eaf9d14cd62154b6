/* transport/transport.c — vtable dispatch and shared accounting. */
#include "transport/transport_impl.h"

#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

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
void transport_abort(struct transport_conn *c)
{
	/* optional: a transport without it closes as usual */
	(c->ops->abort ? c->ops->abort : c->ops->close)(c);
}
const struct transport_stats *transport_stats(struct transport_conn *c)
{
	c->stats.frames_in = c->reader.frames;
	return &c->stats;
}
const char *transport_name(const struct transport_conn *c) { return c->ops->name; }
const char *transport_peer(const struct transport_conn *c) { return c->peer; }

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

void transport_info_basic(const struct transport_conn *c, struct transport_info *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->kind, sizeof(out->kind), "%s", c->ops->name);
	out->gid_index = -1;
}

void transport_get_info(const struct transport_conn *c, struct transport_info *out)
{
	/* optional: a transport without it is described by its name */
	(c->ops->info ? c->ops->info : transport_info_basic)(c, out);
	snprintf(out->fallback, sizeof(out->fallback), "%s", c->fallback);
}

void transport_set_fallback(struct transport_conn *c, const char *why)
{
	snprintf(c->fallback, sizeof(c->fallback), "%s", why ? why : "");
}

void transport_describe(const struct transport_conn *c, char *buf, size_t len)
{
	struct transport_info ti;

	transport_get_info(c, &ti);
	if (!strcmp(ti.kind, "rdma"))
		snprintf(buf, len, "rdma device %s gid %d mtu %u ring %ux%u KiB rx %u (memlock step %s%s%s); bulk %s",
			 ti.device, ti.gid_index, ti.mtu, ti.tx_depth, ti.chunk >> 10, ti.rx_depth, ti.ladder,
			 ti.ladder_why[0] ? ": " : "", ti.ladder_why, ti.bulk);
	else
		snprintf(buf, len, "%s%s%s", ti.kind, ti.fallback[0] ? " (RDMA fallback: " : "",
			 ti.fallback[0] ? ti.fallback : "");
	if (ti.fallback[0] && strcmp(ti.kind, "rdma") && strlen(buf) + 2 < len)
		strcat(buf, ")");
}

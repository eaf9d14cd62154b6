/*
 * daemon/core/core.c — the context's services every part calls: device
 * lookup, queue kicks, close hooks, and the connection interface
 * (conn_if.h), each through the operations the server filled
 * (core_impl.h).
 */
#include <stddef.h>

#include "daemon/core/core_impl.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"

static const struct core_ops *ops(const struct pprpcd *d)
{
	return d->ops ? d->ops : &core_stub_ops;
}

struct device *pprpcd_device(struct pprpcd *d, uint32_t index)
{
	return index < d->ndev ? d->dev[index] : NULL;
}

void pprpcd_kick_queues(struct pprpcd *d)
{
	ops(d)->kick_queues(d);
}

int pprpcd_on_conn_close(struct pprpcd *d, pprpcd_conn_hook fn)
{
	if (d->nconn_hooks >= PPRPCD_MAX_CONN_HOOKS)
		return PPRPC_ELIMIT;
	d->conn_hooks[d->nconn_hooks++] = fn;
	return 0;
}

void pprpcd_conn_closed(struct pprpcd *d, struct conn *c)
{
	for (uint32_t i = 0; i < d->nconn_hooks; i++)
		d->conn_hooks[i](d, c);
}

/* ---- the connection interface ------------------------------------------------ */

void conn_ref(struct conn *c)
{
	ops(conn_daemon(c))->conn_ref(c);
}

void conn_unref(struct conn *c)
{
	ops(conn_daemon(c))->conn_unref(c);
}

void conn_abort(struct conn *c)
{
	ops(conn_daemon(c))->conn_abort(c);
}

void conn_enqueue(struct conn *c, uint64_t staged)
{
	ops(conn_daemon(c))->conn_enqueue(c, staged);
}

void conn_unqueue(struct conn *c, uint64_t staged)
{
	ops(conn_daemon(c))->conn_unqueue(c, staged);
}

void conn_wait_begin(struct conn *c)
{
	ops(conn_daemon(c))->conn_wait_begin(c);
}

void conn_wait_end(struct conn *c)
{
	ops(conn_daemon(c))->conn_wait_end(c);
}

struct stream *conn_stream(struct conn *c, uint32_t dev)
{
	return ops(conn_daemon(c))->conn_stream(c, dev);
}

void conn_count_error(struct conn *c)
{
	ops(conn_daemon(c))->conn_count_error(c);
}

uint64_t conn_frames_in(const struct conn *c)
{
	return ops(conn_daemon(c))->conn_frames_in(c);
}

const char *conn_link_name(const struct conn *c)
{
	return ops(conn_daemon(c))->conn_link_name(c);
}

int reply_send(struct conn *c, uint16_t type, uint64_t req_id, const ProtobufCMessage *m,
	       const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg)
{
	return ops(conn_daemon(c))->reply_send_part(c, type, req_id, 0, m, bulk, bulk_len, done, arg);
}

int reply_send_part(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
		    const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg)
{
	return ops(conn_daemon(c))->reply_send_part(c, type, req_id, more, m, bulk, bulk_len, done, arg);
}

void reply_error(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg)
{
	ops(conn_daemon(c))->reply_error(c, type, req_id, code, msg);
}

void reply_error_msg(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e)
{
	ops(conn_daemon(c))->reply_error_msg(c, type, req_id, e);
}

void reply_ok(struct conn *c, uint16_t type, uint64_t req_id)
{
	ops(conn_daemon(c))->reply_ok(c, type, req_id);
}

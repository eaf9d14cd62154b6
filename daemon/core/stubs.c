/*
 * daemon/core/stubs.c — core_ops of a daemon context the server did not
 * bind (core_impl.h): unit tests that build one by hand for the objects,
 * the queues or the transfers.  Kicks have no queue to wake; a connection
 * cannot exist there, so its calls act as on one already closed.
 */
#include <stddef.h>

#include "daemon/core/core_impl.h"
#include "pprpc/types.h"

static void no_kick(struct pprpcd *d)
{
	(void)d;
}

static void no_conn(struct conn *c)
{
	(void)c;
}

static void no_count(struct conn *c, uint64_t staged)
{
	(void)c;
	(void)staged;
}

static struct stream *no_stream(struct conn *c, uint32_t dev)
{
	(void)c;
	(void)dev;
	return NULL;
}

static uint64_t no_frames(const struct conn *c)
{
	(void)c;
	return 0;
}

static void no_who(const struct conn *c, uint64_t *ret_id, int *ret_peer)
{
	(void)c;
	*ret_id = 0;
	*ret_peer = 0;
}

static const char *no_link(const struct conn *c)
{
	(void)c;
	return NULL;
}

static int closed_send(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
		       const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg)
{
	(void)c, (void)type, (void)req_id, (void)more, (void)m, (void)bulk, (void)bulk_len;
	if (done)
		done(arg, PPRPC_ECLOSED);
	return PPRPC_ECLOSED;
}

static void closed_error(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg)
{
	(void)c, (void)type, (void)req_id, (void)code, (void)msg;
}

static void closed_error_msg(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e)
{
	(void)c, (void)type, (void)req_id, (void)e;
}

static void closed_ok(struct conn *c, uint16_t type, uint64_t req_id)
{
	(void)c, (void)type, (void)req_id;
}

const struct core_ops core_stub_ops = {
	.kick_queues = no_kick,
	.conn_ref = no_conn,
	.conn_unref = no_conn,
	.conn_abort = no_conn,
	.conn_enqueue = no_count,
	.conn_unqueue = no_count,
	.conn_wait_begin = no_conn,
	.conn_wait_end = no_conn,
	.conn_stream = no_stream,
	.conn_count_error = no_conn,
	.conn_frames_in = no_frames,
	.conn_link_name = no_link,
	.conn_trace_who = no_who,
	.reply_send_part = closed_send,
	.reply_error = closed_error,
	.reply_error_msg = closed_error_msg,
	.reply_ok = closed_ok,
};

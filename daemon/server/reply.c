/* daemon/server/reply.c — reply framing (see reply.h). */
#include "daemon/server/reply.h"

#include <stdlib.h>

#include "daemon/server/conn.h"
#include "daemon/server/conn_impl.h"
#include "daemon/core/trace.h"
#include "transport/transport.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/meta.h"

struct reply_buf {
	struct conn *c;       /* outlives the write: the transport closes after its writes */
	transport_send_cb done;
	void *arg;
	uint8_t bytes[];      /* header + meta */
};

static void reply_sent(void *arg, int status)
{
	struct reply_buf *rb = arg;

	if (rb->done)
		rb->done(rb->arg, status);
	conn_reply_sent(rb->c);
	free(rb);
}

static int send_frame(struct conn *c, uint16_t type, uint32_t flags, uint64_t req_id,
		      const ProtobufCMessage *m, const void *bulk, uint64_t bulk_len,
		      transport_send_cb done, void *arg)
{
	size_t mlen = m ? meta_size(m) : 0;
	struct frame_hdr h = {
		.version = PPRPC_PROTO_VERSION,
		.type = type,
		.flags = flags | FRAME_F_REPLY | (bulk_len ? FRAME_F_BULK : 0),
		.meta_len = (uint32_t)mlen,
		.bulk_len = bulk_len,
		.req_id = req_id,
	};
	struct iovec iov[2];
	struct reply_buf *rb;
	int rc;

	if (c->closed) {
		rc = PPRPC_ECLOSED;
		goto fail;
	}
	rb = malloc(sizeof(*rb) + FRAME_HDR_SIZE + mlen);
	if (!rb) {
		rc = PPRPC_ENOMEM;
		goto fail;
	}
	rb->c = c;
	rb->done = done;
	rb->arg = arg;
	frame_hdr_encode(&h, rb->bytes);
	if (m)
		meta_pack(m, rb->bytes + FRAME_HDR_SIZE);
	iov[0].iov_base = rb->bytes;
	iov[0].iov_len = FRAME_HDR_SIZE + mlen;
	iov[1].iov_base = (void *)bulk;
	iov[1].iov_len = (size_t)bulk_len;
	/* before the send: a transport that writes at once lets the client
	 * read the reply before transport_send returns */
	if (c->d->trace)
		trace_req(c->d, c, type, req_id, TRACE_REPLY, trace_now_ns());
	rc = transport_send(c->t, iov, bulk_len ? 2 : 1, reply_sent, rb);
	if (rc < 0) {
		free(rb);
		goto fail;
	}
	conn_reply_queued(c);
	return 0;
fail:
	if (done)
		done(arg, rc);
	return rc;
}

int reply_send_part_impl(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
			 const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg)
{
	return send_frame(c, type, more ? FRAME_F_MORE : 0, req_id, m, bulk, bulk_len, done, arg);
}

/* A refused request is counted (STATS request_errors, the connection's
 * close line) and said at the default level, so that a counter never rises
 * without a line naming what was refused; a client that keeps sending bad
 * requests gets its first REPLY_ERRORS_LOGGED said, the rest at debug
 * level only (a hostile peer must not fill the journal). */
#define REPLY_ERRORS_LOGGED 8
static void count_error(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg)
{
	int level = c->errors < REPLY_ERRORS_LOGGED ? LOG_INFO_ : LOG_DEBUG_;

	c->errors++;
	c->d->stats.request_errors++;
	LOG(c->d, level, "conn %llu: %s #%llu refused (%d): %s%s", (unsigned long long)c->id, msg_type_name(type),
	    (unsigned long long)req_id, code, msg && *msg ? msg : "error",
	    c->errors == REPLY_ERRORS_LOGGED ? " (further refusals on this connection at debug level)" : "");
}

void reply_error_impl(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg)
{
	Pprpc__ErrorReply e = PPRPC__ERROR_REPLY__INIT;

	e.code = code;
	e.message = (char *)(msg && *msg ? msg : "error");
	e.command = req_id;
	e.command_type = type;
	count_error(c, type, req_id, code, e.message);
	send_frame(c, type, FRAME_F_ERROR, req_id, &e.base, NULL, 0, NULL, NULL);
}

void reply_error_msg_impl(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e)
{
	count_error(c, type, req_id, e->code, e->message);
	send_frame(c, type, FRAME_F_ERROR, req_id, &e->base, NULL, 0, NULL, NULL);
}

void reply_challenge(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e)
{
	/* Part of the handshake, not a failed request: not counted. */
	send_frame(c, type, FRAME_F_ERROR, req_id, &e->base, NULL, 0, NULL, NULL);
}

void reply_ok_impl(struct conn *c, uint16_t type, uint64_t req_id)
{
	Pprpc__Empty e = PPRPC__EMPTY__INIT;

	send_frame(c, type, 0, req_id, &e.base, NULL, 0, NULL, NULL);
}

/*
 * daemon/server/conn_impl.h — this layer's implementation of the
 * connection interface (core/conn_if.h), put in d->ops by pprpcd_bind
 * (server.c).  Everyone else, handlers included, calls conn_ref(),
 * reply_send() and the rest of core/conn_if.h, never these.
 */
#ifndef PPRPC_DAEMON_CONN_IMPL_H
#define PPRPC_DAEMON_CONN_IMPL_H

#include "daemon/core/conn_if.h"

/* conn.c */
void conn_ref_impl(struct conn *c);
void conn_unref_impl(struct conn *c);
void conn_abort_impl(struct conn *c);
void conn_enqueue_impl(struct conn *c, uint64_t staged);
void conn_unqueue_impl(struct conn *c, uint64_t staged);
void conn_wait_begin_impl(struct conn *c);
void conn_wait_end_impl(struct conn *c);
struct stream *conn_stream_impl(struct conn *c, uint32_t dev);
void conn_count_error_impl(struct conn *c);
uint64_t conn_frames_in_impl(const struct conn *c);
const char *conn_link_name_impl(const struct conn *c);
void conn_trace_who_impl(const struct conn *c, uint64_t *ret_id, int *ret_peer);
/* reply.c */
int reply_send_part_impl(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
			 const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg);
void reply_error_impl(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg);
void reply_error_msg_impl(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);
void reply_ok_impl(struct conn *c, uint16_t type, uint64_t req_id);

#endif

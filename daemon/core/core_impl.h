/*
 * daemon/core/core_impl.h — what the server fills at start for the parts
 * below it: waking the device queues and the connection interface
 * (conn_if.h).
 *
 * The parts that call these (objects/, exec/, request/, xfer/, peer/) sit
 * below the server and include nothing of it; the server, which knows the
 * devices' queues and owns every connection, puts its implementation in
 * d->ops before anything runs (pprpcd_bind, libuv style: the loop calls
 * through the handle's callbacks, never into the code that set them).  A
 * daemon context built by hand (unit tests) without pprpcd_bind gets
 * core_stub_ops: kicks do nothing (no queue to wake), and the connection
 * calls are never reached there (no connection exists).
 */
#ifndef PPRPC_DAEMON_CORE_IMPL_H
#define PPRPC_DAEMON_CORE_IMPL_H

#include "daemon/core/conn_if.h"

struct core_ops {
	/* Wake every device worker to re-check commands that were not ready. */
	void (*kick_queues)(struct pprpcd *d);
	/* The connection (conn_if.h has what each does). */
	void (*conn_ref)(struct conn *c);
	void (*conn_unref)(struct conn *c);
	void (*conn_abort)(struct conn *c);
	void (*conn_enqueue)(struct conn *c, uint64_t staged);
	void (*conn_unqueue)(struct conn *c, uint64_t staged);
	void (*conn_wait_begin)(struct conn *c);
	void (*conn_wait_end)(struct conn *c);
	struct stream *(*conn_stream)(struct conn *c, uint32_t dev);
	void (*conn_count_error)(struct conn *c);
	uint64_t (*conn_frames_in)(const struct conn *c);
	const char *(*conn_link_name)(const struct conn *c);
	/* its id and whether it is another rank's link (core/trace.h) */
	void (*conn_trace_who)(const struct conn *c, uint64_t *ret_id, int *ret_peer);
	int (*reply_send_part)(struct conn *c, uint16_t type, uint64_t req_id, int more,
			       const ProtobufCMessage *m, const void *bulk, uint64_t bulk_len,
			       conn_sent_fn done, void *arg);
	void (*reply_error)(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg);
	void (*reply_error_msg)(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);
	void (*reply_ok)(struct conn *c, uint16_t type, uint64_t req_id);
};

extern const struct core_ops core_stub_ops;

#endif

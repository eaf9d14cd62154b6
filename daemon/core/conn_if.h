/*
 * daemon/core/conn_if.h — a connection as the parts below the server see
 * it: a reference to hold, replies to send, in-flight counts to keep.
 *
 * struct conn is defined by the server (server/conn.h) and is opaque here.
 * Whoever is handed one (a queued command, a transfer, a loop-side wait)
 * reaches the connection only through these calls, which go through the
 * operations the server put in the daemon context at start
 * (core/core_impl.h, pprpcd_bind): so exec/, request/, xfer/ and objects/
 * include nothing of server/ and the connection layer can change behind
 * them (valkey's connection.h: callers see connWrite(), the type fills it).
 *
 * The one thing known of the layout: struct conn begins with its daemon
 * (server/conn.h asserts it), and a pointer to a structure points to its
 * first member (C11 6.7.2.1), which is how conn_daemon() finds the
 * operations.  Loop thread only, like the connection itself.
 */
#ifndef PPRPC_DAEMON_CORE_CONN_IF_H
#define PPRPC_DAEMON_CORE_CONN_IF_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"

struct conn;
struct pprpcd;
struct stream;

/* The write of a reply is done: its bulk memory may be reused (status < 0:
 * it was not sent).  The same signature as transport_send_cb. */
typedef void (*conn_sent_fn)(void *arg, int status);

static inline struct pprpcd *conn_daemon(const struct conn *c)
{
	return *(struct pprpcd *const *)(const void *)c;
}

/* A connection is reference-counted: each holder of c (a command in
 * flight, a wait, a transfer) takes one; the last unref frees it. */
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);
/* Close it now, dropping replies not yet written (a peer that stopped
 * reading must not hold them, and the memory they point to, for ever). */
void conn_abort(struct conn *c);

/* Account a queued command (and its staging bytes); reading from the peer
 * pauses above the high-water marks and resumes below half of them, so a
 * client that queues faster than the device runs never grows our memory
 * without bound. */
void conn_enqueue(struct conn *c, uint64_t staged);
void conn_unqueue(struct conn *c, uint64_t staged);
/* A request the loop answers later — HOST_WAIT, SUBSCRIBE, PROBE, PULL —
 * counts as in flight from its arrival to its answer, against
 * max-conn-inflight like a queued command. */
void conn_wait_begin(struct conn *c);
void conn_wait_end(struct conn *c);

/* c's stream on the device of wire index dev (< PPRPCD_CONN_MAX_DEVICES). */
struct stream *conn_stream(struct conn *c, uint32_t dev);
/* Count a failed request that gets no error reply of its own (a queued
 * one: FENCE reports it). */
void conn_count_error(struct conn *c);
/* Frames read from c so far (0 once its transport is gone). */
uint64_t conn_frames_in(const struct conn *c);
/* Its transport's name ("tcp", "rdma"), NULL once the transport is gone. */
const char *conn_link_name(const struct conn *c);

/* Send a reply with optional bulk.  done(arg, status) runs once the bulk
 * memory may be reused — also when the connection is already closed, in
 * which case nothing is sent.  Returns 0 or a negative code (done was still
 * called).  A reply echoes the request id and type and sets the REPLY flag;
 * an error reply also sets ERROR and carries an ErrorReply. */
int reply_send(struct conn *c, uint16_t type, uint64_t req_id, const ProtobufCMessage *m,
	       const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg);
/* One reply of a streamed answer (more = others follow, FRAME_F_MORE). */
int reply_send_part(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
		    const void *bulk, uint64_t bulk_len, conn_sent_fn done, void *arg);
void reply_error(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg);
/* An error reply from a prepared ErrorReply (command id/type as given). */
void reply_error_msg(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);
/* An empty success reply. */
void reply_ok(struct conn *c, uint16_t type, uint64_t req_id);

#endif

/*
 * daemon/server/reply.h — sending replies.  A reply echoes the request id and type
 * and sets the REPLY flag; an error reply also sets ERROR and carries an
 * ErrorReply (code + message).
 */
#ifndef PPRPC_DAEMON_REPLY_H
#define PPRPC_DAEMON_REPLY_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"
#include "transport/transport.h"

struct conn;

/* Send a reply with optional bulk.  done(arg, status) runs once the bulk
 * memory may be reused — also when the connection is already closed, in
 * which case nothing is sent.  Returns 0 or a negative code (done was still
 * called). */
int reply_send(struct conn *c, uint16_t type, uint64_t req_id, const ProtobufCMessage *m,
	       const void *bulk, uint64_t bulk_len, transport_send_cb done, void *arg);
/* One reply of a streamed answer (more = others follow, FRAME_F_MORE). */
int reply_send_part(struct conn *c, uint16_t type, uint64_t req_id, int more, const ProtobufCMessage *m,
		    const void *bulk, uint64_t bulk_len, transport_send_cb done, void *arg);
void reply_error(struct conn *c, uint16_t type, uint64_t req_id, int code, const char *msg);
/* An error reply from a prepared ErrorReply (command id/type as given). */
void reply_error_msg(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);
/* An empty success reply. */
void reply_ok(struct conn *c, uint16_t type, uint64_t req_id);

/* An authentication challenge (an error reply that is no failure). */
void reply_challenge(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);

#endif

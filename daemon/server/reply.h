/*
 * daemon/server/reply.h — sending replies (server side).  A reply echoes the request id and type
 * and sets the REPLY flag; an error reply also sets ERROR and carries an
 * ErrorReply (code + message).
 */
#ifndef PPRPC_DAEMON_REPLY_H
#define PPRPC_DAEMON_REPLY_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"

/* reply_send, reply_send_part, reply_error, reply_error_msg and reply_ok
 * are every part's: core/conn_if.h (reply.c implements them). */
#include "daemon/core/conn_if.h"

/* An authentication challenge (an error reply that is no failure). */
void reply_challenge(struct conn *c, uint16_t type, uint64_t req_id, const Pprpc__ErrorReply *e);

#endif

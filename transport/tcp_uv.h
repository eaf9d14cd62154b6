/*
 * transport/tcp_uv.h — the TCP transport on libuv streams (daemon side).
 */
#ifndef PPRPC_TRANSPORT_TCP_UV_H
#define PPRPC_TRANSPORT_TCP_UV_H

#include <uv.h>

#include "transport/transport.h"

struct tcp_listener;

/* A connection was accepted; the callee must call transport_start (or
 * transport_close) on it. */
typedef void (*tcp_accept_cb)(void *ctx, struct transport_conn *c);

/* Listen on host:port (port 0 = ephemeral; the bound port is written to
 * *ret_port).  IPv4 and IPv6 literals and names are accepted.  Returns 0 or
 * a negative PPRPC_E* code with a reason in err. */
int tcp_listen(uv_loop_t *loop, const char *host, uint16_t port, tcp_accept_cb cb, void *ctx,
	       struct tcp_listener **ret_listener, uint16_t *ret_port, char *err, size_t errlen);
void tcp_listener_close(struct tcp_listener *l);

/* Connected (c != NULL, status 0) or failed (c == NULL, status < 0, reason
 * in err).  On success the callee must call transport_start. */
typedef void (*tcp_connect_cb)(void *ctx, struct transport_conn *c, int status, const char *err);

/* Connect to host:port (numeric or resolvable).  cb runs once, from the loop. */
int tcp_connect(uv_loop_t *loop, const char *host, uint16_t port, tcp_connect_cb cb, void *ctx);

#endif

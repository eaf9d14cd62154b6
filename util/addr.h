/*
 * util/addr.h — "HOST:PORT" parsing and socket address resolution,
 * shared by the daemon (listen) and the client (connect).
 */
#ifndef PPRPC_UTIL_ADDR_H
#define PPRPC_UTIL_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Split "host:port", "[v6]:port" or "v6addr" + default port.  host is
 * written without brackets.  Returns 0 or PPRPC_EINVAL. */
int addr_split(const char *s, char *host, size_t hostlen, uint16_t *port, uint16_t default_port);

/* Resolve numerically or by name (first result).  Returns 0 or PPRPC_EINVAL
 * / PPRPC_ECONN. */
int addr_resolve(const char *host, uint16_t port, struct sockaddr_storage *out, socklen_t *outlen);

/* "1.2.3.4:5" / "[::1]:5" for logs. */
void addr_format(const struct sockaddr *sa, char *buf, size_t len);

/* True for 127.0.0.0/8 and ::1. */
int addr_is_loopback(const struct sockaddr *sa);

#endif

/*
 * libclient/client.h — internals of a pprpc_client (one connection).
 */
#ifndef PPRPC_LIBCLIENT_CLIENT_H
#define PPRPC_LIBCLIENT_CLIENT_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "pprpc.h"
#include "proto/pprpc.pb-c.h"

#define CLIENT_MAX_DEVICES 16

struct pprpc_client {
	int fd;
	int broken;              /* stream out of sync or closed: refuse calls */
	int io_timeout_ms;
	uint64_t next_id;
	char err[512];
	char daemon_version[32];
	pprpc_caps caps;
	uint64_t max_bulk;
	uint32_t ndev;
	pprpc_device_info dev[CLIENT_MAX_DEVICES];
};

/* Record a failure message on c; returns code (for tail calls). */
int client_fail(pprpc_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One request/reply exchange.
 *   req        meta of the request (type `type`)
 *   out_bulk   bulk sent after the meta (may be NULL / 0)
 *   rep_desc   descriptor of the expected reply meta; *ret_rep gets it
 *              (free with meta_free) — may be NULL to ignore the reply meta
 *   in_bulk    where the reply's bulk goes; in_len must equal its size
 * An error reply returns its code with its message in c->err. */
int rpc_call(pprpc_client *c, uint16_t type, const ProtobufCMessage *req, const void *out_bulk,
	     uint64_t out_len, const ProtobufCMessageDescriptor *rep_desc, ProtobufCMessage **ret_rep,
	     void *in_bulk, uint64_t in_len);

/* Blocking socket helpers (sock.c). */
int sock_connect(const char *addr, int timeout_ms, int *ret_fd, char *err, size_t errlen);
int sock_writev_all(int fd, struct iovec *iov, int iovcnt);
int sock_read_all(int fd, void *buf, size_t len, int timeout_ms);

#endif

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
#include "proto/frame_reader.h"
#include "proto/msgtype.h"
#include "proto/pprpc.pb-c.h"
#include "util/expect.h"

#define CLIENT_MAX_DEVICES 16
#define CLIENT_INBUF 65536
#define CLIENT_MAX_HOST_PAGES 16

/* A host page (host_page.c) as this connection's daemon has it. */
struct client_hp {
	uint64_t region;   /* the allocation's id */
	uint64_t handle;   /* the daemon's; 0: refused (its GETs go by the link) */
	int pinned;
};

/* A request waiting for its reply. */
struct pending {
	struct pending *next;
	uint64_t id;
	uint16_t type;
	int done;
	int rc;
	const ProtobufCMessageDescriptor *rep_desc;  /* NULL: ignore the reply meta */
	ProtobufCMessage *rep;                       /* decoded reply (free with meta_free) */
	void *bulk;                                  /* reply bulk goes here */
	uint64_t bulk_len;                           /* expected reply bulk size */
	int async;                                   /* heap-allocated; freed on completion */
	int orphan;                                  /* a pprpc_request let go in flight: freed on
						      * completion, reply and failure dropped */
	int has_challenge;                           /* error reply carried an auth challenge */
	uint8_t challenge[32];
	char err[256];
};

/* A public request handle (pprpc.h): a pending the caller owns.  p comes
 * first, so an orphan is freed through its pending. */
struct pprpc_request {
	struct pending p;
};

struct pprpc_client {
	int fd;
	int broken;              /* stream out of sync or closed: refuse calls */
	int io_timeout_ms;
	uint64_t next_id;
	struct frame_reader reader;
	uint8_t *inbuf;
	struct pending *pend_head, *pend_tail;
	struct pending *cur;     /* reply being received */
	uint64_t async_outstanding;
	int async_err;           /* first failure of an async request, reported at sync */
	char async_errmsg[256];
	char err[512];
	char daemon_version[32];
	char placement[256];
	char daemon_host[40];    /* HELLO's host: its boot id ("" from an older daemon) */
	char unavailable[4][256];
	int nunavailable;
	pprpc_caps caps;
	int weights_file, weights_cache;  /* HELLO's caps (pprpc_weights.h) */
	uint64_t max_bulk;
	uint32_t ndev;
	pprpc_device_info dev[CLIENT_MAX_DEVICES];
	/* What pprpc_reconnect needs to open the session again. */
	char addr[256];
	char name[128];
	char key_file[4096];
	int connect_timeout_ms;
	int user_io_timeout_ms;
	int cancel_fd;           /* readable: every wait fails (liveness.c); -1 = none */
	pprpc_trace *trace;      /* the caller's (pprpc_set_trace), NULL = off */
	/* Waits spin around the time the last ones of the same request type
	 * took, instead of sleeping through the reply's arrival (rpc.c,
	 * pprpc_set_spin): by type, and [0] for waits on async replies. */
	int spin;
	struct expect wait_est[MSG_TYPE_COUNT];
	/* host pages this daemon mapped (host_page.c) */
	struct client_hp hp[CLIENT_MAX_HOST_PAGES];
	int nhp;
	uint64_t hp_seen_frees;
	char hp_why[256];        /* the last refusal */
};

/* A line of c->trace (trace.c) for request id of type (send, recv). */
void client_trace(pprpc_trace *t, const char *conn, uint16_t type, uint64_t id, const char *event);

/* Record a failure message on c; returns code (for tail calls). */
int client_fail(pprpc_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Send a request.  flags: FRAME_F_* besides BULK.  p (may be NULL when no
 * reply is expected) is registered before the bytes leave, filled with its
 * id.  While the socket is full, replies are drained, so a client that
 * queues much work never deadlocks against a daemon waiting for it to read. */
int rpc_send(pprpc_client *c, uint16_t type, uint32_t flags, const ProtobufCMessage *req,
	     const void *bulk, uint64_t blen, struct pending *p);
/* Make progress until p is done (or the timeout / a broken stream). */
int rpc_wait(pprpc_client *c, struct pending *p);
/* p's memory is going away before its reply came (the wait failed): take it
 * off the pending list.  A reply arriving later would find no request and
 * mark the stream out of sync, so only after a failed rpc_wait. */
void rpc_forget(pprpc_client *c, struct pending *p);
/* Make progress until no async request is outstanding. */
int rpc_drain(pprpc_client *c);
/* Set up / tear down the reply machinery on a connected fd. */
int rpc_init(pprpc_client *c);
void rpc_fini(pprpc_client *c);

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
/* rpc_call for a reply that carries one uint64 (a new handle, a value):
 * the field at byte offset off of the unpacked reply goes to *out. */
int rpc_call_u64(pprpc_client *c, uint16_t type, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *rep_desc, size_t off, uint64_t *out);

/* A queued TENSOR_SET (async.c); key (32 bytes, may be NULL): the rank
 * keeps the bytes in its weights cache under it (pprpc_weights.h). */
int client_set_queued(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data, uint64_t size,
		      const uint8_t *key);

/* Does size bytes at data lie in a host page (pprpc_host_alloc) this
 * connection's daemon mapped (mapping it now if it was not asked yet)?  1
 * with the daemon's handle and the offset in the page, else 0 (the bytes
 * go by the link). */
int host_page_target(pprpc_client *c, const void *data, uint64_t size, uint64_t *ret_handle, uint64_t *ret_off);
/* A new session: the daemon has none of them any more. */
void host_page_forget(pprpc_client *c);

/* Connect (sock.c).  The fd is left non-blocking with TCP_NODELAY. */
int sock_connect(const char *addr, int timeout_ms, int *ret_fd, char *err, size_t errlen);

#endif

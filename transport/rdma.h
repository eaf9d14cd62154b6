/*
 * transport/rdma.h — the RDMA transport (rdmacm + ibverbs, RC queue pairs).
 *
 * The byte stream of frames travels in SEND_WITH_IMM messages through
 * registered TX/RX rings whose flow control is rdma_ring.h (receiver-driven
 * credits; no send ever depends on RNR retry).  Everything is driven from
 * the libuv loop: the rdmacm event channel fd and the CQ completion channel
 * fd are uv_poll handles, completions are polled in batches after each
 * notification, and nothing spins while idle.
 *
 * Connection setup uses rdmacm, so RoCE and iWARP work alike.  The private
 * data of CONNECT/ACCEPT carries each side's chunk and receive depth.
 *
 * Memory: the rings (tx_depth + rx_depth slots of chunk bytes) are
 * allocated and registered once per connection.  RLIMIT_MEMLOCK is read
 * first and the geometry stepped down to fit (rdma_ring.h's ladder:
 * requested -> smaller depth -> one 256 KiB chunk -> TCP); a registration
 * that fails anyway steps down further.  The step taken and why is in the
 * connection's transport_info.
 *
 * Large payloads (--rdma-bulk read, off by default): a frame's bulk from
 * the threshold on is described instead of sent, and the receiver pulls it
 * by RDMA READ (rdma_bulk.h); bulk slots and declared regions are
 * registered after the rings, from what the memlock budget leaves.  Which
 * path moved the bytes is in transport_stats (bulk_bytes_in/out) and the
 * bulk state in transport_info.bulk.  doc/rdma-bulk.md has the measurements.
 *
 * Built without libibverbs/librdmacm (rdma_none.c), every entry point fails
 * with PPRPC_EUNSUPP and says so.
 */
#ifndef PPRPC_TRANSPORT_RDMA_H
#define PPRPC_TRANSPORT_RDMA_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "transport/rdma_ring.h"
#include "transport/transport.h"

struct rdma_ctx;
struct rdma_listener;

typedef void (*rdma_accept_cb)(void *ctx, struct transport_conn *c);
typedef void (*rdma_connect_cb)(void *ctx, struct transport_conn *c, int status, const char *err);

/* 1 when built with RDMA support. */
int rdma_built(void);

/* Per-daemon state: the loop, the requested geometry, bytes registered by
 * all connections (they share one memlock budget). */
int rdma_ctx_new(uv_loop_t *loop, const struct rdma_geom *req, struct rdma_ctx **ret_ctx, char *err,
		 size_t errlen);
void rdma_ctx_free(struct rdma_ctx *x);

/* Declare [p, p+len) mapped at this address, and never unmapped, for the
 * context's whole life (the daemon's SEND staging ring).  On connections
 * set up afterwards whose bulk path is on, it is registered once (inside
 * the memlock budget, after rings and bulk slots) and a bulk lying in it
 * goes zero-copy: the peer READs it in place and the send's callback runs
 * only once the peer has it.  The peer can then read the whole region:
 * the same trust as the shared key that admitted it.  At most
 * RDMA_MAX_REGIONS; PPRPC_ELIMIT beyond. */
#define RDMA_MAX_REGIONS 4
int rdma_ctx_add_region(struct rdma_ctx *x, void *p, size_t len);

/* Listen with rdmacm on host:port (the TCP port number; RoCE's rdmacm port
 * space is separate from TCP's).  Fails (reason in err) when no RDMA
 * device serves host. */
int rdma_transport_listen(struct rdma_ctx *x, const char *host, uint16_t port, rdma_accept_cb cb, void *ctx,
		struct rdma_listener **ret_l, char *err, size_t errlen);
void rdma_listener_close(struct rdma_listener *l);

/* Connect to host:port.  cb runs once from the loop: with the connection
 * (then call transport_start) or with NULL, a negative status and the
 * reason (no device, rejected, unreachable, memlock, ...).  A synchronous
 * failure returns < 0 with the reason in err and no callback. */
int rdma_transport_connect(struct rdma_ctx *x, const char *host, uint16_t port, rdma_connect_cb cb, void *ctx,
		 char *err, size_t errlen);

/* Memlock budget for ring registration in bytes (UINT64_MAX: unlimited),
 * and a description for logs. */
uint64_t rdma_memlock_budget(char *desc, size_t desclen);

#endif

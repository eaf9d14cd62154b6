/*
 * daemon/xfer/xfer.h — stage-boundary transfers between daemons (SEND / RECV):
 * what the rest of the daemon calls.  Inside: xfer_impl.h.
 *
 * SEND(region, id, dst rank) on the source queue captures the region into
 * staging slots, chunk by chunk, when the queue reaches it, and the queue
 * moves on (it stalls only when the staging ring is full, and then as a
 * command that is not ready: its device worker serves other streams).  A SEND that is
 * the last command of its stream while the destination pulls skips the
 * capture copy and streams from the tensor in place, keeping the stream
 * until those bytes are written; a later command makes it capture the rest
 * (send_sm.h).  RECV(region, id,
 * src rank) on the destination makes the destination daemon PULL the
 * transfer from the source over its peer link; the source streams each
 * chunk as soon as it is captured (chunk i+1 is captured while chunk i is on
 * the wire), and the destination's queue, on reaching RECV, copies chunks
 * into the region as they arrive.  Bytes never pass through the client.
 *
 * No remote peer holds a device worker: a destination that shows no life
 * for peer-timeout-ms while a transfer waits on it loses the transfer and
 * its connection (source.c, check_stalled).
 *
 * Source and destination meet by transfer id: a PULL that arrives before
 * its SEND waits for it.  A transfer belongs to the rank its SEND names:
 * the source serves a PULL only once that rank confirmed it as its own
 * (PULL_CHECK with the PULL's nonce, source.c).  A transfer fails as a whole (never counted
 * complete with partial data): a lost link, a vanished client or mismatched
 * sizes fail the RECV with an error instead of leaving it waiting.
 */
#ifndef PPRPC_DAEMON_XFER_H
#define PPRPC_DAEMON_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"

struct pprpcd;
struct conn;
struct dbuf;
struct request;

int xfer_init(struct pprpcd *d);
void xfer_fini(struct pprpcd *d);
/* Fail transfers whose other half did not come within the timeout. */
void xfer_expire(struct pprpcd *d, uint64_t now_ms);
/* Shutdown, loop side: close the completion handle. */
void xfer_stop(struct pprpcd *d);
/* Shutdown, before the devices close: undo the staging ring's page lock. */
void xfer_unpin(struct pprpcd *d);
/* Wake workers whose transfers wait (to re-check cancellation). */
void xfer_wake(struct pprpcd *d);
/* Shutdown, before the queues stop: RECVs held on a GPU stream fail and
 * their landing slots' bells are rung (dest.c). */
void xfer_release_held(struct pprpcd *d);
/* Source halves alive (tests: nothing outlives its transfer). */
size_t xfer_live_sources(const struct pprpcd *d);

/* The wire side (handlers/h_xfer.c decodes and validates, then hands over
 * here): SEND and RECV of a client, b its region's buffer (a reference
 * passed in); PULL, PULL_CHECK and PULL_RELEASE of a peer link. */
void xsrc_send(struct conn *c, struct request *r, const Pprpc__Send *m, struct dbuf *b);
void xdst_recv(struct conn *c, struct request *r, const Pprpc__Recv *m, struct dbuf *b);
void xsrc_pull(struct conn *c, struct request *r, const Pprpc__Pull *m);
void xdst_pull_check(struct conn *c, struct request *r, const Pprpc__PullCheck *m);
void xsrc_pull_release(struct conn *c, struct request *r, const Pprpc__PullRelease *m);

/* Per-boundary statistics (loop thread). */
struct bstat {
	struct bstat *next;
	char peer[64];
	char dir[8];            /* "send" | "recv" */
	char path[16];          /* "p2p-tcp" | "p2p-rdma": the link of the last transfer */
	uint64_t transfers, bytes, time_us, errors;
	uint64_t copy_us;       /* recv by IPC: time in the copies themselves */
	uint64_t ipc_bytes;     /* of bytes, those moved by IPC */
};

#endif

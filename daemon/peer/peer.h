/*
 * daemon/peer/peer.h — links to other ranks.
 *
 * A link is opened on first use (role peer), says HELLO — authenticating
 * with the daemon's own key when it has one (proto/auth.h; all ranks share
 * the key) and refusing a rank that cannot prove it — and carries requests this
 * daemon makes of another rank: SUBSCRIBE (a remote timeline wait) and PULL
 * (the bytes of a stage-boundary transfer).  Requests made before the link
 * is up are queued and sent once it is.  Replies are matched by id; a PULL
 * is answered by several replies (FRAME_F_MORE), whose bulk the requester
 * places straight into its memory.  When a link is lost, every outstanding
 * request fails (nothing waits forever), and the next request connects
 * again.
 *
 * Remote timeline waits use a mirror (struct rtl, mirror.c):
 * SUBSCRIBE(timeline, value) is answered once the owner's timeline reaches
 * value — a notification, never polling — which raises the mirror and
 * wakes the waiting worker.
 */
#ifndef PPRPC_DAEMON_PEER_H
#define PPRPC_DAEMON_PEER_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/objects/timeline.h"
#include "proto/frame.h"

struct pprpcd;
struct peer;

/* What the requester is told about its request's replies. */
struct preq_ops {
	/* A reply's meta arrived: code 0 (meta holds the reply) or < 0 (error
	 * reply; errmsg).  May name where the reply's bulk goes (*bulk_dst);
	 * returns 0 or a negative code if the reply is unacceptable (the link
	 * is then dropped: its stream cannot be trusted). */
	int (*meta)(void *arg, int code, const char *errmsg, const struct frame_hdr *h,
		    const uint8_t *meta, size_t len, void **bulk_dst);
	/* The reply (bulk included) is complete; more = further replies follow. */
	void (*done)(void *arg, const struct frame_hdr *h, int more);
	/* The request can never be answered (link lost or shutdown). */
	void (*fail)(void *arg, int code, const char *why);
};

/* Send request m of type to rank; ops are called from the loop.  Returns 0,
 * or a negative code with a reason (then no callback runs). */
int peer_request(struct pprpcd *d, const char *rank, uint16_t type, const ProtobufCMessage *m,
		 const struct preq_ops *ops, void *arg, char *err, size_t errlen);
/* Periodic: fail links not up (connected, HELLO answered) within
 * peer_connect_timeout_ms, ping quiet links that have requests
 * outstanding, drop those silent past peer_timeout_ms (their requests
 * fail, naming the rank and what timed out). */
void peer_keepalive(struct pprpcd *d, uint64_t now_ms);
/* For STATS: the links, their rank and transport (NULL while connecting). */
struct peer *peer_first(struct pprpcd *d);
struct peer *peer_next(struct peer *p);
const char *peer_rank(const struct peer *p);
struct transport_conn *peer_transport(struct peer *p);
/* "rdma" or "tcp": what the link to rank runs on now. */
const char *peer_path(struct pprpcd *d, const char *rank);
/* The live link to rank: the numeric address it is connected to ("ip:port",
 * "[ip6]:port") and a serial that differs for every connection the daemon
 * opens.  0, or PPRPC_ECONN when the link is not up. */
int peer_link_info(struct pprpcd *d, const char *rank, char *addr, size_t len, uint64_t *ret_serial);
/* Shutdown: close every link (outstanding requests fail). */
void peer_close_all(struct pprpcd *d);

struct rtl {
	struct tl_cell cell;     /* guarded by the timeline lock */
	char rank[64];
	uint64_t handle;
	uint64_t requested;      /* highest value subscribed so far */
	int refs;                /* queued WAITs + outstanding subscriptions + the table */
	int failed;
	int in_table;            /* live: found by later WAITs */
	struct rtl *hnext;       /* the table's bucket chain */
};

/* A mirror of timeline handle at rank, subscribed up to at least value;
 * returns it referenced, or NULL with a reason in err (nothing is kept
 * then). */
struct rtl *peer_mirror_get(struct pprpcd *d, const char *rank, uint64_t handle, uint64_t value,
			    char *err, size_t errlen);
void peer_mirror_unref(struct pprpcd *d, struct rtl *m);
/* Mirrors in the table (metrics: nothing outlives its WAITs). */
size_t peer_mirrors_live(const struct pprpcd *d);
/* Shutdown: fail every mirror (its WAITs are released) and empty the
 * table; fini frees the table itself. */
void peer_mirrors_close(struct pprpcd *d);
void peer_mirrors_fini(struct pprpcd *d);

#endif

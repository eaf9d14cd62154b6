/*
 * daemon/server/conn.h — one client or peer connection.
 *
 * Request path, one layer per file: transport (transport/) → frame
 * (proto/frame_reader) → decode + validate (here) → dispatch table indexed
 * by message type (dispatch.c) → handler (h_*.c).
 *
 * Lifetime: a connection is reference-counted — one reference for the
 * transport, one per in-flight command.  When the transport closes, its
 * queued work is cancelled, the parts' close hooks run (pprpcd.h:
 * device waits, transfers, the handlers' host waits and subscriptions),
 * the objects it owns are retired at once (objects/owner.h) and replies of
 * commands still in flight are dropped; the struct is freed with the last
 * reference.  Buffers, graphs and timelines know the connection only as
 * their owner (c->own); queued requests and transfers know it through
 * core/conn_if.h: no part below the server includes this header
 * (doc/layers.md).
 */
#ifndef PPRPC_DAEMON_CONN_H
#define PPRPC_DAEMON_CONN_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/core/conn_if.h"
#include "daemon/core/request.h"
#include "daemon/exec/stream.h"
#include "daemon/objects/owner.h"
#include "proto/frame.h"
#include "transport/transport.h"

#define PPRPCD_CONN_MAX_DEVICES 16
/* Before its HELLO is done, a connection (keyed daemon or not) sends no
 * bulk and no meta larger than this: whoever has not said who they are
 * gets a few KiB of the daemon's memory, not max-meta-kib of it. */
#define CONN_HELLO_MAX_META 4096u

struct pprpcd;
struct lwait;
struct deferred;

/* The parts below the server see a connection through core/conn_if.h
 * (the calls the server fills at start) and know only that it begins with
 * its daemon. */
struct conn {
	struct pprpcd *d;           /* first: conn_daemon() reads it */
	struct transport_conn *t;
	uint64_t id;
	int refs;
	int closed;                 /* transport gone: send nothing */
	int closing;                /* close decided: execute nothing more */
	int hello_done;
	uint64_t born_ms;           /* loop time of the accept (hello-timeout-ms) */
	int role;
	char name[64];
	struct request cur;
	struct owner own;           /* its buffers, graphs, timelines and their cost (max-conn-*) */
	struct lwait *lwaits;       /* host waits and peers' subscriptions (h_timeline.c) */
	uint64_t requests;
	uint64_t errors;
	/* a client connection loads (buffers, weights, its context) until its
	 * first graph or boundary request (dispatch.h: ends_load); from that
	 * one on it runs (STATS request_counts) */
	int running;
	struct stream streams[PPRPCD_CONN_MAX_DEVICES];
	/* back-pressure: queued commands and staging bytes in flight */
	uint64_t queued_cmds;
	uint64_t staged_bytes;
	uint64_t unsent_replies;    /* replies queued on the transport (reply.c) */
	uint64_t waits;             /* HOST_WAITs, SUBSCRIBEs, PROBEs, PULLs not yet answered (conn_wait_begin) */
	/* TENSOR_GET copies made for this connection and not yet written to
	 * it (conn_copy_*: the device worker makes them, the loop frees them) */
	atomic_uint_least64_t copy_bytes;
	atomic_int copy_waiting;    /* a GET waits for copy_bytes to go down */
	int paused;                 /* above the high-water marks (flow) */
	int read_paused;            /* the transport is paused, for that or for busy */
	/* A request of this connection runs off the loop (a large ggml
	 * create): the frames read meanwhile wait in order behind it. */
	int busy;
	struct deferred *defer_head, **defer_tail;
	uint64_t ndeferred;         /* counted against max-conn-inflight */
	/* authentication (authn.c): the outstanding challenge of this connection */
	uint8_t auth_nonce[32];
	uint64_t auth_nonce_ms;     /* loop time it was issued */
	int auth_pending;           /* a challenge is outstanding (one answer allowed) */
	int auth_challenges;        /* issued on this connection */
	struct conn *next, *prev;
};
_Static_assert(offsetof(struct conn, d) == 0, "core/conn_if.h: conn_daemon() reads the first member");

/* Take over an accepted transport connection; beyond max-conns it is
 * closed at once. */
void conn_accept(struct pprpcd *d, struct transport_conn *t);
/* Close connections whose HELLO did not complete within hello-timeout-ms
 * (the periodic tick). */
void conn_expire_hello(struct pprpcd *d, uint64_t now_ms);
/* Close the connection (after queued replies are written). */
void conn_close(struct conn *c);
/* Replies count as in flight until written: a client that sends requests
 * but never reads its replies is paused too (reply.c calls these). */
void conn_reply_queued(struct conn *c);
void conn_reply_sent(struct conn *c);
/* A request that leaves the loop (h_ggml.c: a large create) marks its
 * connection busy until it is back: reading pauses, the frames already
 * read are deferred, and busy_end runs them in order (dropping them if the
 * connection is closing) before reading resumes.  Loop only. */
void conn_busy_begin(struct conn *c);
void conn_busy_end(struct conn *c);

/* Replies are counted in bytes too (issue 19.13: back-pressure counted
 * replies, and 48 queued 8 MiB GETs of a client that never reads grew the
 * daemon by 400 MB): a queued TENSOR_GET makes its copy only when the
 * connection's copies not yet written leave room for it under
 * max-conn-reply-mib (any one copy may be made when none is held); until
 * then it waits in its queue (ready()), and writing a copy out wakes it.
 * Any thread. */
int conn_copy_fits(struct conn *c, uint64_t n);
/* Take n bytes of the connection's copy budget: 1, or 0 when they do not
 * fit (then wait for conn_copy_fits). */
int conn_copy_take(struct conn *c, uint64_t n);
void conn_copy_put(struct conn *c, uint64_t n);

/* Limits (daemon options max_conn_*).  The in-flight limit (queued commands,
 * pending host waits and subscriptions, unsent replies) is checked as each frame arrives; reading pauses at
 * half of it (at most 4096), so only a client that keeps writing into a
 * paused connection's already-read data can reach it — it is then answered
 * PPRPC_ELIMIT and closed, since refusing with more replies would grow
 * memory again.  Device memory, buffer and graph counts are the owner's
 * (c->own, filled from max-conn-bytes/-buffers/-graphs at accept). */

#endif

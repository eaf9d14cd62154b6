/*
 * daemon/server/conn.h — one client or peer connection.
 *
 * Request path, one layer per file: transport (transport/) → frame
 * (proto/frame_reader) → decode + validate (here) → dispatch table indexed
 * by message type (dispatch.c) → handler (h_*.c).
 *
 * Lifetime: a connection is reference-counted — one reference for the
 * transport, one per in-flight command.  When the transport closes, the
 * connection's buffers and graphs are retired at once and replies of
 * commands still in flight are dropped; the struct is freed with the last
 * reference.
 */
#ifndef PPRPC_DAEMON_CONN_H
#define PPRPC_DAEMON_CONN_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "daemon/exec/stream.h"
#include "proto/frame.h"
#include "transport/transport.h"

#define PPRPCD_CONN_MAX_DEVICES 16

struct pprpcd;
struct dbuf;
struct graph;
struct handler;
struct timeline;
struct lwait;

struct request {
	struct frame_hdr hdr;
	const struct handler *h;
	ProtobufCMessage *msg;      /* decoded meta, freed after the handler */
	int err;                    /* refused before run: reply this */
	char errmsg[256];
	struct dbuf *bulk_buf;      /* receiving bulk (reference held) */
	void *stage;                /* bulk staged for a queued write (owned until handed over) */
};

struct conn {
	struct pprpcd *d;
	struct transport_conn *t;
	uint64_t id;
	int refs;
	int closed;                 /* transport gone: send nothing */
	int closing;                /* close decided: execute nothing more */
	int hello_done;
	int role;
	char name[64];
	struct request cur;
	struct dbuf *bufs;          /* owned buffers */
	struct graph *graphs;       /* owned graphs */
	struct timeline *timelines; /* owned timelines */
	struct lwait *lwaits;       /* host waits and peers' subscriptions */
	uint64_t nbuffers;
	uint64_t allocated;
	uint64_t ngraphs;
	uint64_t charged;           /* page-rounded device memory held (buffers, arenas) */
	uint64_t requests;
	uint64_t errors;
	struct stream streams[PPRPCD_CONN_MAX_DEVICES];
	/* back-pressure: queued commands and staging bytes in flight */
	uint64_t queued_cmds;
	uint64_t staged_bytes;
	uint64_t unsent_replies;    /* replies queued on the transport (reply.c) */
	uint64_t waits;             /* HOST_WAITs / SUBSCRIBEs not yet answered (h_timeline.c) */
	int paused;
	/* authentication (authn.c): the outstanding challenge of this connection */
	uint8_t auth_nonce[32];
	uint64_t auth_nonce_ms;     /* loop time it was issued */
	int auth_pending;           /* a challenge is outstanding (one answer allowed) */
	int auth_challenges;        /* issued on this connection */
	struct conn *next, *prev;
};

/* Take over an accepted transport connection. */
void conn_accept(struct pprpcd *d, struct transport_conn *t);
void conn_ref(struct conn *c);
void conn_unref(struct conn *c);
/* Close the connection (after queued replies are written). */
void conn_close(struct conn *c);
/* Close it now, dropping replies not yet written (a peer that stopped
 * reading must not hold them, and the memory they point to, for ever). */
void conn_abort(struct conn *c);

/* Account a queued command (and its staging bytes); reading from the peer
 * pauses above the high-water marks and resumes below half of them, so a
 * client that queues faster than the device runs never grows our memory
 * without bound. */
void conn_enqueue(struct conn *c, uint64_t staged);
void conn_unqueue(struct conn *c, uint64_t staged);
/* Replies count as in flight until written: a client that sends requests
 * but never reads its replies is paused too (reply.c calls these). */
void conn_reply_queued(struct conn *c);
void conn_reply_sent(struct conn *c);

/* Limits (daemon options max_conn_*).  The in-flight limit (queued commands,
 * pending host waits and subscriptions, unsent replies) is checked as each frame arrives; reading pauses at
 * half of it (at most 4096), so only a client that keeps writing into a
 * paused connection's already-read data can reach it — it is then answered
 * PPRPC_ELIMIT and closed, since refusing with more replies would grow
 * memory again.  Device memory is charged page-rounded (what an allocation
 * really costs); buffer_alloc and graph_create check before allocating.
 * Returns 0 with the page-rounded footprint of size, or PPRPC_ELIMIT with a
 * message naming the limit. */
int conn_charge_check(const struct conn *c, uint64_t size, uint64_t *ret_footprint, char *err,
		      size_t errlen);

void conn_add_buffer(struct conn *c, struct dbuf *b);
void conn_remove_buffer(struct conn *c, struct dbuf *b);
/* Drop pending host waits / subscriptions (h_timeline.c). */
void conn_cancel_lwaits(struct conn *c);
void conn_add_timeline(struct conn *c, struct timeline *t);
void conn_remove_timeline(struct conn *c, struct timeline *t);
void conn_add_graph(struct conn *c, struct graph *g);
void conn_remove_graph(struct conn *c, struct graph *g);

#endif

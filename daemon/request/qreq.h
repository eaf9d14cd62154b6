/*
 * daemon/request/qreq.h — a request executed on a device queue.
 *
 * Holds a connection reference for as long as the command is in flight, so
 * the reply path never touches a freed connection (a closed one just drops
 * the reply).  Handlers embed struct qreq first in their own command struct.
 *
 * A request with FRAME_F_QUEUED gets no success reply; its failure becomes
 * the stream's sticky error.  Without it, the reply goes out on completion.
 *
 * Its own part (request/) above device/ and exec/: a device owns its
 * queue (device -> exec), and a queued request needs both; it reaches its
 * connection through core/conn_if.h, so handlers/ and xfer/ share it
 * without either including the server.
 */
#ifndef PPRPC_DAEMON_QREQ_H
#define PPRPC_DAEMON_QREQ_H

#include "daemon/exec/queue.h"

struct conn;
struct request;
struct device;

struct qreq {
	struct qcmd q;
	struct conn *c;
	struct device *dev;
	int queued;                         /* FRAME_F_QUEUED */
	int always_reply;                   /* set before push: reply even when queued (GET) */
	/* set before push: small work the loop may run itself when the stream
	 * and the device are idle (queue_run_inline), sparing the two thread
	 * hand-offs (loop -> worker -> loop) that cost more than the work */
	int inline_ok;
	uint64_t staged;                    /* staging bytes accounted to the connection */
	/* optional: send the success reply (default: empty OK); must consume
	 * nothing else.  Runs only when status == 0 and a reply is due. */
	void (*reply)(struct qreq *qr);
	/* optional: drop held objects */
	void (*release)(struct qreq *qr);
};

/* Push qr (calloc'ed by the caller) on dev's queue as request r of c. */
void qreq_push(struct qreq *qr, struct conn *c, const struct request *r, struct device *dev,
	       int (*exec)(struct qcmd *q));
/* A refused request.  A plain request (and any GET) gets its error reply
 * now; a queued one's failure must land in order, so a failing command is
 * queued on every device (the handle that failed may name any of them) for
 * FENCE to report. */
void qreq_refuse(struct conn *c, const struct request *r, int code, const char *msg);
/* device_done_fn for a command whose exec returned QCMD_PENDING: arg is
 * the qreq; completes it on its device's queue. */
void qreq_device_done(void *arg, int status, const char *why);
/* Queue a FENCE of c's stream on dev. */
void qreq_fence(struct conn *c, const struct request *r, struct device *dev);

#endif

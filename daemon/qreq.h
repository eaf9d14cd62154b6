/*
 * daemon/qreq.h — a request executed on a device queue.
 *
 * Holds a connection reference for as long as the command is in flight, so
 * the reply path never touches a freed connection (a closed one just drops
 * the reply).  Handlers embed struct qreq first in their own command struct.
 */
#ifndef PPRPC_DAEMON_QREQ_H
#define PPRPC_DAEMON_QREQ_H

#include "daemon/queue.h"

struct conn;
struct request;
struct device;

struct qreq {
	struct qcmd q;
	struct conn *c;
	struct device *dev;
	uint16_t type;
	uint64_t req_id;
	void (*release)(struct qreq *qr);  /* optional: drop held objects */
};

/* Push qr (allocated by the caller with malloc) on dev's queue.  When it
 * completes: error reply with q.err, or an empty OK reply; then release()
 * and free. */
void qreq_push(struct qreq *qr, struct conn *c, const struct request *r, struct device *dev,
	       int (*exec)(struct qcmd *q));

#endif

/* daemon/qreq.c — queued requests (see qreq.h). */
#include "daemon/qreq.h"

#include <stdlib.h>

#include "daemon/conn.h"
#include "daemon/device.h"
#include "daemon/reply.h"

static void qreq_done(struct qcmd *q)
{
	struct qreq *qr = (struct qreq *)q;

	qr->dev->commands++;
	if (q->status < 0) {
		qr->dev->errors++;
		reply_error(qr->c, qr->type, qr->req_id, q->status, q->err);
	} else {
		reply_ok(qr->c, qr->type, qr->req_id);
	}
	if (qr->release)
		qr->release(qr);
	conn_unref(qr->c);
	free(qr);
}

void qreq_push(struct qreq *qr, struct conn *c, const struct request *r, struct device *dev,
	       int (*exec)(struct qcmd *q))
{
	qr->c = c;
	qr->dev = dev;
	qr->type = r->hdr.type;
	qr->req_id = r->hdr.req_id;
	qr->q.exec = exec;
	qr->q.done = qreq_done;
	conn_ref(c);
	queue_push(dev->q, &qr->q);
}

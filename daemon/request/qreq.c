/* daemon/request/qreq.c — queued requests (see qreq.h). */
#include "daemon/request/qreq.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/core/conn_if.h"
#include "daemon/core/request.h"
#include "daemon/core/trace.h"
#include "daemon/device/device.h"
#include "daemon/exec/stream.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/frame.h"
#include "proto/msgtype.h"

/* A FENCE parked on s whose earlier commands have all completed: settled
 * here, on the loop (the queue's lock orders it after the writes of the
 * stream's failure by the worker and by device completions). */
static void settle_parked_fence(struct stream *s)
{
	struct qreq *f = s->fence;

	if (!f || s->inflight != 1)
		return;
	s->fence = NULL;
	queue_run_inline(f->dev->q, &f->q);
}

/* The request trace's queue hops: exec times the worker kept in q, and
 * now, its completion on the loop (core/trace.h). */
static void trace_done(struct pprpcd *d, struct qcmd *q, struct conn *c)
{
	if (q->t_start) {
		trace_req(d, c, q->type, q->req_id, TRACE_EXEC_START, q->t_start);
		for (int i = 0; i < TRACE_MARKS; i++)
			if (q->t_mark[i])
				trace_req(d, c, q->type, q->req_id, TRACE_EXEC_READY + i, q->t_mark[i]);
		trace_req(d, c, q->type, q->req_id, TRACE_EXEC_END, q->t_end);
	}
	trace_req(d, c, q->type, q->req_id, TRACE_DONE, trace_now_ns());
}

static void qreq_done(struct qcmd *q)
{
	struct qreq *qr = (struct qreq *)q;
	struct conn *c = qr->c;
	struct stream *s = conn_stream(c, qr->dev->index);

	if (conn_daemon(c)->trace)
		trace_done(conn_daemon(c), q, c);

	qr->dev->commands++;
	s->inflight--;
	if (q->status < 0)
		qr->dev->errors++;
	if (q->status < 0 && (!qr->queued || qr->always_reply))
		reply_error(c, q->type, q->req_id, q->status, q->err);
	else if (q->status == 0 && (!qr->queued || qr->reply))
		qr->reply ? qr->reply(qr) : reply_ok(c, q->type, q->req_id);
	if (qr->release)
		qr->release(qr);
	settle_parked_fence(s);
	conn_unqueue(c, qr->staged);
	conn_unref(c);
	free(qr);
}

static void prepare(struct qreq *qr, struct conn *c, const struct request *r, struct device *dev,
		    int (*exec)(struct qcmd *q))
{
	qr->c = c;
	qr->dev = dev;
	qr->queued = (r->hdr.flags & FRAME_F_QUEUED) != 0;
	qr->q.exec = exec;
	qr->q.done = qreq_done;
	qr->q.stream = conn_stream(c, dev->index);
	qr->q.req_id = r->hdr.req_id;
	qr->q.type = r->hdr.type;
	qr->q.sticky = (uint8_t)qr->queued;
	qr->q.load = r->load;
}

/* qr is in flight: it holds its connection and counts on its stream. */
static void count(struct qreq *qr)
{
	qr->q.stream->inflight++;
	conn_ref(qr->c);
	conn_enqueue(qr->c, qr->staged);
}

/* Everything the worker reads is set before this: the push publishes it. */
static void submit(struct qreq *qr)
{
	struct stream *s = qr->q.stream;
	int idle;

	/* A parked FENCE keeps its place: into the queue ahead of qr. */
	if (s->fence) {
		struct qreq *f = s->fence;

		s->fence = NULL;
		queue_push(f->dev->q, &f->q);
	}
	/* Inline only behind nothing of its own stream: its done() must not
	 * overtake an earlier command's. */
	idle = stream_idle(s);
	count(qr);
	if (qr->inline_ok && idle && queue_run_inline(qr->dev->q, &qr->q))
		return;
	queue_push(qr->dev->q, &qr->q);
}

void qreq_push(struct qreq *qr, struct conn *c, const struct request *r, struct device *dev,
	       int (*exec)(struct qcmd *q))
{
	prepare(qr, c, r, dev, exec);
	submit(qr);
}

void qreq_device_done(void *arg, int status, const char *why)
{
	struct qreq *qr = arg;

	queue_complete(qr->dev->q, &qr->q, status, why);
}

struct fail_cmd {
	struct qreq qr;
	int code;
	char msg[200];
};

static int fail_exec(struct qcmd *q)
{
	struct fail_cmd *f = (struct fail_cmd *)q;

	snprintf(q->err, sizeof(q->err), "%s", f->msg);
	return f->code;
}

void qreq_refuse(struct conn *c, const struct request *r, int code, const char *msg)
{
	struct pprpcd *d = conn_daemon(c);

	/* A GET always answers: its client waits for the bytes. */
	if (!(r->hdr.flags & FRAME_F_QUEUED) || r->hdr.type == MSG_TENSOR_GET) {
		reply_error(c, r->hdr.type, r->hdr.req_id, code, msg);
		return;
	}
	conn_count_error(c);
	for (uint32_t i = 0; i < d->ndev; i++) {
		struct fail_cmd *f = calloc(1, sizeof(*f));

		if (!f)
			return;
		f->code = code;
		snprintf(f->msg, sizeof(f->msg), "%s", msg);
		qreq_push(&f->qr, c, r, d->dev[i], fail_exec);
	}
}

static void fence_reply(struct qreq *qr)
{
	Pprpc__FenceReply rep = PPRPC__FENCE_REPLY__INIT;

	rep.completed = qr->dev->commands;
	reply_send(qr->c, qr->q.type, qr->q.req_id, &rep.base, NULL, 0, NULL, NULL);
}

static void fence_done(struct qcmd *q)
{
	struct qreq *qr = (struct qreq *)q;
	Pprpc__ErrorReply e = PPRPC__ERROR_REPLY__INIT;

	if (q->status < 0 && q->fail_cmd) {
		/* The reply names the command that failed, not the FENCE. */
		e.code = q->status;
		e.message = q->err;
		e.command = q->fail_cmd;
		e.command_type = q->fail_type;
		qr->dev->errors++;
		reply_error_msg(qr->c, q->type, q->req_id, &e);
		q->status = 0;
		qr->reply = NULL;
		qr->queued = 1; /* answered */
	}
	qreq_done(q);
}

/*
 * A FENCE never goes through the worker unless a command follows it while
 * it waits.  The marker would cost two thread hand-offs (loop -> worker ->
 * uv_async -> loop) on top of the completions it waits for, which arrive on
 * the loop anyway:
 * - idle stream (nothing in flight, no failure): answered at once;
 * - nothing in flight, a failure to report: settled on the loop under the
 *   queue's lock, which reports and clears it as the worker would;
 * - commands in flight, none of them waiting in the queue or running on
 *   the worker (pending on the device, or completed and not drained yet):
 *   parked on the stream and settled by the last one's done()
 *   (settle_parked_fence), or pushed behind them when the client queues
 *   another command first (submit), so issue order holds;
 * - otherwise into the queue as a marker: a command still waiting there
 *   may depend on what follows it (a SEND that is last in its stream
 *   streams its tensor in place and keeps the stream, xfer.c), and the
 *   worker is busy with the stream anyway, so the marker costs little.
 */
void qreq_fence(struct conn *c, const struct request *r, struct device *dev)
{
	struct stream *s = conn_stream(c, dev->index);
	struct qreq *qr;

	if (stream_idle(s)) {
		Pprpc__FenceReply rep = PPRPC__FENCE_REPLY__INIT;

		dev->commands++; /* counted as the queued marker was */
		rep.completed = dev->commands;
		reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
		return;
	}
	qr = calloc(1, sizeof(*qr));
	if (!qr) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	prepare(qr, c, r, dev, NULL);
	qr->reply = fence_reply;
	qr->queued = 0; /* a FENCE always answers */
	qr->q.sticky = 0;
	qr->q.fence = 1;
	qr->q.done = fence_done;
	if (s->inflight == 0) {
		count(qr);
		queue_run_inline(dev->q, &qr->q);
	} else if (!s->fence && queue_stream_quiet(dev->q, s)) {
		count(qr);
		s->fence = qr;
	} else {
		submit(qr);
	}
}

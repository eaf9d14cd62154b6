/*
 * daemon/handlers/h_probe.c — PING (answered at once) and PROBE (can this daemon
 * reach another rank over a peer link?).  A client uses PROBE before
 * choosing daemon-to-daemon transfers, so it can fall back to relaying
 * boundaries itself, and say why, when the daemons cannot reach each other.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/peer/peer.h"
#include "daemon/pprpcd.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"
#include "proto/msgtype.h"

void h_ping(struct conn *c, struct request *r)
{
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}

struct probe {
	struct conn *c;
	uint64_t req_id;
	int code;
	char msg[200];
	uv_timer_t timer;
	int answered;
	int pending;      /* the PING request is outstanding */
};

static void probe_closed(uv_handle_t *h)
{
	struct probe *p = h->data;

	conn_unref(p->c);
	free(p);
}

static void probe_answer(struct probe *p, int code, const char *msg)
{
	if (p->answered)
		return;
	p->answered = 1;
	conn_wait_end(p->c);
	if (code < 0)
		reply_error(p->c, MSG_PROBE, p->req_id, code, msg);
	else
		reply_ok(p->c, MSG_PROBE, p->req_id);
	uv_timer_stop(&p->timer);
}

static void probe_maybe_free(struct probe *p)
{
	if (p->answered && !p->pending)
		uv_close((uv_handle_t *)&p->timer, probe_closed);
}

static int ping_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
		     size_t len, void **bulk_dst)
{
	struct probe *p = arg;

	(void)h;
	(void)meta;
	(void)len;
	(void)bulk_dst;
	p->code = code;
	snprintf(p->msg, sizeof(p->msg), "%s", errmsg ? errmsg : "");
	return 0;
}

static void ping_done(void *arg, const struct frame_hdr *h, int more)
{
	struct probe *p = arg;

	(void)h;
	(void)more;
	p->pending = 0;
	probe_answer(p, p->code, p->msg);
	probe_maybe_free(p);
}

static void ping_fail(void *arg, int code, const char *why)
{
	struct probe *p = arg;
	char msg[240];

	snprintf(msg, sizeof(msg), "cannot reach the rank: %.200s", why);
	p->pending = 0;
	probe_answer(p, code, msg);
	probe_maybe_free(p);
}

static const struct preq_ops ping_ops = { .meta = ping_meta, .done = ping_done, .fail = ping_fail };

static void probe_timeout(uv_timer_t *t)
{
	struct probe *p = t->data;

	probe_answer(p, PPRPC_ETIMEDOUT, "the rank did not answer in time");
	probe_maybe_free(p);
}

void h_probe(struct conn *c, struct request *r)
{
	const Pprpc__Probe *m = (const Pprpc__Probe *)r->msg;
	Pprpc__Empty e = PPRPC__EMPTY__INIT;
	struct probe *p = calloc(1, sizeof(*p));
	char err[200];

	if (!p) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	p->c = c;
	p->req_id = r->hdr.req_id;
	conn_ref(c);
	/* In flight until answered: a flood of PROBEs meets max-conn-inflight. */
	conn_wait_begin(c);
	uv_timer_init(c->d->loop, &p->timer);
	p->timer.data = p;
	p->pending = 1;
	if (peer_request(c->d, m->rank ? m->rank : "", MSG_PING, &e.base, &ping_ops, p, err, sizeof(err)) < 0) {
		p->pending = 0;
		probe_answer(p, PPRPC_ECONN, err);
		probe_maybe_free(p);
		return;
	}
	uv_timer_start(&p->timer, probe_timeout, m->timeout_ms ? m->timeout_ms : 5000, 0);
}

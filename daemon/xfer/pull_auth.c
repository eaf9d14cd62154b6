/*
 * daemon/xfer/pull_auth.c — who may pull a transfer: the rank its SEND names.
 *
 * Any connection can send a PULL, and a PULL the source served to whoever
 * asked gave a transfer's bytes to anyone (the SEND reported success, the
 * real RECV then failed with "no SEND arrived").  So a PULL carries a nonce
 * its destination drew, and waits here as a candidate until the SEND names
 * the rank; then the source asks that rank, over its own link to the rank's
 * address, whether the PULL is its own (PULL_CHECK: the rank answers OK only
 * for a PULL it sent, dest.c).  A confirmed candidate becomes the puller
 * (source.c, xsrc_attach); the others get PPRPC_EAUTH with the rank's
 * answer.  The connection a confirmed PULL came on is remembered as the
 * rank's (until it closes), so later transfers to that rank on it skip the
 * round trip.  Nothing an unconfirmed PULL says changes the transfer.
 * Loop thread only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/peer/peer.h"
#include "daemon/core/conn_if.h"
#include "daemon/core/request.h"
#include "daemon/xfer/xfer_impl.h"
#include "pprpc/types.h"
#include "proto/msgtype.h"

struct xcheck;

/* A PULL not yet shown to come from the rank the SEND names. */
struct xcand {
	struct xcand *next;
	struct xsend *x;
	struct conn *c;             /* reference held */
	uint64_t req, size;
	bool ipc_req;
	struct xland_offer land;
	uint8_t nonce[XFER_NONCE];
	struct xcheck *check;       /* its PULL_CHECK in flight, or NULL */
};

/* A PULL_CHECK in flight; cand is cleared when the candidate goes first. */
struct xcheck {
	struct xcand *cand;
	int code;
	char why[200];
};

/* An inbound connection shown to be a rank's (no reference: dropped when
 * it closes). */
struct xverified {
	struct xverified *next;
	struct conn *c;
	char rank[64];
};

static bool verified(const struct xfer *xf, const struct conn *c, const char *rank)
{
	for (const struct xverified *v = xf->verified; v; v = v->next)
		if (v->c == c && !strcmp(v->rank, rank))
			return true;
	return false;
}

static void verified_add(struct xfer *xf, struct conn *c, const char *rank)
{
	struct xverified *v;

	if (verified(xf, c, rank) || !(v = calloc(1, sizeof(*v))))
		return;
	v->c = c;
	snprintf(v->rank, sizeof(v->rank), "%s", rank);
	v->next = xf->verified;
	xf->verified = v;
}

static void cand_unlink(struct xcand *k)
{
	for (struct xcand **pp = &k->x->cands; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			k->x->ncands--;
			return;
		}
}

static void cand_free(struct xcand *k)
{
	if (k->check)
		k->check->cand = NULL;
	/* The PULL ends here unless it became the puller (source.c). */
	if (k->c) {
		conn_wait_end(k->c);
		conn_unref(k->c);
	}
	free(k);
}

static void cand_refuse(struct xcand *k, int code, const char *msg)
{
	reply_error(k->c, MSG_PULL, k->req, code, msg);
	cand_unlink(k);
	cand_free(k);
}

/* The candidate is the named rank's: it becomes the puller (its
 * connection reference passes to the transfer). */
static void cand_accept(struct xcand *k)
{
	struct conn *c = k->c;

	cand_unlink(k);
	k->c = NULL;
	xsrc_attach(k->x, c, k->req, k->size, k->ipc_req, &k->land);
	cand_free(k);
}

static void check_end(struct xcheck *ck, int code, const char *why, bool link_failed)
{
	struct xcand *k = ck->cand;
	struct xsend *x;
	char msg[400], reason[200];

	/* why may point into ck (check_done passes ck->why): keep it first. */
	snprintf(reason, sizeof(reason), "%s", why ? why : "");
	why = reason;
	free(ck);
	if (!k)
		return;
	k->check = NULL;
	x = k->x;
	if (code == 0) {
		verified_add(x->xf, k->c, x->peer);
		cand_accept(k);
		return;
	}
	snprintf(msg, sizeof(msg), "transfer %" PRIu64 " belongs to rank %.63s, %s: %.200s", x->sm.id, x->peer,
		 link_failed ? "which could not be asked whether this PULL is its own"
			     : "which says this PULL is not its own",
		 why);
	LOG(x->xf->d, LOG_NOTICE_, "PULL refused: %s", msg);
	cand_refuse(k, PPRPC_EAUTH, msg);
}

static int check_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
		      size_t len, void **bulk_dst)
{
	struct xcheck *ck = arg;

	(void)h, (void)meta, (void)len, (void)bulk_dst;
	ck->code = code;
	snprintf(ck->why, sizeof(ck->why), "%s", code < 0 && errmsg ? errmsg : "");
	return 0;
}

static void check_done(void *arg, const struct frame_hdr *h, int more)
{
	struct xcheck *ck = arg;

	(void)h, (void)more;
	check_end(ck, ck->code, ck->why, false);
}

static void check_fail(void *arg, int code, const char *why)
{
	check_end(arg, code ? code : PPRPC_ECONN, why, true);
}

static const struct preq_ops check_ops = { .meta = check_meta, .done = check_done, .fail = check_fail };

/* The SEND names its rank: is the candidate that rank's? */
static void cand_check(struct xcand *k)
{
	Pprpc__PullCheck pc = PPRPC__PULL_CHECK__INIT;
	struct xsend *x = k->x;
	struct xfer *xf = x->xf;
	struct xcheck *ck;
	char err[200], msg[400];

	if (!x->peer[0]) {
		snprintf(msg, sizeof(msg), "transfer %" PRIu64 ": its SEND names no destination rank", x->sm.id);
		cand_refuse(k, PPRPC_EAUTH, msg);
		return;
	}
	if (verified(xf, k->c, x->peer)) {
		cand_accept(k);
		return;
	}
	ck = calloc(1, sizeof(*ck));
	if (!ck) {
		cand_refuse(k, PPRPC_ENOMEM, "out of memory");
		return;
	}
	ck->cand = k;
	k->check = ck;
	pc.transfer_id = x->sm.id;
	pc.nonce.data = k->nonce;
	pc.nonce.len = sizeof(k->nonce);
	if (peer_request(xf->d, x->peer, MSG_PULL_CHECK, &pc.base, &check_ops, ck, err, sizeof(err)) < 0) {
		k->check = NULL;
		free(ck);
		snprintf(msg, sizeof(msg), "transfer %" PRIu64 " belongs to rank %.63s, which could not be asked "
			 "whether this PULL is its own: %.200s", x->sm.id, x->peer, err);
		cand_refuse(k, PPRPC_EAUTH, msg);
	}
}

void xauth_send_arrived(struct xsend *x)
{
	struct xcand *k, *next;

	for (k = x->cands; k; k = next) {
		next = k->next;
		cand_check(k);
	}
}

void xauth_pull(struct xsend *x, struct conn *c, uint64_t req, const Pprpc__Pull *m)
{
	struct pprpcd *d = conn_daemon(c);
	struct xcand *k = calloc(1, sizeof(*k)), **tail;

	if (!k) {
		reply_error(c, MSG_PULL, req, PPRPC_ENOMEM, "out of memory");
		xsrc_discard_if_unasked(x);
		return;
	}
	k->x = x;
	k->c = c;
	conn_ref(c);
	/* In flight against max-conn-inflight until it ends (issue 19.11). */
	conn_wait_begin(c);
	k->req = req;
	k->size = m->size;
	k->ipc_req = m->ipc_host && d->boot_id[0] && !strcmp(m->ipc_host, d->boot_id);
	memcpy(k->nonce, m->nonce.data, XFER_NONCE);
	/* A landing slot of a daemon of this host: opened once attached. */
	if (d->opts.land && m->land_host && d->boot_id[0] && !strcmp(m->land_host, d->boot_id) &&
	    land_name_ok(m->land_page) && m->land_slot < LAND_SLOTS && m->land_gen) {
		k->land.on = true;
		snprintf(k->land.page, sizeof(k->land.page), "%s", m->land_page);
		k->land.slot = m->land_slot;
		k->land.gen = m->land_gen;
	} else if (m->land_page && *m->land_page) {
		k->land.refused = true; /* the destination stops waiting on it */
	}
	for (tail = &x->cands; *tail; tail = &(*tail)->next)
		;
	*tail = k;
	x->ncands++;
	if (x->sm.have_send)
		cand_check(k);
}

void xauth_refuse_all(struct xsend *x, int code, const char *msg)
{
	while (x->cands)
		cand_refuse(x->cands, code, msg);
}

void xauth_conn_closed(struct xsend *x, struct conn *c)
{
	for (struct xcand *k = x->cands, *next; k; k = next) {
		next = k->next;
		if (k->c == c) {
			cand_unlink(k);
			cand_free(k);
		}
	}
}

void xauth_drop_all(struct xsend *x)
{
	while (x->cands) {
		struct xcand *k = x->cands;

		cand_unlink(k);
		cand_free(k);
	}
}

void xauth_forget_conn(struct xfer *xf, struct conn *c)
{
	for (struct xverified **pp = &xf->verified; *pp;) {
		struct xverified *v = *pp;

		if (v->c == c) {
			*pp = v->next;
			free(v);
		} else {
			pp = &v->next;
		}
	}
}

void xauth_fini(struct xfer *xf)
{
	while (xf->verified) {
		struct xverified *v = xf->verified;

		xf->verified = v->next;
		free(v);
	}
}

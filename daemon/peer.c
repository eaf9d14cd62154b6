/* daemon/peer.c — outbound peer links and remote timeline mirrors. */
#include "daemon/peer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/pprpcd.h"
#include "pprpc_types.h"
#include "proto/frame.h"
#include "proto/meta.h"
#include "proto/msgtype.h"
#include "transport/addr.h"
#include "transport/tcp_uv.h"

/* A SUBSCRIBE in flight (or waiting for the link to come up). */
struct psub {
	struct psub *next;
	uint64_t id;
	uint64_t value;
	uint16_t type;       /* MSG_HELLO for the link's own HELLO */
	int sent;
	struct rtl *m;
};

enum peer_state { PEER_CONNECTING, PEER_UP, PEER_DEAD };

struct peer {
	struct pprpcd *d;
	char rank[64];
	enum peer_state state;
	struct transport_conn *t;
	uint64_t next_id;
	struct psub *subs;
	struct psub *cur;            /* reply being received */
	uint64_t cur_value;
	int cur_err;
	struct peer *next;
};

static void mirror_fail(struct pprpcd *d, struct rtl *m, int code)
{
	m->peer = NULL;
	timeline_cell_set(d, &m->cell, 0, code);
}

static void peer_remove(struct pprpcd *d, struct peer *p)
{
	for (struct peer **pp = &d->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* The link is gone: every mirror that relied on it fails, so no WAIT hangs. */
static void peer_fail(struct peer *p, const char *why)
{
	struct pprpcd *d = p->d;

	if (p->state == PEER_DEAD)
		return;
	p->state = PEER_DEAD;
	LOG(d, LOG_WARN_, "peer %s: link lost (%s); waits on its timelines fail", p->rank, why);
	peer_remove(d, p);
	for (struct rtl *m = d->mirrors; m; m = m->next)
		if (m->peer == p)
			mirror_fail(d, m, PPRPC_ECONN);
	while (p->subs) {
		struct psub *s = p->subs;

		p->subs = s->next;
		if (s->m)
			peer_mirror_unref(d, s->m);
		free(s);
	}
}

static void free_sent(void *arg, int status)
{
	(void)status;
	free(arg);
}

static int send_msg(struct peer *p, uint16_t type, uint64_t id, const ProtobufCMessage *m)
{
	size_t mlen = meta_size(m);
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = type, .meta_len = (uint32_t)mlen, .req_id = id };
	uint8_t *buf = malloc(FRAME_HDR_SIZE + mlen);
	struct iovec iov;
	int rc;

	if (!buf)
		return PPRPC_ENOMEM;
	frame_hdr_encode(&h, buf);
	meta_pack(m, buf + FRAME_HDR_SIZE);
	iov.iov_base = buf;
	iov.iov_len = FRAME_HDR_SIZE + mlen;
	rc = transport_send(p->t, &iov, 1, free_sent, buf);
	if (rc < 0)
		free(buf);
	return rc;
}

static int send_sub(struct peer *p, struct psub *s)
{
	if (s->type == MSG_HELLO) {
		Pprpc__Hello h = PPRPC__HELLO__INIT;

		h.proto_version = PPRPC_PROTO_VERSION;
		h.role = PPRPC__ROLE__ROLE_PEER;
		h.client_name = "pprpcd-peer";
		s->sent = 1;
		return send_msg(p, MSG_HELLO, s->id, &h.base);
	} else {
		Pprpc__Subscribe sub = PPRPC__SUBSCRIBE__INIT;

		sub.timeline = s->m->handle;
		sub.value = s->value;
		s->sent = 1;
		return send_msg(p, MSG_SUBSCRIBE, s->id, &sub.base);
	}
}

static struct psub *sub_find(struct peer *p, uint64_t id, struct psub ***ret_pp)
{
	for (struct psub **pp = &p->subs; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			*ret_pp = pp;
			return *pp;
		}
	return NULL;
}

static int on_header(void *ctx, const struct frame_hdr *h)
{
	struct peer *p = ctx;
	struct psub **pp;
	struct psub *s = sub_find(p, h->req_id, &pp);

	if (!(h->flags & FRAME_F_REPLY) || !s || s->type != h->type || h->bulk_len)
		return PPRPC_EPROTO;
	p->cur = s;
	p->cur_err = 0;
	p->cur_value = 0;
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len, void **bulk_dst)
{
	struct peer *p = ctx;
	ProtobufCMessage *m = NULL;

	(void)bulk_dst;
	if (h->flags & FRAME_F_ERROR) {
		if (meta_unpack(&pprpc__error_reply__descriptor, meta, len, &m) < 0)
			return PPRPC_EPROTO;
		p->cur_err = ((Pprpc__ErrorReply *)m)->code;
		if (p->cur_err >= 0 || p->cur_err <= -PPRPC_E_COUNT_)
			p->cur_err = PPRPC_EPROTO;
		LOG(p->d, LOG_NOTICE_, "peer %s: %s refused: %s", p->rank, msg_type_name(h->type),
		    ((Pprpc__ErrorReply *)m)->message);
	} else if (h->type == MSG_SUBSCRIBE) {
		if (meta_unpack(&pprpc__subscribe_reply__descriptor, meta, len, &m) < 0)
			return PPRPC_EPROTO;
		p->cur_value = ((Pprpc__SubscribeReply *)m)->value;
	}
	meta_free(m);
	return 0;
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	struct peer *p = ctx;
	struct psub **pp, *s = sub_find(p, h->req_id, &pp);

	*pp = s->next;
	if (s->type == MSG_HELLO) {
		free(s);
		if (p->cur_err) {
			/* Wrong version or refused: nothing on this link can work. */
			transport_close(p->t);
		}
		return 0;
	}
	if (p->cur_err)
		timeline_cell_set(p->d, &s->m->cell, 0, p->cur_err);
	else
		timeline_cell_set(p->d, &s->m->cell, p->cur_value, 0);
	peer_mirror_unref(p->d, s->m);
	free(s);
	return 0;
}

static void on_reader_error(void *ctx, int code, uint64_t req_id)
{
	struct peer *p = ctx;

	(void)req_id;
	LOG(p->d, LOG_WARN_, "peer %s: bad reply stream (%d)", p->rank, code);
	transport_close(p->t);
}

static void on_close(void *ctx, int status)
{
	struct peer *p = ctx;

	(void)status;
	peer_fail(p, "connection closed");
	free(p);
}

static const struct frame_reader_ops peer_frame_ops = {
	.on_header = on_header,
	.on_meta = on_meta,
	.on_frame = on_frame,
};

static const struct transport_owner peer_owner = {
	.frame = &peer_frame_ops,
	.on_reader_error = on_reader_error,
	.on_close = on_close,
};

static void on_connect(void *ctx, struct transport_conn *t, int status, const char *err)
{
	struct peer *p = ctx;
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = 0 };

	if (status < 0) {
		peer_fail(p, err ? err : "connect failed");
		free(p);
		return;
	}
	p->t = t;
	if (p->state == PEER_DEAD) {
		/* Shut down while connecting: on_close frees p. */
		transport_start(t, &peer_owner, p, &lim);
		transport_close(t);
		return;
	}
	if (transport_start(t, &peer_owner, p, &lim) < 0) {
		transport_close(t);
		return;
	}
	p->state = PEER_UP;
	LOG(p->d, LOG_INFO_, "peer %s: link up", p->rank);
	for (struct psub *s = p->subs; s; s = s->next)
		if (!s->sent && send_sub(p, s) < 0) {
			transport_close(t);
			return;
		}
}

static struct peer *peer_get(struct pprpcd *d, const char *rank, char *err, size_t errlen)
{
	struct peer *p;
	char host[256];
	uint16_t port;
	struct psub *hello;

	for (p = d->peers; p; p = p->next)
		if (strcmp(p->rank, rank) == 0)
			return p;
	if (strlen(rank) >= sizeof(p->rank) || addr_split(rank, host, sizeof(host), &port, 50052) < 0) {
		snprintf(err, errlen, "bad rank address '%.80s' (expected HOST:PORT)", rank);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	hello = calloc(1, sizeof(*hello));
	if (!p || !hello) {
		free(p);
		free(hello);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->d = d;
	snprintf(p->rank, sizeof(p->rank), "%s", rank);
	hello->type = MSG_HELLO;
	hello->id = ++p->next_id;
	p->subs = hello;
	if (tcp_connect(d->loop, host, port, on_connect, p) < 0) {
		snprintf(err, errlen, "cannot connect to rank %s", rank);
		free(hello);
		free(p);
		return NULL;
	}
	p->next = d->peers;
	d->peers = p;
	return p;
}

static int subscribe(struct peer *p, struct rtl *m, uint64_t value)
{
	struct psub *s = calloc(1, sizeof(*s)), **tail;

	if (!s)
		return PPRPC_ENOMEM;
	s->type = MSG_SUBSCRIBE;
	s->id = ++p->next_id;
	s->value = value;
	s->m = m;
	m->refs++;
	/* Appended: the HELLO stays first on the link. */
	for (tail = &p->subs; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	if (p->state == PEER_UP && send_sub(p, s) < 0) {
		transport_close(p->t);
		return PPRPC_ECONN;
	}
	return 0;
}

struct rtl *peer_mirror_get(struct pprpcd *d, const char *rank, uint64_t handle, uint64_t value,
			    char *err, size_t errlen)
{
	struct rtl *m, **pp;
	struct peer *p;

	for (pp = &d->mirrors; (m = *pp); pp = &m->next) {
		if (m->handle != handle || strcmp(m->rank, rank) != 0)
			continue;
		if (m->peer)
			break;
		/* A failed mirror stays failed for the WAITs that saw it; a new
		 * WAIT gets a fresh one (and a new link). */
		*pp = m->next;
		m->next = NULL;
		peer_mirror_unref(d, m);
		m = NULL;
		break;
	}
	if (!m) {
		p = peer_get(d, rank, err, errlen);
		if (!p)
			return NULL;
		m = calloc(1, sizeof(*m));
		if (!m) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		snprintf(m->rank, sizeof(m->rank), "%s", rank);
		m->handle = handle;
		m->peer = p;
		m->refs = 1; /* the table's */
		m->next = d->mirrors;
		d->mirrors = m;
	}
	if (value > m->requested) {
		if (subscribe(m->peer, m, value) < 0) {
			snprintf(err, errlen, "cannot subscribe to rank %s", rank);
			return NULL;
		}
		m->requested = value;
	}
	m->refs++;
	return m;
}

void peer_mirror_unref(struct pprpcd *d, struct rtl *m)
{
	if (--m->refs > 0)
		return;
	for (struct rtl **pp = &d->mirrors; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	free(m);
}

void peer_close_all(struct pprpcd *d)
{
	while (d->peers) {
		struct peer *p = d->peers;

		if (p->state == PEER_UP) {
			transport_close(p->t);
			peer_fail(p, "shutting down");
		} else {
			/* Still connecting: on_connect sees DEAD and cleans up. */
			peer_fail(p, "shutting down");
		}
	}
	while (d->mirrors) {
		struct rtl *m = d->mirrors;

		d->mirrors = m->next;
		m->next = NULL;
		mirror_fail(d, m, PPRPC_ECANCELED);
		peer_mirror_unref(d, m);
	}
}

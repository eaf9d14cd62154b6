/* daemon/peer/peer.c — outbound peer links (see peer.h). */
#include "daemon/peer/peer.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/auth.h"
#include "proto/hello_client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"
#include "util/addr.h"
#include "transport/rdma.h"
#include "transport/tcp_uv.h"

/* Largest reply bulk a link accepts (one PULL chunk). */
#define PEER_MAX_BULK (64ull << 20)

struct preq {
	struct preq *next;
	uint64_t id;
	uint16_t type;
	int sent;
	uint8_t *frame;           /* header + meta, until sent */
	size_t frame_len;
	const struct preq_ops *ops;
	void *arg;
};

/* A rank named by a host name is resolved first, off the loop
 * (uv_getaddrinfo: the threadpool), so a slow or unanswered DNS query
 * stalls nobody.  A link says HELLO (authenticating with the daemon's own
 * key when it has one, proto/auth.h) before any queued request leaves:
 * requests pipelined behind an unanswered challenge would be refused as
 * "before HELLO". */
enum peer_state { PEER_CONNECTING, PEER_HELLO, PEER_UP, PEER_DEAD, PEER_RESOLVING };

struct peer {
	struct pprpcd *d;
	char rank[64];
	enum peer_state state;
	struct transport_conn *t;
	uint64_t next_id;
	struct preq *reqs;
	struct preq *cur;            /* reply being received */
	uint64_t last_rx_ms;         /* loop time of the last frame (or of link up) */
	int ping_out;                /* a keepalive PING is outstanding */
	char host[256];              /* numeric once resolved */
	uint16_t port;
	uv_getaddrinfo_t gai;        /* PEER_RESOLVING: the name's resolution */
	uint64_t serial;             /* this connection's, unique in the daemon */
	uint64_t born_ms;            /* loop time the link was started (setup bound) */
	char fallback[200];          /* why the link is TCP although RDMA was tried */
	struct peer *next;
	/* HELLO exchange (proto/hello_client.h) */
	struct hello_client hello;
	int hello_rc;                /* verdict on the last HELLO answer */
	int fail_code;               /* why the link is being closed (0 = lost) */
	char fail_why[240];
};

static void peer_remove(struct pprpcd *d, struct peer *p)
{
	for (struct peer **pp = &d->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

static void preq_free(struct preq *q)
{
	free(q->frame);
	free(q);
}

/* The link is gone: every request on it fails, so nothing waits forever. */
static void peer_fail(struct peer *p, int code, const char *why)
{
	struct pprpcd *d = p->d;

	if (p->state == PEER_DEAD)
		return;
	p->state = PEER_DEAD;
	LOG(d, LOG_WARN_, "peer %s: link lost (%s)", p->rank, why);
	peer_remove(d, p);
	while (p->reqs) {
		struct preq *q = p->reqs;

		p->reqs = q->next;
		if (q->ops)
			q->ops->fail(q->arg, code, why);
		preq_free(q);
	}
}

static void sent_cb(void *arg, int status)
{
	(void)status;
	free(arg);
}

static int send_req(struct peer *p, struct preq *q)
{
	struct iovec iov = { q->frame, q->frame_len };
	int rc = transport_send(p->t, &iov, 1, sent_cb, q->frame);

	if (rc < 0)
		return rc;
	q->frame = NULL; /* owned by the write now */
	q->sent = 1;
	return 0;
}

static struct preq *make_req(struct peer *p, uint16_t type, const ProtobufCMessage *m)
{
	size_t mlen = meta_size(m);
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = type, .meta_len = (uint32_t)mlen };
	struct preq *q = calloc(1, sizeof(*q));

	if (!q || !(q->frame = malloc(FRAME_HDR_SIZE + mlen))) {
		free(q);
		return NULL;
	}
	q->id = h.req_id = ++p->next_id;
	q->type = type;
	q->frame_len = FRAME_HDR_SIZE + mlen;
	frame_hdr_encode(&h, q->frame);
	meta_pack(m, q->frame + FRAME_HDR_SIZE);
	return q;
}

static struct preq *req_find(struct peer *p, uint64_t id, struct preq ***ret_pp)
{
	for (struct preq **pp = &p->reqs; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			*ret_pp = pp;
			return *pp;
		}
	return NULL;
}

static int on_header(void *ctx, const struct frame_hdr *h)
{
	struct peer *p = ctx;
	struct preq **pp;
	struct preq *q = req_find(p, h->req_id, &pp);

	p->last_rx_ms = uv_now(p->d->loop);
	if (!(h->flags & FRAME_F_REPLY) || !q || q->type != h->type || h->bulk_len > PEER_MAX_BULK)
		return PPRPC_EPROTO;
	if ((h->flags & FRAME_F_MORE) && h->type != MSG_PULL)
		return PPRPC_EPROTO;
	p->cur = q;
	return 0;
}

static int on_meta(void *ctx, const struct frame_hdr *h, const uint8_t *meta, size_t len, void **bulk_dst)
{
	struct peer *p = ctx;
	struct preq *q = p->cur;
	ProtobufCMessage *m = NULL;
	int code = 0, rc;
	char msg[200] = "";

	if (h->flags & FRAME_F_ERROR) {
		if (meta_unpack(&pprpc__error_reply__descriptor, meta, len, &m) < 0)
			return PPRPC_EPROTO;
		code = ((Pprpc__ErrorReply *)m)->code;
		if (code >= 0 || code <= -PPRPC_E_COUNT_)
			code = PPRPC_EPROTO;
		snprintf(msg, sizeof(msg), "%s", ((Pprpc__ErrorReply *)m)->message);
		meta_free(m);
		if (h->bulk_len)
			return PPRPC_EPROTO;
		if (h->type != MSG_HELLO) /* a challenge is normal; hello_done logs failures */
			LOG(p->d, LOG_NOTICE_, "peer %s: %s refused: %s", p->rank, msg_type_name(h->type), msg);
	}
	rc = q->ops->meta(q->arg, code, msg, h, meta, len, bulk_dst);
	if (rc == 0 && h->bulk_len && !*bulk_dst)
		rc = PPRPC_EPROTO; /* a peer reply's bulk always has a home */
	return rc;
}

static int on_frame(void *ctx, const struct frame_hdr *h)
{
	struct peer *p = ctx;
	struct preq **pp = NULL, *q = req_find(p, h->req_id, &pp);
	int more = (h->flags & FRAME_F_MORE) && !(h->flags & FRAME_F_ERROR);

	p->cur = NULL;
	if (!more)
		*pp = q->next;
	q->ops->done(q->arg, h, more);
	if (!more)
		preq_free(q);
	return 0;
}

static void on_reader_error(void *ctx, int code, uint64_t req_id)
{
	struct peer *p = ctx;

	(void)req_id;
	LOG(p->d, LOG_WARN_, "peer %s: reply stream unusable (%d)", p->rank, code);
	transport_close(p->t);
}

static void on_close(void *ctx, int status)
{
	struct peer *p = ctx;

	(void)status;
	peer_fail(p, p->fail_code ? p->fail_code : PPRPC_ECONN, p->fail_why[0] ? p->fail_why : "connection closed");
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
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = PEER_MAX_BULK };

	if (status < 0) {
		peer_fail(p, PPRPC_ECONN, err ? err : "connect failed");
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
	p->state = PEER_HELLO;
	/* p->reqs starts with the HELLO; the rest waits for its answer. */
	if (send_req(p, p->reqs) < 0)
		transport_close(t);
}

/* ---- the link's HELLO ------------------------------------------------------------ */

static void link_refuse(struct peer *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void link_refuse(struct peer *p, int code, const char *fmt, ...)
{
	va_list ap;

	p->fail_code = code;
	va_start(ap, fmt);
	vsnprintf(p->fail_why, sizeof(p->fail_why), fmt, ap);
	va_end(ap);
	LOG(p->d, LOG_ERR_, "peer %s: %s", p->rank, p->fail_why);
	transport_close(p->t);
}

static int hello_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h,
		      const uint8_t *meta, size_t len, void **bulk_dst)
{
	struct peer *p = arg;
	ProtobufCMessage *m = NULL;

	(void)h;
	(void)bulk_dst;
	if (code < 0) {
		if (meta_unpack(&pprpc__error_reply__descriptor, meta, len, &m) < 0)
			return PPRPC_EPROTO;
		const Pprpc__ErrorReply *e = (const Pprpc__ErrorReply *)m;

		p->hello_rc = hello_client_refused(&p->hello, code, errmsg, e->auth_challenge.data,
						   e->auth_challenge.len);
		meta_free(m);
		return 0;
	}
	if (meta_unpack(&pprpc__hello_reply__descriptor, meta, len, &m) < 0)
		return PPRPC_EPROTO;
	p->hello_rc = hello_client_accept(&p->hello, (const Pprpc__HelloReply *)m);
	meta_free(m);
	return 0;
}

static void hello_done(void *arg, const struct frame_hdr *h, int more);

static void hello_fail(void *arg, int code, const char *why)
{
	(void)arg;
	(void)code;
	(void)why; /* the link's own failure: peer_fail reports it to the others */
}

static const struct preq_ops hello_ops = { .meta = hello_meta, .done = hello_done, .fail = hello_fail };

static struct preq *make_hello(struct peer *p)
{
	Pprpc__Hello hello;
	struct preq *q;

	hello_client_request(&p->hello, &hello);
	q = make_req(p, MSG_HELLO, &hello.base);
	if (q) {
		q->ops = &hello_ops;
		q->arg = p;
	}
	return q;
}

/* Answer a challenge (the answer goes first on the link), refuse a daemon
 * that failed the exchange, or open the link for the queued requests. */
static void hello_done(void *arg, const struct frame_hdr *h, int more)
{
	struct peer *p = arg;
	struct pprpcd *d = p->d;
	struct preq *q;

	(void)h;
	(void)more;
	if (p->state != PEER_HELLO)
		return;
	if (p->hello_rc == HELLO_AGAIN) {
		if (!(q = make_hello(p))) {
			link_refuse(p, PPRPC_EINTERNAL, "cannot answer the rank's authentication challenge");
			return;
		}
		q->next = p->reqs;
		p->reqs = q;
		if (send_req(p, q) < 0)
			transport_close(p->t);
		return;
	}
	hello_client_wipe(&p->hello);
	if (p->hello_rc < 0) {
		link_refuse(p, p->hello_rc, "HELLO failed: %s", p->hello.why);
		return;
	}
	p->state = PEER_UP;
	p->last_rx_ms = uv_now(d->loop);
	if (p->fallback[0])
		transport_set_fallback(p->t, p->fallback);
	{
		char how[400];

		transport_describe(p->t, how, sizeof(how));
		LOG(d, LOG_NOTICE_, "peer %s: link up over %s%s", p->rank, how,
		    d->auth_key_len ? " (authenticated)" : "");
	}
	for (q = p->reqs; q; q = q->next)
		if (!q->sent && send_req(p, q) < 0) {
			transport_close(p->t);
			return;
		}
}

/* RDMA did not come up: auto goes on over TCP, saying why; rdma fails. */
static void on_rdma_connect(void *ctx, struct transport_conn *t, int status, const char *err)
{
	struct peer *p = ctx;
	struct pprpcd *d = p->d;

	if (status == 0 || p->state == PEER_DEAD || d->opts.transport == PPRPCD_TRANSPORT_RDMA) {
		on_connect(p, t, status, err);
		return;
	}
	snprintf(p->fallback, sizeof(p->fallback), "%s", err ? err : "RDMA connect failed");
	LOG(d, LOG_NOTICE_, "peer %s: RDMA not used (%s); connecting over TCP", p->rank, p->fallback);
	if (tcp_connect(d->loop, p->host, p->port, on_connect, p) < 0)
		on_connect(p, NULL, PPRPC_ECONN, "cannot connect over TCP");
}

/* Start the link: RDMA first unless transport = tcp. */
static int link_connect(struct peer *p, char *err, size_t errlen)
{
	struct pprpcd *d = p->d;
	char why[256];

	if (d->opts.transport != PPRPCD_TRANSPORT_TCP) {
		if (d->rdma && rdma_transport_connect(d->rdma, p->host, p->port, on_rdma_connect, p, why,
						      sizeof(why)) == 0)
			return 0;
		if (!d->rdma)
			snprintf(why, sizeof(why), "%.200s", d->rdma_status);
		if (d->opts.transport == PPRPCD_TRANSPORT_RDMA) {
			snprintf(err, errlen, "RDMA link to %s impossible: %s", p->rank, why);
			return PPRPC_EUNSUPP;
		}
		snprintf(p->fallback, sizeof(p->fallback), "%.190s", why);
		LOG(d, LOG_NOTICE_, "peer %s: RDMA not used (%s); connecting over TCP", p->rank, why);
	}
	if (tcp_connect(d->loop, p->host, p->port, on_connect, p) < 0) {
		snprintf(err, errlen, "cannot connect to rank %s", p->rank);
		return PPRPC_ECONN;
	}
	return 0;
}

static int numeric_host(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

/* The name of a rank resolved (threadpool): connect to its first address,
 * or fail the link and what waits on it.  A link failed meanwhile (setup
 * bound, shutdown) is only freed here: nothing else holds it. */
static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct peer *p = req->data;
	char why[300];
	void *a = NULL;

	if (p->state == PEER_DEAD) {
		uv_freeaddrinfo(res);
		free(p);
		return;
	}
	if (status == 0 && res && res->ai_family == AF_INET)
		a = &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr;
	else if (status == 0 && res && res->ai_family == AF_INET6)
		a = &((struct sockaddr_in6 *)(void *)res->ai_addr)->sin6_addr;
	if (!a || !inet_ntop(res->ai_family, a, p->host, sizeof(p->host))) {
		snprintf(why, sizeof(why), "cannot resolve the host of rank %.80s: %s", p->rank,
			 status < 0 ? uv_strerror(status) : "no usable address");
		uv_freeaddrinfo(res);
		peer_fail(p, PPRPC_ECONN, why);
		free(p);
		return;
	}
	uv_freeaddrinfo(res);
	p->state = PEER_CONNECTING;
	if (link_connect(p, why, sizeof(why)) < 0) {
		peer_fail(p, PPRPC_ECONN, why);
		free(p);
	}
}

static struct peer *peer_get(struct pprpcd *d, const char *rank, char *err, size_t errlen)
{
	struct peer *p;
	char host[256];
	uint16_t port;
	struct preq *q;

	for (p = d->peers; p; p = p->next)
		if (strcmp(p->rank, rank) == 0)
			return p;
	if (d->stopping) {
		snprintf(err, errlen, "shutting down");
		return NULL;
	}
	if (strlen(rank) >= sizeof(p->rank) || addr_split(rank, host, sizeof(host), &port, 50052) < 0) {
		snprintf(err, errlen, "bad rank address '%.80s' (expected HOST:PORT)", rank);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		goto oom;
	p->d = d;
	p->serial = ++d->peer_links;
	p->born_ms = uv_now(d->loop);
	snprintf(p->rank, sizeof(p->rank), "%s", rank);
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	hello_client_init(&p->hello, PPRPC__ROLE__ROLE_PEER, "pprpcd-peer", d->auth_key, d->auth_key_len,
			  "this daemon has no auth-key-file");
	q = make_hello(p);
	if (!q) {
		free(p);
		goto oom;
	}
	p->reqs = q;  /* HELLO stays first on the link */
	if (numeric_host(host)) {
		p->state = PEER_CONNECTING;
		if (link_connect(p, err, errlen) < 0) {
			preq_free(q);
			free(p);
			return NULL;
		}
	} else {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		int rc;

		/* Requests queue on the link meanwhile, as while connecting. */
		p->state = PEER_RESOLVING;
		p->gai.data = p;
		rc = uv_getaddrinfo(d->loop, &p->gai, on_resolved, p->host, NULL, &hints);
		if (rc < 0) {
			snprintf(err, errlen, "cannot resolve the host of rank %.80s: %s", rank, uv_strerror(rc));
			preq_free(q);
			free(p);
			return NULL;
		}
	}
	p->next = d->peers;
	d->peers = p;
	return p;
oom:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

int peer_request(struct pprpcd *d, const char *rank, uint16_t type, const ProtobufCMessage *m,
		 const struct preq_ops *ops, void *arg, char *err, size_t errlen)
{
	struct peer *p = peer_get(d, rank, err, errlen);
	struct preq *q, **tail;

	if (!p)
		return PPRPC_ECONN;
	q = make_req(p, type, m);
	if (!q) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	q->ops = ops;
	q->arg = arg;
	for (tail = &p->reqs; *tail; tail = &(*tail)->next)
		;
	*tail = q;
	if (p->state == PEER_UP && send_req(p, q) < 0) {
		/* The link is failing: q fails with it (its fail callback runs). */
		transport_close(p->t);
	}
	return 0;
}

/* ---- keepalive ---------------------------------------------------------------- */

static int ping_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
		     size_t len, void **bulk_dst)
{
	(void)arg, (void)code, (void)errmsg, (void)h, (void)meta, (void)len, (void)bulk_dst;
	return 0;
}

static void ping_done(void *arg, const struct frame_hdr *h, int more)
{
	struct peer *p = arg;

	(void)h;
	(void)more;
	p->ping_out = 0;
}

static void ping_fail(void *arg, int code, const char *why)
{
	(void)arg, (void)code, (void)why;
}

static const struct preq_ops keepalive_ops = { .meta = ping_meta, .done = ping_done, .fail = ping_fail };

/* A link must come up within peer_connect_timeout_ms: a rank whose kernel
 * accepts the connection but that never answers HELLO (a stopped process,
 * a plain listener) would otherwise hold every request on the link for
 * ever.  Fails the link, and so each request, naming the rank and the step
 * that did not complete. */
static void setup_bound(struct peer *p, uint64_t now_ms)
{
	uint64_t limit = p->d->opts.peer_connect_timeout_ms;
	char why[200];

	if (!limit || now_ms - p->born_ms < limit)
		return;
	snprintf(why, sizeof(why), "rank %s: %s within %llu ms (peer-connect-timeout-ms)", p->rank,
		 p->state == PEER_RESOLVING ? "its host name not resolved"
		 : p->state == PEER_CONNECTING ? "no connection" : "no answer to HELLO", (unsigned long long)limit);
	if (p->state == PEER_HELLO)
		transport_close(p->t);
	if (p->state == PEER_RESOLVING)
		uv_cancel((uv_req_t *)&p->gai);
	/* Still connecting or resolving: on_connect / on_resolved see DEAD
	 * and clean up. */
	peer_fail(p, PPRPC_ETIMEDOUT, why);
}

/* A link with requests outstanding must show signs of life: after a quiet
 * interval it is PINGed, and a peer silent for the whole timeout (stopped,
 * wedged, or its host gone without a reset) is dropped, which fails every
 * request on it with a clear error instead of letting them wait for ever.
 * TCP keepalive alone would not notice a stopped process: its kernel
 * still acknowledges.  A link not up yet is bounded by setup_bound. */
void peer_keepalive(struct pprpcd *d, uint64_t now_ms)
{
	uint64_t timeout = d->opts.peer_timeout_ms;
	struct peer *p, *next;

	for (p = d->peers; p; p = next) {
		uint64_t quiet;
		int busy = 0;

		next = p->next;
		if (p->state == PEER_RESOLVING || p->state == PEER_CONNECTING || p->state == PEER_HELLO) {
			setup_bound(p, now_ms);
			continue;
		}
		if (p->state != PEER_UP || !timeout)
			continue;
		for (struct preq *q = p->reqs; q; q = q->next)
			if (q->ops && q->ops != &keepalive_ops)
				busy = 1;
		quiet = now_ms - p->last_rx_ms;
		if (!busy) {
			p->last_rx_ms = now_ms;  /* nothing expected: quiet is fine */
			continue;
		}
		if (quiet >= timeout) {
			char why[120];

			snprintf(why, sizeof(why), "no answer for %llu ms (keepalive timeout)", (unsigned long long)quiet);
			transport_close(p->t);
			peer_fail(p, PPRPC_ECONN, why);
		} else if (quiet >= timeout / 3 && !p->ping_out) {
			Pprpc__Empty e = PPRPC__EMPTY__INIT;
			struct preq *q = make_req(p, MSG_PING, &e.base), **tail;

			if (!q)
				continue;
			q->ops = &keepalive_ops;
			q->arg = p;
			for (tail = &p->reqs; *tail; tail = &(*tail)->next)
				;
			*tail = q;
			p->ping_out = 1;
			if (send_req(p, q) < 0)
				transport_close(p->t);
		}
	}
}

struct peer *peer_first(struct pprpcd *d)
{
	return d->peers;
}

struct peer *peer_next(struct peer *p)
{
	return p->next;
}

const char *peer_rank(const struct peer *p)
{
	return p->rank;
}

struct transport_conn *peer_transport(struct peer *p)
{
	return p->state == PEER_UP ? p->t : NULL;
}

const char *peer_path(struct pprpcd *d, const char *rank)
{
	for (struct peer *p = d->peers; p; p = p->next)
		if (!strcmp(p->rank, rank) && p->state == PEER_UP)
			return transport_name(p->t);
	return "tcp";
}

int peer_link_info(struct pprpcd *d, const char *rank, char *addr, size_t len, uint64_t *ret_serial)
{
	for (struct peer *p = d->peers; p; p = p->next)
		if (!strcmp(p->rank, rank) && p->state == PEER_UP) {
			snprintf(addr, len, "%s", transport_peer(p->t));
			*ret_serial = p->serial;
			return 0;
		}
	return PPRPC_ECONN;
}

void peer_close_all(struct pprpcd *d)
{
	while (d->peers) {
		struct peer *p = d->peers;

		if (p->state == PEER_UP || p->state == PEER_HELLO)
			transport_close(p->t);
		if (p->state == PEER_RESOLVING)
			uv_cancel((uv_req_t *)&p->gai);
		/* Still connecting or resolving: on_connect / on_resolved see
		 * DEAD and clean up. */
		peer_fail(p, PPRPC_ECONN, "shutting down");
	}
	peer_mirrors_close(d);
}

/* daemon/server/metrics.c — see metrics.h. */
#include "daemon/server/metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/server/authn.h"
#include "daemon/server/conn.h"
#include "daemon/server/wake_ahead.h"
#include "daemon/device/device.h"
#include "daemon/pprpcd.h"
#include "daemon/exec/queue.h"
#include "daemon/peer/peer.h"
#include "daemon/core/staging.h"
#include "daemon/xfer/xfer.h"
#include "pprpc/types.h"
#include "util/addr.h"

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void put(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		char *q = realloc(b->p, b->cap * 2);

		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap *= 2;
	}
}

/* One unlabelled counter: its TYPE line and its value. */
static void counter(struct sbuf *b, const char *name, uint64_t v)
{
	put(b, "# TYPE %s counter\n%s %" PRIu64 "\n", name, name, v);
}

/* Label values come from peers' names: escape what the format reserves. */
static const char *esc(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	for (; *s && o + 3 < len; s++) {
		if (*s == '"' || *s == '\\' || *s == '\n')
			buf[o++] = '\\';
		buf[o++] = *s == '\n' ? 'n' : *s;
	}
	buf[o] = '\0';
	return buf;
}

char *metrics_render(struct pprpcd *d)
{
	struct sbuf b = { malloc(8192), 0, 8192, 0 };
	char e1[160], e2[160];

	if (!b.p)
		return NULL;
	b.p[0] = '\0';
	counter(&b, "pprpc_requests_total", d->stats.requests);
	counter(&b, "pprpc_request_errors_total", d->stats.request_errors);
	counter(&b, "pprpc_protocol_errors_total", d->stats.protocol_errors);
	counter(&b, "pprpc_connections_total", d->stats.connections_total);
	put(&b, "# TYPE pprpc_connections gauge\npprpc_connections %u\n", d->nconns);
	{
		/* wake-ahead: windows opened, and the clients' bursts that came
		 * inside one (a low share: the pace is not steady, the windows
		 * spin for nothing) */
		struct wake_ahead_stats w;

		wake_ahead_stats_get(d, &w);
		counter(&b, "pprpc_wake_ahead_windows_total", w.windows);
		counter(&b, "pprpc_wake_ahead_hits_total", w.hits);
	}
	/* clients' host pages: reads that landed in the client's memory (a
	 * mapped page not page-locked copies through the driver's staging) */
	counter(&b, "pprpc_host_pages_total", d->stats.host_pages);
	counter(&b, "pprpc_host_pages_pinned_total", d->stats.host_pages_pinned);
	counter(&b, "pprpc_host_page_gets_total", d->stats.host_page_gets);
	counter(&b, "pprpc_host_page_bytes_total", d->stats.host_page_bytes);
	/* remote timelines that WAITs here are held on: one per (rank, handle)
	 * waited on now, nothing after */
	put(&b, "# TYPE pprpc_peer_mirrors gauge\npprpc_peer_mirrors %zu\n", peer_mirrors_live(d));
	put(&b, "# TYPE pprpc_device_free_bytes gauge\n# TYPE pprpc_device_queue_depth gauge\n"
		"# TYPE pprpc_device_commands_total counter\n# TYPE pprpc_device_errors_total counter\n"
		"# TYPE pprpc_graph_creates_total counter\n# TYPE pprpc_graph_runs_total counter\n");
	for (uint32_t i = 0; i < d->ndev; i++) {
		struct device *dev = d->dev[i];
		uint64_t fr = 0, total = 0;

		if (!dev)
			continue;
		device_mem_info(dev, &fr, &total);
		esc(dev->name, e1, sizeof(e1));
		put(&b, "pprpc_device_free_bytes{device=\"%s\"} %" PRIu64 "\n", e1, fr);
		put(&b, "pprpc_device_total_bytes{device=\"%s\"} %" PRIu64 "\n", e1, total);
		put(&b, "pprpc_device_floor_bytes{device=\"%s\"} %" PRIu64 "\n", e1, dev->floor);
		put(&b, "pprpc_device_allocated_bytes{device=\"%s\"} %" PRIu64 "\n", e1, dev->allocated);
		put(&b, "pprpc_device_queue_depth{device=\"%s\"} %" PRIu64 "\n", e1, queue_depth(dev->q));
		put(&b, "pprpc_device_commands_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->commands);
		put(&b, "pprpc_device_errors_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->errors);
		put(&b, "pprpc_graph_creates_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->graph_creates);
		put(&b, "pprpc_graph_runs_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->graph_runs);
		put(&b, "pprpc_graph_captures_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->graph_captures);
		put(&b, "pprpc_graph_replays_total{device=\"%s\"} %" PRIu64 "\n", e1, dev->graph_replays);
		put(&b, "pprpc_gpu_waits_total{device=\"%s\"} %" PRIu64 "\n", e1,
		    __atomic_load_n(&dev->gpu_waits, __ATOMIC_RELAXED));
		put(&b, "pprpc_gpu_signals_total{device=\"%s\"} %" PRIu64 "\n", e1,
		    __atomic_load_n(&dev->gpu_signals, __ATOMIC_RELAXED));
		put(&b, "pprpc_gpu_recvs_total{device=\"%s\"} %" PRIu64 "\n", e1,
		    __atomic_load_n(&dev->gpu_recvs, __ATOMIC_RELAXED));
		put(&b, "pprpc_gpu_sends_total{device=\"%s\"} %" PRIu64 "\n", e1,
		    __atomic_load_n(&dev->gpu_sends, __ATOMIC_RELAXED));
	}
	/* GATED_DELTA_NET forms: proof that the chunked prefill path ran. */
	put(&b, "# TYPE pprpc_gdn_runs_total counter\n");
	for (uint32_t i = 0; i < d->ndev; i++) {
		struct device *dev = d->dev[i];
		struct kern_gdn_stats gs;

		if (!dev)
			continue;
		kern_gdn_stats_read(&dev->gdn_stats, &gs);
		esc(dev->name, e1, sizeof(e1));
		put(&b, "pprpc_gdn_runs_total{device=\"%s\",path=\"serial\"} %" PRIu64 "\n", e1,
		    gs.serial);
		for (int c = 0; c < KERN_GDN_NCHUNK; c++)
			put(&b, "pprpc_gdn_runs_total{device=\"%s\",path=\"chunked\",chunk=\"%d\"} %"
			    PRIu64 "\n", e1, 16 << c, gs.chunked[c]);
		for (int r = 0; r < KERN_GDN_FB_COUNT; r++)
			put(&b, "pprpc_gdn_runs_total{device=\"%s\",path=\"fallback\",reason=\"%s\"} %"
			    PRIu64 "\n", e1, kern_gdn_fallback_name(r), gs.fallback[r]);
	}
	/* ggml devices: GATED_DELTA_NET nodes ggml's own kernel ran, and why
	 * (pprpc's kernels' runs are in pprpc_gdn_runs_total above). */
	put(&b, "# TYPE pprpc_gdn_ggml_total counter\n");
	for (uint32_t i = 0; i < d->ndev; i++) {
		static const char *const why[DEVICE_GDN_GGML_WHYS] = { "off", "auto", "shape", "gate", "nomem" };
		struct device *dev = d->dev[i];
		struct device_gdn_report rep;

		if (!dev || device_gdn_report(dev, &rep) < 0)
			continue;
		esc(dev->name, e1, sizeof(e1));
		for (int r = 0; r < DEVICE_GDN_GGML_WHYS; r++)
			put(&b, "pprpc_gdn_ggml_total{device=\"%s\",reason=\"%s\"} %" PRIu64 "\n", e1, why[r],
			    rep.other_kernel[r]);
	}
	put(&b, "# TYPE pprpc_boundary_transfers_total counter\n# TYPE pprpc_boundary_bytes_total counter\n"
		"# TYPE pprpc_boundary_seconds_total counter\n# TYPE pprpc_boundary_errors_total counter\n"
		"# TYPE pprpc_boundary_copy_seconds_total counter\n");
	for (struct bstat *s = d->bstats; s; s = s->next) {
		/* the path of the boundary's last transfer (p2p-tcp/-rdma/-ipc) */
		const char *path = s->path[0] ? s->path : "p2p-tcp";

		esc(s->peer, e1, sizeof(e1));
		put(&b, "pprpc_boundary_transfers_total{peer=\"%s\",dir=\"%s\",path=\"%s\"} %" PRIu64 "\n", e1,
		    s->dir, path, s->transfers);
		put(&b, "pprpc_boundary_bytes_total{peer=\"%s\",dir=\"%s\",path=\"%s\"} %" PRIu64 "\n", e1, s->dir,
		    path, s->bytes);
		put(&b, "pprpc_boundary_seconds_total{peer=\"%s\",dir=\"%s\",path=\"%s\"} %.6f\n", e1, s->dir, path,
		    s->time_us / 1e6);
		put(&b, "pprpc_boundary_errors_total{peer=\"%s\",dir=\"%s\",path=\"%s\"} %" PRIu64 "\n", e1, s->dir,
		    path, s->errors);
		put(&b, "pprpc_boundary_copy_seconds_total{peer=\"%s\",dir=\"%s\",path=\"%s\"} %.6f\n", e1, s->dir,
		    path, s->copy_us / 1e6);
	}
	if (d->xfer_ready)
		put(&b, "# TYPE pprpc_staging_used_bytes gauge\npprpc_staging_used_bytes %" PRIu64
			"\npprpc_staging_bytes %" PRIu64 "\n",
		    (uint64_t)staging_used(&d->staging) * d->staging.slot_size, d->staging.bytes);
	put(&b, "# TYPE pprpc_connection_bytes_in_total counter\n# TYPE pprpc_connection_bytes_out_total counter\n");
	for (struct conn *c = d->conns; c; c = c->next) {
		const struct transport_stats *ts;

		if (!c->t)
			continue;
		ts = transport_stats(c->t);
		esc(c->name, e1, sizeof(e1));
		esc(transport_name(c->t), e2, sizeof(e2));
		put(&b, "pprpc_connection_bytes_in_total{conn=\"%" PRIu64 "\",peer=\"%s\",transport=\"%s\"} %" PRIu64 "\n",
		    c->id, e1, e2, ts->bytes_in);
		put(&b, "pprpc_connection_bytes_out_total{conn=\"%" PRIu64 "\",peer=\"%s\",transport=\"%s\"} %" PRIu64 "\n",
		    c->id, e1, e2, ts->bytes_out);
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- the HTTP side: read a request head, answer, close ---------------------------- */

#define REQ_MAX 8192
/* Requests served at once: a scraper needs one; beyond, a connection is
 * closed as soon as it is accepted. */
#define METRICS_MAX_CONNS 16

/* One request.  It lives until closed: answered, failed, or past
 * hello-timeout-ms (metrics_expire), whichever comes first. */
struct mconn {
	uv_tcp_t h;
	struct pprpcd *d;
	struct mconn *next, *prev;  /* d->mconns */
	uint64_t born_ms;
	int closing;
	char req[REQ_MAX];
	size_t got;
	uv_write_t w;
	char *resp;
};

static void mconn_closed(uv_handle_t *h)
{
	struct mconn *m = h->data;

	free(m->resp);
	free(m);
}

/* Once per request, whoever comes first (a pending write's callback runs
 * with UV_ECANCELED and lands here again). */
static void mconn_close(struct mconn *m)
{
	struct pprpcd *d = m->d;

	if (m->closing)
		return;
	m->closing = 1;
	if (m->prev)
		m->prev->next = m->next;
	else
		d->mconns = m->next;
	if (m->next)
		m->next->prev = m->prev;
	d->nmconns--;
	uv_close((uv_handle_t *)&m->h, mconn_closed);
}

static void written(uv_write_t *w, int status)
{
	(void)status;
	mconn_close(w->data);
}

static void respond(struct mconn *m)
{
	char *body = metrics_render(m->d);
	const char *status = body ? "200 OK" : "500 Internal Server Error";
	size_t blen = body ? strlen(body) : 0, cap = blen + 256;
	uv_buf_t buf;

	m->resp = malloc(cap);
	if (!m->resp) {
		free(body);
		mconn_close(m);
		return;
	}
	buf.len = (size_t)snprintf(m->resp, cap,
				   "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %zu\r\n"
				   "Connection: close\r\n\r\n%s", status, blen, body ? body : "");
	buf.base = m->resp;
	free(body);
	m->w.data = m;
	if (uv_write(&m->w, (uv_stream_t *)&m->h, &buf, 1, written) < 0)
		mconn_close(m);
}

static void alloc_cb(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
	struct mconn *m = h->data;

	(void)sz;
	buf->base = m->req + m->got;
	buf->len = REQ_MAX - 1 - m->got;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct mconn *m = s->data;

	(void)buf;
	if (n < 0) {
		mconn_close(m);
		return;
	}
	m->got += (size_t)n;
	m->req[m->got] = '\0';
	if (strstr(m->req, "\r\n\r\n") || strstr(m->req, "\n\n") || m->got >= REQ_MAX - 1) {
		uv_read_stop(s);
		respond(m);
	}
}

static void on_conn(uv_stream_t *server, int status)
{
	struct pprpcd *d = server->data;
	struct mconn *m;

	if (status < 0 || !(m = calloc(1, sizeof(*m))))
		return;
	m->d = d;
	m->born_ms = uv_now(d->loop);
	uv_tcp_init(server->loop, &m->h);
	m->h.data = m;
	m->next = d->mconns;
	if (d->mconns)
		d->mconns->prev = m;
	d->mconns = m;
	d->nmconns++;
	/* Accepted either way (an unaccepted one stalls the listener). */
	if (uv_accept(server, (uv_stream_t *)&m->h) < 0 || d->nmconns > METRICS_MAX_CONNS ||
	    uv_read_start((uv_stream_t *)&m->h, alloc_cb, read_cb) < 0)
		mconn_close(m);
}

void metrics_expire(struct pprpcd *d, uint64_t now_ms)
{
	uint64_t limit = d->opts.hello_timeout_ms;
	struct mconn *m, *next;

	if (!limit)
		return;
	/* A request half sent, or an answer never read, would otherwise hold
	 * its connection (and a slot of METRICS_MAX_CONNS) for ever. */
	for (m = d->mconns; m; m = next) {
		next = m->next;
		if (now_ms - m->born_ms >= limit)
			mconn_close(m);
	}
}

/* The metrics address, resolved, after the listen policy. */
static int metrics_addr(struct pprpcd *d, struct sockaddr_storage *ss, int log, char *err, size_t errlen)
{
	socklen_t sl;
	char host[256];
	uint16_t port;

	if (addr_split(d->opts.metrics_listen, host, sizeof(host), &port, 9464) < 0 ||
	    addr_resolve(host, port, ss, &sl) < 0) {
		snprintf(err, errlen, "--metrics-listen: cannot parse '%s'", d->opts.metrics_listen);
		return PPRPC_EINVAL;
	}
	/* The listen policy of the daemon's own port, with one difference:
	 * HTTP requests prove no key, so a key does not make a non-loopback
	 * metrics address safe; only insecure-listen does (with a warning). */
	switch (authn_listen_policy((const struct sockaddr *)ss, 0, d->opts.insecure_listen)) {
	case AUTHN_LISTEN_OK:
		return 0;
	case AUTHN_LISTEN_WARN:
		if (log)
			LOG(d, LOG_WARN_, "metrics on non-loopback %s WITHOUT authentication (insecure-listen): "
			    "anyone who can reach it reads this daemon's clients, peers and counters", host);
		return 0;
	default:
		snprintf(err, errlen, "refusing to serve metrics on non-loopback address %s: metrics requests "
			 "carry no authentication (auth-key-file does not cover them); set insecure-listen = 1 "
			 "to serve them from the network anyway", host);
		return PPRPC_EAUTH;
	}
}

int metrics_check(struct pprpcd *d, char *err, size_t errlen)
{
	struct sockaddr_storage ss;

	return d->opts.metrics_listen[0] ? metrics_addr(d, &ss, 0, err, errlen) : 0;
}

int metrics_start(struct pprpcd *d, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	int rc;

	if (!d->opts.metrics_listen[0])
		return 0;
	rc = metrics_addr(d, &ss, 1, err, errlen);
	if (rc < 0)
		return rc;
	uv_tcp_init(d->loop, &d->metrics);
	d->metrics.data = d;
	d->metrics_on = 1;
	rc = uv_tcp_bind(&d->metrics, (struct sockaddr *)&ss, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&d->metrics, 16, on_conn);
	if (rc < 0) {
		snprintf(err, errlen, "cannot serve metrics on %s: %s", d->opts.metrics_listen, uv_strerror(rc));
		return PPRPC_EIO;
	}
	{
		struct sockaddr_storage bound;
		int blen = sizeof(bound);
		char where[80];

		uv_tcp_getsockname(&d->metrics, (struct sockaddr *)&bound, &blen);
		addr_format((struct sockaddr *)&bound, where, sizeof(where));
		LOG(d, LOG_NOTICE_, "Prometheus metrics on %s (HTTP GET /metrics)", where);
	}
	return 0;
}

void metrics_stop(struct pprpcd *d)
{
	if (d->metrics_on) {
		d->metrics_on = 0;
		uv_close((uv_handle_t *)&d->metrics, NULL);
	}
	while (d->mconns)
		mconn_close(d->mconns);
}

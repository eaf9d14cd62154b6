/*
 * transport/rdma_verbs.c — everything of the RDMA transport that touches
 * verbs or rdmacm, under the hardware-free rdma_ring.c and rdma_bulk.c:
 * the listener and connection setup (rdmacm events, resources sized by the
 * memlock ladder, registered regions), posting sends, receives and RDMA
 * READs, completion handling on the loop, teardown, and the transport
 * vtable on top (see rdma.h).
 *
 * Lifetime of a connection:
 *   active:  resolve addr -> (resources) -> resolve route -> connect -> ESTABLISHED -> cb
 *   passive: CONNECT_REQUEST on the listener -> own event channel ->
 *            (resources) -> accept -> ESTABLISHED -> accept cb
 *   both:    DISCONNECTED / completion error / transport_close -> teardown
 * Teardown stops the two uv_poll handles first (they watch fds we are
 * about to close), and frees verbs objects once both are closed.
 *
 * Foreign error conventions end here: rdmacm returns -1 + errno, verbs
 * return a positive errno or NULL + errno; both become PPRPC_E* codes with
 * the text kept in the reason.
 */
#include "transport/rdma.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pprpc/types.h"
#include "proto/frame.h"
#include "util/addr.h"
#include "transport/transport_impl.h"

#define RESOLVE_MS 2000
#define WC_BATCH 32
#define PRIV_MAGIC 0x44525050u  /* "PPRD" */
#define PRIV_VERSION 1
/* wr_id tags: receives carry their slot index. */
#define WR_TX 0x1000000000ull
#define WR_CTRL 0x2000000000ull
#define WR_RX 0x4000000000ull
#define WR_READ 0x8000000000ull   /* | landing slot */
/* priv.flags: this side has bulk slots and serves RDMA READs of them. */
#define PRIV_F_BULK 0x0001u

struct priv {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;           /* PRIV_F_* */
	uint32_t chunk;
	uint32_t rx_depth;
	uint32_t tx_depth;
} __attribute__((packed));
_Static_assert(sizeof(struct priv) == 20, "handshake private data is wire format");

struct rdma_ctx {
	uv_loop_t *loop;
	struct rdma_geom req;
	uint64_t registered;      /* bytes registered by live connections */
	struct { uint8_t *p; size_t len; } region[RDMA_MAX_REGIONS];  /* rdma_ctx_add_region */
	int nregions;
};

enum rstate { RS_RESOLVING, RS_ACCEPTING, RS_UP, RS_DEAD };

struct rdma_conn {
	struct transport_conn base;
	struct rdma_ctx *x;
	enum rstate state;
	int passive;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uv_poll_t cm_poll;
	int cm_poll_on;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	uv_poll_t cq_poll;
	int cq_poll_on;
	int qp_made;
	struct ibv_mr *mr;
	uint8_t *mem;             /* TX slots, then RX slots */
	uint64_t mem_len;
	/* bulk slots (rdma_bulk.h): source then landing, bulk_depth x
	 * RDMA_BULK_CHUNK each; registered only when the rings left room */
	struct ibv_mr *bulk_mr;
	uint8_t *bulk_mem;
	uint64_t bulk_len;
	uint32_t bulk_depth;
	uint32_t rd_atom;         /* READs in flight we asked for (0: bulk off) */
	char bulk_why[200];       /* why the bulk path is off ("" when on) */
	struct ibv_mr *zc_mr[RDMA_MAX_REGIONS];  /* the context's regions, for READ in place */
	uint64_t zc_len;          /* bytes of them registered */
	char zc_why[120];         /* why a region is not registered */
	uint64_t bulk_in_seen, bulk_out_seen;  /* already added to the stats */
	struct rdma_geom geom;
	enum rdma_ladder_step step;
	char ladder_why[160];
	struct rdma_ring ring;
	int ring_ok;
	struct transport_info info;
	/* receive side */
	int reading;              /* transport_start done */
	int paused;
	int rx_stopped;           /* the reader failed: deliver nothing more */
	int draining;             /* closing once the queued sends are out */
	int wc_error;             /* first failed completion (acted on after delivery) */
	int in_pump, pump_again;
	int close_status;
	int owner_told;           /* on_close may run */
	int polls_open;
	/* Send callbacks and frame delivery never run inside the owner's own
	 * call (transport_send / _start / _resume / _close): like libuv's
	 * write callbacks they come from the loop, via this idle handle. */
	uv_idle_t defer;
	int defer_made;
	/* active side */
	rdma_connect_cb ccb;
	void *cctx;
	/* passive side */
	rdma_accept_cb acb;
	void *actx;
	struct priv peer;
};

struct rdma_listener {
	struct rdma_ctx *x;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uv_poll_t poll;
	rdma_accept_cb cb;
	void *ctx;
};

static const struct transport_ops rdma_ops;

int rdma_built(void)
{
	return 1;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

/* ---- memlock ----------------------------------------------------------------------- */

static int have_cap_ipc_lock(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return (eff >> 14) & 1; /* CAP_IPC_LOCK */
}

uint64_t rdma_memlock_budget(char *desc, size_t desclen)
{
	struct rlimit rl;

	if (have_cap_ipc_lock()) {
		snprintf(desc, desclen, "unlimited (CAP_IPC_LOCK)");
		return UINT64_MAX;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY) {
		snprintf(desc, desclen, "unlimited");
		return UINT64_MAX;
	}
	snprintf(desc, desclen, "RLIMIT_MEMLOCK %" PRIu64 " KiB", (uint64_t)rl.rlim_cur >> 10);
	return rl.rlim_cur;
}

/* ---- context ----------------------------------------------------------------------- */

int rdma_ctx_new(uv_loop_t *loop, const struct rdma_geom *req, struct rdma_ctx **ret_ctx, char *err,
		 size_t errlen)
{
	struct rdma_ctx *x;

	if (rdma_geom_validate(req, err, errlen) < 0)
		return PPRPC_EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	x->loop = loop;
	x->req = *req;
	*ret_ctx = x;
	return 0;
}

int rdma_ctx_add_region(struct rdma_ctx *x, void *p, size_t len)
{
	if (!p || !len)
		return PPRPC_EINVAL;
	if (x->nregions == RDMA_MAX_REGIONS)
		return PPRPC_ELIMIT;
	x->region[x->nregions].p = p;
	x->region[x->nregions].len = len;
	x->nregions++;
	return 0;
}

void rdma_ctx_free(struct rdma_ctx *x)
{
	free(x);
}

/* ---- teardown ---------------------------------------------------------------------- */

static void destroy_verbs(struct rdma_conn *c)
{
	if (c->qp_made && c->id)
		rdma_destroy_qp(c->id);
	c->qp_made = 0;
	if (c->cq)
		ibv_destroy_cq(c->cq);
	c->cq = NULL;
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	c->cc = NULL;
	if (c->mr) {
		ibv_dereg_mr(c->mr);
		c->x->registered -= c->mem_len;
	}
	c->mr = NULL;
	free(c->mem);
	c->mem = NULL;
	for (int i = 0; i < RDMA_MAX_REGIONS; i++)
		if (c->zc_mr[i])
			ibv_dereg_mr(c->zc_mr[i]);
	memset(c->zc_mr, 0, sizeof(c->zc_mr));
	c->x->registered -= c->zc_len;
	c->zc_len = 0;
	if (c->bulk_mr) {
		ibv_dereg_mr(c->bulk_mr);
		c->x->registered -= c->bulk_len;
	}
	c->bulk_mr = NULL;
	free(c->bulk_mem);
	c->bulk_mem = NULL;
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	c->pd = NULL;
	if (c->id)
		rdma_destroy_id(c->id);
	c->id = NULL;
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	c->ch = NULL;
}

static void conn_free(struct rdma_conn *c)
{
	destroy_verbs(c);
	if (c->ring_ok)
		rdma_ring_fini(&c->ring);
	if (c->owner_told && c->base.owner && c->base.owner->on_close)
		c->base.owner->on_close(c->base.owner_ctx, c->close_status);
	if (c->base.owner)
		frame_reader_fini(&c->base.reader);
	free(c);
}

static void poll_closed(uv_handle_t *h)
{
	struct rdma_conn *c = h->data;

	if (--c->polls_open == 0)
		conn_free(c);
}

/* Stop everything and free from the loop (never inside a callback of ours
 * that still uses c: the free happens in the uv_close callbacks). */
static void teardown(struct rdma_conn *c)
{
	if (c->state == RS_DEAD)
		return;
	if (c->id && (c->state == RS_UP))
		rdma_disconnect(c->id);
	c->state = RS_DEAD;
	/* Queued sends fail; their callbacks run in conn_free, before on_close. */
	if (c->ring_ok)
		rdma_ring_fail(&c->ring, c->close_status ? c->close_status : PPRPC_ECLOSED);
	c->polls_open = 0;
	if (c->defer_made) {
		c->polls_open++;
		uv_close((uv_handle_t *)&c->defer, poll_closed);
		c->defer_made = 0;
	}
	if (c->cm_poll_on) {
		c->polls_open++;
		uv_close((uv_handle_t *)&c->cm_poll, poll_closed);
		c->cm_poll_on = 0;
	}
	if (c->cq_poll_on) {
		c->polls_open++;
		uv_close((uv_handle_t *)&c->cq_poll, poll_closed);
		c->cq_poll_on = 0;
	}
	if (c->polls_open == 0)
		conn_free(c); /* only before any poll existed: never from inside a callback */
}

/* Failure before the owner had the connection. */
static void fail_setup(struct rdma_conn *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail_setup(struct rdma_conn *c, int code, const char *fmt, ...)
{
	char why[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (c->state == RS_DEAD)
		return;
	if (!c->passive && c->ccb) {
		rdma_connect_cb cb = c->ccb;

		c->ccb = NULL;
		cb(c->cctx, NULL, code, why);
	}
	teardown(c);
}

static void close_with(struct rdma_conn *c, int status)
{
	if (c->state == RS_DEAD)
		return;
	c->close_status = status;
	teardown(c);
}

/* ---- data path ----------------------------------------------------------------------- */

static uint8_t *rx_slot(struct rdma_conn *c, uint32_t slot)
{
	return c->mem + (uint64_t)c->geom.tx_depth * c->geom.chunk + (uint64_t)slot * c->geom.chunk;
}

static int post_recv(struct rdma_conn *c, uint32_t slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rx_slot(c, slot), .length = c->geom.chunk, .lkey = c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_RX | slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad) ? PPRPC_EIO : 0;
}

static int post_msg(struct rdma_conn *c, const struct rdma_tx_msg *m)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rdma_ring_tx_slot(&c->ring, m->slot), .length = m->len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = m->ctrl ? WR_CTRL : WR_TX, .sg_list = &sge, .num_sge = m->len ? 1 : 0,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(rdma_imm(m->credits, m->kind)) }, *bad;

	return ibv_post_send(c->id->qp, &wr, &bad) ? PPRPC_EIO : 0;
}

static int post_read(struct rdma_conn *c, const struct rdma_read *rd)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rd->local, .length = rd->len, .lkey = c->bulk_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = WR_READ | rd->slot, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = rd->raddr;
	wr.wr.rdma.rkey = rd->rkey;
	return ibv_post_send(c->id->qp, &wr, &bad) ? PPRPC_EIO : 0;
}

/* Bytes by path: what the bulk path moved since the last look goes into
 * the connection's counters (bytes_out counts pulled bulk once acked). */
static void bulk_account(struct rdma_conn *c)
{
	const struct rdma_bulk_stats *st = &c->ring.bulk.st;

	c->base.stats.bulk_bytes_in += st->bytes_in - c->bulk_in_seen;
	c->base.stats.bulk_bytes_out += st->bytes_out - c->bulk_out_seen;
	c->base.stats.bytes_out += st->bytes_out - c->bulk_out_seen;
	c->bulk_in_seen = st->bytes_in;
	c->bulk_out_seen = st->bytes_out;
}

/* The rkey under which the peer may READ the bulk of a [header+meta,
 * bulk] send in place: its bulk lies in one registered region. */
static int zc_rkey(const struct rdma_conn *c, const struct iovec *iov, int iovcnt, size_t off, uint32_t *ret_rkey)
{
	const uint8_t *p;

	if (iovcnt != 2 || iov[0].iov_len != off)
		return 0;
	p = iov[1].iov_base;
	for (int i = 0; i < RDMA_MAX_REGIONS; i++) {
		const struct ibv_mr *mr = c->zc_mr[i];

		if (mr && p >= (const uint8_t *)mr->addr && iov[1].iov_len <= mr->length &&
		    (size_t)(p - (const uint8_t *)mr->addr) <= mr->length - iov[1].iov_len) {
			*ret_rkey = mr->rkey;
			return 1;
		}
	}
	return 0;
}

/* Whether (and from which byte) a send goes by READ: only one whole frame
 * whose bulk reaches the threshold; its header and meta still travel
 * through the message slots.  SIZE_MAX: all through the slots. */
static size_t bulk_split(const struct rdma_conn *c, const struct iovec *iov, int iovcnt)
{
	struct frame_hdr h;
	uint64_t total = 0;

	if (!c->ring.bulk_on || iovcnt < 1 || iov[0].iov_len < FRAME_HDR_SIZE)
		return SIZE_MAX;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	frame_hdr_peek(iov[0].iov_base, &h);
	if (h.bulk_len < c->x->req.bulk_threshold || total != FRAME_HDR_SIZE + (uint64_t)h.meta_len + h.bulk_len)
		return SIZE_MAX;
	return FRAME_HDR_SIZE + (size_t)h.meta_len;
}

/* Deliver what arrived (unless paused), post what can go, run callbacks;
 * again until nothing changes.  Re-entrant calls (a callback sends) just
 * ask for another round. */
static void on_defer(uv_idle_t *h);

static void defer(struct rdma_conn *c)
{
	if (c->defer_made && c->state != RS_DEAD)
		uv_idle_start(&c->defer, on_defer);
}

static void pump(struct rdma_conn *c)
{
	struct rdma_tx_msg m;
	uint32_t slot, len;
	int rc;

	if (c->in_pump) {
		c->pump_again = 1;
		return;
	}
	c->in_pump = 1;
	do {
		c->pump_again = 0;
		if (c->state != RS_UP)
			break;
		for (;;) {
			/* After a reader error or a close, inbound data is dropped
			 * (its credits still go back, so the peer never stalls). */
			int discard = c->rx_stopped || c->draining;
			const uint8_t *p;
			uint32_t kind;

			if (!discard && (!c->reading || c->paused))
				break;  /* not started / back-pressure: no consume, no credits back */
			/* Pulled bulk comes first: it precedes, in the stream,
			 * whatever message waits behind it in the FIFO. */
			if (c->ring.bulk_on && rdma_bulk_landed_peek(&c->ring.bulk, &p, &len)) {
				rc = discard ? 0 : transport_feed(&c->base, p, len);
				rdma_bulk_landed_consumed(&c->ring.bulk);
				if (rc < 0) {
					c->rx_stopped = 1;
					c->base.owner->on_reader_error(c->base.owner_ctx, rc, c->base.reader.error_req_id);
				}
				if (c->state == RS_DEAD)
					goto out;
				continue;
			}
			if (!rdma_ring_rx_peek(&c->ring, &slot, &len))
				break;
			kind = rdma_ring_rx_kind(&c->ring);
			if (kind == RDMA_MSG_DESC) {
				if (rdma_bulk_desc_in(&c->ring.bulk, rx_slot(c, slot), len, discard) < 0) {
					close_with(c, PPRPC_EPROTO);
					goto out;
				}
				rc = 0;
			} else if (rdma_bulk_busy(&c->ring.bulk)) {
				break;  /* stream bytes wait until the bulk before them is delivered */
			} else {
				rc = !discard && len ? transport_feed(&c->base, rx_slot(c, slot), len) : 0;
			}
			if (post_recv(c, slot) < 0) {
				close_with(c, PPRPC_EIO);
				goto out;
			}
			rdma_ring_rx_consumed(&c->ring);
			if (rc < 0) {
				c->rx_stopped = 1;
				c->base.owner->on_reader_error(c->base.owner_ctx, rc, c->base.reader.error_req_id);
			}
			if (c->state == RS_DEAD)
				goto out;
		}
		if (c->ring.bulk_on) {
			struct rdma_read rd;

			while (rdma_bulk_read_next(&c->ring.bulk, &rd))
				if (post_read(c, &rd) < 0) {
					close_with(c, PPRPC_EIO);
					goto out;
				}
			bulk_account(c);
		}
		while ((rc = rdma_ring_next(&c->ring, &m)) == 1)
			if (post_msg(c, &m) < 0) {
				rdma_ring_fail(&c->ring, PPRPC_EIO);
				rc = PPRPC_EIO;
				break;
			}
		rdma_ring_run_done(&c->ring);
		if (rc < 0) {
			close_with(c, rc);
			goto out;
		}
		if (c->state == RS_DEAD)
			goto out;
		/* Draining also waits for the peer to have pulled our bulk:
		 * closing earlier would fail its READs. */
		if (c->draining && c->ring.queued_bytes == 0 && rdma_ring_tx_inflight(&c->ring) == 0 &&
		    !c->ring.bulk.src_busy) {
			close_with(c, 0);
			goto out;
		}
	} while (c->pump_again);
out:
	c->in_pump = 0;
}

/* Post what the ring allows, without running any callback (for
 * transport_send: its latency should not wait for the next loop turn). */
static void post_now(struct rdma_conn *c)
{
	struct rdma_tx_msg m;
	int rc;

	if (c->state != RS_UP)
		return;
	while ((rc = rdma_ring_next(&c->ring, &m)) == 1)
		if (post_msg(c, &m) < 0) {
			rdma_ring_fail(&c->ring, PPRPC_EIO);
			break;
		}
}

static void on_defer(uv_idle_t *h)
{
	struct rdma_conn *c = h->data;

	uv_idle_stop(h);
	pump(c);
	if (c->state != RS_DEAD && c->wc_error)
		close_with(c, c->wc_error);
}

static void on_wc(struct rdma_conn *c, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		/* Flushes follow a disconnect or an earlier error.  The close
		 * waits until what arrived before has been delivered. */
		if (!c->wc_error)
			c->wc_error = wc->status == IBV_WC_WR_FLUSH_ERR ? PPRPC_ECONN : PPRPC_EIO;
		return;
	}
	if (wc->opcode & IBV_WC_RECV) {
		uint32_t slot = (uint32_t)(wc->wr_id & 0xffffff);
		int rc;

		if (!(wc->wc_flags & IBV_WC_WITH_IMM) || (wc->wr_id & ~0xffffffull) != WR_RX) {
			close_with(c, PPRPC_EPROTO);
			return;
		}
		rc = rdma_ring_rx_arrived(&c->ring, slot, wc->byte_len, ntohl(wc->imm_data), rx_slot(c, slot));
		if (rc < 0)
			close_with(c, PPRPC_EPROTO);
		else if (rc == 1 && post_recv(c, slot) < 0)  /* an ACK: handled, its receive goes back now */
			close_with(c, PPRPC_EIO);
		return;
	}
	if (wc->opcode == IBV_WC_RDMA_READ) {
		if ((wc->wr_id & ~0xffffffull) != WR_READ || rdma_bulk_read_done(&c->ring.bulk) < 0)
			close_with(c, PPRPC_EINTERNAL);
		return;
	}
	if (rdma_ring_tx_done(&c->ring, wc->wr_id == WR_CTRL, 0) < 0) {
		close_with(c, PPRPC_EINTERNAL);
		return;
	}
	if (wc->wr_id == WR_TX)
		c->base.stats.bytes_out += wc->byte_len;
}

static void drain_cq(struct rdma_conn *c)
{
	struct ibv_wc wc[WC_BATCH];
	int n;

	while (c->cq && (c->state == RS_UP) &&
	       (n = ibv_poll_cq(c->cq, WC_BATCH, wc)) > 0)
		for (int i = 0; i < n && c->state != RS_DEAD; i++)
			on_wc(c, &wc[i]);
}

static void on_cq_ready(uv_poll_t *h, int status, int events)
{
	struct rdma_conn *c = h->data;
	struct ibv_cq *cq;
	void *cctx;
	unsigned nev = 0;

	(void)events;
	if (c->state == RS_DEAD)
		return;
	while (ibv_get_cq_event(c->cc, &cq, &cctx) == 0)
		nev++;
	if (nev)
		ibv_ack_cq_events(c->cq, nev);
	/* Re-arm, then poll: a completion after the poll raises a new event. */
	ibv_req_notify_cq(c->cq, 0);
	drain_cq(c);
	if (c->state != RS_DEAD && status == 0)
		pump(c);
	if (c->state != RS_DEAD && c->wc_error)
		close_with(c, c->wc_error);
}

/* ---- vtable ---------------------------------------------------------------------- */

static int r_start(struct transport_conn *bc)
{
	struct rdma_conn *c = (struct rdma_conn *)bc;

	c->reading = 1;
	c->owner_told = 1;
	defer(c);
	return 0;
}

static int r_send(struct transport_conn *bc, const struct iovec *iov, int iovcnt, transport_send_cb done,
		  void *arg)
{
	struct rdma_conn *c = (struct rdma_conn *)bc;
	uint32_t rkey;
	size_t off;
	int rc;

	if (c->state != RS_UP || c->draining)
		return PPRPC_ECLOSED;
	off = bulk_split(c, iov, iovcnt);
	if (off != SIZE_MAX && zc_rkey(c, iov, iovcnt, off, &rkey))
		rc = rdma_ring_enqueue_zc(&c->ring, iov, iovcnt, off, rkey, done, arg);
	else
		rc = rdma_ring_enqueue_bulk(&c->ring, iov, iovcnt, off, done, arg);
	if (rc < 0)
		return rc;
	c->base.stats.frames_out++;
	if (c->in_pump) {
		c->pump_again = 1;  /* called from one of our callbacks: the running pump posts it */
		return 0;
	}
	post_now(c);
	defer(c);
	return 0;
}

static int r_pause(struct transport_conn *bc)
{
	((struct rdma_conn *)bc)->paused = 1;
	return 0;
}

static int r_resume(struct transport_conn *bc)
{
	struct rdma_conn *c = (struct rdma_conn *)bc;

	c->paused = 0;
	defer(c);
	return 0;
}

/* Graceful: what is queued is still sent (an error reply in particular),
 * then the connection goes; inbound data is discarded meanwhile so the
 * peer's credits keep flowing. */
static void r_close(struct transport_conn *bc)
{
	struct rdma_conn *c = (struct rdma_conn *)bc;

	if (c->state != RS_UP) {
		close_with(c, 0);
		return;
	}
	c->base.closing = 1;
	c->draining = 1;
	defer(c);  /* the pump closes once nothing is queued */
}

static void r_info(const struct transport_conn *bc, struct transport_info *out)
{
	*out = ((const struct rdma_conn *)bc)->info;
}

static const struct transport_ops rdma_ops = {
	.name = "rdma",
	.start = r_start,
	.send = r_send,
	.pause = r_pause,
	.resume = r_resume,
	.close = r_close,
	.info = r_info,
};

/* ---- resources: PD, rings (memlock ladder), CQ, QP, receives ------------------------ */

static int is_memlock_errno(int e)
{
	return e == ENOMEM || e == EPERM || e == EAGAIN || e == EFAULT;
}

static int setup_rings(struct rdma_conn *c, char *why, size_t whylen)
{
	char desc[80];
	uint64_t limit = rdma_memlock_budget(desc, sizeof(desc));
	uint64_t budget = limit == UINT64_MAX ? UINT64_MAX
			 : limit > c->x->registered ? limit - c->x->registered : 0;
	enum rdma_ladder_step s = RDMA_STEP_REQUESTED;
	char last[160] = "";

	for (;;) {
		struct rdma_geom g;
		enum rdma_ladder_step got = rdma_ladder_plan(&c->x->req, s, budget, &g);

		if (got != s && s == RDMA_STEP_REQUESTED && !last[0])
			snprintf(last, sizeof(last), "%.60s leaves %" PRIu64 " KiB < %" PRIu64 " KiB requested",
				 desc, budget >> 10, rdma_geom_bytes(&c->x->req) >> 10);
		if (got == RDMA_STEP_TCP) {
			snprintf(why, whylen, "memlock ladder exhausted: %s", last[0] ? last : desc);
			return PPRPC_ENOMEM;
		}
		c->mem_len = rdma_geom_bytes(&g);
		if (posix_memalign((void **)&c->mem, 4096, c->mem_len) != 0) {
			c->mem = NULL;
			snprintf(why, whylen, "cannot allocate %" PRIu64 " KiB of ring memory", c->mem_len >> 10);
			return PPRPC_ENOMEM;
		}
		memset(c->mem, 0, c->mem_len);
		c->mr = ibv_reg_mr(c->pd, c->mem, c->mem_len, IBV_ACCESS_LOCAL_WRITE);
		if (c->mr) {
			c->geom = g;
			c->step = got;
			c->x->registered += c->mem_len;
			snprintf(c->ladder_why, sizeof(c->ladder_why), "%s", got == RDMA_STEP_REQUESTED ? "" : last);
			return 0;
		}
		if (!is_memlock_errno(errno)) {
			snprintf(why, whylen, "ibv_reg_mr(%" PRIu64 " KiB): %s", c->mem_len >> 10, strerror(errno));
			free(c->mem);
			c->mem = NULL;
			return PPRPC_EIO;
		}
		snprintf(last, sizeof(last), "ibv_reg_mr of %" PRIu64 " KiB at step %s failed: %s (%s)", c->mem_len >> 10,
			 rdma_ladder_step_name(got), strerror(errno), desc);
		free(c->mem);
		c->mem = NULL;
		s = got + 1;
	}
}

/* The context's long-lived regions, for READ in place, from what rings
 * and bulk slots left of the memlock budget; a region that does not fit
 * is sent through the bulk slots instead (said in the info line). */
static void setup_zc(struct rdma_conn *c, uint64_t limit)
{
	for (int i = 0; i < c->x->nregions; i++) {
		uint64_t left = limit == UINT64_MAX ? UINT64_MAX
			       : limit > c->x->registered ? limit - c->x->registered : 0;
		size_t len = c->x->region[i].len;

		if (len > left) {
			snprintf(c->zc_why, sizeof(c->zc_why), "region of %zu KiB not registered: memlock leaves %" PRIu64 " KiB",
				 len >> 10, left >> 10);
			continue;
		}
		c->zc_mr[i] = ibv_reg_mr(c->pd, c->x->region[i].p, len, IBV_ACCESS_REMOTE_READ);
		if (!c->zc_mr[i]) {
			snprintf(c->zc_why, sizeof(c->zc_why), "region of %zu KiB not registered: %s", len >> 10,
				 strerror(errno));
			continue;
		}
		c->zc_len += len;
		c->x->registered += len;
	}
}

/* Bulk slots from what the rings left of the memlock budget: the rings
 * come first (a connection works without bulk slots, not without rings).
 * Depth halves down to 1 before the bulk path is given up, with the
 * reason kept for the connection's info. */
static void setup_bulk(struct rdma_conn *c)
{
	char desc[80];
	uint64_t limit, budget, want;
	struct ibv_device_attr da;

	if (!c->x->req.bulk_threshold) {
		snprintf(c->bulk_why, sizeof(c->bulk_why), "off (PPRPC_RDMA_BULK=off)");
		return;
	}
	if (ibv_query_device(c->id->verbs, &da) || da.max_qp_rd_atom < 1 || da.max_qp_init_rd_atom < 1) {
		snprintf(c->bulk_why, sizeof(c->bulk_why), "off (the device serves no RDMA READ)");
		return;
	}
	limit = rdma_memlock_budget(desc, sizeof(desc));
	budget = limit == UINT64_MAX ? UINT64_MAX : limit > c->x->registered ? limit - c->x->registered : 0;
	want = 2ull * RDMA_BULK_DEPTH * RDMA_BULK_CHUNK;
	for (uint32_t depth = RDMA_BULK_DEPTH; depth >= 1; depth /= 2) {
		uint64_t len = 2ull * depth * RDMA_BULK_CHUNK;

		if (len > budget)
			continue;
		if (posix_memalign((void **)&c->bulk_mem, 4096, len) != 0) {
			c->bulk_mem = NULL;
			break;
		}
		memset(c->bulk_mem, 0, len);
		/* Remote read covers the landing half too: it only ever holds
		 * bytes this same peer sent us. */
		c->bulk_mr = ibv_reg_mr(c->pd, c->bulk_mem, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		if (c->bulk_mr) {
			c->bulk_len = len;
			c->bulk_depth = depth;
			c->x->registered += len;
			c->rd_atom = depth;
			if ((uint32_t)da.max_qp_rd_atom < c->rd_atom)
				c->rd_atom = (uint32_t)da.max_qp_rd_atom;
			if ((uint32_t)da.max_qp_init_rd_atom < c->rd_atom)
				c->rd_atom = (uint32_t)da.max_qp_init_rd_atom;
			setup_zc(c, limit);
			return;
		}
		free(c->bulk_mem);
		c->bulk_mem = NULL;
		if (!is_memlock_errno(errno))
			break;
	}
	snprintf(c->bulk_why, sizeof(c->bulk_why), "off (memlock: %" PRIu64 " KiB left after the rings, bulk slots need %" PRIu64 "..%" PRIu64 " KiB; %.60s)",
		 budget == UINT64_MAX ? (uint64_t)0 : budget >> 10, (uint64_t)(2ull * RDMA_BULK_CHUNK) >> 10,
		 (uint64_t)want >> 10, desc);
}

static int setup_resources(struct rdma_conn *c, char *why, size_t whylen)
{
	struct ibv_context *verbs = c->id->verbs;
	struct ibv_qp_init_attr qa;
	int rc;

	if (!verbs) {
		snprintf(why, whylen, "no RDMA device for this address");
		return PPRPC_EUNSUPP;
	}
	snprintf(c->info.device, sizeof(c->info.device), "%s", ibv_get_device_name(verbs->device));
	c->pd = ibv_alloc_pd(verbs);
	c->cc = c->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!c->pd || !c->cc || set_nonblock(c->cc->fd) < 0) {
		snprintf(why, whylen, "%s: cannot create PD / completion channel: %s", c->info.device, strerror(errno));
		return PPRPC_EIO;
	}
	rc = setup_rings(c, why, whylen);
	if (rc < 0)
		return rc;
	setup_bulk(c);
	c->cq = ibv_create_cq(verbs, (int)(c->geom.tx_depth + 2 + c->geom.rx_depth + c->bulk_depth), c, c->cc, 0);
	if (!c->cq || ibv_req_notify_cq(c->cq, 0)) {
		snprintf(why, whylen, "%s: cannot create CQ: %s", c->info.device, strerror(errno));
		return PPRPC_EIO;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	/* data + one credit-only message + slack, and the bulk READs */
	qa.cap.max_send_wr = c->geom.tx_depth + 2 + c->bulk_depth;
	qa.cap.max_recv_wr = c->geom.rx_depth;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qa)) {
		snprintf(why, whylen, "%s: cannot create RC QP (%u send / %u recv): %s", c->info.device,
			 c->geom.tx_depth + 2, c->geom.rx_depth, strerror(errno));
		return PPRPC_EIO;
	}
	c->qp_made = 1;
	for (uint32_t i = 0; i < c->geom.rx_depth; i++)
		if (post_recv(c, i) < 0) {
			snprintf(why, whylen, "%s: ibv_post_recv failed", c->info.device);
			return PPRPC_EIO;
		}
	if (uv_poll_init(c->x->loop, &c->cq_poll, c->cc->fd) < 0) {
		snprintf(why, whylen, "cannot watch the completion channel");
		return PPRPC_EIO;
	}
	c->cq_poll.data = c;
	c->cq_poll_on = 1;
	uv_poll_start(&c->cq_poll, UV_READABLE, on_cq_ready);
	return 0;
}

static void fill_param(struct rdma_conn *c, struct rdma_conn_param *p, struct priv *pd)
{
	memset(pd, 0, sizeof(*pd));
	pd->magic = htonl(PRIV_MAGIC);
	pd->version = htons(PRIV_VERSION);
	pd->chunk = htonl(c->geom.chunk);
	pd->rx_depth = htonl(c->geom.rx_depth);
	pd->tx_depth = htonl(c->geom.tx_depth);
	pd->flags = htons(c->bulk_mr ? PRIV_F_BULK : 0);
	memset(p, 0, sizeof(*p));
	p->private_data = pd;
	p->private_data_len = sizeof(*pd);
	/* READs: only of bulk slots, and only when this side has them. */
	p->responder_resources = (uint8_t)c->rd_atom;
	p->initiator_depth = (uint8_t)c->rd_atom;
	p->retry_count = 7;
	/* Credits guarantee a posted receive for every message: an RNR NAK
	 * would be a bug, so it fails at once instead of being retried. */
	p->rnr_retry_count = 0;
}

static int parse_priv(const void *data, uint8_t len, struct priv *out)
{
	struct priv p;

	if (!data || len < sizeof(p))
		return PPRPC_EPROTO;
	memcpy(&p, data, sizeof(p));
	if (ntohl(p.magic) != PRIV_MAGIC || ntohs(p.version) != PRIV_VERSION)
		return PPRPC_EVERSION;
	out->chunk = ntohl(p.chunk);
	out->rx_depth = ntohl(p.rx_depth);
	out->tx_depth = ntohl(p.tx_depth);
	out->flags = ntohs(p.flags);
	if (out->chunk < 1024 || out->chunk > RDMA_CHUNK_MAX || out->rx_depth < RDMA_RX_DEPTH_MIN ||
	    out->rx_depth > RDMA_RX_DEPTH_MAX)
		return PPRPC_EPROTO;
	return 0;
}

/* Both sides: the QP is connected; the ring starts with the peer's credits. */
static int go_up(struct rdma_conn *c, char *why, size_t whylen)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	int rc = rdma_ring_init(&c->ring, &c->geom, c->peer.rx_depth, c->peer.chunk, c->mem);

	if (rc < 0) {
		snprintf(why, whylen, "ring setup failed");
		return rc;
	}
	c->ring_ok = 1;
	snprintf(c->info.kind, sizeof(c->info.kind), "rdma");
	c->info.gid_index = -1;
	memset(&qa, 0, sizeof(qa));
	if (ibv_query_qp(c->id->qp, &qa, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MAX_QP_RD_ATOMIC, &qia) == 0) {
		c->info.gid_index = qa.ah_attr.is_global ? qa.ah_attr.grh.sgid_index : -1;
		c->info.mtu = 128u << qa.path_mtu;
	}
	/* Bulk by READ needs slots on both sides and READ credits on the QP
	 * (what rdmacm negotiated, not what we asked for). */
	if (c->bulk_mr && !(c->peer.flags & PRIV_F_BULK))
		snprintf(c->bulk_why, sizeof(c->bulk_why), "off (the peer has no bulk slots)");
	else if (c->bulk_mr && qa.max_rd_atomic < 1)
		snprintf(c->bulk_why, sizeof(c->bulk_why), "off (no RDMA READ credits negotiated)");
	else if (c->bulk_mr &&
		 rdma_ring_bulk_enable(&c->ring, RDMA_BULK_CHUNK, c->bulk_depth, c->bulk_mem,
				       c->bulk_mem + (size_t)c->bulk_depth * RDMA_BULK_CHUNK, c->bulk_mr->rkey,
				       qa.max_rd_atomic) < 0)
		snprintf(c->bulk_why, sizeof(c->bulk_why), "off (bulk setup failed)");
	if (c->ring.bulk_on)
		snprintf(c->info.bulk, sizeof(c->info.bulk), "read >= %u KiB, %ux%u KiB slots, %u READs in flight, zero-copy %" PRIu64 " MiB%s%.80s",
			 c->x->req.bulk_threshold >> 10, c->bulk_depth, RDMA_BULK_CHUNK >> 10, c->ring.bulk.max_reads,
			 c->zc_len >> 20, c->zc_why[0] ? ": " : "", c->zc_why);
	else
		snprintf(c->info.bulk, sizeof(c->info.bulk), "%s", c->bulk_why);
	c->info.chunk = c->geom.chunk;
	c->info.tx_depth = c->geom.tx_depth;
	c->info.rx_depth = c->geom.rx_depth;
	snprintf(c->info.ladder, sizeof(c->info.ladder), "%s", rdma_ladder_step_name(c->step));
	snprintf(c->info.ladder_why, sizeof(c->info.ladder_why), "%s", c->ladder_why);
	addr_format(rdma_get_peer_addr(c->id), c->base.peer, sizeof(c->base.peer));
	c->state = RS_UP;
	/* The peer may have sent before we saw ESTABLISHED (the passive side
	 * in particular): those completions raised their CQ event while the
	 * ring did not exist yet, and no new event will come for them. */
	drain_cq(c);
	return 0;
}

/* ---- rdmacm events of one connection -------------------------------------------- */

static void on_conn_event(struct rdma_conn *c, struct rdma_cm_event *ev)
{
	char why[300];
	struct rdma_conn_param p;
	struct priv pd;
	int rc;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		rc = setup_resources(c, why, sizeof(why));
		if (rc < 0) {
			fail_setup(c, rc, "%s", why);
			return;
		}
		if (rdma_resolve_route(c->id, RESOLVE_MS))
			fail_setup(c, PPRPC_ECONN, "rdma_resolve_route: %s", strerror(errno));
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		fill_param(c, &p, &pd);
		if (rdma_connect(c->id, &p))
			fail_setup(c, PPRPC_ECONN, "rdma_connect: %s", strerror(errno));
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->passive) {
			rc = parse_priv(ev->param.conn.private_data, ev->param.conn.private_data_len, &c->peer);
			if (rc < 0) {
				fail_setup(c, rc, "the peer's accept carried no pprpc handshake");
				return;
			}
		}
		rc = go_up(c, why, sizeof(why));
		if (rc < 0) {
			fail_setup(c, rc, "%s", why);
			return;
		}
		if (c->passive) {
			c->acb(c->actx, &c->base);
		} else {
			rdma_connect_cb cb = c->ccb;

			c->ccb = NULL;
			cb(c->cctx, &c->base, 0, NULL);
		}
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (c->state == RS_UP) {
			/* Data that arrived before the peer left is delivered first. */
			drain_cq(c);
			if (c->state == RS_UP)
				pump(c);
			close_with(c, c->wc_error == PPRPC_EIO ? PPRPC_EIO : 0);
		}
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		if (c->state == RS_RESOLVING || c->state == RS_ACCEPTING)
			fail_setup(c, PPRPC_ECONN, "%s (status %d)%s", rdma_event_str(ev->event), ev->status,
				   ev->event == RDMA_CM_EVENT_REJECTED ? ": no RDMA listener at the peer" : "");
		else
			close_with(c, PPRPC_ECONN);
		return;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (c->state == RS_RESOLVING || c->state == RS_ACCEPTING)
			fail_setup(c, PPRPC_EDEVICE, "RDMA device removed");
		else
			close_with(c, PPRPC_EDEVICE);
		return;
	default:
		return;
	}
}

static void on_cm_ready(uv_poll_t *h, int status, int events)
{
	struct rdma_conn *c = h->data;
	struct rdma_cm_event *ev, copy;

	(void)status;
	(void)events;
	while (c->state != RS_DEAD && c->ch && rdma_get_cm_event(c->ch, &ev) == 0) {
		uint8_t pdata[256];

		/* Ack before acting: teardown destroys the id, which waits for
		 * every event to be acked.  Keep the private data. */
		copy = *ev;
		if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
			memcpy(pdata, ev->param.conn.private_data, ev->param.conn.private_data_len);
			copy.param.conn.private_data = pdata;
		}
		rdma_ack_cm_event(ev);
		on_conn_event(c, &copy);
	}
}

static struct rdma_conn *conn_new(struct rdma_ctx *x)
{
	struct rdma_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->x = x;
	c->base.ops = &rdma_ops;
	uv_idle_init(x->loop, &c->defer);
	c->defer.data = c;
	c->defer_made = 1;
	snprintf(c->info.kind, sizeof(c->info.kind), "rdma");
	c->info.gid_index = -1;
	return c;
}

static int watch_channel(struct rdma_conn *c)
{
	if (set_nonblock(c->ch->fd) < 0 || uv_poll_init(c->x->loop, &c->cm_poll, c->ch->fd) < 0)
		return PPRPC_EIO;
	c->cm_poll.data = c;
	c->cm_poll_on = 1;
	uv_poll_start(&c->cm_poll, UV_READABLE, on_cm_ready);
	return 0;
}

int rdma_transport_connect(struct rdma_ctx *x, const char *host, uint16_t port, rdma_connect_cb cb, void *ctx, char *err,
		 size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct rdma_conn *c;

	if (addr_resolve(host, port, &ss, &sl) < 0) {
		snprintf(err, errlen, "cannot resolve %s", host);
		return PPRPC_EINVAL;
	}
	c = conn_new(x);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	c->ccb = cb;
	c->cctx = ctx;
	c->state = RS_RESOLVING;
	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		snprintf(err, errlen, "rdmacm unavailable (%s)", strerror(errno));
		goto fail;
	}
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP)) {
		snprintf(err, errlen, "rdma_create_id: %s", strerror(errno));
		goto fail;
	}
	if (watch_channel(c) < 0) {
		snprintf(err, errlen, "cannot watch the rdmacm channel");
		goto fail;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&ss, RESOLVE_MS)) {
		snprintf(err, errlen, "rdma_resolve_addr(%s): %s", host, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	c->ccb = NULL;
	teardown(c);
	return PPRPC_EUNSUPP;
}

/* ---- listener ------------------------------------------------------------------------ */

static void on_connect_request(struct rdma_listener *l, struct rdma_cm_id *id, const struct rdma_cm_event *ev)
{
	struct rdma_conn *c = conn_new(l->x);
	struct rdma_conn_param p;
	struct priv pd;
	char why[300];

	if (!c) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->passive = 1;
	c->state = RS_ACCEPTING;
	c->acb = l->cb;
	c->actx = l->ctx;
	c->id = id;
	id->context = c;
	if (parse_priv(ev->param.conn.private_data, ev->param.conn.private_data_len, &c->peer) < 0) {
		rdma_reject(id, NULL, 0);
		teardown(c);
		return;
	}
	/* The connection gets its own event channel (its events must not
	 * wait behind, or outlive, the listener's). */
	c->ch = rdma_create_event_channel();
	if (!c->ch || rdma_migrate_id(id, c->ch) || watch_channel(c) < 0 ||
	    setup_resources(c, why, sizeof(why)) < 0) {
		rdma_reject(id, NULL, 0);
		teardown(c);
		return;
	}
	fill_param(c, &p, &pd);
	if (rdma_accept(id, &p))
		teardown(c);
}

static void on_listener_ready(uv_poll_t *h, int status, int events)
{
	struct rdma_listener *l = h->data;
	struct rdma_cm_event *ev;

	(void)status;
	(void)events;
	while (rdma_get_cm_event(l->ch, &ev) == 0) {
		struct rdma_cm_event copy = *ev;
		uint8_t pdata[256];

		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
				memcpy(pdata, ev->param.conn.private_data, ev->param.conn.private_data_len);
				copy.param.conn.private_data = pdata;
			}
			rdma_ack_cm_event(ev);
			on_connect_request(l, copy.id, &copy);
			continue;
		}
		rdma_ack_cm_event(ev);
	}
}

int rdma_transport_listen(struct rdma_ctx *x, const char *host, uint16_t port, rdma_accept_cb cb, void *ctx,
		struct rdma_listener **ret_l, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct rdma_listener *l;

	if (addr_resolve(host, port, &ss, &sl) < 0) {
		snprintf(err, errlen, "cannot resolve %s", host);
		return PPRPC_EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	l->x = x;
	l->cb = cb;
	l->ctx = ctx;
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		snprintf(err, errlen, "rdmacm unavailable (%s)", strerror(errno));
		goto fail;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		snprintf(err, errlen, "rdma_create_id: %s", strerror(errno));
		goto fail;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss)) {
		snprintf(err, errlen, "rdma_bind_addr(%s:%u): %s", host, port, strerror(errno));
		goto fail;
	}
	if (!l->id->verbs) {
		snprintf(err, errlen, "no RDMA device serves %s", host);
		goto fail;
	}
	if (rdma_listen(l->id, 64)) {
		snprintf(err, errlen, "rdma_listen: %s", strerror(errno));
		goto fail;
	}
	if (set_nonblock(l->ch->fd) < 0 || uv_poll_init(x->loop, &l->poll, l->ch->fd) < 0) {
		snprintf(err, errlen, "cannot watch the rdmacm channel");
		goto fail;
	}
	l->poll.data = l;
	uv_poll_start(&l->poll, UV_READABLE, on_listener_ready);
	snprintf(err, errlen, "%s", ibv_get_device_name(l->id->verbs->device));
	*ret_l = l;
	return 0;
fail:
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	return PPRPC_EUNSUPP;
}

static void listener_closed(uv_handle_t *h)
{
	struct rdma_listener *l = h->data;

	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

void rdma_listener_close(struct rdma_listener *l)
{
	if (l)
		uv_close((uv_handle_t *)&l->poll, listener_closed);
}

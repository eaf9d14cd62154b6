/* daemon/xfer/xfer.c — stage-boundary transfers (see xfer.h). */
#include "daemon/xfer/xfer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/objects/buffer.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/peer/peer.h"
#include "daemon/pprpcd.h"
#include "daemon/exec/qreq.h"
#include "daemon/server/reply.h"
#include "daemon/exec/staging.h"
#include "daemon/exec/stream.h"
#include "pprpc/types.h"
#include "proto/errtext.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

enum { CH_EMPTY, CH_CAPTURED, CH_SENT };

/* In-place chunks a SEND may have published and not yet seen written: the
 * wait for them is all that stands between a newly queued command and the
 * tensor (two slots keep a loopback socket busy while one is written). */
#define INPLACE_WINDOW 2
/* Below this a SEND is always captured (see h_send). */
#define DIRECT_SEND_MIN (256u << 10)

struct xchunk {
	int slot;              /* staging slot, or -1: in place (src) */
	int ipc;               /* the slot is in the device's GPU pool (CUDA IPC) */
	int state;             /* CH_* ; CAPTURED is published under xfer_lock */
	const uint8_t *src;    /* in place: the bytes in the source tensor */
	uint64_t off, len;
};

/* The source side of one transfer. */
struct xsend {
	struct xsend *next;
	uint64_t id;
	uint64_t size;          /* from SEND, or from an early PULL */
	int have_send;
	int exec_done;          /* the SEND command completed (loop) */
	int failed;
	int status;
	uint32_t nchunks;
	struct xchunk *chunks;
	uint32_t ncaptured;     /* xfer_lock */
	uint32_t nsent;         /* loop */
	uint32_t nwritten;
	uint32_t writes_inflight;
	struct conn *puller;    /* the peer connection pulling it (ref held) */
	uint64_t pull_req;
	/* In place (see send_exec).  Under xfer_lock: */
	int pulling;            /* a puller is attached */
	int ipc_req;            /* it is on this host and wants CUDA IPC */
	int ipc;                /* chunks went by CUDA IPC (set with the first) */
	int abort;              /* failed: the SEND stops waiting */
	uint32_t inplace_open;  /* in-place chunks published, not yet written */
	uint64_t exec_ms;       /* when the queue reached the SEND (uv_hrtime ms, as uv_now) */
	/* Loop: */
	uint32_t inplace_wire;  /* in-place chunks handed to the link, not yet written */
	struct dbuf *src_b;     /* the SEND's tensor, held while in-place bytes are on the wire */
	struct device *ipc_dev; /* whose GPU pool holds the IPC chunks */
	int ipc_released;       /* the destination copied them (PULL_RELEASE) */
	char peer[64];
	uint64_t t0_us;
	uint64_t born_ms;       /* loop time of creation, for expiry */
	atomic_int canceled;
};

/* The destination side of one RECV. */
struct xrecv {
	struct pprpcd *d;
	uint64_t id, size;
	uint8_t *stage;
	uint64_t arrived;       /* xfer_lock */
	int error;              /* xfer_lock */
	char errmsg[256];
	uint8_t *dst;           /* xfer_lock: set once RECV executes */
	struct dbuf *b;         /* dst's buffer: a reference for as long as chunks may land */
	uint64_t direct_from;   /* xfer_lock: chunks from here on land in dst */
	uint64_t expect_off;    /* loop: next chunk's offset */
	uint64_t cur_len;
	int cur_code;
	int refs;               /* the PULL request + the RECV command */
	char peer[64];
	uint64_t t0_us;
	/* CUDA IPC (see Pull in pprpc.proto) */
	int ipc_asked;          /* the PULL named our host */
	int cur_ipc;            /* loop: the reply being read is an IPC chunk or the close */
	int finished;           /* loop: the RECV command completed */
	int release_sent;       /* loop */
	uint8_t ipc_handle[DEVICE_IPC_HANDLE];  /* xfer_lock, with: */
	struct ichunk { uint64_t off, len, pool_off; } *ich;
	uint32_t nich, cap_ich;
	uint64_t ipc_avail;     /* bytes announced by IPC chunks */
	char ipc_err[200];      /* the IPC copy failed (worker) */
	uint64_t ipc_copied;    /* bytes copied (a prefix; worker) */
	int progress_queued;    /* on d->ipc_progress */
	struct xrecv *progress_next;
	uint64_t released_upto; /* loop: the done of the last PullRelease */
	uint64_t copy_us;       /* worker: time in IPC copies (read after the RECV) */
	uint64_t ipc_pool;      /* xfer_lock: the source's pool size */
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct bstat *bstat_get(struct pprpcd *d, const char *peer, const char *dir)
{
	struct bstat *b;

	for (b = d->bstats; b; b = b->next)
		if (!strcmp(b->peer, peer) && !strcmp(b->dir, dir))
			return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	snprintf(b->peer, sizeof(b->peer), "%s", peer);
	snprintf(b->dir, sizeof(b->dir), "%s", dir);
	b->next = d->bstats;
	d->bstats = b;
	return b;
}

static void bstat_add(struct pprpcd *d, const char *peer, const char *dir, const char *link, uint64_t bytes,
		      uint64_t t0, uint64_t copy_us, int failed)
{
	struct bstat *b = bstat_get(d, peer, dir);

	if (!b)
		return;
	snprintf(b->path, sizeof(b->path), "p2p-%s", link);
	if (failed) {
		b->errors++;
		return;
	}
	b->transfers++;
	b->bytes += bytes;
	b->time_us += now_us() - t0;
	b->copy_us += copy_us;
	if (!strcmp(link, "ipc"))
		b->ipc_bytes += bytes;
}

/* ---- source side ------------------------------------------------------------ */

static struct xsend *xsend_find(struct pprpcd *d, uint64_t id)
{
	for (struct xsend *x = d->xsends; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

static struct xsend *xsend_new(struct pprpcd *d, uint64_t id)
{
	struct xsend *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->id = id;
	x->born_ms = uv_now(d->loop);
	x->next = d->xsends;
	d->xsends = x;
	return x;
}

/* Chunks of cs bytes (the slot size of the staging they will use). */
static struct xchunk *chunks_make(uint64_t size, uint64_t cs, uint32_t *ret_n)
{
	uint32_t n = (uint32_t)((size + cs - 1) / cs);
	struct xchunk *ch = calloc(n, sizeof(*ch));

	if (!ch)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		ch[i].slot = -1;
		ch[i].off = (uint64_t)i * cs;
		ch[i].len = size - ch[i].off < cs ? size - ch[i].off : cs;
	}
	*ret_n = n;
	return ch;
}

static int xsend_layout(struct pprpcd *d, struct xsend *x)
{
	x->chunks = chunks_make(x->size, d->staging.slot_size, &x->nchunks);
	return x->chunks ? 0 : PPRPC_ENOMEM;
}

static void xsend_unlink(struct pprpcd *d, struct xsend *x)
{
	for (struct xsend **pp = &d->xsends; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			return;
		}
}

/* The transfer failed: nothing more is sent, and a SEND waiting for its
 * in-place chunks stops waiting (loop thread). */
static void xsend_mark_failed(struct pprpcd *d, struct xsend *x, int status)
{
	x->failed = 1;
	if (status && !x->status)
		x->status = status;
	pthread_mutex_lock(&d->xfer_lock);
	x->abort = 1;
	pthread_mutex_unlock(&d->xfer_lock);
	pprpcd_kick_queues(d);
}

/* The tensor may change once the SEND completed and no in-place chunk is
 * still being written from it. */
static void xsend_release_src(struct xsend *x)
{
	if (x->src_b && x->exec_done && !x->inplace_wire) {
		buffer_unref(x->src_b);
		x->src_b = NULL;
	}
}

/* GPU pool slots go back once the destination copied them (or the
 * transfer is over). */
static void xsend_put_ipc_slots(struct xsend *x)
{
	for (uint32_t i = 0; i < x->nchunks; i++)
		if (x->chunks[i].ipc && x->chunks[i].slot >= 0) {
			staging_put(x->ipc_dev->ipc_staging, x->chunks[i].slot);
			x->chunks[i].slot = -1;
		}
}

/* Free once nothing can touch it: the SEND command finished, and either
 * every chunk was written or the transfer failed and no write is pending. */
static void xsend_maybe_free(struct pprpcd *d, struct xsend *x)
{
	int finished = x->nchunks && x->nwritten == x->nchunks && (!x->ipc || x->ipc_released);

	if (!x->exec_done && x->have_send)
		return;
	if (x->writes_inflight || !(finished || x->failed))
		return;
	if (x->puller && x->failed && !finished)
		reply_error(x->puller, MSG_PULL, x->pull_req, x->status ? x->status : PPRPC_ECANCELED,
			    "the source side of the transfer failed or was cancelled");
	bstat_add(d, x->peer[0] ? x->peer : "?", "send",
		  x->ipc ? "ipc" : x->puller && x->puller->t ? transport_name(x->puller->t) : "tcp", x->size,
		  x->t0_us, 0, !finished);
	xsend_put_ipc_slots(x);
	for (uint32_t i = 0; i < x->nchunks; i++)
		if (x->chunks[i].state == CH_CAPTURED && x->chunks[i].slot >= 0)
			staging_put(&d->staging, x->chunks[i].slot);
	xsend_release_src(x);
	xsend_unlink(d, x);
	if (x->puller)
		conn_unref(x->puller);
	free(x->chunks);
	free(x);
}

struct chunk_write {
	struct pprpcd *d;
	struct xsend *x;
	uint32_t i;
};

static void chunk_written(void *arg, int status)
{
	struct chunk_write *w = arg;
	struct xsend *x = w->x;
	struct xchunk *ch = &x->chunks[w->i];

	if (ch->ipc) {
		/* the slot stays until the destination released it */
	} else if (ch->slot >= 0) {
		staging_put(&w->d->staging, ch->slot);
	} else {
		x->inplace_wire--;
		pthread_mutex_lock(&w->d->xfer_lock);
		x->inplace_open--;
		pthread_mutex_unlock(&w->d->xfer_lock);
		pprpcd_kick_queues(w->d);
		xsend_release_src(x);
	}
	ch->state = CH_SENT;
	x->writes_inflight--;
	if (status == 0)
		x->nwritten++;
	else
		xsend_mark_failed(w->d, x, 0);
	xsend_maybe_free(w->d, x);
	free(w);
}

/* Hand every captured, unsent chunk of x to its puller, in order. */
static void xsend_pump(struct pprpcd *d, struct xsend *x)
{
	uint32_t n = 0;

	if (x->puller && !x->failed && x->have_send) {
		pthread_mutex_lock(&d->xfer_lock);
		n = x->ncaptured;
		pthread_mutex_unlock(&d->xfer_lock);
	}
	/* A send that fails at once (the link is closing) runs chunk_written
	 * inside reply_send_part, and that may free x: hold it until the loop
	 * is done, and send nothing more once the transfer failed. */
	x->writes_inflight++;
	while (x->nsent < n && !x->failed) {
		Pprpc__PullChunk pc = PPRPC__PULL_CHUNK__INIT;
		struct xchunk *ch = &x->chunks[x->nsent];
		struct chunk_write *w = malloc(sizeof(*w));
		const uint8_t *bytes;
		uint64_t nbytes = ch->len;
		int more;

		if (!w) {
			xsend_mark_failed(d, x, PPRPC_ENOMEM);
			break;
		}
		w->d = d;
		w->x = x;
		w->i = x->nsent;
		pc.offset = ch->off;
		pc.size = ch->len;
		x->nsent++;
		x->writes_inflight++;
		more = x->nsent < x->nchunks;
		if (ch->ipc) {
			/* No bytes on the link: where they are in our GPU pool.
			 * The PULL stays open until the destination releases. */
			pc.ipc_handle.data = x->ipc_dev->ipc_handle;
			pc.ipc_handle.len = DEVICE_IPC_HANDLE;
			pc.ipc_offset = (uint64_t)ch->slot * x->ipc_dev->ipc_staging->slot_size;
			pc.ipc_pool_bytes = x->ipc_dev->ipc_staging->bytes;
			bytes = NULL;
			nbytes = 0;
			more = 1;
		} else if (ch->slot >= 0) {
			bytes = staging_ptr(&d->staging, ch->slot);
		} else {
			bytes = ch->src;
			x->inplace_wire++;
		}
		/* reply_send_part calls chunk_written even if it cannot send. */
		reply_send_part(x->puller, MSG_PULL, x->pull_req, more, &pc.base, bytes, nbytes, chunk_written, w);
	}
	x->writes_inflight--;
	xsend_maybe_free(d, x);
}

static void ipc_progress_pump(struct pprpcd *d);

static void on_xfer_async(uv_async_t *a)
{
	struct pprpcd *d = a->data;
	struct xsend *x, *next;

	ipc_progress_pump(d);
	for (x = d->xsends; x; x = next) {
		next = x->next;
		xsend_pump(d, x);
	}
}

enum send_mode { SM_UNDECIDED, SM_CAPTURE, SM_IN_PLACE, SM_IPC };

struct send_cmd {
	struct qreq qr;
	struct xsend *x;
	struct dbuf *b;
	uint64_t offset;
	uint32_t next;          /* worker: the next chunk to publish */
	int in_place;           /* may stream from the tensor (host-visible, enabled) */
	int ipc_ok;             /* may go by CUDA IPC (the device has it) */
	int mode;               /* worker: enum send_mode */
	int behind;             /* worker: a later command of this stream is queued */
};

/* Is a later command of q's stream queued?  Under the queue lock. */
static int stream_has_later(const struct qcmd *q)
{
	if (!q->stream)
		return 1;
	for (const struct qcmd *c = q->next; c; c = c->next)
		if (c->stream == q->stream)
			return 1;
	return 0;
}

/* Worker, under the queue lock. */
static int send_ready(struct qcmd *q)
{
	struct send_cmd *sc = (struct send_cmd *)q;
	struct pprpcd *d = sc->qr.c->d;
	struct xsend *x = sc->x;
	int ready;

	sc->behind = stream_has_later(q);
	if (sc->behind || atomic_load(&d->stopping_workers))
		return 1;
	pthread_mutex_lock(&d->xfer_lock);
	/* The queue reached it: from now on a missing puller counts. */
	if (!x->exec_ms)
		x->exec_ms = uv_hrtime() / 1000000;
	if (x->abort)
		ready = 1;
	else if (sc->next == x->nchunks)
		ready = x->inplace_open == 0;
	else if (sc->mode == SM_UNDECIDED)
		ready = x->pulling || !(sc->in_place || sc->ipc_ok);
	else if (sc->mode == SM_IN_PLACE)
		ready = x->inplace_open < INPLACE_WINDOW;
	else
		ready = 1;
	pthread_mutex_unlock(&d->xfer_lock);
	return ready;
}

/* Publish chunk i to the loop's pump (which sends what is published, in
 * order): in a staging slot (host, or the GPU pool when ipc), or in place
 * at src. */
static void send_publish(struct pprpcd *d, struct xsend *x, uint32_t i, int slot, const uint8_t *src, int ipc)
{
	struct xchunk *ch = &x->chunks[i];

	pthread_mutex_lock(&d->xfer_lock);
	ch->slot = slot;
	ch->src = src;
	ch->ipc = ipc;
	ch->state = CH_CAPTURED;
	x->ncaptured++;
	if (src)
		x->inplace_open++;
	if (ipc)
		x->ipc = 1;
	pthread_mutex_unlock(&d->xfer_lock);
	uv_async_send(&d->xfer_async);
}

/* Worker, before the first chunk is published: chunks sized for the IPC
 * pool's slots instead of the host ring's.  Nothing on the loop reads the
 * chunks until one is published. */
static int send_relayout(struct pprpcd *d, struct xsend *x, uint64_t cs)
{
	uint32_t n;
	struct xchunk *ch = chunks_make(x->size, cs, &n), *old;

	if (!ch)
		return PPRPC_ENOMEM;
	pthread_mutex_lock(&d->xfer_lock);
	old = x->chunks;
	x->chunks = ch;
	x->nchunks = n;
	pthread_mutex_unlock(&d->xfer_lock);
	free(old);
	return 0;
}

/* Worker: the device's GPU pool for IPC SENDs, made on first use (as large
 * as the host staging ring).  0 when it can be used. */
static int ipc_pool_ready(struct pprpcd *d, struct device *dev)
{
	/* GPU memory is plentiful next to a boundary tensor: 1 GiB of 64 MiB
	 * slots keeps big transfers in few copies; a CPU pool is as large as
	 * the host staging ring. */
	uint64_t bytes = d->opts.ipc_pool_bytes ? d->opts.ipc_pool_bytes
			 : device_host_visible(dev) ? d->opts.staging_bytes : 1ull << 30;
	uint64_t slot = 64ull << 20, fr = 0, total = 0;
	struct staging *s;
	void *mem = NULL;

	if (dev->ipc_state)
		return dev->ipc_state > 0 ? 0 : -1;
	while (slot > (64u << 10) && bytes / slot < 16)
		slot /= 2;
	/* The pool is device memory like any buffer: it must leave the floor. */
	if (device_mem_info(dev, &fr, &total) == 0 && (bytes > fr || fr - bytes < dev->floor))
		snprintf(dev->ipc_why, sizeof(dev->ipc_why),
			 "a %llu MiB pool would leave less than the memory floor (%llu MiB free)",
			 (unsigned long long)(bytes >> 20), (unsigned long long)(fr >> 20));
	s = dev->ipc_why[0] ? NULL : calloc(1, sizeof(*s));
	if (!s || device_ipc_pool(dev, bytes, &mem, dev->ipc_handle, dev->ipc_why, sizeof(dev->ipc_why)) < 0 ||
	    staging_init_over(s, mem, bytes, slot) < 0) {
		if (!dev->ipc_why[0])
			snprintf(dev->ipc_why, sizeof(dev->ipc_why), "no memory for the IPC staging pool");
		if (mem)
			device_free(dev, mem, 0);
		free(s);
		__atomic_store_n(&dev->ipc_state, -1, __ATOMIC_RELEASE);
		LOG(d, LOG_WARN_, "%s: IPC sends disabled: %s", dev->name, dev->ipc_why);
		return -1;
	}
	dev->ipc_staging = s;
	dev->ipc_mem = mem;
	__atomic_store_n(&dev->ipc_state, 1, __ATOMIC_RELEASE);
	LOG(d, LOG_INFO_, "%s: IPC staging pool: %u slots of %llu MiB", dev->name, s->nslots,
	    (unsigned long long)(slot >> 20));
	return 0;
}

/* A destination rank that pulled by CUDA IPC before will, most likely,
 * again.  Under xfer_lock. */
static int ipc_peer_known(struct pprpcd *d, const char *rank)
{
	for (unsigned i = 0; i < sizeof(d->ipc_peers) / sizeof(d->ipc_peers[0]); i++)
		if (rank[0] && !strcmp(d->ipc_peers[i], rank))
			return 1;
	return 0;
}

static void ipc_peer_note(struct pprpcd *d, const char *rank)
{
	const unsigned n = sizeof(d->ipc_peers) / sizeof(d->ipc_peers[0]);

	if (!rank[0] || ipc_peer_known(d, rank))
		return;
	snprintf(d->ipc_peers[d->ipc_peers_next++ % n], sizeof(d->ipc_peers[0]), "%s", rank);
}

/*
 * A SEND with later commands behind it must not wait for its destination,
 * so with no PULL yet it captures into host staging.  To a destination
 * that pulls by CUDA IPC that is the slow path (device to host, then the
 * link: 10 to 40 times slower than the GPU pool), and the PULL is usually
 * a few hundred microseconds away (the destination's RECV raced the SEND).
 * So for such a rank the worker waits for it, at most IPC_PULL_GRACE_US.
 * Returns whether the PULL came.
 */
#define IPC_PULL_GRACE_US 3000

static int wait_ipc_pull(struct pprpcd *d, struct xsend *x, const struct qcmd *q)
{
	uint64_t t0 = now_us();
	int pulling = 0, known;

	pthread_mutex_lock(&d->xfer_lock);
	known = ipc_peer_known(d, x->peer);
	pthread_mutex_unlock(&d->xfer_lock);
	if (!known)
		return 0;
	while (!pulling && now_us() - t0 < IPC_PULL_GRACE_US && !atomic_load(&q->stream->canceled) &&
	       !atomic_load(&d->stopping_workers)) {
		usleep(20);
		pthread_mutex_lock(&d->xfer_lock);
		pulling = x->pulling && !x->abort;
		pthread_mutex_unlock(&d->xfer_lock);
	}
	return pulling;
}

/* Worker.  A SEND must leave the stream only once its bytes are safe from
 * what comes after it.
 *  - Captured into host staging, they are safe at once: the rule whenever a
 *    later command of the stream is queued before the destination pulls
 *    (the stream moves on without waiting for the wire).
 *  - By CUDA IPC (the destination is a GPU on this host and asked for it):
 *    captured into the GPU pool, device to device, which is as fast as it
 *    gets; the destination copies from there and releases the slots.
 *  - In place: while the SEND is the last command of its stream and the
 *    destination is pulling, nothing can touch the tensor yet, so chunks
 *    stream straight from it (no capture copy, up to INPLACE_WINDOW on the
 *    wire); the moment a later command arrives, the rest is captured, and
 *    the SEND completes once its in-place chunks are written.  A FENCE is
 *    such a command too, so synchronizing never waits for the destination.
 * Until the destination pulls, a SEND that could go in place or by IPC and
 * has nothing behind it waits (to learn which). */
static int send_exec(struct qcmd *q)
{
	struct send_cmd *sc = (struct send_cmd *)q;
	struct pprpcd *d = sc->qr.c->d;
	struct xsend *x = sc->x;
	struct device *dev = sc->b->dev;
	const uint8_t *src = sc->b->ptr + sc->offset;

	for (;;) {
		int abort, pulling, ipc_req, slot, rc;
		uint32_t open;
		struct xchunk *ch;

		if (atomic_load(&q->stream->canceled) || atomic_load(&d->stopping_workers)) {
			snprintf(q->err, sizeof(q->err), "SEND cancelled");
			return PPRPC_ECANCELED;
		}
		pthread_mutex_lock(&d->xfer_lock);
		abort = x->abort;
		pulling = x->pulling;
		ipc_req = x->ipc_req;
		open = x->inplace_open;
		pthread_mutex_unlock(&d->xfer_lock);
		if (abort) {
			int st = x->status ? x->status : PPRPC_ECANCELED;

			snprintf(q->err, sizeof(q->err), "SEND of transfer %" PRIu64 " failed: %s", x->id,
				 st == PPRPC_ETIMEDOUT ? "the destination did not pull it within the transfer timeout"
				 : st == PPRPC_ECLOSED ? "the destination's link closed"
						       : pprpc_err_text(st));
			return st;
		}
		if (sc->next == x->nchunks)
			return open ? QCMD_AGAIN : 0;
		if (sc->mode == SM_UNDECIDED && !pulling && sc->behind && sc->ipc_ok && wait_ipc_pull(d, x, q))
			continue; /* decide with the PULL's request */
		if (sc->mode == SM_UNDECIDED) {
			if (pulling && ipc_req && sc->ipc_ok && ipc_pool_ready(d, dev) == 0 &&
			    send_relayout(d, x, dev->ipc_staging->slot_size) == 0) {
				sc->mode = SM_IPC;
				pthread_mutex_lock(&d->xfer_lock);
				ipc_peer_note(d, x->peer);
				pthread_mutex_unlock(&d->xfer_lock);
			} else if (pulling && sc->in_place && !sc->behind)
				sc->mode = SM_IN_PLACE;
			else if (!pulling && (sc->in_place || sc->ipc_ok) && !sc->behind)
				return QCMD_AGAIN;
			else
				sc->mode = SM_CAPTURE;
		}
		if (sc->mode == SM_IN_PLACE && sc->behind)
			sc->mode = SM_CAPTURE;
		ch = &x->chunks[sc->next];
		if (sc->mode == SM_IN_PLACE) {
			if (open >= INPLACE_WINDOW)
				return QCMD_AGAIN;
			send_publish(d, x, sc->next++, -1, src + ch->off, 0);
			continue;
		}
		if (sc->mode == SM_IPC) {
			x->ipc_dev = dev;
			slot = staging_get(dev->ipc_staging, &q->stream->canceled, &d->stopping_workers);
			if (slot >= 0)
				rc = device_copy(dev, staging_ptr(dev->ipc_staging, slot), src + ch->off, ch->len);
		} else {
			slot = staging_get(&d->staging, &q->stream->canceled, &d->stopping_workers);
			if (slot >= 0)
				rc = device_download(dev, staging_ptr(&d->staging, slot), src + ch->off, ch->len);
		}
		if (slot < 0) {
			snprintf(q->err, sizeof(q->err), "SEND cancelled while waiting for staging space");
			return PPRPC_ECANCELED;
		}
		send_publish(d, x, sc->next, slot, NULL, sc->mode == SM_IPC);
		if (rc < 0) {
			snprintf(q->err, sizeof(q->err), "SEND: capturing chunk %u failed", sc->next);
			return rc;
		}
		sc->next++;
	}
}

static void send_release(struct qreq *qr)
{
	struct send_cmd *sc = (struct send_cmd *)qr;
	struct xsend *x = sc->x;
	struct pprpcd *d = qr->c->d;

	x->exec_done = 1;
	if (qr->q.status < 0 && !x->failed)
		xsend_mark_failed(d, x, qr->q.status);
	/* The buffer reference passes to the transfer (xsend_release_src). */
	x->src_b = sc->b;
	xsend_release_src(x);
	xsend_pump(d, x);
}

void h_send(struct conn *c, struct request *r)
{
	const Pprpc__Send *m = (const Pprpc__Send *)r->msg;
	struct pprpcd *d = c->d;
	struct send_cmd *sc;
	struct xsend *x;
	struct dbuf *b;
	char err[256];
	int rc;

	rc = buffer_region(d, c, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (rc == 0 && m->size == 0) {
		snprintf(err, sizeof(err), "SEND of 0 bytes");
		rc = PPRPC_EINVAL;
	}
	x = rc == 0 ? xsend_find(d, m->transfer_id) : NULL;
	if (rc == 0 && x && (x->have_send || (x->size && x->size != m->size))) {
		snprintf(err, sizeof(err),
			 x->have_send ? "transfer id %" PRIu64 " is already in use"
				      : "transfer %" PRIu64 ": the destination expects another size", m->transfer_id);
		rc = PPRPC_EINVAL;
		/* The waiting destination learns it too, instead of timing out. */
		if (!x->have_send && x->puller) {
			char why[200];

			snprintf(why, sizeof(why), "transfer %" PRIu64 ": the source sends another size (%" PRIu64
				 " bytes, %" PRIu64 " expected)", m->transfer_id, m->size, x->size);
			reply_error(x->puller, MSG_PULL, x->pull_req, PPRPC_EINVAL, why);
			conn_unref(x->puller);
			x->puller = NULL;
			x->failed = 1;
			xsend_maybe_free(d, x);
		}
	}
	if (rc < 0) {
		qreq_refuse(c, r, rc, err);
		return;
	}
	sc = calloc(1, sizeof(*sc));
	if (!x)
		x = sc ? xsend_new(d, m->transfer_id) : NULL;
	if (!sc || !x) {
		free(sc);
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	x->size = m->size;
	x->have_send = 1;
	x->t0_us = now_us();
	snprintf(x->peer, sizeof(x->peer), "%s", m->dst_rank ? m->dst_rank : "");
	if (xsend_layout(d, x) < 0) {
		x->failed = 1;
		x->exec_done = 1;
		free(sc);
		xsend_maybe_free(d, x);
		qreq_refuse(c, r, PPRPC_ENOMEM, "out of memory");
		return;
	}
	sc->x = x;
	sc->b = b;
	sc->offset = m->offset;
	/* Small SENDs are captured at once: the copy costs less than the
	 * hop to the worker that streaming in place or IPC needs when the
	 * PULL comes, and the loop then answers the PULL by itself. */
	sc->in_place = d->opts.send_in_place && device_host_visible(b->dev) && m->size >= DIRECT_SEND_MIN;
	sc->ipc_ok = device_has_ipc(b->dev) && m->size >= DIRECT_SEND_MIN;
	buffer_ref(b);
	sc->qr.release = send_release;
	sc->qr.q.ready = send_ready;
	qreq_push(&sc->qr, c, r, b->dev, send_exec);
}

/* A peer pulls a transfer (possibly before its SEND arrived). */
void h_pull(struct conn *c, struct request *r)
{
	const Pprpc__Pull *m = (const Pprpc__Pull *)r->msg;
	struct pprpcd *d = c->d;
	struct xsend *x = xsend_find(d, m->transfer_id);
	char err[160];

	if (m->size == 0 || (x && x->puller) || (x && x->size != m->size)) {
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": %s", m->transfer_id,
			 m->size == 0 ? "empty" : x->puller ? "already being pulled" : "the source sends another size");
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		/* A SEND nobody can receive must not hold staging slots. */
		if (x && !x->puller && x->have_send) {
			xsend_mark_failed(d, x, PPRPC_EINVAL);
			xsend_maybe_free(d, x);
		}
		return;
	}
	if (!x) {
		x = xsend_new(d, m->transfer_id);
		if (!x) {
			reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
			return;
		}
		x->size = m->size;
	}
	x->puller = c;
	x->pull_req = r->hdr.req_id;
	conn_ref(c);
	pthread_mutex_lock(&d->xfer_lock);
	x->pulling = 1;
	x->ipc_req = m->ipc_host && d->boot_id[0] && !strcmp(m->ipc_host, d->boot_id);
	if (x->ipc_req)
		ipc_peer_note(d, x->peer);
	pthread_mutex_unlock(&d->xfer_lock);
	pprpcd_kick_queues(d);
	xsend_pump(d, x);
}

/* The destination copied an IPC transfer out of our GPU pool (or could
 * not: error).  The slots go back and the PULL ends. */
void h_pull_release(struct conn *c, struct request *r)
{
	const Pprpc__PullRelease *m = (const Pprpc__PullRelease *)r->msg;
	Pprpc__PullChunk close = PPRPC__PULL_CHUNK__INIT;
	struct pprpcd *d = c->d;
	struct xsend *x = xsend_find(d, m->transfer_id);
	char err[160];

	if (!x || x->puller != c || !x->ipc || x->ipc_released) {
		snprintf(err, sizeof(err), "transfer %" PRIu64 ": no CUDA IPC transfer pulled over this link",
			 m->transfer_id);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	reply_ok(c, r->hdr.type, r->hdr.req_id);
	if (!(m->error && *m->error) && m->done < x->size) {
		/* Progress: the slots of the copied prefix take the rest. */
		for (uint32_t i = 0; i < x->nchunks; i++) {
			struct xchunk *ch = &x->chunks[i];

			if (ch->ipc && ch->slot >= 0 && ch->state == CH_SENT && ch->off + ch->len <= m->done) {
				staging_put(x->ipc_dev->ipc_staging, ch->slot);
				ch->slot = -1;
			}
		}
		return;
	}
	/* The destination copied every byte, so it got every announcement;
	 * the write callback of the last one may still be due on this loop
	 * (libuv runs it an iteration later): nwritten catches up, and the
	 * transfer is freed once it has. */
	if ((m->error && *m->error) || x->nsent != x->nchunks) {
		LOG(d, LOG_NOTICE_, "transfer %" PRIu64 " to %s over CUDA IPC failed at the destination: %s", x->id,
		    x->peer, m->error && *m->error ? m->error : "released before every chunk was sent");
		xsend_mark_failed(d, x, PPRPC_EDEVICE);
		xsend_maybe_free(d, x);
		return;
	}
	xsend_put_ipc_slots(x);
	x->ipc_released = 1;
	close.offset = x->size;
	reply_send_part(x->puller, MSG_PULL, x->pull_req, 0, &close.base, NULL, 0, NULL, NULL);
	xsend_maybe_free(d, x);
}

/* ---- destination side --------------------------------------------------------- */

static void xrecv_release_ipc(struct xrecv *xr, const char *error, uint64_t done);

/* Loop: progress releases for RECVs whose workers copied more.  A queued
 * RECV is alive: recv_release takes it off the list before it can go. */
static void ipc_progress_pump(struct pprpcd *d)
{
	for (;;) {
		struct xrecv *xr;
		uint64_t done;

		pthread_mutex_lock(&d->xfer_lock);
		xr = d->ipc_progress;
		if (xr) {
			d->ipc_progress = xr->progress_next;
			xr->progress_queued = 0;
			done = xr->ipc_copied;
		}
		pthread_mutex_unlock(&d->xfer_lock);
		if (!xr)
			return;
		if (done > xr->released_upto && done < xr->size)
			xrecv_release_ipc(xr, NULL, done);
	}
}

/* A rank whose IPC copies failed: later transfers from it use the staging
 * path (said once in the log, with the reason). */
struct ipc_block {
	struct ipc_block *next;
	char rank[64];
};

static int ipc_blocked(struct pprpcd *d, const char *rank)
{
	for (struct ipc_block *b = d->ipc_blocks; b; b = b->next)
		if (!strcmp(b->rank, rank))
			return 1;
	return 0;
}

static void ipc_block(struct pprpcd *d, const char *rank, const char *why)
{
	struct ipc_block *b;

	if (ipc_blocked(d, rank) || !(b = calloc(1, sizeof(*b))))
		return;
	snprintf(b->rank, sizeof(b->rank), "%s", rank);
	b->next = d->ipc_blocks;
	d->ipc_blocks = b;
	LOG(d, LOG_WARN_, "CUDA IPC from %s does not work (%s): its transfers use the staging path from now on",
	    rank, why);
}

static int release_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h, const uint8_t *meta,
			size_t len, void **bulk_dst)
{
	(void)arg, (void)code, (void)errmsg, (void)h, (void)meta, (void)len, (void)bulk_dst;
	return 0;
}

static void release_done(void *arg, const struct frame_hdr *h, int more)
{
	(void)arg, (void)h, (void)more;
}

static void release_fail(void *arg, int code, const char *why)
{
	(void)arg, (void)code, (void)why;
}

/* The source's answer changes nothing here: the RECV is over. */
static const struct preq_ops release_ops = { .meta = release_meta, .done = release_done, .fail = release_fail };

/* Tell the source which of its GPU pool slots may be reused (loop): the
 * copied prefix (done < size: progress), or all of them (final: done =
 * size, or an error). */
static void xrecv_release_ipc(struct xrecv *xr, const char *error, uint64_t done)
{
	Pprpc__PullRelease rel = PPRPC__PULL_RELEASE__INIT;
	char err[160];

	if (xr->release_sent)
		return;
	if (error || done == xr->size)
		xr->release_sent = 1;
	xr->released_upto = done;
	rel.transfer_id = xr->id;
	rel.done = done;
	rel.error = (char *)(error ? error : "");
	if (peer_request(xr->d, xr->peer, MSG_PULL_RELEASE, &rel.base, &release_ops, NULL, err, sizeof(err)) < 0)
		LOG(xr->d, LOG_NOTICE_, "transfer %" PRIu64 ": cannot release the source's GPU staging: %s", xr->id,
		    err);
}

static void xrecv_unref(struct xrecv *xr)
{
	if (--xr->refs > 0)
		return;
	/* Only now: a chunk may still be landing in the region after the
	 * RECV command itself failed or was cancelled. */
	buffer_unref(xr->b);
	free(xr->stage);
	free(xr->ich);
	free(xr);
}

static void xrecv_fail(struct xrecv *xr, int code, const char *why)
{
	struct pprpcd *d = xr->d;

	pthread_mutex_lock(&d->xfer_lock);
	if (!xr->error) {
		xr->error = code;
		snprintf(xr->errmsg, sizeof(xr->errmsg), "%.250s", why);
	}
	pthread_mutex_unlock(&d->xfer_lock);
	pprpcd_kick_queues(d);
}

/* An IPC chunk (bytes in the source's GPU pool; nothing follows on the
 * link) or, after them, the empty chunk at offset = size that ends the
 * PULL.  Only when we asked for IPC, in order, one pool per transfer. */
static int pull_meta_ipc(struct xrecv *xr, const struct frame_hdr *h, const Pprpc__PullChunk *pc)
{
	struct pprpcd *d = xr->d;
	int rc = 0;

	if (!xr->ipc_asked || h->bulk_len || pc->offset != xr->expect_off)
		return PPRPC_EPROTO;
	xr->cur_len = pc->size;
	if (pc->size == 0)
		return pc->offset == xr->size && !pc->ipc_handle.len ? 0 : PPRPC_EPROTO;
	if (pc->ipc_handle.len != DEVICE_IPC_HANDLE || pc->size > xr->size - pc->offset)
		return PPRPC_EPROTO;
	pthread_mutex_lock(&d->xfer_lock);
	if (xr->nich && memcmp(xr->ipc_handle, pc->ipc_handle.data, DEVICE_IPC_HANDLE)) {
		rc = PPRPC_EPROTO;
	} else if (xr->nich == xr->cap_ich) {
		uint32_t cap = xr->cap_ich ? 2 * xr->cap_ich : 8;
		struct ichunk *n = realloc(xr->ich, cap * sizeof(*n));

		if (n) {
			xr->ich = n;
			xr->cap_ich = cap;
		} else {
			rc = PPRPC_ENOMEM;
		}
	}
	if (rc == 0) {
		memcpy(xr->ipc_handle, pc->ipc_handle.data, DEVICE_IPC_HANDLE);
		xr->ipc_pool = pc->ipc_pool_bytes;
		xr->ich[xr->nich].off = pc->offset;
		xr->ich[xr->nich].len = pc->size;
		xr->ich[xr->nich].pool_off = pc->ipc_offset;
		xr->nich++;
	}
	pthread_mutex_unlock(&d->xfer_lock);
	return rc;
}

static int pull_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h,
		     const uint8_t *meta, size_t len, void **bulk_dst)
{
	struct xrecv *xr = arg;
	ProtobufCMessage *m = NULL;
	const Pprpc__PullChunk *pc;

	xr->cur_code = code;
	if (code < 0) {
		char why[200];

		snprintf(why, sizeof(why), "the source refused: %.150s", errmsg);
		xrecv_fail(xr, code, why);
		return 0;
	}
	if (meta_unpack(&pprpc__pull_chunk__descriptor, meta, len, &m) < 0)
		return PPRPC_EPROTO;
	pc = (const Pprpc__PullChunk *)m;
	xr->cur_ipc = pc->ipc_handle.len > 0 || (pc->size == 0 && xr->nich);
	if (xr->cur_ipc) {
		int rc = pull_meta_ipc(xr, h, pc);

		meta_free(m);
		return rc;
	}
	/* Chunks come in order, contiguous, within the transfer. */
	if (pc->offset != xr->expect_off || pc->size != h->bulk_len || pc->size == 0 ||
	    pc->size > xr->size - pc->offset) {
		meta_free(m);
		return PPRPC_EPROTO;
	}
	xr->cur_len = pc->size;
	/* Once the RECV executes, the region is its own: later chunks go
	 * straight there, saving the staging copy. */
	pthread_mutex_lock(&xr->d->xfer_lock);
	if (xr->dst && xr->direct_from == UINT64_MAX)
		xr->direct_from = pc->offset;
	*bulk_dst = (xr->dst ? xr->dst : xr->stage) + pc->offset;
	pthread_mutex_unlock(&xr->d->xfer_lock);
	meta_free(m);
	return 0;
}

static void pull_done(void *arg, const struct frame_hdr *h, int more)
{
	struct xrecv *xr = arg;
	struct pprpcd *d = xr->d;

	(void)h;
	if (xr->cur_code == 0) {
		xr->expect_off += xr->cur_len;
		pthread_mutex_lock(&d->xfer_lock);
		if (xr->cur_ipc)
			xr->ipc_avail = xr->expect_off;
		else
			xr->arrived = xr->expect_off;
		pthread_mutex_unlock(&d->xfer_lock);
		pprpcd_kick_queues(d);
		/* IPC chunks after the RECV ended: nobody will copy them. */
		if (xr->cur_ipc && xr->cur_len && xr->finished)
			xrecv_release_ipc(xr, "the RECV ended before the transfer arrived", 0);
		if (!more && xr->expect_off != xr->size)
			xrecv_fail(xr, PPRPC_EPROTO, "the source ended the transfer early");
	}
	if (!more)
		xrecv_unref(xr);
}

static void pull_fail(void *arg, int code, const char *why)
{
	struct xrecv *xr = arg;
	char msg[256];

	snprintf(msg, sizeof(msg), "link to the source %.63s lost: %.120s", xr->peer, why);
	xrecv_fail(xr, code, msg);
	xrecv_unref(xr);
}

static const struct preq_ops pull_ops = { .meta = pull_meta, .done = pull_done, .fail = pull_fail };

struct recv_cmd {
	struct qreq qr;
	struct xrecv *xr;
	struct dbuf *b;
	uint64_t offset;
	uint64_t copied;        /* worker: bytes in the region so far */
	uint32_t ich_enq;       /* worker: IPC chunks whose copy was started */
	uint64_t enq_bytes;     /* their bytes */
	uint64_t t_first;       /* when the copies not yet waited for began */
	int started;
};

/* Worker, under the queue lock: is there something to do?  The first time
 * always (to claim the region for direct landing), then when new bytes
 * arrived or the transfer ended. */
static int recv_ready(struct qcmd *q)
{
	struct recv_cmd *rc = (struct recv_cmd *)q;
	struct xrecv *xr = rc->xr;
	struct pprpcd *d = rc->qr.c->d;
	int ready;

	if (!rc->started)
		return 1;
	pthread_mutex_lock(&d->xfer_lock);
	ready = xr->arrived > rc->copied || xr->ipc_avail > rc->enq_bytes || xr->error ||
		atomic_load(&d->stopping_workers);
	pthread_mutex_unlock(&d->xfer_lock);
	return ready;
}

/* Worker: copy the IPC chunks announced so far, GPU to GPU, from the
 * source's pool into the region.  A failure fails this RECV with the
 * reason (and the rank's later transfers take the staging path). */
static int recv_copy_ipc(struct recv_cmd *rc, uint8_t *dst)
{
	struct xrecv *xr = rc->xr;
	struct pprpcd *d = rc->qr.c->d;
	struct qcmd *q = &rc->qr.q;
	uint8_t handle[DEVICE_IPC_HANDLE];
	uint64_t pool, pending;
	uint32_t upto;
	char why[200] = "";
	int st = 0;

	pthread_mutex_lock(&d->xfer_lock);
	upto = xr->nich;
	pool = xr->ipc_pool;
	memcpy(handle, xr->ipc_handle, sizeof(handle));
	pthread_mutex_unlock(&d->xfer_lock);
	if (!upto)
		return 0; /* not (yet) an IPC transfer: the bytes come on the link */
	/* Start the copy of every chunk announced so far; they run on the
	 * GPU while more are announced. */
	for (; rc->ich_enq < upto && st == 0; rc->ich_enq++) {
		struct ichunk ch;

		pthread_mutex_lock(&d->xfer_lock);
		ch = xr->ich[rc->ich_enq];
		pthread_mutex_unlock(&d->xfer_lock);
		if (!rc->t_first)
			rc->t_first = now_us();
		st = device_ipc_copy(rc->b->dev, dst + ch.off, handle, ch.pool_off, ch.len, why, sizeof(why));
		rc->enq_bytes += ch.len;
	}
	/* Wait once all are started, or when the copies not yet released
	 * hold half the source's pool (it may be waiting for those slots to
	 * capture the rest: a transfer larger than its pool). */
	pending = rc->enq_bytes - rc->copied;
	if (st == 0 && (!pending || (rc->enq_bytes < xr->size && pending < pool / 2)))
		return 0;
	if (st == 0) {
		uint64_t tw = now_us();

		st = device_ipc_wait(rc->b->dev, why, sizeof(why));
		LOG(d, LOG_DEBUG_, "transfer %" PRIu64 ": IPC copies of %" PRIu64 " bytes: started %" PRIu64
		    " us before the wait, waited %" PRIu64 " us", xr->id, rc->enq_bytes - rc->copied, tw - rc->t_first,
		    now_us() - tw);
	}
	xr->copy_us += now_us() - rc->t_first;
	rc->t_first = 0;
	if (st < 0) {
		pthread_mutex_lock(&d->xfer_lock);
		snprintf(xr->ipc_err, sizeof(xr->ipc_err), "%.199s", why);
		pthread_mutex_unlock(&d->xfer_lock);
		snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 " from %.63s by IPC: %.150s", xr->id,
			 xr->peer, why);
		return st;
	}
	rc->copied = rc->enq_bytes;
	/* Tell the source which slots it may reuse (ipc_progress_pump). */
	if (rc->copied < xr->size) {
		pthread_mutex_lock(&d->xfer_lock);
		xr->ipc_copied = rc->copied;
		if (!xr->progress_queued) {
			xr->progress_queued = 1;
			xr->progress_next = d->ipc_progress;
			d->ipc_progress = xr;
		}
		pthread_mutex_unlock(&d->xfer_lock);
		uv_async_send(&d->xfer_async);
	}
	return 0;
}

/* Worker: copy what arrived into the region, and come back (QCMD_AGAIN)
 * while bytes are still on their way — the device serves other streams
 * meanwhile; this stream's later commands stay behind the RECV. */
static int recv_exec(struct qcmd *q)
{
	struct recv_cmd *rc = (struct recv_cmd *)q;
	struct xrecv *xr = rc->xr;
	struct pprpcd *d = rc->qr.c->d;
	uint8_t *dst = rc->b->ptr + rc->offset;
	uint64_t avail, direct_from;
	int err;

	/* Chunks may land straight in host-addressable memory only; from now
	 * on the region belongs to this RECV (its stream waits behind it). */
	if (!rc->started) {
		rc->started = 1;
		if (device_host_visible(rc->b->dev)) {
			pthread_mutex_lock(&d->xfer_lock);
			xr->dst = dst;
			pthread_mutex_unlock(&d->xfer_lock);
		}
	}
	pthread_mutex_lock(&d->xfer_lock);
	avail = xr->arrived;
	err = xr->error;
	direct_from = xr->direct_from;
	pthread_mutex_unlock(&d->xfer_lock);
	if (err) {
		snprintf(q->err, sizeof(q->err), "RECV of transfer %" PRIu64 " failed: %.200s", xr->id, xr->errmsg);
		return err;
	}
	err = recv_copy_ipc(rc, dst);
	if (err < 0)
		return err;
	if (avail > rc->copied) {
		/* Chunks that arrived before RECV executed wait in the stage. */
		if (rc->copied < direct_from)
			device_upload(rc->b->dev, dst + rc->copied, xr->stage + rc->copied,
				      (avail < direct_from ? avail : direct_from) - rc->copied);
		rc->copied = avail;
	}
	if (rc->copied == xr->size)
		return 0;
	if (atomic_load(&d->stopping_workers)) {
		snprintf(q->err, sizeof(q->err), "RECV cancelled: shutting down");
		return PPRPC_ECANCELED;
	}
	return QCMD_AGAIN;
}

static void recv_release(struct qreq *qr)
{
	struct recv_cmd *rc = (struct recv_cmd *)qr;
	struct xrecv *xr = rc->xr;

	struct pprpcd *d = qr->c->d;
	uint32_t nich;
	char ipc_err[200];

	pthread_mutex_lock(&d->xfer_lock);
	nich = xr->nich;
	snprintf(ipc_err, sizeof(ipc_err), "%s", xr->ipc_err);
	pthread_mutex_unlock(&d->xfer_lock);
	xr->finished = 1;
	pthread_mutex_lock(&d->xfer_lock);
	if (xr->progress_queued) {
		for (struct xrecv **pp = &d->ipc_progress; *pp; pp = &(*pp)->progress_next)
			if (*pp == xr) {
				*pp = xr->progress_next;
				break;
			}
		xr->progress_queued = 0;
	}
	pthread_mutex_unlock(&d->xfer_lock);
	if (nich) {
		const char *why = ipc_err[0] ? ipc_err : qr->q.status < 0 ? "the RECV failed" : NULL;

		xrecv_release_ipc(xr, why, why ? 0 : xr->size);
		if (ipc_err[0])
			ipc_block(d, xr->peer, ipc_err);
	}
	bstat_add(d, xr->peer, "recv", nich ? "ipc" : peer_path(d, xr->peer), xr->size, xr->t0_us, xr->copy_us,
		  qr->q.status < 0);
	buffer_unref(rc->b);
	xrecv_unref(xr);
}

void h_recv(struct conn *c, struct request *r)
{
	const Pprpc__Recv *m = (const Pprpc__Recv *)r->msg;
	Pprpc__Pull pull = PPRPC__PULL__INIT;
	struct pprpcd *d = c->d;
	struct recv_cmd *rc = NULL;
	struct xrecv *xr = NULL;
	struct dbuf *b;
	char err[256];
	int code;

	code = buffer_region(d, c, m->buffer, m->offset, m->size, &b, err, sizeof(err));
	if (code == 0 && (m->size == 0 || !m->src_rank || !*m->src_rank)) {
		snprintf(err, sizeof(err), "RECV needs a size > 0 and a source rank");
		code = PPRPC_EINVAL;
	}
	if (code < 0)
		goto refuse;
	rc = calloc(1, sizeof(*rc));
	xr = calloc(1, sizeof(*xr));
	if (rc && xr)
		xr->stage = malloc(m->size);
	if (!rc || !xr || !xr->stage) {
		snprintf(err, sizeof(err), "cannot stage %" PRIu64 " bytes", m->size);
		code = PPRPC_ENOMEM;
		goto refuse;
	}
	xr->d = d;
	xr->id = m->transfer_id;
	xr->size = m->size;
	xr->direct_from = UINT64_MAX;
	xr->refs = 1;
	xr->t0_us = now_us();
	snprintf(xr->peer, sizeof(xr->peer), "%s", m->src_rank);
	pull.transfer_id = m->transfer_id;
	pull.size = m->size;
	/* GPU to GPU on one host: ask for CUDA IPC (the source decides). */
	if (device_has_ipc(b->dev) && d->boot_id[0] && !ipc_blocked(d, m->src_rank)) {
		pull.ipc_host = d->boot_id;
		xr->ipc_asked = 1;
	}
	xr->refs++; /* the PULL's */
	code = peer_request(d, m->src_rank, MSG_PULL, &pull.base, &pull_ops, xr, err, sizeof(err));
	if (code < 0) {
		xr->refs--;
		goto refuse;
	}
	rc->xr = xr;
	rc->b = b;
	rc->offset = m->offset;
	xr->b = b;
	buffer_ref(b);  /* the command's */
	buffer_ref(b);  /* the transfer's */
	rc->qr.staged = m->size;
	rc->qr.release = recv_release;
	rc->qr.q.ready = recv_ready;
	qreq_push(&rc->qr, c, r, b->dev, recv_exec);
	return;
refuse:
	if (xr) {
		free(xr->stage);
		free(xr);
	}
	free(rc);
	qreq_refuse(c, r, code, err);
}

/* ---- lifecycle ------------------------------------------------------------------- */

/* Processes with the same boot id run on one host (one kernel instance):
 * the precondition for CUDA IPC, which the copy itself then proves. */
static void read_boot_id(struct pprpcd *d)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	d->boot_id[0] = '\0';
	if (!f)
		return;
	if (!fgets(d->boot_id, sizeof(d->boot_id), f))
		d->boot_id[0] = '\0';
	d->boot_id[strcspn(d->boot_id, "\n")] = '\0';
	fclose(f);
}

int xfer_init(struct pprpcd *d)
{
	uint64_t bytes = d->opts.staging_bytes, slot = 4ull << 20;
	int rc;

	while (slot > (64u << 10) && bytes / slot < 16)
		slot /= 2;
	rc = staging_init(&d->staging, bytes, slot);
	if (rc < 0)
		return rc;
	read_boot_id(d);
	/* GPU SENDs that cannot go by IPC capture into this ring: page-locked,
	 * the device-to-host copies run at full speed (~55 GB/s on an H200
	 * against a fraction of that from pageable memory). */
	for (uint32_t i = 0; i < d->ndev && !d->staging_pinned_by; i++)
		if (device_pin_host(d->dev[i], d->staging.mem, d->staging.bytes, 1) == 0) {
			d->staging_pinned_by = d->dev[i];
			LOG(d, LOG_INFO_, "staging ring page-locked for %s copies", d->dev[i]->name);
		}
	pthread_mutex_init(&d->xfer_lock, NULL);
	pthread_cond_init(&d->xfer_cond, NULL);
	uv_async_init(d->loop, &d->xfer_async, on_xfer_async);
	d->xfer_async.data = d;
	d->xfer_ready = 1;
	return 0;
}

void xfer_fini(struct pprpcd *d)
{
	/* Sources nobody pulled before shutdown (the destination never asked,
	 * or its link died first): the device threads are joined, nothing else
	 * can reach them now. */
	while (d->xsends) {
		struct xsend *x = d->xsends;

		d->xsends = x->next;
		if (x->puller)
			conn_unref(x->puller);
		free(x->chunks);
		free(x);
	}
	while (d->bstats) {
		struct bstat *b = d->bstats;

		d->bstats = b->next;
		free(b);
	}
	while (d->ipc_blocks) {
		struct ipc_block *b = d->ipc_blocks;

		d->ipc_blocks = b->next;
		free(b);
	}
	if (!d->xfer_ready)
		return;
	staging_fini(&d->staging);
	pthread_cond_destroy(&d->xfer_cond);
	pthread_mutex_destroy(&d->xfer_lock);
	d->xfer_ready = 0;
}

static void async_closed(uv_handle_t *h)
{
	(void)h;
}

void xfer_stop(struct pprpcd *d)
{
	if (d->xfer_ready == 1) {
		d->xfer_ready = 2; /* memory stays until xfer_fini */
		uv_close((uv_handle_t *)&d->xfer_async, async_closed);
	}
}

void xfer_unpin(struct pprpcd *d)
{
	if (d->staging_pinned_by) {
		device_pin_host(d->staging_pinned_by, d->staging.mem, d->staging.bytes, 0);
		d->staging_pinned_by = NULL;
	}
}

void xfer_wake(struct pprpcd *d)
{
	if (!d->xfer_ready)
		return;
	staging_wake(&d->staging);
	pprpcd_kick_queues(d);
}

/* Has a SEND without a puller waited out the timeout?  Captured: since it
 * arrived (as always).  Still executing: only once it runs and waits for
 * the puller (exec_ms) — a SEND queued behind long work is not late. */
static int xsend_waited(struct pprpcd *d, struct xsend *x, uint64_t now_ms, uint64_t limit)
{
	uint64_t since;

	if (x->exec_done)
		return 1;
	pthread_mutex_lock(&d->xfer_lock);
	since = x->exec_ms;
	pthread_mutex_unlock(&d->xfer_lock);
	return since && now_ms - since >= limit;
}

/* A transfer whose other half never came: a PULL waiting for a SEND, or a
 * captured SEND nobody pulls, fails after the timeout with a reason — it
 * must neither hang its RECV nor hold staging slots for ever. */
void xfer_expire(struct pprpcd *d, uint64_t now_ms)
{
	uint64_t limit = d->opts.xfer_timeout_ms;
	struct xsend *x, *next;
	char msg[160];

	if (!limit)
		return;
	for (x = d->xsends; x; x = next) {
		next = x->next;
		if (now_ms - x->born_ms < limit || x->failed)
			continue;
		if (!x->have_send && x->puller) {
			snprintf(msg, sizeof(msg), "no SEND with transfer id %" PRIu64 " arrived within %" PRIu64 " ms",
				 x->id, limit);
			reply_error(x->puller, MSG_PULL, x->pull_req, PPRPC_ETIMEDOUT, msg);
			conn_unref(x->puller);
			x->puller = NULL;
			xsend_mark_failed(d, x, PPRPC_ETIMEDOUT);
			LOG(d, LOG_NOTICE_, "%s", msg);
			xsend_maybe_free(d, x);
		} else if (x->have_send && !x->puller && xsend_waited(d, x, now_ms, limit)) {
			/* Captured: the slots are freed.  Still waiting to stream
			 * in place: the SEND fails with the reason. */
			LOG(d, LOG_NOTICE_, "transfer %" PRIu64 " to %s was not pulled within %" PRIu64 " ms; dropped",
			    x->id, x->peer, limit);
			xsend_mark_failed(d, x, PPRPC_ETIMEDOUT);
			xsend_maybe_free(d, x);
		}
	}
}

void xfer_conn_closed(struct pprpcd *d, struct conn *c)
{
	struct xsend *x, *next;

	for (x = d->xsends; x; x = next) {
		next = x->next;
		if (x->puller == c) {
			/* The destination went away: nothing more can be delivered. */
			xsend_mark_failed(d, x, PPRPC_ECLOSED);
			conn_unref(c);
			x->puller = NULL;
			xsend_maybe_free(d, x);
		}
	}
}

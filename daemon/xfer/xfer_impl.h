/*
 * daemon/xfer/xfer_impl.h — the transfer part's shell, shared by its files.
 *
 * The state machines (send_sm, recv_sm) decide; the shell runs them on two
 * threads and does the I/O (the wire handlers SEND, RECV, PULL,
 * PULL_CHECK, PULL_RELEASE decode, validate and hand over from
 * handlers/h_xfer.c; replies and connection references go through
 * core/conn_if.h):
 *   source.c    the source: the SEND command on its device worker, the
 *               PULL's replies on the loop;
 *   pull_auth.c who may pull a transfer (the rank its SEND names);
 *   dest.c      the destination: the PULL over the peer link, the RECV
 *               command on its worker, IPC copies and releases;
 *   path_*.c    the data paths (path.h), xdev.c the device calls;
 *   stats.c     per-boundary statistics;
 *   xfer.c      the part's context, wake-ups and lifecycle.
 *
 * Threads.  Handlers, replies, peer callbacks, expiry and statistics run on
 * the loop; send_exec / recv_exec and their ready() on the device workers.
 * They meet in the state machines' shared fields, under xf->lock (never
 * held across I/O or a device call).  Workers tell the loop through
 * xf->async (a chunk was published, IPC copies advanced, a SEND began to
 * wait for an IPC PULL); the loop tells workers with pprpcd_kick_queues.
 */
#ifndef PPRPC_DAEMON_XFER_IMPL_H
#define PPRPC_DAEMON_XFER_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/request/qreq.h"
#include "daemon/pprpcd.h"
#include "daemon/xfer/land.h"
#include "daemon/xfer/recv_sm.h"
#include "daemon/xfer/send_sm.h"
#include "daemon/xfer/transfer.h"
#include "daemon/xfer/xfer.h"
#include "proto/pprpc.pb-c.h"

struct conn;
struct request;
struct dbuf;
struct device;

/* Bytes of the nonce a destination draws for each PULL (proto: Pull.nonce). */
#define XFER_NONCE 16

struct ipc_block;
struct cma_links;
struct xcand;
struct xverified;

struct xfer {
	struct pprpcd *d;
	pthread_mutex_t lock;       /* the state machines' shared fields */
	uv_async_t async;           /* workers -> loop */
	uv_timer_t grace_timer;     /* wakes SENDs whose IPC grace ended */
	struct xfer_table sends;    /* loop: source halves (struct xsend) */
	struct xfer_table recvs;    /* loop: destination halves (struct xrecv) */
	struct xrecv *progress;     /* lock: RECVs whose IPC copies advanced */
	/* lock: destination ranks that pulled by IPC, so a SEND with commands
	 * behind it briefly waits for their PULL (send_sm.h) */
	char ipc_peers[8][64];
	unsigned ipc_peers_next;
	struct ipc_block *blocks;   /* loop: ranks whose IPC copies failed */
	struct cma_links *cma;      /* loop: links whose CMA pool was checked (path_cma.c) */
	struct xverified *verified; /* loop: inbound connections shown to be a rank's (source.c) */
	/* lock: devices whose IPC pool lost slots to a stopped destination:
	 * new SENDs there do not use it (source.c) */
	bool pool_retired[PPRPCD_MAX_DEVICES];
	int handles;                /* loop: uv handles not yet closed */
	struct land_page *land;     /* loop: landing pages, made and opened (land.c) */
	struct xrecv *held;         /* loop: RECVs held on the GPU whose command has not ended (dest.c) */
	/* loop: devices whose streams failed to hold a RECV: theirs wait on the worker */
	bool hold_off[PPRPCD_MAX_DEVICES];
	bool land_warned;           /* loop: said once that no page could be made */
};

/* A landing slot a PULL offered (land.h), kept until the PULL is attached. */
struct xland_offer {
	bool on;
	bool refused;               /* one was offered and is not for us (another host, off, malformed) */
	char page[LAND_NAME_MAX];
	uint32_t slot;
	uint64_t gen;
};

/* The source half of a transfer. */
struct xsend {
	struct xfer_node node;      /* in xf->sends */
	struct send_sm sm;
	struct xfer *xf;
	struct conn *puller;        /* the connection pulling it (reference held) */
	uint64_t pull_req;
	struct xcand *cands;        /* PULLs not yet shown to be the named rank's */
	unsigned ncands;
	uint64_t progress_ms;       /* the puller's last sign of life (loop time) */
	uint64_t frames_seen;       /* frames received on the puller's connection then */
	bool stalled;               /* lock: dropped, the puller showed no life */
	struct device *dev;         /* the SEND's device (its IPC pool) */
	const uint8_t *tensor;      /* the SEND's region (in-place chunks) */
	struct dbuf *src_b;         /* its buffer, held while in-place bytes are on the wire */
	char peer[64];              /* the destination rank the SEND names */
	uint64_t t0_us;
	struct land_ref land;       /* the puller's landing slot, opened (land.h) */
	bool land_refused;          /* one was offered and could not be opened */
};

/* The destination half (one RECV). */
struct xrecv {
	struct xfer_node node;      /* in xf->recvs */
	struct recv_sm sm;
	struct xfer *xf;
	uint8_t *stage;             /* link bytes that arrive before the RECV runs */
	uint8_t *dst;               /* lock: the region, once the RECV claimed it */
	struct dbuf *b;             /* the region's buffer: held while chunks may land */
	int refs;                   /* the PULL + the RECV command (loop) */
	uint8_t nonce[XFER_NONCE];  /* its PULL's: the source checks it with us (PullCheck) */
	bool cma;                   /* IPC here is cross-memory attach (a host-visible region) */
	bool cma_checked;           /* loop: its pool announcement passed xpath_cma_check */
	char peer[64];              /* the source rank */
	uint64_t t0_us;
	uint64_t copy_us;           /* worker: time in IPC copies (read after the RECV) */
	struct land_ref land;       /* the landing slot offered with its PULL, if any */
	bool land_clean;            /* loop: its PULL ended with the source's final answer */
	bool land_refused;          /* loop: the source could not open the page */
	int progress_queued;        /* lock: on xf->progress */
	struct xrecv *progress_next;
	/* Held on the GPU (dest.c: the device's stream waits for the slot's
	 * bell): the loop rings it when the bytes will not come. */
	atomic_bool held;           /* set on the loop; cleared by the worker when the device refused it */
	bool held_listed;           /* loop: on xf->held */
	bool held_by_link;          /* loop: the link's bytes were put in the slot */
	const struct conn *conn;    /* the RECV's connection (compared only) */
	struct xrecv *held_next;    /* loop: xf->held while the command runs */
};

uint64_t xfer_now_us(void);

/* source.c (and, in xfer.h, the entry points of handlers/h_xfer.c) */
void xsrc_fail(struct xsend *x, int status);
void xsrc_maybe_free(struct xsend *x);
void xsrc_discard_if_unasked(struct xsend *x);
/* A confirmed PULL becomes x's puller (c's reference passes to it), or is
 * answered with why it cannot (already pulled, another size). */
void xsrc_attach(struct xsend *x, struct conn *c, uint64_t req, uint64_t size, bool ipc_req,
		 const struct xland_offer *land);
void xsrc_pump_all(struct xfer *xf);
void xsrc_expire(struct xfer *xf, uint64_t now_ms);
void xsrc_conn_closed(struct xfer *xf, struct conn *c);
void xsrc_fini(struct xfer *xf);
/* The earliest IPC grace deadline still ahead (0: none); *ret_due when one
 * has passed and its SEND must be woken. */
uint64_t xsrc_grace_next(struct xfer *xf, uint64_t now_us, bool *ret_due);

/* pull_auth.c: who may pull (candidates wait for the named rank's word) */
#define XAUTH_MAX_CANDIDATES 16     /* per transfer: a flood of PULLs must not grow memory */
void xauth_pull(struct xsend *x, struct conn *c, uint64_t req, const Pprpc__Pull *m);
void xauth_send_arrived(struct xsend *x);
void xauth_refuse_all(struct xsend *x, int code, const char *msg);
void xauth_conn_closed(struct xsend *x, struct conn *c);
void xauth_drop_all(struct xsend *x);
void xauth_forget_conn(struct xfer *xf, struct conn *c);
void xauth_fini(struct xfer *xf);

/* dest.c (and xfer.h's) */
void xdst_progress_pump(struct xfer *xf);
/* c closed (NULL: the daemon stops): its RECVs held on the GPU fail and
 * their bells are rung. */
void xdst_release_held(struct xfer *xf, const struct conn *c);
void xdst_fini(struct xfer *xf);

/* stats.c */
void xstats_add(struct pprpcd *d, const char *peer, const char *dir, const char *link, uint64_t bytes,
		uint64_t t0_us, uint64_t copy_us, int failed);
void xstats_fini(struct pprpcd *d);

#endif

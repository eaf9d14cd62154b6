/*
 * daemon/xfer/recv_sm.h — the destination half of a stage-boundary transfer
 * as a pure state machine (no sockets, threads, clocks or device; the shell
 * dest.c does those, under the transfer lock where both threads meet).
 *
 * The destination's PULL is answered by PullChunk replies, in order and
 * contiguous: either bytes on the link (each lands in the RECV's staging
 * copy, or straight in the region once the RECV runs and the region is
 * host-visible), or IPC announcements (where the chunk is in the source's
 * pool; no bytes follow), which the worker copies out and releases.  The
 * A landing slot offered with the PULL (land.h) is answered by one chunk
 * flagged landed instead (no bulk; the worker may see the slot's bell
 * first and take the bytes from there: recv_sm_land_copied).  The
 * loop feeds replies (recv_sm_on_chunk, recv_sm_on_reply_done) and
 * failures (recv_sm_fail); the worker running the RECV asks
 * recv_sm_ready / recv_sm_step and reports what it did.
 */
#ifndef PPRPC_DAEMON_XFER_RECV_SM_H
#define PPRPC_DAEMON_XFER_RECV_SM_H

#include <stdbool.h>
#include <stdint.h>

#define XR_HANDLE 64            /* bytes of an IPC pool handle (DEVICE_IPC_HANDLE) */

struct xr_ichunk {
	uint64_t off, len, pool_off;
};

struct recv_sm {
	uint64_t id, size;
	bool ipc_asked;         /* the PULL asked for IPC */
	bool land_offered;      /* the PULL offered a landing slot (land.h) */
	/* Loop only. */
	uint64_t expect_off;    /* the next chunk's offset */
	uint64_t cur_len;       /* the reply being read */
	int cur_code;
	bool cur_ipc;
	bool cur_land;
	bool finished;          /* the RECV command completed */
	bool release_sent;      /* the final release went out */
	uint64_t released_upto;
	/* Shared (the transfer lock). */
	uint64_t arrived;       /* bytes on the link so far (a prefix) */
	int error;              /* the first failure */
	char errmsg[256];
	bool dst_claimed;       /* the RECV runs: link bytes land in the region ... */
	uint64_t direct_from;   /* ... from this offset on (UINT64_MAX: not yet) */
	uint8_t handle[XR_HANDLE];  /* the source's pool (one per transfer) */
	uint64_t pool_bytes;
	struct xr_ichunk *ich;  /* IPC announcements */
	uint32_t nich, cap_ich;
	uint64_t ipc_avail;     /* bytes announced by IPC */
	uint64_t ipc_copied;    /* bytes copied (for the progress release) */
	char ipc_err[200];      /* an IPC copy failed (worker) */
	bool land_avail;        /* the source said: landed (the worker may have seen it first) */
	bool land_copied;       /* the worker took the bytes from the slot */
	/* Worker only. */
	bool started;
	uint64_t copied;        /* bytes in the region */
	uint32_t ich_enq;       /* IPC copies started */
	uint64_t enq_bytes;     /* ... their bytes */
};

void recv_sm_init(struct recv_sm *r, uint64_t id, uint64_t size, bool ipc_asked);
void recv_sm_fini(struct recv_sm *r);

/* The first failure wins (loop or worker). */
void recv_sm_fail(struct recv_sm *r, int code, const char *why);

/* A reply's meta, decoded (loop). */
struct xr_chunk_msg {
	uint64_t offset, size;
	const uint8_t *handle;  /* IPC pool handle, NULL/0: bytes on the link */
	uint64_t handle_len;
	uint64_t pool_off, pool_bytes;
	bool landed;            /* the bytes are in the offered landing slot (land.h) */
};
/* Where a reply's bulk lands. */
enum xr_land { XR_LAND_NONE, XR_LAND_STAGE, XR_LAND_DST };
/* An error reply (code < 0, errmsg) fails the transfer; a chunk must be the
 * next one, within the transfer, bytes matching the bulk — or an IPC
 * announcement after asking for IPC, in one pool — else PPRPC_EPROTO (the
 * link's stream cannot be trusted).  PPRPC_ENOMEM too.  *ret_land and
 * *ret_off say where the bulk goes. */
int recv_sm_on_chunk(struct recv_sm *r, int code, const char *errmsg, uint64_t bulk_len,
		     const struct xr_chunk_msg *m, enum xr_land *ret_land, uint64_t *ret_off);
/* The reply is complete (more: others follow). */
enum {
	XR_DONE_RELEASE_LATE = 1,   /* IPC bytes announced after the RECV ended: release them (error) */
	XR_DONE_LAST = 2,           /* no reply follows: drop the PULL's reference */
};
int recv_sm_on_reply_done(struct recv_sm *r, bool more);

/* ---- worker ------------------------------------------------------------------ */

bool recv_sm_ready(const struct recv_sm *r, bool stop);

enum xr_act_kind {
	XR_ACT_FAIL,            /* status (message in errmsg, or cancelled) */
	XR_ACT_DONE,
	XR_ACT_WAIT,
	XR_ACT_IPC_COPY,        /* start copying ichunk index */
	XR_ACT_IPC_WAIT,        /* wait for the copies started */
	XR_ACT_UPLOAD,          /* stage [from, to) into the region */
	XR_ACT_LAND,            /* the source says the bytes are in the landing slot: take them */
};

struct xr_act {
	enum xr_act_kind kind;
	int status;
	bool cancelled;         /* FAIL: shutting down */
	bool claim;             /* first step: land link bytes in the region from now on */
	struct xr_ichunk ich;   /* IPC_COPY */
	uint64_t from, to;      /* UPLOAD: [from, to) is in the stage */
	uint64_t upto;          /* UPLOAD: the region holds this prefix once done */
};

/* dst_visible: the region is host memory (link bytes may land there). */
void recv_sm_step(struct recv_sm *r, bool dst_visible, bool stop, struct xr_act *a);
/* The IPC copy of the chunk step named was started. */
void recv_sm_copy_started(struct recv_sm *r);
/* The copies started are done: returns true when a progress release is
 * due (the source may reuse those slots for the rest). */
bool recv_sm_copies_done(struct recv_sm *r);
/* An IPC copy or its wait failed: the reason (the rank's later transfers
 * skip IPC). */
void recv_sm_copy_failed(struct recv_sm *r, const char *why);
/* The staged bytes step named are in the region (the bytes after them up
 * to a->upto landed there directly). */
void recv_sm_uploaded(struct recv_sm *r, const struct xr_act *a);

/* The worker took the transfer's bytes from the landing slot. */
void recv_sm_land_copied(struct recv_sm *r);

/* ---- loop: releases --------------------------------------------------------------- */

/* Should a PullRelease(done, error?) go out?  Updates the bookkeeping. */
bool recv_sm_release_due(struct recv_sm *r, bool error, uint64_t done);
/* A progress release for what the worker copied, or 0. */
uint64_t recv_sm_progress(const struct recv_sm *r);

#endif

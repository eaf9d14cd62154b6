/*
 * daemon/xfer/send_sm.h — the source half of a stage-boundary transfer as a
 * pure state machine: events in, actions out.  No sockets, no threads, no
 * clocks (time is passed in), no device: the shell (source.c) owns those,
 * takes the transfer lock around every call that touches fields the other
 * thread reads, and carries out the actions.  Unit-tested without a daemon
 * in tests/unit/test_xfer_core.c.
 *
 * Who feeds what:
 *  - the loop: the SEND arrived (send_sm_on_send), a PULL asked
 *    (send_sm_check_pull / send_sm_on_pull), a chunk was handed to the link
 *    (send_sm_next_wire) or written (send_sm_on_written), the destination
 *    released IPC slots (send_sm_on_release), the transfer failed
 *    (send_sm_fail), expiry (send_sm_expired);
 *  - the worker running the SEND command: send_sm_ready (can it progress?)
 *    and send_sm_step (what next?), then send_sm_published once a chunk's
 *    bytes are in place.
 *
 * The SEND's mode is decided in exactly one place, send_sm_step, on the
 * worker: from the facts the loop published (a PULL is attached, it asked
 * for IPC) and what the worker knows (a later command of the stream is
 * queued, the IPC pool exists).  Modes:
 *  - capture: each chunk is copied into a host staging slot (safe from later
 *    commands at once; the stream moves on);
 *  - in place: the SEND is last in its stream and the destination pulls, so
 *    chunks stream from the tensor itself, at most XS_INPLACE_WINDOW on the
 *    wire; a later command switches the rest to capture, and the SEND ends
 *    once its in-place chunks are written;
 *  - ipc: the destination is on this host and asked for IPC: chunks are
 *    copied into the device's IPC pool, the destination copies them out and
 *    releases the slots;
 *  - land: the destination offered a slot of its landing page (land.h),
 *    the transfer fits it: one chunk, copied there; first when possible.
 * Until the destination pulls, a SEND that could go in place or by IPC and
 * has nothing behind it waits (to learn which).  One that has commands
 * behind it captures at once — except towards a rank known to pull by IPC,
 * where it waits up to XS_IPC_GRACE_US for the PULL (the wait is a deadline
 * the shell turns into a wake-up, never a spin).
 */
#ifndef PPRPC_DAEMON_XFER_SEND_SM_H
#define PPRPC_DAEMON_XFER_SEND_SM_H

#include <stdbool.h>
#include <stdint.h>

/* In-place chunks published and not yet written: the wait for them is all
 * that stands between a newly queued command and the tensor (two keep a
 * loopback socket busy while one is written). */
#define XS_INPLACE_WINDOW 2
/* Below this a SEND is always captured: the copy costs less than the hop
 * to the worker that streaming in place or IPC needs when the PULL comes.
 * The default of the direct-min setting (options.c).  Measured on an H100,
 * two ggml:CUDA0 ranks, a decoded token's 16 KiB boundary: captured and
 * sent by TCP 110-125 us from SEND to RECV done, by IPC (direct-min 0)
 * 282-302 us (doc/llama-vs-rpc.md). */
#define XS_DIRECT_MIN (256u << 10)
/* How long a SEND with commands behind it waits for the PULL of a rank
 * known to pull by IPC before it captures into host staging (the PULL is
 * usually a few hundred microseconds away: the destination's RECV raced the
 * SEND; the staging path is 10 to 40 times slower than the IPC pool). */
#define XS_IPC_GRACE_US 3000

enum xs_mode { XS_UNDECIDED, XS_CAPTURE, XS_IN_PLACE, XS_IPC, XS_LAND };

/* Where a published chunk's bytes are. */
enum xs_where { XS_NOWHERE, XS_STAGED, XS_INPLACE, XS_POOL, XS_LANDED };

enum xs_cstate {
	XS_EMPTY,      /* not published */
	XS_PUBLISHED,  /* bytes in place, not yet handed to the link */
	XS_ON_WIRE,    /* handed to the link, write not completed */
	XS_WRITTEN,    /* the link's write completed (or failed) */
};

struct xs_chunk {
	uint64_t off, len;
	int32_t slot;      /* slot in the host ring or the IPC pool, -1 none */
	uint8_t where;     /* enum xs_where */
	uint8_t state;     /* enum xs_cstate */
};

struct send_sm {
	uint64_t id;
	uint64_t size;          /* from the SEND, or from an early PULL */
	struct xs_chunk *chunks;
	uint32_t nchunks;
	/* Facts the loop writes (the worker reads them under the lock). */
	bool have_send;         /* the SEND arrived (else an early PULL made it) */
	bool exec_done;         /* the SEND command completed */
	bool pulling;           /* a puller is attached */
	bool ipc_req;           /* the puller is on this host and wants IPC */
	uint64_t land_max;      /* the puller offered a landing slot we opened, of this many
				 * bytes (land.h; 0: none) */
	bool failed;            /* nothing more goes out; the SEND stops waiting */
	int status;             /* the first failure's code (0: unknown) */
	bool ipc_released;      /* the destination released every IPC slot */
	/* Set with the SEND. */
	bool in_place_ok;       /* may stream from the tensor (host-visible, enabled) */
	bool ipc_ok;            /* may go by IPC (the device has it) */
	/* The worker writes, under the lock. */
	uint8_t mode;           /* enum xs_mode */
	uint32_t next;          /* next chunk to publish */
	uint32_t npublished;
	uint32_t inplace_open;  /* in-place chunks published, not yet written */
	bool ipc;               /* the chunks are IPC pool slots */
	uint64_t exec_ms;       /* when the queue reached it (0: not yet) */
	uint64_t grace_until_us;  /* waiting for an IPC PULL until then (0: not) */
	/* Loop only. */
	uint32_t nsent;         /* chunks handed to the link */
	uint32_t nwritten;      /* ... whose write succeeded */
	uint32_t writes_inflight;
	uint32_t inplace_wire;  /* in-place chunks handed to the link, not written */
	uint64_t born_ms;       /* for expiry */
};

void send_sm_init(struct send_sm *s, uint64_t id, uint64_t born_ms);
void send_sm_fini(struct send_sm *s);

/* The SEND arrived (loop).  0 with the chunks laid out in slot_size pieces;
 * PPRPC_EINVAL when the id is taken (*ret_in_use set) or an early PULL
 * named another size; PPRPC_ENOMEM.  Nothing changes on failure. */
int send_sm_on_send(struct send_sm *s, uint64_t size, uint64_t slot_size, bool in_place_ok, bool ipc_ok,
		    bool *ret_in_use);

/* May a PULL of size attach?  s may be NULL (no such transfer yet). */
enum xs_pull_check { XS_PULL_OK, XS_PULL_EMPTY, XS_PULL_BUSY, XS_PULL_SIZE };
enum xs_pull_check send_sm_check_pull(const struct send_sm *s, uint64_t size);
/* A PULL attached (loop, after XS_PULL_OK; size taken when no SEND yet);
 * land_max: it offered a landing slot of that many bytes, opened here
 * (0: none). */
void send_sm_on_pull(struct send_sm *s, uint64_t size, bool ipc_req, uint64_t land_max);

/* The transfer failed: nothing more goes out, a waiting SEND gives up.
 * status 0 keeps an earlier status (a write failed: its reason is the
 * link's). */
void send_sm_fail(struct send_sm *s, int status);

/* ---- worker ------------------------------------------------------------------ */

struct xs_env {
	bool behind;            /* a later command of the SEND's stream is queued */
	bool stop;              /* the stream is cancelled or the workers stop */
	bool peer_ipc;          /* the destination rank pulled by IPC before */
	int pool;               /* the device's IPC pool: 0 not made, 1 ready, -1 unusable */
	uint64_t pool_slot;     /* its slot size, when ready */
	bool room_host;         /* a host staging slot is free */
	bool room_pool;         /* an IPC pool slot is free */
	uint64_t now_us;
};

enum xs_act_kind {
	XS_ACT_FAIL,            /* the SEND fails with status (reason: why) */
	XS_ACT_DONE,            /* every chunk published and the in-place ones written */
	XS_ACT_WAIT,            /* nothing to do until a fact changes (a PULL, a written
				 * in-place chunk, a free slot) */
	XS_ACT_WAIT_UNTIL,      /* the same, or until deadline_us (IPC grace) */
	XS_ACT_MAKE_POOL,       /* make the device's IPC pool, then step again */
	XS_ACT_IN_PLACE,        /* publish chunk as is, from the tensor */
	XS_ACT_CAPTURE,         /* copy chunk into a slot (pool: the IPC pool, else host staging) */
	XS_ACT_LAND,            /* copy the whole transfer into the puller's landing slot */
};

enum xs_why { XS_WHY_NONE, XS_WHY_CANCELLED, XS_WHY_FAILED };

struct xs_act {
	enum xs_act_kind kind;
	uint32_t chunk;
	bool pool;              /* CAPTURE: into the IPC pool */
	bool chose_ipc;         /* the step decided the IPC mode (remember the rank) */
	int status;             /* FAIL */
	enum xs_why why;
	uint64_t deadline_us;   /* WAIT_UNTIL */
};

/* Can send_sm_step make progress?  Under the queue lock, as its ready().
 * The first call with !behind records when the queue reached the SEND
 * (exec_ms): from then on a missing puller counts towards expiry. */
bool send_sm_ready(struct send_sm *s, const struct xs_env *e);
/* What the worker does next (decides the mode on first need). */
void send_sm_step(struct send_sm *s, const struct xs_env *e, struct xs_act *a);
/* Chunk i's bytes are in place (where, slot): the loop may send it. */
void send_sm_published(struct send_sm *s, uint32_t i, enum xs_where where, int32_t slot);

/* ---- loop: the link ------------------------------------------------------------ */

/* The next published chunk to hand to the puller's link, or -1.  Marks it on
 * the wire; *ret_more: other replies follow (IPC replies always: the close
 * comes after the release). */
int send_sm_next_wire(struct send_sm *s, bool *ret_more);
/* Would send_sm_next_wire give a chunk? */
bool send_sm_next_wire_due(const struct send_sm *s);

/* What the shell must do once chunk i's write completed. */
struct xs_written {
	int32_t put_slot;       /* host staging slot to give back, -1 none */
	bool inplace_freed;     /* an in-place chunk left the window: kick the worker */
};
void send_sm_on_written(struct send_sm *s, uint32_t i, int status, struct xs_written *out);

/* Slots go back through this (where: XS_STAGED or XS_POOL). */
typedef void (*xs_put_fn)(void *arg, enum xs_where where, int32_t slot);

/* May the destination release IPC slots of this transfer (puller checked by
 * the shell)? */
bool send_sm_releasable(const struct send_sm *s);
/* PULL_RELEASE: progress (done < size, no error) gives back the slots of the
 * written prefix; the final one gives back all, or fails the transfer. */
enum xs_release { XS_REL_PROGRESS, XS_REL_DONE, XS_REL_FAILED };
enum xs_release send_sm_on_release(struct send_sm *s, uint64_t done, bool error, xs_put_fn put, void *arg);

/* The destination stopped (its link is being dropped) and may still read
 * the IPC slots it was told of: those never go back to the pool (returns
 * how many); slots of chunks it was not told of do, with send_sm_put_all. */
uint32_t send_sm_forget_announced(struct send_sm *s);

/* Is the transfer waiting on its puller (bytes on the wire, or IPC slots
 * announced and not released)?  Then the puller must show life. */
bool send_sm_waits_on_puller(const struct send_sm *s);

/* Every chunk written (and by IPC: released). */
bool send_sm_finished(const struct send_sm *s);
/* Nothing can touch it any more: the SEND command finished (or never came),
 * no write is in flight, and it finished or failed. */
bool send_sm_can_free(const struct send_sm *s);
/* Before freeing: the slots it still holds (IPC slots, captured chunks
 * never handed to the link). */
void send_sm_put_all(struct send_sm *s, xs_put_fn put, void *arg);

/* Expiry (loop tick): has the other half not come within limit ms?
 * XS_NO_SEND: a PULL waited for a SEND that never came (asked: PULLs wait
 * that are not attached yet — they are checked once the SEND names its
 * rank); XS_NOT_PULLED: a SEND nobody pulled (captured: since it arrived;
 * still executing: since the queue reached it — a SEND queued behind long
 * work is not late). */
enum xs_expiry { XS_KEEP, XS_NO_SEND, XS_NOT_PULLED };
enum xs_expiry send_sm_expired(const struct send_sm *s, uint64_t now_ms, uint64_t limit_ms, bool asked);

#endif

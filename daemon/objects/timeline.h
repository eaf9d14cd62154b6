/*
 * daemon/objects/timeline.h — timelines: monotonic 64-bit counters owned by a
 * device queue, and the waits on them.
 *
 * A value lives in a tl_cell guarded by the daemon's timeline lock: it is
 * changed by a SIGNAL completing on any device, a notification from a peer
 * for a remote timeline, a cancellation or shutdown, and each change kicks
 * every queue (a WAIT held by its queue re-checks, timeline_cell_ready) and
 * releases the WAITs held on devices (timeline_gpu_wait_*).  Waiters on the
 * loop side (host waits, peers' subscriptions) are kept per timeline and
 * checked after every SIGNAL completes.
 */
#ifndef PPRPC_DAEMON_TIMELINE_H
#define PPRPC_DAEMON_TIMELINE_H

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

struct pprpcd;
struct owner;
struct device;
struct stream;

struct tl_cell {
	uint64_t value;
	int error;            /* a wait on this cell fails with it (destroyed, peer lost) */
	char why[160];        /* and this reason, when known */
};

struct tl_waiter;

struct timeline {
	uint64_t handle;      /* 0 once destroyed */
	struct device *dev;
	struct owner *owner;
	struct tl_cell cell;
	uint64_t sig_hi;      /* highest value a SIGNAL was accepted for (tl_lock):
			       * SIGNALs still on a device stream count */
	/* host-mapped slot the device writes SIGNALs to (devices that hold
	 * waits; made on the loop at the first SIGNAL, freed with the timeline) */
	volatile uint64_t *gpu_value;
	int refs;             /* the handle + queued commands + waiters */
	struct tl_waiter *waiters;
	struct timeline *next, *prev;  /* owner's list */
};

/* Loop-side waiter: cb(arg, status, value) once the timeline reaches value,
 * or fails (status < 0: destroyed, timed out by the caller). */
typedef void (*tl_wait_cb)(void *arg, int status, uint64_t value);

void timeline_sys_init(struct pprpcd *d);
void timeline_sys_fini(struct pprpcd *d);

int timeline_create(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t initial,
		    struct timeline **ret_t);
/* The timeline behind a live handle, whoever owns it: callers check who
 * may use it (h_timeline.c: the owner; a peer link's SUBSCRIBE). */
struct timeline *timeline_get(struct pprpcd *d, uint64_t handle);
void timeline_retire(struct pprpcd *d, struct timeline *t);
void timeline_ref(struct timeline *t);
void timeline_unref(struct timeline *t);
uint64_t timeline_value(struct pprpcd *d, const struct tl_cell *cell);

/* A SIGNAL, in two steps as the device runs it from its stream: begin checks
 * and reserves value (worker), end publishes it once the device passed the
 * write (any thread; wakes queues and device waits, not loop waiters). */
int timeline_signal_begin(struct pprpcd *d, struct timeline *t, uint64_t value, char *err, size_t errlen);
void timeline_signal_end(struct pprpcd *d, struct timeline *t, uint64_t value);

/*
 * A WAIT resolved on the device: the device stream waits until *slot (host
 * memory the device reads) becomes non-zero, and no thread blocks.  The
 * slot is private to the wait, so one wait can be released alone (its
 * connection closed) without touching other waiters of the cell.  It is set
 * when the cell reaches value, fails, the stream is cancelled or the daemon
 * stops; end() then says which.
 */
struct tl_gpu_wait {
	struct tl_gpu_wait *next;
	const struct tl_cell *cell;
	uint64_t value;
	const struct stream *s;
	volatile uint64_t *slot;
	int registered;
};

/* Worker: 1 when it is decided already (the device need not wait), 0 when
 * registered (*slot is 0 until released). */
int timeline_gpu_wait_begin(struct pprpcd *d, struct tl_gpu_wait *w);
/* Once the device passed the wait (any thread): unregister; 0 when the
 * value was reached, else the cell's error or PPRPC_ECANCELED, with a
 * reason. */
int timeline_gpu_wait_end(struct pprpcd *d, struct tl_gpu_wait *w, char *err, size_t errlen);
/* Can a WAIT for value proceed (reached, failed, or shutting down)?  The
 * queue's ready() for a WAIT on a device that does not hold waits; it then
 * ends through timeline_gpu_wait_end without ever being registered. */
int timeline_cell_ready(struct pprpcd *d, const struct tl_cell *cell, uint64_t value);
/* Something every wait depends on changed (cancel, shutdown, a remote value):
 * release the device-held waits now decided and kick every queue. */
void timeline_wake_all(struct pprpcd *d);
/* Update a cell from the loop (remote mirrors) and wake waiters; why (may
 * be NULL) explains an error. */
void timeline_cell_set(struct pprpcd *d, struct tl_cell *cell, uint64_t value, int error);
void timeline_cell_fail(struct pprpcd *d, struct tl_cell *cell, int error, const char *why);

/* Loop side: run loop waiters whose value was reached (after a SIGNAL). */
void timeline_notify(struct pprpcd *d, struct timeline *t);
/* Register a loop waiter; runs cb at once if already reached.  Returns a
 * token for timeline_cancel_waiter, or NULL when cb already ran / OOM (then
 * cb ran with PPRPC_ENOMEM). */
struct tl_waiter *timeline_add_waiter(struct pprpcd *d, struct timeline *t, uint64_t value,
				      tl_wait_cb cb, void *arg);
/* Remove a waiter that has not fired; cb runs with status. */
void timeline_cancel_waiter(struct timeline *t, struct tl_waiter *w, int status);

#endif

/*
 * daemon/timeline.h — timelines: monotonic 64-bit counters owned by a
 * device queue, and the waits on them.
 *
 * A value lives in a tl_cell guarded by the daemon's timeline lock, so that
 * a worker blocked in WAIT can sleep on one condition variable for every
 * kind of progress: a SIGNAL run by any device worker, a notification from
 * a peer for a remote timeline, a cancellation or shutdown.  Waiters on the
 * loop side (host waits, peers' subscriptions) are kept per timeline and
 * checked after every SIGNAL completes.
 */
#ifndef PPRPC_DAEMON_TIMELINE_H
#define PPRPC_DAEMON_TIMELINE_H

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

struct pprpcd;
struct conn;
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
	struct conn *owner;
	struct tl_cell cell;
	int refs;             /* the handle + queued commands + waiters */
	struct tl_waiter *waiters;
	struct timeline *next, *prev;  /* owner's list */
};

/* Loop-side waiter: cb(arg, status, value) once the timeline reaches value,
 * or fails (status < 0: destroyed, timed out by the caller). */
typedef void (*tl_wait_cb)(void *arg, int status, uint64_t value);

void timeline_sys_init(struct pprpcd *d);
void timeline_sys_fini(struct pprpcd *d);

int timeline_create(struct pprpcd *d, struct conn *c, struct device *dev, uint64_t initial,
		    struct timeline **ret_t);
/* Any connection may wait on or query a timeline (peers name it by handle);
 * only its owner may signal or destroy it. */
struct timeline *timeline_get(struct pprpcd *d, uint64_t handle);
void timeline_retire(struct pprpcd *d, struct timeline *t);
void timeline_ref(struct timeline *t);
void timeline_unref(struct timeline *t);
uint64_t timeline_value(struct pprpcd *d, const struct tl_cell *cell);

/* Worker side.  SIGNAL: value must exceed the current one. */
int timeline_signal(struct pprpcd *d, struct timeline *t, uint64_t value, char *err, size_t errlen);
/* Can a WAIT for value proceed (reached, failed, or shutting down)? */
int timeline_cell_ready(struct pprpcd *d, const struct tl_cell *cell, uint64_t value);
/* The WAIT itself, once ready: 0 when cell >= value, else the cell's error
 * (or PPRPC_ECANCELED at shutdown), with a reason. */
int timeline_wait_cell(struct pprpcd *d, const struct tl_cell *cell, uint64_t value,
		       const struct stream *s, char *err, size_t errlen);
/* Wake every blocked worker (cancel, shutdown, a remote value changed). */
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

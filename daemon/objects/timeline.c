/* daemon/objects/timeline.c — see timeline.h. */
#include "daemon/objects/timeline.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/device/device.h"
#include "daemon/objects/owner.h"
#include "daemon/pprpcd.h"
#include "daemon/exec/stream.h"
#include "pprpc/types.h"

struct tl_waiter {
	struct tl_waiter *next;
	uint64_t value;
	tl_wait_cb cb;
	void *arg;
};

/* Under tl_lock: set the slot of every device wait that is decided (its
 * value reached, its cell failed, its stream cancelled, or stopping).  The
 * list is short (one entry per WAIT held on a device stream). */
static void gpu_waits_release(struct pprpcd *d)
{
	int stopping = atomic_load(&d->stopping_workers);

	for (struct tl_gpu_wait **pp = &d->gpu_waits; *pp;) {
		struct tl_gpu_wait *w = *pp;

		if (w->cell->value >= w->value || w->cell->error || stopping ||
		    (w->s && atomic_load(&w->s->canceled))) {
			*pp = w->next;
			w->registered = 0;
			__atomic_store_n(w->slot, 1, __ATOMIC_RELEASE);
		} else {
			pp = &w->next;
		}
	}
}

/* A closed connection's streams are cancelled: WAITs they hold on a device
 * are released and the queues re-check what they hold. */
static void on_conn_close(struct pprpcd *d, struct conn *c)
{
	(void)c;
	timeline_wake_all(d);
}

void timeline_sys_init(struct pprpcd *d)
{
	pthread_mutex_init(&d->tl_lock, NULL);
	pthread_cond_init(&d->tl_cond, NULL);
	htab_init(&d->timelines, HK_TIMELINE, d->opts.max_timelines);
	/* The first hook: at most PPRPCD_MAX_CONN_HOOKS parts register one. */
	(void)pprpcd_on_conn_close(d, on_conn_close);
}

void timeline_sys_fini(struct pprpcd *d)
{
	htab_fini(&d->timelines);
	pthread_cond_destroy(&d->tl_cond);
	pthread_mutex_destroy(&d->tl_lock);
}

int timeline_create(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t initial,
		    struct timeline **ret_t)
{
	struct timeline *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return PPRPC_ENOMEM;
	t->dev = dev;
	t->owner = o;
	t->cell.value = initial;
	t->sig_hi = initial;
	t->refs = 1;
	rc = htab_insert(&d->timelines, t, &t->handle);
	if (rc < 0) {
		free(t);
		return rc;
	}
	owner_add_timeline(o, t);
	*ret_t = t;
	return 0;
}

struct timeline *timeline_get(struct pprpcd *d, uint64_t handle)
{
	return htab_get(&d->timelines, handle);
}

void timeline_ref(struct timeline *t)
{
	t->refs++;
}

void timeline_unref(struct timeline *t)
{
	if (--t->refs)
		return;
	device_slot_free(t->dev, t->gpu_value);
	free(t);
}

uint64_t timeline_value(struct pprpcd *d, const struct tl_cell *cell)
{
	uint64_t v;

	pthread_mutex_lock(&d->tl_lock);
	v = cell->value;
	pthread_mutex_unlock(&d->tl_lock);
	return v;
}

void timeline_cell_set(struct pprpcd *d, struct tl_cell *cell, uint64_t value, int error)
{
	pthread_mutex_lock(&d->tl_lock);
	if (value > cell->value)
		cell->value = value;
	if (error && !cell->error)
		cell->error = error;
	gpu_waits_release(d);
	pthread_mutex_unlock(&d->tl_lock);
	pprpcd_kick_queues(d);
}

void timeline_cell_fail(struct pprpcd *d, struct tl_cell *cell, int error, const char *why)
{
	pthread_mutex_lock(&d->tl_lock);
	if (!cell->error) {
		cell->error = error;
		snprintf(cell->why, sizeof(cell->why), "%s", why ? why : "");
	}
	gpu_waits_release(d);
	pthread_mutex_unlock(&d->tl_lock);
	pprpcd_kick_queues(d);
}

void timeline_retire(struct pprpcd *d, struct timeline *t)
{
	if (!t->handle)
		return;
	htab_remove(&d->timelines, t->handle);
	t->handle = 0;
	owner_remove_timeline(t->owner, t);
	t->owner = NULL;
	/* Whoever still waits learns that it never will be reached. */
	timeline_cell_set(d, &t->cell, 0, PPRPC_ECANCELED);
	while (t->waiters)
		timeline_cancel_waiter(t, t->waiters, PPRPC_ECANCELED);
	timeline_unref(t);
}

int timeline_signal_begin(struct pprpcd *d, struct timeline *t, uint64_t value, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&d->tl_lock);
	if (t->cell.error) {
		rc = t->cell.error;
		snprintf(err, errlen, "timeline was destroyed");
	} else if (value <= t->sig_hi) {
		rc = PPRPC_EINVAL;
		snprintf(err, errlen, "SIGNAL value %" PRIu64 " does not exceed the timeline's value %" PRIu64,
			 value, t->sig_hi);
	} else {
		t->sig_hi = value;
	}
	pthread_mutex_unlock(&d->tl_lock);
	return rc;
}

void timeline_signal_end(struct pprpcd *d, struct timeline *t, uint64_t value)
{
	pthread_mutex_lock(&d->tl_lock);
	if (value > t->cell.value)
		t->cell.value = value;
	gpu_waits_release(d);
	pthread_mutex_unlock(&d->tl_lock);
	/* WAITs on this value may be ready now, on any device's queue. */
	pprpcd_kick_queues(d);
}

int timeline_cell_ready(struct pprpcd *d, const struct tl_cell *cell, uint64_t value)
{
	int ready;

	pthread_mutex_lock(&d->tl_lock);
	ready = cell->value >= value || cell->error || atomic_load(&d->stopping_workers);
	pthread_mutex_unlock(&d->tl_lock);
	return ready;
}

/* Under tl_lock: how a wait for value on cell ends, once decided. */
static int wait_result(struct pprpcd *d, const struct tl_cell *cell, uint64_t value, char *err, size_t errlen)
{
	int rc;

	(void)d;
	if (cell->value >= value)
		return 0;
	if (!cell->error) {
		snprintf(err, errlen, "WAIT cancelled");
		return PPRPC_ECANCELED;
	}
	rc = cell->error;
	snprintf(err, errlen, "WAIT for value %" PRIu64 " failed: %s%s%.150s", value,
		 rc == PPRPC_ECANCELED || rc == PPRPC_EHANDLE ? "the timeline does not exist (destroyed or never created)"
		 : rc == PPRPC_ECONN ? "its rank is unreachable or went away"
		 : rc == PPRPC_EAUTH ? "authentication failed on the link to its rank (another key, or none?)"
				     : "its rank refused the subscription",
		 cell->why[0] ? ": " : "", cell->why);
	return rc;
}

int timeline_gpu_wait_begin(struct pprpcd *d, struct tl_gpu_wait *w)
{
	int decided;

	*w->slot = 0;
	pthread_mutex_lock(&d->tl_lock);
	decided = w->cell->value >= w->value || w->cell->error || atomic_load(&d->stopping_workers) ||
		  (w->s && atomic_load(&w->s->canceled));
	if (!decided) {
		w->next = d->gpu_waits;
		d->gpu_waits = w;
		w->registered = 1;
	}
	pthread_mutex_unlock(&d->tl_lock);
	return decided;
}

int timeline_gpu_wait_end(struct pprpcd *d, struct tl_gpu_wait *w, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&d->tl_lock);
	if (w->registered) {
		/* The device passed it without a release (it failed): unlink. */
		for (struct tl_gpu_wait **pp = &d->gpu_waits; *pp; pp = &(*pp)->next)
			if (*pp == w) {
				*pp = w->next;
				break;
			}
		w->registered = 0;
	}
	rc = wait_result(d, w->cell, w->value, err, errlen);
	pthread_mutex_unlock(&d->tl_lock);
	return rc;
}

void timeline_wake_all(struct pprpcd *d)
{
	/* Device waits of a cancelled stream, or all of them when stopping. */
	pthread_mutex_lock(&d->tl_lock);
	gpu_waits_release(d);
	pthread_mutex_unlock(&d->tl_lock);
	pprpcd_kick_queues(d);
}

void timeline_notify(struct pprpcd *d, struct timeline *t)
{
	uint64_t v = timeline_value(d, &t->cell);
	struct tl_waiter **pp = &t->waiters;

	timeline_ref(t);
	while (*pp) {
		struct tl_waiter *w = *pp;

		if (w->value <= v) {
			*pp = w->next;
			w->cb(w->arg, 0, v);
			free(w);
			timeline_unref(t);
		} else {
			pp = &w->next;
		}
	}
	timeline_unref(t);
}

struct tl_waiter *timeline_add_waiter(struct pprpcd *d, struct timeline *t, uint64_t value,
				      tl_wait_cb cb, void *arg)
{
	uint64_t v = timeline_value(d, &t->cell);
	struct tl_waiter *w;

	if (v >= value) {
		cb(arg, 0, v);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		cb(arg, PPRPC_ENOMEM, v);
		return NULL;
	}
	w->value = value;
	w->cb = cb;
	w->arg = arg;
	w->next = t->waiters;
	t->waiters = w;
	timeline_ref(t);
	return w;
}

void timeline_cancel_waiter(struct timeline *t, struct tl_waiter *w, int status)
{
	struct tl_waiter **pp;

	for (pp = &t->waiters; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			w->cb(w->arg, status, 0);
			free(w);
			timeline_unref(t);
			return;
		}
	}
}

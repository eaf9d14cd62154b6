/*
 * ggml-pprpc/events.c — ggml events as pprpc timelines.
 *
 * An event is a timeline on its device's queue and the value of its last
 * record.  record queues SIGNAL(value + 1); wait queues WAIT(timeline,
 * value) on the waiting backend's queue — on another rank the daemon
 * subscribes to the owner over its peer link, and a CUDA rank holds the
 * stream on the GPU, so nothing blocks in this process.  synchronize
 * returns when the rank has *completed* the work before the record (not
 * merely received it): HOST_WAIT until the timeline reaches the value.
 *
 * A failed command makes its queue skip what follows, SIGNALs included, so a
 * HOST_WAIT alone could wait for a value that never comes.  It therefore
 * waits in slices; after a slice without the value it FENCEs the queue,
 * which returns once everything before (the record included) completed, or
 * reports the failure at once.
 */
#include <stdlib.h>

#include "pg.h"

#define HOST_WAIT_SLICE_MS 1000

static struct pg_device *dev_of(ggml_backend_dev_t dev)
{
	return dev->context;
}

ggml_backend_event_t pg_event_new(ggml_backend_dev_t dev)
{
	struct pg_device *d = dev_of(dev);
	struct pg_rank *r = d->rank;
	struct pg_event *e = calloc(1, sizeof(*e));
	ggml_backend_event_t ev = calloc(1, sizeof(*ev));
	int rc;

	if (!e || !ev)
		pg_fatal(r, d->name, "TIMELINE_CREATE", "out of memory");
	e->dev = d;
	pg_lock(r);
	pg_check_alive(r, d->name, "TIMELINE_CREATE");
	rc = pprpc_timeline_create(r->c, d->index, 0, &e->tl);
	if (rc < 0)
		pg_fatal_rc(r, d->name, "TIMELINE_CREATE", pg_rank_failed(r, rc));
	pg_unlock(r);
	ev->device = dev;
	ev->context = e;
	return ev;
}

void pg_event_free(ggml_backend_dev_t dev, ggml_backend_event_t ev)
{
	struct pg_event *e = ev->context;
	struct pg_rank *r = e->dev->rank;
	int rc;

	(void)dev;
	/* Never throws (ggml frees events from destructors).  The daemon keeps
	 * a timeline alive while queued commands use it. */
	pg_lock(r);
	rc = 0;
	if (!r->dead && !pg_fault_failed(r->fault) && (rc = pprpc_timeline_destroy(r->c, e->tl)) < 0)
		pg_rank_failed(r, rc);
	pg_unlock(r);
	if (rc < 0 && !r->dead)
		pg_fault_raise(r->fault, "rank %d %s (%s) device %s: TIMELINE_DESTROY: %s", r->index, r->name, r->addr,
			       e->dev->name, pprpc_last_error(r->c));
	free(e);
	free(ev);
}

void pg_device_sync(struct pg_device *d, const char *why)
{
	struct pg_rank *r = d->rank;
	uint64_t upto;
	int rc;

	pg_lock(r);
	pg_check_alive(r, d->name, why);
	/* Nothing issued since the last FENCE: done.  Writes alone: also
	 * done, without moving `fenced` (the next FENCE covers them and
	 * reports their failure before any output computed behind them is
	 * read).  Their bytes left with the call and every later command of
	 * the device, a copy to another rank included (a SEND on this queue),
	 * runs after them; no host memory waits on them.  ggml's scheduler
	 * synchronizes a backend before each input it copies when it has no
	 * events (one device): a round trip per input per token otherwise. */
	if ((d->submitted == d->fenced || d->submitted - d->fenced == d->writes - d->writes_fenced) &&
	    !pprpc_async_error_peek(r->c)) {
		d->st.fences_skipped += d->submitted != d->fenced;
		pg_unlock(r);
		return;
	}
	upto = d->submitted;
	d->st.fences++;
	rc = pprpc_synchronize(r->c, d->index);
	if (rc < 0)
		pg_fatal_rc(r, d->name, why, pg_rank_failed(r, rc));
	d->fenced = upto;
	d->writes_fenced = d->writes;
	pg_unlock(r);
}

void pg_event_synchronize(ggml_backend_dev_t dev, ggml_backend_event_t ev)
{
	struct pg_event *e = ev->context;
	struct pg_device *d = e->dev;
	struct pg_rank *r = d->rank;
	int rc;

	(void)dev;
	if (e->value == 0 || e->done == e->value)
		return; /* never recorded, or this record was already seen complete
			 * (ggml synchronizes one event once per input it copies) */
	pg_lock(r);
	pg_check_alive(r, d->name, "event_synchronize (HOST_WAIT)");
	if (e->seq <= d->fenced) {
		/* a FENCE after the record already saw it complete (a HOST_WAIT
		 * alone proves less: on a GPU the SIGNAL may be written after an
		 * earlier command failed, so only FENCEs advance d->fenced) */
		pg_unlock(r);
		return;
	}
	d->st.host_waits++;
	rc = pprpc_timeline_host_wait(r->c, e->tl, e->value, HOST_WAIT_SLICE_MS);
	if (rc == 0 && pprpc_async_error_peek(r->c)) {
		/* an async GET before the record failed: its bytes are not there */
		char msg[256];

		rc = pprpc_async_error_take(r->c, msg, sizeof(msg));
		pg_fatal(r, d->name, "TENSOR_GET", "%s (%s)", msg, pprpc_strerror(rc));
	}
	if (rc == PPRPC_ETIMEDOUT && pprpc_connection_state(r->c) == PPRPC_CONN_OPEN) {
		d->st.host_wait_fences++;
		pg_unlock(r);
		pg_device_sync(d, "event_synchronize (FENCE)");
		return;
	}
	if (rc < 0)
		pg_fatal_rc(r, d->name, "event_synchronize (HOST_WAIT)", pg_rank_failed(r, rc));
	e->done = e->value;
	pg_unlock(r);
}

void pg_event_record(ggml_backend_t backend, ggml_backend_event_t ev)
{
	struct pg_event *e = ev->context;
	struct pg_backend *be = pg_backend_of(backend);
	struct pg_rank *r = e->dev->rank;
	int rc;

	/* A timeline belongs to one device queue: only that queue signals it. */
	if (!be || be->dev != e->dev)
		pg_fatal(r, e->dev->name, "event_record", "event of %s recorded on backend %s", e->dev->name,
			 ggml_backend_name(backend));
	pg_lock(r);
	pg_check_alive(r, e->dev->name, "event_record (SIGNAL)");
	rc = pprpc_signal(r->c, e->tl, e->value + 1);
	if (rc < 0)
		pg_fatal_rc(r, e->dev->name, "event_record (SIGNAL)", pg_rank_failed(r, rc));
	e->value++;
	e->seq = ++e->dev->submitted;
	pg_unlock(r);
}

void pg_event_wait(ggml_backend_t backend, ggml_backend_event_t ev)
{
	struct pg_event *e = ev->context;
	struct pg_backend *be = pg_backend_of(backend);
	struct pg_device *d;
	struct pg_rank *r;
	int rc;

	if (!be)
		pg_fatal(e->dev->rank, e->dev->name, "event_wait", "backend %s is not a pprpc backend",
			 ggml_backend_name(backend));
	if (e->value == 0)
		return;
	d = be->dev;
	r = d->rank;
	pg_lock(r);
	pg_check_alive(r, d->name, "event_wait (WAIT)");
	/* a timeline of another rank is named by that rank's address */
	rc = pprpc_wait(r->c, d->index, e->dev->rank == r ? NULL : e->dev->rank->addr, e->tl, e->value);
	d->submitted++;
	if (rc < 0)
		pg_fatal_rc(r, d->name, "event_wait (WAIT)", pg_rank_failed(r, rc));
	pg_unlock(r);
}

/* daemon/xfer/xfer.c — the transfer part's context, wake-ups and lifecycle
 * (see xfer.h, and xfer_impl.h for how the files divide the work). */
#include "daemon/xfer/xfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/core/staging.h"
#include "daemon/xfer/path.h"
#include "daemon/xfer/xdev.h"
#include "daemon/xfer/xfer_impl.h"
#include "pprpc/types.h"

uint64_t xfer_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* SENDs waiting for the PULL of a rank that pulls by IPC wait until a
 * deadline (send_sm.h): the PULL's arrival kicks the queues, and this
 * timer kicks them when the first deadline passes, so the worker neither
 * spins nor sleeps past it.  Loop thread. */
static void on_grace(uv_timer_t *t);

static void grace_check(struct xfer *xf)
{
	uint64_t now = xfer_now_us(), next;
	bool due;

	next = xsrc_grace_next(xf, now, &due);
	if (due)
		pprpcd_kick_queues(xf->d);
	if (xf->d->xfer_ready != 1)
		return;
	if (!next) {
		uv_timer_stop(&xf->grace_timer);
		return;
	}
	/* Timers count whole milliseconds from the loop's cached time: a
	 * deadline still ahead when this fires is simply armed again. */
	uv_update_time(xf->d->loop);
	uv_timer_start(&xf->grace_timer, on_grace, (next - now + 999) / 1000, 0);
}

static void on_grace(uv_timer_t *t)
{
	grace_check(t->data);
}

/* Workers: chunks published, IPC copies advanced, a grace began. */
static void on_async(uv_async_t *a)
{
	struct xfer *xf = a->data;

	xdst_progress_pump(xf);
	xsrc_pump_all(xf);
	grace_check(xf);
}

/* Processes with the same boot id run on one host (one kernel instance):
 * the precondition for IPC, which the copy itself then proves. */
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

static void on_conn_close(struct pprpcd *d, struct conn *c);

int xfer_init(struct pprpcd *d)
{
	uint64_t bytes = d->opts.staging_bytes, slot = 4ull << 20;
	struct xfer *xf;
	int rc;

	while (slot > (64u << 10) && bytes / slot < 16)
		slot /= 2;
	rc = pprpcd_on_conn_close(d, on_conn_close);
	if (rc < 0)
		return rc;
	xf = calloc(1, sizeof(*xf));
	if (!xf)
		return PPRPC_ENOMEM;
	rc = staging_init(&d->staging, bytes, slot);
	if (rc < 0) {
		free(xf);
		return rc;
	}
	read_boot_id(d);
	land_sweep();
	/* GPU SENDs that cannot go by IPC capture into this ring: page-locked,
	 * the device-to-host copies run at full speed (~55 GB/s on an H200
	 * against a fraction of that from pageable memory). */
	for (uint32_t i = 0; i < d->ndev && !d->staging_pinned_by; i++)
		if (xdev_pin_host(d->dev[i], d->staging.mem, d->staging.bytes, 1) == 0) {
			d->staging_pinned_by = d->dev[i];
			LOG(d, LOG_INFO_, "staging ring page-locked for %s copies", xdev_name(d->dev[i]));
		}
	xf->d = d;
	pthread_mutex_init(&xf->lock, NULL);
	uv_async_init(d->loop, &xf->async, on_async);
	xf->async.data = xf;
	uv_timer_init(d->loop, &xf->grace_timer);
	xf->grace_timer.data = xf;
	d->xfer = xf;
	d->xfer_ready = 1;
	return 0;
}

void xfer_fini(struct pprpcd *d)
{
	struct xfer *xf = d->xfer;

	xstats_fini(d);
	if (!xf)
		return;
	xsrc_fini(xf);
	xdst_fini(xf);
	land_fini(xf);
	xpath_cma_fini(xf);
	if (d->xfer_ready)
		staging_fini(&d->staging);
	pthread_mutex_destroy(&xf->lock);
	free(xf);
	d->xfer = NULL;
	d->xfer_ready = 0;
}

static void handle_closed(uv_handle_t *h)
{
	(void)h;
}

void xfer_stop(struct pprpcd *d)
{
	if (d->xfer_ready == 1) {
		d->xfer_ready = 2; /* memory stays until xfer_fini */
		uv_close((uv_handle_t *)&d->xfer->async, handle_closed);
		uv_close((uv_handle_t *)&d->xfer->grace_timer, handle_closed);
	}
}

void xfer_unpin(struct pprpcd *d)
{
	if (d->xfer)
		land_unpin(d->xfer);
	if (d->staging_pinned_by) {
		xdev_pin_host(d->staging_pinned_by, d->staging.mem, d->staging.bytes, 0);
		d->staging_pinned_by = NULL;
	}
}

void xfer_wake(struct pprpcd *d)
{
	if (!d->xfer_ready)
		return;
	pprpcd_kick_queues(d);
}

void xfer_expire(struct pprpcd *d, uint64_t now_ms)
{
	if (d->xfer)
		xsrc_expire(d->xfer, now_ms);
}

/* A closed connection's transfers: its PULLs answered, the sources it
 * served or pulled released (xsrc_conn_closed); waiters re-check. */
static void on_conn_close(struct pprpcd *d, struct conn *c)
{
	xfer_wake(d);
	if (d->xfer) {
		xdst_release_held(d->xfer, c);
		xsrc_conn_closed(d->xfer, c);
	}
}

void xfer_release_held(struct pprpcd *d)
{
	if (d->xfer)
		xdst_release_held(d->xfer, NULL);
}

size_t xfer_live_sources(const struct pprpcd *d)
{
	return d->xfer ? d->xfer->sends.count : 0;
}

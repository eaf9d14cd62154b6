/*
 * daemon/server.c — daemon start-up, the loop, and shutdown.
 *
 * Start order matters for whoever waits on us (tests, systemd later): the
 * devices are initialised first, then the socket listens, then the port file
 * is written — so a port file on disk means "ready to serve".
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/device.h"
#include "daemon/pprpcd.h"
#include "daemon/peer.h"
#include "daemon/timeline.h"
#include "daemon/xfer.h"
#include "pprpc_types.h"
#include "transport/addr.h"
#include "transport/tcp_uv.h"

struct device *pprpcd_device(struct pprpcd *d, uint32_t index)
{
	return index < d->ndev ? d->dev[index] : NULL;
}

static void on_accept(void *ctx, struct transport_conn *t)
{
	conn_accept(ctx, t);
}

static int open_devices(struct pprpcd *d)
{
	char list[sizeof(d->opts.devices)], *save = NULL, *tok;
	char err[256];
	int rc;

	memcpy(list, d->opts.devices, sizeof(list));
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (d->ndev == PPRPCD_MAX_DEVICES) {
			LOG(d, LOG_ERR_, "too many devices (max %d)", PPRPCD_MAX_DEVICES);
			return PPRPC_ELIMIT;
		}
		rc = device_open(d->loop, tok, d->ndev, d->opts.memory_floor, d->opts.threads,
				 &d->dev[d->ndev], err, sizeof(err));
		if (rc < 0) {
			LOG(d, LOG_ERR_, "device '%s': %s", tok, err);
			return rc;
		}
		LOG(d, LOG_INFO_, "device %u: %s (%s)", d->ndev, d->dev[d->ndev]->name, d->dev[d->ndev]->desc);
		d->ndev++;
	}
	if (d->ndev == 0) {
		LOG(d, LOG_ERR_, "no devices configured");
		return PPRPC_EINVAL;
	}
	return 0;
}

/* Written to a temporary name and renamed, so a reader never sees a
 * partial number. */
static int write_port_file(struct pprpcd *d)
{
	char tmp[sizeof(d->opts.port_file) + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->opts.port_file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", d->port) < 0 || fclose(f) != 0 || rename(tmp, d->opts.port_file) != 0) {
		LOG(d, LOG_ERR_, "cannot write port file %s", d->opts.port_file);
		return PPRPC_EIO;
	}
	return 0;
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct pprpcd *d = s->data;

	LOG(d, LOG_NOTICE_, "signal %d: shutting down", signum);
	pprpcd_stop(d);
}

int pprpcd_start(struct pprpcd *d)
{
	char host[256], err[256];
	uint16_t port;
	int rc;

	log_setup(&d->log, d->opts.log_level);
	uv_signal_init(d->loop, &d->sig_term);
	uv_signal_init(d->loop, &d->sig_int);
	d->sig_term.data = d->sig_int.data = d;
	uv_signal_start(&d->sig_term, on_signal, SIGTERM);
	uv_signal_start(&d->sig_int, on_signal, SIGINT);
	d->start_ms = uv_now(d->loop);
	htab_init(&d->buffers, HK_BUFFER, d->opts.max_buffers);
	htab_init(&d->graphs, HK_GRAPH, d->opts.max_graphs);
	timeline_sys_init(d);
	if (addr_split(d->opts.listen, host, sizeof(host), &port, 50052) < 0) {
		LOG(d, LOG_ERR_, "--listen: cannot parse '%s' (expected HOST:PORT)", d->opts.listen);
		return PPRPC_EINVAL;
	}
	rc = open_devices(d);
	if (rc < 0)
		return rc;
	rc = xfer_init(d);
	if (rc < 0) {
		LOG(d, LOG_ERR_, "cannot set up a %" PRIu64 " MiB staging ring", d->opts.staging_bytes >> 20);
		return rc;
	}
	rc = tcp_listen(d->loop, host, port, on_accept, d, &d->listener, &d->port, err, sizeof(err));
	if (rc < 0) {
		LOG(d, LOG_ERR_, "%s", err);
		return rc;
	}
	if (d->opts.port_file[0] && (rc = write_port_file(d)) < 0)
		return rc;
	LOG(d, LOG_NOTICE_, "pprpcd %s listening on %s:%u with %u device(s)", PPRPCD_VERSION, host,
	    d->port, d->ndev);
	return 0;
}

int pprpcd_run(struct pprpcd *d)
{
	return uv_run(d->loop, UV_RUN_DEFAULT) < 0 ? PPRPC_EINTERNAL : 0;
}

/* Devices go last: connections' buffers and graphs hold device memory, and
 * a device's queue handle keeps the loop alive until it is closed. */
static void release_devices(struct pprpcd *d)
{
	/* Workers blocked in WAIT must see the stop before being joined. */
	atomic_store(&d->stopping_workers, 1);
	timeline_wake_all(d);
	xfer_wake(d);
	for (uint32_t i = 0; i < d->ndev; i++) {
		device_close(d->dev[i]);
		d->dev[i] = NULL;
	}
	xfer_stop(d);
}

void pprpcd_conn_gone(struct pprpcd *d)
{
	if (d->stopping && !d->conns)
		release_devices(d);
}

/* Stop accepting, close every connection (their queued commands complete
 * and drop their replies), then let the loop run dry. */
void pprpcd_stop(struct pprpcd *d)
{
	struct conn *c, *next;

	if (d->stopping)
		return;
	d->stopping = 1;
	tcp_listener_close(d->listener);
	d->listener = NULL;
	for (c = d->conns; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	peer_close_all(d);
	uv_signal_stop(&d->sig_term);
	uv_signal_stop(&d->sig_int);
	uv_close((uv_handle_t *)&d->sig_term, NULL);
	uv_close((uv_handle_t *)&d->sig_int, NULL);
	pprpcd_conn_gone(d);
}

void pprpcd_fini(struct pprpcd *d)
{
	release_devices(d);
	htab_fini(&d->buffers);
	htab_fini(&d->graphs);
	timeline_sys_fini(d);
	xfer_fini(d);
}

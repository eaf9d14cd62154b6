/* daemon/h_stats.c — STATS: devices, connections, counters. */
#include <stdlib.h>

#include "daemon/conn.h"
#include "daemon/device.h"
#include "daemon/devinfo.h"
#include "daemon/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/queue.h"
#include "daemon/reply.h"
#include "pprpc_types.h"

static uint64_t now_ms(uv_loop_t *loop)
{
	return uv_now(loop);
}

void h_stats(struct conn *c, struct request *r)
{
	struct pprpcd *d = c->d;
	Pprpc__StatsReply rep = PPRPC__STATS_REPLY__INIT;
	Pprpc__DeviceStats ds[PPRPCD_MAX_DEVICES], *dsp[PPRPCD_MAX_DEVICES];
	Pprpc__ConnStats *cs = NULL, **csp = NULL;
	struct devinfo_set set;
	size_t nconn = 0, i = 0;
	struct conn *it;

	devinfo_fill(d, &set);
	for (unsigned k = 0; k < d->ndev; k++) {
		struct device *dev = d->dev[k];

		pprpc__device_stats__init(&ds[k]);
		ds[k].info = &set.info[k];
		ds[k].buffers = dev->nbuffers;
		ds[k].allocated_bytes = dev->allocated;
		ds[k].queue_depth = queue_depth(dev->q);
		ds[k].commands = dev->commands;
		ds[k].errors = dev->errors;
		ds[k].graph_creates = dev->graph_creates;
		ds[k].graph_runs = dev->graph_runs;
		dsp[k] = &ds[k];
	}
	for (it = d->conns; it; it = it->next)
		nconn++;
	cs = calloc(nconn ? nconn : 1, sizeof(*cs));
	csp = calloc(nconn ? nconn : 1, sizeof(*csp));
	if (!cs || !csp) {
		free(cs);
		free(csp);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	for (it = d->conns; it; it = it->next, i++) {
		const struct transport_stats *ts = transport_stats(it->t);

		pprpc__conn_stats__init(&cs[i]);
		cs[i].peer = it->name;
		cs[i].transport = (char *)transport_name(it->t);
		cs[i].role = it->role ? "peer" : "client";
		cs[i].bytes_in = ts->bytes_in;
		cs[i].bytes_out = ts->bytes_out;
		cs[i].frames_in = ts->frames_in;
		cs[i].frames_out = ts->frames_out;
		cs[i].errors = it->errors;
		cs[i].buffers = it->nbuffers;
		cs[i].allocated_bytes = it->allocated;
		csp[i] = &cs[i];
	}
	rep.daemon_version = PPRPCD_VERSION;
	rep.uptime_ms = now_ms(d->loop) - d->start_ms;
	rep.n_devices = d->ndev;
	rep.devices = dsp;
	rep.n_connections = nconn;
	rep.connections = csp;
	rep.connections_total = d->stats.connections_total;
	rep.protocol_errors = d->stats.protocol_errors;
	rep.requests = d->stats.requests;
	rep.request_errors = d->stats.request_errors;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
	free(cs);
	free(csp);
}

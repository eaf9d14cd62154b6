/* libclient/stats.c — STATS. */
#include <stdio.h>
#include <stdlib.h>

#include "libclient/client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static void dev_from_wire(pprpc_device_info *o, const Pprpc__DeviceInfo *di)
{
	if (!di)
		return;
	o->index = di->index;
	snprintf(o->name, sizeof(o->name), "%s", di->name ? di->name : "");
	snprintf(o->kind, sizeof(o->kind), "%s", di->kind ? di->kind : "");
	snprintf(o->description, sizeof(o->description), "%s", di->description ? di->description : "");
	o->total_bytes = di->total_bytes;
	o->free_bytes = di->free_bytes;
	o->floor_bytes = di->floor_bytes;
}

#define STR(dst, src) snprintf((dst), sizeof(dst), "%s", (src) ? (src) : "")

static void conn_from_wire(pprpc_conn_stats *o, const Pprpc__ConnStats *k)
{
	STR(o->peer, k->peer);
	STR(o->transport, k->transport);
	STR(o->role, k->role);
	o->bytes_in = k->bytes_in;
	o->bytes_out = k->bytes_out;
	o->frames_in = k->frames_in;
	o->frames_out = k->frames_out;
	o->errors = k->errors;
	o->buffers = k->buffers;
	o->allocated_bytes = k->allocated_bytes;
	STR(o->rdma_device, k->rdma_device);
	o->gid_index = k->gid_index;
	o->mtu = k->mtu;
	o->rdma_chunk = k->rdma_chunk;
	o->rdma_tx_depth = k->rdma_tx_depth;
	o->rdma_rx_depth = k->rdma_rx_depth;
	STR(o->memlock_step, k->memlock_step);
	STR(o->memlock_why, k->memlock_why);
	STR(o->fallback_reason, k->fallback_reason);
	STR(o->rdma_bulk, k->rdma_bulk);
	o->bulk_bytes_in = k->bulk_bytes_in;
	o->bulk_bytes_out = k->bulk_bytes_out;
}

PPRPC_API int pprpc_stats_get(pprpc_client *c, pprpc_stats **out)
{
	Pprpc__Stats req = PPRPC__STATS__INIT;
	ProtobufCMessage *m = NULL;
	const Pprpc__StatsReply *r;
	pprpc_stats *s;
	int rc;

	rc = rpc_call(c, MSG_STATS, &req.base, NULL, 0, &pprpc__stats_reply__descriptor, &m, NULL, 0);
	if (rc < 0)
		return rc;
	r = (const Pprpc__StatsReply *)m;
	s = calloc(1, sizeof(*s));
	if (s) {
		s->devices = calloc(r->n_devices ? r->n_devices : 1, sizeof(*s->devices));
		s->connections = calloc(r->n_connections ? r->n_connections : 1, sizeof(*s->connections));
		s->boundaries = calloc(r->n_boundaries ? r->n_boundaries : 1, sizeof(*s->boundaries));
		s->links = calloc(r->n_links ? r->n_links : 1, sizeof(*s->links));
	}
	if (!s || !s->devices || !s->connections || !s->boundaries || !s->links) {
		pprpc_stats_free(s);
		meta_free(m);
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	}
	snprintf(s->daemon_version, sizeof(s->daemon_version), "%s", r->daemon_version ? r->daemon_version : "");
	s->uptime_ms = r->uptime_ms;
	s->ndevices = (uint32_t)r->n_devices;
	for (size_t i = 0; i < r->n_devices; i++) {
		const Pprpc__DeviceStats *d = r->devices[i];
		pprpc_device_stats *o = &s->devices[i];

		dev_from_wire(&o->info, d->info);
		o->buffers = d->buffers;
		o->allocated_bytes = d->allocated_bytes;
		o->queue_depth = d->queue_depth;
		o->commands = d->commands;
		o->errors = d->errors;
		o->graph_creates = d->graph_creates;
		o->graph_runs = d->graph_runs;
		o->graph_captures = d->graph_captures;
		o->graph_replays = d->graph_replays;
		o->ipc_pool_bytes = d->ipc_pool_bytes;
		snprintf(o->ipc_status, sizeof(o->ipc_status), "%s", d->ipc_status ? d->ipc_status : "");
		o->gpu_waits = d->gpu_waits;
		o->gpu_signals = d->gpu_signals;
		snprintf(o->async_status, sizeof(o->async_status), "%s", d->async_status ? d->async_status : "");
	}
	s->nconnections = (uint32_t)r->n_connections;
	for (size_t i = 0; i < r->n_connections; i++) {
		conn_from_wire(&s->connections[i], r->connections[i]);
	}
	s->nlinks = (uint32_t)r->n_links;
	for (size_t i = 0; i < r->n_links; i++)
		conn_from_wire(&s->links[i], r->links[i]);
	snprintf(s->rdma_status, sizeof(s->rdma_status), "%s", r->rdma_status ? r->rdma_status : "");
	s->nboundaries = (uint32_t)r->n_boundaries;
	for (size_t i = 0; i < r->n_boundaries; i++) {
		const Pprpc__BoundaryStats *b = r->boundaries[i];
		pprpc_boundary_stats *o = &s->boundaries[i];

		snprintf(o->peer, sizeof(o->peer), "%s", b->peer ? b->peer : "");
		snprintf(o->direction, sizeof(o->direction), "%s", b->direction ? b->direction : "");
		snprintf(o->path, sizeof(o->path), "%s", b->path ? b->path : "");
		o->transfers = b->transfers;
		o->bytes = b->bytes;
		o->time_us = b->time_us;
		o->errors = b->errors;
		o->copy_us = b->copy_us;
		o->ipc_bytes = b->ipc_bytes;
	}
	s->staging_bytes = r->staging_bytes;
	s->staging_used = r->staging_used;
	s->connections_total = r->connections_total;
	s->protocol_errors = r->protocol_errors;
	s->requests = r->requests;
	s->request_errors = r->request_errors;
	meta_free(m);
	*out = s;
	return 0;
}

PPRPC_API void pprpc_stats_free(pprpc_stats *s)
{
	if (!s)
		return;
	free(s->devices);
	free(s->connections);
	free(s->boundaries);
	free(s->links);
	free(s);
}

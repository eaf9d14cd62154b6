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
	}
	if (!s || !s->devices || !s->connections || !s->boundaries) {
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
	}
	s->nconnections = (uint32_t)r->n_connections;
	for (size_t i = 0; i < r->n_connections; i++) {
		const Pprpc__ConnStats *k = r->connections[i];
		pprpc_conn_stats *o = &s->connections[i];

		snprintf(o->peer, sizeof(o->peer), "%s", k->peer ? k->peer : "");
		snprintf(o->transport, sizeof(o->transport), "%s", k->transport ? k->transport : "");
		snprintf(o->role, sizeof(o->role), "%s", k->role ? k->role : "");
		o->bytes_in = k->bytes_in;
		o->bytes_out = k->bytes_out;
		o->frames_in = k->frames_in;
		o->frames_out = k->frames_out;
		o->errors = k->errors;
		o->buffers = k->buffers;
		o->allocated_bytes = k->allocated_bytes;
	}
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
	free(s);
}

/* daemon/handlers/h_stats.c — STATS: devices, connections, counters. */
#include <stdlib.h>

#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/device/devinfo.h"
#include "daemon/peer/peer.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/exec/queue.h"
#include "daemon/server/reply.h"
#include "daemon/core/staging.h"
#include "daemon/xfer/xfer.h"
#include "daemon/weights/weights.h"
#include "pprpc/types.h"
#include "proto/msgtype.h"

static uint64_t now_ms(uv_loop_t *loop)
{
	return uv_now(loop);
}

/* Transport facts of one connection; strings point into *ti. */
static void fill_transport(Pprpc__ConnStats *cs, struct transport_conn *t, struct transport_info *ti)
{
	const struct transport_stats *ts = transport_stats(t);

	transport_get_info(t, ti);
	cs->transport = ti->kind;
	cs->bytes_in = ts->bytes_in;
	cs->bytes_out = ts->bytes_out;
	cs->frames_in = ts->frames_in;
	cs->frames_out = ts->frames_out;
	cs->rdma_device = ti->device;
	cs->gid_index = ti->gid_index;
	cs->mtu = ti->mtu;
	cs->rdma_chunk = ti->chunk;
	cs->rdma_tx_depth = ti->tx_depth;
	cs->rdma_rx_depth = ti->rx_depth;
	cs->memlock_step = ti->ladder;
	cs->memlock_why = ti->ladder_why;
	cs->fallback_reason = ti->fallback;
	cs->rdma_bulk = ti->bulk;
	cs->bulk_bytes_in = ts->bulk_bytes_in;
	cs->bulk_bytes_out = ts->bulk_bytes_out;
}

/* A device's IPC boundary state: its worker makes the pool on first use
 * and publishes ipc_state last (release), so a ready state has its pool. */
static void ipc_status(const struct device *dev, char *buf, size_t len, uint64_t *pool_bytes)
{
	int st = __atomic_load_n(&dev->ipc_state, __ATOMIC_ACQUIRE);

	*pool_bytes = 0;
	if (!device_has_ipc(dev))
		snprintf(buf, len, "%s", "");
	else if (st == 0)
		snprintf(buf, len, "not used yet");
	else if (st > 0) {
		snprintf(buf, len, "ready");
		*pool_bytes = dev->ipc_staging->bytes;
	} else
		snprintf(buf, len, "off: %.180s", dev->ipc_why);
}

/* Which kernels ran GATED_DELTA_NET (the kernels and the ggml engine add
 * with relaxed atomics on the worker). */
static void gdn_stats_fill(struct device *dev, Pprpc__DeviceStats *ds, struct device_gdn_report *rep)
{
	struct kern_gdn_stats gs;

	kern_gdn_stats_read(&dev->gdn_stats, &gs);
	ds->gdn_serial = gs.serial;
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		ds->gdn_chunked += gs.chunked[i];
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		ds->gdn_fallback += gs.fallback[i];
	/* an engine with a kernel of its own (ggml): which nodes it ran */
	if (device_gdn_report(dev, rep) < 0)
		return;
	ds->gdn_ggml_off = rep->other_kernel[DEVICE_GDN_GGML_OFF];
	ds->gdn_ggml_auto = rep->other_kernel[DEVICE_GDN_GGML_AUTO];
	ds->gdn_ggml_shape = rep->other_kernel[DEVICE_GDN_GGML_SHAPE];
	ds->gdn_ggml_gate = rep->other_kernel[DEVICE_GDN_GGML_GATE];
	ds->gdn_ggml_nomem = rep->other_kernel[DEVICE_GDN_GGML_NOMEM];
	ds->gdn_native = rep->setting;
}

/* Each device's exec time per command type that ran, in ex (room for
 * every device and type); returns how many. */
/* What the rank read from its model files and its weights cache. */
static void weights_fill(struct pprpcd *d, Pprpc__WeightsStats *ws)
{
	struct wsrc_stats st;

	wsrc_stats_get(d->weights, &st);
	pprpc__weights_stats__init(ws);
	ws->model_dir = d->opts.model_dir;
	ws->cache_dir = d->opts.weights_cache;
	ws->file_reads = st.file_reads;
	ws->file_bytes = st.file_bytes;
	ws->file_ns = st.file_ns;
	ws->file_refused = st.file_refused;
	ws->cache_hits = st.cache_hits;
	ws->cache_hit_bytes = st.cache_hit_bytes;
	ws->cache_ns = st.cache_ns;
	ws->cache_misses = st.cache_misses;
	ws->cache_bad = st.cache_bad;
	ws->cache_stores = st.cache_stores;
	ws->cache_store_bytes = st.cache_store_bytes;
	ws->cache_evictions = st.cache_evictions;
	ws->cache_bytes = st.cache_bytes;
	ws->cache_entries = st.cache_entries;
	ws->hash_bytes = st.hash_bytes;
	ws->hash_ns = st.hash_ns;
	ws->fills = d->stats.fills;
	ws->fills_failed = d->stats.fills_failed;
	ws->maps = st.maps;
	ws->map_bytes = st.map_bytes;
	ws->mapped_bytes = st.mapped_bytes;
	ws->ahead_asked = st.ahead_asked;
	ws->ahead_bytes = st.ahead_bytes;
	ws->ahead_ns = st.ahead_ns;
}

static size_t exec_times_fill(struct pprpcd *d, Pprpc__ExecTime *ex, Pprpc__ExecTime **exp)
{
	struct queue_exec_time t[QUEUE_EXEC_TYPES];
	size_t n = 0;

	for (unsigned k = 0; k < d->ndev; k++) {
		queue_exec_times(d->dev[k]->q, t);
		for (unsigned ty = 0; ty < QUEUE_EXEC_TYPES; ty++) {
			if (!t[ty].execs)
				continue;
			pprpc__exec_time__init(&ex[n]);
			ex[n].device = k;
			ex[n].type = (char *)msg_type_name(ty);
			ex[n].execs = t[ty].execs;
			ex[n].ns = t[ty].ns;
			ex[n].load_execs = t[ty].load_execs;
			ex[n].load_ns = t[ty].load_ns;
			exp[n] = &ex[n];
			n++;
		}
	}
	return n;
}

/* Clients' requests by type that came, load and run (rc and rcp: room
 * for every type); returns how many. */
static size_t request_counts_fill(struct pprpcd *d, Pprpc__RequestCount *rc, Pprpc__RequestCount **rcp)
{
	size_t n = 0;

	for (unsigned ty = 0; ty < MSG_TYPE_COUNT; ty++) {
		const struct pprpcd_req_count *l = &d->stats.by_type[PPRPCD_PHASE_LOAD][ty];
		const struct pprpcd_req_count *u = &d->stats.by_type[PPRPCD_PHASE_RUN][ty];

		if (!l->requests && !u->requests)
			continue;
		pprpc__request_count__init(&rc[n]);
		rc[n].type = (char *)msg_type_name(ty);
		rc[n].load_requests = l->requests;
		rc[n].load_bytes = l->bytes;
		rc[n].run_requests = u->requests;
		rc[n].run_bytes = u->bytes;
		rcp[n] = &rc[n];
		n++;
	}
	return n;
}

void h_stats(struct conn *c, struct request *r)
{
	struct pprpcd *d = c->d;
	Pprpc__StatsReply rep = PPRPC__STATS_REPLY__INIT;
	Pprpc__WeightsStats ws;
	Pprpc__RequestCount rc[MSG_TYPE_COUNT], *rcp[MSG_TYPE_COUNT];
	Pprpc__DeviceStats ds[PPRPCD_MAX_DEVICES], *dsp[PPRPCD_MAX_DEVICES];
	Pprpc__ConnStats *cs = NULL, **csp = NULL;
	Pprpc__BoundaryStats *bs = NULL, **bsp = NULL;
	Pprpc__ConnStats *ls = NULL, **lsp = NULL;
	struct transport_info *ti = NULL, *lti = NULL;
	Pprpc__ExecTime *ex = calloc((size_t)d->ndev * QUEUE_EXEC_TYPES + 1, sizeof(*ex));
	Pprpc__ExecTime **exp = calloc((size_t)d->ndev * QUEUE_EXEC_TYPES + 1, sizeof(*exp));
	size_t nlinks = 0;
	struct peer *pl;
	size_t nb = 0;
	struct bstat *b;
	struct devinfo_set set;
	char ipc_text[PPRPCD_MAX_DEVICES][192];
	char async_text[PPRPCD_MAX_DEVICES][192];
	struct device_gdn_report gdn_rep[PPRPCD_MAX_DEVICES];
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
		ds[k].graph_captures = dev->graph_captures;
		ds[k].graph_replays = dev->graph_replays;
		ds[k].ipc_status = ipc_text[k];
		ds[k].gpu_waits = __atomic_load_n(&dev->gpu_waits, __ATOMIC_RELAXED);
		ds[k].gpu_signals = __atomic_load_n(&dev->gpu_signals, __ATOMIC_RELAXED);
		ds[k].gpu_recvs = __atomic_load_n(&dev->gpu_recvs, __ATOMIC_RELAXED);
		ds[k].gpu_sends = __atomic_load_n(&dev->gpu_sends, __ATOMIC_RELAXED);
		device_waits_status(dev, async_text[k], sizeof(async_text[k]));
		ds[k].async_status = async_text[k];
		gdn_stats_fill(dev, &ds[k], &gdn_rep[k]);
		ipc_status(dev, ipc_text[k], sizeof(ipc_text[k]), &ds[k].ipc_pool_bytes);
		dsp[k] = &ds[k];
	}
	for (it = d->conns; it; it = it->next)
		nconn++;
	for (b = d->bstats; b; b = b->next)
		nb++;
	for (pl = peer_first(d); pl; pl = peer_next(pl))
		if (peer_transport(pl))
			nlinks++;
	ls = calloc(nlinks ? nlinks : 1, sizeof(*ls));
	lsp = calloc(nlinks ? nlinks : 1, sizeof(*lsp));
	lti = calloc(nlinks ? nlinks : 1, sizeof(*lti));
	ti = calloc(nconn ? nconn : 1, sizeof(*ti));
	cs = calloc(nconn ? nconn : 1, sizeof(*cs));
	csp = calloc(nconn ? nconn : 1, sizeof(*csp));
	bs = calloc(nb ? nb : 1, sizeof(*bs));
	bsp = calloc(nb ? nb : 1, sizeof(*bsp));
	if (!cs || !csp || !bs || !bsp || !ls || !lsp || !lti || !ti || !ex || !exp) {
		free(ex);
		free(exp);
		free(cs);
		free(csp);
		free(bs);
		free(bsp);
		free(ls);
		free(lsp);
		free(lti);
		free(ti);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_ENOMEM, "out of memory");
		return;
	}
	for (it = d->conns; it; it = it->next, i++) {
		pprpc__conn_stats__init(&cs[i]);
		cs[i].peer = it->name;
		fill_transport(&cs[i], it->t, &ti[i]);
		cs[i].role = it->role ? "peer" : "client";
		cs[i].errors = it->errors;
		cs[i].buffers = it->own.nbuffers;
		cs[i].allocated_bytes = it->own.allocated;
		csp[i] = &cs[i];
	}
	i = 0;
	for (b = d->bstats; b; b = b->next, i++) {
		pprpc__boundary_stats__init(&bs[i]);
		bs[i].peer = b->peer;
		bs[i].direction = b->dir;
		bs[i].path = b->path[0] ? b->path : "p2p-tcp";
		bs[i].transfers = b->transfers;
		bs[i].bytes = b->bytes;
		bs[i].time_us = b->time_us;
		bs[i].errors = b->errors;
		bs[i].copy_us = b->copy_us;
		bs[i].ipc_bytes = b->ipc_bytes;
		bsp[i] = &bs[i];
	}
	i = 0;
	for (pl = peer_first(d); pl; pl = peer_next(pl)) {
		if (!peer_transport(pl))
			continue;
		pprpc__conn_stats__init(&ls[i]);
		ls[i].peer = (char *)peer_rank(pl);
		ls[i].role = "link";
		fill_transport(&ls[i], peer_transport(pl), &lti[i]);
		lsp[i] = &ls[i];
		i++;
	}
	rep.n_links = nlinks;
	rep.links = lsp;
	rep.rdma_status = d->rdma_status;
	rep.n_boundaries = nb;
	rep.boundaries = bsp;
	rep.staging_bytes = d->staging.bytes;
	rep.staging_used = (uint64_t)staging_used(&d->staging) * d->staging.slot_size;
	rep.daemon_version = PPRPC_VERSION;
	rep.uptime_ms = now_ms(d->loop) - d->start_ms;
	rep.n_devices = d->ndev;
	rep.devices = dsp;
	rep.n_connections = nconn;
	rep.connections = csp;
	rep.connections_total = d->stats.connections_total;
	rep.protocol_errors = d->stats.protocol_errors;
	rep.requests = d->stats.requests;
	rep.request_errors = d->stats.request_errors;
	rep.n_exec_times = exec_times_fill(d, ex, exp);
	rep.exec_times = exp;
	rep.n_request_counts = request_counts_fill(d, rc, rcp);
	rep.request_counts = rcp;
	if (d->weights) {
		weights_fill(d, &ws);
		rep.weights = &ws;
	}
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
	free(ex);
	free(exp);
	free(cs);
	free(csp);
	free(bs);
	free(bsp);
	free(ls);
	free(lsp);
	free(lti);
	free(ti);
}

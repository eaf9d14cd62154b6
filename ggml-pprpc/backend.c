/*
 * ggml-pprpc/backend.c — a ggml backend (stream) on a PPRPC device.
 *
 * Everything is asynchronous and in order on the device's queue of the
 * rank: graph_compute queues GRAPH_RUN of a cached graph, or a new graph's
 * GGML_GRAPH_CREATE that runs it too (graphs.c), set/get_tensor_async
 * queue TENSOR_SET/GET, a copy from
 * another rank is a SEND there and a RECV here.  synchronize is a FENCE:
 * it returns when the rank completed the work, and reports the first
 * failure of the queue, which ends the process (synchronize has no error
 * return, and the data it vouches for would be wrong).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

static const char *backend_get_name(ggml_backend_t backend)
{
	return ((struct pg_backend *)backend->context)->dev->name;
}

static void backend_free(ggml_backend_t backend)
{
	struct pg_backend *be = backend->context;
	struct pg_device *d = be->dev;
	const struct pg_stats *s = &d->st;

	/* creates vs runs: how well the graph cache serves this workload */
	PG_LOG_INFO("pprpc: %s: graphs %llu created, %llu run (%llu from the cache, %llu of them unserialized), %llu freed, "
		    "%llu creates waited for; "
		    "supports_op %llu asked, %llu cached; copies %llu daemon-to-daemon (%llu bytes), %llu local; "
		    "waits: %llu FENCE (%llu more not needed behind writes alone), %llu HOST_WAIT (%llu fell back to "
		    "FENCE), %llu reads\n",
		    d->name, (unsigned long long)s->graph_creates, (unsigned long long)s->graph_runs,
		    (unsigned long long)(s->graph_runs > s->graph_creates ? s->graph_runs - s->graph_creates : 0),
		    (unsigned long long)s->graph_replays, (unsigned long long)s->graph_evictions, (unsigned long long)s->create_waits,
		    (unsigned long long)s->supports_queries,
		    (unsigned long long)s->supports_cached, (unsigned long long)s->p2p_copies,
		    (unsigned long long)s->p2p_bytes, (unsigned long long)s->local_copies,
		    (unsigned long long)s->fences, (unsigned long long)s->fences_skipped, (unsigned long long)s->host_waits,
		    (unsigned long long)s->host_wait_fences, (unsigned long long)s->reads);
	free(be);
	free(backend);
}

static struct pg_buffer *tensor_buffer(const struct ggml_tensor *t, uint64_t *off, const char *command)
{
	struct pg_buffer *b;

	if (pg_tensor_loc(t, &b, off) < 0)
		pg_fatal(NULL, NULL, command, "tensor '%s' is not in a pprpc buffer", t->name);
	pg_check_alive(b->dev->rank, b->dev->name, command);
	return b;
}

static void backend_set_tensor_async(ggml_backend_t backend, struct ggml_tensor *t, const void *data, size_t offset,
				     size_t size)
{
	uint64_t off;
	struct pg_buffer *b = tensor_buffer(t, &off, "TENSOR_SET");

	(void)backend;
	pg_lock(b->dev->rank);
	pg_buffer_set(b, t, off, data, offset, size, "TENSOR_SET");
	pg_unlock(b->dev->rank);
}

static void backend_get_tensor_async(ggml_backend_t backend, const struct ggml_tensor *t, void *data, size_t offset,
				     size_t size)
{
	uint64_t off;
	struct pg_buffer *b = tensor_buffer(t, &off, "TENSOR_GET");

	(void)backend;
	pg_lock(b->dev->rank);
	pg_buffer_get(b, t, off, data, offset, size, 1, "TENSOR_GET");
	pg_unlock(b->dev->rank);
}

static bool backend_cpy_tensor_async(ggml_backend_t backend_src, ggml_backend_t backend_dst,
				     const struct ggml_tensor *src, struct ggml_tensor *dst)
{
	struct pg_buffer *sb, *db;
	uint64_t soff, doff;

	(void)backend_dst;
	if (pg_tensor_loc(dst, &db, &doff) < 0)
		return false;
	if (pg_tensor_loc(src, &sb, &soff) == 0)
		return pg_copy_between(sb, soff, db, doff, ggml_nbytes(src)) == 0;
	if (src->buffer && ggml_backend_buffer_is_host(src->buffer)) {
		/* The bytes leave this process before the call returns; the
		 * source backend must have finished writing them. */
		if (backend_src && !pg_backend_of(backend_src))
			ggml_backend_synchronize(backend_src);
		pg_lock(db->dev->rank);
		pg_buffer_set(db, dst, doff, src->data, 0, ggml_nbytes(src), "TENSOR_SET (copy from host)");
		pg_unlock(db->dev->rank);
		return true;
	}
	return false; /* ggml copies through the host */
}

static void backend_synchronize(ggml_backend_t backend)
{
	pg_device_sync(((struct pg_backend *)backend->context)->dev, "synchronize (FENCE)");
}

static enum ggml_status graph_compute(ggml_backend_t backend, struct ggml_cgraph *g)
{
	struct pg_device *d = ((struct pg_backend *)backend->context)->dev;
	struct pg_rank *r = d->rank;
	char err[768];
	pprpc_graph h;
	int ran = 0, rc;

	if (ggml_graph_n_nodes(g) == 0)
		return GGML_STATUS_SUCCESS;
	pg_weights_done(d->gdev.reg->context);
	if (pg_fault_failed(r->fault)) {
		/* graph_compute has a status: llama_decode fails, and llama-server
		 * answers the requests of the batch with an error */
		pg_fault_why(r->fault, err, sizeof(err));
		PG_LOG_ERROR("pprpc: %s: graph_compute refused after the rank fault: %s\n", d->name, err);
		return GGML_STATUS_FAILED;
	}
	pg_lock(r);
	if (r->dead) {
		rc = PPRPC_ECONN;
		snprintf(err, sizeof(err), "connection to the rank lost: %s", r->dead_why);
	} else {
		rc = pg_graph_get(d, g, &h, &ran, err, sizeof(err));
	}
	if (rc == 0 && ran) {
		d->submitted++;
		d->st.graph_runs++;
	} else if (rc == 0 && h.id) {
		rc = pprpc_graph_run_async(r->c, h);
		d->submitted++;
		if (rc < 0) {
			pg_rank_failed(r, rc);
			snprintf(err, sizeof(err), "GRAPH_RUN: %s", r->dead ? r->dead_why : pprpc_last_error(r->c));
		} else {
			d->st.graph_runs++;
		}
	}
	pg_unlock(r);
	if (rc < 0 && r->dead) {
		/* the rank's state is gone: a fault, reported through the status */
		pg_rank_fault(r, d->name, err);
		return GGML_STATUS_FAILED;
	}
	if (rc < 0) {
		/* a refused graph: llama.cpp reports the failed decode */
		PG_LOG_ERROR("pprpc: rank %d %s (%s) device %s: graph_compute of %d nodes failed: %s\n", r->index,
			       r->name, r->addr, d->name, ggml_graph_n_nodes(g), err);
		return rc == PPRPC_ENOMEM ? GGML_STATUS_ALLOC_FAILED : GGML_STATUS_FAILED;
	}
	return GGML_STATUS_SUCCESS;
}

/* graph_compute between two lines of the request trace (PPRPC_TRACE): its
 * GRAPH_RUN's send is inside.  INFO names the graph's size and its first
 * node's ne[1] (the tokens of the ubatch for a layer split's graphs), by
 * which token-trace.py tells a decoded token's graph from a prompt's. */
static enum ggml_status backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph *g)
{
	struct pg_device *d = ((struct pg_backend *)backend->context)->dev;
	pprpc_trace *t = d->rank->trace;
	enum ggml_status st;
	uint64_t id = d->submitted + 1;
	char info[64];
	int n;

	if (!t)
		return graph_compute(backend, g);
	n = ggml_graph_n_nodes(g);
	snprintf(info, sizeof(info), "nodes=%d ne1=%lld", n, n ? (long long)ggml_graph_node(g, 0)->ne[1] : 0LL);
	pprpc_trace_event(t, d->name, "GRAPH_COMPUTE", id, "graph_start", info);
	st = graph_compute(backend, g);
	pprpc_trace_event(t, d->name, "GRAPH_COMPUTE", id, "graph_end", st == GGML_STATUS_SUCCESS ? "ok" : "failed");
	return st;
}

static const struct ggml_backend_i backend_iface = {
	.get_name = backend_get_name,
	.free = backend_free,
	.set_tensor_async = backend_set_tensor_async,
	.get_tensor_async = backend_get_tensor_async,
	.set_tensor_2d_async = NULL,   /* optional: ggml loops */
	.get_tensor_2d_async = NULL,
	.cpy_tensor_async = backend_cpy_tensor_async,
	.synchronize = backend_synchronize,
	.graph_plan_create = NULL,
	.graph_plan_free = NULL,
	.graph_plan_update = NULL,
	.graph_plan_compute = NULL,
	.graph_compute = backend_graph_compute,
	.event_record = pg_event_record,
	.event_wait = pg_event_wait,
	.graph_optimize = NULL,
};

static ggml_guid_t guid(void)
{
	static ggml_guid g = { 0x70, 0x70, 0x72, 0x70, 0x63, 0x2d, 0x67, 0x67,
			       0x6d, 0x6c, 0x2d, 0x62, 0x61, 0x63, 0x6b, 0x31 };

	return &g;
}

struct pg_backend *pg_backend_of(ggml_backend_t backend)
{
	return backend && backend->iface.get_name == backend_get_name ? backend->context : NULL;
}

ggml_backend_t pg_backend_new(struct pg_device *d)
{
	struct pg_backend *be = calloc(1, sizeof(*be));
	ggml_backend_t b = calloc(1, sizeof(*b));

	if (!be || !b) {
		free(be);
		free(b);
		return NULL;
	}
	be->dev = d;
	b->guid = guid();
	b->iface = backend_iface;
	b->device = &d->gdev;
	b->context = be;
	return b;
}

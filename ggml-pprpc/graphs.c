/*
 * ggml-pprpc/graphs.c — the per-device caches: daemon graphs by their
 * serialization, supports_op and alloc-size answers by the op's.
 *
 * Graphs: llama.cpp builds the same graph for every token of a decode (and
 * for every ubatch of one size), so graph_compute serializes the cgraph and,
 * when the bytes equal a graph created before, runs that handle (GRAPH_RUN)
 * instead of sending GGML_GRAPH_CREATE again.  Buffer handles and offsets are
 * part of the bytes, so a hit always runs on the same memory.  The cache is
 * bounded (PPRPC_GRAPH_CACHE graphs per device, default 128); evicted graphs
 * are freed on the rank (GRAPH_FREE), and so are the graphs of a buffer
 * being freed, which must not outlive it (the daemon would keep the buffer's
 * memory for them).
 *
 * A new graph's GGML_GRAPH_CREATE also queues its run (run set, when the
 * rank says caps.ggml_create_run; PPRPC_GRAPH_CREATE_RUN=0 turns it off) and
 * is not waited for: llama.cpp meets a new graph at every new KV length of
 * a prompt, and each synchronous create left the rank idle for a round trip
 * plus the daemon's validation and build (2 to 5 ms for ~500 nodes on the
 * CPU, doc/llama-vs-rpc.md).  The entry holds the request (aux) until its
 * reply is read, which any later call of this client does in passing; the
 * handle is needed only for the next run of the same graph or its
 * GRAPH_FREE (settle).  A refused create fails the rank's streams as well
 * (the daemon's side), so the next synchronize ends the process with the
 * reason and no output computed behind it is ever returned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* A GGML_GRAPH_CREATE with run set, sent and not read back yet. */
struct pg_create {
	pprpc_request *req;      /* libpprpc's record of the request */
	size_t nnodes, n;        /* for messages */
};

/* Read e's handle from its create's reply (waiting for it if it has not
 * come).  0 with e->value set; or a negative code, e left without a graph
 * (value 0) and the reason in err. */
static int settle(struct pg_device *d, struct pg_cache_entry *e, char *err, size_t errlen)
{
	struct pg_create *pc = e->aux;
	pprpc_graph g;
	int rc;

	if (!pc)
		return 0;
	e->aux = NULL;
	if (!pprpc_request_done(pc->req))
		d->st.create_waits++;
	/* a reply without a handle (PPRPC_EPROTO) is not what this side believes */
	rc = pprpc_request_wait(d->rank->c, pc->req);
	if (rc == 0)
		rc = pprpc_request_graph(pc->req, &g);
	if (rc == 0) {
		e->value = g.id;
	} else {
		const char *why = pprpc_request_error(pc->req);

		pg_rank_failed(d->rank, rc);
		snprintf(err, errlen, "GGML_GRAPH_CREATE of %zu nodes (%zu tensors): %.400s", pc->nnodes, pc->n,
			 d->rank->dead ? d->rank->dead_why : *why ? why : pprpc_strerror(rc));
	}
	pprpc_request_free(pc->req);
	free(pc);
	return rc;
}

static void graph_evict(void *arg, struct pg_cache_entry *e)
{
	struct pg_device *d = arg;
	pprpc_graph g;
	char err[512];
	int rc;

	d->st.graph_evictions++;
	pg_snap_forget(d, e);
	/* A refused create made no graph (and failed the streams: the next
	 * synchronize reports it). */
	if (settle(d, e, err, sizeof(err)) < 0 || !e->value)
		return;
	if (d->rank->dead || pg_fault_failed(d->rank->fault))
		return; /* the rank's state for this session is gone anyway */
	g.id = e->value;
	rc = pg_rank_failed(d->rank, pprpc_graph_free(d->rank->c, g));
	/* The handle was ours and alive: the daemon disagreeing means the
	 * session's state is not what this side believes.  No exception: a
	 * buffer's free (a destructor) evicts its graphs. */
	if (rc < 0 && !d->rank->dead)
		pg_fault_raise(d->rank->fault, "rank %d %s (%s) device %s: GRAPH_FREE: %s", d->rank->index,
			       d->rank->name, d->rank->addr, d->name, pprpc_last_error(d->rank->c));
}

int pg_caches_init(struct pg_device *d)
{
	char err[160];
	long n;

	if (pg_env_int("PPRPC_GRAPH_CACHE", 128, 1, 1000000, &n, err, sizeof(err)) < 0) {
		PG_LOG_ERROR("pprpc: %s\n", err);
		return PPRPC_EINVAL;
	}
	if (d->create_run) {
		long on;

		if (pg_env_int("PPRPC_GRAPH_CREATE_RUN", 1, 0, 1, &on, err, sizeof(err)) < 0) {
			PG_LOG_ERROR("pprpc: %s\n", err);
			return PPRPC_EINVAL;
		}
		d->create_run = (int)on;
	}
	d->graphs = pg_cache_new((size_t)n, (size_t)256 << 20, graph_evict, d);
	d->supports = pg_cache_new(65536, (size_t)64 << 20, NULL, NULL);
	d->alloc_sizes = pg_cache_new(16384, (size_t)16 << 20, NULL, NULL);
	if (!d->graphs || !d->supports || !d->alloc_sizes)
		return PPRPC_ENOMEM;
	return 0;
}

void pg_caches_fini(struct pg_device *d)
{
	pg_snap_forget(d, NULL);
	pg_cache_free(d->graphs);
	pg_cache_free(d->supports);
	pg_cache_free(d->alloc_sizes);
	d->graphs = d->supports = d->alloc_sizes = NULL;
}

static int uses_buffer(void *arg, const struct pg_cache_entry *e)
{
	pprpc_buffer b = *(const pprpc_buffer *)arg;

	for (size_t i = 0; i < e->nbufs; i++)
		if (e->bufs[i] == b.id)
			return 1;
	return 0;
}

void pg_graphs_drop_buffer(struct pg_device *d, pprpc_buffer buf)
{
	pg_cache_evict_if(d->graphs, uses_buffer, &buf);
}

/* Send w's create with run set; *ret_pc is settled later (settle). */
static int create_run(struct pg_device *d, const struct pg_wire *w, struct pg_create **ret_pc, char *err,
		      size_t errlen)
{
	pprpc_ggml_graph_desc g;
	struct pg_create *pc = calloc(1, sizeof(*pc));
	int rc;

	if (!pc) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	pg_wire_graph_desc(w, d->index, &g);
	pc->nnodes = w->nnodes;
	pc->n = w->n;
	rc = d->rank->dead ? PPRPC_ECONN : pprpc_ggml_graph_create_run(d->rank->c, &g, &pc->req);
	if (rc < 0) {
		pg_rank_failed(d->rank, rc);
		snprintf(err, errlen, "GGML_GRAPH_CREATE of %zu nodes (%zu tensors): %.400s", w->nnodes, w->n,
			 d->rank->dead ? d->rank->dead_why : pprpc_last_error(d->rank->c));
		free(pc);
		return rc;
	}
	d->st.graph_creates++;
	*ret_pc = pc;
	return 0;
}

static int create(struct pg_device *d, const struct pg_wire *w, pprpc_graph *ret, char *err, size_t errlen)
{
	pprpc_ggml_graph_desc g;
	int rc;

	pg_wire_graph_desc(w, d->index, &g);
	rc = d->rank->dead ? PPRPC_ECONN : pg_rank_failed(d->rank, pprpc_ggml_graph_create(d->rank->c, &g, ret));
	if (rc < 0) {
		snprintf(err, errlen, "GGML_GRAPH_CREATE of %zu nodes (%zu tensors): %s", w->nnodes, w->n,
			 d->rank->dead ? d->rank->dead_why : pprpc_last_error(d->rank->c));
		return rc;
	}
	d->st.graph_creates++;
	return 0;
}

static int is_entry(void *arg, const struct pg_cache_entry *e)
{
	return e == arg;
}

int pg_graph_get(struct pg_device *d, const struct ggml_cgraph *g, pprpc_graph *ret, int *ran, char *err,
		 size_t errlen)
{
	struct pg_create *pc = NULL;
	struct pg_wire w;
	struct pg_cache_entry *e;
	uint8_t *key = NULL;
	size_t klen = 0;
	uint64_t *bufs = NULL;
	pprpc_graph h = { 0 };
	int rc;

	err[0] = '\0';
	*ran = 0;
	memset(&w, 0, sizeof(w));
	/* The graph run last, unchanged: no serialization (replay.c). */
	e = pg_snap_match(d, g);
	if (e) {
		pg_cache_touch(d->graphs, e);
		rc = settle(d, e, err, errlen);
		if (rc < 0) {
			pg_cache_evict_if(d->graphs, is_entry, e);
			return rc;
		}
		d->st.graph_replays++;
		ret->id = e->value;
		return 0;
	}
	rc = pg_wire_graph(&w, d, g, 1);
	if (rc == 0)
		rc = pg_wire_pack_graph(&w, d->index, &key, &klen);
	if (rc == 0 && klen > PPRPC_MAX_META) {
		/* Names are only for the daemon's error messages: drop them
		 * before giving up on a large graph. */
		pg_wire_free(&w);
		free(key);
		key = NULL;
		rc = pg_wire_graph(&w, d, g, 0);
		if (rc == 0)
			rc = pg_wire_pack_graph(&w, d->index, &key, &klen);
		if (rc == 0 && klen > PPRPC_MAX_META) {
			snprintf(err, errlen, "graph of %zu tensors is %zu bytes in wire form, over the %u-byte message limit",
				 w.n, klen, PPRPC_MAX_META);
			rc = PPRPC_ETOOBIG;
		}
	}
	if (rc < 0) {
		if (!*err)
			snprintf(err, errlen, "%s", w.err[0] ? w.err : pprpc_strerror(rc));
		goto out;
	}
	if (w.nnodes == 0) {
		ret->id = 0; /* nothing but no-op nodes: nothing to run */
		goto out;
	}
	e = pg_cache_find(d->graphs, key, klen);
	if (e) {
		rc = settle(d, e, err, errlen);
		if (rc < 0) {
			pg_cache_evict_if(d->graphs, is_entry, e); /* no graph behind it */
			goto out;
		}
		ret->id = e->value;
		pg_snap_take(d, g, &w, e);
		goto out;
	}
	if (w.nbufs && !(bufs = malloc(w.nbufs * sizeof(*bufs)))) {
		snprintf(err, errlen, "out of memory caching a graph");
		rc = PPRPC_ENOMEM;
		goto out;
	}
	pg_dump_graph(d, key, klen);
	rc = d->create_run ? create_run(d, &w, &pc, err, errlen) : create(d, &w, &h, err, errlen);
	if (rc < 0)
		goto out;
	e = pg_cache_insert(d->graphs, key, klen, h.id);
	if (!e) {
		struct pg_cache_entry tmp = { .value = h.id, .aux = pc };

		/* uncached, the graph could outlive its buffers: free it */
		graph_evict(d, &tmp);
		snprintf(err, errlen, "out of memory caching a graph");
		rc = PPRPC_ENOMEM;
		goto out;
	}
	if (w.nbufs) {
		memcpy(bufs, w.bufs, w.nbufs * sizeof(*bufs));
		e->bufs = bufs;
		e->nbufs = w.nbufs;
		bufs = NULL;
	}
	e->aux = pc;
	*ran = pc != NULL;
	*ret = h;
	pg_snap_take(d, g, &w, e);
out:
	free(bufs);
	free(key);
	pg_wire_free(&w);
	return rc;
}

int pg_supports_op(struct pg_device *d, const struct ggml_tensor *op)
{
	pprpc_ggml_op_desc q;
	struct pg_cache_entry *e;
	struct pg_wire w;
	uint8_t *key = NULL;
	size_t klen;
	int32_t node;
	int rc, ok;
	char why[256];

	/* The view ops and NONE compute nothing: every ggml backend takes them
	 * (ggml-cpu's and ggml-cuda's supports_op say yes), and the plugin never
	 * sends them as work (serialize.c), so there is nothing to ask. */
	switch (op->op) {
	case GGML_OP_NONE:
	case GGML_OP_VIEW:
	case GGML_OP_RESHAPE:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		return 1;
	default:
		break;
	}
	rc = pg_wire_op(&w, d, op, &node);
	if (rc == 0)
		rc = pg_wire_pack_op(&w, node, &key, &klen);
	if (rc < 0) {
		PG_LOG_DEBUG("pprpc: %s: %s not offered: %s\n", d->name, ggml_op_desc(op), w.err);
		pg_wire_free(&w);
		free(key);
		return 0;
	}
	e = pg_cache_find(d->supports, key, klen);
	if (e) {
		d->st.supports_cached++;
		ok = (int)e->value;
		goto out;
	}
	pg_wire_op_desc(&w, node, &q);
	d->st.supports_queries++;
	rc = d->rank->dead ? PPRPC_ECONN
			   : pg_rank_failed(d->rank, pprpc_ggml_op_supported(d->rank->c, &q, &ok, why, sizeof(why)));
	if (rc < 0 && d->rank->dead)
		pg_fatal_rc(d->rank, d->name, "GGML_SUPPORTS", rc);
	if (rc < 0) {
		/* The daemon refused the question itself (its validator found the
		 * op malformed): for ggml that means "not here". */
		PG_LOG_DEBUG("pprpc: %s: %s: GGML_SUPPORTS refused: %s\n", d->name, ggml_op_desc(op),
			       pprpc_last_error(d->rank->c));
		ok = 0;
	} else if (!ok) {
		PG_LOG_DEBUG("pprpc: %s: %s not supported: %s\n", d->name, ggml_op_desc(op), why);
	}
	pg_cache_insert(d->supports, key, klen, (uint64_t)ok); /* a cache without memory only costs a query */
out:
	free(key);
	pg_wire_free(&w);
	return ok;
}

size_t pg_alloc_size(struct pg_device *d, const struct ggml_tensor *t)
{
	pprpc_ggml_op_desc q;
	struct pg_cache_entry *e;
	struct pg_wire w;
	uint8_t *key = NULL;
	size_t klen, nbytes = ggml_nbytes(t), size;
	uint64_t asked;
	int32_t node;
	int rc;

	/* ggml's buffer types answer more than ggml_nbytes only for quantized
	 * rows they pad (ggml-cuda pads to 512 elements) and for the ops ggml
	 * lists as possibly needing scratch (TAG_ALLOC_SIZE_EXPAND); everything
	 * else is ggml_nbytes without asking. */
	if (!(ggml_is_quantized(t->type) && t->ne[0] % 512 != 0 && !t->view_src) && !ggml_op_alloc_size_may_expand(t->op))
		return nbytes;
	rc = pg_wire_op(&w, d, t, &node);
	if (rc == 0)
		rc = pg_wire_pack_op(&w, node, &key, &klen);
	if (rc < 0)
		pg_fatal(d->rank, d->name, "GGML_ALLOC_SIZE", "cannot serialize '%s': %s", t->name, w.err);
	e = pg_cache_find(d->alloc_sizes, key, klen);
	if (e) {
		size = (size_t)e->value;
		goto out;
	}
	pg_wire_op_desc(&w, node, &q);
	d->st.alloc_size_queries++;
	rc = d->rank->dead ? PPRPC_ECONN : pg_rank_failed(d->rank, pprpc_ggml_op_alloc_size(d->rank->c, &q, &asked));
	if (rc < 0)
		pg_fatal_rc(d->rank, d->name, "GGML_ALLOC_SIZE", rc);
	size = (size_t)asked;
	if (size < nbytes)
		pg_fatal(d->rank, d->name, "GGML_ALLOC_SIZE", "'%s' needs %zu bytes, the rank answered %zu", t->name,
			 nbytes, size);
	pg_cache_insert(d->alloc_sizes, key, klen, size);
out:
	free(key);
	pg_wire_free(&w);
	return size;
}

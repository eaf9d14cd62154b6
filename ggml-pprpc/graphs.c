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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-pprpc/pg.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static void graph_evict(void *arg, struct pg_cache_entry *e)
{
	struct pg_device *d = arg;
	Pprpc__GraphFree req = PPRPC__GRAPH_FREE__INIT;
	int rc;

	d->st.graph_evictions++;
	if (d->rank->dead)
		return; /* the rank's state for this session is gone anyway */
	req.graph = e->value;
	rc = pg_call(d->rank, MSG_GRAPH_FREE, &req.base, NULL, NULL);
	if (rc < 0 && !d->rank->dead)
		/* The handle was ours and alive: the daemon disagreeing means
		 * the session's state is not what this side believes. */
		pg_fatal_rc(d->rank, d->name, "GRAPH_FREE", rc);
}

int pg_caches_init(struct pg_device *d)
{
	char err[160];
	long n;

	if (pg_env_int("PPRPC_GRAPH_CACHE", 128, 1, 1000000, &n, err, sizeof(err)) < 0) {
		PG_LOG_ERROR("pprpc: %s\n", err);
		return PPRPC_EINVAL;
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
	pg_cache_free(d->graphs);
	pg_cache_free(d->supports);
	pg_cache_free(d->alloc_sizes);
	d->graphs = d->supports = d->alloc_sizes = NULL;
}

static int uses_buffer(void *arg, const struct pg_cache_entry *e)
{
	pprpc_buffer b = *(const pprpc_buffer *)arg;

	for (size_t i = 0; i < e->nbufs; i++)
		if (e->bufs[i] == b)
			return 1;
	return 0;
}

void pg_graphs_drop_buffer(struct pg_device *d, pprpc_buffer buf)
{
	pg_cache_evict_if(d->graphs, uses_buffer, &buf);
}

static int create(struct pg_device *d, const struct pg_wire *w, pprpc_graph *ret, char *err, size_t errlen)
{
	Pprpc__GgmlGraphCreate m = PPRPC__GGML_GRAPH_CREATE__INIT;
	ProtobufCMessage *rep = NULL;
	int rc;

	m.device = d->index;
	m.n_tensors = w->n;
	m.tensors = w->tp;
	m.n_nodes = w->nnodes;
	m.nodes = w->nodes;
	rc = pg_call(d->rank, MSG_GGML_GRAPH_CREATE, &m.base, &pprpc__graph_create_reply__descriptor, &rep);
	if (rc < 0) {
		snprintf(err, errlen, "GGML_GRAPH_CREATE of %zu nodes (%zu tensors): %s", w->nnodes, w->n,
			 d->rank->dead ? d->rank->dead_why : pprpc_last_error(d->rank->c));
		return rc;
	}
	*ret = ((Pprpc__GraphCreateReply *)rep)->graph;
	meta_free(rep);
	d->st.graph_creates++;
	return 0;
}

int pg_graph_get(struct pg_device *d, const struct ggml_cgraph *g, pprpc_graph *ret, char *err, size_t errlen)
{
	struct pg_wire w;
	struct pg_cache_entry *e;
	uint8_t *key = NULL;
	size_t klen = 0;
	uint64_t *bufs = NULL;
	pprpc_graph h;
	int rc;

	err[0] = '\0';
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
		*ret = 0; /* nothing but no-op nodes: nothing to run */
		goto out;
	}
	e = pg_cache_find(d->graphs, key, klen);
	if (e) {
		*ret = e->value;
		goto out;
	}
	if (w.nbufs && !(bufs = malloc(w.nbufs * sizeof(*bufs)))) {
		snprintf(err, errlen, "out of memory caching a graph");
		rc = PPRPC_ENOMEM;
		goto out;
	}
	rc = create(d, &w, &h, err, errlen);
	if (rc < 0)
		goto out;
	e = pg_cache_insert(d->graphs, key, klen, h);
	if (!e) {
		struct pg_cache_entry tmp = { .value = h };

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
	*ret = h;
out:
	free(bufs);
	free(key);
	pg_wire_free(&w);
	return rc;
}

int pg_supports_op(struct pg_device *d, const struct ggml_tensor *op)
{
	Pprpc__GgmlSupports m = PPRPC__GGML_SUPPORTS__INIT;
	ProtobufCMessage *rep = NULL;
	struct pg_cache_entry *e;
	struct pg_wire w;
	uint8_t *key = NULL;
	size_t klen;
	int32_t node;
	int rc, ok;

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
	m.device = d->index;
	m.n_tensors = w.n;
	m.tensors = w.tp;
	m.node = node;
	d->st.supports_queries++;
	rc = pg_call(d->rank, MSG_GGML_SUPPORTS, &m.base, &pprpc__ggml_supports_reply__descriptor, &rep);
	if (rc < 0 && d->rank->dead)
		pg_fatal_rc(d->rank, d->name, "GGML_SUPPORTS", rc);
	if (rc < 0) {
		/* The daemon refused the question itself (its validator found the
		 * op malformed): for ggml that means "not here". */
		PG_LOG_DEBUG("pprpc: %s: %s: GGML_SUPPORTS refused: %s\n", d->name, ggml_op_desc(op),
			       pprpc_last_error(d->rank->c));
		ok = 0;
	} else {
		const Pprpc__GgmlSupportsReply *r = (const Pprpc__GgmlSupportsReply *)rep;

		ok = r->supported ? 1 : 0;
		if (!ok)
			PG_LOG_DEBUG("pprpc: %s: %s not supported: %s\n", d->name, ggml_op_desc(op),
				       r->reason ? r->reason : "");
		meta_free(rep);
	}
	pg_cache_insert(d->supports, key, klen, (uint64_t)ok); /* a cache without memory only costs a query */
out:
	free(key);
	pg_wire_free(&w);
	return ok;
}

size_t pg_alloc_size(struct pg_device *d, const struct ggml_tensor *t)
{
	Pprpc__GgmlAllocSize m = PPRPC__GGML_ALLOC_SIZE__INIT;
	ProtobufCMessage *rep = NULL;
	struct pg_cache_entry *e;
	struct pg_wire w;
	uint8_t *key = NULL;
	size_t klen, nbytes = ggml_nbytes(t), size;
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
	m.device = d->index;
	m.n_tensors = w.n;
	m.tensors = w.tp;
	m.node = node;
	d->st.alloc_size_queries++;
	rc = pg_call(d->rank, MSG_GGML_ALLOC_SIZE, &m.base, &pprpc__ggml_alloc_size_reply__descriptor, &rep);
	if (rc < 0)
		pg_fatal_rc(d->rank, d->name, "GGML_ALLOC_SIZE", rc);
	size = (size_t)((Pprpc__GgmlAllocSizeReply *)rep)->size;
	meta_free(rep);
	if (size < nbytes)
		pg_fatal(d->rank, d->name, "GGML_ALLOC_SIZE", "'%s' needs %zu bytes, the rank answered %zu", t->name,
			 nbytes, size);
	pg_cache_insert(d->alloc_sizes, key, klen, size);
out:
	free(key);
	pg_wire_free(&w);
	return size;
}

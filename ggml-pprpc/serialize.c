/*
 * ggml-pprpc/serialize.c — ggml tensors and graphs in wire form
 * (GgmlTensor / GgmlGraphCreate, doc/ggml.md).
 *
 * Pointers never travel.  Each tensor gets an index; its sources and view
 * source are indices that precede it.  Its bytes are a buffer handle plus an
 * offset on the rank (views too: the daemon checks them against the view
 * source).  Only the graph's nodes are work: a source that is not a node of
 * this graph (a weight, an input, a node of an earlier split or of another
 * 1-node view) travels as a plain tensor with op NONE, so its own sources
 * do not come along and the serialization depends only on what the graph
 * computes — which is also what makes it a good cache key.  A view keeps
 * its view source either way.
 *
 * The wire tensors (pprpc_ggml.h) point into the ggml tensors (op_params,
 * name), so a wire form is valid while the graph is; libpprpc packs and
 * sends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "nb travels as uint64 (64-bit hosts only)");
_Static_assert(GGML_MAX_SRC == PPRPC_GGML_MAX_SRC && GGML_MAX_OP_PARAMS == PPRPC_GGML_MAX_OP_PARAMS &&
		       GGML_MAX_DIMS == PPRPC_GGML_MAX_DIMS && GGML_MAX_NAME - 1 == PPRPC_GGML_MAX_NAME,
	       "the wire form (pprpc_ggml.h, GgmlTensor) assumes ggml's limits");

enum { NODE_PENDING = -2, ABSENT = -1 };
/* a node that is its own source: ggml_cast's CPY names itself as src[1] (its
 * destination); it travels as the node's own index */
#define SELF (-3)

/* Recursion only follows view chains and, for nodes, sources that are
 * nodes not yet emitted (none in a topologically ordered graph). */
#define MAX_DEPTH 4096

static size_t ptr_hash(const void *p, size_t cap)
{
	uint64_t v = (uint64_t)(uintptr_t)p;

	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v & (cap - 1);
}

static int map_grow(struct pg_wire *w)
{
	size_t ncap = w->mapcap ? w->mapcap * 2 : 1024, i;
	const struct ggml_tensor **nk = calloc(ncap, sizeof(*nk));
	int32_t *nv = malloc(ncap * sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (i = 0; i < w->mapcap; i++) {
		size_t h;

		if (!w->keys[i])
			continue;
		for (h = ptr_hash(w->keys[i], ncap); nk[h]; h = (h + 1) & (ncap - 1))
			;
		nk[h] = w->keys[i];
		nv[h] = w->vals[i];
	}
	free(w->keys);
	free(w->vals);
	w->keys = nk;
	w->vals = nv;
	w->mapcap = ncap;
	return 0;
}

/* Slot of t in the map (present or where it would go). */
static size_t map_slot(const struct pg_wire *w, const struct ggml_tensor *t)
{
	size_t h = ptr_hash(t, w->mapcap);

	while (w->keys[h] && w->keys[h] != t)
		h = (h + 1) & (w->mapcap - 1);
	return h;
}

static int32_t map_get(const struct pg_wire *w, const struct ggml_tensor *t)
{
	size_t h;

	if (!w->mapcap)
		return ABSENT;
	h = map_slot(w, t);
	return w->keys[h] ? w->vals[h] : ABSENT;
}

static int map_put(struct pg_wire *w, const struct ggml_tensor *t, int32_t v)
{
	size_t h;

	/* load factor below 1/2 */
	if ((w->mapused + 1) * 2 > w->mapcap && map_grow(w) < 0)
		return -1;
	h = map_slot(w, t);
	if (!w->keys[h])
		w->mapused++;
	w->keys[h] = t;
	w->vals[h] = v;
	return 0;
}

static int grow_tensors(struct pg_wire *w)
{
	size_t ncap = w->cap ? w->cap * 2 : 256;
	pprpc_ggml_tensor *nt = realloc(w->t, ncap * sizeof(*nt));
	const struct ggml_tensor **np;

	if (!nt)
		return -1;
	w->t = nt;
	np = realloc(w->ptr, ncap * sizeof(*np));
	if (!np)
		return -1;
	w->ptr = np;
	w->cap = ncap;
	return 0;
}

static int note_buffer(struct pg_wire *w, uint64_t h)
{
	for (size_t i = 0; i < w->nbufs; i++)
		if (w->bufs[i] == h)
			return 0;
	if (w->nbufs == w->bufcap) {
		size_t ncap = w->bufcap ? w->bufcap * 2 : 8;
		uint64_t *nb = realloc(w->bufs, ncap * sizeof(*nb));

		if (!nb)
			return -1;
		w->bufs = nb;
		w->bufcap = ncap;
	}
	w->bufs[w->nbufs++] = h;
	return 0;
}

/* op_params without trailing zero words (zero by contract on the daemon). */
static size_t used_params(const struct ggml_tensor *t)
{
	size_t n = GGML_MAX_OP_PARAMS / sizeof(int32_t);

	while (n > 0 && t->op_params[n - 1] == 0)
		n--;
	return n * sizeof(int32_t);
}

static int32_t visit(struct pg_wire *w, const struct ggml_tensor *t, int depth);

/* The strides a tensor travels with.  A contiguous tensor (ggml's
 * ggml_is_contiguous, which skips dimensions of size 1) gets exactly a fresh
 * tensor's strides: in a dimension of size 1 the stride never takes part in
 * addressing (the index is always 0), but ggml's permutes leave whatever the
 * source had there (a permuted Q of one token keeps its head stride in the
 * token dimension), and the rank bounds how far a contiguous tensor's rows
 * may reach by its strides.  The bytes described, and so every result, stay
 * the same.  Other tensors keep their strides (the rank's "rows may be
 * padded" checks read them).  A view made by ggml_view_tensor (CPY,
 * SET_ROWS, in-place ops) has its source's shape and strides, so it gets
 * the same treatment as its source, and the rank's checks that a node is
 * what ggml's constructor makes still hold.  The view ops themselves
 * (permute, transpose) travel as nodes too (view_node): the rank's rules for
 * them ignore the stride of a dimension of size 1. */
static void strides(const struct ggml_tensor *t, uint64_t *nb)
{
	for (int k = 0; k < GGML_MAX_DIMS; k++)
		nb[k] = (uint64_t)t->nb[k];
	if (!ggml_is_contiguous(t))
		return;
	nb[0] = (uint64_t)ggml_type_size(t->type);
	nb[1] = nb[0] * (uint64_t)(t->ne[0] / ggml_blck_size(t->type));
	for (int k = 2; k < GGML_MAX_DIMS; k++)
		nb[k] = nb[k - 1] * (uint64_t)t->ne[k - 1];
}

/* Nodes that compute nothing in any backend (ggml-cpu and ggml-cuda skip
 * them): NONE (test-backend-ops adds sentinels so), the views, nodes with
 * no elements, and nodes without GGML_TENSOR_FLAG_COMPUTE (the meta
 * backend disables the parts of a zero-sized slice so, and zeroes their
 * results itself).  They travel as the tensors later nodes read, if any,
 * and the views of this device's memory as nodes too (view_node).  The
 * scheduler may even put a view of a host tensor in our split: a no-op
 * there, its readers get a copy. */
static int no_op(const struct ggml_tensor *t)
{
	if (ggml_is_empty(t) || !(t->flags & GGML_TENSOR_FLAG_COMPUTE))
		return 1;
	switch (t->op) {
	case GGML_OP_NONE:
	case GGML_OP_VIEW:
	case GGML_OP_RESHAPE:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		return 1;
	default:
		return 0;
	}
}

/*
 * A view op of this device's memory travels as a node all the same: it runs
 * no kernel, but ggml-cuda matches its fusions on the node sequence (RMS_NORM,
 * MUL, ROPE, VIEW, SET_ROWS; the MoE's top-k with its views and reshapes),
 * and a rank's graph without the views fused nothing of that: kimi-linear's
 * logits through two ggml:CUDA0 ranks were, bit for bit, local's with
 * GGML_CUDA_DISABLE_FUSION=1 (tests/gpu/fusion-check.sh).  A view of memory
 * elsewhere (the scheduler may put a view of a host tensor in our split)
 * stays a no-op here, as before.
 */
static int view_node(const struct pg_wire *w, const struct ggml_tensor *t)
{
	struct pg_buffer *b;
	uint64_t off;

	if (!w->with_buffers || ggml_is_empty(t) || !(t->flags & GGML_TENSOR_FLAG_COMPUTE) || !t->src[0])
		return 0;
	switch (t->op) {
	case GGML_OP_VIEW:
	case GGML_OP_RESHAPE:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		break;
	default:
		return 0;
	}
	if (pg_tensor_loc(t, &b, &off) < 0 || b->dev != w->dev)
		return 0;
	if (pg_tensor_loc(t->src[0], &b, &off) < 0 || b->dev != w->dev)
		return 0;
	if (t->op == GGML_OP_VIEW) {
		/* ggml's constructor: the offset parameter is where the view
		 * starts in src0.  The meta backend's slices (-sm tensor) scale
		 * view_offs and keep the parameter: such a view stays a no-op
		 * here (the rank checks a view node against its parameter). */
		size_t param;

		memcpy(&param, t->op_params, sizeof(param));
		if (t->view_offs != (t->src[0]->view_src ? t->src[0]->view_offs : 0) + param)
			return 0;
	}
	return 1;
}

/* Emit t (its sources already have indices in srcs/view). */
static int32_t emit(struct pg_wire *w, const struct ggml_tensor *t, int is_node, const int32_t *srcs, int32_t view)
{
	pprpc_ggml_tensor *m;
	int32_t idx = (int32_t)w->n, nsrc = 0;

	if (w->n == w->cap && grow_tensors(w) < 0)
		goto nomem;
	m = &w->t[w->n];
	memset(m, 0, sizeof(*m));
	m->type = (uint32_t)t->type;
	memcpy(m->ne, t->ne, sizeof(m->ne));
	strides(t, m->nb);
	m->op = is_node ? (uint32_t)t->op : (uint32_t)GGML_OP_NONE;
	/* flags say how a graph uses a tensor; an op query is about the op */
	m->flags = w->with_buffers ? t->flags : 0;
	m->view_src = view;
	m->view_offs = view >= 0 ? (uint64_t)t->view_offs : 0;
	if (is_node) {
		m->op_params = t->op_params;
		m->op_params_len = (uint32_t)used_params(t);
		for (int i = 0; i < GGML_MAX_SRC; i++) {
			m->src[i] = srcs[i] == SELF ? idx : srcs[i];
			if (m->src[i] >= 0)
				nsrc = i + 1;
		}
	}
	m->n_src = (uint32_t)nsrc;
	m->name = w->with_names ? t->name : "";
	if (w->with_buffers) {
		struct pg_buffer *b;
		uint64_t off;

		if (pg_tensor_loc(t, &b, &off) < 0) {
			snprintf(w->err, sizeof(w->err), "tensor '%.64s' (%s) is not in a buffer of this plugin (%s%s)",
				 t->name, ggml_op_desc(t), t->buffer ? "in " : "no buffer",
				 t->buffer ? ggml_backend_buffer_name(t->buffer) : t->data ? ", data set" : "");
			return -1;
		}
		if (b->dev != w->dev) {
			snprintf(w->err, sizeof(w->err), "tensor '%.64s' is in a buffer of %s, not of %s", t->name,
				 b->dev->name, w->dev->name);
			return -1;
		}
		m->buffer = b->handle;
		m->offset = off;
		if (note_buffer(w, b->handle.id) < 0)
			goto nomem;
	}
	if (map_put(w, t, idx) < 0)
		goto nomem;
	w->ptr[idx] = t;
	w->n++;
	return idx;
nomem:
	snprintf(w->err, sizeof(w->err), "out of memory serializing a graph");
	return -1;
}

static int32_t visit(struct pg_wire *w, const struct ggml_tensor *t, int depth)
{
	int32_t srcs[GGML_MAX_SRC], view = -1, idx = map_get(w, t);
	int is_node = idx == NODE_PENDING;

	if (idx >= 0)
		return idx;
	if (depth > MAX_DEPTH) {
		snprintf(w->err, sizeof(w->err), "graph nested deeper than %d tensors at '%.64s'", MAX_DEPTH, t->name);
		return -1;
	}
	for (int i = 0; i < GGML_MAX_SRC; i++) {
		srcs[i] = -1;
		if (is_node && t->src[i] == t)
			srcs[i] = SELF;
		else if (is_node && t->src[i] && (srcs[i] = visit(w, t->src[i], depth + 1)) < 0)
			return -1;
	}
	if (t->view_src && (view = visit(w, t->view_src, depth + 1)) < 0)
		return -1;
	return emit(w, t, is_node, srcs, view);
}

static void wire_init(struct pg_wire *w, struct pg_device *d, int with_buffers, int with_names)
{
	memset(w, 0, sizeof(*w));
	w->dev = d;
	w->with_buffers = with_buffers;
	w->with_names = with_names;
}

int pg_wire_graph(struct pg_wire *w, struct pg_device *d, const struct ggml_cgraph *g, int with_names)
{
	int n = ggml_graph_n_nodes((struct ggml_cgraph *)g);

	wire_init(w, d, 1, with_names);
	w->nodes = malloc((size_t)(n ? n : 1) * sizeof(*w->nodes));
	if (!w->nodes)
		goto nomem;
	/* mark the nodes first: a tensor is work only if it is one of them */
	for (int i = 0; i < n; i++) {
		const struct ggml_tensor *t = ggml_graph_node((struct ggml_cgraph *)g, i);

		if ((!no_op(t) || view_node(w, t)) && map_get(w, t) == ABSENT) {
			if (map_put(w, t, NODE_PENDING) < 0)
				goto nomem;
		}
	}
	for (int i = 0; i < n; i++) {
		const struct ggml_tensor *t = ggml_graph_node((struct ggml_cgraph *)g, i);
		int32_t idx;

		if (no_op(t) && !view_node(w, t))
			continue;
		idx = visit(w, t, 0);
		if (idx < 0) {
			size_t l = strlen(w->err);

			snprintf(w->err + l, sizeof(w->err) - l, ", read by node %d '%.64s' (%s)", i, t->name,
				 ggml_op_desc(t));
			return PPRPC_EINVAL;
		}
		/* a node listed twice runs twice, as ggml would run it */
		w->nodes[w->nnodes++] = idx;
	}
	return 0;
nomem:
	snprintf(w->err, sizeof(w->err), "out of memory serializing a graph");
	return PPRPC_ENOMEM;
}

int pg_wire_op(struct pg_wire *w, struct pg_device *d, const struct ggml_tensor *op, int32_t *ret_node)
{
	int32_t idx;

	wire_init(w, d, 0, 0);
	if (map_put(w, op, NODE_PENDING) < 0) {
		snprintf(w->err, sizeof(w->err), "out of memory");
		return PPRPC_ENOMEM;
	}
	idx = visit(w, op, 0);
	if (idx < 0)
		return PPRPC_EINVAL;
	*ret_node = idx;
	return 0;
}

void pg_wire_free(struct pg_wire *w)
{
	free(w->t);
	free(w->nodes);
	free(w->ptr);
	free(w->bufs);
	free(w->keys);
	free(w->vals);
	memset(w, 0, sizeof(*w));
}

int pg_wire_pack_graph(const struct pg_wire *w, uint32_t device, uint8_t **ret, size_t *ret_len)
{
	pprpc_ggml_graph_desc g;

	pg_wire_graph_desc(w, device, &g);
	return pprpc_ggml_graph_pack(&g, ret, ret_len);
}

void pg_wire_graph_desc(const struct pg_wire *w, uint32_t device, pprpc_ggml_graph_desc *g)
{
	memset(g, 0, sizeof(*g));
	g->device = device;
	g->tensors = w->t;
	g->n_tensors = w->n;
	g->nodes = w->nodes;
	g->n_nodes = w->nnodes;
	g->ggml_version = ggml_version();
}

void pg_wire_op_desc(const struct pg_wire *w, int32_t node, pprpc_ggml_op_desc *op)
{
	memset(op, 0, sizeof(*op));
	op->device = w->dev->index;
	op->tensors = w->t;
	op->n_tensors = w->n;
	op->node = node;
}

int pg_wire_pack_op(const struct pg_wire *w, int32_t node, uint8_t **ret, size_t *ret_len)
{
	pprpc_ggml_op_desc op;

	pg_wire_op_desc(w, node, &op);
	return pprpc_ggml_op_pack(&op, ret, ret_len);
}

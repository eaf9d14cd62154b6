/*
 * daemon/backend/ggml/ggml_build.c — validated wire tensors become ggml
 * tensors (steps 2 and 3 of ggml_engine.h), and the probes GGML_SUPPORTS and
 * GGML_ALLOC_SIZE.
 *
 * Tensors are made in a no_alloc ggml context whose memory we allocate (so
 * running out fails the request instead of aborting in ggml_init), with
 * data pointing into the buffers step 1 resolved.  A leaf (a tensor that is
 * not a node of this graph: a weight, an input, a node of an earlier graph)
 * is made as op NONE without sources: ggml only reads its bytes, and none of
 * its unchecked fields reaches a kernel.  A node keeps its op, op_params and
 * sources and passes the rules, then the backend's supports_op, before the
 * next tensor is made.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/rules/ggml_rules.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "pprpc/types.h"

/* ggml_op_desc indexes its name tables with op_params[0] unchecked. */
static const char *op_desc(const struct ggml_tensor *t, char *buf, size_t len)
{
	int32_t sub = t->op_params[0];

	if (t->op == GGML_OP_UNARY && sub >= 0 && sub < GGML_UNARY_OP_COUNT)
		snprintf(buf, len, "UNARY %s", ggml_unary_op_name((enum ggml_unary_op)sub));
	else if (t->op == GGML_OP_GLU && sub >= 0 && sub < GGML_GLU_OP_COUNT)
		snprintf(buf, len, "GLU %s", ggml_glu_op_name((enum ggml_glu_op)sub));
	else
		snprintf(buf, len, "%s", ggml_op_name(t->op));
	return buf;
}

/* "#12 'ffn_up-3' (MUL_MAT)" */
static const char *node_who(const struct ggml_tensor *t, size_t i, char *buf, size_t len)
{
	char op[48];

	op_desc(t, op, sizeof(op));
	if (t->name[0])
		snprintf(buf, len, "#%zu '%s' (%s)", i, t->name, op);
	else
		snprintf(buf, len, "#%zu (%s)", i, op);
	return buf;
}

/* Bytes of a context with room for n tensors and, when graph_size > 0, a
 * graph. */
static size_t ctx_size(size_t n, size_t graph_size)
{
	return n * ggml_tensor_overhead() + (graph_size ? ggml_graph_overhead_custom(graph_size, false) : 0);
}

static int ctx_new(size_t n, size_t graph_size, void **ret_mem, struct ggml_context **ret_ctx)
{
	size_t size = ctx_size(n, graph_size);
	struct ggml_init_params ip = { .mem_size = size, .no_alloc = true };

	ip.mem_buffer = malloc(size);
	if (!ip.mem_buffer)
		return PPRPC_ENOMEM;
	*ret_ctx = ggml_init(ip);
	if (!*ret_ctx) {
		free(ip.mem_buffer);
		return PPRPC_ENOMEM;
	}
	*ret_mem = ip.mem_buffer;
	return 0;
}

/* Make tensor i from its validated wire form; its sources and view source
 * are earlier tensors, already made. */
static void make(struct ggml_context *ctx, const Pprpc__GgmlTensor *w, const struct gge_wt *plan, size_t i,
		 struct ggml_tensor **t, bool as_node)
{
	const struct gge_wt *p = &plan[i];
	struct ggml_tensor *x = ggml_new_tensor(ctx, (enum ggml_type)w->type, GGML_MAX_DIMS, w->ne);

	for (int k = 0; k < GGML_MAX_DIMS; k++)
		x->nb[k] = (size_t)w->nb[k];
	x->flags = w->flags;
	if (w->name)
		ggml_set_name(x, w->name);
	if (p->base != (int)i) {
		x->view_src = t[p->base];
		x->view_offs = (size_t)p->offs;
	}
	if (p->wb.buf) {
		x->buffer = p->wb.buf;
		x->data = (uint8_t *)ggml_backend_buffer_get_base(p->wb.buf) + p->offset + p->offs;
	}
	if (as_node) {
		x->op = (enum ggml_op)w->op;
		if (w->op_params.len)
			memcpy(x->op_params, w->op_params.data, w->op_params.len);
		for (size_t k = 0; k < w->n_src; k++)
			/* a source index equal to the tensor's own is ggml_cast's
			 * self-named destination (ggml_wire.c allows it for CPY) */
			x->src[k] = w->src[k] < 0 ? NULL : (size_t)w->src[k] == i ? x : t[w->src[k]];
	}
	t[i] = x;
}

/* The rules, then the backend. */
static int check_node(struct gge_dev *g, const struct ggml_tensor *x, size_t i, char *err, size_t errlen)
{
	char who[120], why[200] = "";
	int rc = ggml_rules_check(x, why, sizeof(why));

	if (rc < 0) {
		snprintf(err, errlen, "node %s: %s", node_who(x, i, who, sizeof(who)), why);
		return rc;
	}
	if (!ggml_backend_dev_supports_op(g->dev, x)) {
		snprintf(err, errlen, "node %s: ggml:%s does not support it", node_who(x, i, who, sizeof(who)), g->name);
		return PPRPC_EUNSUPP;
	}
	return 0;
}

/*
 * A node writes its own extent while it reads its sources (the rule of
 * kernels/tensor.h: kern_overlap_allowed, which the native engine applies
 * too).  ggml-alloc lets
 * a node take a source's memory only exactly (same start, type, ne and nb)
 * and only for an op that can run in place; ggml's in-place constructors
 * (and CPY) make the node a view of the source it overwrites.  Anything
 * else is refused: a kernel would read what it already overwrote (memcpy
 * over overlapping ranges), and one that follows indices would follow
 * values it overwrote after their check (ggml_guard.c checks them before the
 * node runs).
 */
static int check_overlap(const struct ggml_tensor *x, uint64_t ex, size_t i, char *err, size_t errlen)
{
	char who[120];
	int exact = 0;

	if (ggml_op_is_empty(x->op) || !x->data || !ex)
		return 0;
	for (int s = 0; s < GGML_MAX_SRC; s++) {
		const struct ggml_tensor *src = x->src[s];
		uintptr_t a = (uintptr_t)x->data, b;
		size_t es;

		/* ggml_cast's CPY names itself as src[1]: its destination, which
		 * it writes, not a source it reads */
		if (!src || !src->data || src == x)
			continue;
		b = (uintptr_t)src->data;
		es = ggml_nbytes(src);
		if (!es || !kern_ranges_overlap(a, ex, b, es))
			continue;
		/* (ggml's in-place constructors and CPY make the node a view of
		 * what it overwrites; at most one source may be taken so) */
		if (kern_overlap_allowed(a == b, ggml_are_same_layout(x, src), ggml_op_can_inplace(x->op) || x->view_src) &&
		    exact++ == 0)
			continue;
		snprintf(err, errlen, "node %s: its output overlaps source %d (only an op that can run in place may "
			 "take one source's exact memory)", node_who(x, i, who, sizeof(who)), s);
		return PPRPC_EGRAPH;
	}
	return 0;
}

/* Device buffers: ggml-cuda pads quantized rows (its get_alloc_size asserts
 * plain rows, init_tensor zeroes the padding, MMQ reads it), so such a
 * tensor needs plain rows and its padded size inside the buffer. */
static int check_padding(struct gge_dev *g, const struct ggml_tensor *x, const struct gge_wt *p, size_t i,
			 char *err, size_t errlen)
{
	size_t padded;

	if (g->host || !p->wb.buf || p->base != (int)i)
		return 0;
	if (ggml_is_quantized(x->type) && x->nb[1] != ggml_row_size(x->type, x->ne[0])) {
		snprintf(err, errlen, "tensor #%zu: a quantized tensor in a ggml:%s buffer needs plain rows", i,
			 g->name);
		return PPRPC_ESHAPE;
	}
	padded = ggml_backend_buft_get_alloc_size(g->buft, x);
	if (padded > p->wb.size - p->offset) {
		snprintf(err, errlen, "tensor #%zu: with ggml:%s's padding it needs %zu bytes at %" PRIu64
			 ", outside its buffer of %" PRIu64, i, g->name, padded, p->offset, p->wb.size);
		return PPRPC_ERANGE;
	}
	return 0;
}

/* Use counts as ggml_build_forward_expand leaves them: backends decide
 * fusions on them (ggml_node_has_n_uses). */
static size_t slot(struct ggml_cgraph *cg, struct ggml_tensor *x)
{
	size_t h = ggml_hash_find(&cg->visited_hash_set, x);

	if (h != GGML_HASHSET_FULL && !ggml_bitset_get(cg->visited_hash_set.used, h)) {
		cg->visited_hash_set.keys[h] = x;
		ggml_bitset_set(cg->visited_hash_set.used, h);
		cg->use_counts[h] = 0;
	}
	return h;
}

static int count_uses(struct ggml_cgraph *cg)
{
	for (int k = 0; k < cg->n_nodes; k++) {
		struct ggml_tensor *x = cg->nodes[k];

		for (int s = 0; s < GGML_MAX_SRC; s++) {
			size_t h;

			if (!x->src[s])
				continue;
			h = slot(cg, x->src[s]);
			if (h == GGML_HASHSET_FULL)
				return PPRPC_EINTERNAL;
			cg->use_counts[h]++;
		}
		if (slot(cg, x) == GGML_HASHSET_FULL)
			return PPRPC_EINTERNAL;
	}
	return 0;
}

/* An upper bound: at most one guard and one op entry per node
 * (ggml_guard.c's table has one index source per op; ggml_ops.h). */
uint64_t gge_graph_host_size(size_t n, size_t nnodes)
{
	return (uint64_t)ctx_size(n, n) + (uint64_t)n * (sizeof(struct gge_wt) + sizeof(struct ggml_tensor *)) +
	       (uint64_t)nnodes * (sizeof(int) + 64 + GGE_OP_NODE_BYTES) + sizeof(struct gge_graph);
}

int gge_graph_build(struct gge_dev *g, const Pprpc__GgmlTensor *const *w, size_t n, const int32_t *nodes,
		    size_t nnodes, gge_resolve_fn resolve, void *arg, struct gge_graph **ret_gg, char *err,
		    size_t errlen)
{
	struct gge_graph *gg;
	int rc = PPRPC_ENOMEM;

	if (nnodes == 0) {
		snprintf(err, errlen, "a ggml graph needs at least one node");
		return PPRPC_EINVAL;
	}
	gg = calloc(1, sizeof(*gg));
	if (!gg)
		return PPRPC_ENOMEM;
	gg->plan = calloc(n ? n : 1, sizeof(*gg->plan));
	gg->t = calloc(n ? n : 1, sizeof(*gg->t));
	gg->order = calloc(nnodes, sizeof(*gg->order));
	if (!gg->plan || !gg->t || !gg->order)
		goto fail;
	rc = gge_wire_check(w, n, nodes, nnodes, GGE_GRAPH, resolve, arg, gg->plan, err, errlen);
	if (rc < 0)
		goto fail;
	gg->ntensors = (int)n;
	gg->nnodes = (int)nnodes;
	rc = ctx_new(n, n, &gg->mem, &gg->ctx);
	if (rc < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		bool node = gg->plan[i].node >= 0;

		make(gg->ctx, w[i], gg->plan, i, gg->t, node);
		rc = check_padding(g, gg->t[i], &gg->plan[i], i, err, errlen);
		if (rc == 0 && node)
			rc = check_node(g, gg->t[i], i, err, errlen);
		if (rc == 0 && node)
			rc = check_overlap(gg->t[i], gg->plan[i].reach, i, err, errlen);
		if (rc < 0)
			goto fail;
	}
	gg->cg = ggml_new_graph_custom(gg->ctx, n, false);
	for (size_t k = 0; k < nnodes; k++) {
		gg->order[k] = nodes[k];
		gg->cg->nodes[k] = gg->t[nodes[k]];
	}
	gg->cg->n_nodes = (int)nnodes;
	/* Nothing of a node changes after this (its tensors, sources and
	 * addresses are fixed, index copies included: gge_graph_shadow moves
	 * them once, before any run), so the graph may say it is the same
	 * graph on every run: ggml-cuda then replays its CUDA graph without
	 * comparing each node with the last run's, which it does on every
	 * launch of a graph without an id (~40 ns a node, every stage of every
	 * decoded token; doc/llama-vs-rpc.md).  A run of part of the graph (a
	 * segment, ggml_graph_view) carries no id. */
	if (g->graph_reuse)
		gg->cg->uid = ggml_graph_next_uid(); /* ggml's counter (ggml-impl.h) */
	rc = count_uses(gg->cg);
	if (rc < 0) {
		snprintf(err, errlen, "graph hash set full");
		goto fail;
	}
	rc = gge_guards_plan(gg, w, err, errlen);
	if (rc < 0)
		goto fail;
	rc = gge_ops_plan(g, gg);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	gg->host_bytes = gge_graph_host_size(n, nnodes);
	*ret_gg = gg;
	return 0;
fail:
	gge_graph_free(gg);
	return rc;
}

void gge_graph_free(struct gge_graph *gg)
{
	if (!gg)
		return;
	if (gg->ctx)
		ggml_free(gg->ctx);
	free(gg->mem);
	free(gg->t);
	free(gg->plan);
	free(gg->order);
	free(gg->guards);
	gge_ops_free(gg);
	free(gg->scratch);
	free(gg->gpu_checks);
	gge_buf_free(gg->shadow);
	free(gg);
}

/* ---- probes ------------------------------------------------------------------ */

struct probe {
	void *mem;
	struct ggml_context *ctx;
	struct gge_wt *plan;
	struct ggml_tensor **t;
};

static void probe_free(struct probe *pr)
{
	if (pr->ctx)
		ggml_free(pr->ctx);
	free(pr->mem);
	free(pr->plan);
	free(pr->t);
}

/* Tensors [0, node] validated and made, node as a node (its sources as
 * leaves: only their shapes and buffers matter to the question). */
static int probe_make(struct gge_dev *g, const Pprpc__GgmlTensor *const *w, size_t n, int32_t node,
		      gge_resolve_fn resolve, void *arg, struct probe *pr, char *err, size_t errlen)
{
	size_t m;
	int rc;

	memset(pr, 0, sizeof(*pr));
	if (node < 0 || (size_t)node >= n) {
		snprintf(err, errlen, "node index %d outside the %zu tensors", node, n);
		return PPRPC_EINVAL;
	}
	m = (size_t)node + 1;
	pr->plan = calloc(m, sizeof(*pr->plan));
	pr->t = calloc(m, sizeof(*pr->t));
	if (!pr->plan || !pr->t)
		return PPRPC_ENOMEM;
	rc = gge_wire_check(w, m, NULL, 0, GGE_PROBE, resolve, arg, pr->plan, err, errlen);
	if (rc == 0)
		rc = ctx_new(m, 0, &pr->mem, &pr->ctx);
	for (size_t i = 0; rc == 0 && i < m; i++) {
		make(pr->ctx, w[i], pr->plan, i, pr->t, i == (size_t)node);
		rc = check_padding(g, pr->t[i], &pr->plan[i], i, err, errlen);
	}
	return rc;
}

int gge_probe_supports(struct gge_dev *g, const Pprpc__GgmlTensor *const *w, size_t n, int32_t node,
		       gge_resolve_fn resolve, void *arg, bool *ret_ok, char *err, size_t errlen)
{
	struct probe pr;
	int rc = probe_make(g, w, n, node, resolve, arg, &pr, err, errlen);

	if (rc == 0) {
		/* A malformed request is an error; a node the engine would
		 * refuse is an answer. */
		if (pr.t[node]->op == GGML_OP_NONE)
			*ret_ok = true;
		else
			*ret_ok = check_node(g, pr.t[node], (size_t)node, err, errlen) == 0;
	}
	probe_free(&pr);
	return rc;
}

int gge_probe_alloc_size(struct gge_dev *g, const Pprpc__GgmlTensor *const *w, size_t n, int32_t node,
			 gge_resolve_fn resolve, void *arg, uint64_t *ret_size, char *err, size_t errlen)
{
	struct probe pr;
	int rc = probe_make(g, w, n, node, resolve, arg, &pr, err, errlen);
	const struct ggml_tensor *x;

	if (rc == 0) {
		/* A buffer type's get_alloc_size may read an op's sources and
		 * asserts on what it finds (ggml-cuda's FLASH_ATTN_EXT: K !=
		 * NULL; it aborted pprpcd on an H200).  Only a node that passes
		 * the rules and supports_op, as a graph node must before ggml
		 * sees it, is asked as the op it is.  Any other is asked as a
		 * plain tensor of its type and shape: ggml itself asks with
		 * sources missing (weight placement), and a node that fails the
		 * rules is refused when a graph names it, so its op's extra
		 * scratch is moot. */
		if (pr.t[node]->op != GGML_OP_NONE && check_node(g, pr.t[node], (size_t)node, err, errlen) < 0) {
			pr.t[node]->op = GGML_OP_NONE;
			memset(pr.t[node]->src, 0, sizeof(pr.t[node]->src));
			err[0] = '\0';
		}
		x = pr.t[node];
		/* check_padding only looked at tensors with memory. */
		if (!g->host && ggml_is_quantized(x->type) && x->nb[1] != ggml_row_size(x->type, x->ne[0])) {
			snprintf(err, errlen, "tensor #%d: a quantized tensor for ggml:%s needs plain rows", node,
				 g->name);
			rc = PPRPC_ESHAPE;
		} else {
			*ret_size = ggml_backend_buft_get_alloc_size(g->buft, x);
		}
	}
	probe_free(&pr);
	return rc;
}

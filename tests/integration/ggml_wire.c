/* tests/integration/ggml_wire.c — see ggml_wire.h. */
#include "tests/integration/ggml_wire.h"

#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"

int gw_index(const struct gw_graph *g, const struct ggml_tensor *t)
{
	for (size_t i = 0; i < g->msg.n_tensors; i++)
		if (g->local[i] == t)
			return (int)i;
	return -1;
}

static int grow(struct gw_graph *g)
{
	size_t cap = g->cap ? g->cap * 2 : 64;
	Pprpc__GgmlTensor *t = realloc(g->t, cap * sizeof(*t));
	struct ggml_tensor **local;

	if (!t)
		return -1;
	g->t = t;
	local = realloc(g->local, cap * sizeof(*local));
	if (!local)
		return -1;
	g->local = local;
	g->cap = cap;
	return 0;
}

static int add(struct gw_graph *g, struct ggml_tensor *x, const struct gw_map *map, int nmap)
{
	int64_t srcs[GGML_MAX_SRC];
	int view = -1, idx;
	Pprpc__GgmlTensor *w;
	ggml_backend_buffer_t lb;

	if (!x)
		return -1;
	idx = gw_index(g, x);
	if (idx >= 0)
		return idx;
	for (int s = 0; s < GGML_MAX_SRC; s++) {
		srcs[s] = -1;
		if (x->src[s] && (srcs[s] = add(g, x->src[s], map, nmap)) < 0)
			return -2;
	}
	if (x->view_src && (view = add(g, x->view_src, map, nmap)) < 0)
		return -2;
	if (g->msg.n_tensors == g->cap && grow(g) < 0)
		return -2;
	w = &g->t[g->msg.n_tensors];
	pprpc__ggml_tensor__init(w);
	w->type = (uint32_t)x->type;
	w->n_ne = GGML_MAX_DIMS;
	w->ne = malloc(sizeof(int64_t) * GGML_MAX_DIMS);
	w->n_nb = GGML_MAX_DIMS;
	w->nb = malloc(sizeof(uint64_t) * GGML_MAX_DIMS);
	w->n_src = GGML_MAX_SRC;
	w->src = malloc(sizeof(int32_t) * GGML_MAX_SRC);
	/* room past the limit, for tests that claim a longer field */
	w->op_params.data = calloc(1, GGML_MAX_OP_PARAMS * 2);
	if (!w->ne || !w->nb || !w->src || !w->op_params.data)
		return -2;
	for (int k = 0; k < GGML_MAX_DIMS; k++) {
		w->ne[k] = x->ne[k];
		w->nb[k] = x->nb[k];
	}
	/* trailing empty source slots are left out, as a client would */
	while (w->n_src > 0 && srcs[w->n_src - 1] < 0)
		w->n_src--;
	for (size_t s = 0; s < w->n_src; s++)
		w->src[s] = (int32_t)srcs[s];
	w->op = (uint32_t)x->op;
	memcpy(w->op_params.data, x->op_params, GGML_MAX_OP_PARAMS);
	w->op_params.len = GGML_MAX_OP_PARAMS;
	w->flags = x->flags;
	w->view_src = view;
	w->name = x->name;
	if (x->view_src) {
		w->view_offs = x->view_offs;
	} else {
		lb = x->buffer;
		w->buffer = 0;
		for (int i = 0; i < nmap; i++)
			if (map[i].local == lb)
				w->buffer = map[i].remote;
		if (!w->buffer)
			return -2;
		w->offset = (uint64_t)((uint8_t *)x->data - (uint8_t *)ggml_backend_buffer_get_base(lb));
	}
	g->local[g->msg.n_tensors] = x;
	return (int)g->msg.n_tensors++;
}

int gw_serialize(struct ggml_cgraph *cg, const struct gw_map *map, int nmap, uint32_t device, struct gw_graph *out)
{
	int n = ggml_graph_n_nodes(cg);

	memset(out, 0, sizeof(*out));
	pprpc__ggml_graph_create__init(&out->msg);
	out->msg.device = device;
	out->msg.ggml_version = (char *)ggml_version();
	out->nodes = calloc((size_t)n + 1, sizeof(*out->nodes));
	if (!out->nodes)
		return -1;
	for (int i = 0; i < n; i++) {
		int idx = add(out, ggml_graph_node(cg, i), map, nmap);

		if (idx < 0)
			return -1;
		out->nodes[i] = idx;
	}
	out->msg.n_nodes = (size_t)n;
	out->msg.nodes = out->nodes;
	out->tp = calloc(out->msg.n_tensors + 1, sizeof(*out->tp));
	if (!out->tp)
		return -1;
	for (size_t i = 0; i < out->msg.n_tensors; i++)
		out->tp[i] = &out->t[i];
	out->msg.tensors = out->tp;
	return 0;
}

void gw_free(struct gw_graph *g)
{
	for (size_t i = 0; i < g->msg.n_tensors; i++) {
		free(g->t[i].ne);
		free(g->t[i].nb);
		free(g->t[i].src);
		free(g->t[i].op_params.data);
	}
	free(g->t);
	free(g->tp);
	free(g->nodes);
	free(g->local);
	memset(g, 0, sizeof(*g));
}

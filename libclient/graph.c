/* libclient/graph.c — GRAPH_CREATE / GRAPH_RUN / GRAPH_FREE. */
#include <stdlib.h>
#include <string.h>

#include <stddef.h>

#include "libclient/client.h"
#include "libclient/graph_builder.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

/* The wire form of one builder; every array is sized up front and freed in
 * one place. */
struct wire_graph {
	Pprpc__GraphCreate m;
	Pprpc__Tensor *t, **tp;
	Pprpc__Node *n, **np;
	int32_t *srcs;
	float *f;
	int32_t *i;
};

static void wire_free(struct wire_graph *w)
{
	free(w->t);
	free(w->tp);
	free(w->n);
	free(w->np);
	free(w->srcs);
	free(w->f);
	free(w->i);
}

/* Trailing zero parameters are not sent (they are zero by contract). */
static size_t used_f(const float *v, size_t n)
{
	while (n > 0 && v[n - 1] == 0.0f)
		n--;
	return n;
}

static size_t used_i(const int32_t *v, size_t n)
{
	while (n > 0 && v[n - 1] == 0)
		n--;
	return n;
}

static int wire_build(const pprpc_graph_builder *gb, uint32_t device, struct wire_graph *w)
{
	size_t nt = (size_t)gb->nt, nn = (size_t)gb->nn;

	memset(w, 0, sizeof(*w));
	pprpc__graph_create__init(&w->m);
	w->t = calloc(nt ? nt : 1, sizeof(*w->t));
	w->tp = calloc(nt ? nt : 1, sizeof(*w->tp));
	w->n = calloc(nn ? nn : 1, sizeof(*w->n));
	w->np = calloc(nn ? nn : 1, sizeof(*w->np));
	w->srcs = calloc((nn ? nn : 1) * PPRPC_MAX_SRC, sizeof(*w->srcs));
	w->f = calloc((nn ? nn : 1) * PPRPC_OP_MAX_F, sizeof(*w->f));
	w->i = calloc((nn ? nn : 1) * PPRPC_OP_MAX_I, sizeof(*w->i));
	if (!w->t || !w->tp || !w->n || !w->np || !w->srcs || !w->f || !w->i)
		return PPRPC_ENOMEM;
	for (size_t k = 0; k < nt; k++) {
		const struct gb_tensor *s = &gb->t[k];
		Pprpc__Tensor *t = &w->t[k];

		pprpc__tensor__init(t);
		t->dtype = (uint32_t)s->t.dtype;
		t->n_ne = PPRPC_MAX_DIMS;
		t->ne = (int64_t *)s->t.ne;
		t->n_nb = PPRPC_MAX_DIMS;
		t->nb = (uint64_t *)s->t.nb;
		t->buffer = s->t.buffer.id;
		t->offset = s->t.offset;
		t->view_of = (uint32_t)s->view_of;
		w->tp[k] = t;
	}
	for (size_t k = 0; k < nn; k++) {
		const struct gb_node *s = &gb->n[k];
		Pprpc__Node *n = &w->n[k];

		pprpc__node__init(n);
		n->op = (uint32_t)s->op;
		n->n_src = (size_t)s->nsrc;
		n->src = w->srcs + k * PPRPC_MAX_SRC;
		memcpy(n->src, s->src, (size_t)s->nsrc * sizeof(int32_t));
		n->dst = s->dst;
		n->fparams = w->f + k * PPRPC_OP_MAX_F;
		n->n_fparams = used_f(s->p.f, PPRPC_OP_MAX_F);
		memcpy(n->fparams, s->p.f, sizeof(s->p.f));
		n->iparams = w->i + k * PPRPC_OP_MAX_I;
		n->n_iparams = used_i(s->p.i, PPRPC_OP_MAX_I);
		memcpy(n->iparams, s->p.i, sizeof(s->p.i));
		w->np[k] = n;
	}
	w->m.device = device;
	w->m.n_tensors = nt;
	w->m.tensors = w->tp;
	w->m.n_nodes = nn;
	w->m.nodes = w->np;
	return 0;
}

PPRPC_API int pprpc_graph_create(pprpc_client *c, uint32_t device, const pprpc_graph_builder *gb,
				 pprpc_graph *out)
{
	struct wire_graph w;
	int rc;

	if (!gb || !out)
		return client_fail(c, PPRPC_EINVAL, "graph_create: NULL builder or output");
	rc = wire_build(gb, device, &w);
	if (rc < 0) {
		wire_free(&w);
		return client_fail(c, rc, "out of memory");
	}
	rc = rpc_call_u64(c, MSG_GRAPH_CREATE, &w.m.base, &pprpc__graph_create_reply__descriptor,
			  offsetof(Pprpc__GraphCreateReply, graph), &out->id);
	wire_free(&w);
	return rc;
}

PPRPC_API int pprpc_graph_run(pprpc_client *c, pprpc_graph g)
{
	Pprpc__GraphRun req = PPRPC__GRAPH_RUN__INIT;

	req.graph = g.id;
	return rpc_call(c, MSG_GRAPH_RUN, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_graph_free(pprpc_client *c, pprpc_graph g)
{
	Pprpc__GraphFree req = PPRPC__GRAPH_FREE__INIT;

	req.graph = g.id;
	return rpc_call(c, MSG_GRAPH_FREE, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

/*
 * libclient/ggml.c — ggml graphs and op queries on a rank's ggml devices
 * (pprpc_ggml.h): GGML_GRAPH_CREATE, GGML_SUPPORTS, GGML_ALLOC_SIZE.
 *
 * The caller's pprpc_ggml_tensor array becomes the messages' GgmlTensor
 * list with no copy of the arrays: the wire structs point into the caller's
 * (ne, nb, src, op_params, name), valid for the call, and every message is
 * packed before the call returns.  The wire bytes are those of the
 * message's fields alone, so a graph packs to the same bytes however the
 * caller got to them (its cache keys depend on that).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client.h"
#include "pprpc_ggml.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

_Static_assert(sizeof(((pprpc_ggml_tensor *)0)->ne[0]) == sizeof(int64_t) &&
		       sizeof(((pprpc_ggml_tensor *)0)->nb[0]) == sizeof(uint64_t) &&
		       sizeof(((pprpc_ggml_tensor *)0)->src[0]) == sizeof(int32_t),
	       "the wire structs point into the caller's arrays");

/* The GgmlTensor list of one message. */
struct wire {
	Pprpc__GgmlTensor *t;
	Pprpc__GgmlTensor **tp;
	size_t n;
};

static void wire_free(struct wire *w)
{
	free(w->t);
	free(w->tp);
	memset(w, 0, sizeof(*w));
}

/* Bounds are checked here, not left to the rank, where they decide how far
 * the caller's memory is read. */
static int wire_make(pprpc_client *c, const pprpc_ggml_tensor *src, size_t n, struct wire *w)
{
	memset(w, 0, sizeof(*w));
	if (n && !src)
		return c ? client_fail(c, PPRPC_EINVAL, "tensors missing") : PPRPC_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (src[i].n_src > PPRPC_GGML_MAX_SRC || src[i].op_params_len > PPRPC_GGML_MAX_OP_PARAMS ||
		    (src[i].op_params_len && !src[i].op_params))
			return c ? client_fail(c, PPRPC_EINVAL, "tensor %zu: %u sources, %u bytes of op_params", i,
					       src[i].n_src, src[i].op_params_len)
				 : PPRPC_EINVAL;
	}
	w->t = malloc((n ? n : 1) * sizeof(*w->t));
	w->tp = malloc((n ? n : 1) * sizeof(*w->tp));
	if (!w->t || !w->tp) {
		wire_free(w);
		return c ? client_fail(c, PPRPC_ENOMEM, "out of memory") : PPRPC_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const pprpc_ggml_tensor *s = &src[i];
		Pprpc__GgmlTensor *m = &w->t[i];

		pprpc__ggml_tensor__init(m);
		m->type = s->type;
		m->n_ne = PPRPC_GGML_MAX_DIMS;
		m->ne = (int64_t *)s->ne;
		m->n_nb = PPRPC_GGML_MAX_DIMS;
		m->nb = (uint64_t *)s->nb;
		m->op = s->op;
		m->op_params.data = (uint8_t *)s->op_params;
		m->op_params.len = s->op_params_len;
		m->flags = s->flags;
		m->n_src = s->n_src;
		m->src = (int32_t *)s->src;
		m->view_src = s->view_src;
		m->view_offs = s->view_offs;
		m->buffer = s->buffer.id;
		m->offset = s->offset;
		m->name = (char *)(s->name ? s->name : "");
		w->tp[i] = m;
	}
	w->n = n;
	return 0;
}

static void create_msg(const pprpc_ggml_graph_desc *g, const struct wire *w, Pprpc__GgmlGraphCreate *m)
{
	m->device = g->device;
	m->n_tensors = w->n;
	m->tensors = w->tp;
	m->n_nodes = g->n_nodes;
	m->nodes = (int32_t *)g->nodes;
	m->ggml_version = (char *)(g->ggml_version ? g->ggml_version : "");
}

static int pack(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *p = malloc(len ? len : 1);

	if (!p)
		return PPRPC_ENOMEM;
	protobuf_c_message_pack(m, p);
	*ret = p;
	*ret_len = len;
	return 0;
}

static int graph_ok(pprpc_client *c, const pprpc_ggml_graph_desc *g)
{
	if (!g || (g->n_nodes && !g->nodes))
		return c ? client_fail(c, PPRPC_EINVAL, "no graph") : PPRPC_EINVAL;
	return 0;
}

/* The GGML_GRAPH_CREATE of g, its tensors' wire form in w (wire_free
 * after sending), for a client's request. */
static int create_prepare(pprpc_client *c, const pprpc_ggml_graph_desc *g, struct wire *w, Pprpc__GgmlGraphCreate *m)
{
	int rc;

	if ((rc = graph_ok(c, g)) < 0 || (rc = wire_make(c, g->tensors, g->n_tensors, w)) < 0)
		return rc;
	create_msg(g, w, m);
	return 0;
}

PPRPC_API int pprpc_ggml_graph_pack(const pprpc_ggml_graph_desc *g, uint8_t **ret, size_t *ret_len)
{
	Pprpc__GgmlGraphCreate m = PPRPC__GGML_GRAPH_CREATE__INIT;
	struct wire w;
	int rc;

	if (graph_ok(NULL, g) < 0 || !ret || !ret_len)
		return PPRPC_EINVAL;
	rc = wire_make(NULL, g->tensors, g->n_tensors, &w);
	if (rc < 0)
		return rc;
	create_msg(g, &w, &m);
	rc = pack(&m.base, ret, ret_len);
	wire_free(&w);
	return rc;
}

PPRPC_API int pprpc_ggml_op_pack(const pprpc_ggml_op_desc *op, uint8_t **ret, size_t *ret_len)
{
	Pprpc__GgmlSupports m = PPRPC__GGML_SUPPORTS__INIT;
	struct wire w;
	int rc;

	if (!op || !ret || !ret_len)
		return PPRPC_EINVAL;
	rc = wire_make(NULL, op->tensors, op->n_tensors, &w);
	if (rc < 0)
		return rc;
	m.device = op->device;
	m.n_tensors = w.n;
	m.tensors = w.tp;
	m.node = op->node;
	rc = pack(&m.base, ret, ret_len);
	wire_free(&w);
	return rc;
}

PPRPC_API int pprpc_ggml_graph_create(pprpc_client *c, const pprpc_ggml_graph_desc *g, pprpc_graph *out)
{
	Pprpc__GgmlGraphCreate m = PPRPC__GGML_GRAPH_CREATE__INIT;
	ProtobufCMessage *rep = NULL;
	struct wire w;
	int rc;

	if (!c || !out)
		return PPRPC_EINVAL;
	if ((rc = create_prepare(c, g, &w, &m)) < 0)
		return rc;
	rc = rpc_call(c, MSG_GGML_GRAPH_CREATE, &m.base, NULL, 0, &pprpc__graph_create_reply__descriptor, &rep,
		      NULL, 0);
	wire_free(&w);
	if (rc < 0)
		return rc;
	out->id = ((const Pprpc__GraphCreateReply *)rep)->graph;
	meta_free(rep);
	return 0;
}

PPRPC_API int pprpc_ggml_graph_create_run(pprpc_client *c, const pprpc_ggml_graph_desc *g, pprpc_request **out)
{
	Pprpc__GgmlGraphCreate m = PPRPC__GGML_GRAPH_CREATE__INIT;
	pprpc_request *r;
	struct wire w;
	int rc;

	if (!c || !out)
		return PPRPC_EINVAL;
	if ((rc = create_prepare(c, g, &w, &m)) < 0)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r) {
		wire_free(&w);
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	}
	m.run = 1;
	r->p.rep_desc = &pprpc__graph_create_reply__descriptor;
	c->err[0] = '\0';
	rc = rpc_send(c, MSG_GGML_GRAPH_CREATE, 0, &m.base, NULL, 0, &r->p);
	wire_free(&w);
	if (rc < 0) {
		/* a failed write broke the stream, which completed r; one
		 * refused before writing was never registered */
		rpc_forget(c, &r->p);
		meta_free(r->p.rep);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* An op query: GGML_SUPPORTS and GGML_ALLOC_SIZE have the same fields. */
static int op_call(pprpc_client *c, uint16_t type, const pprpc_ggml_op_desc *op,
		   const ProtobufCMessageDescriptor *rep_desc, ProtobufCMessage **ret_rep)
{
	Pprpc__GgmlSupports s = PPRPC__GGML_SUPPORTS__INIT;
	Pprpc__GgmlAllocSize a = PPRPC__GGML_ALLOC_SIZE__INIT;
	struct wire w;
	int rc;

	if (!c || !op)
		return PPRPC_EINVAL;
	rc = wire_make(c, op->tensors, op->n_tensors, &w);
	if (rc < 0)
		return rc;
	if (type == MSG_GGML_SUPPORTS) {
		s.device = op->device;
		s.n_tensors = w.n;
		s.tensors = w.tp;
		s.node = op->node;
	} else {
		a.device = op->device;
		a.n_tensors = w.n;
		a.tensors = w.tp;
		a.node = op->node;
	}
	rc = rpc_call(c, type, type == MSG_GGML_SUPPORTS ? &s.base : &a.base, NULL, 0, rep_desc, ret_rep, NULL, 0);
	wire_free(&w);
	return rc;
}

PPRPC_API int pprpc_ggml_op_supported(pprpc_client *c, const pprpc_ggml_op_desc *op, int *out_supported,
				      char *reason, size_t reason_len)
{
	ProtobufCMessage *rep = NULL;
	const Pprpc__GgmlSupportsReply *r;
	int rc;

	if (!out_supported)
		return PPRPC_EINVAL;
	rc = op_call(c, MSG_GGML_SUPPORTS, op, &pprpc__ggml_supports_reply__descriptor, &rep);
	if (rc < 0)
		return rc;
	r = (const Pprpc__GgmlSupportsReply *)rep;
	*out_supported = r->supported ? 1 : 0;
	if (reason && reason_len)
		snprintf(reason, reason_len, "%s", !r->supported && r->reason ? r->reason : "");
	meta_free(rep);
	return 0;
}

PPRPC_API int pprpc_ggml_op_alloc_size(pprpc_client *c, const pprpc_ggml_op_desc *op, uint64_t *out_size)
{
	ProtobufCMessage *rep = NULL;
	int rc;

	if (!out_size)
		return PPRPC_EINVAL;
	rc = op_call(c, MSG_GGML_ALLOC_SIZE, op, &pprpc__ggml_alloc_size_reply__descriptor, &rep);
	if (rc < 0)
		return rc;
	*out_size = ((const Pprpc__GgmlAllocSizeReply *)rep)->size;
	meta_free(rep);
	return 0;
}

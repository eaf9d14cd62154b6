/*
 * libclient/graph_builder.c — building graphs on the client.
 *
 * Shapes are checked here with kernels/ops.h, the same rules the daemon
 * applies when the graph arrives, so a mistake is reported where it is made
 * (with the op and the shapes) instead of as a remote error later.
 */
#include "libclient/graph_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(pprpc_graph_builder *gb, int code, const char *msg)
{
	snprintf(gb->err, sizeof(gb->err), "%s", msg);
	return code;
}

static void to_kern(const pprpc_tensor *t, struct kern_tensor *k)
{
	k->dtype = t->dtype;
	memcpy(k->ne, t->ne, sizeof(k->ne));
	memcpy(k->nb, t->nb, sizeof(k->nb));
	k->data = NULL;
}

static int push_tensor(pprpc_graph_builder *gb, const pprpc_tensor *t, int view_of)
{
	struct kern_tensor k;

	to_kern(t, &k);
	if (kern_tensor_check(&k) < 0)
		return fail(gb, PPRPC_EINVAL, "invalid tensor descriptor");
	if (gb->nt == gb->tcap) {
		int ncap = gb->tcap ? gb->tcap * 2 : 16;
		struct gb_tensor *p;

		if (ncap > PPRPC_MAX_GRAPH_TENSORS)
			return fail(gb, PPRPC_ETOOBIG, "too many tensors in one graph");
		p = realloc(gb->t, (size_t)ncap * sizeof(*p));
		if (!p)
			return fail(gb, PPRPC_ENOMEM, "out of memory");
		gb->t = p;
		gb->tcap = ncap;
	}
	gb->t[gb->nt].t = *t;
	gb->t[gb->nt].view_of = view_of;
	return gb->nt++;
}

PPRPC_API int pprpc_graph_builder_new(pprpc_graph_builder **out)
{
	pprpc_graph_builder *gb = calloc(1, sizeof(*gb));

	if (!gb)
		return PPRPC_ENOMEM;
	*out = gb;
	return 0;
}

PPRPC_API void pprpc_graph_builder_free(pprpc_graph_builder *gb)
{
	if (!gb)
		return;
	free(gb->t);
	free(gb->n);
	free(gb);
}

PPRPC_API const char *pprpc_gb_error(const pprpc_graph_builder *gb)
{
	return gb->err;
}

PPRPC_API int pprpc_gb_tensor(pprpc_graph_builder *gb, const pprpc_tensor *t)
{
	if (!t || !t->buffer.id)
		return fail(gb, PPRPC_EINVAL, "pprpc_gb_tensor needs a tensor in a buffer");
	return push_tensor(gb, t, 0);
}

PPRPC_API int pprpc_gb_view(pprpc_graph_builder *gb, int src, int dtype, const int64_t ne[4],
			    const uint64_t nb[4], uint64_t offset)
{
	pprpc_tensor v;

	if (src < 0 || src >= gb->nt)
		return fail(gb, PPRPC_EINVAL, "view of an unknown tensor");
	memset(&v, 0, sizeof(v));
	v.dtype = dtype;
	memcpy(v.ne, ne, sizeof(v.ne));
	memcpy(v.nb, nb, sizeof(v.nb));
	v.offset = offset;
	return push_tensor(gb, &v, src + 1);
}

PPRPC_API int pprpc_gb_permute2(pprpc_graph_builder *gb, int src, int a, int b)
{
	pprpc_tensor v;

	if (src < 0 || src >= gb->nt || a < 0 || a >= PPRPC_MAX_DIMS || b < 0 || b >= PPRPC_MAX_DIMS)
		return fail(gb, PPRPC_EINVAL, "permute of an unknown tensor or dimension");
	v = pprpc_tensor_permute2(gb->t[src].t, a, b);
	return pprpc_gb_view(gb, src, v.dtype, v.ne, v.nb, 0);
}

PPRPC_API int pprpc_gb_op(pprpc_graph_builder *gb, int op, const int *srcs, int nsrc,
			  const struct pprpc_op_params *params, int dst)
{
	struct kern_tensor ks[PPRPC_MAX_SRC], kd;
	const struct kern_tensor *kp[PPRPC_MAX_SRC];
	struct pprpc_op_params p;
	struct gb_node *n;
	char err[200];
	int rc;

	if (params)
		p = *params;
	else
		memset(&p, 0, sizeof(p));
	if (kern_op_nsrc(op) < 0 || nsrc != kern_op_nsrc(op)) {
		snprintf(gb->err, sizeof(gb->err), "op %d (%s) takes %d sources, got %d", op,
			 kern_op_name(op), kern_op_nsrc(op), nsrc);
		return PPRPC_EINVAL;
	}
	for (int i = 0; i < nsrc; i++) {
		if (srcs[i] < 0 || srcs[i] >= gb->nt)
			return fail(gb, PPRPC_EINVAL, "source is not a tensor of this builder");
		to_kern(&gb->t[srcs[i]].t, &ks[i]);
		kp[i] = &ks[i];
	}
	if (dst >= gb->nt)
		return fail(gb, PPRPC_EINVAL, "destination is not a tensor of this builder");
	if (dst < 0) {
		rc = kern_op_infer(op, &p, kp, nsrc, &kd, err, sizeof(err));
		if (rc < 0)
			return fail(gb, rc, err);
		pprpc_tensor t;

		memset(&t, 0, sizeof(t));
		t.dtype = kd.dtype;
		memcpy(t.ne, kd.ne, sizeof(t.ne));
		memcpy(t.nb, kd.nb, sizeof(t.nb));
		dst = push_tensor(gb, &t, 0);
		if (dst < 0)
			return dst;
	} else {
		to_kern(&gb->t[dst].t, &kd);
		rc = kern_op_check_dst(op, &p, kp, nsrc, &kd, err, sizeof(err));
		if (rc < 0)
			return fail(gb, rc, err);
	}
	if (gb->nn == gb->ncap) {
		int ncap = gb->ncap ? gb->ncap * 2 : 16;
		struct gb_node *q;

		if (ncap > PPRPC_MAX_GRAPH_NODES)
			return fail(gb, PPRPC_ETOOBIG, "too many nodes in one graph");
		q = realloc(gb->n, (size_t)ncap * sizeof(*q));
		if (!q)
			return fail(gb, PPRPC_ENOMEM, "out of memory");
		gb->n = q;
		gb->ncap = ncap;
	}
	n = &gb->n[gb->nn++];
	n->op = op;
	n->nsrc = nsrc;
	memcpy(n->src, srcs, (size_t)nsrc * sizeof(int));
	n->dst = dst;
	n->p = p;
	return dst;
}

PPRPC_API int pprpc_gb_add(pprpc_graph_builder *gb, int a, int b, int dst)
{
	int s[2] = { a, b };

	return pprpc_gb_op(gb, PPRPC_OP_ADD, s, 2, NULL, dst);
}

PPRPC_API int pprpc_gb_mul(pprpc_graph_builder *gb, int a, int b, int dst)
{
	int s[2] = { a, b };

	return pprpc_gb_op(gb, PPRPC_OP_MUL, s, 2, NULL, dst);
}

PPRPC_API int pprpc_gb_scale(pprpc_graph_builder *gb, int a, float scale, float bias, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	p.f[1] = bias;
	return pprpc_gb_op(gb, PPRPC_OP_SCALE, &a, 1, &p, dst);
}

PPRPC_API int pprpc_gb_cpy(pprpc_graph_builder *gb, int a, int dtype, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.i[0] = dtype;
	return pprpc_gb_op(gb, PPRPC_OP_CPY, &a, 1, &p, dst);
}

PPRPC_API int pprpc_gb_mul_mat(pprpc_graph_builder *gb, int w, int x, int dst)
{
	int s[2] = { w, x };

	return pprpc_gb_op(gb, PPRPC_OP_MUL_MAT, s, 2, NULL, dst);
}

PPRPC_API int pprpc_gb_tensor_get(const pprpc_graph_builder *gb, int idx, pprpc_tensor *out)
{
	if (idx < 0 || idx >= gb->nt)
		return PPRPC_EINVAL;
	*out = gb->t[idx].t;
	return 0;
}

PPRPC_API int pprpc_gb_node_count(const pprpc_graph_builder *gb)
{
	return gb->nn;
}

/* ---- transformer ops ---------------------------------------------------------- */

static int op1(pprpc_graph_builder *gb, int op, int a, const struct pprpc_op_params *p, int dst)
{
	return pprpc_gb_op(gb, op, &a, 1, p, dst);
}

static int op2(pprpc_graph_builder *gb, int op, int a, int b,
	       const struct pprpc_op_params *p, int dst)
{
	int s[2] = { a, b };

	return pprpc_gb_op(gb, op, s, 2, p, dst);
}

PPRPC_API int pprpc_gb_get_rows(pprpc_graph_builder *gb, int table, int ids, int dst)
{
	return op2(gb, PPRPC_OP_GET_ROWS, table, ids, NULL, dst);
}

PPRPC_API int pprpc_gb_set_rows(pprpc_graph_builder *gb, int table, int values, int ids)
{
	struct pprpc_op_params p;

	if (table < 0 || table >= gb->nt)
		return fail(gb, PPRPC_EINVAL, "SET_ROWS: the table is not a tensor of this builder");
	/* The rule needs the table's row count and dtype as parameters: the
	 * sources alone do not determine the destination. */
	memset(&p, 0, sizeof(p));
	if (gb->t[table].t.ne[1] > INT32_MAX)
		return fail(gb, PPRPC_ETOOBIG, "SET_ROWS: table has too many rows");
	p.i[0] = (int32_t)gb->t[table].t.ne[1];
	p.i[1] = gb->t[table].t.dtype;
	return op2(gb, PPRPC_OP_SET_ROWS, values, ids, &p, table);
}

PPRPC_API int pprpc_gb_concat(pprpc_graph_builder *gb, int a, int b, int dim, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.i[0] = dim;
	return op2(gb, PPRPC_OP_CONCAT, a, b, &p, dst);
}

PPRPC_API int pprpc_gb_rms_norm(pprpc_graph_builder *gb, int a, float eps, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = eps;
	return op1(gb, PPRPC_OP_RMS_NORM, a, &p, dst);
}

PPRPC_API int pprpc_gb_l2_norm(pprpc_graph_builder *gb, int a, float eps, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = eps;
	return op1(gb, PPRPC_OP_L2_NORM, a, &p, dst);
}

PPRPC_API int pprpc_gb_silu(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_SILU, a, NULL, dst);
}

PPRPC_API int pprpc_gb_sigmoid(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_SIGMOID, a, NULL, dst);
}

PPRPC_API int pprpc_gb_softplus(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_SOFTPLUS, a, NULL, dst);
}

PPRPC_API int pprpc_gb_exp(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_EXP, a, NULL, dst);
}

PPRPC_API int pprpc_gb_gelu(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_GELU, a, NULL, dst);
}

PPRPC_API int pprpc_gb_swiglu(pprpc_graph_builder *gb, int a, int b, int dst)
{
	return op2(gb, PPRPC_OP_SWIGLU, a, b, NULL, dst);
}

PPRPC_API int pprpc_gb_softmax(pprpc_graph_builder *gb, int a, float scale, int causal,
			       int n_past, int dst)
{
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	p.i[0] = causal;
	p.i[1] = n_past;
	return op1(gb, PPRPC_OP_SOFTMAX, a, &p, dst);
}

PPRPC_API int pprpc_gb_argmax(pprpc_graph_builder *gb, int a, int dst)
{
	return op1(gb, PPRPC_OP_ARGMAX, a, NULL, dst);
}

PPRPC_API int pprpc_gb_rope(pprpc_graph_builder *gb, int x, int pos, int mode, int n_dims,
			    float freq_base, float freq_scale, int dst)
{
	struct pprpc_op_params p;
	int s[2] = { x, pos };

	memset(&p, 0, sizeof(p));
	p.i[0] = mode;
	p.i[1] = n_dims;
	p.f[0] = freq_base;
	p.f[1] = freq_scale;
	return pprpc_gb_op(gb, PPRPC_OP_ROPE, s, 2, &p, dst);
}

PPRPC_API int pprpc_gb_attention(pprpc_graph_builder *gb, int q, int k, int v, float scale,
				 int n_past, int dst)
{
	struct pprpc_op_params p;
	int s[3] = { q, k, v };

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	p.i[0] = n_past;
	return pprpc_gb_op(gb, PPRPC_OP_ATTENTION, s, 3, &p, dst);
}

PPRPC_API int pprpc_gb_gated_delta_net(pprpc_graph_builder *gb, int q, int k, int v, int g,
				       int beta, int state, float scale, int l2norm, int dst)
{
	const int s[6] = { q, k, v, g, beta, state };
	struct pprpc_op_params p;

	memset(&p, 0, sizeof(p));
	p.f[0] = scale;
	if (l2norm) {
		p.i[0] = 1;
		p.f[1] = 1e-6f;  /* ggml / Qwen3-Next */
	}
	return pprpc_gb_op(gb, PPRPC_OP_GATED_DELTA_NET, s, 6, &p, dst);
}

PPRPC_API int pprpc_gb_gdn_views(pprpc_graph_builder *gb, int packed, int64_t d_v, int64_t h_v,
				 int64_t t, int64_t b, int64_t d_k, int *out_idx, int *state_idx)
{
	const int64_t one = 1, o_ne[4] = { d_v, h_v, t, b }, s_ne[4] = { d_k, d_v, h_v, b };
	struct kern_tensor pk, ov, sv;
	int64_t n_o, n_s;
	int rc, oi, si;

	if (!out_idx || !state_idx || packed < 0 || packed >= gb->nt)
		return fail(gb, PPRPC_EINVAL, "gdn views: unknown packed tensor");
	if (kern_gdn_layout(d_k, d_v, h_v, t, b, &n_o, &n_s) < 0)
		return fail(gb, PPRPC_EINVAL, "gdn views: invalid dimensions");
	to_kern(&gb->t[packed].t, &pk);
	if (pk.dtype != PPRPC_F32 || !kern_tensor_is_contiguous(&pk) ||
	    kern_tensor_nelements(&pk) != n_o + n_s || pk.ne[1] != one || pk.ne[2] != one ||
	    pk.ne[3] != one)
		return fail(gb, PPRPC_ESHAPE,
			    "gdn views: packed is not a contiguous f32 [d_v*H_v*T*B + d_k*d_v*H_v*B]");
	rc = kern_tensor_init_contig(&ov, PPRPC_F32, o_ne);
	if (rc == 0)
		rc = kern_tensor_init_contig(&sv, PPRPC_F32, s_ne);
	if (rc < 0)
		return fail(gb, rc, "gdn views: invalid dimensions");
	oi = pprpc_gb_view(gb, packed, PPRPC_F32, ov.ne, ov.nb, 0);
	if (oi < 0)
		return oi;
	si = pprpc_gb_view(gb, packed, PPRPC_F32, sv.ne, sv.nb, (uint64_t)n_o * sizeof(float));
	if (si < 0)
		return si;
	*out_idx = oi;
	*state_idx = si;
	return 0;
}

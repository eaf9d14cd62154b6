/*
 * rules_view.c — the ops that only re-describe memory: VIEW, RESHAPE, PERMUTE,
 * TRANSPOSE.  No kernel runs for them; what matters is that the node is
 * exactly the view ggml's constructor makes of src0 (same base tensor, the
 * offset, shape and strides it computes), since later nodes trust it.  That
 * the view lies inside its base is the structural validator's check.
 */
#include "rules_impl.h"

static int view_over(struct rule_ctx *c, const struct ggml_tensor *a, size_t offset)
{
	const struct ggml_tensor *n = c->node;
	const struct ggml_tensor *base = rules_base(a);

	REQ(c, n->view_src != NULL && n->view_src == base, "result must be a view of src0's memory");
	REQ(c, offset <= SIZE_MAX - rules_offs(a) && n->view_offs == rules_offs(a) + offset,
	    "view offset %zu, expected %zu + %zu", n->view_offs, rules_offs(a), offset);
	REQ(c, n->type == a->type, "result type %s, expected src0's %s", ggml_type_name(n->type), ggml_type_name(a->type));
	return 0;
}

/*
 * cpu: ggml-cpu/ggml-cpu.c:2156 RESHAPE, VIEW (ggml-cpu.c:2164), PERMUTE (ggml-cpu.c:2160) and TRANSPOSE (ggml-cpu.c:2168) run no kernel
 * cuda: ggml-cuda/ggml-cuda.cu:2553 the same four are no-ops (ggml_cuda_is_view_or_noop, skipped at ggml-cuda.cu:4318)
 * so only the view's own description is checked (inside its base, the layout ggml's constructor makes)
 */
int rule_view(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	size_t offset;

	memcpy(&offset, n->op_params, sizeof(offset));
	TRY(view_over(c, a, offset));
	/* ggml_view_*: nb[0] is the element size, nb[1..3] as given */
	TRY(rules_nb0(c, n, "result"));
	const int64_t blck = ggml_blck_size(n->type);
	REQ(c, n->ne[0] % blck == 0, "ne[0]=%lld is not a multiple of the %s block size", (long long)n->ne[0],
	    ggml_type_name(n->type));

	/* ggml_new_tensor_impl: the dense size of the view from its offset fits in
	 * the base tensor (checked without overflow; element counts are bounded) */
	const struct ggml_tensor *base = rules_base(a);
	uint64_t size = (uint64_t)ggml_type_size(n->type) * (uint64_t)(n->ne[0] / blck);
	for (int i = 1; i < GGML_MAX_DIMS; i++)
		size *= (uint64_t)n->ne[i];
	const uint64_t base_size = ggml_nbytes(base);
	REQ(c, size == 0 || (n->view_offs <= base_size && size <= base_size - n->view_offs),
	    "view of %llu bytes at offset %zu exceeds src0's %llu bytes",
	    (unsigned long long)size, n->view_offs, (unsigned long long)base_size);
	return 0;
}

/* no kernel (see rule_view): the layout of ggml's constructor over src0 */
int rule_reshape(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);

	TRY(rules_contiguous(c, a, "src0"));
	REQ(c, ggml_nelements(n) == ggml_nelements(a), "result " NE_FMT " and src0 " NE_FMT
	    " have different element counts", NE_ARGS(n), NE_ARGS(a));
	TRY(view_over(c, a, 0));
	/* a dense layout of the new shape */
	const int64_t blck = ggml_blck_size(n->type);
	REQ(c, n->ne[0] % blck == 0, "ne[0]=%lld is not a multiple of the %s block size", (long long)n->ne[0],
	    ggml_type_name(n->type));
	size_t nb = ggml_type_size(n->type);
	REQ(c, n->nb[0] == nb, "result nb[0]=%zu, expected %zu", n->nb[0], nb);
	nb *= (size_t)(n->ne[0] / blck);
	for (int i = 1; i < GGML_MAX_DIMS; i++) {
		REQ(c, n->nb[i] == nb, "result nb[%d]=%zu, expected %zu", i, n->nb[i], nb);
		nb *= (size_t)n->ne[i];
	}
	return 0;
}

/* no kernel (see rule_view): the layout of ggml's constructor over src0 */
int rule_permute(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	int seen = 0;

	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		const int32_t ax = rules_i32(n, i);
		REQ(c, ax >= 0 && ax < GGML_MAX_DIMS && !(seen & (1 << ax)),
		    "axes (%d,%d,%d,%d) are not a permutation", rules_i32(n, 0), rules_i32(n, 1),
		    rules_i32(n, 2), rules_i32(n, 3));
		seen |= 1 << ax;
	}
	TRY(view_over(c, a, 0));
	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		const int ax = rules_i32(n, i);
		/* (a dimension of size 1 is never stepped: its stride is free,
		 * and the plugin sends a contiguous tensor's canonical ones) */
		REQ(c, n->ne[ax] == a->ne[i] && (a->ne[i] == 1 || n->nb[ax] == a->nb[i]),
		    "result dim %d (ne=%lld nb=%zu) is not src0 dim %d (ne=%lld nb=%zu)", ax,
		    (long long)n->ne[ax], n->nb[ax], i, (long long)a->ne[i], a->nb[i]);
	}
	return 0;
}

/* no kernel (see rule_view): the layout of ggml's constructor over src0 */
int rule_transpose(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	static const int perm[GGML_MAX_DIMS] = { 1, 0, 2, 3 };

	TRY(view_over(c, a, 0));
	for (int i = 0; i < GGML_MAX_DIMS; i++)
		REQ(c, n->ne[perm[i]] == a->ne[i] && (a->ne[i] == 1 || n->nb[perm[i]] == a->nb[i]),
		    "result is not src0 with dims 0 and 1 swapped");
	return 0;
}

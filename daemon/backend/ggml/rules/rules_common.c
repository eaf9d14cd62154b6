/*
 * rules_common.c — helpers shared by the per-op rules (see rules_impl.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "rules_impl.h"

int rules_fail(struct rule_ctx *c, const char *fmt, ...)
{
	if (c->err && c->errlen > 0) {
		const enum ggml_op op = c->node->op;
		int n = snprintf(c->err, c->errlen, "%s: ", op < GGML_OP_COUNT ? ggml_op_name(op) : "?");
		if (n < 0)
			n = 0;
		if ((size_t)n < c->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return PPRPC_EINVAL;
}

int rules_srcs(struct rule_ctx *c, unsigned required, unsigned allowed)
{
	for (int i = 0; i < GGML_MAX_SRC; i++) {
		const bool set = c->node->src[i] != NULL;
		REQ(c, set || !(required & (1u << i)), "src[%d] is missing", i);
		REQ(c, !set || ((required | allowed) & (1u << i)), "src[%d] must be empty", i);
	}
	return 0;
}

int rules_type(struct rule_ctx *c, const struct ggml_tensor *t, const char *name, uint64_t mask)
{
	REQ(c, rules_type_is(t, mask), "%s has unsupported type %s", name, ggml_type_name(t->type));
	return 0;
}

int rules_new(struct rule_ctx *c, enum ggml_type type, const int64_t ne[4])
{
	const struct ggml_tensor *n = c->node;

	REQ(c, n->view_src == NULL, "result must be a new tensor, not a view");
	REQ(c, n->type == type, "result type %s, expected %s", ggml_type_name(n->type), ggml_type_name(type));
	for (int i = 0; i < GGML_MAX_DIMS; i++)
		REQ(c, ne[i] >= 0 && n->ne[i] == ne[i],
		    "result shape " NE_FMT ", expected [%lld,%lld,%lld,%lld]", NE_ARGS(n),
		    (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
	const int64_t blck = ggml_blck_size(type);
	REQ(c, ne[0] % blck == 0, "result ne[0]=%lld is not a multiple of the %s block size %lld",
	    (long long)ne[0], ggml_type_name(type), (long long)blck);

	size_t nb[GGML_MAX_DIMS];
	nb[0] = ggml_type_size(type);
	nb[1] = nb[0] * (size_t)(ne[0] / blck);
	for (int i = 2; i < GGML_MAX_DIMS; i++)
		nb[i] = nb[i - 1] * (size_t)ne[i - 1];
	for (int i = 0; i < GGML_MAX_DIMS; i++)
		REQ(c, n->nb[i] == nb[i], "result nb[%d]=%zu, a new tensor has %zu", i, n->nb[i], nb[i]);
	return 0;
}

int rules_new4(struct rule_ctx *c, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
	return rules_new(c, type, ne);
}

int rules_view_tensor(struct rule_ctx *c, const struct ggml_tensor *a)
{
	const struct ggml_tensor *n = c->node;

	REQ(c, n->view_src != NULL && n->view_src == rules_base(a) && n->view_offs == rules_offs(a),
	    "in-place result must be a view of its destination's memory at the same offset");
	REQ(c, n->type == a->type, "in-place result type %s, expected %s",
	    ggml_type_name(n->type), ggml_type_name(a->type));
	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		REQ(c, n->ne[i] == a->ne[i], "in-place result shape " NE_FMT ", expected " NE_FMT,
		    NE_ARGS(n), NE_ARGS(a));
		REQ(c, n->nb[i] == a->nb[i], "in-place result nb[%d]=%zu, expected %zu", i, n->nb[i], a->nb[i]);
	}
	return 0;
}

int rules_dup_or_inplace(struct rule_ctx *c, const struct ggml_tensor *a)
{
	if (c->node->view_src == NULL)
		return rules_new(c, a->type, a->ne);
	return rules_view_tensor(c, a);
}

/*
 * ggml's is_contiguous* ignore the stride of a dimension of size 1, dim 0
 * included, but the kernels behind them assert nb[0] == the element size
 * literally (ggml-cpu unary-ops: nb00 == sizeof(src0_t)): a transposed
 * [n,1] tensor is "contiguous" to ggml and still aborts the kernel.  So
 * every contiguity requirement here also pins nb[0].
 */
/*
 * ggml_is_contiguous also ignores nb[1] when ne[1] == 1 (and nb[2] when
 * ne[2] == 1), but kernels that walk all rows as one run step by nb[1]
 * (cpu: ggml-cpu/ops.cpp:4735 scale: src0->data + i1*nb01 for i1 <
 * ggml_nrows) or all planes by nb[2] (cpu: ggml-cpu/ops.cpp:7849 pool_2d:
 * cdata += nb[2] until nbytes): a [64,1,4] tensor with nb[1] = 1 GiB is
 * "contiguous" and walks 3 GiB past its data.  So a contiguous tensor here is
 * also contiguous_1 and contiguous_2 (ggml.c:1474: a free dim's next stride
 * is ne*nb, so with ne[1] == 1 nb[2] must equal nb[1]): every stride below
 * the last dimension of size > 1 is the dense one.  Size-1 dims above it
 * keep any stride (no kernel that loops by counts reads them).
 */
int rules_contiguous(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, ggml_is_contiguous(t), "%s must be contiguous", name);
	REQ(c, ggml_is_contiguous_1(t) && ggml_is_contiguous_2(t),
	    "%s: a size-1 dimension below a larger one has a stride of its own (nb " "[%zu,%zu,%zu,%zu])",
	    name, t->nb[0], t->nb[1], t->nb[2], t->nb[3]);
	return rules_nb0(c, t, name);
}

/*
 * Strides exactly those of a fresh tensor, every dimension included (also
 * the size-1 ones above the last larger one, which rules_contiguous leaves
 * free): for kernels that step by every stride whatever the extent — the
 * sorts walk rows flat at i * nb[1] (ggml-cpu/ops.cpp:8507), SSM_SCAN writes
 * its result state at i3 * s->nb[3] (ops.cpp:9821), ggml-cuda chooses its
 * Mamba kernel by A->nb[1].
 */
int rules_dense(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	size_t nb = ggml_type_size(t->type);

	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		REQ(c, t->nb[i] == nb, "%s nb[%d]=%zu, must be dense (%zu), size-1 dimensions included", name, i,
		    t->nb[i], nb);
		nb *= (size_t)(i == 0 ? t->ne[0] / ggml_blck_size(t->type) : t->ne[i]);
	}
	return 0;
}

bool rules_has_to_float(enum ggml_type type)
{
	/* ggml.c:632 type_traits[].to_float, called unchecked by
	 * ggml-cpu/ops.cpp:482 (dup_from_q) and the dequantizing kernels; NULL for
	 * Q8_1 (ggml.c:745) and Q8_K (ggml.c:880) and the integer types */
	return ggml_get_type_traits(type)->to_float != NULL;
}

int rules_contiguous_1(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, ggml_is_contiguous_1(t), "%s must be contiguous (rows may be padded)", name);
	return rules_nb0(c, t, name);
}

int rules_contiguous_2(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, ggml_is_contiguous_2(t), "%s must be contiguous in dims 0, 2 and 3", name);
	return rules_nb0(c, t, name);
}

int rules_contiguous_rows(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, ggml_is_contiguous_rows(t), "%s must have contiguous rows", name);
	return rules_nb0(c, t, name);
}

int rules_nb0(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, t->nb[0] == ggml_type_size(t->type), "%s nb[0]=%zu, must be the element size %zu",
	    name, t->nb[0], ggml_type_size(t->type));
	return 0;
}

int rules_strides_elems(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	const size_t ts = ggml_type_size(t->type);
	for (int i = 0; i < GGML_MAX_DIMS; i++)
		REQ(c, t->nb[i] % ts == 0, "%s nb[%d]=%zu is not a multiple of the element size %zu",
		    name, i, t->nb[i], ts);
	return 0;
}

int rules_not_permuted(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	REQ(c, t->nb[0] <= t->nb[1] && t->nb[1] <= t->nb[2] && t->nb[2] <= t->nb[3],
	    "%s must not be transposed or permuted", name);
	return 0;
}

int rules_same_shape(struct rule_ctx *c, const struct ggml_tensor *a, const char *an,
		     const struct ggml_tensor *b, const char *bn)
{
	REQ(c, ggml_are_same_shape(a, b), "%s " NE_FMT " and %s " NE_FMT " must have the same shape",
	    an, NE_ARGS(a), bn, NE_ARGS(b));
	return 0;
}

int rules_fits_u32(struct rule_ctx *c, const struct ggml_tensor *t, const char *name)
{
	const size_t ts = ggml_type_size(t->type);
	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		REQ(c, t->ne[i] <= (int64_t)UINT32_MAX, "%s ne[%d]=%lld exceeds 32 bits", name, i, (long long)t->ne[i]);
		REQ(c, t->nb[i] / ts <= UINT32_MAX, "%s nb[%d]=%zu exceeds 32 bits in elements", name, i, t->nb[i]);
	}
	return 0;
}

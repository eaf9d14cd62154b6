/*
 * rules_unary.c — element-wise ops of one tensor: UNARY (op kind in
 * op_params[0]), GLU (gated linear units, fused or split), SCALE, CLAMP, FILL,
 * LEAKY_RELU, SQR, SQRT, LOG, SIN, COS.
 *
 * Types: F32 and F16 (the result has src0's type), which both backends
 * implement for every op here except where noted; ggml-cpu's BF16 paths are
 * not offered because ggml-cuda has none and its supports_op does not check
 * the type for all of them.
 */
#include "rules_impl.h"

#define TB_F32_F16 (TB_F32 | TB_F16)

int rule_unary(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	const int32_t op = rules_i32(n, 0);

	REQ(c, op >= 0 && op < GGML_UNARY_OP_COUNT, "unknown unary op %d", op);
	TRY(rules_contiguous_rows(c, a, "src0"));
	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_dup_or_inplace(c, a));
	/* ggml-cpu apply_unary_op: nb00 and nb0 are the element size */
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_nb0(c, n, "result"));
	TRY(rules_strides_elems(c, a, "src0"));
	if (op == GGML_UNARY_OP_XIELU) {
		/* the functor path asserts contiguous_1 on both */
		TRY(rules_contiguous_1(c, a, "src0"));
		TRY(rules_contiguous_1(c, n, "result"));
	}
	return 0;
}

int rule_glu(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0x2));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);
	const int32_t op = rules_i32(n, 0), swapped = rules_i32(n, 1);

	REQ(c, op >= 0 && op < GGML_GLU_OP_COUNT, "unknown glu op %d", op);
	REQ(c, swapped == 0 || (swapped == 1 && b == NULL), "swapped=%d (0, or 1 for the fused form)", swapped);
	TRY(rules_contiguous_1(c, a, "src0"));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_type(c, a, "src0", op == GGML_GLU_OP_SWIGLU_OAI ? TB_F32 : TB_F32_F16));
	if (b) {
		TRY(rules_contiguous_1(c, b, "src1"));
		TRY(rules_nb0(c, b, "src1"));
		TRY(rules_same_shape(c, a, "src0", b, "src1"));
		REQ(c, a->type == b->type, "src0 type %s != src1 type %s", ggml_type_name(a->type), ggml_type_name(b->type));
		return rules_new(c, a->type, a->ne);
	}
	return rules_new4(c, a->type, a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]);
}

int rule_scale(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	/* the constructor asks for ggml_is_padded_1d, both kernels for a
	 * contiguous F32 tensor */
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

int rule_clamp(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_dup_or_inplace(c, a));
	/* ggml-cpu: nb0 == nb00 == element size; ggml-cuda walks ggml_nelements
	 * densely from both data pointers */
	TRY(rules_contiguous(c, a, "src0"));
	return rules_contiguous(c, c->node, "result");
}

int rule_fill(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

int rule_leaky_relu(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

int rule_sqr_sqrt_log_sin_cos(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	/* ggml-cuda asserts src0 contiguous (its supports_op does not check) */
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

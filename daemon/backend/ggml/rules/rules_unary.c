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

/*
 * cpu: ggml-cpu/unary-ops.cpp:114 apply_unary_op: contiguous_rows src and dst, same shape; unary-ops.cpp:118 nb0 == sizeof(dst_t), unary-ops.cpp:119 nb00 == sizeof(src_t)
 * cpu: ggml-cpu/unary-ops.cpp:194 the functor path (XIELU): contiguous_1 src and dst
 * cuda: ggml-cuda/unary.cu:144 src0 contiguous (its supports_op checks the same, the engine asks it); unary.cu:146 F32/F16, unary.cu:148 dst of src0's type; unary.cu:153 walks ggml_nelements densely
 */
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

/*
 * cuda: ggml-cuda/unary.cu:298 src0 contiguous_1, unary.cu:299 nb[0] the element size, unary.cu:300 dst contiguous; unary.cu:305 dst ne[0] == nc (half the row for the fused form); unary.cu:309 src1 contiguous_1 with src1 ne[0] == nc (unary.cu:311), same type (unary.cu:312)
 * cpu: ggml-cpu/unary-ops.cpp:194 contiguous_1 sources and result, nb[0] the element size (unary-ops.cpp:198)
 */
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

/*
 * cpu: ggml-cpu/ops.cpp:4703 src0 and dst contiguous, same shape; ops.cpp:4735 every row i1 < ggml_nrows at i1*nb[1]: rows flat by nb[1] even where ne[1] == 1 (rules_contiguous)
 * cuda: ggml-cuda/scale.cu:28 F32 in and out; scale.cu:36 ggml_nelements walked densely from both data pointers
 */
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

/*
 * cpu: ggml-cpu/ops.cpp:5844 nb0 == nb00 == sizeof(float); ops.cpp:5849 rows j < ggml_nrows at j*nb01: rows flat by nb[1] (rules_contiguous)
 * cuda: ggml-cuda/clamp.cu:31 F32/F16, dst of the same type (clamp.cu:33); clamp.cu:43 ggml_nelements densely, as an int (clamp.cu:19): nelements < 2^31, the structural validator's bound
 */
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

/*
 * cpu: ggml-cpu/ops.cpp:2243 writes ne0 floats at i1*nb1 + i2*nb2 + i3*nb3 of dst (loops by counts)
 * cuda: ggml-cuda/fill.cu:19 dst contiguous
 */
int rule_fill(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

/*
 * cpu: ggml-cpu/ops.cpp:2717 nb[0] == sizeof(float) for dst and src0; ops.cpp:2722 rows i < ggml_nrows at i*nb[1]: rows flat by nb[1] (rules_contiguous)
 * cuda: ggml-cuda/unary.cu:634 src0 contiguous, F32/F16 of one type (unary.cu:636)
 */
int rule_leaky_relu(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32_F16));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, c->node, "result");
}

/*
 * cpu: ggml-cpu/unary-ops.cpp:281 sqr (and sqrt, log, sin, cos) through apply_unary_op: unary-ops.cpp:114 contiguous_rows, same shape, nb[0] the element size (unary-ops.cpp:118)
 * cuda: ggml-cuda/unary.cu:144 src0 contiguous, F32/F16 (unary.cu:146), dense walk of ggml_nelements (unary.cu:153)
 */
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

/*
 * rules_binary.c — element-wise binary ops with broadcasting: ADD, SUB, MUL, DIV,
 * and ADD_ID (the per-expert bias of MoE layers).
 *
 * Types are the intersection of what ggml-cpu's binary_op and ggml-cuda's
 * bin_bcast implement (the result has src0's type): F32 + F32, F16 + F16|F32,
 * BF16 + BF16|F32 (ggml-cuda's supports_op refuses BF16 before its kernel sees
 * it).  Quantized src0 (ggml-cpu's add_q_f32) is refused: llama.cpp's graphs
 * never add into quantized tensors and ggml-cuda has no kernel for it.
 */
#include "rules_impl.h"

static int binary_layout(struct rule_ctx *c, const struct ggml_tensor *a, const struct ggml_tensor *b)
{
	const struct ggml_tensor *n = c->node;

	/* ggml-cpu apply_binary_op: nb0 == sizeof(dst_t), nb00 == sizeof(src0_t) */
	TRY(rules_nb0(c, n, "result"));
	TRY(rules_nb0(c, a, "src0"));
	/* ggml-cuda bin_bcast: strides in elements, 32-bit grid */
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_strides_elems(c, b, "src1"));
	TRY(rules_strides_elems(c, n, "result"));
	TRY(rules_fits_u32(c, a, "src0"));
	TRY(rules_fits_u32(c, b, "src1"));
	TRY(rules_fits_u32(c, n, "result"));
	REQ(c, n->ne[2] * n->ne[3] <= (int64_t)UINT32_MAX, "result ne[2]*ne[3] exceeds 32 bits");
	return 0;
}

static int binary_types(struct rule_ctx *c, const struct ggml_tensor *a, const struct ggml_tensor *b)
{
	switch (a->type) {
	case GGML_TYPE_F32:
		return rules_type(c, b, "src1 (with an F32 src0)", TB_F32);
	case GGML_TYPE_F16:
		return rules_type(c, b, "src1 (with an F16 src0)", TB_F16 | TB_F32);
	case GGML_TYPE_BF16:
		return rules_type(c, b, "src1 (with a BF16 src0)", TB_BF16 | TB_F32);
	default:
		return rules_fail(c, "src0 has unsupported type %s", ggml_type_name(a->type));
	}
}

static int binary(struct rule_ctx *c, bool may_cast)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);

	if (may_cast && n->type != a->type) {
		/* ggml_add_cast: can_repeat_rows(b, a), a new tensor of another type;
		 * both kernels only do F16|BF16 + F32 -> F32 */
		REQ(c, b->ne[0] == a->ne[0] && ggml_can_repeat(b, a),
		    "src1 " NE_FMT " cannot be broadcast by rows to src0 " NE_FMT, NE_ARGS(b), NE_ARGS(a));
		TRY(rules_type(c, a, "src0 (casting add)", TB_F16 | TB_BF16));
		TRY(rules_type(c, b, "src1 (casting add)", TB_F32));
		TRY(rules_type(c, n, "result (casting add)", TB_F32));
		TRY(rules_new(c, n->type, a->ne));
		return binary_layout(c, a, b);
	}

	REQ(c, ggml_can_repeat(b, a), "src1 " NE_FMT " cannot be broadcast to src0 " NE_FMT, NE_ARGS(b), NE_ARGS(a));
	TRY(binary_types(c, a, b));
	TRY(rules_dup_or_inplace(c, a));
	return binary_layout(c, a, b);
}

int rule_add(struct rule_ctx *c)
{
	return binary(c, true);
}

int rule_sub_mul_div(struct rule_ctx *c)
{
	return binary(c, false);
}

/* ggml_add_id(a, b, ids): a[:, i, j] += b[:, ids[i, j]] */
int rule_add_id(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7, 0));
	const struct ggml_tensor *a = rules_src(c, 0), *b = rules_src(c, 1), *ids = rules_src(c, 2);

	REQ(c, a->ne[0] == b->ne[0], "src0 ne[0]=%lld != src1 ne[0]=%lld", (long long)a->ne[0], (long long)b->ne[0]);
	REQ(c, a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1],
	    "ids " NE_FMT " does not index the rows of src0 " NE_FMT, NE_ARGS(ids), NE_ARGS(a));
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_type(c, b, "src1", TB_F32));
	TRY(rules_type(c, ids, "ids", TB_I32));
	TRY(rules_new(c, a->type, a->ne));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_nb0(c, b, "src1"));
	TRY(rules_nb0(c, ids, "ids"));
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_strides_elems(c, b, "src1"));
	TRY(rules_strides_elems(c, ids, "ids"));
	return 0;
}

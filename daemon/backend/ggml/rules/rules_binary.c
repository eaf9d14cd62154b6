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

/*
 * ADD, SUB, MUL, DIV preconditions:
 * cpu: ggml-cpu/binary-ops.cpp:54 asserts ggml_can_repeat(src1, src0) and dst shaped as src0
 * cpu: ggml-cpu/binary-ops.cpp:58 asserts nb0 == sizeof(dst_t), binary-ops.cpp:59 nb00 == sizeof(src0_t)
 * cpu: ggml-cpu/binary-ops.cpp:87 src1 rows by i01 % ne11 (and i02 % ne12, i03 % ne13): ne1x > 0, given by can_repeat
 * cpu: ggml-cpu/binary-ops.cpp:95 ne00 / ne10 repeats of a src1 row, src1 stepped by nb10 (any stride)
 * cuda: ggml-cuda/binbcast.cu:258 asserts every ne and stride (in elements) of all three <= UINT32_MAX (binbcast.cu:264-281)
 * cuda: ggml-cuda/binbcast.cu:283 asserts every nb a multiple of the element size (284-296)
 * cuda: ggml-cuda/binbcast.cu:317 past a 65535 grid: asserts the element count, ne0*ne1 and ne0*ne1*ne2 <= UINT32_MAX (319-322)
 */
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
	/* the 1-d fallback's asserts: checked whatever grid ggml-cuda picks */
	REQ(c, ggml_nelements(n) <= (int64_t)UINT32_MAX - 128, "%lld elements exceed ggml-cuda's 32-bit flat grid",
	    (long long)ggml_nelements(n));
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

/*
 * ggml_add_id(a, b, ids): a[:, i, j] += b[:, ids[i, j]]
 * cpu: ggml-cpu/ops.cpp:727 asserts nb0 == sizeof(float) (and nb00, nb10, ops.cpp:717-728), F32/F32/I32 only
 * cpu: ggml-cpu/ops.cpp:744 reads ids at i1*nb20 + i2*nb21, i1 < ne1, i2 < ne2, then asserts 0 <= id < ne11 (data: ggml_guard.c)
 * cpu: ggml-cpu/ops.cpp:739 row coordinates in int from the flat row index
 * cuda: ggml-cuda/add-id.cu:42 asserts nb00, nb10, nb20 are the element sizes
 * cuda: ggml-cuda/add-id.cu:50 min(ne00, 768) threads: zero for empty rows (an empty node, skipped at ggml-cuda.cu:4630; refused anyway)
 * cuda: ggml-cuda/add-id.cu:51 grid (ne01, ne02): ne02 <= 65535, and no ne03 at all: rows of i3 > 0 stay unwritten
 * cuda: ggml-cuda/add-id.cu:16 writes dst densely (nb1 = ne0 * 4): a new tensor
 */
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
	/* ggml-cuda never writes rows past ne[3] == 1: they would return the
	 * buffer's old bytes */
	REQ(c, a->ne[3] == 1, "src0 must be 3-d, is " NE_FMT, NE_ARGS(a));
	REQ(c, a->ne[0] > 0, "rows of 0 elements (ggml-cuda launches no threads)");
	REQ(c, a->ne[1] <= INT32_MAX && a->ne[2] <= 65535, "src0 " NE_FMT " exceeds ggml-cuda's grid", NE_ARGS(a));
	return 0;
}

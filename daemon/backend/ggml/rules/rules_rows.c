/*
 * rules_rows.c — row gathers and scatters (GET_ROWS, SET_ROWS) and the
 * per-row index producers (ARGSORT, TOP_K, ARGMAX).
 *
 * The row indices themselves are data: GET_ROWS and SET_ROWS abort in ggml-cpu
 * (GGML_ASSERT) on an index outside the rows, and ggml-cuda reads or writes
 * out of bounds; no shape rule can see that (see the report in
 * ggml_rules.c).
 */
#include "rules_impl.h"

/* source types ggml-cpu's get_rows handles (quantized ones through to_float)
 * that ggml-cuda's supports_op also lists, plus TQ* (CPU only, refused there) */
#define TB_GET_ROWS (TB_FLOAT | TB_I32 | TB(GGML_TYPE_Q1_0) | TB(GGML_TYPE_Q2_0) | TB(GGML_TYPE_Q4_0) | \
	TB(GGML_TYPE_Q4_1) | TB(GGML_TYPE_Q5_0) | TB(GGML_TYPE_Q5_1) | TB(GGML_TYPE_Q8_0) | \
	TB(GGML_TYPE_MXFP4) | TB(GGML_TYPE_NVFP4) | TB(GGML_TYPE_Q2_K) | TB(GGML_TYPE_Q3_K) | \
	TB(GGML_TYPE_Q4_K) | TB(GGML_TYPE_Q5_K) | TB(GGML_TYPE_Q6_K) | TB(GGML_TYPE_IQ2_XXS) | \
	TB(GGML_TYPE_IQ2_XS) | TB(GGML_TYPE_IQ3_XXS) | TB(GGML_TYPE_IQ3_S) | TB(GGML_TYPE_IQ2_S) | \
	TB(GGML_TYPE_IQ1_S) | TB(GGML_TYPE_IQ1_M) | TB(GGML_TYPE_IQ4_NL) | TB(GGML_TYPE_IQ4_XS) | \
	TB(GGML_TYPE_TQ1_0) | TB(GGML_TYPE_TQ2_0))

/*
 * ggml_get_rows(a, b): rows b[i, j, k] of a[:, :, j, k]
 * cpu: ggml-cpu/ops.cpp:4992 quantized rows through the type's to_float (NULL for Q8_1 and Q8_K: checked, not trusted to the mask)
 * cpu: ggml-cpu/ops.cpp:5015 asserts 0 <= index < ne01 (5056, 5097, 5138): indices are data, ggml_guard.c
 * cpu: ggml-cpu/ops.cpp:5017 rows at i01*nb01 + i11*nb02 + i12*nb03, result rows by nb1..nb3 (index-bounded)
 * cuda: ggml-cuda/getrows.cu:181 asserts ne00 even for block types (every accepted block is); getrows.cu:203 ne00 % QK_K for K-quants (the block)
 * cuda: ggml-cuda/getrows.cu:183 asserts ne12 > 0 and ne11 * ne12 <= UINT32_MAX (184, 220-221, 253-254)
 * cuda: ggml-cuda/getrows.cu:176 index strides in elements (nb1x / 4)
 */
int rule_get_rows(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *a = rules_src(c, 0), *b = rules_src(c, 1);

	REQ(c, a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1,
	    "indices " NE_FMT " do not match src0 " NE_FMT, NE_ARGS(b), NE_ARGS(a));
	TRY(rules_type(c, b, "indices", TB_I32));
	TRY(rules_type(c, a, "src0", TB_GET_ROWS));
	TRY(rules_new4(c, a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32,
		       a->ne[0], b->ne[0], b->ne[1], b->ne[2]));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_nb0(c, b, "indices"));
	TRY(rules_strides_elems(c, b, "indices"));
	/* ggml-cuda: the index grid is 32-bit */
	REQ(c, b->ne[2] == 0 || b->ne[1] <= (int64_t)(UINT32_MAX / (uint64_t)b->ne[2]),
	    "indices " NE_FMT " exceed the 32-bit grid", NE_ARGS(b));
	REQ(c, b->ne[2] > 0, "indices " NE_FMT ": ggml-cuda asserts ne[2] > 0", NE_ARGS(b));
	if (ggml_is_quantized(a->type))
		REQ(c, ggml_get_type_traits(a->type)->to_float != NULL, "%s has no to_float", ggml_type_name(a->type));
	return 0;
}

/*
 * ggml_set_rows(a, b, c): a[c[i, j, k], :, j, k] = b[i, :, j, k]; result = view of a
 * cpu: ggml-cpu/ops.cpp:5236 asserts src0 F32 or F16
 * cpu: ggml-cpu/ops.cpp:5252 stores through the destination type's from_float (rules_can_quantize_to, rules_copy.c)
 * cpu: ggml-cpu/ops.cpp:5263 asserts 0 <= index < ne1 (data: ggml_guard.c)
 * cpu: ggml-cpu/ops.cpp:5280 F16 source rows converted in wdata: ne00 floats per task (ggml-cpu.c:2933 plans it)
 * cuda: ggml-cuda/set-rows.cu:380 asserts src0 F32, or F16 into F16; set-rows.cu:381 indices I64 or I32
 * cuda: ggml-cuda/set-rows.cu:84 asserts ne00 % the destination block size (the destination's ne0 == ne00, block-checked)
 * cuda: ggml-cuda/set-rows.cu:321 aborts on a destination type without a kernel (346, 371; supports_op refuses them)
 */
int rule_set_rows(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7, 0));
	const struct ggml_tensor *n = c->node, *b = rules_src(c, 0), *ix = rules_src(c, 1), *a = rules_src(c, 2);

	REQ(c, a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3],
	    "source rows " NE_FMT " do not fit destination " NE_FMT, NE_ARGS(b), NE_ARGS(a));
	REQ(c, b->ne[1] == ix->ne[0], "%lld source rows but %lld indices", (long long)b->ne[1], (long long)ix->ne[0]);
	REQ(c, ix->ne[1] > 0 && ix->ne[2] > 0 && b->ne[2] % ix->ne[1] == 0 && b->ne[3] % ix->ne[2] == 0 &&
	       ix->ne[3] == 1, "indices " NE_FMT " cannot be broadcast over " NE_FMT, NE_ARGS(ix), NE_ARGS(b));
	TRY(rules_type(c, b, "src0", TB_F32 | TB_F16));
	TRY(rules_type(c, ix, "indices", TB_I32 | TB_I64));
	TRY(rules_contiguous_rows(c, a, "destination"));
	TRY(rules_contiguous_rows(c, b, "src0"));
	TRY(rules_view_tensor(c, a));

	/* ggml-cpu: converts through the destination type's from_float unless
	 * F16 rows go to F16 */
	if (!(b->type == GGML_TYPE_F16 && n->type == GGML_TYPE_F16))
		REQ(c, rules_type_is(n, TB_F32 | TB_F16 | TB_BF16) || rules_can_quantize_to(n->type),
		    "cannot store rows as %s", ggml_type_name(n->type));
	TRY(rules_nb0(c, b, "src0"));
	TRY(rules_nb0(c, ix, "indices"));
	return rules_strides_elems(c, ix, "indices");
}

/*
 * ARGSORT, TOP_K, ARGMAX preconditions:
 * cpu: ggml-cpu/ops.cpp:8507 argsort reads row i at i*nb01 for i < ggml_nrows (flat rows: nb01 stepped even when ne01 == 1)
 * cpu: ggml-cpu/ops.cpp:8577 top_k likewise, i*nb01 for every row
 * cpu: ggml-cpu/ops.cpp:8574 top_k scratch (ne00 + CACHE_LINE_SIZE_F32)*ith ints; ggml-cpu/ggml-cpu.c:2993 plans ne00*n_tasks ints (+ a cache line per thread, ggml-cpu.c:3059)
 * cpu: ggml-cpu/ops.cpp:8525 argsort aborts on an order other than ASC/DESC
 * cpu: ggml-cpu/ops.cpp:1593 argmax: rows i1 < ne01 at i1*nb01, ne00 floats each, F32 only
 * cuda: ggml-cuda/argsort.cu:262 asserts ggml_is_contiguous(src0), then sorts ncols*nrows floats as one flat run
 * cuda: ggml-cuda/argsort.cu:39 divides by nb01 (chunk_bytes / nb01) on the CUB path (ne00 > 1024): a size-1 dim's nb01 of 0 traps the host
 * cuda: ggml-cuda/ggml-cuda.cu:4630 skips empty nodes, so empty rows never reach it (refused anyway: nothing to sort)
 * cuda: ggml-cuda/argsort.cu:48 ncols, nrows and ncols*nrows are int
 * cuda: ggml-cuda/top-k.cu:222 asserts ggml_is_contiguous(src0); top-k.cu:241 the same nb01 divisor
 */
static int sort_common(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_dense(c, a, "src0"));
	REQ(c, a->ne[0] > 0, "rows of 0 elements (nothing to sort)");
	const int64_t nrows = a->ne[1] * a->ne[2] * a->ne[3];
	REQ(c, a->ne[0] <= INT32_MAX && nrows <= INT32_MAX / a->ne[0],
	    "%lld rows of %lld elements exceed ggml-cuda's int counts", (long long)nrows, (long long)a->ne[0]);
	return 0;
}

int rule_argsort(struct rule_ctx *c)
{
	TRY(sort_common(c));
	const int32_t order = rules_i32(c->node, 0);
	REQ(c, order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC, "unknown sort order %d", order);
	return rules_new(c, GGML_TYPE_I32, rules_src(c, 0)->ne);
}

int rule_top_k(struct rule_ctx *c)
{
	TRY(sort_common(c));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	REQ(c, n->ne[0] <= a->ne[0], "k=%lld exceeds the row length %lld", (long long)n->ne[0], (long long)a->ne[0]);
	return rules_new4(c, GGML_TYPE_I32, n->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

int rule_argmax(struct rule_ctx *c)
{
	TRY(sort_common(c));
	const struct ggml_tensor *a = rules_src(c, 0);
	REQ(c, ggml_is_matrix(a), "src0 must be 2-d, is " NE_FMT, NE_ARGS(a));
	return rules_new4(c, GGML_TYPE_I32, a->ne[1], 1, 1, 1);
}

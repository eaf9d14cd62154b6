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

/* ggml_get_rows(a, b): rows b[i, j, k] of a[:, :, j, k] */
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
	return 0;
}

/* ggml_set_rows(a, b, c): a[c[i, j, k], :, j, k] = b[i, :, j, k]; result = view of a */
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

static int sort_common(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	/* both kernels: F32, rows walked as one dense run (ggml-cpu indexes row i
	 * at i * nb01, ggml-cuda asserts contiguous) */
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	REQ(c, a->ne[0] <= INT32_MAX, "rows of %lld elements exceed INT32_MAX", (long long)a->ne[0]);
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

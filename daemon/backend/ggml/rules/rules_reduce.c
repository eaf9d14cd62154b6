/*
 * rules_reduce.c — reductions and shape-changing copies: SUM, SUM_ROWS, MEAN,
 * CUMSUM, REPEAT, CONCAT, PAD.
 */
#include "rules_impl.h"

int rule_sum(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	/* ggml-cuda: F32 and contiguously allocated (its supports_op only checks rows) */
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	return rules_new4(c, a->type, 1, 1, 1, 1);
}

int rule_sum_rows(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	/* ggml-cuda (v0.5.0) takes strided rows and reads them as floats */
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_new4(c, a->type, 1, a->ne[1], a->ne[2], a->ne[3]));
	return 0;
}

int rule_mean(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_strides_elems(c, a, "src0"));
	return rules_new4(c, GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
}

int rule_cumsum(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_strides_elems(c, a, "src0"));
	return rules_new(c, a->type, a->ne);
}

int rule_repeat(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);

	/* ggml_repeat / ggml_repeat_4d: the result is a whole number of copies */
	REQ(c, ggml_can_repeat(a, n), "src0 " NE_FMT " does not tile the result " NE_FMT, NE_ARGS(a), NE_ARGS(n));
	/* ggml-cpu: F32/I32 (4-byte) and F16/BF16/I16 (2-byte) paths; ggml-cuda
	 * lists F32 and F16 in its supports_op */
	TRY(rules_type(c, a, "src0", TB_FLOAT | TB_I32 | TB(GGML_TYPE_I16)));
	TRY(rules_nb0(c, a, "src0"));
	return rules_new(c, a->type, n->ne);
}

int rule_concat(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);
	const int32_t dim = rules_i32(n, 0);
	int64_t ne[GGML_MAX_DIMS];

	REQ(c, dim >= 0 && dim < GGML_MAX_DIMS, "dim=%d out of range", dim);
	REQ(c, a->type == b->type, "src0 type %s != src1 type %s", ggml_type_name(a->type), ggml_type_name(b->type));
	for (int d = 0; d < GGML_MAX_DIMS; d++) {
		REQ(c, d == dim || a->ne[d] == b->ne[d], "src0 " NE_FMT " and src1 " NE_FMT " differ outside dim %d",
		    NE_ARGS(a), NE_ARGS(b), dim);
		ne[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
	}
	TRY(rules_new(c, a->type, ne));
	/* ggml-cpu concat_any (types other than 1, 2, 4 bytes): whole rows */
	if (ggml_blck_size(a->type) != 1 || !rules_type_is(a, TB_FLOAT | TB_I32 | TB(GGML_TYPE_I16) | TB(GGML_TYPE_I8))) {
		TRY(rules_contiguous_rows(c, a, "src0"));
		TRY(rules_contiguous_rows(c, b, "src1"));
	}
	return 0;
}

int rule_pad(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	int64_t ne[GGML_MAX_DIMS];

	for (int d = 0; d < GGML_MAX_DIMS; d++) {
		const int32_t lp = rules_i32(n, 2 * d), rp = rules_i32(n, 2 * d + 1);
		REQ(c, lp >= 0 && rp >= 0, "negative padding (%d, %d) in dim %d", lp, rp, d);
		ne[d] = a->ne[d] + lp + rp;
	}
	const int32_t circular = rules_i32(n, 8);
	REQ(c, circular == 0 || circular == 1, "circular=%d", circular);
	/* circular padding wraps modulo the source extent */
	REQ(c, !circular || !ggml_is_empty(a), "circular padding of an empty tensor");
	TRY(rules_type(c, a, "src0", TB_F32));
	return rules_new(c, GGML_TYPE_F32, ne);
}

/*
 * ggml_rules.c — the per-op validation entry point: a table of rules indexed
 * by enum ggml_op (one file per op family holds the rules).
 *
 * Ops without an entry are refused with PPRPC_EUNSUPP, naming the op: the
 * table lists what llama.cpp's graphs (src/models, llama-graph.cpp, the KV
 * cache and ggml-backend-sched's copies) build, nothing more.
 *
 * What no rule here can see (data, or context beyond the node):
 * - row / expert / sequence indices stored in tensors: GET_ROWS, SET_ROWS
 *   and ADD_ID abort in ggml-cpu on an index out of range; MUL_MAT_ID
 *   (ggml-cpu only assert()s, then writes out of bounds) and SSM_SCAN's ids
 *   are not checked at all, nor are any of them in ggml-cuda;
 * - ggml-cuda's mul_mat_q / mul_mat_vec_q assert that a src0 in a compute
 *   buffer whose allocation is padded is a contiguous non-view tensor
 *   (depends on the buffer's usage and alloc size);
 * - ggml-cuda's graph fusion (rms_norm+mul+add, rope+set_rows, topk-moe,
 *   ssm_conv+silu, ...) looks at neighbouring nodes; its asserts hold for
 *   nodes that pass these rules one by one as far as we read them.
 *
 * Each rule's comment lists the kernels' preconditions as
 * "cpu: ggml-cpu/<file>:<line> ..." and "cuda: ggml-cuda/<file>:<line> ..."
 * (paths under ext/llama.cpp-v0.5.0/ggml/src); list them with
 *   grep -rn '^ \* \(cpu\|cuda\): ' daemon/backend/ggml/rules
 */
#include <stdio.h>

#include "ggml_rules.h"
#include "rules_impl.h"

static const rule_fn rules[GGML_OP_COUNT] = {
	[GGML_OP_DUP] = rule_dup,
	[GGML_OP_ADD] = rule_add,
	[GGML_OP_ADD_ID] = rule_add_id,
	[GGML_OP_SUB] = rule_sub_mul_div,
	[GGML_OP_MUL] = rule_sub_mul_div,
	[GGML_OP_DIV] = rule_sub_mul_div,
	[GGML_OP_SQR] = rule_sqr_sqrt_log_sin_cos,
	[GGML_OP_SQRT] = rule_sqr_sqrt_log_sin_cos,
	[GGML_OP_LOG] = rule_sqr_sqrt_log_sin_cos,
	[GGML_OP_SIN] = rule_sqr_sqrt_log_sin_cos,
	[GGML_OP_COS] = rule_sqr_sqrt_log_sin_cos,
	[GGML_OP_SUM] = rule_sum,
	[GGML_OP_SUM_ROWS] = rule_sum_rows,
	[GGML_OP_CUMSUM] = rule_cumsum,
	[GGML_OP_MEAN] = rule_mean,
	[GGML_OP_ARGMAX] = rule_argmax,
	[GGML_OP_REPEAT] = rule_repeat,
	[GGML_OP_CONCAT] = rule_concat,
	[GGML_OP_NORM] = rule_norm,
	[GGML_OP_RMS_NORM] = rule_rms_norm,
	[GGML_OP_GROUP_NORM] = rule_group_norm,
	[GGML_OP_L2_NORM] = rule_l2_norm,
	[GGML_OP_MUL_MAT] = rule_mul_mat,
	[GGML_OP_MUL_MAT_ID] = rule_mul_mat_id,
	[GGML_OP_OUT_PROD] = rule_out_prod,
	[GGML_OP_SCALE] = rule_scale,
	[GGML_OP_CPY] = rule_cpy,
	[GGML_OP_CONT] = rule_cont,
	[GGML_OP_RESHAPE] = rule_reshape,
	[GGML_OP_VIEW] = rule_view,
	[GGML_OP_PERMUTE] = rule_permute,
	[GGML_OP_TRANSPOSE] = rule_transpose,
	[GGML_OP_GET_ROWS] = rule_get_rows,
	[GGML_OP_SET_ROWS] = rule_set_rows,
	[GGML_OP_SOFT_MAX] = rule_soft_max,
	[GGML_OP_ROPE] = rule_rope,
	[GGML_OP_ROPE_BACK] = rule_rope,
	[GGML_OP_CLAMP] = rule_clamp,
	[GGML_OP_PAD] = rule_pad,
	[GGML_OP_ARGSORT] = rule_argsort,
	[GGML_OP_TOP_K] = rule_top_k,
	[GGML_OP_LEAKY_RELU] = rule_leaky_relu,
	[GGML_OP_TRI] = rule_tri,
	[GGML_OP_FILL] = rule_fill,
	[GGML_OP_FLASH_ATTN_EXT] = rule_flash_attn_ext,
	[GGML_OP_SSM_CONV] = rule_ssm_conv,
	[GGML_OP_SSM_SCAN] = rule_ssm_scan,
	[GGML_OP_SOLVE_TRI] = rule_solve_tri,
	[GGML_OP_GATED_DELTA_NET] = rule_gated_delta_net,
	[GGML_OP_SET] = rule_set,
	[GGML_OP_ARANGE] = rule_arange,
	[GGML_OP_POOL_2D] = rule_pool_2d,
	[GGML_OP_LIGHTNING_INDEXER] = rule_lightning_indexer,
	[GGML_OP_DSV4_HC_COMB] = rule_dsv4_hc_comb,
	[GGML_OP_DSV4_HC_PRE] = rule_dsv4_hc_pre,
	[GGML_OP_DSV4_HC_POST] = rule_dsv4_hc_post,
	[GGML_OP_UNARY] = rule_unary,
	[GGML_OP_GLU] = rule_glu,
};

/* Ops that may produce a non-empty result from an empty source.  Everywhere
 * else an empty source under a non-empty result is refused: kernels divide by
 * source extents (a zero-sized broadcast source, a zero-length reduction). */
static bool empty_source_ok(enum ggml_op op)
{
	return op == GGML_OP_CONCAT || op == GGML_OP_SET_ROWS;
}

int ggml_rules_has_rule(enum ggml_op op)
{
	return (unsigned)op < GGML_OP_COUNT && rules[op] != NULL;
}

int ggml_rules_check(const struct ggml_tensor *node, char *err, size_t errlen)
{
	struct rule_ctx c = { .node = node, .err = err, .errlen = errlen };

	if (err && errlen)
		err[0] = '\0';
	if ((unsigned)node->op >= GGML_OP_COUNT) {
		if (err && errlen)
			snprintf(err, errlen, "unknown op %d", (int)node->op);
		return PPRPC_EUNSUPP;
	}
	if (!rules[node->op]) {
		if (err && errlen)
			snprintf(err, errlen, "op %s is not supported", ggml_op_name(node->op));
		return PPRPC_EUNSUPP;
	}
	if (!ggml_is_empty(node) && !empty_source_ok(node->op)) {
		for (int i = 0; i < GGML_MAX_SRC; i++)
			REQ(&c, !node->src[i] || node->src[i] == node || !ggml_is_empty(node->src[i]),
			    "src[%d] " NE_FMT " is empty but the result " NE_FMT " is not", i,
			    NE_ARGS(node->src[i]), NE_ARGS(node));
	}
	return rules[node->op](&c);
}

/*
 * rules_norm.c — NORM, RMS_NORM, L2_NORM, GROUP_NORM.
 *
 * All four are F32 only on both backends; eps (op_params[0], [1] for
 * GROUP_NORM) must be >= 0 (a NaN fails that test, as in the kernels).
 * ggml-cuda reads rows of src0 through strides but writes the result densely,
 * so an in-place result must be contiguous.
 */
#include "rules_impl.h"

static int norm_common(struct rule_ctx *c, int eps_slot)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_dup_or_inplace(c, a));
	TRY(rules_contiguous(c, c->node, "result"));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_strides_elems(c, a, "src0"));
	const float eps = rules_f32(c->node, eps_slot);
	REQ(c, eps >= 0.0f, "eps must be >= 0");
	return 0;
}

int rule_norm(struct rule_ctx *c)
{
	return norm_common(c, 0);
}

int rule_rms_norm(struct rule_ctx *c)
{
	return norm_common(c, 0);
}

int rule_l2_norm(struct rule_ctx *c)
{
	return norm_common(c, 0);
}

int rule_group_norm(struct rule_ctx *c)
{
	TRY(norm_common(c, 1));
	/* both kernels divide by the group count; ggml-cuda needs src0 contiguous */
	REQ(c, rules_i32(c->node, 0) > 0, "n_groups=%d must be > 0", rules_i32(c->node, 0));
	return rules_contiguous(c, rules_src(c, 0), "src0");
}

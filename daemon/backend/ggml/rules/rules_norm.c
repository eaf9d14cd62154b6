/*
 * rules_norm.c — NORM, RMS_NORM, L2_NORM, GROUP_NORM.
 *
 * All four are F32 only on both backends; eps (op_params[0], [1] for
 * GROUP_NORM) must be >= 0 (a NaN fails that test, as in the kernels).
 * ggml-cuda reads rows of src0 through strides but writes the result densely,
 * so an in-place result must be contiguous.
 */
#include "rules_impl.h"

/*
 * NORM, RMS_NORM, L2_NORM preconditions (GROUP_NORM's below):
 * cpu: ggml-cpu/ops.cpp:3843 asserts eps >= 0 (3949 RMS_NORM, 4319 L2_NORM); rows at i01*nb01 + i02*nb02 + i03*nb03, nb00 == sizeof(float)
 * cuda: ggml-cuda/norm.cu:451 asserts nb00 == the element size (494 RMS_NORM, 692 L2_NORM), strides passed in elements
 * cuda: ggml-cuda/norm.cu:283 grid (ne01, ne02, ne03) with int dims: ne01 < 2^31, ne02 and ne03 <= 65535 (CUDA's grid y/z limit)
 * cuda: ggml-cuda/norm.cu:448 asserts eps >= 0 (491, 689)
 */
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
	REQ(c, a->ne[0] <= INT32_MAX && a->ne[1] <= INT32_MAX && a->ne[2] <= 65535 && a->ne[3] <= 65535,
	    "src0 " NE_FMT " exceeds ggml-cuda's grid (ne[2], ne[3] <= 65535)", NE_ARGS(a));
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

/*
 * GROUP_NORM preconditions:
 * cpu: ggml-cpu/ops.cpp:4216 asserts nb00 == sizeof(float)
 * cpu: ggml-cpu/ops.cpp:4230 (n_channels + n_groups - 1) / n_groups in int: n_groups > 0, and the sum must not overflow
 * cpu: ggml-cpu/ops.cpp:4231 one task per group: n_groups iterations whatever the channel count
 * cpu: ggml-cpu/ops.cpp:4252 divides by ne00 * ne01 * step (a float: an empty group gives NaN, not a trap)
 * cuda: ggml-cuda/norm.cu:472 asserts eps >= 0 (op_params[1])
 * cuda: ggml-cuda/norm.cu:474 group_size = ne0*ne1*ceil(ne2/n_groups) in int; norm.cu:475 ggml_nelements as int, n_groups*ne3 blocks
 * cuda: ggml-cuda/norm.cu:293 the kernel indexes src0 flat: contiguous
 */
int rule_group_norm(struct rule_ctx *c)
{
	TRY(norm_common(c, 1));
	const struct ggml_tensor *a = rules_src(c, 0);
	const int32_t groups = rules_i32(c->node, 0);
	/* llama.cpp's groups split the channels; more groups than channels
	 * only makes empty ones, and n_channels + n_groups overflows int */
	REQ(c, groups > 0 && groups <= a->ne[2], "n_groups=%d outside 1..%lld channels", groups, (long long)a->ne[2]);
	REQ(c, ggml_nelements(a) <= INT32_MAX, "%lld elements exceed ggml-cuda's int count", (long long)ggml_nelements(a));
	return rules_contiguous(c, a, "src0");
}

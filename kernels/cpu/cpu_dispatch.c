/*
 * kernels/cpu/cpu_dispatch.c — kern_cpu_run: validate, then call the op's
 * entry in a table indexed by op.
 */
#include "kernels/cpu/cpu_impl.h"

static const kern_cpu_fn cpu_ops[PPRPC_OP_COUNT] = {
	[PPRPC_OP_ADD] = kern_cpu_add,
	[PPRPC_OP_MUL] = kern_cpu_mul,
	[PPRPC_OP_SCALE] = kern_cpu_scale,
	[PPRPC_OP_CPY] = kern_cpu_cpy,
	[PPRPC_OP_MUL_MAT] = kern_cpu_mul_mat,
	[PPRPC_OP_GET_ROWS] = kern_cpu_get_rows,
	[PPRPC_OP_SET_ROWS] = kern_cpu_set_rows,
	[PPRPC_OP_CONCAT] = kern_cpu_concat,
	[PPRPC_OP_RMS_NORM] = kern_cpu_rms_norm,
	[PPRPC_OP_L2_NORM] = kern_cpu_l2_norm,
	[PPRPC_OP_SILU] = kern_cpu_silu,
	[PPRPC_OP_SIGMOID] = kern_cpu_sigmoid,
	[PPRPC_OP_SOFTPLUS] = kern_cpu_softplus,
	[PPRPC_OP_EXP] = kern_cpu_exp,
	[PPRPC_OP_GELU] = kern_cpu_gelu,
	[PPRPC_OP_SWIGLU] = kern_cpu_swiglu,
	[PPRPC_OP_SOFTMAX] = kern_cpu_softmax,
	[PPRPC_OP_ARGMAX] = kern_cpu_argmax,
	[PPRPC_OP_ROPE] = kern_cpu_rope,
	[PPRPC_OP_ATTENTION] = kern_cpu_attention,
	[PPRPC_OP_GATED_DELTA_NET] = kern_cpu_gated_delta_net,
};

int kern_cpu_run(const struct kern_cpu_ctx *ctx, int op, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, int nsrc, struct kern_tensor *dst)
{
	int rc;

	if (!ctx || ctx->nthreads < 1 || !src || !dst)
		return PPRPC_EINVAL;
	/* Re-validating costs nothing next to the kernel, and the kernels index
	 * memory with these descriptors: a skipped check upstream must not
	 * become an out-of-bounds access here. */
	rc = kern_op_check_dst(op, p, (const struct kern_tensor *const *)src, nsrc, dst, NULL, 0);
	if (rc < 0)
		return rc;
	if (!cpu_ops[op])
		return PPRPC_EUNSUPP;
	for (int i = 0; i < nsrc; i++)
		if (!src[i]->data)
			return PPRPC_EINVAL;
	if (!dst->data)
		return PPRPC_EINVAL;
	return cpu_ops[op](ctx, p, src, dst);
}

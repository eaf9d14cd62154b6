/*
 * kernels/cuda/cuda_dispatch.cu — kern_cuda_run: validate, check the
 * workspace, then call the op's entry in a table indexed by op; and
 * kern_cuda_preload over every file's kernels.
 */
#include "kernels/cuda/cuda_impl.cuh"

static const kcu_fn cuda_ops[PPRPC_OP_COUNT] = {
	/* [PPRPC_OP_NONE] */ NULL,
	/* [PPRPC_OP_ADD] */ kcu_add,
	/* [PPRPC_OP_MUL] */ kcu_mul,
	/* [PPRPC_OP_SCALE] */ kcu_scale,
	/* [PPRPC_OP_CPY] */ kcu_cpy,
	/* [PPRPC_OP_MUL_MAT] */ kcu_mul_mat,
	/* [PPRPC_OP_GET_ROWS] */ kcu_get_rows,
	/* [PPRPC_OP_SET_ROWS] */ kcu_set_rows,
	/* [PPRPC_OP_CONCAT] */ kcu_concat,
	/* [PPRPC_OP_RMS_NORM] */ kcu_rms_norm,
	/* [PPRPC_OP_L2_NORM] */ kcu_l2_norm,
	/* [PPRPC_OP_SILU] */ kcu_silu,
	/* [PPRPC_OP_SIGMOID] */ kcu_sigmoid,
	/* [PPRPC_OP_SOFTPLUS] */ kcu_softplus,
	/* [PPRPC_OP_EXP] */ kcu_exp,
	/* [PPRPC_OP_GELU] */ kcu_gelu,
	/* [PPRPC_OP_SWIGLU] */ kcu_swiglu,
	/* [PPRPC_OP_SOFTMAX] */ kcu_softmax,
	/* [PPRPC_OP_ROPE] */ kcu_rope,
	/* [PPRPC_OP_ATTENTION] */ kcu_attention,
	/* [PPRPC_OP_ARGMAX] */ kcu_argmax,
	/* [PPRPC_OP_GATED_DELTA_NET] */ kcu_gated_delta_net,
};

/* C++ has no designated array initializers: pin the positional order. */
static_assert(PPRPC_OP_ADD == 1 && PPRPC_OP_MUL == 2 && PPRPC_OP_SCALE == 3 &&
		      PPRPC_OP_CPY == 4 && PPRPC_OP_MUL_MAT == 5 && PPRPC_OP_GET_ROWS == 6 &&
		      PPRPC_OP_SET_ROWS == 7 && PPRPC_OP_CONCAT == 8 && PPRPC_OP_RMS_NORM == 9 &&
		      PPRPC_OP_L2_NORM == 10 && PPRPC_OP_SILU == 11 && PPRPC_OP_SIGMOID == 12 &&
		      PPRPC_OP_SOFTPLUS == 13 && PPRPC_OP_EXP == 14 && PPRPC_OP_GELU == 15 &&
		      PPRPC_OP_SWIGLU == 16 && PPRPC_OP_SOFTMAX == 17 && PPRPC_OP_ROPE == 18 &&
		      PPRPC_OP_ATTENTION == 19 && PPRPC_OP_ARGMAX == 20 &&
		      PPRPC_OP_GATED_DELTA_NET == 21 && PPRPC_OP_COUNT == 22,
	      "cuda_ops[] is positional");

static const kcu_preload_fn preloads[] = {
	kcu_binary_preload, kcu_copy_preload, kcu_unary_preload, kcu_norm_preload,
	kcu_softmax_preload, kcu_argmax_preload, kcu_rows_preload, kcu_rope_preload,
	kcu_attention_preload, kcu_gdn_preload, kcu_gdn_gate_preload, kcu_mul_mat_preload,
	kcu_q8_0_preload, kcu_index_check_preload,
};

/* Workspace need of a node whose descriptors already passed check_dst. */
static size_t ws_need(int op, struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	switch (op) {
	case PPRPC_OP_MUL_MAT:
		return kcu_mul_mat_ws(src, dst);
	case PPRPC_OP_GET_ROWS:
	case PPRPC_OP_SET_ROWS:
		return kcu_rows_ws();
	default:
		return 0;
	}
}

extern "C" size_t kern_cuda_workspace_bytes(int op, const struct pprpc_op_params *p,
					    struct kern_tensor *const *src, int nsrc,
					    const struct kern_tensor *dst)
{
	if (!src || !dst ||
	    kern_op_check_dst(op, p, (const struct kern_tensor *const *)src, nsrc, dst, NULL, 0) < 0)
		return SIZE_MAX;
	return ws_need(op, src, dst);
}

extern "C" int kern_cuda_run(const struct kern_cuda_ctx *ctx, int op,
			     const struct pprpc_op_params *p, struct kern_tensor *const *src,
			     int nsrc, struct kern_tensor *dst, char *err, size_t errlen)
{
	size_t need;
	int rc;

	if (!ctx || !src || !dst)
		return kern_errf(err, errlen, PPRPC_EINVAL, "kern_cuda_run: missing argument");
	/* Re-validating is cheap next to a launch, and the kernels index device
	 * memory with these descriptors. */
	rc = kern_op_check_dst(op, p, (const struct kern_tensor *const *)src, nsrc, dst, err,
			       errlen);
	if (rc < 0)
		return rc;
	if (!cuda_ops[op])
		return kern_errf(err, errlen, PPRPC_EUNSUPP, "%s: not implemented on CUDA",
				 kern_op_name(op));
	for (int i = 0; i < nsrc; i++)
		if (!src[i]->data)
			return kern_errf(err, errlen, PPRPC_EINVAL, "%s: src%d has no data",
					 kern_op_name(op), i);
	if (!dst->data)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: dst has no data", kern_op_name(op));
	need = ws_need(op, src, dst);
	if (need > 0 && (!ctx->workspace || ctx->workspace_bytes < need))
		return kern_errf(err, errlen, PPRPC_ELIMIT,
				 "%s: needs %zu bytes of workspace, the stream has %zu",
				 kern_op_name(op), need, ctx->workspace ? ctx->workspace_bytes : 0);
	return cuda_ops[op](ctx, p, src, dst, err, errlen);
}

extern "C" int kern_cuda_preload(char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(preloads) / sizeof(preloads[0]); i++) {
		int rc = preloads[i](err, errlen);

		if (rc < 0)
			return rc;
	}
	return 0;
}

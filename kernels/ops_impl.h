/*
 * kernels/ops_impl.h — internal to kernels/: the op descriptor table and the
 * per-op shape rules it points to.
 */
#ifndef PPRPC_KERNELS_OPS_IMPL_H
#define PPRPC_KERNELS_OPS_IMPL_H

#include "kernels/ops.h"

/* Compute the contiguous destination for already validated sources (count
 * and descriptors checked by the caller).  Writes *out only on success. */
typedef int (*kern_infer_fn)(const char *name, const struct pprpc_op_params *p,
			     const struct kern_tensor *const *src,
			     struct kern_tensor *out, char *err, size_t errlen);

struct kern_op_desc {
	const char *name;
	int nsrc;
	/* The destination may be any view whose dtype and element count match
	 * (CPY); otherwise it must be contiguous with the inferred ne. */
	bool dst_view;
	/* Bit k set: f[k] (i[k]) is meaningful.  Others must be zero, so a
	 * later meaning for them cannot be silently ignored by an old peer. */
	uint8_t f_used;
	uint8_t i_used;
	kern_infer_fn infer;
};

/* NULL for an op without a descriptor (out of range or PPRPC_OP_NONE). */
const struct kern_op_desc *kern_op_desc(int op);

/* f32, f16 or bf16. */
static inline bool kern_is_float(int dtype)
{
	return dtype == PPRPC_F32 || dtype == PPRPC_F16 || dtype == PPRPC_BF16;
}

static inline const char *kern_dt_name(int dtype)
{
	return kern_dtype(dtype)->name;
}

/* *out = the contiguous tensor of dtype and ne; a size that overflows is an
 * error naming the op. */
int kern_out_contig(struct kern_tensor *out, int dtype, const int64_t ne[PPRPC_MAX_DIMS], const char *name,
		    char *err, size_t errlen);

/* Format a reason into err (when given) and return code. */
int kern_errf(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

int kern_infer_binary(const char *name, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src,
		      struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_scale(const char *name, const struct pprpc_op_params *p,
		     const struct kern_tensor *const *src,
		     struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_cpy(const char *name, const struct pprpc_op_params *p,
		   const struct kern_tensor *const *src,
		   struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_mul_mat(const char *name, const struct pprpc_op_params *p,
		       const struct kern_tensor *const *src,
		       struct kern_tensor *out, char *err, size_t errlen);
/* ops_rules_rows.c */
int kern_infer_get_rows(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_set_rows(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_concat(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
/* ops_rules_unary.c */
int kern_infer_unary(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_swiglu(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_norm(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_softmax(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_argmax(const char *name, const struct pprpc_op_params *p,
		const struct kern_tensor *const *src,
		struct kern_tensor *out, char *err, size_t errlen);
/* ops_rules_attn.c */
int kern_infer_rope(const char *name, const struct pprpc_op_params *p,
		    const struct kern_tensor *const *src,
		    struct kern_tensor *out, char *err, size_t errlen);
int kern_infer_attention(const char *name, const struct pprpc_op_params *p,
			 const struct kern_tensor *const *src,
			 struct kern_tensor *out, char *err, size_t errlen);
/* ops_rules_gdn.c */
int kern_infer_gated_delta_net(const char *name, const struct pprpc_op_params *p,
			       const struct kern_tensor *const *src,
			       struct kern_tensor *out, char *err, size_t errlen);

#endif

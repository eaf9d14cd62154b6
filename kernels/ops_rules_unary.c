/*
 * kernels/ops_rules_unary.c — shape and dtype rules of the row-wise f32 ops:
 * SILU, SIGMOID, SOFTPLUS, EXP, GELU, SWIGLU, RMS_NORM, L2_NORM, SOFTMAX,
 * ARGMAX (semantics: ops.h).  Sources reaching here have the right count
 * and valid descriptors.
 */
#include "kernels/ops_impl.h"

#include <math.h>
#include <stdint.h>

static int need_f32(const char *name, const struct kern_tensor *t, int i, char *err,
		    size_t errlen)
{
	if (t->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src%d is %s, must be f32", name, i,
				 kern_dt_name(t->dtype));
	return 0;
}

int kern_infer_unary(const char *name, const struct pprpc_op_params *p,
		     const struct kern_tensor *const *src,
		     struct kern_tensor *out, char *err, size_t errlen)
{
	int rc = need_f32(name, src[0], 0, err, errlen);

	(void)p;
	if (rc < 0)
		return rc;
	return kern_out_contig(out, PPRPC_F32, src[0]->ne, name, err, errlen);
}

int kern_infer_swiglu(const char *name, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src,
		      struct kern_tensor *out, char *err, size_t errlen)
{
	int rc = need_f32(name, src[0], 0, err, errlen);

	(void)p;
	if (rc == 0)
		rc = need_f32(name, src[1], 1, err, errlen);
	if (rc < 0)
		return rc;
	for (int i = 0; i < PPRPC_MAX_DIMS; i++)
		if (src[0]->ne[i] != src[1]->ne[i])
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: src0.ne[%d]=%lld != src1.ne[%d]=%lld", name, i,
					 (long long)src[0]->ne[i], i, (long long)src[1]->ne[i]);
	return kern_out_contig(out, PPRPC_F32, src[0]->ne, name, err, errlen);
}

int kern_infer_norm(const char *name, const struct pprpc_op_params *p,
		    const struct kern_tensor *const *src,
		    struct kern_tensor *out, char *err, size_t errlen)
{
	float eps = p ? p->f[0] : 0.0f;

	/* A negative eps can make the root's argument negative (NaN rows);
	 * zero is allowed (an all-zero row then gives NaN, as it should). */
	if (!isfinite(eps) || eps < 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: eps f[0]=%g must be finite and >= 0",
				 name, (double)eps);
	return kern_infer_unary(name, p, src, out, err, errlen);
}

int kern_infer_softmax(const char *name, const struct pprpc_op_params *p,
		       const struct kern_tensor *const *src,
		       struct kern_tensor *out, char *err, size_t errlen)
{
	float scale = p ? p->f[0] : 0.0f;
	int causal = p ? p->i[0] : 0, past = p ? p->i[1] : 0;

	if (!isfinite(scale))
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: scale f[0] must be finite", name);
	if (causal != 0 && causal != 1)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: i[0]=%d, must be 0 or 1 (causal)",
				 name, causal);
	if (past < 0 || (!causal && past != 0))
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[1]=%d, must be >= 0 and only set with i[0]=1", name, past);
	return kern_infer_unary(name, p, src, out, err, errlen);
}

int kern_infer_argmax(const char *name, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src,
		      struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *a = src[0];
	int rc = need_f32(name, a, 0, err, errlen);
	int64_t ne[PPRPC_MAX_DIMS] = { a->ne[1], a->ne[2], a->ne[3], 1 };

	(void)p;
	if (rc < 0)
		return rc;
	if (a->ne[0] > INT32_MAX)
		return kern_errf(err, errlen, PPRPC_ETOOBIG,
				 "%s: src0.ne[0]=%lld does not fit an i32 index", name,
				 (long long)a->ne[0]);
	return kern_out_contig(out, PPRPC_I32, ne, name, err, errlen);
}

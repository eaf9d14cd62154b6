/*
 * kernels/ops_rules.c — per-op shape and dtype rules (semantics: ops.h).
 * Sources reaching here have the right count and valid descriptors.
 */
#include "kernels/ops_impl.h"

int kern_out_contig(struct kern_tensor *out, int dtype, const int64_t ne[PPRPC_MAX_DIMS], const char *name,
		    char *err, size_t errlen)
{
	int rc = kern_tensor_init_contig(out, dtype, ne);

	if (rc < 0)
		return kern_errf(err, errlen, rc, "%s: dst size overflows", name);
	return 0;
}

int kern_infer_binary(const char *name, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src,
		      struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *a = src[0], *b = src[1];

	(void)p;
	if (a->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src0 is %s, must be f32",
				 name, kern_dt_name(a->dtype));
	if (!kern_is_float(b->dtype))
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: src1 is %s, must be f32, f16 or bf16", name, kern_dt_name(b->dtype));
	for (int i = 0; i < PPRPC_MAX_DIMS; i++)
		if (a->ne[i] % b->ne[i] != 0)
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: src0.ne[%d]=%lld is not a multiple of src1.ne[%d]=%lld",
					 name, i, (long long)a->ne[i], i, (long long)b->ne[i]);
	return kern_out_contig(out, PPRPC_F32, a->ne, name, err, errlen);
}

int kern_infer_scale(const char *name, const struct pprpc_op_params *p,
		     const struct kern_tensor *const *src,
		     struct kern_tensor *out, char *err, size_t errlen)
{
	(void)p;
	if (src[0]->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src0 is %s, must be f32",
				 name, kern_dt_name(src[0]->dtype));
	return kern_out_contig(out, PPRPC_F32, src[0]->ne, name, err, errlen);
}

int kern_infer_cpy(const char *name, const struct pprpc_op_params *p,
		   const struct kern_tensor *const *src,
		   struct kern_tensor *out, char *err, size_t errlen)
{
	int to = p ? p->i[0] : PPRPC_F32;

	if (!kern_is_float(src[0]->dtype))
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: src0 is %s, must be f32, f16 or bf16",
				 name, kern_dt_name(src[0]->dtype));
	if (to < 0 || to >= PPRPC_DTYPE_COUNT)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: i[0]=%d is not a dtype",
				 name, to);
	if (!kern_is_float(to))
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: dst dtype %s, must be f32, f16 or bf16", name, kern_dt_name(to));
	return kern_out_contig(out, to, src[0]->ne, name, err, errlen);
}

int kern_infer_mul_mat(const char *name, const struct pprpc_op_params *p,
		       const struct kern_tensor *const *src,
		       struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	int64_t ne[PPRPC_MAX_DIMS];

	(void)p;
	if (!kern_is_float(w->dtype) && w->dtype != PPRPC_Q8_0)
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: src0 is %s, must be f32, f16, bf16 or q8_0", name,
				 kern_dt_name(w->dtype));
	if (x->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src1 is %s, must be f32",
				 name, kern_dt_name(x->dtype));
	if (w->ne[0] != x->ne[0])
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: src0.ne[0]=%lld != src1.ne[0]=%lld",
				 name, (long long)w->ne[0], (long long)x->ne[0]);
	for (int i = 2; i < PPRPC_MAX_DIMS; i++)
		if (x->ne[i] % w->ne[i] != 0)
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: src1.ne[%d]=%lld is not a multiple of src0.ne[%d]=%lld",
					 name, i, (long long)x->ne[i], i, (long long)w->ne[i]);
	ne[0] = w->ne[1];
	ne[1] = x->ne[1];
	ne[2] = x->ne[2];
	ne[3] = x->ne[3];
	return kern_out_contig(out, PPRPC_F32, ne, name, err, errlen);
}

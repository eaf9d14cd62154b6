/*
 * kernels/ops_rules_rows.c — shape and dtype rules of the row-moving ops:
 * GET_ROWS, SET_ROWS, CONCAT (semantics: ops.h).  Sources reaching here have
 * the right count and valid descriptors.
 *
 * Index values are data, not shape: an id out of range is found by the
 * kernel at run time (PPRPC_ERANGE), never here.
 */
#include "kernels/ops_impl.h"

#include <stdint.h>

/* A batch dimension of one operand either matches the other's or is 1
 * (used for every slice). */
static bool match_or_one(int64_t have, int64_t want)
{
	return have == want || have == 1;
}

int kern_infer_get_rows(const char *name, const struct pprpc_op_params *p,
			const struct kern_tensor *const *src,
			struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *tab = src[0], *ids = src[1];
	int64_t ne[PPRPC_MAX_DIMS];

	(void)p;
	if (!kern_is_float(tab->dtype) && tab->dtype != PPRPC_Q8_0)
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: src0 is %s, must be f32, f16, bf16 or q8_0", name,
				 kern_dt_name(tab->dtype));
	if (ids->dtype != PPRPC_I32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src1 is %s, must be i32", name,
				 kern_dt_name(ids->dtype));
	if (ids->ne[3] != 1)
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: src1.ne[3]=%lld, must be 1", name,
				 (long long)ids->ne[3]);
	if (!match_or_one(tab->ne[2], ids->ne[1]) || !match_or_one(tab->ne[3], ids->ne[2]))
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: src0 batch [%lld, %lld] must be 1 or src1's [%lld, %lld]",
				 name, (long long)tab->ne[2], (long long)tab->ne[3],
				 (long long)ids->ne[1], (long long)ids->ne[2]);
	ne[0] = tab->ne[0];
	ne[1] = ids->ne[0];
	ne[2] = ids->ne[1];
	ne[3] = ids->ne[2];
	return kern_out_contig(out, PPRPC_F32, ne, name, err, errlen);
}

int kern_infer_set_rows(const char *name, const struct pprpc_op_params *p,
			const struct kern_tensor *const *src,
			struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *val = src[0], *ids = src[1];
	int64_t rows = p ? p->i[0] : 0;
	int to = p ? p->i[1] : PPRPC_F32;
	int64_t ne[PPRPC_MAX_DIMS];

	if (val->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src0 is %s, must be f32", name,
				 kern_dt_name(val->dtype));
	if (ids->dtype != PPRPC_I32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src1 is %s, must be i32", name,
				 kern_dt_name(ids->dtype));
	if (rows < 1)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[0]=%lld, must be the table's row count (>= 1)", name,
				 (long long)rows);
	if (to < 0 || to >= PPRPC_DTYPE_COUNT || !kern_is_float(to))
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: i[1]=%d, the table dtype must be f32, f16 or bf16", name, to);
	if (ids->ne[0] != val->ne[1] || ids->ne[3] != 1 || !match_or_one(ids->ne[1], val->ne[2]) ||
	    !match_or_one(ids->ne[2], val->ne[3]))
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: src1 [%lld, %lld, %lld, %lld] must be [src0.ne[1]=%lld, "
				 "1|%lld, 1|%lld, 1]", name, (long long)ids->ne[0],
				 (long long)ids->ne[1], (long long)ids->ne[2], (long long)ids->ne[3],
				 (long long)val->ne[1], (long long)val->ne[2], (long long)val->ne[3]);
	ne[0] = val->ne[0];
	ne[1] = rows;
	ne[2] = val->ne[2];
	ne[3] = val->ne[3];
	return kern_out_contig(out, to, ne, name, err, errlen);
}

int kern_infer_concat(const char *name, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src,
		      struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *a = src[0], *b = src[1];
	int dim = p ? p->i[0] : 0;
	int64_t ne[PPRPC_MAX_DIMS];

	if (dim < 0 || dim >= PPRPC_MAX_DIMS)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: i[0]=%d is not a dimension",
				 name, dim);
	if (!kern_is_float(a->dtype))
		return kern_errf(err, errlen, PPRPC_ETYPE,
				 "%s: src0 is %s, must be f32, f16 or bf16", name, kern_dt_name(a->dtype));
	if (b->dtype != a->dtype)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src1 is %s, src0 is %s", name,
				 kern_dt_name(b->dtype), kern_dt_name(a->dtype));
	for (int i = 0; i < PPRPC_MAX_DIMS; i++) {
		if (i != dim && a->ne[i] != b->ne[i])
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: src0.ne[%d]=%lld != src1.ne[%d]=%lld", name, i,
					 (long long)a->ne[i], i, (long long)b->ne[i]);
		ne[i] = a->ne[i];
	}
	/* Each is <= KERN_MAX_ELEMENTS (2^34): the sum cannot overflow, and
	 * out_contig bounds the total. */
	ne[dim] = a->ne[dim] + b->ne[dim];
	return kern_out_contig(out, a->dtype, ne, name, err, errlen);
}

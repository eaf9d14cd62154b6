/*
 * kernels/cpu/cpu_concat.c — CONCAT of src0 and src1 along dimension i[0]
 * (semantics: ops.h), by destination rows.  Same dtype on all three, so
 * elements move as bits (NaN payloads survive).
 */
#include "kernels/cpu/cpu_row_impl.h"

struct concat_job {
	const struct kern_tensor *a, *b, *d;
	int dim;
	kern_cpu_cvt_fn copy;
};

static int concat_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct concat_job *j = arg;
	const struct kern_tensor *a = j->a, *b = j->b, *d = j->d;
	uint64_t esz = d->nb[0];  /* dst is contiguous */

	for (int64_t r = r0; r < r1; r++) {
		int64_t i[3], k;
		char *drow;

		cpu_row_index(d, r, i);
		drow = cpu_row_at(d, i[0], i[1], i[2]);
		if (j->dim == 0) {
			j->copy(drow, esz, cpu_row_at(a, i[0], i[1], i[2]), a->nb[0], a->ne[0]);
			j->copy(drow + (uint64_t)a->ne[0] * esz, esz, cpu_row_at(b, i[0], i[1], i[2]),
				b->nb[0], b->ne[0]);
			continue;
		}
		/* i[] holds (i1, i2, i3); the concat dim is i[dim - 1]. */
		k = j->dim - 1;
		if (i[k] < a->ne[j->dim]) {
			j->copy(drow, esz, cpu_row_at(a, i[0], i[1], i[2]), a->nb[0], a->ne[0]);
		} else {
			i[k] -= a->ne[j->dim];
			j->copy(drow, esz, cpu_row_at(b, i[0], i[1], i[2]), b->nb[0], b->ne[0]);
		}
	}
	return 0;
}

int kern_cpu_concat(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		    struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct concat_job j = { .a = src[0], .b = src[1], .d = dst, .dim = p ? p->i[0] : 0,
				.copy = kern_cpu_cvt(dst->dtype, dst->dtype) };

	if (!j.copy)
		return PPRPC_ETYPE;
	return kern_cpu_parallel(ctx, cpu_nrows(dst), kern_tensor_nelements(dst), concat_rows, &j);
}

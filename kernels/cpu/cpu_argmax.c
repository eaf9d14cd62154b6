/*
 * kernels/cpu/cpu_argmax.c — ARGMAX over ne[0]: index of the largest value
 * of each row; ties go to the lowest index, NaNs are skipped, a row of only
 * NaNs gives 0 (ops.h).
 */
#include "kernels/cpu/cpu_row_impl.h"

#include <math.h>

struct argmax_job {
	const struct kern_tensor *a, *d;
};

static int argmax_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct argmax_job *j = arg;
	const struct kern_tensor *a = j->a;
	int32_t *out = j->d->data;  /* contiguous, one i32 per source row */

	for (int64_t r = r0; r < r1; r++) {
		const char *arow = cpu_row(a, r);
		int64_t best = -1;
		float bv = 0.0f;

		for (int64_t i = 0; i < a->ne[0]; i++) {
			float v = *(const float *)(arow + (uint64_t)i * a->nb[0]);

			/* Strict >: the first of equal maxima wins.  NaN
			 * compares false and is never taken. */
			if (!isnan(v) && (best < 0 || v > bv)) {
				best = i;
				bv = v;
			}
		}
		out[r] = best < 0 ? 0 : (int32_t)best;
	}
	return 0;
}

int kern_cpu_argmax(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		    struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct argmax_job j = { .a = src[0], .d = dst };

	(void)p;
	return kern_cpu_parallel(ctx, cpu_nrows(src[0]), kern_tensor_nelements(src[0]),
				 argmax_rows, &j);
}

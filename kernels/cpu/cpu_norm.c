/*
 * kernels/cpu/cpu_norm.c — RMS_NORM and L2_NORM over ne[0], by rows.
 *
 * The sum of squares is accumulated in double (as ggml does with
 * ggml_float): rows are long (hidden sizes of thousands) and the scale
 * multiplies every element, so its error would show everywhere.  The
 * scale itself is rounded once to f32 and each output is x * scale, so
 * an output is at most two roundings from the exact value.
 */
#include "kernels/cpu/cpu_row_impl.h"

#include <math.h>

struct norm_job {
	const struct kern_tensor *a, *d;
	float eps;
	bool l2;
};

static int norm_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct norm_job *j = arg;
	const struct kern_tensor *a = j->a;
	int64_t n = a->ne[0];
	uint64_t nb = a->nb[0];

	for (int64_t r = r0; r < r1; r++) {
		const char *arow = cpu_row(a, r);
		float *drow = (float *)cpu_row(j->d, r);
		double sum = 0.0;
		float scale;

		for (int64_t i = 0; i < n; i++) {
			double x = *(const float *)(arow + (uint64_t)i * nb);

			sum += x * x;
		}
		if (j->l2)
			scale = (float)(1.0 / fmax(sqrt(sum), (double)j->eps));
		else
			scale = (float)(1.0 / sqrt(sum / (double)n + (double)j->eps));
		/* Read-before-write per element: in place on the same bytes is safe. */
		for (int64_t i = 0; i < n; i++)
			drow[i] = *(const float *)(arow + (uint64_t)i * nb) * scale;
	}
	return 0;
}

static int run_norm(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		    struct kern_tensor *const *src, struct kern_tensor *dst, bool l2)
{
	struct norm_job j = { .a = src[0], .d = dst, .eps = p ? p->f[0] : 0.0f, .l2 = l2 };

	return kern_cpu_parallel(ctx, cpu_nrows(src[0]), kern_tensor_nelements(src[0]) * 2,
				 norm_rows, &j);
}

int kern_cpu_rms_norm(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, struct kern_tensor *dst)
{
	return run_norm(ctx, p, src, dst, false);
}

int kern_cpu_l2_norm(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		     struct kern_tensor *const *src, struct kern_tensor *dst)
{
	return run_norm(ctx, p, src, dst, true);
}

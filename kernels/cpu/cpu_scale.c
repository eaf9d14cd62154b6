/*
 * kernels/cpu/cpu_scale.c — SCALE: dst = src0 * f[0] + f[1], by rows.
 * In place (dst the same bytes as src0) reads each element before writing it.
 */
#include "kernels/cpu/cpu_impl.h"

struct scale_job {
	const struct kern_tensor *a, *d;
	float s, b;
};

static int scale_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct scale_job *j = arg;
	const struct kern_tensor *a = j->a, *d = j->d;

	for (int64_t r = r0; r < r1; r++) {
		int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2];
		int64_t i3 = r / (a->ne[1] * a->ne[2]);
		const char *arow = (const char *)a->data + i1 * a->nb[1] + i2 * a->nb[2] +
				   i3 * a->nb[3];
		float *drow = (float *)((char *)d->data + i1 * d->nb[1] + i2 * d->nb[2] +
					i3 * d->nb[3]);

		if (a->nb[0] == sizeof(float)) {
			const float *af = (const float *)arow;

			for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
				drow[i0] = af[i0] * j->s + j->b;
			continue;
		}
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			drow[i0] = *(const float *)(arow + i0 * a->nb[0]) * j->s + j->b;
	}
	return 0;
}

int kern_cpu_scale(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		   struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct scale_job j = { .a = src[0], .d = dst, .s = p ? p->f[0] : 0.0f,
			       .b = p ? p->f[1] : 0.0f };
	int64_t rows = src[0]->ne[1] * src[0]->ne[2] * src[0]->ne[3];

	return kern_cpu_parallel(ctx, rows, kern_tensor_nelements(src[0]), scale_rows, &j);
}

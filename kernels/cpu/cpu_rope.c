/*
 * kernels/cpu/cpu_rope.c — ROPE: rotary position embedding, by rows
 * (one row = one head of one token).
 *
 * The angles are computed in double, once per token per range, and shared
 * by the token's heads.  Why double: theta = pos * freq grows with the
 * position, and an f32 theta (ggml iterates a float product) is off by
 * about pos * 2^-24 radians, i.e. 1e-2 at position 1e5; in double the
 * rotation is exact up to the final rounding of each output.
 *
 * In place (dst the same bytes as x) is safe: both elements of a pair are
 * read before either is written, and a row only touches itself.
 */
#include "kernels/cpu/cpu_impl.h"

#include <math.h>
#include <stdlib.h>

struct rope_job {
	const struct kern_tensor *x, *pos, *d;
	int mode;
	int64_t half;        /* n_dims / 2 pairs */
	double fscale;
	const double *inv_freq;  /* [half]: freq_base^(-2i/n_dims) */
};

static int rope_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct rope_job *j = arg;
	const struct kern_tensor *x = j->x, *d = j->d;
	int64_t nh = x->ne[1], half = j->half, cur_tok = -1;
	/* Pair stride: adjacent (NORMAL) or half a rotation apart (NEOX). */
	int64_t pair_off = j->mode == PPRPC_ROPE_NEOX ? half : 1;
	int64_t pair_step = j->mode == PPRPC_ROPE_NEOX ? 1 : 2;
	double *cs = malloc((size_t)half * 2 * sizeof(double));

	if (!cs)
		return PPRPC_ENOMEM;
	for (int64_t r = r0; r < r1; r++) {
		int64_t i1 = r % nh, i2 = r / nh;
		const char *xrow = (const char *)x->data + i1 * x->nb[1] + i2 * x->nb[2];
		float *drow = (float *)((char *)d->data + i1 * d->nb[1] + i2 * d->nb[2]);
		uint64_t xs = x->nb[0];

		if (i2 != cur_tok) {
			int32_t p = *(const int32_t *)((const char *)j->pos->data +
						       i2 * j->pos->nb[0]);
			double pf = (double)p * j->fscale;

			for (int64_t i = 0; i < half; i++) {
				double th = pf * j->inv_freq[i];

				cs[2 * i] = cos(th);
				cs[2 * i + 1] = sin(th);
			}
			cur_tok = i2;
		}
		for (int64_t i = 0; i < half; i++) {
			int64_t e0 = i * pair_step, e1 = e0 + pair_off;
			double a = *(const float *)(xrow + e0 * xs);
			double b = *(const float *)(xrow + e1 * xs);
			double c = cs[2 * i], s = cs[2 * i + 1];

			drow[e0] = (float)(a * c - b * s);
			drow[e1] = (float)(a * s + b * c);
		}
		for (int64_t i0 = 2 * half; i0 < x->ne[0]; i0++)
			drow[i0] = *(const float *)(xrow + i0 * xs);
	}
	free(cs);
	return 0;
}

int kern_cpu_rope(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *x = src[0];
	int n_dims = p->i[1];
	struct rope_job j = { .x = x, .pos = src[1], .d = dst, .mode = p->i[0],
			      .half = n_dims / 2, .fscale = p->f[1] };
	double *inv_freq = malloc((size_t)j.half * sizeof(double));
	int rc;

	if (!inv_freq)
		return PPRPC_ENOMEM;
	for (int64_t i = 0; i < j.half; i++)
		inv_freq[i] = pow((double)p->f[0], -2.0 * (double)i / (double)n_dims);
	j.inv_freq = inv_freq;
	rc = kern_cpu_parallel(ctx, x->ne[1] * x->ne[2], kern_tensor_nelements(x), rope_rows, &j);
	free(inv_freq);
	return rc;
}

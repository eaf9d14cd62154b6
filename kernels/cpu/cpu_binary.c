/*
 * kernels/cpu/cpu_binary.c — ADD and MUL: dst = src0 (op) src1, src1
 * repeated (modulo) along every dimension where it is smaller.
 *
 * Work is split by rows of src0.  Each src1 row is first turned into a
 * packed f32 row (unless it already is one), so the inner loop is the same
 * for every src1 dtype and stride.  In place (dst the same bytes as src0 or
 * src1) is safe: each element is read before its own slot is written, and
 * the src1 row is converted before the dst row is touched.
 */
#include "kernels/cpu/cpu_impl.h"

#include <stdlib.h>

struct bin_job {
	const struct kern_tensor *a, *b, *d;
	bool mul;
};

static void bin_row(float *d, const char *a, uint64_t anb, const float *b, int64_t n,
		    int64_t nb_len, bool mul)
{
	/* Walk src0 in chunks of src1's row length so no modulo is needed per
	 * element. */
	for (int64_t i0 = 0; i0 < n; i0 += nb_len) {
		if (anb == sizeof(float)) {
			const float *af = (const float *)a + i0;

			if (mul)
				for (int64_t j = 0; j < nb_len; j++)
					d[i0 + j] = af[j] * b[j];
			else
				for (int64_t j = 0; j < nb_len; j++)
					d[i0 + j] = af[j] + b[j];
			continue;
		}
		for (int64_t j = 0; j < nb_len; j++) {
			float x = *(const float *)(a + (uint64_t)(i0 + j) * anb);

			d[i0 + j] = mul ? x * b[j] : x + b[j];
		}
	}
}

static int bin_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct bin_job *j = arg;
	const struct kern_tensor *a = j->a, *b = j->b, *d = j->d;
	bool direct = b->dtype == PPRPC_F32 && (b->nb[0] == sizeof(float) || b->ne[0] == 1);
	kern_cpu_cvt_fn cvt = kern_cpu_cvt(b->dtype, PPRPC_F32);
	float *tmp = NULL;

	if (!direct) {
		tmp = malloc((size_t)b->ne[0] * sizeof(float));
		if (!tmp)
			return PPRPC_ENOMEM;
	}
	for (int64_t r = r0; r < r1; r++) {
		int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2];
		int64_t i3 = r / (a->ne[1] * a->ne[2]);
		const char *arow = (const char *)a->data + i1 * a->nb[1] + i2 * a->nb[2] +
				   i3 * a->nb[3];
		const char *brow = (const char *)b->data + (i1 % b->ne[1]) * b->nb[1] +
				   (i2 % b->ne[2]) * b->nb[2] + (i3 % b->ne[3]) * b->nb[3];
		float *drow = (float *)((char *)d->data + i1 * d->nb[1] + i2 * d->nb[2] +
					i3 * d->nb[3]);
		const float *bf = (const float *)brow;

		if (!direct) {
			cvt(tmp, sizeof(float), brow, b->nb[0], b->ne[0]);
			bf = tmp;
		}
		bin_row(drow, arow, a->nb[0], bf, a->ne[0], b->ne[0], j->mul);
	}
	free(tmp);
	return 0;
}

static int run_binary(const struct kern_cpu_ctx *ctx, struct kern_tensor *const *src,
		      struct kern_tensor *dst, bool mul)
{
	struct bin_job j = { .a = src[0], .b = src[1], .d = dst, .mul = mul };
	int64_t rows = src[0]->ne[1] * src[0]->ne[2] * src[0]->ne[3];

	return kern_cpu_parallel(ctx, rows, kern_tensor_nelements(src[0]), bin_rows, &j);
}

int kern_cpu_add(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_binary(ctx, src, dst, false);
}

int kern_cpu_mul(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_binary(ctx, src, dst, true);
}

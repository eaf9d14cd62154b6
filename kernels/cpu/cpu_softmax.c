/*
 * kernels/cpu/cpu_softmax.c — SOFTMAX over ne[0] with a scale and an
 * optional causal mask (semantics: ops.h), by rows.
 *
 * Row i1 of a [n_kv, n_q, ...] tensor sees keys k <= i1 + past; the rest are
 * exactly 0.  Key 0 is always visible (past >= 0), so no row is fully
 * masked and the sum below is >= 1 (the maximum contributes exp(0)).
 * Logits are scaled and shifted by their maximum before exp, so nothing
 * overflows; the sum is accumulated in double.
 */
#include "kernels/cpu/cpu_row_impl.h"

#include <math.h>

struct softmax_job {
	const struct kern_tensor *a, *d;
	float scale;
	bool causal;
	int64_t past;
};

static int softmax_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct softmax_job *j = arg;
	const struct kern_tensor *a = j->a;
	int64_t n = a->ne[0];
	uint64_t nb = a->nb[0];

	for (int64_t r = r0; r < r1; r++) {
		int64_t idx[3], nvis = n;
		const char *arow;
		float *drow;
		float max = -INFINITY, inv;
		double sum = 0.0;

		cpu_row_index(a, r, idx);
		arow = cpu_row_at(a, idx[0], idx[1], idx[2]);
		drow = (float *)cpu_row(j->d, r);
		if (j->causal && idx[0] + j->past + 1 < n)
			nvis = idx[0] + j->past + 1;
		/* Scaled logits into dst first (each source element read before
		 * its slot is written); masked slots are never read. */
		for (int64_t i = 0; i < nvis; i++) {
			float v = *(const float *)(arow + (uint64_t)i * nb) * j->scale;

			drow[i] = v;
			max = fmaxf(max, v);
		}
		for (int64_t i = 0; i < nvis; i++) {
			float e = expf(drow[i] - max);

			drow[i] = e;
			sum += e;
		}
		inv = (float)(1.0 / sum);
		for (int64_t i = 0; i < nvis; i++)
			drow[i] *= inv;
		for (int64_t i = nvis; i < n; i++)
			drow[i] = 0.0f;
	}
	return 0;
}

int kern_cpu_softmax(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		     struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct softmax_job j = { .a = src[0], .d = dst, .scale = p ? p->f[0] : 0.0f,
				 .causal = p && p->i[0], .past = p ? p->i[1] : 0 };

	return kern_cpu_parallel(ctx, cpu_nrows(src[0]), kern_tensor_nelements(src[0]) * 8,
				 softmax_rows, &j);
}

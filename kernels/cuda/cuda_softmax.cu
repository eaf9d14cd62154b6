/*
 * kernels/cuda/cuda_softmax.cu — SOFTMAX over ne[0] of f[0] * x with an
 * optional causal mask (ops.h): one block per row.
 *
 * Three passes over the row, recomputing the scaled logit each time (the
 * same f32 product, so the same value): the maximum (fmaxf, NaNs never
 * win), the sum of exp(v - max) in double, then the outputs
 * exp(v - max) * (float)(1 / sum), as cpu_softmax.c.  Masked entries
 * (key > row + past) are never read and are written as exactly 0.  In place
 * is safe: only the last pass writes, each element by the thread that
 * reads it.
 */
#include "kernels/cuda/cuda_impl.cuh"

#include <math.h>

__global__ void k_softmax(kcu_t a, float *d, float scale, bool causal, int64_t past,
			  int64_t nrows)
{
	__shared__ float shm[32];
	__shared__ double shs[32];
	const int64_t n = a.ne[0], nb0 = a.nb[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		const char *row = kcu_row(a, r);
		float *drow = d + r * n;
		int64_t i1 = r % a.ne[1], nvis = n;
		float mx = -INFINITY, inv;
		double sum = 0.0;

		if (causal && i1 + past + 1 < n)
			nvis = i1 + past + 1;
		for (int64_t i = threadIdx.x; i < nvis; i += blockDim.x)
			mx = fmaxf(mx, __fmul_rn(*(const float *)(row + i * nb0), scale));
		mx = kcu_block_reduce(mx, kcu_max_op(), shm);
		for (int64_t i = threadIdx.x; i < nvis; i += blockDim.x)
			sum += (double)expf(__fmul_rn(*(const float *)(row + i * nb0), scale) - mx);
		sum = kcu_block_reduce(sum, kcu_add_op(), shs);
		inv = (float)(1.0 / sum);
		for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
			drow[i] = i < nvis ? __fmul_rn(expf(__fmul_rn(*(const float *)(row + i * nb0),
								      scale) - mx), inv)
					   : 0.0f;
	}
}

KCU_DECL(softmax)
{
	const struct kern_tensor *a = src[0];
	int64_t nrows = a->ne[1] * a->ne[2] * a->ne[3];

	k_softmax<<<kcu_blocks(nrows, 1), kcu_row_threads(a->ne[0]), 0, kcu_stream(ctx)>>>(
		kcu_view(a), (float *)dst->data, p ? p->f[0] : 0.0f, p && p->i[0],
		p ? p->i[1] : 0, nrows);
	return kcu_launched("SOFTMAX", err, errlen);
}

int kcu_softmax_preload(char *err, size_t errlen)
{
	return kcu_touch(k_softmax, "SOFTMAX", err, errlen);
}

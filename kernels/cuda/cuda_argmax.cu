/*
 * kernels/cuda/cuda_argmax.cu — ARGMAX over ne[0]: one block per row.
 *
 * Each thread scans its elements in increasing index with a strict >, then
 * (value, index) pairs are merged with "larger value, or equal value and
 * lower index": the first of equal maxima wins whatever the thread count,
 * as in cpu_argmax.c.  NaNs are never taken; a thread that saw only NaNs
 * carries index -1 and loses every merge; a row of only NaNs gives 0.
 */
#include "kernels/cuda/cuda_impl.cuh"

struct best {
	float v;
	int64_t i;
};

static __device__ __forceinline__ best pick(best a, best b)
{
	if (a.i < 0)
		return b;
	if (b.i < 0)
		return a;
	if (a.v > b.v || (a.v == b.v && a.i < b.i))
		return a;
	return b;
}

__global__ void k_argmax(kcu_t a, int32_t *d, int64_t nrows)
{
	__shared__ best sh[32];
	const int64_t n = a.ne[0], nb0 = a.nb[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		const char *row = kcu_row(a, r);
		best b = { 0.0f, -1 };

		for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
			float v = *(const float *)(row + i * nb0);

			if (!isnan(v) && (b.i < 0 || v > b.v)) {
				b.v = v;
				b.i = i;
			}
		}
		for (int o = 16; o > 0; o >>= 1) {
			best x;

			x.v = __shfl_xor_sync(0xffffffffu, b.v, o);
			x.i = __shfl_xor_sync(0xffffffffu, b.i, o);
			b = pick(b, x);
		}
		__syncthreads();
		if ((threadIdx.x & 31) == 0)
			sh[threadIdx.x >> 5] = b;
		__syncthreads();
		if (threadIdx.x == 0) {
			b = sh[0];
			for (unsigned w = 1; w < blockDim.x >> 5; w++)
				b = pick(b, sh[w]);
			d[r] = b.i < 0 ? 0 : (int32_t)b.i;
		}
	}
}

KCU_DECL(argmax)
{
	const struct kern_tensor *a = src[0];
	int64_t nrows = a->ne[1] * a->ne[2] * a->ne[3];

	(void)p;
	k_argmax<<<kcu_blocks(nrows, 1), kcu_row_threads(a->ne[0]), 0, kcu_stream(ctx)>>>(
		kcu_view(a), (int32_t *)dst->data, nrows);
	return kcu_launched("ARGMAX", err, errlen);
}

int kcu_argmax_preload(char *err, size_t errlen)
{
	return kcu_touch(k_argmax, "ARGMAX", err, errlen);
}

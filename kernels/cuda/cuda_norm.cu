/*
 * kernels/cuda/cuda_norm.cu — RMS_NORM and L2_NORM over ne[0]: one block
 * per row (grid-stride over rows).
 *
 * As on the CPU, the sum of squares is accumulated in double and the scale
 * is computed in double, rounded once to f32, and each output is x * scale;
 * only the summation order differs (per thread, then a fixed tree), which
 * a double sum of f32 squares hides entirely in practice.
 *
 * In place on the same bytes is safe: every element is read by the thread
 * that writes it, and all reads of the first pass finish (block reduction
 * barrier) before any write.
 */
#include "kernels/cuda/cuda_impl.cuh"

template <bool L2>
__global__ void k_norm(kcu_t a, float *d, float eps, int64_t nrows)
{
	__shared__ double sh[32];
	const int64_t n = a.ne[0], nb0 = a.nb[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		const char *row = kcu_row(a, r);
		float *drow = d + r * n;
		double sum = 0.0;
		float scale;

		for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
			double x = *(const float *)(row + i * nb0);

			sum += x * x;
		}
		sum = kcu_block_reduce(sum, kcu_add_op(), sh);
		if (L2)
			scale = (float)(1.0 / fmax(sqrt(sum), (double)eps));
		else
			scale = (float)(1.0 / sqrt(sum / (double)n + (double)eps));
		for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
			drow[i] = __fmul_rn(*(const float *)(row + i * nb0), scale);
	}
}

template <bool L2>
static int run(const struct kern_cuda_ctx *ctx, const struct pprpc_op_params *p,
	       struct kern_tensor *const *src, struct kern_tensor *dst, const char *name,
	       char *err, size_t errlen)
{
	const struct kern_tensor *a = src[0];
	int64_t nrows = a->ne[1] * a->ne[2] * a->ne[3];
	int threads = kcu_row_threads(a->ne[0]);

	k_norm<L2><<<kcu_blocks(nrows, 1), threads, 0, kcu_stream(ctx)>>>(
		kcu_view(a), (float *)dst->data, p ? p->f[0] : 0.0f, nrows);
	return kcu_launched(name, err, errlen);
}

KCU_DECL(rms_norm)
{
	return run<false>(ctx, p, src, dst, "RMS_NORM", err, errlen);
}

KCU_DECL(l2_norm)
{
	return run<true>(ctx, p, src, dst, "L2_NORM", err, errlen);
}

int kcu_norm_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_norm<false>, "RMS_NORM", err, errlen);

	return rc ? rc : kcu_touch(k_norm<true>, "L2_NORM", err, errlen);
}

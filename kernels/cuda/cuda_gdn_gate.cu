/*
 * kernels/cuda/cuda_gdn_gate.cu — is every GATED_DELTA_NET gate in the
 * domain where pprpc's kernels compute what ggml's op computes?
 *
 * pprpc's kernels clamp a positive log-gate to 0 (ops.h), and its chunked
 * form lets a NaN or infinite gate reach the other tokens of its chunk;
 * ggml exponentiates every gate as it is.  The two agree exactly on finite
 * gates <= 0, which is all a model produces (g = -exp(A) softplus(.)).  The
 * ggml engine runs this scan next to pprpc's kernel and gives the node back
 * to ggml's kernel when it reports a gate outside that domain.
 */
#include "kernels/cuda/cuda_impl.cuh"

#define SCAN_THREADS 256
#define SCAN_BLOCKS_MAX 1024

static __global__ void k_gate_scan(const float *x, int64_t n, int32_t *flag)
{
	const int64_t step = (int64_t)gridDim.x * blockDim.x;
	int bad = 0;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		const float g = x[i];

		/* !(g <= 0) also holds for NaN */
		bad |= !(g <= 0.0f) || isinf(g);
	}
	if (__syncthreads_or(bad) && threadIdx.x == 0)
		*flag = 1;
}

extern "C" int kern_cuda_gdn_gate_scan(void *stream, const float *x, int64_t n, int32_t *flag, char *err,
				       size_t errlen)
{
	int64_t blocks = (n + SCAN_THREADS - 1) / SCAN_THREADS;

	if (n <= 0)
		return 0;
	if (blocks > SCAN_BLOCKS_MAX)
		blocks = SCAN_BLOCKS_MAX;
	k_gate_scan<<<(unsigned)blocks, SCAN_THREADS, 0, (cudaStream_t)stream>>>(x, n, flag);
	return kcu_launched("GATED_DELTA_NET gate scan", err, errlen);
}

int kcu_gdn_gate_preload(char *err, size_t errlen)
{
	return kcu_touch(k_gate_scan, "GATED_DELTA_NET gate scan", err, errlen);
}

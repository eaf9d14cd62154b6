/*
 * kernels/cuda/cuda_q8_0.cu — MUL_MAT with Q8_0 weights.
 *
 * Few activation columns (M <= DIRECT_MAX_M, decode): k_mmq dequantizes on
 * the fly.  One warp per (weight row n, activation slice); lane l takes
 * element l of each 32-element block, so a block's quants and the matching
 * activations are one coalesced load each, and the weight f32(d) * q
 * (exact) is multiplied into up to DIRECT_MAX_M accumulators.  As on the
 * CPU the activations are not quantized: the result is an f32 product of
 * the exact dequantized weights (summation order aside).  Needs no cuBLAS
 * and no workspace.
 *
 * More columns (prefill): the weights are expanded to f16 in the
 * workspace, CHUNK_BYTES worth of rows at a time, the activations
 * converted to f16 once, and cuBLAS multiplies on tensor cores with f32
 * accumulation.  f16 rounds both (a weight f32(d) * q has up to 19
 * significant bits): relative RMS error about 3e-4, and weights or
 * activations beyond 65504 in magnitude would overflow.
 */
#include "kernels/cuda/cuda_impl.cuh"

#define DIRECT_MAX_M 16
#define MMQ_WARPS 8
#define CHUNK_BYTES ((size_t)64 << 20)

/* Task t = (row n, slice s): n = t % N, s = t / N over x's C2 * C3 slices. */
__global__ void k_mmq(kcu_t w, kcu_t x, float *d, int64_t ntasks, int M)
{
	const int lane = threadIdx.x & 31;
	const int64_t N = w.ne[1], K = w.ne[0], nblk = K / KCU_Q8_BLCK;
	const int64_t r2 = x.ne[2] / w.ne[2], r3 = x.ne[3] / w.ne[3];
	const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;

	for (int64_t t = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < ntasks;
	     t += nwarps) {
		const int64_t n = t % N, s = t / N, i12 = s % x.ne[2], i13 = s / x.ne[2];
		const char *wr = kcu_at(w, 0, n, i12 / r2, i13 / r3);
		const char *xs = kcu_at(x, 0, 0, i12, i13);
		float acc[DIRECT_MAX_M];

#pragma unroll
		for (int m = 0; m < DIRECT_MAX_M; m++)
			acc[m] = 0.0f;
#pragma unroll 4
		for (int64_t b = 0; b < nblk; b++) {
			const char *blk = wr + b * w.nb[0];
			const float wv = kcu_f16_decode(*(const uint16_t *)blk) *
					 (float)(int8_t)blk[2 + lane];
			const char *xe = xs + (b * KCU_Q8_BLCK + lane) * x.nb[0];

#pragma unroll
			for (int m = 0; m < DIRECT_MAX_M; m++)
				if (m < M)
					acc[m] += wv * *(const float *)(xe + m * x.nb[1]);
		}
#pragma unroll
		for (int m = 0; m < DIRECT_MAX_M; m++) {
			if (m < M) {
				for (int o = 16; o > 0; o >>= 1)
					acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
			}
		}
		/* Every lane holds every sum; lane m writes column m. */
#pragma unroll
		for (int m = 0; m < DIRECT_MAX_M; m++)
			if (m < M && lane == m)
				d[(s * M + m) * N + n] = acc[m];
	}
}

/* Rows [n0, n0 + nr) of weight slice (i02, i03) -> f16 [K, nr] packed. */
__global__ void k_q8_to_f16(kcu_t w, int64_t i02, int64_t i03, int64_t n0, int64_t nr,
			    uint16_t *out)
{
	const int64_t K = w.ne[0];

	KCU_FOR(l, nr * K) {
		int64_t n = l / K, k = l % K;
		const char *blk = kcu_at(w, 0, n0 + n, i02, i03) + (k / KCU_Q8_BLCK) * w.nb[0];

		out[l] = kcu_f16_encode(kcu_f16_decode(*(const uint16_t *)blk) *
					(float)(int8_t)blk[2 + k % KCU_Q8_BLCK]);
	}
}

/* Weight rows expanded per chunk: at least one, at most N. */
static int64_t chunk_rows(int64_t K, int64_t N)
{
	int64_t r = (int64_t)(CHUNK_BYTES / ((size_t)K * 2));

	return r < 1 ? 1 : r > N ? N : r;
}

size_t kcu_mul_mat_q8_0_ws(struct kern_tensor *const *src)
{
	const struct kern_tensor *w = src[0], *x = src[1];

	if (x->ne[1] <= DIRECT_MAX_M)
		return 0;
	return kcu_ws_round((size_t)kern_tensor_nelements(x) * 2) +
	       kcu_ws_round((size_t)chunk_rows(w->ne[0], w->ne[1]) * w->ne[0] * 2);
}

int kcu_mul_mat_q8_0(const struct kern_cuda_ctx *ctx, struct kern_tensor *const *src,
		     struct kern_tensor *dst, char *err, size_t errlen)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	const int64_t B2 = w->ne[2], B3 = w->ne[3], C2 = x->ne[2], r2 = C2 / B2,
		      r3 = x->ne[3] / B3;
	cudaStream_t st = kcu_stream(ctx);
	struct kcu_arena ar = { (char *)ctx->workspace, ctx->workspace_bytes };
	int64_t rows, ntasks;
	uint16_t *xh, *wh;
	int rc;

	if (M <= DIRECT_MAX_M) {
		ntasks = N * C2 * x->ne[3];
		k_mmq<<<kcu_blocks(ntasks, MMQ_WARPS), MMQ_WARPS * 32, 0, st>>>(
			kcu_view(w), kcu_view(x), (float *)dst->data, ntasks, (int)M);
		return kcu_launched("MUL_MAT (q8_0)", err, errlen);
	}
	if (!ctx->blas)
		return kern_errf(err, errlen, PPRPC_EUNSUPP, "MUL_MAT: cuBLAS is not loaded");
	rows = chunk_rows(K, N);
	xh = (uint16_t *)kcu_take(&ar, (size_t)kern_tensor_nelements(x) * 2);
	wh = (uint16_t *)kcu_take(&ar, (size_t)rows * K * 2);
	if (!xh || !wh)
		return kern_errf(err, errlen, PPRPC_ELIMIT, "MUL_MAT: workspace too small");
	rc = kcu_pack(ctx, x, PPRPC_F16, xh, err, errlen);
	if (rc < 0)
		return rc;
	for (int64_t i03 = 0; i03 < B3; i03++) {
		for (int64_t i02 = 0; i02 < B2; i02++) {
			for (int64_t n0 = 0; n0 < N; n0 += rows) {
				int64_t nr = N - n0 < rows ? N - n0 : rows;

				k_q8_to_f16<<<kcu_blocks(nr * K, KCU_THREADS), KCU_THREADS, 0, st>>>(
					kcu_view(w), i02, i03, n0, nr, wh);
				rc = kcu_launched("MUL_MAT (q8_0 expand)", err, errlen);
				if (rc < 0)
					return rc;
				/* The r2 activation slices of this weight slice, for
				 * each of its r3 outer slices: C rows n0.. of each. */
				for (int64_t i13 = i03 * r3; i13 < (i03 + 1) * r3; i13++) {
					int64_t i12 = i02 * r2;
					struct kcu_gemm g = {
						.ab = PPRPC_F16,
						.N = nr, .M = M, .K = K, .lda = K, .ldb = K, .ldc = N,
						.A = wh,
						.B = xh + (i13 * C2 + i12) * M * K,
						.C = (float *)dst->data + (i13 * C2 + i12) * M * N + n0,
						.sA = 0, .sB = M * K, .sC = M * N, .batch = r2,
					};

					rc = kcu_gemm_run(ctx, &g, err, errlen);
					if (rc < 0)
						return rc;
				}
			}
		}
	}
	return 0;
}

int kcu_q8_0_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_mmq, "MUL_MAT (q8_0)", err, errlen);

	return rc ? rc : kcu_touch(k_q8_to_f16, "MUL_MAT (q8_0)", err, errlen);
}

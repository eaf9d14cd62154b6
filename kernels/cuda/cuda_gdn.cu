/*
 * kernels/cuda/cuda_gdn.cu — GATED_DELTA_NET, serial recurrent form
 * (semantics: ops.h; the CPU reference is cpu_gdn.c).
 *
 * Column j of the d_k x d_v state only ever mixes with itself: per token,
 *   S[:, j] *= decay;  u = beta * (v[j] - S[:, j] . k)
 *   S[:, j] += u * k;  o[j] = scale * (S[:, j] . q)
 * so one warp owns one column of one (sequence b, value head h) for the
 * whole sequence of T tokens, with lanes across d_k (lane owns elements
 * lane, lane + 32, ...).  The dot products are warp shuffle reductions; no
 * barrier is needed anywhere because no lane ever touches another lane's
 * elements.  Every warp reads the token's q and k (shared by the columns,
 * so they come from L1/L2) and L2-normalises them itself exactly as the
 * CPU does: sum of squares in double, inv = 1 / max(sqrtf((float)sum),
 * eps) in f32.  Gates are clamped to <= 0 (a NaN stays NaN).
 *
 * Up to d_k = 256 the column lives in registers (NPL = elements per lane);
 * larger d_k keeps it in the state part of dst and q/k in shared memory.
 * The final state is written to the state part of dst.  This is the
 * reference form on the GPU: decode, i[2] = 1 and the fallback of the
 * chunked form (cuda_gdn_chunked.cu); cuda_gdn_select.cu chooses.
 */
#include "kernels/cuda/cuda_gdn_impl.cuh"

#define WARPS 4
#define SMEM_MAX (48 * 1024)

static __device__ __forceinline__ float warp_sum(float x)
{
	for (int o = 16; o > 0; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

static __device__ __forceinline__ double warp_sumd(double x)
{
	for (int o = 16; o > 0; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

/* Written as a comparison so NaN stays NaN (ops.h). */
static __device__ __forceinline__ float gate(float g)
{
	return g > 0.0f ? 0.0f : g;
}

static __device__ __forceinline__ float ld(const kcu_t &t, int64_t i0, int64_t i1, int64_t i2,
					   int64_t i3)
{
	return *(const float *)kcu_at(t, i0, i1, i2, i3);
}

/* Column index of this warp, or -1 past the end. */
static __device__ __forceinline__ int64_t column(const gdn_args &a)
{
	int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;

	return w < a.d_v * a.h_v * a.b ? w : -1;
}

template <int NPL>
__global__ void k_gdn(gdn_args a)
{
	const int lane = threadIdx.x & 31;
	const int64_t c = column(a);

	if (c < 0)
		return;  /* a whole warp: the column count is per warp */
	const int64_t j = c % a.d_v, item = c / a.d_v, h = item % a.h_v, b = item / a.h_v;
	const int64_t hk = gdn_key_head(a, h), d_k = a.d_k;
	float S[NPL], q[NPL], k[NPL], dec[NPL];

#pragma unroll
	for (int e = 0; e < NPL; e++) {
		int64_t i = lane + 32 * e;

		S[e] = i < d_k ? ld(a.s0, i, j, h, b) : 0.0f;
	}
	for (int64_t t = 0; t < a.t; t++) {
		float beta = ld(a.beta, 0, h, t, b), vj = ld(a.v, j, h, t, b), p;
		float g0 = a.kda ? 0.0f : expf(gate(ld(a.g, 0, h, t, b)));

#pragma unroll
		for (int e = 0; e < NPL; e++) {
			int64_t i = lane + 32 * e;

			q[e] = i < d_k ? ld(a.q, i, hk, t, b) : 0.0f;
			k[e] = i < d_k ? ld(a.k, i, hk, t, b) : 0.0f;
			dec[e] = !a.kda ? g0 : i < d_k ? expf(gate(ld(a.g, i, h, t, b))) : 1.0f;
		}
		if (a.l2) {
			double sq = 0.0, sk = 0.0;
			float iq, ik;

#pragma unroll
			for (int e = 0; e < NPL; e++) {
				sq += (double)q[e] * q[e];
				sk += (double)k[e] * k[e];
			}
			iq = 1.0f / fmaxf(sqrtf((float)warp_sumd(sq)), a.eps);
			ik = 1.0f / fmaxf(sqrtf((float)warp_sumd(sk)), a.eps);
#pragma unroll
			for (int e = 0; e < NPL; e++) {
				q[e] *= iq;
				k[e] *= ik;
			}
		}
		p = 0.0f;
#pragma unroll
		for (int e = 0; e < NPL; e++) {
			if (lane + 32 * e < d_k) {
				S[e] *= dec[e];
				p += S[e] * k[e];
			}
		}
		const float u = beta * (vj - warp_sum(p));

		p = 0.0f;
#pragma unroll
		for (int e = 0; e < NPL; e++) {
			if (lane + 32 * e < d_k) {
				S[e] += u * k[e];
				p += S[e] * q[e];
			}
		}
		p = warp_sum(p);
		if (lane == 0)
			a.o[((b * a.t + t) * a.h_v + h) * a.d_v + j] = a.scale * p;
	}
	float *col = a.s + (item * a.d_v + j) * d_k;

#pragma unroll
	for (int e = 0; e < NPL; e++) {
		int64_t i = lane + 32 * e;

		if (i < d_k)
			col[i] = S[e];
	}
}

/* d_k > 256: the column stays in dst's state part, q and k of the token in
 * this warp's slice of shared memory (2 * d_k floats). */
__global__ void k_gdn_big(gdn_args a)
{
	extern __shared__ float sm[];
	const int lane = threadIdx.x & 31;
	const int64_t c = column(a), d_k = a.d_k;

	if (c < 0)
		return;
	const int64_t j = c % a.d_v, item = c / a.d_v, h = item % a.h_v, b = item / a.h_v;
	const int64_t hk = gdn_key_head(a, h);
	float *q = sm + (threadIdx.x >> 5) * 2 * d_k, *k = q + d_k;
	float *col = a.s + (item * a.d_v + j) * d_k;

	for (int64_t i = lane; i < d_k; i += 32)
		col[i] = ld(a.s0, i, j, h, b);
	for (int64_t t = 0; t < a.t; t++) {
		float beta = ld(a.beta, 0, h, t, b), vj = ld(a.v, j, h, t, b), p = 0.0f;
		float g0 = a.kda ? 0.0f : expf(gate(ld(a.g, 0, h, t, b)));
		double sq = 0.0, sk = 0.0;

		for (int64_t i = lane; i < d_k; i += 32) {
			q[i] = ld(a.q, i, hk, t, b);
			k[i] = ld(a.k, i, hk, t, b);
			sq += (double)q[i] * q[i];
			sk += (double)k[i] * k[i];
		}
		if (a.l2) {
			float iq = 1.0f / fmaxf(sqrtf((float)warp_sumd(sq)), a.eps);
			float ik = 1.0f / fmaxf(sqrtf((float)warp_sumd(sk)), a.eps);

			for (int64_t i = lane; i < d_k; i += 32) {
				q[i] *= iq;
				k[i] *= ik;
			}
		}
		for (int64_t i = lane; i < d_k; i += 32) {
			col[i] *= a.kda ? expf(gate(ld(a.g, i, h, t, b))) : g0;
			p += col[i] * k[i];
		}
		const float u = beta * (vj - warp_sum(p));

		p = 0.0f;
		for (int64_t i = lane; i < d_k; i += 32) {
			col[i] += u * k[i];
			p += col[i] * q[i];
		}
		p = warp_sum(p);
		if (lane == 0)
			a.o[((b * a.t + t) * a.h_v + h) * a.d_v + j] = a.scale * p;
	}
}

int kcu_gdn_serial(const struct kern_cuda_ctx *ctx, const gdn_args *ap, char *err, size_t errlen)
{
	const gdn_args a = *ap;
	cudaStream_t st = kcu_stream(ctx);
	const int64_t cols = a.d_v * a.h_v * a.b;

	if (a.d_k <= 256) {
		unsigned blocks = kcu_blocks(cols * 32, WARPS * 32);

		/* The grid must cover every column: no grid-stride here. */
		if ((int64_t)blocks * WARPS < cols)
			return kern_errf(err, errlen, PPRPC_ETOOBIG, "GATED_DELTA_NET: too many columns");
		if (a.d_k <= 32)
			k_gdn<1><<<blocks, WARPS * 32, 0, st>>>(a);
		else if (a.d_k <= 64)
			k_gdn<2><<<blocks, WARPS * 32, 0, st>>>(a);
		else if (a.d_k <= 128)
			k_gdn<4><<<blocks, WARPS * 32, 0, st>>>(a);
		else
			k_gdn<8><<<blocks, WARPS * 32, 0, st>>>(a);
	} else {
		int warps = WARPS;
		size_t smem;
		unsigned blocks;

		while (warps > 1 && (size_t)warps * 2 * a.d_k * sizeof(float) > SMEM_MAX)
			warps--;
		smem = (size_t)warps * 2 * a.d_k * sizeof(float);
		if (smem > SMEM_MAX)
			return kern_errf(err, errlen, PPRPC_EUNSUPP,
					 "GATED_DELTA_NET: d_k %lld is too large for the CUDA kernel",
					 (long long)a.d_k);
		blocks = kcu_blocks(cols * 32, warps * 32);
		if ((int64_t)blocks * warps < cols)
			return kern_errf(err, errlen, PPRPC_ETOOBIG, "GATED_DELTA_NET: too many columns");
		k_gdn_big<<<blocks, warps * 32, smem, st>>>(a);
	}
	return kcu_launched("GATED_DELTA_NET", err, errlen);
}

int kcu_gdn_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_gdn<1>, "GATED_DELTA_NET", err, errlen);

	if (!rc)
		rc = kcu_touch(k_gdn<2>, "GATED_DELTA_NET", err, errlen);
	if (!rc)
		rc = kcu_touch(k_gdn<4>, "GATED_DELTA_NET", err, errlen);
	if (!rc)
		rc = kcu_touch(k_gdn<8>, "GATED_DELTA_NET", err, errlen);
	if (!rc)
		rc = kcu_touch(k_gdn_big, "GATED_DELTA_NET", err, errlen);
	if (!rc)
		rc = kcu_gdn_chunked_preload(err, errlen);
	return rc;
}

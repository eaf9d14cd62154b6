/*
 * kernels/cuda/cuda_attention.cu — ATTENTION: causal softmax(q k^T * scale) v
 * over a KV cache (f32 or f16 K/V, GQA), flash-attention style without
 * storing scores.
 *
 * One block per (query j, head h) row; its NW warps take keys w, w + NW,
 * ... up to n_past + j (keys beyond are never read).  A warp computes a
 * score with its lanes across head_dim (coalesced K reads, then a shuffle
 * reduction) and keeps its own online-softmax state: running maximum m,
 * running sum l and an accumulator over head_dim in shared memory (each
 * lane owns elements lane, lane + 32, ...).  A score that raises m rescales
 * l and the accumulator by exp(m_old - m_new), so no exp() argument is ever
 * positive.  At the end the warps' states are merged with factors
 * exp(m_w - max_w m_w).  Arithmetic is f32 with the same special cases as
 * cpu_attention.c: a -inf score weighs 0, NaN scores never raise the
 * maximum and reach the output through exp(), so results agree up to
 * summation order.
 *
 * Query head h reads kv head h / (n_head / n_kv_head); consecutive blocks
 * are heads of one group, so a K/V row is read from L2 by the whole group.
 */
#include "kernels/cuda/cuda_impl.cuh"

#include <math.h>

/* Warps per block: few rows (decode) get whole 1024-thread blocks so the
 * keys are spread over more warps; many rows (prefill) fill the GPU with
 * blocks anyway.  A split of the keys over several blocks (flash-decoding)
 * would use more SMs for decode; not done yet. */
#define NW_FEW_ROWS 32
#define NW_MANY_ROWS 8
#define FEW_ROWS 512
#define SMEM_MAX (48 * 1024)

template <bool F16>
static __device__ __forceinline__ float kv_load(const char *p)
{
	if constexpr (F16)
		return kcu_f16_decode(*(const uint16_t *)p);
	else
		return *(const float *)p;
}

template <bool F16>
__global__ void __launch_bounds__(NW_FEW_ROWS * 32) k_attention(kcu_t q, kcu_t k, kcu_t v, float *d, float scale, int64_t n_past)
{
	extern __shared__ float sm[];
	const int64_t D = q.ne[0], n_head = q.ne[1], n_q = q.ne[2], rows = n_head * n_q;
	const int64_t rep = n_head / k.ne[1];
	const int nw = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	float *qs = sm, *acc = sm + D + (int64_t)w * D;
	float *ms = sm + D + (int64_t)nw * D, *ls = ms + nw;

	for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
		const int64_t h = row % n_head, j = row / n_head, g = h / rep;
		const int64_t kmax = n_past + j + 1;
		const char *qr = kcu_at(q, 0, h, j, 0);
		float m = -INFINITY, l = 0.0f;

		__syncthreads();  /* the previous row's merge is done with sm */
		for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
			qs[i] = *(const float *)(qr + i * q.nb[0]);
		for (int64_t i = lane; i < D; i += 32)
			acc[i] = 0.0f;
		__syncthreads();

		for (int64_t t = w; t < kmax; t += nw) {
			const char *kr = kcu_at(k, 0, g, t, 0), *vr = kcu_at(v, 0, g, t, 0);
			float s = 0.0f, pr;

			for (int64_t i = lane; i < D; i += 32)
				s += qs[i] * kv_load<F16>(kr + i * k.nb[0]);
			for (int o = 16; o > 0; o >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, o);
			s *= scale;
			if (s > m) {
				float c = expf(m - s);  /* 0 while m is -inf */

				l *= c;
				for (int64_t i = lane; i < D; i += 32)
					acc[i] *= c;
				m = s;
			}
			/* A -inf score weighs 0 even while m is -inf. */
			pr = s == -INFINITY ? 0.0f : expf(s - m);
			l += pr;
			for (int64_t i = lane; i < D; i += 32)
				acc[i] += pr * kv_load<F16>(vr + i * v.nb[0]);
		}
		if (lane == 0) {
			ms[w] = m;
			ls[w] = l;
		}
		__syncthreads();

		float mx = -INFINITY, lt = 0.0f, inv;

		for (int u = 0; u < nw; u++)
			mx = fmaxf(mx, ms[u]);
		for (int u = 0; u < nw; u++)
			lt += ms[u] == -INFINITY ? 0.0f : ls[u] * expf(ms[u] - mx);
		inv = 1.0f / lt;
		for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
			float o = 0.0f;

			for (int u = 0; u < nw; u++)
				if (ms[u] != -INFINITY)
					o += sm[D + (int64_t)u * D + i] * expf(ms[u] - mx);
			d[row * D + i] = o * inv;
		}
	}
}

/* dst [D, n_head, n_q] contiguous: row (j, h) = j * n_head + h, as above. */
KCU_DECL(attention)
{
	const struct kern_tensor *q = src[0], *k = src[1];
	int64_t D = q->ne[0], rows = q->ne[1] * q->ne[2], kmax = p->i[0] + q->ne[2];
	int nw = rows <= FEW_ROWS ? NW_FEW_ROWS : NW_MANY_ROWS;
	size_t smem;

	/* No more warps than the longest row has keys, nor than fit. */
	while (nw > 1 && (nw > kmax || (size_t)(D + nw * D + 2 * nw) * sizeof(float) > SMEM_MAX))
		nw--;
	smem = (size_t)(D + nw * D + 2 * nw) * sizeof(float);
	if (smem > SMEM_MAX)
		return kern_errf(err, errlen, PPRPC_EUNSUPP,
				 "ATTENTION: head_dim %lld is too large for the CUDA kernel",
				 (long long)D);
	if (k->dtype == PPRPC_F16)
		k_attention<true><<<kcu_blocks(rows, 1), nw * 32, smem, kcu_stream(ctx)>>>(
			kcu_view(q), kcu_view(k), kcu_view(src[2]), (float *)dst->data, p->f[0],
			p->i[0]);
	else
		k_attention<false><<<kcu_blocks(rows, 1), nw * 32, smem, kcu_stream(ctx)>>>(
			kcu_view(q), kcu_view(k), kcu_view(src[2]), (float *)dst->data, p->f[0],
			p->i[0]);
	return kcu_launched("ATTENTION", err, errlen);
}

int kcu_attention_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_attention<true>, "ATTENTION", err, errlen);

	return rc ? rc : kcu_touch(k_attention<false>, "ATTENTION", err, errlen);
}

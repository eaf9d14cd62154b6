/*
 * kernels/cuda/cuda_gdn_chunked.cu — GATED_DELTA_NET, chunked (WY / UT)
 * form on bf16 tensor cores (semantics: ops.h; the serial reference is
 * cuda_gdn.cu, the CPU's chunked form cpu_gdn_chunked.c).
 *
 * Per (b, h) and chunk of C tokens, with G_t the cumulative (clamped) log
 * gate from the chunk start through token t, per key channel (KDA) or per
 * head (GDN), Gam_t = diag(exp(G_t)) and S0 the state at the chunk start,
 * the recurrence unrolls to
 *   A[t][j]  = beta_t k_t . (Gam_t Gam_j^-1 k_j)        j < t
 *   Aq[t][j] = q_t . (Gam_t Gam_j^-1 k_j)               j <= t
 *   T        = (I + A)^-1                                (unit lower)
 *   w = T diag(beta) (Gam k),   u = T diag(beta) v
 *   v_new = u - w S0
 *   o     = scale (Gam q S0 + Aq v_new)
 *   S_C   = Gam_C S0 + (Gam_C Gam_j^-1 k_j)^T v_new
 * Every exponential is of a non-positive difference of cumulative gates
 * (G only decreases along a chunk): no overflow however strong the decay,
 * and an underflow to 0 is the true value's rounding.  The one place where
 * a product of two exponentials would need exp(G_t - G_j) split as
 * exp(G_t - r) exp(r - G_j) (A and Aq on tensor cores in the
 * flash-linear-attention form) instead takes r at the boundary between
 * the two 4-token sub-blocks (t after it, j up to it), so both factors are
 * <= 1 (and are formed from one exp and the tokens' own decays exp(g));
 * inside a diagonal 4 x 4 sub-block exp(G_t - G_j) is the product of the
 * decays of tokens j + 1 .. t.
 *
 * Three phases, two kernels:
 *  - k_prep, all chunks of all (b, h) in parallel (one CTA each): loads and
 *    L2-normalises q/k, accumulates the gates, builds A and Aq on CUDA
 *    cores (fp32), solves for T column by column (fp32, in registers),
 *    and forms w and u with bf16 mma (fp32 accumulation).  It writes w, u,
 *    Gam q, Gam_C Gam^-1 k (bf16), Aq (bf16) and Gam_C (fp32) to scratch.
 *  - k_recur, one CTA of two warps per (b, h) and block of DVB = 32 value
 *    columns (the columns of S are independent, so d_v splits without
 *    communication and 96 heads x 4 blocks give 384 CTAs): walks the
 *    chunks in order with the fp32 state S[:, block] in registers as mma
 *    accumulators (raw mma.sync / ldmatrix / movmatrix: their fragment
 *    layouts are fixed by PTX), next chunk's operands prefetched with
 *    cp.async, and per chunk computes v_new, the chunk's outputs
 *    (o = q S0 + Aq v_new: the output phase is fused here, so the
 *    per-chunk states never go to memory) and the next state, all
 *    products on bf16 mma with fp32 accumulation.
 * Ragged tails: tokens past T in the last chunk are zeros with gate 0 and
 * beta 0, so they contribute exactly nothing and are never stored.
 *
 * Precision (template P, i[4]): with P = 1 every mma operand is one bf16
 * (about 2^-9 relative each: RMSE / RMS ~3.6e-3 of the fp32 result, NMSE
 * ~1e-5).  With P = 2 ("split") each operand x is stored as two bf16
 * planes, hi = bf16(x) and lo = bf16(x - hi), and every product is
 * hi hi + hi lo + lo hi on the same tensor cores (the dropped lo lo term
 * is ~2^-18 relative): about 16 significant bits per operand and fp32
 * accumulation, which is what ggml's fp32 kernel and test-backend-ops'
 * NMSE bound of 1e-7 ask for.  Three times the mma, twice the operand
 * bytes (scratch, shared memory, the loads); the fp32 parts (A, T, the
 * state) are unchanged.  C = 64 with two planes fits the shared memory
 * at d_k = 64 only (kcu_gdn_chunked_check: "arch" otherwise).
 *
 * Scratch lives in ctx->workspace (no allocation here, so the launches can
 * be captured in a CUDA graph).  When the workspace cannot hold every
 * (b, h) at once, the (b, h) run in groups that fit, one kernel pair per
 * group.
 *
 * NaN gates: the serial form makes o NaN from the NaN's token on; here the
 * whole chunk holding it turns NaN (the matrix products mix its tokens),
 * and everything after it as in the serial form.
 */
#include "kernels/cuda/cuda_gdn_impl.cuh"

#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

#define LOG2E 1.4426950408889634f
#define PREP_THREADS 256
#define PREP_WARPS (PREP_THREADS / 32)
#define DVB 32  /* value columns per recurrence CTA */
#define WN 16   /* value columns per recurrence warp */
#define REC_THREADS (DVB / WN * 32)
#define DV_MAX 256

struct chunk_args {
	gdn_args a;
	/* scratch of this group, per (b, h) item il: rows il * tp + token;
	 * with two planes (P = 2) each matrix's low parts follow at +plane
	 * elements of its own size */
	bf16 *w, *u, *qg, *kg, *aq;
	int64_t wpl, upl, aqpl;  /* plane sizes: w / qg / kg, u, aq */
	float *gl;        /* [il][chunk][d_k] */
	int64_t nch, tp;  /* chunks per sequence, nch * C */
	int64_t item0;    /* first (b, h) item (h fastest) of the group */
};

/* ---- shared-memory layouts (host and device compute the same) --------- */

static __host__ __device__ inline size_t al128(size_t n)
{
	return (n + 127) & ~(size_t)127;
}

/* The next region of a layout: its offset, *o moved past it (128-byte
 * aligned). */
static __host__ __device__ inline size_t carve(size_t *o, size_t bytes)
{
	const size_t at = *o;

	*o += al128(bytes);
	return at;
}

struct prep_smem {
	size_t kT, qT, gT, dT, A, bet, Tb, Kb, Vb, stage, total;
};

/* kT, qT, gT (cumulative log2 gate), dT (KDA: the token's own decay
 * exp(g)) are channel-major [D][C + 4] fp32 (so a thread's 4 tokens are
 * one float4); A [C][C + 4] fp32; bf16 operands padded by 8 elements so
 * the mma tile loads hit distinct banks. */
static __host__ __device__ inline prep_smem prep_layout(int C, int D, bool kda, int dv, int P)
{
	prep_smem l;
	size_t o = 0;

	l.kT = carve(&o, (size_t)D * (C + 4) * 4);
	l.qT = carve(&o, (size_t)D * (C + 4) * 4);
	l.gT = carve(&o, (size_t)(kda ? D : 1) * (C + 4) * 4);
	l.dT = carve(&o, (size_t)(kda ? D : 0) * (C + 4) * 4);
	l.A = carve(&o, (size_t)C * (C + 4) * 4);
	l.bet = carve(&o, (size_t)C * 4);
	l.Tb = carve(&o, (size_t)P * C * (C + 8) * 2);
	l.Kb = carve(&o, (size_t)P * C * (D + 8) * 2);
	l.Vb = carve(&o, (size_t)P * C * (dv + 8) * 2);
	/* the w / u staging tiles are written only once kT .. dT are dead:
	 * overlaid on them, a C = 16 CTA fits four to an SM */
	if (al128((size_t)PREP_WARPS * 16 * 20 * 4) <= l.A - l.kT)
		l.stage = l.kT;
	else
		l.stage = carve(&o, (size_t)PREP_WARPS * 16 * 20 * 4);
	l.total = o;
	return l;
}

struct rec_smem {
	size_t W, QG, KG, U, AQ, GL, buf, total;
};

/* Chunk buffers in k_recur (chunks in flight + 1).  Measured on the H200
 * (KDA, T = 8192, H = 96) with the earlier 4-warp recurrence: C = 16 with
 * 4 at 2.554 ms, with 2 at 2.567 ms (the same within noise; it still fits
 * three CTAs per SM); C = 32 with 3 at 3.215 ms against 2.792 ms with 2,
 * whose 72 KB keep three CTAs per SM where 3 buffers leave two. */
static __host__ __device__ inline int rec_stages(int C, int P)
{
	return C == 16 && P == 1 ? 4 : 2;
}

/* rec_stages buffers of the per-chunk operands (W, QG, KG, U, AQ, GL at
 * the offsets below plus buf per buffer). */
static __host__ __device__ inline rec_smem rec_layout(int C, int D, int P)
{
	rec_smem l;
	size_t o = 0;

	l.W = carve(&o, (size_t)P * C * (D + 8) * 2);
	l.QG = carve(&o, (size_t)P * C * (D + 8) * 2);
	l.KG = carve(&o, (size_t)P * C * (D + 8) * 2);
	l.U = carve(&o, (size_t)P * C * (DVB + 8) * 2);
	l.AQ = carve(&o, (size_t)P * C * (C + 8) * 2);
	l.GL = carve(&o, (size_t)D * 4);
	l.buf = o;
	o *= rec_stages(C, P);
	l.total = o;
	return l;
}

/* ---- device helpers ------------------------------------------------------ */

static __device__ __forceinline__ float gate(float g)
{
	return g > 0.0f ? 0.0f : g;  /* a comparison, so NaN stays NaN */
}

static __device__ __forceinline__ float ldf(const kcu_t &t, int64_t i0, int64_t i1, int64_t i2,
					    int64_t i3)
{
	return *(const float *)kcu_at(t, i0, i1, i2, i3);
}

/* N consecutive tokens of one channel into out, the pointer stepped by the
 * token stride (a full index computation per load costs more than the
 * load); tokens from n on read as 0.  Returns the pointer stepped past
 * them. */
template <int N>
static __device__ __forceinline__ const char *load_tokens(const char *p, int64_t stride, int n, float *out)
{
#pragma unroll
	for (int u = 0; u < N; u++) {
		out[u] = u < n ? *(const float *)p : 0.0f;
		p += stride;
	}
	return p;
}

/* 2^x for x <= 0 (or NaN): the hardware approximation (rel. error ~2^-22,
 * far below bf16's), subnormal results flushed to 0. */
static __device__ __forceinline__ float ex2(float x)
{
	float y;

	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

/* (b, h) item -> h, b and the key head hk.  32-bit divisions where the
 * values fit (always, in practice): every thread of a prep CTA does this,
 * and a 64-bit division is a long software sequence. */
static __device__ __forceinline__ void split_item(const gdn_args &a, int64_t item, int64_t *h,
						  int64_t *b, int64_t *hk)
{
	if (((uint64_t)item | (uint64_t)a.h_v | (uint64_t)a.rep | (uint64_t)a.h_k) >> 32 == 0) {
		const unsigned it = (unsigned)item, hv = (unsigned)a.h_v, hh = it % hv;

		*h = hh;
		*b = it / hv;
		*hk = a.tiled ? hh % (unsigned)a.h_k : hh / (unsigned)a.rep;
	} else {
		*h = item % a.h_v;
		*b = item / a.h_v;
		*hk = gdn_key_head(a, *h);
	}
}

static __device__ __forceinline__ float wsum(float x)
{
	for (int o = 16; o > 0; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	return x;
}

static __device__ __forceinline__ void cp16(void *s, const void *g)
{
	unsigned sa = (unsigned)__cvta_generic_to_shared(s);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(g));
}

static __device__ __forceinline__ void cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ float f4(const float4 &v, int i)
{
	return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* x into a bf16 matrix of P planes, element i: plane 0 bf16(x); with P = 2
 * plane 1 (pl elements on) the remainder bf16(x - plane 0), exact in fp32,
 * so the pair holds x to about 2^-17 relative. */
template <int P>
static __device__ __forceinline__ void put_bf16(bf16 *m, int64_t pl, int64_t i, float x)
{
	const bf16 h = __float2bfloat16(x);

	m[i] = h;
	if (P == 2)
		m[pl + i] = __float2bfloat16(x - __bfloat162float(h));
}

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> frag_at;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

/* ---- phase 1: one CTA per (chunk, item) ---------------------------------- */

template <int C, int D, bool KDA, int P>
__global__ void __launch_bounds__(PREP_THREADS, C == 16 ? 4 : C == 32 ? 2 : 1) k_prep(chunk_args ca)
{
#if __CUDA_ARCH__ >= 800
	extern __shared__ __align__(128) unsigned char sm[];
	const gdn_args &a = ca.a;
	constexpr int LT = C + 4, LK = D + 8, LB = C + 8;
	constexpr int SOLVERS = C < 32 ? 32 : C;  /* whole warps solve for T */
	const int dv = (int)a.d_v, LV = dv + 8;
	const prep_smem L = prep_layout(C, D, KDA, dv, P);
	float *kT = (float *)(sm + L.kT), *qT = (float *)(sm + L.qT), *gT = (float *)(sm + L.gT);
	float *dT = (float *)(sm + L.dT);
	float *A = (float *)(sm + L.A), *bet = (float *)(sm + L.bet);
	bf16 *Tb = (bf16 *)(sm + L.Tb), *Kb = (bf16 *)(sm + L.Kb), *Vb = (bf16 *)(sm + L.Vb);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, n = blockIdx.x;
	const int64_t il = blockIdx.y, item = ca.item0 + il;
	int64_t h, b, hk;
	split_item(a, item, &h, &b, &hk);
	const int64_t t0 = (int64_t)n * C, row0 = il * ca.tp + t0;
	const int cn = (int)(a.t - t0 < C ? a.t - t0 : C);

	/* Loads, split by role so that no phase waits on a serial one:
	 *  - warps 0 .. 3: q and k, four tokens a warp (lanes across
	 *    channels, coalesced), L2-normalised and stored as one float4 of
	 *    four tokens per channel: with LT = C + 4 the 8 lanes of a quarter
	 *    warp hit 8 distinct 4-bank groups (scalar stores of one token
	 *    would be 4-way conflicts);
	 *  - warps 4 .. 7: the gates (KDA: a lane per channel, the cumulative
	 *    sum and the decays kept in registers; GDN: a lane per token, a
	 *    warp scan), beta and v.
	 * Tokens past T are zeros with gate 0 and beta 0. */
	if (warp < 4) {
		const int64_t ks = 32 * a.k.nb[0], qs = 32 * a.q.nb[0];

		for (int r0 = 4 * warp; r0 < C; r0 += 16) {
			/* token t0 + r0 (possibly past T: only dereferenced for
			 * tokens before cn) */
			const char *rk0 = (const char *)kcu_at(a.k, lane, hk, t0 + r0, b);
			const char *rq0 = (const char *)kcu_at(a.q, lane, hk, t0 + r0, b);
			float kv[4][D / 32], qv[4][D / 32];

#pragma unroll
			for (int u = 0; u < 4; u++) {
				const bool ok = r0 + u < cn;
				const char *rk = rk0 + u * a.k.nb[2], *rq = rq0 + u * a.q.nb[2];

#pragma unroll
				for (int e = 0; e < D / 32; e++) {
					kv[u][e] = ok ? *(const float *)(rk + e * ks) : 0.0f;
					qv[u][e] = ok ? *(const float *)(rq + e * qs) : 0.0f;
				}
			}
			if (a.l2) {
#pragma unroll
				for (int u = 0; u < 4; u++) {
					float sk = 0.0f, sq = 0.0f;

#pragma unroll
					for (int e = 0; e < D / 32; e++) {
						sk += kv[u][e] * kv[u][e];
						sq += qv[u][e] * qv[u][e];
					}
					const float ik = 1.0f / fmaxf(sqrtf(wsum(sk)), a.eps);
					const float iq = 1.0f / fmaxf(sqrtf(wsum(sq)), a.eps);

#pragma unroll
					for (int e = 0; e < D / 32; e++) {
						kv[u][e] *= ik;
						qv[u][e] *= iq;
					}
				}
			}
#pragma unroll
			for (int e = 0; e < D / 32; e++) {
				const int c = lane + 32 * e;

				*(float4 *)&kT[c * LT + r0] = make_float4(kv[0][e], kv[1][e], kv[2][e], kv[3][e]);
				*(float4 *)&qT[c * LT + r0] = make_float4(qv[0][e], qv[1][e], qv[2][e], qv[3][e]);
			}
		}
	} else {
		const int gt = tid - 128;  /* 0 .. 127 */

		if (KDA) {
			/* 16 tokens' loads in flight, then the running sum (log2). */
			for (int c = gt; c < D; c += 128) {
				const char *pg = (const char *)kcu_at(a.g, c, h, t0, b);
				float run = 0.0f;

				for (int r0 = 0; r0 < C; r0 += 16) {
					float gv[16];

					pg = load_tokens<16>(pg, a.g.nb[2], cn - r0, gv);
#pragma unroll
					for (int u = 0; u < 16; u += 4) {
						float G[4], E[4];

#pragma unroll
						for (int x = 0; x < 4; x++) {
							const float l = gate(gv[u + x]) * LOG2E;

							E[x] = ex2(l);
							run += l;
							G[x] = run;
						}
						*(float4 *)&gT[c * LT + r0 + u] = make_float4(G[0], G[1], G[2], G[3]);
						*(float4 *)&dT[c * LT + r0 + u] = make_float4(E[0], E[1], E[2], E[3]);
					}
				}
			}
		} else if (warp == 4) {
			/* GDN: inclusive scan of the head's gates over the chunk (log2). */
			float run = 0.0f;

			for (int base = 0; base < C; base += 32) {
				const int r = base + lane;
				float x = r < cn ? gate(ldf(a.g, 0, h, t0 + r, b)) * LOG2E : 0.0f;

				for (int o = 1; o < 32; o <<= 1) {
					float y = __shfl_up_sync(0xffffffffu, x, o);

					if (lane >= o)
						x += y;
				}
				x += run;
				if (r < C)
					gT[r] = x;
				run = __shfl_sync(0xffffffffu, x, 31);
			}
		}
		for (int r = gt; r < C; r += 128)
			bet[r] = r < cn ? ldf(a.beta, 0, h, t0 + r, b) : 0.0f;
		/* v: 8 tokens' loads in flight per thread, lanes across channels. */
		for (int c = gt; c < dv; c += 128) {
			const char *pv = (const char *)kcu_at(a.v, c, h, t0, b);

			for (int r0 = 0; r0 < C; r0 += 8) {
				float vv[8];

				pv = load_tokens<8>(pv, a.v.nb[2], cn - r0, vv);
#pragma unroll
				for (int u = 0; u < 8; u++)
					put_bf16<P>(Vb, (int64_t)C * LV, (r0 + u) * LV + c, vv[u]);
			}
		}
	}
	__syncthreads();

	/* A and Aq in 4 x 4 register tiles over the lower triangle; SL
	 * consecutive lanes share a tile, each taking every SL-th channel, so
	 * short chunks still keep most threads busy (the per-thread channel
	 * loop is this kernel's critical path; C = 16: 10 tiles x 16 lanes). */
	{
		constexpr int NT = C / 4, NOFF = NT * (NT - 1) / 2, NP = NOFF + NT;
		constexpr int SL = C == 16 ? 16 : C == 32 ? 4 : 1, LOG_SL = C == 16 ? 4 : C == 32 ? 2 : 0;
		bf16 *aq = ca.aq + row0 * C;

		/* uniform trip count: the shuffles below need whole warps */
		for (int base = 0; base < NP * SL; base += PREP_THREADS) {
			const int pl = base + tid, p = pl / SL, sl = pl % SL;
			const bool act = p < NP;
			int ti = 0, tj;

			/* off-diagonal tiles first, then the diagonal ones: a warp then
			 * takes one branch below, not both */
			if (p < NOFF) {
				while ((ti + 1) * (ti + 2) / 2 <= p)
					ti++;
				tj = p - ti * (ti + 1) / 2;
				ti++;
			} else {
				ti = tj = p - NOFF;
			}
			const int i0 = 4 * ti, j0 = 4 * tj;
			float kk[4][4], qk[4][4];

#pragma unroll
			for (int x = 0; x < 4; x++)
#pragma unroll
				for (int y = 0; y < 4; y++)
					kk[x][y] = qk[x][y] = 0.0f;
			if (!act) {
				/* nothing: zeros into the reduction */
			} else if (!KDA || tj < ti) {
				for (int c = sl; c < D; c += SL) {
					float4 ki = *(const float4 *)&kT[c * LT + i0];
					float4 qi = *(const float4 *)&qT[c * LT + i0];
					float4 kj = *(const float4 *)&kT[c * LT + j0];

					if (KDA) {
						/* r = G at token j0 + 3: G_i <= r <= G_j.  exp(G_i - r)
						 * for i0 .. i0 + 3 is one exp and then the tokens' own
						 * decays; exp(r - G_j) the decays of j0 + 1 .. j0 + 3. */
						const float gi = gT[c * LT + i0], r = gT[c * LT + j0 + 3];
						const float4 di = *(const float4 *)&dT[c * LT + i0];
						const float4 dj = *(const float4 *)&dT[c * LT + j0];
						const float e0 = ex2(gi - r), e1 = e0 * di.y;
						const float e2 = e1 * di.z, e3 = e2 * di.w;
						const float f2 = dj.w, f1 = f2 * dj.z, f0 = f1 * dj.y;

						ki.x *= e0; ki.y *= e1; ki.z *= e2; ki.w *= e3;
						qi.x *= e0; qi.y *= e1; qi.z *= e2; qi.w *= e3;
						kj.x *= f0;
						kj.y *= f1;
						kj.z *= f2;
					}
#pragma unroll
					for (int x = 0; x < 4; x++)
#pragma unroll
						for (int y = 0; y < 4; y++) {
							kk[x][y] += f4(ki, x) * f4(kj, y);
							qk[x][y] += f4(qi, x) * f4(kj, y);
						}
				}
			} else {
				/* KDA diagonal sub-block (i0 = j0): exp(G_x - G_y), x > y,
				 * is the product of the decays of tokens y + 1 .. x; no
				 * exp at all, and j > i is never formed (masked below). */
				for (int c = sl; c < D; c += SL) {
					const float4 ki = *(const float4 *)&kT[c * LT + i0];
					const float4 qi = *(const float4 *)&qT[c * LT + i0];
					const float4 di = *(const float4 *)&dT[c * LT + i0];
					float e[4][4];

					e[1][0] = di.y;
					e[2][1] = di.z;
					e[3][2] = di.w;
					e[2][0] = e[2][1] * e[1][0];
					e[3][1] = e[3][2] * e[2][1];
					e[3][0] = e[3][2] * e[2][0];
#pragma unroll
					for (int x = 0; x < 4; x++) {
#pragma unroll
						for (int y = 0; y < x; y++) {
							const float kje = f4(ki, y) * e[x][y];

							kk[x][y] += f4(ki, x) * kje;
							qk[x][y] += f4(qi, x) * kje;
						}
						kk[x][x] += f4(ki, x) * f4(ki, x);
						qk[x][x] += f4(qi, x) * f4(ki, x);
					}
				}
			}
			/* Reduce-scatter over the SL lanes of the tile: each level keeps
			 * half of the 32 partial sums and trades the other half, so a
			 * lane ends with 32 / SL finished entries (eb .. eb + 32 / SL - 1
			 * of kk then qk, row-major) for a fraction of the shuffles of
			 * an all-reduce. */
			float v[32];
			int eb = 0;

#pragma unroll
			for (int x = 0; x < 4; x++)
#pragma unroll
				for (int y = 0; y < 4; y++) {
					v[4 * x + y] = kk[x][y];
					v[16 + 4 * x + y] = qk[x][y];
				}
#pragma unroll
			for (int lv = 0; lv < LOG_SL; lv++) {
				const int o = SL >> (lv + 1), nh = 16 >> lv;
				const bool up = (sl & o) != 0;

				/* a fixed trip count, so that both loops unroll and v stays
				 * in registers */
#pragma unroll
				for (int e = 0; e < 16; e++) {
					if (e < nh) {
						const float send = up ? v[e] : v[e + nh];
						const float keep = up ? v[e + nh] : v[e];

						v[e] = keep + __shfl_xor_sync(0xffffffffu, send, o);
					}
				}
				if (up)
					eb += nh;
			}
			if (!act)
				continue;
#pragma unroll
			for (int e = 0; e < 32 / SL; e++) {
				const int id = eb + e, i = i0 + (id & 15) / 4, j = j0 + (id & 3);
				float val = v[e];

				if (!KDA)
					val *= ex2(fminf(gT[i] - gT[j], 0.0f));
				if (id < 16)
					A[i * LT + j] = bet[i] * val;
				else
					put_bf16<P>(aq, ca.aqpl, i * C + j, j <= i ? val : 0.0f);
			}
		}
		/* Aq's upper blocks are read by the 16 x 16 tiles of k_recur. */
		for (int x = tid; x < C * C; x += PREP_THREADS)
			if ((x % C) / 4 > (x / C) / 4)
				put_bf16<P>(aq, ca.aqpl, x, 0.0f);
	}
	__syncthreads();

	if (tid < SOLVERS) {
		/* T = (I + A)^-1, column j per thread by forward substitution:
		 * t = e_j - A t with A strictly lower (t[i] = 0 for i < j falls
		 * out), four partial sums to shorten the dependency chain. */
		if (tid < C) {
			const int j = tid;
			float t[C];

#pragma unroll
			for (int i = 0; i < C; i++) {
				float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;

#pragma unroll
				for (int m = 0; m + 3 < i; m += 4) {
					const float4 av = *(const float4 *)&A[i * LT + m];

					s0 += av.x * t[m];
					s1 += av.y * t[m + 1];
					s2 += av.z * t[m + 2];
					s3 += av.w * t[m + 3];
				}
#pragma unroll
				for (int m = i & ~3; m < i; m++)
					s0 += A[i * LT + m] * t[m];
				t[i] = (i == j ? 1.0f : 0.0f) - ((s0 + s1) + (s2 + s3));
			}
			/* beta folds into T's columns: w = (T diag(beta)) (Gam k),
			 * u = (T diag(beta)) v, so v needs no pass of its own. */
			const float bj = bet[j];

#pragma unroll
			for (int i = 0; i < C; i++)
				put_bf16<P>(Tb, C * LB, i * LB + j, t[i] * bj);
		}
	} else {
		/* Meanwhile the other warps write the gated q and k and build the
		 * right-hand side Gam k. */
		const int w0 = tid - SOLVERS, nw = PREP_THREADS - SOLVERS;

		/* 4 tokens of one channel per thread: float4 reads of the
		 * channel-major arrays, conflict-free across a quarter warp. */
		for (int x = w0; x < C / 4 * D; x += nw) {
			const int c = x % D, r0 = x / D * 4;
			const float4 kv = *(const float4 *)&kT[c * LT + r0];
			const float4 qv = *(const float4 *)&qT[c * LT + r0];
			const float4 G4 = *(const float4 *)&gT[KDA ? c * LT + r0 : r0];
			const float Gl = KDA ? gT[c * LT + C - 1] : gT[C - 1];

#pragma unroll
			for (int u = 0; u < 4; u++) {
				const float G = f4(G4, u), eg = ex2(G);

				put_bf16<P>(ca.qg, ca.wpl, (row0 + r0 + u) * D + c, f4(qv, u) * eg);
				put_bf16<P>(ca.kg, ca.wpl, (row0 + r0 + u) * D + c, f4(kv, u) * ex2(Gl - G));
				put_bf16<P>(Kb, C * LK, (r0 + u) * LK + c, f4(kv, u) * eg);
			}
		}
		for (int x = w0; x < D; x += nw)
			ca.gl[(il * ca.nch + n) * D + x] = ex2(KDA ? gT[x * LT + C - 1] : gT[C - 1]);
	}
	__syncthreads();

	/* w = T diag(beta) Gam k, u = T diag(beta) v: 16 x 16 output tiles, staged per
	 * warp in fp32 and written out as bf16 rows (P planes).  With two
	 * planes each product is hi hi + hi lo + lo hi (lo lo, about 2^-18
	 * relative, is dropped). */
	{
		float *stage = (float *)(sm + L.stage) + warp * 16 * 20;
		const int ntn = (D + dv) / 16, nt = (C / 16) * ntn;
		/* lanes 0 .. 15 take the rows' first 8 columns: a quarter warp's
		 * float4 reads of 8 rows 20 floats apart hit distinct banks */
		const int rr = lane & 15, cc = (lane >> 4) * 8;

		for (int tile = warp; tile < nt; tile += PREP_WARPS) {
			const int mi = tile / ntn, ni = tile % ntn;
			const bool isw = ni < D / 16;
			const bf16 *Bm = isw ? Kb + ni * 16 : Vb + (ni - D / 16) * 16;
			const int ldb = isw ? LK : LV;
			frag_c acc;
			frag_a fa, fal;
			frag_b fb, fbl;

			wmma::fill_fragment(acc, 0.0f);
#pragma unroll
			for (int kk = 0; kk < C / 16; kk++) {
				wmma::load_matrix_sync(fa, Tb + mi * 16 * LB + kk * 16, LB);
				wmma::load_matrix_sync(fb, Bm + kk * 16 * ldb, ldb);
				if (P == 2) {
					wmma::load_matrix_sync(fal, Tb + C * LB + mi * 16 * LB + kk * 16, LB);
					wmma::load_matrix_sync(fbl, Bm + C * ldb + kk * 16 * ldb, ldb);
					wmma::mma_sync(acc, fal, fb, acc);
					wmma::mma_sync(acc, fa, fbl, acc);
				}
				wmma::mma_sync(acc, fa, fb, acc);
			}
			wmma::store_matrix_sync(stage, acc, 20, wmma::mem_row_major);
			__syncwarp();
			{
				const float *sp = stage + rr * 20 + cc;
				__align__(16) bf16 pk[P * 8];  /* plane q at pk + 8 q */
				bf16 *dst = isw ? ca.w + (row0 + mi * 16 + rr) * D + ni * 16 + cc
						: ca.u + (row0 + mi * 16 + rr) * dv + (ni - D / 16) * 16 + cc;
				const int64_t pl = isw ? ca.wpl : ca.upl;
				float x[8];

				*(float4 *)x = *(const float4 *)sp;
				*(float4 *)(x + 4) = *(const float4 *)(sp + 4);
#pragma unroll
				for (int e = 0; e < 8; e++)
					put_bf16<P>(pk, 8, e, x[e]);
#pragma unroll
				for (int q = 0; q < P; q++)
					*(uint4 *)(dst + q * pl) = *(const uint4 *)(pk + 8 * q);
			}
			__syncwarp();
		}
	}
#endif
}

/* ---- phases 2 + 3: one CTA per (value-column block, item) ---------------- */

/* Raw bf16 mma (m16n8k16, fp32 accumulate) and ldmatrix: the fragment
 * layouts are fixed by PTX, so the state can stay in registers as
 * accumulators across chunks and be decayed row by row in place.  Lane
 * (g, t) = (lane >> 2, lane & 3) holds accumulator elements (g, 2t),
 * (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). */
static __device__ __forceinline__ void mma16816(float c[4], const unsigned a[4], const unsigned b[2])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ unsigned smaddr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void ldm_x4(unsigned r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smaddr(p)));
}

static __device__ __forceinline__ void ldm_x4t(unsigned r[4], const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smaddr(p)));
}

static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *(unsigned *)&v;
}

/* Transpose of an 8 x 8 bf16 fragment held as one register per lane (lane
 * (g, t) holds row g, columns 2t, 2t + 1): an accumulator tile packed to
 * bf16 becomes an mma B operand without a trip through shared memory. */
static __device__ __forceinline__ unsigned movtrans(unsigned x)
{
	unsigned y;

	asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
	return y;
}

/* Plane q (put_bf16's) of the pair (x0, x1), packed and transposed as
 * movtrans does: q = 0 the bf16 values, q = 1 the remainders. */
static __device__ __forceinline__ unsigned plane_t(float x0, float x1, int q)
{
	__nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);

	if (q)
		return movtrans(pack_bf16(x0 - __low2float(h), x1 - __high2float(h)));
	return movtrans(*(unsigned *)&h);
}

/* acc[j] += A B[j] for the NT n tiles of one k step: A a 16 x 16 tile of
 * a shared operand at a (planes pl elements apart; ldmatrix, transposed
 * when trans), B the k-th fragments of each plane in b.  One plane: one
 * mma; two: hi hi + hi lo + lo hi. */
template <int P, int NT, int NK>
static __device__ __forceinline__ void mma3(float (*acc)[4], const bf16 *a, int pl,
					    const unsigned (&b)[P][NK][NT][2], int k, bool trans)
{
	unsigned fa[4];

	if (trans)
		ldm_x4t(fa, a);
	else
		ldm_x4(fa, a);
#pragma unroll
	for (int j = 0; j < NT; j++) {
		if (P == 2)
			mma16816(acc[j], fa, b[P - 1][k][j]);
		mma16816(acc[j], fa, b[0][k][j]);
	}
	if (P == 2) {
		if (trans)
			ldm_x4t(fa, a + pl);
		else
			ldm_x4(fa, a + pl);
#pragma unroll
		for (int j = 0; j < NT; j++)
			mma16816(acc[j], fa, b[0][k][j]);
	}
}

/* Each warp owns WN = 16 of the block's DVB value columns (NT = 2 mma n
 * tiles, so every A fragment loaded from shared memory feeds two mma: the
 * A loads, not the mma, bound this kernel) and, for them, the whole
 * d_k x 16 slice of S in registers: sacc[m][j] is rows 16 m .. 16 m + 15,
 * columns 8 j .. 8 j + 7 of the warp's slice.  Per chunk (W, QG, KG, U,
 * AQ, GL shared by the warps, prefetched NST - 1 chunks ahead with
 * cp.async):
 *   S0 -> bf16 B fragments (movmatrix); S decays by Gam_C in registers;
 *   X = W S0, O = QG S0;  v_new = U - X -> bf16 B fragments (movmatrix);
 *   O += Aq v_new -> o;   S += KG^T v_new.
 * The warps never exchange data: two barriers per chunk guard the shared
 * buffers only. */
template <int C, int D, int P>
__global__ void __launch_bounds__(REC_THREADS) k_recur(chunk_args ca)
{
#if __CUDA_ARCH__ >= 800
	extern __shared__ __align__(128) unsigned char sm[];
	const gdn_args &a = ca.a;
	constexpr int LK = D + 8, LU = DVB + 8, LQ = C + 8, MS = D / 16, MC = C / 16;
	constexpr int NT = WN / 8, KS = MC <= 2 ? 2 : 1;
	constexpr int NST = C == 16 && P == 1 ? 4 : 2;  /* rec_stages(C, P) */
	/* plane sizes of the shared operands (elements) */
	constexpr int PW = C * LK, PU = C * LU, PQ = C * LQ;
	const rec_smem L = rec_layout(C, D, P);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
	const int jb = blockIdx.x, wc = warp * WN;
	const int64_t il = blockIdx.y, item = ca.item0 + il;
	int64_t h, b, hk;
	split_item(a, item, &h, &b, &hk);
	const int64_t dv = a.d_v, c0 = (int64_t)jb * DVB + wc;
	float sacc[MS][NT][4];

	/* Chunk n's operands into buffer bf, 16 bytes per cp.async. */
	auto issue = [&](int64_t n, int bf) {
		unsigned char *base = sm + bf * L.buf;
		bf16 *W = (bf16 *)(base + L.W), *QG = (bf16 *)(base + L.QG);
		bf16 *KG = (bf16 *)(base + L.KG), *U = (bf16 *)(base + L.U);
		bf16 *AQ = (bf16 *)(base + L.AQ);
		float *GL = (float *)(base + L.GL);
		const int64_t row = il * ca.tp + n * C;
		const bf16 *w = ca.w + row * D, *qg = ca.qg + row * D, *kg = ca.kg + row * D;
		const bf16 *u = ca.u + row * dv + (int64_t)jb * DVB, *aq = ca.aq + row * C;

		/* a fixed number of rounds of REC_THREADS, so the loops unroll
		 * and the offsets fold */
		constexpr int NW = C * D / 8, NU = C * DVB / 8;

#pragma unroll
		for (int i = 0; i < (NW + REC_THREADS - 1) / REC_THREADS; i++) {
			const int x = tid + i * REC_THREADS, r = x / (D / 8), c = x % (D / 8) * 8;

			if (NW % REC_THREADS == 0 || x < NW) {
#pragma unroll
				for (int q = 0; q < P; q++) {
					cp16(W + q * PW + r * LK + c, w + q * ca.wpl + r * D + c);
					cp16(QG + q * PW + r * LK + c, qg + q * ca.wpl + r * D + c);
					cp16(KG + q * PW + r * LK + c, kg + q * ca.wpl + r * D + c);
				}
			}
		}
#pragma unroll
		for (int i = 0; i < (NU + REC_THREADS - 1) / REC_THREADS; i++) {
			const int x = tid + i * REC_THREADS, r = x / (DVB / 8), c = x % (DVB / 8) * 8;

			if (NU % REC_THREADS == 0 || x < NU) {
#pragma unroll
				for (int q = 0; q < P; q++)
					cp16(U + q * PU + r * LU + c, u + q * ca.upl + r * dv + c);
			}
		}
		for (int x = tid; x < C * C / 8; x += REC_THREADS) {
			const int r = x / (C / 8), c = x % (C / 8) * 8;

#pragma unroll
			for (int q = 0; q < P; q++)
				cp16(AQ + q * PQ + r * LQ + c, aq + q * ca.aqpl + r * C + c);
		}
		for (int x = tid; x < D / 4; x += REC_THREADS)
			cp16(GL + x * 4, ca.gl + (il * ca.nch + n) * D + x * 4);
		cp_commit();
	};

#pragma unroll
	for (int m = 0; m < MS; m++)
#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				sacc[m][j][e] = ldf(a.s0, 16 * m + g + 8 * (e >> 1),
						    c0 + 8 * j + 2 * t4 + (e & 1), h, b);
	for (int st = 0; st < NST - 1; st++) {
		if (st < ca.nch)
			issue(st, st);
		else
			cp_commit();  /* empty groups keep the count uniform */
	}
	for (int64_t n = 0; n < ca.nch; n++) {
		const int bf = (int)(n % NST);
		const unsigned char *base = sm + bf * L.buf;
		const bf16 *W = (const bf16 *)(base + L.W), *QG = (const bf16 *)(base + L.QG);
		const bf16 *KG = (const bf16 *)(base + L.KG), *U = (const bf16 *)(base + L.U);
		const bf16 *AQ = (const bf16 *)(base + L.AQ);
		const float *GL = (const float *)(base + L.GL);
		/* B fragments per plane: bs[q] of S0, bv[q] of v_new */
		unsigned bs[P][MS][NT][2], bv[P][MC][NT][2];
		float o[MC][NT][4];

		/* every warp is done with chunk n - 1's buffer, which now takes
		 * chunk n + NST - 1 */
		__syncthreads();
		if (n + NST - 1 < ca.nch)
			issue(n + NST - 1, (int)((n + NST - 1) % NST));
		else
			cp_commit();
		cp_wait<NST - 1>();  /* chunk n has landed */
		__syncthreads();

		/* S0 as bf16 B fragments (k = rows of S); S decays to Gam_C S0
		 * in place. */
#pragma unroll
		for (int m = 0; m < MS; m++) {
			const float d0 = GL[16 * m + g], d1 = GL[16 * m + g + 8];

#pragma unroll
			for (int j = 0; j < NT; j++) {
#pragma unroll
				for (int q = 0; q < P; q++) {
					bs[q][m][j][0] = plane_t(sacc[m][j][0], sacc[m][j][1], q);
					bs[q][m][j][1] = plane_t(sacc[m][j][2], sacc[m][j][3], q);
				}
				sacc[m][j][0] *= d0;
				sacc[m][j][1] *= d0;
				sacc[m][j][2] *= d1;
				sacc[m][j][3] *= d1;
			}
		}

		/* X = W S0 -> v_new = U - X;  O = QG S0.  The d_k sums run as KS
		 * independent chains of mma (even and odd k steps where registers
		 * allow), added at the end: a chain of dependent mma is this
		 * kernel's critical path.  With two planes every product here and
		 * below is three mma (mma3). */
#pragma unroll
		for (int m = 0; m < MC; m++) {
			float x[KS][NT][4], y[KS][NT][4];
			const int ar = 16 * m + (lane & 15), ac = (lane >> 4) * 8;

#pragma unroll
			for (int z = 0; z < KS; z++)
#pragma unroll
				for (int j = 0; j < NT; j++)
#pragma unroll
					for (int e = 0; e < 4; e++)
						x[z][j][e] = y[z][j][e] = 0.0f;
#pragma unroll
			for (int k = 0; k < MS; k++) {
				mma3<P, NT>(x[k % KS], W + ar * LK + 16 * k + ac, PW, bs, k, false);
				mma3<P, NT>(y[k % KS], QG + ar * LK + 16 * k + ac, PW, bs, k, false);
			}
#pragma unroll
			for (int j = 0; j < NT; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					for (int z = 1; z < KS; z++) {
						x[0][j][e] += x[z][j][e];
						y[0][j][e] += y[z][j][e];
					}
					o[m][j][e] = y[0][j][e];
				}
#pragma unroll
			for (int j = 0; j < NT; j++) {
				const int uc = wc + 8 * j + 2 * t4;
				float u[4] = { 0.0f, 0.0f, 0.0f, 0.0f };

#pragma unroll
				for (int q = 0; q < P; q++) {
					const __nv_bfloat162 u0 =
						*(const __nv_bfloat162 *)&U[q * PU + (16 * m + g) * LU + uc];
					const __nv_bfloat162 u1 =
						*(const __nv_bfloat162 *)&U[q * PU + (16 * m + g + 8) * LU + uc];

					u[0] += __low2float(u0);
					u[1] += __high2float(u0);
					u[2] += __low2float(u1);
					u[3] += __high2float(u1);
				}
				/* v_new rows are the k index of the products below */
#pragma unroll
				for (int q = 0; q < P; q++) {
					bv[q][m][j][0] = plane_t(u[0] - x[0][j][0], u[1] - x[0][j][1], q);
					bv[q][m][j][1] = plane_t(u[2] - x[0][j][2], u[3] - x[0][j][3], q);
				}
			}
		}

		/* O += Aq v_new (Aq lower: blocks above the diagonal skipped) -> o. */
		{
			const int64_t t0 = n * C;
			const int cn = (int)(a.t - t0 < C ? a.t - t0 : C);

#pragma unroll
			for (int m = 0; m < MC; m++) {
				const int ar = 16 * m + (lane & 15), ac = (lane >> 4) * 8;

#pragma unroll
				for (int k = 0; k <= m; k++)
					mma3<P, NT>(o[m], AQ + ar * LQ + 16 * k + ac, PQ, bv, k, false);
#pragma unroll
				for (int hr = 0; hr < 2; hr++) {
					const int r = 16 * m + g + 8 * hr;

					if (r < cn) {
						float *op = a.o + ((b * a.t + t0 + r) * a.h_v + h) * dv + c0 + 2 * t4;

#pragma unroll
						for (int j = 0; j < NT; j++) {
							op[8 * j] = a.scale * o[m][j][2 * hr];
							op[8 * j + 1] = a.scale * o[m][j][2 * hr + 1];
						}
					}
				}
			}
		}

		/* S += KG^T v_new: A = KG^T through transposed ldmatrix. */
#pragma unroll
		for (int m = 0; m < MS; m++) {
			const int q = lane >> 3;

#pragma unroll
			for (int k = 0; k < MC; k++)
				mma3<P, NT>(sacc[m], KG + (16 * k + (q >> 1) * 8 + (lane & 7)) * LK + 16 * m + (q & 1) * 8,
					    PW, bv, k, true);
		}
	}
#pragma unroll
	for (int m = 0; m < MS; m++)
#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				a.s[(item * dv + c0 + 8 * j + 2 * t4 + (e & 1)) * D + 16 * m + g +
				    8 * (e >> 1)] = sacc[m][j][e];
#endif
}

/* ---- host side ----------------------------------------------------------- */

typedef void (*kfn)(chunk_args);

template <int C, int D, int P>
static kfn prep_fn(bool kda)
{
	return kda ? k_prep<C, D, true, P> : k_prep<C, D, false, P>;
}

template <int P>
static kfn pick_prep_p(int C, int D, bool kda)
{
	if (D == 64)
		return C == 16 ? prep_fn<16, 64, P>(kda) : C == 32 ? prep_fn<32, 64, P>(kda)
								   : prep_fn<64, 64, P>(kda);
	return C == 16 ? prep_fn<16, 128, P>(kda) : C == 32 ? prep_fn<32, 128, P>(kda)
							    : prep_fn<64, 128, P>(kda);
}

template <int P>
static kfn pick_recur_p(int C, int D)
{
	if (D == 64)
		return C == 16 ? k_recur<16, 64, P> : C == 32 ? k_recur<32, 64, P> : k_recur<64, 64, P>;
	return C == 16 ? k_recur<16, 128, P> : C == 32 ? k_recur<32, 128, P> : k_recur<64, 128, P>;
}

static kfn pick_prep(int C, int D, bool kda, int P)
{
	return P == 2 ? pick_prep_p<2>(C, D, kda) : pick_prep_p<1>(C, D, kda);
}

static kfn pick_recur(int C, int D, int P)
{
	return P == 2 ? pick_recur_p<2>(C, D) : pick_recur_p<1>(C, D);
}

/* Operand planes of a call: two for the split form (i[4] = 1). */
static int planes(const gdn_args *a)
{
	return a->split ? 2 : 1;
}

static int raise_smem(kfn f, size_t smem, char *err, size_t errlen)
{
	cudaFuncAttributes fa;
	int rc = kcu_err(cudaFuncGetAttributes(&fa, (const void *)f), "GATED_DELTA_NET chunked",
			 err, errlen);

	if (rc || (size_t)fa.maxDynamicSharedSizeBytes >= smem)
		return rc;
	return kcu_err(cudaFuncSetAttribute((const void *)f,
					    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
		       "GATED_DELTA_NET chunked", err, errlen);
}

/* Scratch bytes of one (b, h), unrounded: P planes of the bf16 operands. */
static size_t item_bytes(int64_t d_k, int64_t d_v, int64_t t, int C, int P)
{
	const int64_t nch = (t + C - 1) / C, tp = nch * C;

	return (size_t)P * tp * (3 * d_k + d_v + C) * 2 + (size_t)nch * d_k * 4;
}

/* Six regions, each rounded up to the workspace alignment. */
#define WS_SLACK (6 * KCU_WS_ALIGN)

size_t kcu_gdn_chunked_ws(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t, int64_t b, int chunk,
			  bool split)
{
	return item_bytes(d_k, d_v, t, chunk, split ? 2 : 1) * (size_t)(h_v * b) + WS_SLACK;
}

bool kcu_gdn_chunked_layout_ok(int64_t d_k, int64_t d_v)
{
	return (d_k == 64 || d_k == 128) && d_v % DVB == 0 && d_v <= DV_MAX;
}

int kcu_gdn_chunked_check(const struct kern_cuda_ctx *ctx, const gdn_args *a, int chunk)
{
	int major = 0, optin = 0;

	if (!kcu_gdn_chunked_layout_ok(a->d_k, a->d_v))
		return KCU_GDN_LAYOUT;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device) !=
		    cudaSuccess ||
	    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device) !=
		    cudaSuccess) {
		cudaGetLastError();
		return KCU_GDN_ARCH;
	}
	if (major < 8 ||
	    prep_layout(chunk, (int)a->d_k, a->kda, (int)a->d_v, planes(a)).total > (size_t)optin ||
	    rec_layout(chunk, (int)a->d_k, planes(a)).total > (size_t)optin)
		return KCU_GDN_ARCH;
	if (!ctx->workspace ||
	    ctx->workspace_bytes < item_bytes(a->d_k, a->d_v, a->t, chunk, planes(a)) + WS_SLACK)
		return KCU_GDN_NOMEM;
	return KCU_GDN_OK;
}

int kcu_gdn_chunked(const struct kern_cuda_ctx *ctx, const gdn_args *a, int chunk, char *err,
		    size_t errlen)
{
	const int C = chunk, D = (int)a->d_k, P = planes(a);
	const int64_t items = a->h_v * a->b, nch = (a->t + C - 1) / C, tp = nch * C;
	const size_t per = item_bytes(a->d_k, a->d_v, a->t, C, P);
	const size_t ps = prep_layout(C, D, a->kda, (int)a->d_v, P).total;
	const size_t rs = rec_layout(C, D, P).total;
	const kfn prep = pick_prep(C, D, a->kda, P), recur = pick_recur(C, D, P);
	cudaStream_t st = kcu_stream(ctx);
	int64_t group = (int64_t)((ctx->workspace_bytes - WS_SLACK) / per);
	int rc;

	if (group > items)
		group = items;
	if (group > 65535)
		group = 65535;  /* gridDim.y */
	/* kern_cuda_preload raised the limits to the largest size (so a graph
	 * capture sees no attribute change); a caller that skipped it gets
	 * them here. */
	rc = raise_smem(prep, ps, err, errlen);
	if (!rc)
		rc = raise_smem(recur, rs, err, errlen);
	if (rc)
		return rc;
	for (int64_t i0 = 0; i0 < items; i0 += group) {
		const int64_t gi = items - i0 < group ? items - i0 : group;
		struct kcu_arena ar = { (char *)ctx->workspace, ctx->workspace_bytes };
		chunk_args ca;

		ca.a = *a;
		ca.nch = nch;
		ca.tp = tp;
		ca.item0 = i0;
		ca.wpl = gi * tp * D;
		ca.upl = gi * tp * a->d_v;
		ca.aqpl = gi * tp * C;
		ca.w = (bf16 *)kcu_take(&ar, (size_t)P * ca.wpl * 2);
		ca.qg = (bf16 *)kcu_take(&ar, (size_t)P * ca.wpl * 2);
		ca.kg = (bf16 *)kcu_take(&ar, (size_t)P * ca.wpl * 2);
		ca.u = (bf16 *)kcu_take(&ar, (size_t)P * ca.upl * 2);
		ca.aq = (bf16 *)kcu_take(&ar, (size_t)P * ca.aqpl * 2);
		ca.gl = (float *)kcu_take(&ar, (size_t)gi * nch * D * 4);
		prep<<<dim3((unsigned)nch, (unsigned)gi), PREP_THREADS, ps, st>>>(ca);
		recur<<<dim3((unsigned)(a->d_v / DVB), (unsigned)gi), REC_THREADS, rs, st>>>(ca);
		rc = kcu_launched("GATED_DELTA_NET chunked", err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* Touch every instantiation and allow it the most dynamic shared memory
 * any call can ask for (d_v = DV_MAX), where the device has that much:
 * done here, per device, so the launch path's own cudaFuncSetAttribute
 * never raises a limit in the middle of a graph capture. */
static int preload_one(kfn f, size_t smem, char *err, size_t errlen)
{
	int optin = 0, dev = 0;
	int rc = kcu_touch(f, "GATED_DELTA_NET", err, errlen);

	if (rc)
		return rc;
	rc = kcu_err(cudaGetDevice(&dev), "GATED_DELTA_NET", err, errlen);
	if (!rc)
		rc = kcu_err(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
						    dev), "GATED_DELTA_NET", err, errlen);
	if (rc || smem > (size_t)optin)
		return rc;  /* kcu_gdn_chunked_check keeps such sizes off this device */
	rc = kcu_err(cudaFuncSetAttribute((const void *)f,
					  cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
		     "GATED_DELTA_NET", err, errlen);
	/* Shared memory, not L1, limits how many CTAs share an SM (four of
	 * k_prep at C = 16 need the largest carveout); a hint only. */
	if (!rc)
		rc = kcu_err(cudaFuncSetAttribute((const void *)f,
						  cudaFuncAttributePreferredSharedMemoryCarveout,
						  cudaSharedmemCarveoutMaxShared),
			     "GATED_DELTA_NET", err, errlen);
	return rc;
}

int kcu_gdn_chunked_preload(char *err, size_t errlen)
{
	static const int cs[3] = { 16, 32, 64 }, ds[2] = { 64, 128 };
	int rc = 0;

	for (int p = 1; p <= 2; p++) {
		for (int c = 0; c < 3 && !rc; c++)
			for (int d = 0; d < 2 && !rc; d++)
				for (int kda = 0; kda < 2 && !rc; kda++)
					rc = preload_one(pick_prep(cs[c], ds[d], kda, p),
							 prep_layout(cs[c], ds[d], kda, DV_MAX, p).total,
							 err, errlen);
		for (int c = 0; c < 3 && !rc; c++)
			for (int d = 0; d < 2 && !rc; d++)
				rc = preload_one(pick_recur(cs[c], ds[d], p),
						 rec_layout(cs[c], ds[d], p).total, err, errlen);
	}
	return rc;
}

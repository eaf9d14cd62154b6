/*
 * kernels/cuda/cuda_impl.cuh — internal to the CUDA kernels: the per-op
 * entry points the dispatch table holds, the tensor view kernels take by
 * value, the f16/bf16 conversions (bit-identical to kernels/fp16_impl.h),
 * workspace carving and error conversion.
 *
 * Every kernel is launched only from the .cu file that defines it (no
 * relocatable device code), and every file lists its kernels in a
 * *_preload function so kern_cuda_preload can load them all.
 */
#ifndef PPRPC_KERNELS_CUDA_IMPL_CUH
#define PPRPC_KERNELS_CUDA_IMPL_CUH

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "kernels/ops_impl.h"
}
#include "kernels/cuda/cuda_ops.h"

/* A tensor as kernels see it: strides signed so index arithmetic stays in
 * int64 (descriptors were checked: every extent fits). */
struct kcu_t {
	char *data;
	int64_t ne[4];
	int64_t nb[4];
};

static inline kcu_t kcu_view(const struct kern_tensor *t)
{
	kcu_t v;

	v.data = (char *)t->data;
	for (int k = 0; k < 4; k++) {
		v.ne[k] = t->ne[k];
		v.nb[k] = (int64_t)t->nb[k];
	}
	return v;
}

static __device__ __forceinline__ char *kcu_at(const kcu_t &t, int64_t i0, int64_t i1,
						 int64_t i2, int64_t i3)
{
	return t.data + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

/* Logical (ne-order) linear index -> multi-index.  small: every index
 * fits in 32 bits (the host knows: element count < 2^32), and 32-bit
 * division is several times cheaper than 64-bit on the GPU. */
static __device__ __forceinline__ void kcu_unravel(const int64_t ne[4], int64_t lin, int64_t i[4],
						    bool small)
{
	if (small) {
		uint32_t l = (uint32_t)lin, n0 = (uint32_t)ne[0], n1 = (uint32_t)ne[1],
			 n2 = (uint32_t)ne[2];

		i[0] = l % n0;
		l /= n0;
		i[1] = l % n1;
		l /= n1;
		i[2] = l % n2;
		i[3] = l / n2;
		return;
	}
	i[0] = lin % ne[0];
	lin /= ne[0];
	i[1] = lin % ne[1];
	lin /= ne[1];
	i[2] = lin % ne[2];
	i[3] = lin / ne[2];
}

static inline bool kcu_small(int64_t n)
{
	return n < ((int64_t)1 << 32);
}

/* Grid-stride loop over [0, n). */
#define KCU_FOR(l, n)                                                                     \
	for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < (n);            \
	     l += (int64_t)gridDim.x * blockDim.x)

/* Row r of t (rows numbered in (i1, i2, i3) order) -> its first byte. */
static __device__ __forceinline__ char *kcu_row(const kcu_t &t, int64_t r)
{
	int64_t i1 = r % t.ne[1], i2 = (r / t.ne[1]) % t.ne[2], i3 = r / (t.ne[1] * t.ne[2]);

	return kcu_at(t, 0, i1, i2, i3);
}

/* Reduce v over the block (blockDim.x a multiple of 32, at most 1024) and
 * return the result to every thread.  sh: 32 slots of shared memory.  The
 * order is fixed (lanes by xor, then warps in order), so a run is
 * deterministic.  Safe to call repeatedly with the same sh. */
template <typename T, typename Op>
static __device__ __forceinline__ T kcu_block_reduce(T v, Op op, T *sh)
{
	int nw = blockDim.x >> 5;

	for (int o = 16; o > 0; o >>= 1)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
	if (nw == 1)
		return v;
	__syncthreads();  /* earlier readers of sh are done */
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = v;
	__syncthreads();
	v = sh[0];
	for (int w = 1; w < nw; w++)
		v = op(v, sh[w]);
	return v;
}

struct kcu_add_op {
	template <typename T>
	__device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

struct kcu_max_op {
	/* fmaxf: a NaN never wins, as in the CPU loops. */
	__device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* Threads per block for a row of n elements: whole warps, up to 256. */
static inline int kcu_row_threads(int64_t n)
{
	return n >= 256 ? 256 : (int)((n + 31) / 32 * 32);
}

/* ---- f16 / bf16: integer code identical to kernels/fp16_impl.h, so the
 * CUDA and CPU builds round every value the same way (NaN payloads
 * included). --------------------------------------------------------------- */

static __device__ __forceinline__ float kcu_f16_decode(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;

	if (exp == 0x1f)
		return __uint_as_float(sign | 0x7f800000 | (mant << 13));
	if (exp != 0)
		return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
	if (mant == 0)
		return __uint_as_float(sign);
	exp = 113;
	while (!(mant & 0x400)) {
		mant <<= 1;
		exp--;
	}
	return __uint_as_float(sign | (exp << 23) | ((mant & 0x3ff) << 13));
}

static __device__ __forceinline__ uint16_t kcu_f16_encode(float f)
{
	uint32_t x = __float_as_uint(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	uint32_t e, m, shift, r, rem, half;

	if (ax > 0x7f800000)
		return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
	if (ax >= 0x477ff000)
		return sign | 0x7c00;
	if (ax >= 0x38800000) {
		ax += 0xfff + ((ax >> 13) & 1);
		return sign | (uint16_t)((ax - 0x38000000) >> 13);
	}
	e = ax >> 23;
	if (e < 102)
		return sign;
	m = (ax & 0x7fffff) | 0x800000;
	shift = 126 - e;
	r = m >> shift;
	rem = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1)))
		r++;
	return sign | (uint16_t)r;
}

static __device__ __forceinline__ float kcu_bf16_decode(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

static __device__ __forceinline__ uint16_t kcu_bf16_encode(float f)
{
	uint32_t x = __float_as_uint(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* Load one f32|f16|bf16 element as f32. */
static __device__ __forceinline__ float kcu_load(const char *p, int dtype)
{
	if (dtype == PPRPC_F16)
		return kcu_f16_decode(*(const uint16_t *)p);
	if (dtype == PPRPC_BF16)
		return kcu_bf16_decode(*(const uint16_t *)p);
	return *(const float *)p;
}

/* Store f32 as f32|f16|bf16 (round to nearest even). */
static __device__ __forceinline__ void kcu_store(char *p, int dtype, float v)
{
	if (dtype == PPRPC_F16)
		*(uint16_t *)p = kcu_f16_encode(v);
	else if (dtype == PPRPC_BF16)
		*(uint16_t *)p = kcu_bf16_encode(v);
	else
		*(float *)p = v;
}

/* Element dtype -> bytes for the plain types. */
static inline int kcu_esize(int dtype)
{
	return dtype == PPRPC_F32 || dtype == PPRPC_I32 ? 4 : 2;
}

/* Q8_0 (kernels/quant.h, ggml's block_q8_0; that header is C-only): per 32
 * elements an f16 scale d at byte 0, then 32 int8 quants; value f32(d) * q. */
#define KCU_Q8_BLCK 32
#define KCU_Q8_BYTES 34

/* ---- launches ------------------------------------------------------------ */

#define KCU_THREADS 256
/* Grid-stride loops cover the rest: the grid never needs more blocks. */
#define KCU_MAX_BLOCKS (1 << 20)

static inline unsigned kcu_blocks(int64_t n, int threads)
{
	int64_t b = (n + threads - 1) / threads;

	return (unsigned)(b < 1 ? 1 : b > KCU_MAX_BLOCKS ? KCU_MAX_BLOCKS : b);
}

static inline cudaStream_t kcu_stream(const struct kern_cuda_ctx *ctx)
{
	return (cudaStream_t)ctx->stream;
}

/* cudaError_t -> PPRPC_EDEVICE, keeping CUDA's text (CONVENTIONS: foreign
 * errors are converted once, at the boundary). */
static inline int kcu_err(cudaError_t e, const char *what, char *err, size_t errlen)
{
	if (e == cudaSuccess)
		return 0;
	return kern_errf(err, errlen, PPRPC_EDEVICE, "%s: %s (%s)", what, cudaGetErrorString(e),
			 cudaGetErrorName(e));
}

/* After a launch: configuration errors show up here. */
static inline int kcu_launched(const char *what, char *err, size_t errlen)
{
	return kcu_err(cudaGetLastError(), what, err, errlen);
}

/* Sequential carving of the workspace, 256-byte aligned pieces. */
struct kcu_arena {
	char *p;
	size_t left;
};

#define KCU_WS_ALIGN 256

static inline size_t kcu_ws_round(size_t n)
{
	return (n + KCU_WS_ALIGN - 1) / KCU_WS_ALIGN * KCU_WS_ALIGN;
}

static inline void *kcu_take(struct kcu_arena *a, size_t n)
{
	void *p;

	n = kcu_ws_round(n);
	if (n > a->left)
		return NULL;
	p = a->p;
	a->p += n;
	a->left -= n;
	return p;
}

/* ---- per-op entry points (one per op, in the dispatch table) ----------- */

typedef int (*kcu_fn)(const struct kern_cuda_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, struct kern_tensor *dst, char *err,
		      size_t errlen);

#define KCU_DECL(name)                                                                    \
	int kcu_##name(const struct kern_cuda_ctx *ctx, const struct pprpc_op_params *p,  \
		       struct kern_tensor *const *src, struct kern_tensor *dst, char *err, \
		       size_t errlen)

KCU_DECL(add);
KCU_DECL(mul);
KCU_DECL(scale);
KCU_DECL(cpy);
KCU_DECL(concat);
KCU_DECL(mul_mat);
KCU_DECL(get_rows);
KCU_DECL(set_rows);
KCU_DECL(rms_norm);
KCU_DECL(l2_norm);
KCU_DECL(silu);
KCU_DECL(sigmoid);
KCU_DECL(softplus);
KCU_DECL(exp);
KCU_DECL(gelu);
KCU_DECL(swiglu);
KCU_DECL(softmax);
KCU_DECL(argmax);
KCU_DECL(rope);
KCU_DECL(attention);
KCU_DECL(gated_delta_net);

/* Workspace needs (bytes) of the ops that have any. */
size_t kcu_mul_mat_ws(struct kern_tensor *const *src, const struct kern_tensor *dst);
size_t kcu_rows_ws(void);

/* Q8_0 MUL_MAT (cuda_q8_0.cu), called by kcu_mul_mat. */
int kcu_mul_mat_q8_0(const struct kern_cuda_ctx *ctx, struct kern_tensor *const *src,
		     struct kern_tensor *dst, char *err, size_t errlen);
size_t kcu_mul_mat_q8_0_ws(struct kern_tensor *const *src);

/* Pack a strided f32|f16|bf16 tensor into a contiguous one of dtype ddt
 * at out, converting (cuda_mul_mat.cu; MUL_MAT's operand preparation). */
int kcu_pack(const struct kern_cuda_ctx *ctx, const struct kern_tensor *t, int ddt, void *out,
	     char *err, size_t errlen);

/* One GEMM batch in cuBLAS's column-major terms, C[N, M] (ldc) =
 * A[K, N]^T (lda) * B[K, M] (ldb), batch matrices apart by the strides
 * (elements); A and B of dtype ab (f32|f16|bf16), C f32, f32 compute
 * (cuda_mul_mat.cu). */
struct kcu_gemm {
	int ab;
	int64_t N, M, K, lda, ldb, ldc;
	const void *A, *B;
	float *C;
	int64_t sA, sB, sC, batch;
};
int kcu_gemm_run(const struct kern_cuda_ctx *ctx, const struct kcu_gemm *g, char *err,
		 size_t errlen);

/* Each file's kernels, touched once (cudaFuncGetAttributes loads them). */
typedef int (*kcu_preload_fn)(char *err, size_t errlen);
int kcu_binary_preload(char *err, size_t errlen);
int kcu_copy_preload(char *err, size_t errlen);
int kcu_unary_preload(char *err, size_t errlen);
int kcu_norm_preload(char *err, size_t errlen);
int kcu_softmax_preload(char *err, size_t errlen);
int kcu_argmax_preload(char *err, size_t errlen);
int kcu_rows_preload(char *err, size_t errlen);
int kcu_rope_preload(char *err, size_t errlen);
int kcu_attention_preload(char *err, size_t errlen);
int kcu_gdn_preload(char *err, size_t errlen);
int kcu_gdn_gate_preload(char *err, size_t errlen);
int kcu_mul_mat_preload(char *err, size_t errlen);
int kcu_q8_0_preload(char *err, size_t errlen);
int kcu_index_check_preload(char *err, size_t errlen);

/* Touch one kernel. */
template <typename F>
static inline int kcu_touch(F *fn, const char *name, char *err, size_t errlen)
{
	cudaFuncAttributes a;

	return kcu_err(cudaFuncGetAttributes(&a, (const void *)fn), name, err, errlen);
}

#endif

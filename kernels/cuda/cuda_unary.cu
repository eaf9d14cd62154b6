/*
 * kernels/cuda/cuda_unary.cu — elementwise f32 functions: SILU, SIGMOID,
 * SOFTPLUS, EXP, GELU and SWIGLU (silu(src0) * src1).
 *
 * Same formulas as kernels/cpu/cpu_unary.c (no overflow for any finite x,
 * GELU through sigmoid(2u)), with CUDA's expf/log1pf (within 2 ulp; no fast
 * math).  One thread per element, read before its own slot is written, so
 * in place on the same bytes is safe.
 */
#include "kernels/cuda/cuda_impl.cuh"

#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

enum { U_SILU, U_SIGMOID, U_SOFTPLUS, U_EXP, U_GELU, U_SWIGLU };

static __device__ __forceinline__ float sigmoid_f(float x)
{
	float e = expf(-fabsf(x));

	return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

template <int FN>
static __device__ __forceinline__ float apply(float x)
{
	if constexpr (FN == U_SILU || FN == U_SWIGLU)
		return x * sigmoid_f(x);
	else if constexpr (FN == U_SIGMOID)
		return sigmoid_f(x);
	else if constexpr (FN == U_SOFTPLUS)
		return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f);
	else if constexpr (FN == U_EXP)
		return expf(x);
	else
		return x * sigmoid_f(2.0f * SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x));
}

template <int FN>
__global__ void k_unary(kcu_t a, kcu_t b, float *d, int64_t n, bool small)
{
	KCU_FOR(l, n) {
		int64_t i[4];
		float y;

		kcu_unravel(a.ne, l, i, small);
		y = apply<FN>(*(const float *)kcu_at(a, i[0], i[1], i[2], i[3]));
		if constexpr (FN == U_SWIGLU)
			y *= *(const float *)kcu_at(b, i[0], i[1], i[2], i[3]);
		d[l] = y;
	}
}

template <int FN>
static int run(const struct kern_cuda_ctx *ctx, struct kern_tensor *const *src,
	       struct kern_tensor *dst, const char *name, char *err, size_t errlen)
{
	int64_t n = kern_tensor_nelements(src[0]);
	kcu_t a = kcu_view(src[0]);

	k_unary<FN><<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		a, FN == U_SWIGLU ? kcu_view(src[1]) : a, (float *)dst->data, n, kcu_small(n));
	return kcu_launched(name, err, errlen);
}

KCU_DECL(silu)
{
	(void)p;
	return run<U_SILU>(ctx, src, dst, "SILU", err, errlen);
}

KCU_DECL(sigmoid)
{
	(void)p;
	return run<U_SIGMOID>(ctx, src, dst, "SIGMOID", err, errlen);
}

KCU_DECL(softplus)
{
	(void)p;
	return run<U_SOFTPLUS>(ctx, src, dst, "SOFTPLUS", err, errlen);
}

KCU_DECL(exp)
{
	(void)p;
	return run<U_EXP>(ctx, src, dst, "EXP", err, errlen);
}

KCU_DECL(gelu)
{
	(void)p;
	return run<U_GELU>(ctx, src, dst, "GELU", err, errlen);
}

KCU_DECL(swiglu)
{
	(void)p;
	return run<U_SWIGLU>(ctx, src, dst, "SWIGLU", err, errlen);
}

int kcu_unary_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_unary<U_SILU>, "SILU", err, errlen);

	if (!rc)
		rc = kcu_touch(k_unary<U_SIGMOID>, "SIGMOID", err, errlen);
	if (!rc)
		rc = kcu_touch(k_unary<U_SOFTPLUS>, "SOFTPLUS", err, errlen);
	if (!rc)
		rc = kcu_touch(k_unary<U_EXP>, "EXP", err, errlen);
	if (!rc)
		rc = kcu_touch(k_unary<U_GELU>, "GELU", err, errlen);
	if (!rc)
		rc = kcu_touch(k_unary<U_SWIGLU>, "SWIGLU", err, errlen);
	return rc;
}

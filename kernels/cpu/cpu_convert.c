/*
 * kernels/cpu/cpu_convert.c — strided element runs between f32, f16 and
 * bf16: the one place that knows how to load and store each float type.
 * CPY, the broadcast operand of ADD/MUL and the MUL_MAT packing use it.
 */
#include "kernels/cpu/cpu_impl.h"
#include "kernels/fp16_impl.h"

#include <string.h>

static inline float ld_f32(const char *p) { return *(const float *)p; }
static inline float ld_f16(const char *p) { return fp16_decode(*(const uint16_t *)p); }
static inline float ld_bf16(const char *p) { return bf16_decode(*(const uint16_t *)p); }
static inline void st_f32(char *p, float v) { *(float *)p = v; }
static inline void st_f16(char *p, float v) { *(uint16_t *)p = fp16_encode(v); }
static inline void st_bf16(char *p, float v) { *(uint16_t *)p = bf16_encode(v); }

#define CVT(S, D)                                                                    \
	static void cvt_##S##_##D(void *dst, uint64_t dnb, const void *src, uint64_t snb, \
				  int64_t n)                                         \
	{                                                                            \
		char *d = dst;                                                       \
		const char *s = src;                                                 \
		for (int64_t i = 0; i < n; i++)                                      \
			st_##D(d + (uint64_t)i * dnb, ld_##S(s + (uint64_t)i * snb)); \
	}
CVT(f32, f16)
CVT(f32, bf16)
CVT(f16, f32)
CVT(f16, bf16)
CVT(bf16, f32)
CVT(bf16, f16)
#undef CVT

/* Same type: move bits, so NaN payloads and signalling NaNs are kept. */
#define COPY(NAME, T)                                                                \
	static void NAME(void *dst, uint64_t dnb, const void *src, uint64_t snb,     \
			 int64_t n)                                                  \
	{                                                                            \
		char *d = dst;                                                       \
		const char *s = src;                                                 \
		if (dnb == sizeof(T) && snb == sizeof(T)) {                          \
			if (d != s)                                                  \
				memcpy(d, s, (size_t)n * sizeof(T));                 \
			return;                                                      \
		}                                                                    \
		for (int64_t i = 0; i < n; i++)                                      \
			*(T *)(d + (uint64_t)i * dnb) = *(const T *)(s + (uint64_t)i * snb); \
	}
COPY(copy32, uint32_t)
COPY(copy16, uint16_t)
#undef COPY

_Static_assert(PPRPC_F32 == 0 && PPRPC_F16 == 1 && PPRPC_BF16 == 2,
	       "cvt_table is indexed by the float dtypes");

static const kern_cpu_cvt_fn cvt_table[3][3] = {
	[PPRPC_F32] = { [PPRPC_F32] = copy32, [PPRPC_F16] = cvt_f32_f16,
			[PPRPC_BF16] = cvt_f32_bf16 },
	[PPRPC_F16] = { [PPRPC_F32] = cvt_f16_f32, [PPRPC_F16] = copy16,
			[PPRPC_BF16] = cvt_f16_bf16 },
	[PPRPC_BF16] = { [PPRPC_F32] = cvt_bf16_f32, [PPRPC_F16] = cvt_bf16_f16,
			 [PPRPC_BF16] = copy16 },
};

kern_cpu_cvt_fn kern_cpu_cvt(int src_dtype, int dst_dtype)
{
	if (src_dtype < 0 || src_dtype > PPRPC_BF16 || dst_dtype < 0 || dst_dtype > PPRPC_BF16)
		return NULL;
	return cvt_table[src_dtype][dst_dtype];
}

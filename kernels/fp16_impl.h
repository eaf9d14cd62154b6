/*
 * kernels/fp16_impl.h — IEEE binary16 and bfloat16 conversions, inline.
 *
 * Internal to kernels/: the CPU kernels convert element by element in their
 * inner loops, where a call into another file per element would dominate.
 * The public kern_f16_to_f32() and friends (fp16.c) wrap these.
 *
 * Done in integer arithmetic rather than with _Float16 or F16C so results are
 * bit-identical on every host and compiler: the CUDA build is compared with
 * this one element by element.  Narrowing rounds to nearest, ties to even.
 */
#ifndef PPRPC_KERNELS_FP16_IMPL_H
#define PPRPC_KERNELS_FP16_IMPL_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fp16_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float fp16_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline float fp16_decode(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;

	if (exp == 0x1f)  /* inf, or NaN with its payload kept */
		return fp16_bits_f32(sign | 0x7f800000 | (mant << 13));
	if (exp != 0)
		return fp16_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
	if (mant == 0)
		return fp16_bits_f32(sign);
	/* Subnormal: normalise; every f16 subnormal is an f32 normal. */
	exp = 113;
	while (!(mant & 0x400)) {
		mant <<= 1;
		exp--;
	}
	return fp16_bits_f32(sign | (exp << 23) | ((mant & 0x3ff) << 13));
}

static inline uint16_t fp16_encode(float f)
{
	uint32_t x = fp16_f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	uint32_t e, m, shift, r, rem, half;

	if (ax > 0x7f800000)  /* NaN: quiet it, keep the top payload bits */
		return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
	/* 65520 is halfway between 65504 (odd mantissa) and 2^16: ties go up. */
	if (ax >= 0x477ff000)
		return sign | 0x7c00;
	if (ax >= 0x38800000) {  /* result is an f16 normal */
		ax += 0xfff + ((ax >> 13) & 1);
		return sign | (uint16_t)((ax - 0x38000000) >> 13);
	}
	e = ax >> 23;
	if (e < 102)  /* below 2^-25: rounds to zero */
		return sign;
	/* Subnormal result in units of 2^-24; a carry out of the mantissa
	 * correctly produces the smallest normal. */
	m = (ax & 0x7fffff) | 0x800000;
	shift = 126 - e;
	r = m >> shift;
	rem = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1)))
		r++;
	return sign | (uint16_t)r;
}

static inline float bf16_decode(uint16_t h)
{
	return fp16_bits_f32((uint32_t)h << 16);
}

static inline uint16_t bf16_encode(float f)
{
	uint32_t x = fp16_f32_bits(f);

	/* Rounding could carry a NaN with a low-only payload into inf; force
	 * the quiet bit instead. */
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

#endif

/*
 * kernels/fp16.c — the public half-precision conversions (see fp16_impl.h).
 */
#include "kernels/tensor.h"
#include "kernels/fp16_impl.h"

float kern_f16_to_f32(uint16_t h)
{
	return fp16_decode(h);
}

uint16_t kern_f32_to_f16(float f)
{
	return fp16_encode(f);
}

float kern_bf16_to_f32(uint16_t h)
{
	return bf16_decode(h);
}

uint16_t kern_f32_to_bf16(float f)
{
	return bf16_encode(f);
}

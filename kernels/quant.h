/*
 * kernels/quant.h — Q8_0 blocks: producing them (tools, tests) and reading
 * them back.  Layout is ggml's block_q8_0, so weights quantized by ggml
 * tools load unchanged: per 32 elements one f16 scale d, then 32 int8
 * quants q, value = d * q.
 */
#ifndef PPRPC_KERNELS_QUANT_H
#define PPRPC_KERNELS_QUANT_H

#include <stdint.h>

#include "pprpc/types.h"

#define KERN_Q8_0_BLCK 32

struct kern_q8_0_block {
	uint16_t d;                   /* f16 scale */
	int8_t qs[KERN_Q8_0_BLCK];
};
_Static_assert(sizeof(struct kern_q8_0_block) == 34, "Q8_0 block is 34 bytes, ggml's layout");

/* Quantize k floats (k a multiple of 32) into k/32 blocks at dst, like
 * ggml's quantize_row_q8_0_ref: per block d = amax / 127, q = round(x / d)
 * (round half away from zero; x computed as x * (1/d) with the unrounded
 * d, as ggml does), d stored as f16.
 * Returns 0, or PPRPC_EINVAL when k is not a positive multiple of 32 or an
 * input is not finite, or PPRPC_ERANGE when a block's scale does not fit
 * f16 (amax > ~8.3e6); nothing is written on failure. */
int kern_q8_0_quantize_row(const float *x, void *dst, int64_t k);

/* Expand k elements (k a multiple of 32) of blocks at src into y.  Each
 * value is f32(d) * q, exact in f32 (an 11-bit mantissa times an 8-bit
 * integer). */
void kern_q8_0_dequantize_row(const void *src, float *y, int64_t k);

#endif

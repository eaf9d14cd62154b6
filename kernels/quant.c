/*
 * kernels/quant.c — Q8_0 quantization and dequantization of rows.
 */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "kernels/fp16_impl.h"

#define Q8_MAX 127

/* The block's scale as stored, or 0x7c00 (inf) when it does not fit. */
static uint16_t block_scale(const float *x, float *ret_d)
{
	float amax = 0.0f, d;

	for (int j = 0; j < KERN_Q8_0_BLCK; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	d = amax / Q8_MAX;
	*ret_d = d;
	return fp16_encode(d);
}

int kern_q8_0_quantize_row(const float *x, void *dst, int64_t k)
{
	struct kern_q8_0_block *y = dst;
	int64_t nb;

	if (!x || !dst || k <= 0 || k % KERN_Q8_0_BLCK != 0)
		return PPRPC_EINVAL;
	nb = k / KERN_Q8_0_BLCK;
	/* Check everything first: the output is written only on success. */
	for (int64_t i = 0; i < k; i++)
		if (!isfinite(x[i]))
			return PPRPC_EINVAL;
	for (int64_t b = 0; b < nb; b++) {
		float d;

		if ((block_scale(x + b * KERN_Q8_0_BLCK, &d) & 0x7c00) == 0x7c00)
			return PPRPC_ERANGE;
	}
	for (int64_t b = 0; b < nb; b++) {
		const float *xb = x + b * KERN_Q8_0_BLCK;
		struct kern_q8_0_block blk;
		float d, id;

		blk.d = block_scale(xb, &d);
		id = d != 0.0f ? 1.0f / d : 0.0f;
		for (int j = 0; j < KERN_Q8_0_BLCK; j++) {
			/* |x * id| <= 127 up to a rounding; clamp so the int8
			 * conversion is always defined. */
			float q = roundf(xb[j] * id);

			q = fminf(fmaxf(q, -Q8_MAX), Q8_MAX);
			blk.qs[j] = (int8_t)q;
		}
		memcpy(&y[b], &blk, sizeof(blk));
	}
	return 0;
}

void kern_q8_0_dequantize_row(const void *src, float *y, int64_t k)
{
	const struct kern_q8_0_block *x = src;

	for (int64_t b = 0; b < k / KERN_Q8_0_BLCK; b++) {
		float d = fp16_decode(x[b].d);

		for (int j = 0; j < KERN_Q8_0_BLCK; j++)
			y[b * KERN_Q8_0_BLCK + j] = d * (float)x[b].qs[j];
	}
}

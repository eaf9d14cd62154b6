/*
 * tests/unit/ref.h — helpers for kernel tests: build tensors with chosen
 * layouts (contiguous, permuted, padded), read and write elements by logical
 * index as double, and fill them with reproducible values.
 *
 * Everything is static: each unit test is its own program.
 */
#ifndef PPRPC_TESTS_REF_H
#define PPRPC_TESTS_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tensor.h"

/* Strides for a layout where logical dim order[0] is innermost in memory,
 * then order[1], ...; gap multiplies the element stride (gap > 1 leaves holes
 * between elements) and pad adds elements at the end of each innermost run. */
static inline void ref_strides(int dtype, const int64_t ne[4], const int order[4],
			       uint64_t gap, uint64_t pad, uint64_t nb[4])
{
	const struct kern_dtype_traits *tr = kern_dtype(dtype);
	uint64_t s = tr->type_size * gap;

	for (int k = 0; k < 4; k++) {
		int d = order[k];
		uint64_t n = (uint64_t)ne[d] / (d == 0 ? tr->blck : 1);

		nb[d] = s;
		s *= n;
		if (k == 0)
			s += pad * tr->type_size * gap;
	}
}

/* Make t a tensor of the given layout over fresh zeroed memory (free with
 * free(t->data)).  Returns nonzero when the descriptor is not valid. */
static inline int ref_alloc(struct kern_tensor *t, int dtype, const int64_t ne[4],
			    const int order[4], uint64_t gap, uint64_t pad)
{
	static const int ident[4] = { 0, 1, 2, 3 };
	uint64_t ext;

	memset(t, 0, sizeof(*t));
	t->dtype = dtype;
	memcpy(t->ne, ne, sizeof(t->ne));
	ref_strides(dtype, ne, order ? order : ident, gap ? gap : 1, pad, t->nb);
	if (kern_tensor_check(t) != 0 || kern_tensor_extent(t, &ext) != 0)
		return -1;
	t->data = calloc(1, (size_t)ext);
	return t->data ? 0 : -1;
}

static inline void *ref_ptr(const struct kern_tensor *t, int64_t i0, int64_t i1,
			    int64_t i2, int64_t i3)
{
	return (char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
	       i3 * t->nb[3];
}

static inline double ref_get(const struct kern_tensor *t, int64_t i0, int64_t i1,
			     int64_t i2, int64_t i3)
{
	void *p = ref_ptr(t, i0, i1, i2, i3);
	uint16_t h;
	float f;

	switch (t->dtype) {
	case PPRPC_F16:
		memcpy(&h, p, 2);
		return kern_f16_to_f32(h);
	case PPRPC_BF16:
		memcpy(&h, p, 2);
		return kern_bf16_to_f32(h);
	default:
		memcpy(&f, p, 4);
		return f;
	}
}

static inline void ref_set(const struct kern_tensor *t, int64_t i0, int64_t i1, int64_t i2,
			   int64_t i3, double v)
{
	void *p = ref_ptr(t, i0, i1, i2, i3);
	uint16_t h;
	float f = (float)v;

	switch (t->dtype) {
	case PPRPC_F16:
		h = kern_f32_to_f16(f);
		memcpy(p, &h, 2);
		break;
	case PPRPC_BF16:
		h = kern_f32_to_bf16(f);
		memcpy(p, &h, 2);
		break;
	default:
		memcpy(p, &f, 4);
		break;
	}
}

/* Linear index -> multi-index in ne order. */
static inline void ref_unravel(const int64_t ne[4], int64_t lin, int64_t i[4])
{
	for (int k = 0; k < 4; k++) {
		i[k] = lin % ne[k];
		lin /= ne[k];
	}
}

/* Reproducible values in [-1, 1): a 64-bit LCG, good enough for test data. */
static inline double ref_rand(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*state >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* Uniform in [lo, hi) from seed. */
static inline void ref_fill_range(const struct kern_tensor *t, uint64_t seed, double lo, double hi)
{
	int64_t n = kern_tensor_nelements(t), i[4];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(t->ne, l, i);
		ref_set(t, i[0], i[1], i[2], i[3], lo + (hi - lo) * 0.5 * (ref_rand(&seed) + 1.0));
	}
}

/* Unit-length rows (dim 0), as a model's own L2 norm would leave k. */
static inline void ref_normalise_rows(const struct kern_tensor *t)
{
	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
				double s = 0;

				for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
					s += pow(ref_get(t, i0, i1, i2, i3), 2);
				s = sqrt(s);
				for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
					ref_set(t, i0, i1, i2, i3, ref_get(t, i0, i1, i2, i3) / s);
			}
}

/* Uniform in [-1, 1) from seed. */
static inline void ref_fill(const struct kern_tensor *t, uint64_t seed)
{
	int64_t n = kern_tensor_nelements(t), i[4];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(t->ne, l, i);
		ref_set(t, i[0], i[1], i[2], i[3], ref_rand(&seed));
	}
}

/* Mark every element "not written": NaN, or INT32_MAX for i32, so an
 * element a kernel forgets to write is caught by the comparison. */
static inline void ref_poison(const struct kern_tensor *t)
{
	int64_t n = kern_tensor_nelements(t), i[4];

	for (int64_t l = 0; l < n; l++) {
		ref_unravel(t->ne, l, i);
		if (t->dtype == PPRPC_I32)
			*(int32_t *)ref_ptr(t, i[0], i[1], i[2], i[3]) = INT32_MAX;
		else
			ref_set(t, i[0], i[1], i[2], i[3], NAN);
	}
}

#endif

/*
 * kernels/tensor.c — dtype table and overflow-checked descriptor arithmetic.
 *
 * Descriptors come from the network, so every product and sum here is done
 * with __builtin_*_overflow: a wrapped extent would let a view address bytes
 * outside its buffer after the region check had passed.
 */
#include "kernels/tensor.h"

#include <string.h>

static const struct kern_dtype_traits dtypes[PPRPC_DTYPE_COUNT] = {
	[PPRPC_F32]  = { .name = "f32",  .blck = 1,  .type_size = 4 },
	[PPRPC_F16]  = { .name = "f16",  .blck = 1,  .type_size = 2 },
	[PPRPC_BF16] = { .name = "bf16", .blck = 1,  .type_size = 2 },
	[PPRPC_I32]  = { .name = "i32",  .blck = 1,  .type_size = 4 },
	/* 32 int8 quants plus one f16 scale per block. */
	[PPRPC_Q8_0] = { .name = "q8_0", .blck = 32, .type_size = 34 },
};

const struct kern_dtype_traits *kern_dtype(int dtype)
{
	if (dtype < 0 || dtype >= PPRPC_DTYPE_COUNT)
		return NULL;
	return &dtypes[dtype];
}

/* Shape part of the check, shared by init_contig and check. */
static int check_shape(const struct kern_dtype_traits *tr, const int64_t ne[PPRPC_MAX_DIMS])
{
	int64_t n = 1;

	for (int i = 0; i < PPRPC_MAX_DIMS; i++) {
		if (ne[i] < 1)
			return PPRPC_EINVAL;
		if (__builtin_mul_overflow(n, ne[i], &n) || n > KERN_MAX_ELEMENTS)
			return PPRPC_ETOOBIG;
	}
	if (ne[0] % tr->blck != 0)
		return PPRPC_EINVAL;
	return 0;
}

int kern_tensor_init_contig(struct kern_tensor *t, int dtype, const int64_t ne[PPRPC_MAX_DIMS])
{
	const struct kern_dtype_traits *tr = kern_dtype(dtype);
	struct kern_tensor tmp;
	int rc;

	if (!t || !ne || !tr)
		return PPRPC_EINVAL;
	rc = check_shape(tr, ne);
	if (rc < 0)
		return rc;

	memset(&tmp, 0, sizeof(tmp));
	tmp.dtype = dtype;
	memcpy(tmp.ne, ne, sizeof(tmp.ne));
	tmp.nb[0] = tr->type_size;
	if (__builtin_mul_overflow(tmp.nb[0], (uint64_t)ne[0] / tr->blck, &tmp.nb[1]))
		return PPRPC_ETOOBIG;
	for (int i = 2; i < PPRPC_MAX_DIMS; i++)
		if (__builtin_mul_overflow(tmp.nb[i - 1], (uint64_t)ne[i - 1], &tmp.nb[i]))
			return PPRPC_ETOOBIG;
	/* The size itself (nb[3] * ne[3]) must fit as well. */
	rc = kern_tensor_check(&tmp);
	if (rc < 0)
		return rc;
	*t = tmp;
	return 0;
}

int kern_tensor_check(const struct kern_tensor *t)
{
	const struct kern_dtype_traits *tr;
	uint64_t ext;
	int rc;

	if (!t)
		return PPRPC_EINVAL;
	tr = kern_dtype(t->dtype);
	if (!tr)
		return PPRPC_EINVAL;
	rc = check_shape(tr, t->ne);
	if (rc < 0)
		return rc;
	/* A block is the unit of addressing: blocks along ne[0] must be packed,
	 * and every stride must keep blocks aligned to the element size.  Zero
	 * strides are multiples too, and express broadcast views. */
	if (tr->blck > 1 && t->nb[0] != tr->type_size)
		return PPRPC_EINVAL;
	for (int i = 0; i < PPRPC_MAX_DIMS; i++)
		if (t->nb[i] % tr->type_size != 0)
			return PPRPC_EINVAL;
	return kern_tensor_extent(t, &ext);
}

int64_t kern_tensor_nelements(const struct kern_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int kern_tensor_extent(const struct kern_tensor *t, uint64_t *out_bytes)
{
	const struct kern_dtype_traits *tr;
	uint64_t last = 0;

	if (!t || !out_bytes)
		return PPRPC_EINVAL;
	tr = kern_dtype(t->dtype);
	if (!tr)
		return PPRPC_EINVAL;
	/* Offset of the last block addressed, plus that block. */
	for (int i = 0; i < PPRPC_MAX_DIMS; i++) {
		uint64_t n, step;

		if (t->ne[i] < 1)
			return PPRPC_EINVAL;
		n = (uint64_t)t->ne[i];
		if (i == 0)
			n /= tr->blck;
		if (n == 0)
			return PPRPC_EINVAL;
		if (__builtin_mul_overflow(n - 1, t->nb[i], &step) ||
		    __builtin_add_overflow(last, step, &last))
			return PPRPC_ETOOBIG;
	}
	if (__builtin_add_overflow(last, (uint64_t)tr->type_size, &last))
		return PPRPC_ETOOBIG;
	*out_bytes = last;
	return 0;
}

bool kern_tensor_is_contiguous(const struct kern_tensor *t)
{
	const struct kern_dtype_traits *tr = t ? kern_dtype(t->dtype) : NULL;
	uint64_t expect;

	if (!tr)
		return false;
	expect = tr->type_size;
	/* A dimension of extent 1 is never stepped along, so its stride cannot
	 * open a gap and is not compared. */
	for (int i = 0; i < PPRPC_MAX_DIMS; i++) {
		uint64_t n;

		if (t->ne[i] < 1)
			return false;
		n = (uint64_t)t->ne[i];
		if (i == 0)
			n /= tr->blck;
		if (n > 1 && t->nb[i] != expect)
			return false;
		if (__builtin_mul_overflow(expect, n, &expect))
			return false;
	}
	return true;
}

bool kern_region_ok(uint64_t buf_size, uint64_t offset, uint64_t size)
{
	return offset <= buf_size && size <= buf_size - offset;
}

/*
 * kernels/tensor.h — tensor descriptors and the byte arithmetic around them.
 *
 * A tensor is a value: element type, ne[4] (elements per dimension, ne[0]
 * innermost) and nb[4] (byte strides).  Views, permutes and reshapes are only
 * different ne/nb over the same bytes.  Nothing here knows about buffers,
 * handles, sockets or protobuf; the daemon and the client add the buffer part.
 *
 * All arithmetic is overflow-checked: descriptors arrive from the network.
 */
#ifndef PPRPC_KERNELS_TENSOR_H
#define PPRPC_KERNELS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprpc/types.h"

/* Most elements one tensor may have.  Descriptors come from the network and
 * a zero-stride view can claim many elements in a few bytes; this bounds
 * the work one node can demand (2^34 elements = 64 GiB of f32). */
#define KERN_MAX_ELEMENTS (1ll << 34)

/* Byte alignment the kernels need for the tensor's first byte. */
#define KERN_ALIGN(tr) ((tr)->blck == 1 ? (tr)->type_size : 2u)

struct kern_dtype_traits {
	const char *name;
	uint32_t blck;       /* elements per block (1 for plain types) */
	uint32_t type_size;  /* bytes per block */
};

/* NULL when dtype is out of range. */
const struct kern_dtype_traits *kern_dtype(int dtype);

struct kern_tensor {
	int32_t dtype;
	int64_t ne[PPRPC_MAX_DIMS];
	uint64_t nb[PPRPC_MAX_DIMS];
	void *data;              /* set by whoever executes; NULL while validating */
};

/* Fill a contiguous descriptor (nb from ne).  Returns 0 or PPRPC_EINVAL /
 * PPRPC_ETOOBIG when the shape is invalid or its size overflows. */
int kern_tensor_init_contig(struct kern_tensor *t, int dtype, const int64_t ne[PPRPC_MAX_DIMS]);

/* Validate a descriptor as received: known dtype, ne[i] >= 1, ne[0] a
 * multiple of the block size, nb[0] == type_size for block types, strides
 * multiples of the element (block) alignment, extent fits in uint64.
 * Returns 0 or a negative PPRPC_E* code. */
int kern_tensor_check(const struct kern_tensor *t);

/* Number of elements (ne product).  Only valid after kern_tensor_check. */
int64_t kern_tensor_nelements(const struct kern_tensor *t);

/* Bytes spanned from the first byte to one past the last byte addressed
 * (the extent).  For a contiguous tensor this equals its size.  Returns 0
 * and writes *out_bytes, or PPRPC_ETOOBIG on overflow. */
int kern_tensor_extent(const struct kern_tensor *t, uint64_t *out_bytes);

/* True when the elements are packed with no gaps in ne order. */
bool kern_tensor_is_contiguous(const struct kern_tensor *t);

/* Overflow-safe region check: does [offset, offset + size) lie inside a
 * buffer of buf_size bytes?  (size > buf_size - offset, never offset+size.) */
bool kern_region_ok(uint64_t buf_size, uint64_t offset, uint64_t size);

/*
 * The overlap rule of both graph validators (the native one,
 * daemon/backend/native/, and the ggml engine's, daemon/backend/ggml/): a
 * node writes its output while it reads its sources, so an output may share
 * bytes with a source only as that source's exact memory (same first byte,
 * same type, ne and nb) and only for an op that reads each element before
 * writing it (runs in place).  Anything else would read what it already
 * overwrote.  kern_ranges_overlap: do [a, a + an) and [b, b + bn) of one
 * address space intersect (positions well below UINT64_MAX)?
 * kern_overlap_allowed: may an overlapping output stay?
 */
static inline bool kern_ranges_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

static inline bool kern_overlap_allowed(bool same_start, bool same_layout, bool inplace_ok)
{
	return same_start && same_layout && inplace_ok;
}

/* Conversions (round to nearest even for narrowing). */
float kern_f16_to_f32(uint16_t h);
uint16_t kern_f32_to_f16(float f);
float kern_bf16_to_f32(uint16_t h);
uint16_t kern_f32_to_bf16(float f);

#endif

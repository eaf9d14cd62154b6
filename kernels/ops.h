/*
 * kernels/ops.h — the op set: shape/dtype rules (shared by the client graph
 * builder and the daemon validator) and the CPU implementations.
 *
 * Conventions (ggml-like): ne[0] is the innermost dimension.
 *  ADD, MUL   src0 f32, src1 f32|f16|bf16; src1 broadcasts: src0.ne[i] %
 *             src1.ne[i] == 0 for all i.  dst f32 with src0's shape.
 *  SCALE      src0 f32; dst = src0 * f[0] + f[1]; dst f32, src0's shape.
 *  CPY        src0 f32|f16|bf16 -> dst f32|f16|bf16 (dst dtype chosen by the
 *             builder: i[0] = dst dtype).  Same element count; elements are
 *             visited in logical (ne) order on both sides, so a CPY into a
 *             contiguous dst of another shape is "make contiguous + reshape".
 *             The default output shape is src0's shape.
 *  MUL_MAT    src0 (weights) [K, N, B2, B3] f32|f16|bf16|q8_0, src1 (activations)
 *             [K, M, C2, C3] f32 with C2 % B2 == 0 and C3 % B3 == 0 (weights
 *             broadcast over batch dims); dst f32 [N, M, C2, C3].  As in
 *             ggml, src1 slice i2 uses weight slice i2 / (C2 / B2) (same
 *             for dim 3): consecutive activation slices share weights.
 *             q8_0 weights (K a multiple of 32) compute with the exact
 *             dequantized values f32(d) * q; activations are not quantized.
 *  GET_ROWS   src0 (table) [D, V, T2, T3] f32|f16|bf16|q8_0, src1 (ids) i32
 *             [n, C1, C2, 1] with T2 in {1, C1}, T3 in {1, C2}; dst f32
 *             [D, n, C1, C2]: dst[:, i, c1, c2] = src0[:, ids[i, c1, c2],
 *             c1 % T2, c2 % T3] (ggml's get_rows; a table batch dim of 1
 *             serves every slice).  An id outside [0, V) makes the run fail
 *             with PPRPC_ERANGE (ids are checked before anything is read).
 *  SET_ROWS   src0 (values) f32 [D, n, B2, B3], src1 (ids) i32 [n, C1, C2, 1]
 *             with C1 in {1, B2}, C2 in {1, B3}; i[0] = V (the table's row
 *             count, >= 1), i[1] = the table's dtype (f32|f16|bf16; 0 = f32).
 *             dst IS the table: contiguous [D, V, B2, B3] of dtype i[1],
 *             normally a buffer-backed tensor (a KV cache).  Only rows
 *             dst[:, ids[i, b2 % C1, b3 % C2], b2, b3] = src0[:, i, b2, b3]
 *             are written (rounded to the table dtype); every other row keeps
 *             its bytes, so the graph has one writer of the table and later
 *             nodes that read it see the update.  A repeated id: the last
 *             row (highest i) wins.  An id outside [0, V): PPRPC_ERANGE and
 *             nothing is written (all ids are checked first).
 *  CONCAT     src0, src1 of one dtype f32|f16|bf16, equal ne except along
 *             dim i[0] (0..3); dst of that dtype, ne[i[0]] = the sum, src0
 *             first.  Elements are copied bit-exactly.
 *  RMS_NORM   src0 f32; dst f32 = x / sqrt(mean(x^2 over ne[0]) + f[0]).
 *  L2_NORM    src0 f32; dst f32 = x / max(sqrt(sum(x^2 over ne[0])), f[0])
 *             (ggml's l2_norm).  For both norms f[0] = eps must be finite
 *             and >= 0; the sum of squares is accumulated in double.
 *  SILU       x * sigmoid(x).       SIGMOID  1 / (1 + exp(-x)).
 *  SOFTPLUS   log(1 + exp(x)), computed as log1p(exp(-|x|)) + max(x, 0).
 *  EXP        exp(x).
 *  GELU       ggml's tanh approximation 0.5 x (1 + tanh(c (x + a x^3))) with
 *             the f32 constants a = 0.044715f, c = 0.7978845608f (sqrt(2/pi)),
 *             evaluated through the identity 0.5 (1 + tanh(u)) = sigmoid(2u)
 *             (no cancellation for negative x).
 *  SWIGLU     src0, src1 f32 of equal ne; dst = silu(src0) * src1.
 *             All of the above (RMS_NORM..SWIGLU): f32 sources with any
 *             strides, dst f32 contiguous of src0's shape; sigmoid-based ops
 *             are evaluated without overflow for any finite x.
 *  SOFTMAX    src0 f32 [n_kv, n_q, B2, B3]; dst f32 of the same shape,
 *             softmax over ne[0] of f[0] * x (f[0] = scale, finite, applied
 *             literally: pass 1 for a plain softmax).  i[0] = 1: causal mask,
 *             row j (ne[1] index) sees keys k <= j + i[1] where i[1] >= 0 is
 *             the number of cached positions before the first query (query j
 *             is at absolute position i[1] + j); masked entries are exactly 0.
 *             i[0] = 0 requires i[1] = 0.  Max-subtracted; key 0 is always
 *             visible, so no row is fully masked.
 *  ARGMAX     src0 f32 [n, R1, R2, R3]; dst i32 [R1, R2, R3, 1] (one index
 *             per row, directly usable as GET_ROWS ids): index of the largest
 *             value; ties give the lowest index; NaNs are ignored, a row of
 *             only NaNs gives 0.  n must fit in an i32.
 *
 * Every op accepts sources with arbitrary (checked) strides.  The destination
 * of every op must be contiguous except CPY, whose destination may be any
 * valid view.
 *
 * Errors at run time (kern_cpu_run) beyond argument checks: GET_ROWS and
 * SET_ROWS return PPRPC_ERANGE for an index outside the table.
 */
#ifndef PPRPC_KERNELS_OPS_H
#define PPRPC_KERNELS_OPS_H

#include "kernels/tensor.h"

/* Number of sources an op takes; -1 for an unknown op. */
int kern_op_nsrc(int op);
/* Name for logs and errors ("ADD"); "?" for an unknown op. */
const char *kern_op_name(int op);

/* Shape rules.  Given the sources (descriptors already passed
 * kern_tensor_check), compute the destination descriptor the op produces
 * (contiguous, in *out).  Returns 0 or PPRPC_ESHAPE / PPRPC_ETYPE /
 * PPRPC_EINVAL, with a human-readable reason written to err (may be NULL). */
int kern_op_infer(int op, const struct pprpc_op_params *p,
		  const struct kern_tensor *const *src, int nsrc,
		  struct kern_tensor *out, char *err, size_t errlen);

/* Check that a given destination is acceptable for the op: same dtype and
 * ne as kern_op_infer's result; contiguous unless the op allows views (CPY,
 * where only the element count and dtype must match).  Returns as above. */
int kern_op_check_dst(int op, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src, int nsrc,
		      const struct kern_tensor *dst, char *err, size_t errlen);

/* CPU execution context: threads the kernels may use. */
struct kern_cpu_ctx {
	int nthreads;  /* >= 1 */
};

/* Run one op on the CPU.  Descriptors must have passed kern_op_check_dst and
 * their data pointers must address valid memory of their extents.  The
 * destination may not overlap a source unless it is exactly the same bytes
 * (elementwise ops in place).  Returns 0 or a negative code. */
int kern_cpu_run(const struct kern_cpu_ctx *ctx, int op, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, int nsrc, struct kern_tensor *dst);

#endif

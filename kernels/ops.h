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
 *  MUL_MAT    src0 (weights) [K, N, B2, B3] f32|f16|bf16, src1 (activations)
 *             [K, M, C2, C3] f32 with C2 % B2 == 0 and C3 % B3 == 0 (weights
 *             broadcast over batch dims); dst f32 [N, M, C2, C3].  As in
 *             ggml, src1 slice i2 uses weight slice i2 / (C2 / B2) (same
 *             for dim 3): consecutive activation slices share weights.
 *  ROPE       src0 x f32 [head_dim, n_head, n_tok, 1], src1 positions i32
 *             [n_tok]; i[0] mode (PPRPC_ROPE_NORMAL 0: pairs (x[2i],
 *             x[2i+1]); PPRPC_ROPE_NEOX 2: pairs (x[i], x[i + n_dims/2])),
 *             i[1] n_dims (even, 2 <= n_dims <= head_dim; elements from
 *             n_dims on are copied), f[0] freq_base > 0, f[1] freq_scale > 0
 *             (linear position scaling).  Pair i of token t is rotated by
 *             theta = pos[t] * freq_scale * freq_base^(-2i/n_dims):
 *             (a, b) -> (a cos - b sin, a sin + b cos), as ggml.  theta and
 *             its sine/cosine are evaluated in double.  dst f32, x's shape.
 *  ATTENTION  causal softmax(q k^T * scale) v over a KV cache.  src0 q f32
 *             [D, n_head, n_q, 1], src1 k and src2 v [D, n_kv_head, n_kv, 1],
 *             both f32 or both f16 (typically views of the first n_kv
 *             positions of a larger cache); f[0] scale (finite, > 0), i[0]
 *             n_past >= 0 with n_past + n_q <= n_kv.  Query j (position
 *             n_past + j) attends keys 0 ..= n_past + j; keys from n_past +
 *             n_q on are never read.  GQA: n_head % n_kv_head == 0, query
 *             head h uses kv head h / (n_head / n_kv_head).  dst f32
 *             [D, n_head, n_q, 1] (viewable as [D * n_head, n_q]).
 *
 * Every op accepts sources with arbitrary (checked) strides.  The destination
 * of every op must be contiguous except CPY, whose destination may be any
 * valid view.
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

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
 *  GATED_DELTA_NET  gated delta rule, defined by its recurrence (Gated DeltaNet
 *             with one gate per head, or Kimi Delta Attention with one gate
 *             per key channel).  Six f32 sources, any strides (q/k/v/g/beta
 *             are usually views of one fused projection output):
 *               src0 q     [d_k, H_k, T, B]
 *               src1 k     [d_k, H_k, T, B]
 *               src2 v     [d_v, H_v, T, B]      H_v % H_k == 0
 *               src3 g     [G,   H_v, T, B]      G = 1 (GDN) or d_k (KDA);
 *                                                log-space decay, <= 0
 *               src4 beta  [1,   H_v, T, B]
 *               src5 state [d_k, d_v, H_v, B]    S0, element (i, j) = S[i][j]
 *             T tokens of B independent sequences.  Value head h reads q/k
 *             head hk(h) = h / (H_v / H_k) (consecutive value heads share a
 *             q/k head, as MUL_MAT's broadcast), or with i[3] = 1
 *             hk(h) = h % H_k (the q/k heads repeat as a block: ggml's
 *             ggml_gated_delta_net and ggml_repeat order).  Per (b, h), for
 *             t = 0..T-1:
 *               q, k  <- q/k[:, hk(h), t, b], L2-normalised if i[0]
 *               D     = diag(exp(min(g[:, h, t, b], 0)))  (G = 1: exp(g) * I)
 *               S'    = D S                     (S is d_k x d_v)
 *               u     = beta[0, h, t, b] * (v[:, h, t, b] - S'^T k)
 *               S     = S' + k u^T
 *               o[:, h, t, b] = f[0] * S^T q
 *             A gate g > 0 is treated as 0 (decay factor exactly 1): in a
 *             model g = -exp(A) * softplus(.) is <= 0, so a positive gate is
 *             a bug or hostile input, and clamping keeps the kernel total
 *             (exp never overflows) without a run-time failure a GPU kernel
 *             could not report mid-graph.  NaN gates propagate as NaN.
 *             Params: f[0] = scale, finite and nonzero (no implicit
 *             1/sqrt(d_k): the caller passes it).  i[0] = 1: L2-normalise q
 *             and k per head inside the op as ggml's L2_NORM does,
 *             x / max(||x||_2, f[1]), with f[1] = eps finite and > 0
 *             (1e-6 for Qwen3-Next); i[0] = 0: q and k are used as given and
 *             f[1] must be 0.
 *             i[3] = head broadcast: 0 = h / (H_v/H_k), 1 = h % H_k (above);
 *             other values PPRPC_EINVAL.
 *             dst: ONE contiguous f32 tensor [N_o + N_s, 1, 1, 1] packing
 *               o     [d_v, H_v, T, B] contiguous at element 0
 *                     (N_o = d_v*H_v*T*B elements), then
 *               state [d_k, d_v, H_v, B] contiguous at element N_o
 *                     (N_s = d_k*d_v*H_v*B; byte offset 4*N_o): S_T.
 *             pprpc_gb_gdn_views() returns views of both parts.  The graph
 *             forbids dst overlapping a source, so a state carried across
 *             calls ping-pongs: the next call's src5 is a view of this
 *             call's state part (or it is copied back with CPY).
 *             i[1] = chunk length of the chunked (WY / UT) prefill form:
 *             0 = automatic, or 16, 32, 64, which also asks for the chunked
 *             form whatever T (anything else: PPRPC_EINVAL).
 *             i[2] = 1 forces the serial form (A/B benchmarks, bit-exact
 *             splitting); 0 lets the backend choose; other values
 *             PPRPC_EINVAL; i[1] and i[2] both nonzero: PPRPC_EINVAL.
 *             i[1] and i[2] are performance hints: the result is the
 *             recurrence above either way, within the stated tolerance
 *             (tests/unit/test_kernels_gdn.c: per element 1e-5 relative to
 *             |want| + the element's magnitude).
 *             CPU path choice (cpu_gdn_select.c): serial when i[2] = 1, or
 *             i[1] = 0 and T < KERN_GDN_CHUNK_MIN_T (decode and short
 *             inputs); else chunked; NaN gates, dimensions sgemm cannot
 *             take and scratch allocation failure fall back to serial
 *             (kern_gdn_stats counts each case).  With the serial form,
 *             splitting T over consecutive calls with the state carried
 *             gives bit-identical o and final state on the CPU; the chunked
 *             form is exact only to rounding (its chunk boundaries move
 *             with the split).  Either form's result does not depend on
 *             the thread count.
 *             CUDA path choice (kernels/cuda/cuda_gdn_select.cu): serial
 *             when i[2] = 1 or i[1] = 0 and T < 8; else the chunked form
 *             on bf16 tensor cores (fp32 accumulation and state), whose
 *             tolerance is RMSE / RMS <= 5e-3 of o and of the final state
 *             against the serial form (tests/cuda/test_cuda_ops.c), not
 *             the 1e-5 above; chunk length for i[1] = 0: 16.
 *             i[4] = precision of that chunked form: 0 = one bf16 per
 *             operand (the fastest); 1 = split, each operand as a bf16
 *             and its bf16 remainder and every product as three mma
 *             (about fp32's accuracy: RMSE / RMS <= 1e-4 in the tests,
 *             NMSE within test-backend-ops' 1e-7; C = 64 at d_k = 128
 *             does not fit the shared memory and falls back to serial,
 *             "arch"); other values PPRPC_EINVAL.  The CPU's forms are
 *             fp32 either way and ignore it.  d_k other than 64 / 128,
 *             d_v not a multiple of 32 up to 256, a GPU without bf16 mma
 *             and a workspace too small for one (b, h) fall back to serial
 *             (counted).  A NaN gate turns its whole chunk NaN there (the
 *             serial form: from its token on).
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
/* True when the op may write its output over a source occupying exactly
 * the same bytes with the same layout (it reads each element or row before
 * writing it): ADD, MUL, SCALE, the unary ops, norms, SOFTMAX, ROPE. */
bool kern_op_inplace_ok(int op);
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

/* GATED_DELTA_NET's packed destination: elements of the o part (written
 * first) and of the state part.  Returns 0, or PPRPC_EINVAL for a dimension
 * < 1, or PPRPC_ETOOBIG when the total exceeds KERN_MAX_ELEMENTS. */
int kern_gdn_layout(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t, int64_t b,
		    int64_t *ret_n_o, int64_t *ret_n_state);

/* Which form of GATED_DELTA_NET ran, counted per kern_cpu_run or
 * kern_cuda_run call (one call = one op over all its sequences and heads).  Counters only grow;
 * they are updated with relaxed atomic adds, so a reader on another thread
 * should load them with __atomic_load_n (kern_gdn_stats_read does). */
enum kern_gdn_fallback {
	KERN_GDN_FB_NAN_GATE,   /* a NaN gate: serial keeps NaN to its own tokens */
	KERN_GDN_FB_BLAS_DIMS,  /* d_k, d_v or H_v * d_v beyond sgemm's int */
	KERN_GDN_FB_NOMEM,      /* chunk scratch could not be allocated (CUDA: the
				 * workspace cannot hold one (b, h)) */
	KERN_GDN_FB_LAYOUT,     /* CUDA: d_k / d_v the chunked kernels do not take */
	KERN_GDN_FB_ARCH,       /* CUDA: no bf16 tensor cores or too little shared memory */
	KERN_GDN_FB_COUNT
};
#define KERN_GDN_NCHUNK 3   /* chunk lengths 16, 32, 64: chunked[0..2] */
struct kern_gdn_stats {
	uint64_t serial;                        /* chosen: short T or i[2] = 1 */
	uint64_t chunked[KERN_GDN_NCHUNK];      /* chunked ran with C = 16 << idx */
	uint64_t fallback[KERN_GDN_FB_COUNT];   /* chunked chosen, serial ran */
};
/* Snapshot of *s with atomic loads into *out. */
void kern_gdn_stats_read(const struct kern_gdn_stats *s, struct kern_gdn_stats *out);
/* Name of a fallback reason ("nan-gate", "blas-dims", "nomem"); "?" else. */
const char *kern_gdn_fallback_name(int reason);

/* An index tensor checked before the kernels that follow its indices run
 * (the ggml engine's checks on a GPU stream: kern_cuda_index_check).  Its
 * elements (i32, or i64 with is64; ne/nb as ggml's, each element aligned
 * to its size) are copied from src to the same place at dst, one in
 * [0, bound) as it is, one outside as 0, so the kernels queued behind,
 * which read dst, stay inside their tables (bound >= 1).  id names the
 * check in a report. */
#define KERN_INDEX_CHECKS_PER_LAUNCH 8
struct kern_index_check {
	const void *src;
	void *dst;
	int64_t ne[4], nb[4];
	int64_t bound;
	int32_t is64;
	int32_t id;
};
/* One index found outside: its check's id, value and coordinates, then
 * hit = 1 (written last). */
struct kern_index_fault {
	int32_t hit;
	int32_t id;
	int64_t value;
	int64_t at[4];
};

/* Chunk length the CPU uses for i[1] = 0, and the shortest T (per
 * sequence) that takes the chunked form.  Measured with bench-kda_cpu
 * (numbers in kernels/cpu/cpu_gdn_select.c): C = 16 is fastest, chunked
 * beats serial from T = 2 (2-3.3x at T >= 512, d = 128). */
#define KERN_GDN_CHUNK_DEFAULT 16
#define KERN_GDN_CHUNK_MIN_T 2

/* CPU execution context: threads the kernels may use, and optional
 * counters the daemon provides per device. */
struct kern_cpu_ctx {
	int nthreads;  /* >= 1 */
	/* optional: NULL = not counted.  Which GATED_DELTA_NET form ran. */
	struct kern_gdn_stats *gdn_stats;
};

/* Run one op on the CPU.  Descriptors must have passed kern_op_check_dst and
 * their data pointers must address valid memory of their extents.  The
 * destination may not overlap a source unless it is exactly the same bytes
 * (elementwise ops in place).  Returns 0 or a negative code. */
int kern_cpu_run(const struct kern_cpu_ctx *ctx, int op, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, int nsrc, struct kern_tensor *dst);
/* Host memory kern_cpu_run may allocate for this op beyond its tensors, an
 * upper bound (saturating) for validated descriptors (cpu_scratch.c): what
 * the caller reserves under its memory floor before running it. */
uint64_t kern_cpu_scratch(const struct kern_cpu_ctx *ctx, int op, const struct pprpc_op_params *p,
			  struct kern_tensor *const *src, int nsrc, const struct kern_tensor *dst);

#endif

/*
 * kernels/cpu/cpu_impl.h — internal to the CPU kernels: the per-op entry
 * points the dispatch table holds, the thread splitter and the strided
 * conversion runs they share.
 */
#ifndef PPRPC_KERNELS_CPU_IMPL_H
#define PPRPC_KERNELS_CPU_IMPL_H

#include <limits.h>
#include <stdbool.h>

#include "kernels/ops.h"

/* One op.  Descriptors were validated by kern_cpu_run (kern_op_check_dst),
 * so sources have the dtypes and shapes the op's rules allow. */
typedef int (*kern_cpu_fn)(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			   struct kern_tensor *const *src, struct kern_tensor *dst);

int kern_cpu_add(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_mul(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_scale(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		   struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_cpy(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_mul_mat(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		     struct kern_tensor *const *src, struct kern_tensor *dst);
/* ops-a: cpu_rows.c, cpu_concat.c, cpu_norm.c, cpu_unary.c, cpu_softmax.c,
 * cpu_argmax.c, cpu_q8_0.c */
int kern_cpu_get_rows(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_set_rows(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_concat(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_rms_norm(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_l2_norm(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_silu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_sigmoid(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_softplus(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_exp(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_gelu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_swiglu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_softmax(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_argmax(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_mul_mat_q8_0(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_rope(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_attention(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		       struct kern_tensor *const *src, struct kern_tensor *dst);
int kern_cpu_gated_delta_net(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			     struct kern_tensor *const *src, struct kern_tensor *dst);

/* Work below this many elements runs on the calling thread: thread start-up
 * costs more than it saves. */
#define KERN_CPU_PAR_MIN_WORK (1 << 20)

/* Process items [begin, end); returns 0 or a negative code. */
typedef int (*kern_cpu_range_fn)(void *arg, int64_t begin, int64_t end);

/* Run fn over [0, n) split into contiguous ranges across up to
 * ctx->nthreads threads when work (elements touched) is large, else in one
 * call.  Returns the first failure of any range.  Thread creation failure
 * is not an error: that range runs on the caller. */
int kern_cpu_parallel(const struct kern_cpu_ctx *ctx, int64_t n, int64_t work,
		      kern_cpu_range_fn fn, void *arg);

/* Convert n elements from src (stride snb bytes) to dst (stride dnb bytes).
 * Same-dtype runs copy bits exactly (NaN payloads survive).  dst may be the
 * very same bytes as src; other overlap is not allowed. */
typedef void (*kern_cpu_cvt_fn)(void *dst, uint64_t dnb, const void *src, uint64_t snb,
				int64_t n);

/* NULL unless both dtypes are f32, f16 or bf16. */
kern_cpu_cvt_fn kern_cpu_cvt(int src_dtype, int dst_dtype);

/* Q8_0 -> f32 in the kern_cpu_cvt_fn shape: n (a multiple of 32) elements
 * from packed blocks (snb is the block stride, always 34) to dst (stride
 * dnb).  cpu_q8_0.c. */
void kern_cpu_q8_0_to_f32(void *dst, uint64_t dnb, const void *src, uint64_t snb, int64_t n);
/* A MUL_MAT operand sgemm reads in place: f32 rows of unit element stride
 * with a leading dimension it takes; any other is packed into f32 first
 * (cpu_mul_mat.c; its size: cpu_scratch.c). */
static inline bool kern_cpu_mm_direct(const struct kern_tensor *t)
{
	int64_t k = t->ne[0];

	if (t->dtype != PPRPC_F32 || t->nb[0] != sizeof(float))
		return false;
	return t->ne[1] == 1 || (t->nb[1] % sizeof(float) == 0 && t->nb[1] / sizeof(float) >= (uint64_t)k &&
				 t->nb[1] / sizeof(float) <= INT_MAX);
}

/* Up to this many activation columns (src1.ne[1]) a Q8_0 MUL_MAT uses the
 * direct dot kernel; above it, dequantized weights go through sgemm.
 * Measured crossover on one core (4096x4096, SSE2 build): M ~ 30. */
#define KERN_Q8_0_DIRECT_MAX_M 16

#endif

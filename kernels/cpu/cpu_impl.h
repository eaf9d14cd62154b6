/*
 * kernels/cpu/cpu_impl.h — internal to the CPU kernels: the per-op entry
 * points the dispatch table holds, the thread splitter and the strided
 * conversion runs they share.
 */
#ifndef PPRPC_KERNELS_CPU_IMPL_H
#define PPRPC_KERNELS_CPU_IMPL_H

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

#endif

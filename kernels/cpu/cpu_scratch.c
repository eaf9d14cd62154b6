/*
 * kernels/cpu/cpu_scratch.c — the host memory a CPU kernel allocates for one
 * op beyond its tensors: packed MUL_MAT operands, per-thread workspaces.
 * An upper bound, which the daemon reserves under its memory floor before
 * it runs a graph (issue 19.14: a zero-stride weight of a few bytes packed
 * into hundreds of MiB past the floor).  Every malloc of kernels/cpu is
 * accounted here, next to the file that makes it; a kernel that allocates
 * more must be accounted here too.
 */
#include "kernels/cpu/cpu_impl.h"
#include "kernels/cpu/cpu_row_impl.h"

#include <limits.h>

/* kern_cpu_parallel: at most this many ranges run at once (its MAX_THREADS). */
#define PAR_MAX 256

static uint64_t mul(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Ranges of kern_cpu_parallel over n items that may run at once. */
static uint64_t conc(const struct kern_cpu_ctx *ctx, int64_t n)
{
	int64_t t = ctx->nthreads < PAR_MAX ? ctx->nthreads : PAR_MAX;

	if (t > n)
		t = n;
	return t < 1 ? 1 : (uint64_t)t;
}

/* kern_cpu_parallel's job array. */
static uint64_t par(const struct kern_cpu_ctx *ctx, int64_t n)
{
	return conc(ctx, n) * 64;
}

/* cpu_mul_mat.c: a weight slice and an activation slice not usable in
 * place are packed whole into f32; cpu_q8_0.c: one expanded weight row per
 * range, and x packed whole when its rows are strided. */
static uint64_t mul_mat(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		       struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	uint64_t K = (uint64_t)w->ne[0], N = (uint64_t)w->ne[1], M = (uint64_t)x->ne[1], b = 0;

	if (w->dtype == PPRPC_Q8_0 && M <= KERN_Q8_0_DIRECT_MAX_M) {
		int64_t items = w->ne[1] * x->ne[2] * x->ne[3];

		b = add(mul(conc(ctx, items), mul(K, sizeof(float))), par(ctx, items));
		if (x->nb[0] != sizeof(float))
			b = add(b, add(mul((uint64_t)kern_tensor_nelements(x), sizeof(float)), par(ctx, cpu_nrows(x))));
		return b;
	}
	if (!kern_cpu_mm_direct(w))
		b = add(b, mul(mul(K, N), sizeof(float)));
	if (!kern_cpu_mm_direct(x))
		b = add(b, mul(mul(K, M), sizeof(float)));
	return add(b, par(ctx, N > M ? (int64_t)N : (int64_t)M));
}

/* cpu_binary.c: a converted row of the broadcast operand per range. */
static uint64_t binary(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	const struct kern_tensor *b = src[1];
	int64_t rows = cpu_nrows(src[0]);

	if (b->dtype == PPRPC_F32 && (b->nb[0] == sizeof(float) || b->ne[0] == 1))
		return par(ctx, rows);
	return add(mul(conc(ctx, rows), mul((uint64_t)b->ne[0], sizeof(float))), par(ctx, rows));
}

/* cpu_attention.c: the chunk bounds, and per range 2 [16][D] + 2 [16] +
 * [64] + 2 [64][D] floats (ROWS_MAX 16, TILE 64). */
static uint64_t attention(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			  struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	const struct kern_tensor *q = src[0];
	int64_t rows = q->ne[1] * q->ne[2];
	uint64_t D = (uint64_t)q->ne[0], per = add(mul(D, 2 * 16 + 2 * 64), 2 * 16 + 64);

	return add(add(mul(conc(ctx, rows) + 1, sizeof(int64_t)), mul(conc(ctx, rows), mul(per, sizeof(float)))),
		   par(ctx, rows));
}

/* cpu_gdn.c (serial): 3 d_k floats per range; cpu_gdn_chunked.c: 7 C d_k +
 * 3 d_k + C d_v + 3 C^2 + C floats per range, C at most 64.  Either may
 * run (the chunked form falls back to the serial one). */
static uint64_t gdn(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		   struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	uint64_t dk = (uint64_t)src[0]->ne[0], dv = (uint64_t)src[2]->ne[0], C = 64;
	int64_t items = src[2]->ne[1] * src[2]->ne[3];
	uint64_t serial = mul(3, dk);
	uint64_t chunked = add(add(add(mul(7 * C, dk), mul(3, dk)), mul(C, dv)), 3 * C * C + C);

	return add(mul(conc(ctx, items), mul(serial > chunked ? serial : chunked, sizeof(float))), par(ctx, items));
}

/* cpu_rope.c: the frequencies, and a cos/sin table per range. */
static uint64_t rope(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		    struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	uint64_t half = p && p->i[1] > 0 ? (uint64_t)p->i[1] / 2 : 0;
	int64_t rows = src[0]->ne[1] * src[0]->ne[2];

	return add(add(mul(half, sizeof(double)), mul(conc(ctx, rows), mul(half, 2 * sizeof(double)))),
		   par(ctx, rows));
}

/* Row-wise ops allocate nothing but kern_cpu_parallel's jobs. */
static uint64_t rows_only(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			  struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	return par(ctx, cpu_nrows(dst));
}

typedef uint64_t (*scratch_fn)(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			       struct kern_tensor *const *src, const struct kern_tensor *dst);

/* Indexed by op, as cpu_dispatch.c's table; NULL: rows_only. */
static const scratch_fn scratch_ops[PPRPC_OP_COUNT] = {
	[PPRPC_OP_MUL_MAT] = mul_mat,
	[PPRPC_OP_ADD] = binary,
	[PPRPC_OP_MUL] = binary,
	[PPRPC_OP_ATTENTION] = attention,
	[PPRPC_OP_GATED_DELTA_NET] = gdn,
	[PPRPC_OP_ROPE] = rope,
};

uint64_t kern_cpu_scratch(const struct kern_cpu_ctx *ctx, int op, const struct pprpc_op_params *p,
			  struct kern_tensor *const *src, int nsrc, const struct kern_tensor *dst)
{
	if (!ctx || op <= 0 || op >= PPRPC_OP_COUNT || nsrc != kern_op_nsrc(op))
		return 0;
	return (scratch_ops[op] ? scratch_ops[op] : rows_only)(ctx, p, src, dst);
}

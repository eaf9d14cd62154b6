/*
 * kernels/cpu/cpu_unary.c — elementwise f32 functions: SILU, SIGMOID,
 * SOFTPLUS, EXP, GELU and SWIGLU (silu(src0) * src1), by rows.
 *
 * Each element is read before its own slot is written, so a destination
 * that is exactly a source's bytes (same layout) is safe.
 *
 * The formulas avoid overflow and cancellation rather than following the
 * textbook form: sigmoid goes through exp(-|x|) (never overflows, keeps
 * e^x accurate for very negative x instead of 1/(1+inf) = 0), and GELU's
 * 0.5 * (1 + tanh(u)) is evaluated as sigmoid(2u), the same function
 * without the cancellation of 1 + tanh(u) near -1.
 */
#include "kernels/cpu/cpu_row_impl.h"

#include <math.h>

/* ggml's GELU constants, as f32 values (ops.h documents them). */
#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

static inline float sigmoid_f(float x)
{
	float e = expf(-fabsf(x));  /* in (0, 1] */

	return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

static inline float silu_f(float x)
{
	return x * sigmoid_f(x);
}

static inline float softplus_f(float x)
{
	return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f);
}

static inline float gelu_f(float x)
{
	return x * sigmoid_f(2.0f * SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x));
}

static inline float exp_f(float x)
{
	return expf(x);
}

enum ufn { U_SILU, U_SIGMOID, U_SOFTPLUS, U_EXP, U_GELU, U_SWIGLU };

struct unary_job {
	const struct kern_tensor *a, *b, *d;
	enum ufn fn;
};

/* One loop per function, so the switch is outside the element loop. */
#define ROW_LOOP(F)                                                                      \
	static void row_##F(float *d, const char *a, uint64_t anb, int64_t n)            \
	{                                                                                \
		if (anb == sizeof(float)) {                                              \
			const float *af = (const float *)a;                              \
			for (int64_t i = 0; i < n; i++)                                  \
				d[i] = F##_f(af[i]);                                     \
			return;                                                          \
		}                                                                        \
		for (int64_t i = 0; i < n; i++)                                          \
			d[i] = F##_f(*(const float *)(a + (uint64_t)i * anb));           \
	}
ROW_LOOP(silu)
ROW_LOOP(sigmoid)
ROW_LOOP(softplus)
ROW_LOOP(exp)
ROW_LOOP(gelu)
#undef ROW_LOOP

static void row_swiglu(float *d, const char *a, uint64_t anb, const char *b, uint64_t bnb,
		       int64_t n)
{
	if (anb == sizeof(float) && bnb == sizeof(float)) {
		const float *af = (const float *)a, *bf = (const float *)b;

		for (int64_t i = 0; i < n; i++)
			d[i] = silu_f(af[i]) * bf[i];
		return;
	}
	for (int64_t i = 0; i < n; i++)
		d[i] = silu_f(*(const float *)(a + (uint64_t)i * anb)) *
		       *(const float *)(b + (uint64_t)i * bnb);
}

static int unary_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct unary_job *j = arg;
	const struct kern_tensor *a = j->a;
	int64_t n = a->ne[0];

	for (int64_t r = r0; r < r1; r++) {
		const char *arow = cpu_row(a, r);
		float *drow = (float *)cpu_row(j->d, r);

		switch (j->fn) {
		case U_SILU:
			row_silu(drow, arow, a->nb[0], n);
			break;
		case U_SIGMOID:
			row_sigmoid(drow, arow, a->nb[0], n);
			break;
		case U_SOFTPLUS:
			row_softplus(drow, arow, a->nb[0], n);
			break;
		case U_EXP:
			row_exp(drow, arow, a->nb[0], n);
			break;
		case U_GELU:
			row_gelu(drow, arow, a->nb[0], n);
			break;
		case U_SWIGLU:
			row_swiglu(drow, arow, a->nb[0], cpu_row(j->b, r), j->b->nb[0], n);
			break;
		}
	}
	return 0;
}

static int run_unary(const struct kern_cpu_ctx *ctx, struct kern_tensor *const *src,
		     struct kern_tensor *dst, enum ufn fn)
{
	struct unary_job j = { .a = src[0], .b = fn == U_SWIGLU ? src[1] : NULL, .d = dst,
			       .fn = fn };

	/* Transcendentals cost ~10x a load: weigh the work accordingly. */
	return kern_cpu_parallel(ctx, cpu_nrows(src[0]), kern_tensor_nelements(src[0]) * 8,
				 unary_rows, &j);
}

int kern_cpu_silu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_SILU);
}

int kern_cpu_sigmoid(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		     struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_SIGMOID);
}

int kern_cpu_softplus(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_SOFTPLUS);
}

int kern_cpu_exp(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_EXP);
}

int kern_cpu_gelu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_GELU);
}

int kern_cpu_swiglu(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		    struct kern_tensor *const *src, struct kern_tensor *dst)
{
	(void)p;
	return run_unary(ctx, src, dst, U_SWIGLU);
}

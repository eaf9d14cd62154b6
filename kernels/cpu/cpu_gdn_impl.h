/*
 * kernels/cpu/cpu_gdn_impl.h — internal to GATED_DELTA_NET on the CPU: the
 * arguments both forms read (serial, cpu_gdn.c; chunked, cpu_gdn_chunked.c),
 * the element helpers they share, and the two entry points the path choice
 * (cpu_gdn_select.c) calls.
 */
#ifndef PPRPC_KERNELS_CPU_GDN_IMPL_H
#define PPRPC_KERNELS_CPU_GDN_IMPL_H

#include "kernels/cpu/cpu_impl.h"

#include <math.h>

enum { GDN_SRC_Q, GDN_SRC_K, GDN_SRC_V, GDN_SRC_G, GDN_SRC_BETA, GDN_SRC_STATE };

struct gdn_args {
	const struct kern_tensor *q, *k, *v, *g, *beta, *s0;
	float *o;       /* o part of dst: [d_v, H_v, T, B] contiguous */
	float *s;       /* state part of dst: [d_k, d_v, H_v, B] contiguous */
	int64_t d_k, d_v, h_v, t, b, rep;  /* rep = H_v / H_k */
	int64_t h_k;
	bool kda, l2;
	bool tiled;     /* i[3] = 1: value head h reads q/k head h % H_k */
	float scale, eps;
	kern_cpu_cvt_fn copy;  /* f32 -> f32 strided run */
};

/* Fill a from validated sources and dst.  Returns 0 or PPRPC_ETOOBIG. */
int gdn_args_init(struct gdn_args *a, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst);

/* The serial recurrence (the reference).  Returns 0 or PPRPC_ENOMEM. */
int kern_cpu_gdn_serial(const struct kern_cpu_ctx *ctx, const struct gdn_args *a);

/* The chunked (WY / UT) form with chunk length chunk (16, 32 or 64).
 * Returns 0, PPRPC_ENOMEM (nothing usable was written: the caller may run
 * the serial form instead) or PPRPC_ETOOBIG (a dimension sgemm cannot take;
 * checked before anything is written). */
int kern_cpu_gdn_chunked(const struct kern_cpu_ctx *ctx, const struct gdn_args *a, int chunk);

/* The q/k head value head h reads (ops.h, i[3]). */
static inline int64_t gdn_key_head(const struct gdn_args *a, int64_t h)
{
	return a->tiled ? h % a->h_k : h / a->rep;
}

static inline const char *gdn_at(const struct kern_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
	return (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static inline float gdn_ld(const struct kern_tensor *t, int64_t i0, int64_t i1, int64_t i2,
			   int64_t i3)
{
	return *(const float *)(gdn_at(t, i1, i2, i3) + i0 * t->nb[0]);
}

/* The log-space gate, clamped to <= 0 (ops.h: a positive gate acts as 0).
 * Written as a comparison so a NaN stays NaN instead of becoming 0. */
static inline float gdn_gate(float g)
{
	return g > 0.0f ? 0.0f : g;
}

/* ggml's L2_NORM: x / max(||x||, eps), the sum of squares in double. */
static inline void gdn_l2_normalise(float *x, int64_t n, float eps)
{
	double sum = 0.0;

	for (int64_t i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	const float inv = 1.0f / fmaxf(sqrtf((float)sum), eps);
	for (int64_t i = 0; i < n; i++)
		x[i] *= inv;
}

#endif

/*
 * kernels/cpu/cpu_gdn_select.c — GATED_DELTA_NET on the CPU: choose the
 * serial form (cpu_gdn.c) or the chunked one (cpu_gdn_chunked.c), and count
 * which one ran in the caller's kern_gdn_stats.
 *
 * The serial form is the reference: it runs for decode and short inputs,
 * when the caller forces it (i[2] = 1), and as the fallback whenever the
 * chunked form cannot run (reasons in enum kern_gdn_fallback).
 */
#include "kernels/cpu/cpu_gdn_impl.h"

/* The defaults in ops.h, KERN_GDN_CHUNK_DEFAULT = 16 and
 * KERN_GDN_CHUNK_MIN_T = 2, measured with bench-kda_cpu on the development
 * VM (AMD EPYC Zen 4 KVM, 2 vCPUs, OpenBLAS 0.3.21 pthread, gcc -O2,
 * 2 threads, d_k = d_v = 128, B = 1, median of 5 paired runs; ms, and
 * serial / chunked):
 *
 *              serial    C=16         C=32         C=64
 *   GDN T=512  H=4   13.7    4.3 x3.20    4.4 x3.12    5.8 x2.37
 *   GDN T=2048 H=4   53.9   16.9 x3.19   17.5 x3.08   22.0 x2.45
 *   GDN T=8192 H=4  211.1   65.9 x3.20   67.8 x3.12   87.7 x2.41
 *   GDN T=512  H=16  55.9   16.8 x3.33   17.5 x3.20   23.2 x2.41
 *   GDN T=2048 H=16 216.6   65.1 x3.33   68.7 x3.15   89.5 x2.42
 *   GDN T=8192 H=16 848.1  260.1 x3.26  275.3 x3.08  351.3 x2.41
 *   KDA T=512  H=4   14.2    7.1 x2.01    6.9 x2.07    8.1 x1.75
 *   KDA T=2048 H=4   56.3   26.3 x2.14   26.9 x2.09   32.3 x1.74
 *   KDA T=8192 H=4  225.7  109.5 x2.06  108.2 x2.09  129.5 x1.74
 *   KDA T=512  H=16  57.0   26.2 x2.17   27.3 x2.08   32.8 x1.74
 *   KDA T=2048 H=16 243.3  114.8 x2.12  118.0 x2.06  140.5 x1.73
 *   KDA T=8192 H=16 1727   819.1 x2.11  847.6 x2.04 1034.6 x1.67
 *
 * C = 16 is best or within noise of C = 32 everywhere; C = 64 loses ~25%:
 * the d_k x d_v products do not depend on C, while the triangular solve,
 * P U and (GDN) Q K^T grow with it, and an M = 16 sgemm is already
 * efficient.  Threshold (--sweep, H = 16, default C): T = 1 ties
 * (0.22 vs 0.22 ms GDN, 0.23 vs 0.24 KDA), T = 2 is 1.7x (GDN) / 1.5x
 * (KDA) faster chunked, T = 4 2.6x / 2.0x, T = 16 3.2x / 2.1x.  So decode
 * (T = 1) stays serial (the reference, bit-exact under splitting) and
 * everything from T = 2 is chunked.  One thread (T = 2048, H = 4, C = 16):
 * GDN 105.1 -> 30.4 ms (x3.46), KDA 108.2 -> 48.2 ms (x2.24).  Parity in
 * the same runs: max |chunked - serial| / (|serial| + rms) <= 2.9e-6. */

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

void kern_gdn_stats_read(const struct kern_gdn_stats *s, struct kern_gdn_stats *out)
{
	out->serial = __atomic_load_n(&s->serial, __ATOMIC_RELAXED);
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		out->chunked[i] = __atomic_load_n(&s->chunked[i], __ATOMIC_RELAXED);
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		out->fallback[i] = __atomic_load_n(&s->fallback[i], __ATOMIC_RELAXED);
}

const char *kern_gdn_fallback_name(int reason)
{
	static const char *const names[KERN_GDN_FB_COUNT] = {
		[KERN_GDN_FB_NAN_GATE] = "nan-gate",
		[KERN_GDN_FB_BLAS_DIMS] = "blas-dims",
		[KERN_GDN_FB_NOMEM] = "nomem",
		[KERN_GDN_FB_LAYOUT] = "layout",
		[KERN_GDN_FB_ARCH] = "arch",
	};

	return reason >= 0 && reason < KERN_GDN_FB_COUNT ? names[reason] : "?";
}

/* A NaN gate poisons its own and later tokens in the serial form; inside a
 * chunk's matrix products it would reach earlier tokens too (0 * NaN), so
 * such input keeps the serial form's exact NaN semantics. */
static bool has_nan_gate(const struct gdn_args *a)
{
	const struct kern_tensor *g = a->g;

	for (int64_t i3 = 0; i3 < g->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < g->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < g->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < g->ne[0]; i0++)
					if (isnan(gdn_ld(g, i0, i1, i2, i3)))
						return true;
	return false;
}

static int chunk_index(int chunk)
{
	return chunk == 16 ? 0 : chunk == 32 ? 1 : 2;
}

int kern_cpu_gated_delta_net(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			     struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct kern_gdn_stats *st = ctx->gdn_stats;
	struct gdn_args a;
	int chunk = p->i[1] ? p->i[1] : KERN_GDN_CHUNK_DEFAULT, reason, rc;

	rc = gdn_args_init(&a, p, src, dst);
	if (rc < 0)
		return rc;
	/* An explicit chunk length asks for the chunked form at any T. */
	if (p->i[2] == 1 || (p->i[1] == 0 && a.t < KERN_GDN_CHUNK_MIN_T)) {
		if (st)
			count(&st->serial);
		return kern_cpu_gdn_serial(ctx, &a);
	}
	if (has_nan_gate(&a)) {
		reason = KERN_GDN_FB_NAN_GATE;
	} else {
		rc = kern_cpu_gdn_chunked(ctx, &a, chunk);
		if (rc == 0) {
			if (st)
				count(&st->chunked[chunk_index(chunk)]);
			return 0;
		}
		if (rc == PPRPC_ETOOBIG)
			reason = KERN_GDN_FB_BLAS_DIMS;
		else if (rc == PPRPC_ENOMEM)
			reason = KERN_GDN_FB_NOMEM;  /* dst is rewritten from the sources */
		else
			return rc;
	}
	if (st)
		count(&st->fallback[reason]);
	return kern_cpu_gdn_serial(ctx, &a);
}

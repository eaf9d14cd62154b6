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

/* Defaults (ops.h), measured with bench-kda_cpu on the development VM (AMD
 * EPYC Zen 4, 2 cores, OpenBLAS 0.3.21 pthread, -O2): see the table in
 * bench/kda_cpu.c's header comment. */

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

/*
 * kernels/cuda/cuda_gdn_select.cu — GATED_DELTA_NET on CUDA: choose the
 * serial form (cuda_gdn.cu) or the chunked one (cuda_gdn_chunked.cu), and
 * count which one ran in ctx->gdn_stats (the same counters as the CPU's,
 * kernels/cpu/cpu_gdn_select.c).
 *
 * The serial form is the reference: it runs for decode and short inputs
 * (T < KCU_GDN_CHUNK_MIN_T), when the caller forces it (i[2] = 1), and as
 * the fallback when the chunked form cannot run: d_k other than 64 / 128
 * or d_v not a multiple of 32 up to 256 ("layout"), a device without bf16
 * tensor cores or enough shared memory ("arch"), a workspace too small for
 * one (b, h) ("nomem").  All of it is decided on the host before anything
 * is launched, so a CUDA graph capture records one fixed path.
 */
#include "kernels/cuda/cuda_gdn_impl.cuh"

/* Chunk length for i[1] = 0 and the shortest T that takes the chunked
 * form, measured with bench-kda-cuda on an H200 (d = 128, B = 1, figures
 * in doc/results/kda-cuda.md and h200-kda-cuda-bench.txt):
 *  - C = 16 is the fastest chunk length in every measured cell, T in
 *    {2048, 8192, 32768} by H in {32, 96}, KDA and GDN (KDA T = 8192:
 *    H = 96 1.78 ms against 2.36 at C = 32 and 4.04 at C = 64; H = 32
 *    0.83 against 0.96 and 1.36).  With the two-warp recurrence, C = 32
 *    no longer wins for few (b, h) and long inputs, as it did with the
 *    first kernels.
 *  - T = 8 is the first length where the chunked form (C = 16, H = 32)
 *    beats the serial kernel (x1.34 GDN, x1.22 KDA; x0.84 / x0.86 at
 *    T = 4). */
#define KCU_GDN_CHUNK_MIN_T KERN_CUDA_GDN_CHUNK_MIN_T
#define KCU_GDN_DEFAULT_CHUNK KERN_CUDA_GDN_CHUNK_DEFAULT

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static int chunk_index(int chunk)
{
	return chunk == 16 ? 0 : chunk == 32 ? 1 : 2;
}

static int fallback_reason(int why)
{
	return why == KCU_GDN_LAYOUT ? KERN_GDN_FB_LAYOUT
	       : why == KCU_GDN_ARCH ? KERN_GDN_FB_ARCH
				     : KERN_GDN_FB_NOMEM;
}

KCU_DECL(gated_delta_net)
{
	const struct kern_tensor *q = src[0], *v = src[2];
	struct kern_gdn_stats *st = ctx->gdn_stats;
	gdn_args a;
	int chunk;
	int64_t n_o, n_s;
	int rc, why;

	a.q = kcu_view(src[0]);
	a.k = kcu_view(src[1]);
	a.v = kcu_view(src[2]);
	a.g = kcu_view(src[3]);
	a.beta = kcu_view(src[4]);
	a.s0 = kcu_view(src[5]);
	a.d_k = q->ne[0];
	a.d_v = v->ne[0];
	a.h_v = v->ne[1];
	a.t = q->ne[2];
	a.b = q->ne[3];
	a.rep = v->ne[1] / q->ne[1];
	a.h_k = q->ne[1];
	a.tiled = p->i[3] == 1;
	a.split = p->i[4] == 1;
	a.kda = src[3]->ne[0] != 1;
	a.l2 = p->i[0] == 1;
	a.scale = p->f[0];
	a.eps = p->f[1];
	rc = kern_gdn_layout(a.d_k, a.d_v, a.h_v, a.t, a.b, &n_o, &n_s);
	if (rc < 0)
		return kern_errf(err, errlen, rc, "GATED_DELTA_NET: bad layout");
	a.o = (float *)dst->data;
	a.s = a.o + n_o;
	chunk = p->i[1] ? p->i[1] : KCU_GDN_DEFAULT_CHUNK;

	/* An explicit chunk length asks for the chunked form at any T. */
	if (p->i[2] == 1 || (p->i[1] == 0 && a.t < KCU_GDN_CHUNK_MIN_T)) {
		rc = kcu_gdn_serial(ctx, &a, err, errlen);
		if (!rc && st)
			count(&st->serial);
		return rc;
	}
	why = kcu_gdn_chunked_check(ctx, &a, chunk);
	if (why == KCU_GDN_OK) {
		rc = kcu_gdn_chunked(ctx, &a, chunk, err, errlen);
		if (!rc && st)
			count(&st->chunked[chunk_index(chunk)]);
		return rc;
	}
	rc = kcu_gdn_serial(ctx, &a, err, errlen);
	if (!rc && st)
		count(&st->fallback[fallback_reason(why)]);
	return rc;
}

extern "C" bool kern_cuda_gdn_chunked_fits(int64_t d_k, int64_t d_v, int64_t t)
{
	return t >= KCU_GDN_CHUNK_MIN_T && kcu_gdn_chunked_layout_ok(d_k, d_v);
}

extern "C" size_t kern_cuda_gdn_ws_bytes(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t,
					 int64_t b, int chunk, bool split)
{
	return kcu_gdn_chunked_ws(d_k, d_v, h_v, t, b, chunk, split);
}

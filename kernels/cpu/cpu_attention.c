/*
 * kernels/cpu/cpu_attention.c — ATTENTION: fused causal attention of a
 * micro-batch of queries over a KV cache, flash-attention style.
 *
 * Per (query j, head h) the keys 0 ..= n_past + j are visited in tiles of
 * TILE; each tile's scores raise a running maximum m, the running sum l and
 * the output accumulator are rescaled by exp(m_old - m_new) when m grows,
 * so no exp() argument is ever positive and nothing is stored per key
 * beyond one tile.  All arithmetic is f32.
 *
 * Work items are (j, h), numbered j * n_head + h.  Consecutive heads that
 * share a kv head (GQA) are processed together so each K/V tile is loaded
 * (and converted from f16, or gathered from a strided view) once for all
 * of them.  Causality makes later queries costlier, so the items are cut
 * into one chunk per thread of equal key count, not equal item count.
 */
#include "kernels/cpu/cpu_impl.h"

#include <math.h>
#include <stdlib.h>

/* Keys per tile: a [TILE, D] K and V tile of D = 256 f32 is 64 KiB each. */
#define TILE 64
/* Most heads processed together (bounds the scratch of huge GQA ratios). */
#define GROUP_MAX 16
/* Most chunks the items are cut into. */
#define MAX_CHUNKS 1024

struct attn_job {
	const struct kern_tensor *q, *k, *v, *d;
	float scale;
	int64_t n_past, D, H, rep;  /* rep = n_head / n_kv_head */
	kern_cpu_cvt_fn kcvt, vcvt;
	bool kdirect, vdirect;      /* f32 rows with unit stride: used in place */
	const int64_t *bounds;      /* chunk c = items [bounds[c], bounds[c+1]) */
};

/* Per-range scratch, carved from one allocation. */
struct attn_scratch {
	float *q, *acc;     /* [GROUP_MAX][D] */
	float *m, *l;       /* [GROUP_MAX] */
	float *s;           /* [TILE] */
	float *kt, *vt;     /* [TILE][D], when not direct */
	const float *krow[TILE], *vrow[TILE];
};

/* Eight partial sums: lets the compiler vectorise without reassociating. */
static float dot(const float *a, const float *b, int64_t n)
{
	float p[8] = { 0 };
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			p[k] += a[i + k] * b[i + k];
	for (; i < n; i++)
		p[0] += a[i] * b[i];
	return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

static void axpy(float *y, float a, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

/* Rows t0 .. t0+nt-1 of kv head g of a cache as f32 row pointers. */
static void load_rows(const struct kern_tensor *t, bool direct, kern_cpu_cvt_fn cvt,
		      int64_t g, int64_t t0, int64_t nt, int64_t D, float *buf,
		      const float **rows)
{
	const char *base = (const char *)t->data + g * t->nb[1];

	for (int64_t i = 0; i < nt; i++) {
		const char *src = base + (t0 + i) * t->nb[2];

		if (direct) {
			rows[i] = (const float *)src;
		} else {
			cvt(buf + i * D, sizeof(float), src, t->nb[0], D);
			rows[i] = buf + i * D;
		}
	}
}

/* Query j, heads h .. h+nh-1 (all on kv head h / rep). */
static void attend_group(const struct attn_job *j, struct attn_scratch *w, int64_t qi,
			 int64_t h, int64_t nh)
{
	const struct kern_tensor *q = j->q, *d = j->d;
	int64_t D = j->D, g = h / j->rep, nkeys = j->n_past + qi + 1;
	kern_cpu_cvt_fn qcpy = kern_cpu_cvt(PPRPC_F32, PPRPC_F32);

	for (int64_t a = 0; a < nh; a++) {
		qcpy(w->q + a * D, sizeof(float),
		     (const char *)q->data + (h + a) * q->nb[1] + qi * q->nb[2], q->nb[0], D);
		for (int64_t i = 0; i < D; i++)
			w->acc[a * D + i] = 0.0f;
		w->m[a] = -INFINITY;
		w->l[a] = 0.0f;
	}
	for (int64_t t0 = 0; t0 < nkeys; t0 += TILE) {
		int64_t nt = nkeys - t0 < TILE ? nkeys - t0 : TILE;

		load_rows(j->k, j->kdirect, j->kcvt, g, t0, nt, D, w->kt, w->krow);
		load_rows(j->v, j->vdirect, j->vcvt, g, t0, nt, D, w->vt, w->vrow);
		for (int64_t a = 0; a < nh; a++) {
			const float *qa = w->q + a * D;
			float *acc = w->acc + a * D, mx = -INFINITY, m;

			for (int64_t i = 0; i < nt; i++) {
				w->s[i] = dot(qa, w->krow[i], D) * j->scale;
				if (w->s[i] > mx)
					mx = w->s[i];
			}
			/* NaN scores never raise the maximum; they reach the
			 * output through exp(), as they should. */
			if (mx > w->m[a]) {
				float c = expf(w->m[a] - mx);  /* 0 on the first tile */

				w->l[a] *= c;
				for (int64_t i = 0; i < D; i++)
					acc[i] *= c;
				w->m[a] = mx;
			}
			m = w->m[a];
			for (int64_t i = 0; i < nt; i++) {
				/* A -inf score (f32 overflow) weighs 0, even
				 * while m is still -inf (exp(-inf - -inf) is NaN). */
				float pr = w->s[i] == -INFINITY ? 0.0f : expf(w->s[i] - m);

				w->l[a] += pr;
				axpy(acc, pr, w->vrow[i], D);
			}
		}
	}
	for (int64_t a = 0; a < nh; a++) {
		float *out = (float *)((char *)d->data + (h + a) * d->nb[1] + qi * d->nb[2]);
		float inv = 1.0f / w->l[a];

		for (int64_t i = 0; i < D; i++)
			out[i] = w->acc[a * D + i] * inv;
	}
}

static int attn_chunks(void *arg, int64_t c0, int64_t c1)
{
	const struct attn_job *j = arg;
	int64_t D = j->D, H = j->H, end = j->bounds[c1];
	struct attn_scratch w;
	size_t n, tile_f;
	float *buf;

	/* 2 [GROUP_MAX][D] + 2 [GROUP_MAX] + [TILE] + 2 [TILE][D] floats. */
	if (__builtin_mul_overflow((size_t)D, (size_t)(2 * GROUP_MAX + 2 * TILE), &n) ||
	    __builtin_add_overflow(n, (size_t)(2 * GROUP_MAX + TILE), &n) ||
	    __builtin_mul_overflow(n, sizeof(float), &n))
		return PPRPC_ETOOBIG;
	buf = malloc(n);
	if (!buf)
		return PPRPC_ENOMEM;
	tile_f = (size_t)TILE * (size_t)D;
	w.q = buf;
	w.acc = w.q + GROUP_MAX * D;
	w.kt = w.acc + GROUP_MAX * D;
	w.vt = w.kt + tile_f;
	w.m = w.vt + tile_f;
	w.l = w.m + GROUP_MAX;
	w.s = w.l + GROUP_MAX;

	for (int64_t it = j->bounds[c0]; it < end;) {
		int64_t qi = it / H, h = it % H;
		/* Up to the end of h's GQA group, the range, or GROUP_MAX. */
		int64_t stop = qi * H + (h / j->rep + 1) * j->rep;

		if (stop > end)
			stop = end;
		if (stop - it > GROUP_MAX)
			stop = it + GROUP_MAX;
		attend_group(j, &w, qi, h, stop - it);
		it = stop;
	}
	free(buf);
	return 0;
}

/* Keys visited by queries 0 .. jq-1 on every head (in double: only used to
 * balance chunks, and n_q * n_kv may not fit int64 in theory). */
static double keys_before(int64_t jq, int64_t n_past, int64_t H)
{
	double jd = (double)jq;

	return (double)H * (jd * (double)(n_past + 1) + jd * (jd - 1.0) / 2.0);
}

/* Item index where the cumulative key count reaches target. */
static int64_t item_at(double target, int64_t n_q, int64_t n_past, int64_t H)
{
	int64_t lo = 0, hi = n_q, h;

	/* Largest query jq with keys_before(jq) <= target. */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;

		if (keys_before(mid, n_past, H) <= target)
			lo = mid;
		else
			hi = mid;
	}
	h = (int64_t)((target - keys_before(lo, n_past, H)) / (double)(n_past + lo + 1));
	if (h < 0)
		h = 0;
	if (h > H)
		h = H;
	return lo * H + h;
}

int kern_cpu_attention(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		       struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *q = src[0], *k = src[1], *v = src[2];
	int64_t n_q = q->ne[2], H = q->ne[1], items = n_q * H, nchunks;
	double total, work;
	int64_t *bounds;
	int rc;
	/* p is never NULL here: the rules reject scale == 0. */
	struct attn_job j = {
		.q = q, .k = k, .v = v, .d = dst, .scale = p->f[0], .n_past = p->i[0],
		.D = q->ne[0], .H = H, .rep = H / k->ne[1],
		.kcvt = kern_cpu_cvt(k->dtype, PPRPC_F32),
		.vcvt = kern_cpu_cvt(v->dtype, PPRPC_F32),
		.kdirect = k->dtype == PPRPC_F32 && k->nb[0] == sizeof(float),
		.vdirect = v->dtype == PPRPC_F32 && v->nb[0] == sizeof(float),
	};

	if (!j.kcvt || !j.vcvt)
		return PPRPC_ETYPE;
	nchunks = ctx->nthreads < items ? ctx->nthreads : items;
	if (nchunks > MAX_CHUNKS)
		nchunks = MAX_CHUNKS;
	bounds = malloc((size_t)(nchunks + 1) * sizeof(*bounds));
	if (!bounds)
		return PPRPC_ENOMEM;
	total = keys_before(n_q, j.n_past, H);
	bounds[0] = 0;
	for (int64_t c = 1; c < nchunks; c++) {
		bounds[c] = item_at(total * (double)c / (double)nchunks, n_q, j.n_past, H);
		if (bounds[c] < bounds[c - 1])
			bounds[c] = bounds[c - 1];
	}
	bounds[nchunks] = items;
	j.bounds = bounds;

	/* Elements touched: each visited key reads a K and a V row. */
	work = total * 2.0 * (double)j.D;
	rc = kern_cpu_parallel(ctx, nchunks, work > 0x1p62 ? (int64_t)1 << 62 : (int64_t)work,
			       attn_chunks, &j);
	free(bounds);
	return rc;
}

/*
 * kernels/cpu/cpu_attention.c — ATTENTION: fused causal attention of a
 * micro-batch of queries over a KV cache, flash-attention style.
 *
 * Per row (query j, head h) the keys 0 ..= n_past + j are visited in tiles
 * of TILE; each tile's scores may raise the row's running maximum m, and
 * then the running sum l and the output accumulator are rescaled by
 * exp(m_old - m_new), so no exp() argument is ever positive and nothing is
 * stored per key beyond one tile.  All arithmetic is f32.
 *
 * Rows are numbered kv-head-major: row = (g * n_q + j) * rep + r for query
 * head h = g * rep + r (rep = n_head / n_kv_head).  Up to ROWS_MAX
 * consecutive rows — same kv head, consecutive queries, all heads of the
 * GQA group — are processed together, so each K/V tile is loaded (converted
 * from f16, or gathered from a strided view) once for all of them and stays
 * in cache while they use it.  Causality makes later queries costlier, so
 * the rows are cut into one chunk per thread of equal key count, not equal
 * row count.
 */
#include "kernels/cpu/cpu_impl.h"

#include <math.h>
#include <stdlib.h>

/* Keys per tile: a [TILE, D] K and V tile of D = 256 f32 is 64 KiB each. */
#define TILE 64
/* Most rows processed together (their q, accumulators and state). */
#define ROWS_MAX 16
/* Most chunks the rows are cut into. */
#define MAX_CHUNKS 1024

struct attn_job {
	const struct kern_tensor *q, *k, *v, *d;
	float scale;
	int64_t n_past, n_q, D, rep;
	kern_cpu_cvt_fn kcvt, vcvt;
	bool kdirect, vdirect;      /* f32 rows with unit stride: used in place */
	const int64_t *bounds;      /* chunk c = rows [bounds[c], bounds[c+1]) */
};

/* Per-range scratch, carved from one allocation. */
struct attn_scratch {
	float *q, *acc;     /* [ROWS_MAX][D] */
	float *m, *l;       /* [ROWS_MAX] */
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

/* Blocks of eight, like dot(): -O2 vectorises a fixed-length inner loop
 * but not a loop that would need a remainder or an aliasing check. */
static void axpy(float *restrict y, float a, const float *restrict x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			y[i + k] += a * x[i + k];
	for (; i < n; i++)
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

/* Query and head of a row. */
static void row_jh(const struct attn_job *j, int64_t row, int64_t *qi, int64_t *h)
{
	int64_t gj = row / j->rep;

	*qi = gj % j->n_q;
	*h = gj / j->n_q * j->rep + row % j->rep;
}

/* Rows row0 .. row0+nr-1, all on kv head g.  Row a's query is the earliest
 * or a later one than row 0's, so row nr-1 sees the most keys. */
static void attend_rows(const struct attn_job *j, struct attn_scratch *w, int64_t row0,
			int64_t nr, int64_t g)
{
	const struct kern_tensor *q = j->q, *d = j->d;
	int64_t D = j->D, qi, h, kmax;
	kern_cpu_cvt_fn qcpy = kern_cpu_cvt(PPRPC_F32, PPRPC_F32);

	for (int64_t a = 0; a < nr; a++) {
		row_jh(j, row0 + a, &qi, &h);
		qcpy(w->q + a * D, sizeof(float),
		     (const char *)q->data + h * q->nb[1] + qi * q->nb[2], q->nb[0], D);
		for (int64_t i = 0; i < D; i++)
			w->acc[a * D + i] = 0.0f;
		w->m[a] = -INFINITY;
		w->l[a] = 0.0f;
	}
	row_jh(j, row0 + nr - 1, &qi, &h);
	kmax = j->n_past + qi + 1;
	for (int64_t t0 = 0; t0 < kmax; t0 += TILE) {
		int64_t nt = kmax - t0 < TILE ? kmax - t0 : TILE;

		load_rows(j->k, j->kdirect, j->kcvt, g, t0, nt, D, w->kt, w->krow);
		load_rows(j->v, j->vdirect, j->vcvt, g, t0, nt, D, w->vt, w->vrow);
		for (int64_t a = 0; a < nr; a++) {
			const float *qa = w->q + a * D;
			float *acc = w->acc + a * D, mx = -INFINITY, m;
			int64_t n;

			row_jh(j, row0 + a, &qi, &h);
			/* Causal mask: this row's keys end at n_past + qi. */
			n = j->n_past + qi + 1 - t0;
			if (n <= 0)
				continue;
			if (n > nt)
				n = nt;
			for (int64_t i = 0; i < n; i++) {
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
			for (int64_t i = 0; i < n; i++) {
				/* A -inf score (f32 overflow) weighs 0, even
				 * while m is still -inf (exp(-inf - -inf) is NaN). */
				float pr = w->s[i] == -INFINITY ? 0.0f : expf(w->s[i] - m);

				w->l[a] += pr;
				axpy(acc, pr, w->vrow[i], D);
			}
		}
	}
	for (int64_t a = 0; a < nr; a++) {
		float *out, inv = 1.0f / w->l[a];

		row_jh(j, row0 + a, &qi, &h);
		out = (float *)((char *)d->data + h * d->nb[1] + qi * d->nb[2]);
		for (int64_t i = 0; i < D; i++)
			out[i] = w->acc[a * D + i] * inv;
	}
}

static int attn_chunks(void *arg, int64_t c0, int64_t c1)
{
	const struct attn_job *j = arg;
	int64_t D = j->D, end = j->bounds[c1], per_g = j->n_q * j->rep;
	struct attn_scratch w;
	size_t n, tile_f;
	float *buf;

	/* 2 [ROWS_MAX][D] + 2 [ROWS_MAX] + [TILE] + 2 [TILE][D] floats. */
	if (__builtin_mul_overflow((size_t)D, (size_t)(2 * ROWS_MAX + 2 * TILE), &n) ||
	    __builtin_add_overflow(n, (size_t)(2 * ROWS_MAX + TILE), &n) ||
	    __builtin_mul_overflow(n, sizeof(float), &n))
		return PPRPC_ETOOBIG;
	buf = malloc(n);
	if (!buf)
		return PPRPC_ENOMEM;
	tile_f = (size_t)TILE * (size_t)D;
	w.q = buf;
	w.acc = w.q + ROWS_MAX * D;
	w.kt = w.acc + ROWS_MAX * D;
	w.vt = w.kt + tile_f;
	w.m = w.vt + tile_f;
	w.l = w.m + ROWS_MAX;
	w.s = w.l + ROWS_MAX;

	for (int64_t row = j->bounds[c0]; row < end;) {
		int64_t g = row / per_g, stop = (g + 1) * per_g;

		if (stop > end)
			stop = end;
		if (stop - row > ROWS_MAX)
			stop = row + ROWS_MAX;
		attend_rows(j, &w, row, stop - row, g);
		row = stop;
	}
	free(buf);
	return 0;
}

/* Keys visited by queries 0 .. jq-1 of one head (in double: only used to
 * balance chunks, and n_q * n_kv need not fit int64 in theory). */
static double keys_before(int64_t jq, int64_t n_past)
{
	double jd = (double)jq;

	return jd * (double)(n_past + 1) + jd * (jd - 1.0) / 2.0;
}

/* First row at which the cumulative key count reaches target. */
static int64_t row_at(const struct attn_job *j, int64_t n_kv_head, double target)
{
	double per_g = (double)j->rep * keys_before(j->n_q, j->n_past), rem;
	int64_t g = (int64_t)(target / per_g), lo = 0, hi = j->n_q, r;

	if (g >= n_kv_head)
		return n_kv_head * j->n_q * j->rep;
	rem = target - (double)g * per_g;
	/* Largest query jq with rep * keys_before(jq) <= rem. */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;

		if ((double)j->rep * keys_before(mid, j->n_past) <= rem)
			lo = mid;
		else
			hi = mid;
	}
	r = (int64_t)((rem - (double)j->rep * keys_before(lo, j->n_past)) /
		      (double)(j->n_past + lo + 1));
	if (r < 0)
		r = 0;
	if (r > j->rep)
		r = j->rep;
	return (g * j->n_q + lo) * j->rep + r;
}

int kern_cpu_attention(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		       struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *q = src[0], *k = src[1], *v = src[2];
	int64_t n_kv_head = k->ne[1], rows = q->ne[1] * q->ne[2], nchunks;
	double total, work;
	int64_t *bounds;
	int rc;
	/* p is never NULL here: the rules reject scale == 0. */
	struct attn_job j = {
		.q = q, .k = k, .v = v, .d = dst, .scale = p->f[0], .n_past = p->i[0],
		.n_q = q->ne[2], .D = q->ne[0], .rep = q->ne[1] / n_kv_head,
		.kcvt = kern_cpu_cvt(k->dtype, PPRPC_F32),
		.vcvt = kern_cpu_cvt(v->dtype, PPRPC_F32),
		.kdirect = k->dtype == PPRPC_F32 && k->nb[0] == sizeof(float),
		.vdirect = v->dtype == PPRPC_F32 && v->nb[0] == sizeof(float),
	};

	if (!j.kcvt || !j.vcvt)
		return PPRPC_ETYPE;
	nchunks = ctx->nthreads < rows ? ctx->nthreads : rows;
	if (nchunks > MAX_CHUNKS)
		nchunks = MAX_CHUNKS;
	bounds = malloc((size_t)(nchunks + 1) * sizeof(*bounds));
	if (!bounds)
		return PPRPC_ENOMEM;
	total = (double)q->ne[1] * keys_before(j.n_q, j.n_past);
	bounds[0] = 0;
	for (int64_t c = 1; c < nchunks; c++) {
		bounds[c] = row_at(&j, n_kv_head, total * (double)c / (double)nchunks);
		if (bounds[c] < bounds[c - 1])
			bounds[c] = bounds[c - 1];
		if (bounds[c] > rows)
			bounds[c] = rows;
	}
	bounds[nchunks] = rows;
	j.bounds = bounds;

	/* Elements touched: each visited key reads a K and a V row. */
	work = total * 2.0 * (double)j.D;
	rc = kern_cpu_parallel(ctx, nchunks, work > 0x1p62 ? (int64_t)1 << 62 : (int64_t)work,
			       attn_chunks, &j);
	free(bounds);
	return rc;
}

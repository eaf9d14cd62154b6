/*
 * kernels/cpu/cpu_gdn_chunked.c — GATED_DELTA_NET in chunked (WY / UT)
 * form: the same recurrence as cpu_gdn.c (ops.h), C tokens at a time, with
 * the token-to-token work turned into small sgemms.
 *
 * Derivation.  One (sequence, head) item, one chunk of n <= C tokens
 * (positions 0..n-1; the last chunk is simply shorter: every product below
 * is sized n, so a ragged tail has no padding).  S0 is the d_k x d_v state
 * before the chunk.  Per key channel c, alpha_t = exp(g_t) <= 1 is token t's
 * decay and G_t = sum_{s<=t} g_s the cumulative log-gate, so
 *     E_tj = exp(G_t - G_j) = prod_{j<s<=t} alpha_s    (j <= t; <= 1)
 *     gamma_t = exp(G_t) = prod_{s<=t} alpha_s          (decay since chunk start)
 * (GDN: one alpha per token, the same for every channel.)  Unrolling
 * S'_t = D_t S_{t-1}, S_t = S'_t + k_t u_t^T inside the chunk:
 *     S_t  = gamma_t . S0 + sum_{j<=t} (E_tj . k_j) u_j^T      (. = per channel)
 *     u_t  = beta_t (v_t - S'_t^T k_t)
 *          = beta_t (v_t - S0^T (gamma_t . k_t)) - sum_{j<t} A_tj u_j,
 *     A_tj = beta_t sum_c k_tc E_tjc k_jc                       (j < t)
 * so with U, V the n x d_v matrices of rows u_t, v_t and Kg the rows
 * gamma_t . k_t, the unit lower-triangular system
 *     (I + A) U = diag(beta) (V - Kg S0)                        (UT transform)
 * gives every u_t of the chunk at once (forward substitution, in place).
 * Then, with P_tj = sum_c q_tc E_tjc k_jc for j <= t (0 above) and Qg the
 * rows gamma_t . q_t,
 *     O    = scale (Qg S0 + P U)
 *     S_n  = gamma_{n-1} . S0 + Kt^T U,    Kt_j = E_{n-1,j} . k_j
 * Everything outside A and P is an sgemm: Kg S0, Qg S0, P U, Kt^T U.
 *
 * Gates without overflow.  Only decays <= 1 are ever formed: each alpha is
 * exp of a clamped gate (<= 0) and every E, gamma, Kt factor is a product
 * of alphas (never exp(G_t) / exp(G_j), which overflows for strongly
 * negative gates; a product of factors <= 1 can only underflow, towards
 * its true value).  Products rather than exp of differences of cumulative
 * sums also keep relative precision when |G| is large (an f32 G of -100
 * carries an absolute error that would become a relative one) and give
 * E = 0, not NaN, for a gate of -inf.
 *
 * GDN: E is one n x n scalar matrix (n^2/2 multiplications), P = (Q K^T) . E
 * and A = diag(beta) (K K^T) . E from one sgemm each.
 *
 * KDA: E_tj is a d_k vector, so A and P are per-channel sums.  The chunk is
 * cut into sub-blocks of SUB tokens.  Inside a diagonal block the sums are
 * direct (for row t, walk j = t down to the block start, multiplying a
 * running decay vector by alpha_j: SUB/2 * 4 d_k flops per token).  For t
 * in block I and j in an earlier block J, split at the boundary r_I = the
 * last position before block I:
 *     E_tj = exp(G_t - G_r) . exp(G_r - G_j),   both factors <= 1
 *          = a_t . R^I_j,  a_t = prod_{s_I<=s<=t} alpha_s (within block I),
 *          R^I_j = prod_{j<s<=r_I} alpha_s
 * so the off-diagonal rows of block I are two sgemms: (Q . a)_I R^I K^T and
 * (K . a)_I R^I K^T.  R^I K is kept in one buffer Kr: after block I its
 * rows j < s_I are multiplied by block I's total decay and block I's rows
 * are appended as k_j . (decay from j to the block's end); after the last
 * block Kr is exactly Kt.  gamma_t = a_t . (decay of all earlier blocks).
 *
 * State: fp32, in the state part of dst (as the serial kernel), carried
 * from chunk to chunk.  Items (sequence, head) are split across threads;
 * each item's result does not depend on the thread count.
 */
#include "kernels/cpu/cpu_gdn_impl.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* KDA sub-block length: diagonal blocks cost SUB/2 * 4 d_k flops per token
 * done directly; off-diagonal ones go to sgemm. */
#define SUB 16

#define LANES 8

static float lanes_sum(const float acc[LANES])
{
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

struct scratch {
	float *q, *k;     /* n x d_k rows, normalised */
	float *qg, *kg;   /* gamma . q, gamma . k (KDA: first a . q, a . k) */
	float *kr;        /* Kr, finally Kt */
	float *alpha;     /* n x G per-token decays */
	float *blk;       /* KDA: n x d_k, a_t (decay from its block's start) */
	float *acc;       /* KDA: d_k, decay of the blocks so far; then gamma_{n-1} */
	float *wq, *wk;   /* KDA: d_k running products in diagonal blocks */
	float *u;         /* n x d_v: V, then the right-hand side, then U */
	float *P, *A, *E; /* C x C (leading dimension C) */
	float *beta;      /* n */
};

struct chunk_job {
	const struct gdn_args *a;
	int C;
	size_t floats;    /* scratch size per range */
};

static void load_chunk(const struct gdn_args *j, struct scratch *w, int64_t b, int64_t h,
		       int64_t t0, int n)
{
	const int64_t hk = gdn_key_head(j, h), d_k = j->d_k, d_v = j->d_v, G = j->kda ? d_k : 1;

	for (int t = 0; t < n; t++) {
		float *q = w->q + t * d_k, *k = w->k + t * d_k;

		j->copy(q, sizeof(float), gdn_at(j->q, hk, t0 + t, b), j->q->nb[0], d_k);
		j->copy(k, sizeof(float), gdn_at(j->k, hk, t0 + t, b), j->k->nb[0], d_k);
		if (j->l2) {
			gdn_l2_normalise(q, d_k, j->eps);
			gdn_l2_normalise(k, d_k, j->eps);
		}
		j->copy(w->u + t * d_v, sizeof(float), gdn_at(j->v, h, t0 + t, b), j->v->nb[0],
			d_v);
		w->beta[t] = gdn_ld(j->beta, 0, h, t0 + t, b);
		for (int64_t c = 0; c < G; c++)
			w->alpha[t * G + c] = expf(gdn_gate(gdn_ld(j->g, c, h, t0 + t, b)));
	}
}

/* GDN: scalar E; P, A from sgemm; Qg, Kg, Kr; acc = gamma_{n-1} (d_k). */
static void gdn_matrices(const struct gdn_args *j, struct scratch *w, int C, int n)
{
	const int d_k = (int)j->d_k;
	float *E = w->E, *P = w->P, *A = w->A;

	/* E_tj = prod_{j<s<=t} alpha_s; row t's running product ends at gamma_t. */
	for (int t = 0; t < n; t++) {
		float run = 1.0f;

		for (int s = t; s >= 0; s--) {
			E[t * C + s] = run;
			run *= w->alpha[s];
		}
		for (int c = 0; c < d_k; c++) {
			w->qg[t * d_k + c] = w->q[t * d_k + c] * run;
			w->kg[t * d_k + c] = w->k[t * d_k + c] * run;
		}
		if (t == n - 1)
			for (int c = 0; c < d_k; c++)
				w->acc[c] = run;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, d_k, 1.0f, w->q, d_k, w->k,
		    d_k, 0.0f, P, C);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, d_k, 1.0f, w->k, d_k, w->k,
		    d_k, 0.0f, A, C);
	for (int t = 0; t < n; t++) {
		for (int s = 0; s <= t; s++) {
			P[t * C + s] *= E[t * C + s];
			A[t * C + s] *= w->beta[t] * E[t * C + s];
		}
		for (int s = t + 1; s < n; s++)
			P[t * C + s] = 0.0f;
	}
	for (int s = 0; s < n; s++) {
		const float e = E[(n - 1) * C + s];

		for (int c = 0; c < d_k; c++)
			w->kr[s * d_k + c] = w->k[s * d_k + c] * e;
	}
}

/* KDA, diagonal block [s0, s1): P and A entries with both ends inside. */
static void kda_diag_block(const struct scratch *w, int C, int d_k, int s0, int s1)
{
	const int nv = d_k - d_k % LANES;

	for (int t = s0; t < s1; t++) {
		memcpy(w->wq, w->q + t * d_k, (size_t)d_k * sizeof(float));
		memcpy(w->wk, w->k + t * d_k, (size_t)d_k * sizeof(float));
		for (int s = t; s >= s0; s--) {
			const float *restrict ks = w->k + s * d_k, *restrict al = w->alpha + s * d_k;
			float *restrict wq = w->wq, *restrict wk = w->wk;
			float pq[LANES] = { 0 }, pk[LANES] = { 0 };
			int c;

			/* wq = q_t . E_ts, wk = k_t . E_ts here; then step past s. */
			for (c = 0; c < nv; c += LANES)
				for (int l = 0; l < LANES; l++) {
					pq[l] += wq[c + l] * ks[c + l];
					pk[l] += wk[c + l] * ks[c + l];
					wq[c + l] *= al[c + l];
					wk[c + l] *= al[c + l];
				}
			for (; c < d_k; c++) {
				pq[c % LANES] += wq[c] * ks[c];
				pk[c % LANES] += wk[c] * ks[c];
				wq[c] *= al[c];
				wk[c] *= al[c];
			}
			w->P[t * C + s] = lanes_sum(pq);
			if (s < t)
				w->A[t * C + s] = w->beta[t] * lanes_sum(pk);
		}
	}
}

/* KDA: P, A, Qg, Kg, Kr = Kt, acc = gamma_{n-1}. */
static void kda_matrices(const struct gdn_args *j, struct scratch *w, int C, int n)
{
	const int d_k = (int)j->d_k;

	for (int c = 0; c < d_k; c++)
		w->acc[c] = 1.0f;
	for (int s0 = 0; s0 < n; s0 += SUB) {
		const int s1 = s0 + SUB < n ? s0 + SUB : n;

		/* a_t (prefix within the block) into qg/kg: q . a, k . a. */
		for (int t = s0; t < s1; t++) {
			const float *al = w->alpha + t * d_k;
			const float *prev = t > s0 ? w->blk + (t - 1) * d_k : NULL;
			float *a = w->blk + t * d_k;  /* a_t, temporarily */

			for (int c = 0; c < d_k; c++)
				a[c] = prev ? prev[c] * al[c] : al[c];
		}
		for (int t = s0; t < s1; t++)
			for (int c = 0; c < d_k; c++) {
				const float a = w->blk[t * d_k + c];

				w->qg[t * d_k + c] = w->q[t * d_k + c] * a;
				w->kg[t * d_k + c] = w->k[t * d_k + c] * a;
			}
		/* Off-diagonal rows: Kr rows [0, s0) hold k_j . R_j for this block. */
		if (s0 > 0) {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s1 - s0, s0, d_k, 1.0f,
				    w->qg + s0 * d_k, d_k, w->kr, d_k, 0.0f, w->P + s0 * C, C);
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s1 - s0, s0, d_k, 1.0f,
				    w->kg + s0 * d_k, d_k, w->kr, d_k, 0.0f, w->A + s0 * C, C);
			for (int t = s0; t < s1; t++)
				for (int s = 0; s < s0; s++)
					w->A[t * C + s] *= w->beta[t];
		}
		kda_diag_block(w, C, d_k, s0, s1);
		for (int t = s0; t < s1; t++)
			for (int s = t + 1; s < n; s++)
				w->P[t * C + s] = 0.0f;

		/* gamma_t = a_t . acc (acc = decay of the earlier blocks). */
		for (int t = s0; t < s1; t++)
			for (int c = 0; c < d_k; c++) {
				w->qg[t * d_k + c] *= w->acc[c];
				w->kg[t * d_k + c] *= w->acc[c];
			}
		/* Advance Kr past this block: earlier rows decay by the block's
		 * total (a_{s1-1}); this block's rows get the decay from j to
		 * the block end, a suffix product. */
		{
			const float *tot = w->blk + (s1 - 1) * d_k;

			for (int s = 0; s < s0; s++)
				for (int c = 0; c < d_k; c++)
					w->kr[s * d_k + c] *= tot[c];
			for (int c = 0; c < d_k; c++)
				w->acc[c] *= tot[c];
		}
		{
			float *run = w->wq;  /* suffix product, 1 at the last row */

			for (int c = 0; c < d_k; c++)
				run[c] = 1.0f;
			for (int s = s1 - 1; s >= s0; s--) {
				const float *al = w->alpha + s * d_k;

				for (int c = 0; c < d_k; c++) {
					w->kr[s * d_k + c] = w->k[s * d_k + c] * run[c];
					run[c] *= al[c];
				}
			}
		}
	}
}

static void run_item(const struct chunk_job *cj, int64_t item, struct scratch *w)
{
	const struct gdn_args *j = cj->a;
	const int64_t h = item % j->h_v, b = item / j->h_v;
	const int d_k = (int)j->d_k, d_v = (int)j->d_v, C = cj->C, ldo = (int)(j->h_v * d_v);
	float *St = j->s + item * j->d_k * j->d_v;  /* S^T: d_v rows of d_k */

	for (int64_t c = 0; c < d_v; c++)
		j->copy(St + c * d_k, sizeof(float), gdn_at(j->s0, c, h, b), j->s0->nb[0], d_k);

	for (int64_t t0 = 0; t0 < j->t; t0 += C) {
		const int n = (int)(j->t - t0 < C ? j->t - t0 : C);
		float *o = j->o + ((b * j->t + t0) * j->h_v + h) * d_v;

		load_chunk(j, w, b, h, t0, n);
		if (j->kda)
			kda_matrices(j, w, C, n);
		else
			gdn_matrices(j, w, C, n);

		/* u <- diag(beta) (V - Kg S0) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, d_v, d_k, -1.0f, w->kg, d_k,
			    St, d_k, 1.0f, w->u, d_v);
		for (int t = 0; t < n; t++)
			for (int c = 0; c < d_v; c++)
				w->u[t * d_v + c] *= w->beta[t];
		/* (I + A) U = rhs, forward substitution in place. */
		for (int t = 1; t < n; t++) {
			float *restrict ut = w->u + t * d_v;

			for (int s = 0; s < t; s++) {
				const float a = w->A[t * C + s];
				const float *restrict us = w->u + s * d_v;

				for (int c = 0; c < d_v; c++)
					ut[c] -= a * us[c];
			}
		}
		/* O = scale (Qg S0 + P U), straight into dst's o rows. */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, d_v, d_k, j->scale, w->qg,
			    d_k, St, d_k, 0.0f, o, ldo);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d_v, n, j->scale, w->P, C,
			    w->u, d_v, 1.0f, o, ldo);
		/* S <- gamma_{n-1} . S0 + Kt^T U  (as S^T: columns scaled, + U^T Kt) */
		for (int r = 0; r < d_v; r++)
			for (int c = 0; c < d_k; c++)
				St[r * d_k + c] *= w->acc[c];
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d_v, d_k, n, 1.0f, w->u, d_v,
			    w->kr, d_k, 1.0f, St, d_k);
	}
}

static int run_range(void *arg, int64_t begin, int64_t end)
{
	const struct chunk_job *cj = arg;
	const struct gdn_args *j = cj->a;
	const size_t C = (size_t)cj->C, dk = (size_t)j->d_k, dv = (size_t)j->d_v;
	float *mem = calloc(cj->floats, sizeof(float)), *p = mem;
	struct scratch w;

	if (!mem)
		return PPRPC_ENOMEM;
	w.q = p, p += C * dk;
	w.k = p, p += C * dk;
	w.qg = p, p += C * dk;
	w.kg = p, p += C * dk;
	w.kr = p, p += C * dk;
	w.blk = p, p += C * dk;
	w.alpha = p, p += C * dk;
	w.acc = p, p += dk;
	w.wq = p, p += dk;
	w.wk = p, p += dk;
	w.u = p, p += C * dv;
	w.P = p, p += C * C;
	w.A = p, p += C * C;
	w.E = p, p += C * C;
	w.beta = p;
	for (int64_t item = begin; item < end; item++)
		run_item(cj, item, &w);
	free(mem);
	return 0;
}

int kern_cpu_gdn_chunked(const struct kern_cpu_ctx *ctx, const struct gdn_args *a, int chunk)
{
	struct chunk_job cj = { .a = a, .C = chunk };
	int64_t items = a->b * a->h_v, work, hd;
	int blas_threads, rc;
	size_t f;

	if (chunk != 16 && chunk != 32 && chunk != 64)
		return PPRPC_EINVAL;
	/* sgemm takes int dimensions and leading dimensions. */
	if (a->d_k > INT_MAX || a->d_v > INT_MAX || __builtin_mul_overflow(a->h_v, a->d_v, &hd) ||
	    hd > INT_MAX)
		return PPRPC_ETOOBIG;
	/* 7 C x d_k, 3 d_k, C x d_v, 3 C x C, C: d_k, d_v < 2^31, no overflow
	 * in size_t (64-bit) arithmetic. */
	f = 7 * (size_t)chunk * (size_t)a->d_k + 3 * (size_t)a->d_k +
	    (size_t)chunk * (size_t)a->d_v + 3 * (size_t)chunk * (size_t)chunk + (size_t)chunk;
	cj.floats = f;
	/* Elements of state touched, as the serial form, saturated. */
	if (__builtin_mul_overflow(items * a->d_k * a->d_v, a->t, &work))
		work = INT64_MAX;
	/* The sgemms here are small (at most C x d x d) and run from up to
	 * nthreads item threads at once; OpenBLAS's own threading on top made
	 * them several times slower (bench-kda_cpu: C = 64 at 0.15x serial).
	 * So OpenBLAS runs single-threaded for this op.  Its thread count is
	 * process-wide: in the daemon the device's worker thread is the only
	 * BLAS caller, so nothing else sees the change; elsewhere a concurrent
	 * BLAS call could run single-threaded meanwhile (speed only). */
	blas_threads = openblas_get_num_threads();
	if (blas_threads > 1)
		openblas_set_num_threads(1);
	rc = kern_cpu_parallel(ctx, items, work, run_range, &cj);
	if (blas_threads > 1)
		openblas_set_num_threads(blas_threads);
	return rc;
}

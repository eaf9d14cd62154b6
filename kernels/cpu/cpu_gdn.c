/*
 * kernels/cpu/cpu_gdn.c — GATED_DELTA_NET, serial recurrent form (ops.h).
 *
 * One work item is one (sequence b, value head h); items are independent,
 * so they are split across threads and each item's result does not depend
 * on the thread count.  The item's d_k x d_v state lives in the state part
 * of dst (contiguous, so column j — S[:, j], d_k floats — is contiguous):
 * the initial state is copied there first and updated in place, token by
 * token.  Per token and column the whole delta-rule step is two passes over
 * that column:
 *   pass 1: S[:, j] *= decay;  kv = S[:, j] . k
 *           u = beta * (v[j] - kv)
 *   pass 2: S[:, j] += u * k;  o[j] = scale * (S[:, j] . q)
 * This is exactly S' = D S, u = beta (v - S'^T k), S = S' + k u^T,
 * o = scale S^T q, evaluated column by column.
 *
 * The chunked prefill kernel (cpu_gdn_chunked.c) and the CUDA backend must
 * match this one within the tolerance stated in tests/unit/test_kernels_gdn.c;
 * this one stays the reference, the decode path and the fallback
 * (cpu_gdn_select.c chooses).
 */
#include "kernels/cpu/cpu_gdn_impl.h"

#include <stdlib.h>

/* Dot products are summed in LANES interleaved partial sums (element i into
 * lane i % LANES, lanes added pairwise at the end): a fixed order the
 * compiler can vectorise without -ffast-math. */
#define LANES 8

static float lanes_sum(const float acc[LANES])
{
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

static void step_column(float *restrict col, const float *restrict q, const float *restrict k,
			const float *restrict decay, bool per_channel, float beta, float vj,
			float scale, int64_t n, float *restrict oj)
{
	float kv[LANES] = { 0 }, ov[LANES] = { 0 }, u;
	const int64_t nv = n - n % LANES;
	int64_t i;

	if (per_channel) {
		for (i = 0; i < nv; i += LANES)
			for (int l = 0; l < LANES; l++) {
				col[i + l] *= decay[i + l];
				kv[l] += col[i + l] * k[i + l];
			}
		for (; i < n; i++) {
			col[i] *= decay[i];
			kv[i % LANES] += col[i] * k[i];
		}
	} else {
		const float a = decay[0];

		for (i = 0; i < nv; i += LANES)
			for (int l = 0; l < LANES; l++) {
				col[i + l] *= a;
				kv[l] += col[i + l] * k[i + l];
			}
		for (; i < n; i++) {
			col[i] *= a;
			kv[i % LANES] += col[i] * k[i];
		}
	}
	u = beta * (vj - lanes_sum(kv));
	for (i = 0; i < nv; i += LANES)
		for (int l = 0; l < LANES; l++) {
			col[i + l] += u * k[i + l];
			ov[l] += col[i + l] * q[i + l];
		}
	for (; i < n; i++) {
		col[i] += u * k[i];
		ov[i % LANES] += col[i] * q[i];
	}
	*oj = scale * lanes_sum(ov);
}

static void run_item(const struct gdn_args *j, int64_t item, float *q, float *k, float *decay)
{
	const int64_t h = item % j->h_v, b = item / j->h_v, hk = gdn_key_head(j, h);
	const int64_t d_k = j->d_k, d_v = j->d_v;
	float *S = j->s + item * d_k * d_v;

	for (int64_t c = 0; c < d_v; c++)
		j->copy(S + c * d_k, sizeof(float), gdn_at(j->s0, c, h, b), j->s0->nb[0], d_k);

	for (int64_t t = 0; t < j->t; t++) {
		const struct kern_tensor *v = j->v;
		const char *vrow = gdn_at(v, h, t, b);
		float *o = j->o + ((b * j->t + t) * j->h_v + h) * d_v;
		float beta = gdn_ld(j->beta, 0, h, t, b);

		j->copy(q, sizeof(float), gdn_at(j->q, hk, t, b), j->q->nb[0], d_k);
		j->copy(k, sizeof(float), gdn_at(j->k, hk, t, b), j->k->nb[0], d_k);
		if (j->l2) {
			gdn_l2_normalise(q, d_k, j->eps);
			gdn_l2_normalise(k, d_k, j->eps);
		}
		if (j->kda) {
			for (int64_t i = 0; i < d_k; i++)
				decay[i] = expf(gdn_gate(gdn_ld(j->g, i, h, t, b)));
		} else {
			decay[0] = expf(gdn_gate(gdn_ld(j->g, 0, h, t, b)));
		}
		for (int64_t c = 0; c < d_v; c++)
			step_column(S + c * d_k, q, k, decay, j->kda, beta,
				    *(const float *)(vrow + c * v->nb[0]), j->scale, d_k, &o[c]);
	}
}

static int run_range(void *arg, int64_t begin, int64_t end)
{
	const struct gdn_args *j = arg;
	/* d_k <= KERN_MAX_ELEMENTS (it is a source dimension): no overflow. */
	float *tmp = malloc((size_t)(3 * j->d_k) * sizeof(float));

	if (!tmp)
		return PPRPC_ENOMEM;
	for (int64_t item = begin; item < end; item++)
		run_item(j, item, tmp, tmp + j->d_k, tmp + 2 * j->d_k);
	free(tmp);
	return 0;
}

int gdn_args_init(struct gdn_args *a, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *q = src[GDN_SRC_Q], *v = src[GDN_SRC_V];
	int64_t n_o, n_s;
	int rc;

	*a = (struct gdn_args){
		.q = q, .k = src[GDN_SRC_K], .v = v, .g = src[GDN_SRC_G],
		.beta = src[GDN_SRC_BETA], .s0 = src[GDN_SRC_STATE],
		.d_k = q->ne[0], .d_v = v->ne[0], .h_v = v->ne[1], .t = q->ne[2], .b = q->ne[3],
		.rep = v->ne[1] / q->ne[1], .h_k = q->ne[1], .tiled = p->i[3] == 1,
		/* d_k = 1: either width, the same scalar path. */
		.kda = src[GDN_SRC_G]->ne[0] != 1,
		/* The rules guarantee p (scale != 0 was checked). */
		.l2 = p->i[0] == 1, .scale = p->f[0], .eps = p->f[1],
		.copy = kern_cpu_cvt(PPRPC_F32, PPRPC_F32),
	};
	rc = kern_gdn_layout(a->d_k, a->d_v, a->h_v, a->t, a->b, &n_o, &n_s);
	if (rc < 0)
		return rc;
	a->o = dst->data;
	a->s = (float *)dst->data + n_o;
	return 0;
}

int kern_cpu_gdn_serial(const struct kern_cpu_ctx *ctx, const struct gdn_args *a)
{
	int64_t items = a->b * a->h_v, n_s = items * a->d_k * a->d_v, work;

	/* Elements of state touched: items * T * d_k * d_v, saturated. */
	if (__builtin_mul_overflow(n_s, a->t, &work))
		work = INT64_MAX;
	return kern_cpu_parallel(ctx, items, work, run_range, (void *)a);
}

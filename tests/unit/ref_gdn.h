/*
 * tests/unit/ref_gdn.h — GATED_DELTA_NET in float64 (the recurrence of
 * kernels/ops.h), the reference of the serial and the chunked kernel tests.
 *
 * src: q, k, v, g, beta, state as the op takes them (any strides); the
 * shapes come from the tensors: q {dk, hk, T, B}, v {dv, hv, T, B}, g
 * {dk or 1, hv, T, B} (kda: per channel).  want and mag get the packed
 * layout of the op's output (o, then the final state); mag is what the
 * error is measured against: sum |S q| per output, the state's rms per
 * state entry.  tiled: value head h reads q/k head h % hk (the op's i[3] = 1),
 * else h / (hv / hk).  Returns 0, or -1 when out of memory.
 */
#ifndef PPRPC_TESTS_REF_GDN_H
#define PPRPC_TESTS_REF_GDN_H

#include <stdbool.h>

#include "tests/unit/ref.h"

static inline int ref_gdn_bcast(const struct kern_tensor src[6], bool kda, bool l2, bool tiled, double scale,
				double *want, double *mag)
{
	const struct kern_tensor *q = &src[0], *k = &src[1], *v = &src[2];
	const struct kern_tensor *g = &src[3], *be = &src[4], *s0 = &src[5];
	const int64_t dk = q->ne[0], hkn = q->ne[1], dv = v->ne[0], hv = v->ne[1];
	const int64_t T = q->ne[2], B = q->ne[3], rep = hv / hkn;
	const int64_t n_o = dv * hv * T * B;
	const double eps = 1e-6;
	double *S = malloc((size_t)(dk * dv) * sizeof(double));
	double *qq = malloc((size_t)dk * sizeof(double)), *kk = malloc((size_t)dk * sizeof(double));
	double *a = malloc((size_t)dk * sizeof(double)), *u = malloc((size_t)dv * sizeof(double));
	int rc = S && qq && kk && a && u ? 0 : -1;

	for (int64_t b = 0; b < B && rc == 0; b++)
		for (int64_t h = 0; h < hv; h++) {
			const int64_t hk = tiled ? h % hkn : h / rep;
			double *ws = want + n_o + (b * hv + h) * dk * dv;
			double *ms = mag + n_o + (b * hv + h) * dk * dv, rms = 0;

			for (int64_t j = 0; j < dv; j++)
				for (int64_t i = 0; i < dk; i++)
					S[j * dk + i] = ref_get(s0, i, j, h, b);
			for (int64_t t = 0; t < T; t++) {
				double nq = 0, nk = 0, beta = ref_get(be, 0, h, t, b);

				for (int64_t i = 0; i < dk; i++) {
					qq[i] = ref_get(q, i, hk, t, b);
					kk[i] = ref_get(k, i, hk, t, b);
					nq += qq[i] * qq[i];
					nk += kk[i] * kk[i];
					a[i] = exp(fmin(ref_get(g, kda ? i : 0, h, t, b), 0.0));
				}
				if (l2) {
					nq = fmax(sqrt(nq), eps);
					nk = fmax(sqrt(nk), eps);
					for (int64_t i = 0; i < dk; i++) {
						qq[i] /= nq;
						kk[i] /= nk;
					}
				}
				/* S' = D S;  u = beta (v - S'^T k);  S = S' + k u^T */
				for (int64_t j = 0; j < dv; j++) {
					double kv = 0;

					for (int64_t i = 0; i < dk; i++) {
						S[j * dk + i] *= a[i];
						kv += S[j * dk + i] * kk[i];
					}
					u[j] = beta * (ref_get(v, j, h, t, b) - kv);
				}
				for (int64_t j = 0; j < dv; j++) {
					double o = 0, m = 0;
					int64_t l = ((b * T + t) * hv + h) * dv + j;

					for (int64_t i = 0; i < dk; i++) {
						S[j * dk + i] += kk[i] * u[j];
						o += S[j * dk + i] * qq[i];
						m += fabs(S[j * dk + i] * qq[i]);
					}
					want[l] = scale * o;
					mag[l] = fabs(scale) * m;
				}
			}
			for (int64_t e = 0; e < dk * dv; e++) {
				ws[e] = S[e];
				rms += S[e] * S[e];
			}
			rms = sqrt(rms / (double)(dk * dv));
			for (int64_t e = 0; e < dk * dv; e++)
				ms[e] = rms;
		}
	free(S);
	free(qq);
	free(kk);
	free(a);
	free(u);
	return rc;
}

static inline int ref_gdn(const struct kern_tensor src[6], bool kda, bool l2, double scale, double *want,
			  double *mag)
{
	return ref_gdn_bcast(src, kda, l2, false, scale, want, mag);
}

#endif

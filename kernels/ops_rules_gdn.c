/*
 * kernels/ops_rules_gdn.c — shape, dtype and parameter rules of
 * GATED_DELTA_NET (semantics and the packed destination: ops.h).
 * Sources reaching here have the right count and valid descriptors.
 */
#include "kernels/ops_impl.h"

#include <math.h>

enum { SRC_Q, SRC_K, SRC_V, SRC_G, SRC_BETA, SRC_STATE };

static const char *const src_names[6] = { "q", "k", "v", "g", "beta", "state" };

int kern_gdn_layout(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t, int64_t b,
		    int64_t *ret_n_o, int64_t *ret_n_state)
{
	int64_t n_o, n_s, total;

	if (d_k < 1 || d_v < 1 || h_v < 1 || t < 1 || b < 1)
		return PPRPC_EINVAL;
	if (__builtin_mul_overflow(d_v, h_v, &n_o) || __builtin_mul_overflow(n_o, b, &n_o) ||
	    __builtin_mul_overflow(n_o, d_k, &n_s) || __builtin_mul_overflow(n_o, t, &n_o) ||
	    __builtin_add_overflow(n_o, n_s, &total) || total > KERN_MAX_ELEMENTS)
		return PPRPC_ETOOBIG;
	*ret_n_o = n_o;
	*ret_n_state = n_s;
	return 0;
}

/* src[s] must have exactly ne {a, b, c, d}. */
static int want_ne(const char *name, const struct kern_tensor *const *src, int s, int64_t a,
		   int64_t b, int64_t c, int64_t d, char *err, size_t errlen)
{
	const int64_t ne[PPRPC_MAX_DIMS] = { a, b, c, d };
	const struct kern_tensor *t = src[s];

	for (int i = 0; i < PPRPC_MAX_DIMS; i++)
		if (t->ne[i] != ne[i])
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: %s (src%d) is [%lld,%lld,%lld,%lld], expected "
					 "[%lld,%lld,%lld,%lld]", name, src_names[s], s,
					 (long long)t->ne[0], (long long)t->ne[1],
					 (long long)t->ne[2], (long long)t->ne[3], (long long)a,
					 (long long)b, (long long)c, (long long)d);
	return 0;
}

static int check_params(const char *name, const struct pprpc_op_params *p, char *err,
			size_t errlen)
{
	/* No params at all means scale 0, which is rejected below: the scale
	 * is always explicit so a forgotten one cannot silently zero o. */
	float scale = p ? p->f[0] : 0.0f, eps = p ? p->f[1] : 0.0f;
	int l2 = p ? p->i[0] : 0;

	if (!isfinite(scale) || scale == 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: f[0] (scale) = %g, must be finite and nonzero", name,
				 (double)scale);
	if (l2 != 0 && l2 != 1)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: i[0] (l2norm) = %d, must be 0 or 1",
				 name, l2);
	if (l2 && !(isfinite(eps) && eps > 0.0f))
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: f[1] (L2 eps) = %g, must be finite and > 0", name,
				 (double)eps);
	if (!l2 && eps != 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: f[1] (L2 eps) = %g without i[0] = 1, must be 0", name,
				 (double)eps);
	if (p && p->i[1] != 0 && p->i[1] != 16 && p->i[1] != 32 && p->i[1] != 64)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[1] (chunk length) = %d, must be 0 (automatic), 16, 32 or 64",
				 name, (int)p->i[1]);
	if (p && p->i[2] != 0 && p->i[2] != 1)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[2] (force serial) = %d, must be 0 or 1", name, (int)p->i[2]);
	if (p && p->i[3] != 0 && p->i[3] != 1)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[3] (head broadcast) = %d, must be 0 (h / (H_v/H_k)) or 1 "
				 "(h %% H_k)", name, (int)p->i[3]);
	if (p && p->i[4] != 0 && p->i[4] != 1)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[4] (CUDA chunked precision) = %d, must be 0 (bf16) or 1 "
				 "(split bf16)", name, (int)p->i[4]);
	if (p && p->i[1] != 0 && p->i[2] != 0)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: i[1] (chunk length) and i[2] (force serial) exclude each other",
				 name);
	return 0;
}

int kern_infer_gated_delta_net(const char *name, const struct pprpc_op_params *p,
			       const struct kern_tensor *const *src,
			       struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *q = src[SRC_Q], *v = src[SRC_V], *g = src[SRC_G];
	int64_t d_k = q->ne[0], h_k = q->ne[1], t = q->ne[2], b = q->ne[3];
	int64_t d_v = v->ne[0], h_v = v->ne[1];
	int64_t ne[PPRPC_MAX_DIMS] = { 0, 1, 1, 1 }, n_o, n_s;
	int rc;

	for (int s = 0; s < 6; s++)
		if (src[s]->dtype != PPRPC_F32)
			return kern_errf(err, errlen, PPRPC_ETYPE, "%s: %s (src%d) is %s, must be f32",
					 name, src_names[s], s, kern_dtype(src[s]->dtype)->name);
	rc = check_params(name, p, err, errlen);
	if (rc < 0)
		return rc;
	rc = want_ne(name, src, SRC_K, d_k, h_k, t, b, err, errlen);
	if (rc < 0)
		return rc;
	if (h_v % h_k != 0)
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: value heads (v.ne[1]=%lld) are not a multiple of q/k heads "
				 "(q.ne[1]=%lld)", name, (long long)h_v, (long long)h_k);
	rc = want_ne(name, src, SRC_V, d_v, h_v, t, b, err, errlen);
	if (rc < 0)
		return rc;
	if (g->ne[0] != 1 && g->ne[0] != d_k)
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: gate width g.ne[0]=%lld, must be 1 (GDN) or d_k=%lld (KDA)",
				 name, (long long)g->ne[0], (long long)d_k);
	rc = want_ne(name, src, SRC_G, g->ne[0], h_v, t, b, err, errlen);
	if (rc < 0)
		return rc;
	rc = want_ne(name, src, SRC_BETA, 1, h_v, t, b, err, errlen);
	if (rc < 0)
		return rc;
	rc = want_ne(name, src, SRC_STATE, d_k, d_v, h_v, b, err, errlen);
	if (rc < 0)
		return rc;
	rc = kern_gdn_layout(d_k, d_v, h_v, t, b, &n_o, &n_s);
	if (rc < 0)
		return kern_errf(err, errlen, rc, "%s: dst size overflows", name);
	ne[0] = n_o + n_s;
	rc = kern_tensor_init_contig(out, PPRPC_F32, ne);
	if (rc < 0)
		return kern_errf(err, errlen, rc, "%s: dst size overflows", name);
	return 0;
}

/*
 * kernels/ops_rules_attn.c — shape, dtype and parameter rules of the
 * attention ops: ROPE and ATTENTION (semantics: ops.h).  Sources reaching
 * here have the right count and valid descriptors.
 */
#include "kernels/ops_impl.h"

#include <math.h>

int kern_infer_rope(const char *name, const struct pprpc_op_params *p,
		    const struct kern_tensor *const *src,
		    struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *x = src[0], *pos = src[1];
	int32_t mode = p ? p->i[0] : 0, n_dims = p ? p->i[1] : 0;
	float base = p ? p->f[0] : 0.0f, fscale = p ? p->f[1] : 0.0f;

	if (x->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src0 is %s, must be f32",
				 name, kern_dt_name(x->dtype));
	if (pos->dtype != PPRPC_I32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: src1 is %s, must be i32",
				 name, kern_dt_name(pos->dtype));
	if (mode != PPRPC_ROPE_NORMAL && mode != PPRPC_ROPE_NEOX)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: mode i[0]=%d, must be 0 (normal) or 2 (neox)",
				 name, (int)mode);
	if (n_dims < 2 || n_dims % 2 != 0)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: n_dims i[1]=%d, must be even and >= 2", name, (int)n_dims);
	/* Zero is rejected too: a forgotten parameter must not mean "no
	 * rotation" silently. */
	if (!isfinite(base) || base <= 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: freq_base f[0]=%g, must be finite and > 0", name, base);
	if (!isfinite(fscale) || fscale <= 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: freq_scale f[1]=%g, must be finite and > 0", name, fscale);
	if (n_dims > x->ne[0])
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: n_dims %d > head_dim %lld",
				 name, (int)n_dims, (long long)x->ne[0]);
	if (x->ne[3] != 1)
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: src0.ne[3]=%lld, must be 1",
				 name, (long long)x->ne[3]);
	if (pos->ne[0] != x->ne[2] || pos->ne[1] != 1 || pos->ne[2] != 1 || pos->ne[3] != 1)
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: src1 is [%lld,%lld,%lld,%lld], must be [%lld] (one position per token)",
				 name, (long long)pos->ne[0], (long long)pos->ne[1],
				 (long long)pos->ne[2], (long long)pos->ne[3], (long long)x->ne[2]);
	return kern_out_contig(out, PPRPC_F32, x->ne, name, err, errlen);
}

int kern_infer_attention(const char *name, const struct pprpc_op_params *p,
			 const struct kern_tensor *const *src,
			 struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_tensor *q = src[0], *k = src[1], *v = src[2];
	float scale = p ? p->f[0] : 0.0f;
	int32_t n_past = p ? p->i[0] : 0;
	int64_t n_q = q->ne[2], n_kv = k->ne[2];
	const char *which[3] = { "q", "k", "v" };

	if (q->dtype != PPRPC_F32)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: q is %s, must be f32",
				 name, kern_dt_name(q->dtype));
	if (k->dtype != PPRPC_F32 && k->dtype != PPRPC_F16)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: k is %s, must be f32 or f16",
				 name, kern_dt_name(k->dtype));
	if (v->dtype != k->dtype)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: v is %s, k is %s: must match",
				 name, kern_dt_name(v->dtype), kern_dt_name(k->dtype));
	if (!isfinite(scale) || scale <= 0.0f)
		return kern_errf(err, errlen, PPRPC_EINVAL,
				 "%s: scale f[0]=%g, must be finite and > 0", name, scale);
	if (n_past < 0)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: n_past i[0]=%d is negative",
				 name, (int)n_past);
	for (int s = 0; s < 3; s++)
		if (src[s]->ne[3] != 1)
			return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: %s.ne[3]=%lld, must be 1",
					 name, which[s], (long long)src[s]->ne[3]);
	if (k->ne[0] != q->ne[0] || v->ne[0] != q->ne[0])
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: head_dim differs: q %lld, k %lld, v %lld", name,
				 (long long)q->ne[0], (long long)k->ne[0], (long long)v->ne[0]);
	if (v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2])
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: v is [%lld,%lld,%lld], k is [%lld,%lld,%lld]", name,
				 (long long)v->ne[0], (long long)v->ne[1], (long long)v->ne[2],
				 (long long)k->ne[0], (long long)k->ne[1], (long long)k->ne[2]);
	if (q->ne[1] % k->ne[1] != 0)
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: n_head %lld is not a multiple of n_kv_head %lld", name,
				 (long long)q->ne[1], (long long)k->ne[1]);
	/* Written as a subtraction: n_past + n_q could overflow int64 only in
	 * theory, but the habit costs nothing. */
	if (n_kv < n_q || n_past > n_kv - n_q)
		return kern_errf(err, errlen, PPRPC_ESHAPE,
				 "%s: n_past %d + n_q %lld exceeds n_kv %lld", name, (int)n_past,
				 (long long)n_q, (long long)n_kv);
	return kern_out_contig(out, PPRPC_F32, q->ne, name, err, errlen);
}

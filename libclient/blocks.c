/*
 * libclient/blocks.c — transformer blocks (attention, KDA, SwiGLU MLP) built
 * from the graph builder's ops.  Semantics and state layouts: the
 * "transformer blocks" section of pprpc.h.
 *
 * Every intermediate is a scratch tensor: the daemon places it.  Reshapes
 * are views of contiguous scratch outputs, checked here (the builder does
 * not check that a view stays inside its parent; the daemon would, later
 * and less clearly).
 */
#include "libclient/graph_builder.h"
#include "pprpc_blocks.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int failf(pprpc_graph_builder *gb, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int failf(pprpc_graph_builder *gb, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(gb->err, sizeof(gb->err), fmt, ap);
	va_end(ap);
	return code;
}

/* A required tensor index of the builder. */
static int need(pprpc_graph_builder *gb, int idx, const char *block, const char *what)
{
	if (idx < 0 || idx >= gb->nt)
		return failf(gb, PPRPC_EINVAL, "%s: %s is not a tensor of this builder (%d)", block,
			     what, idx);
	return 0;
}

/* An optional one: -1 is absent. */
static int maybe(pprpc_graph_builder *gb, int idx, const char *block, const char *what)
{
	return idx == -1 ? 0 : need(gb, idx, block, what);
}

static int expect_shape(pprpc_graph_builder *gb, int idx, int dtype, int64_t ne0, int64_t ne1,
			int64_t ne2, int64_t ne3, const char *block, const char *what)
{
	const pprpc_tensor *t = &gb->t[idx].t;

	if (t->dtype != dtype || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 ||
	    t->ne[3] != ne3)
		return failf(gb, dtype == t->dtype ? PPRPC_ESHAPE : PPRPC_ETYPE,
			     "%s: %s must be %s [%lld, %lld, %lld, %lld], is %s [%lld, %lld, %lld, %lld]",
			     block, what, kern_dtype(dtype)->name, (long long)ne0, (long long)ne1,
			     (long long)ne2, (long long)ne3,
			     kern_dtype(t->dtype) ? kern_dtype(t->dtype)->name : "?",
			     (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
			     (long long)t->ne[3]);
	return 0;
}

/* The activation x: f32 [n_embd, n_tok, 1, 1]; returns n_tok or an error. */
static int64_t check_x(pprpc_graph_builder *gb, int x, int64_t n_embd, const char *block)
{
	int rc = need(gb, x, block, "x");

	if (rc < 0)
		return rc;
	if (n_embd < 1)
		return failf(gb, PPRPC_EINVAL, "%s: n_embd must be >= 1", block);
	rc = expect_shape(gb, x, PPRPC_F32, n_embd, gb->t[x].t.ne[1], 1, 1, block, "x");
	return rc < 0 ? rc : gb->t[x].t.ne[1];
}

/* A view of the strided tensor src with new ne/strides at byte offset. */
static int view(pprpc_graph_builder *gb, int src, int64_t ne0, int64_t ne1, int64_t ne2,
		uint64_t nb1, uint64_t nb2, uint64_t offset)
{
	const pprpc_tensor *t = &gb->t[src].t;
	const uint64_t es = t->nb[0];
	const int64_t ne[4] = { ne0, ne1, ne2, 1 };
	const uint64_t nb[4] = { es, nb1, nb2, nb2 * (uint64_t)ne2 };

	return pprpc_gb_view(gb, src, t->dtype, ne, nb, offset);
}

/* src (contiguous) seen as [ne0, ne1, ne2]: same elements, new shape. */
static int reshape(pprpc_graph_builder *gb, int src, int64_t ne0, int64_t ne1, int64_t ne2)
{
	struct kern_tensor k = { .dtype = gb->t[src].t.dtype };
	const uint64_t es = kern_dtype(k.dtype)->type_size;
	int64_t n01, n;

	memcpy(k.ne, gb->t[src].t.ne, sizeof(k.ne));
	memcpy(k.nb, gb->t[src].t.nb, sizeof(k.nb));
	if (ne0 < 1 || ne1 < 1 || ne2 < 1 || __builtin_mul_overflow(ne0, ne1, &n01) ||
	    __builtin_mul_overflow(n01, ne2, &n) || kern_dtype(k.dtype)->blck != 1 ||
	    !kern_tensor_is_contiguous(&k) || kern_tensor_nelements(&k) != n)
		return failf(gb, PPRPC_ESHAPE,
			     "cannot view tensor %d [%lld, %lld, %lld, %lld] as [%lld, %lld, %lld]", src,
			     (long long)k.ne[0], (long long)k.ne[1], (long long)k.ne[2],
			     (long long)k.ne[3], (long long)ne0, (long long)ne1, (long long)ne2);
	return view(gb, src, ne0, ne1, ne2, es * (uint64_t)ne0, es * (uint64_t)(ne0 * ne1), 0);
}

/* rms_norm(x) * w (w < 0: no gain). */
static int norm_gain(pprpc_graph_builder *gb, int x, int w, float eps)
{
	int n = pprpc_gb_rms_norm(gb, x, eps, -1);

	return n < 0 || w < 0 ? n : pprpc_gb_mul(gb, n, w, -1);
}

/* h W, seen as [ne0, ne1, n_tok] (ne0 * ne1 must be W's output width). */
static int proj_heads(pprpc_graph_builder *gb, int w, int h, int64_t ne0, int64_t ne1)
{
	int y = pprpc_gb_mul_mat(gb, w, h, -1);

	return y < 0 ? y : reshape(gb, y, ne0, ne1, gb->t[y].t.ne[1]);
}

/* x + a Wo into dst; a is [in, n_tok] or heads [d, h, n_tok] with d * h = in
 * (Wo's input width), flattened for the projection. */
static int out_residual(pprpc_graph_builder *gb, int x, int wo, int a, int dst, int *out)
{
	const pprpc_tensor *t = &gb->t[a].t;
	const int64_t in = gb->t[wo].t.ne[0];
	const int64_t n_tok = gb->t[x].t.ne[1];
	int flat = t->ne[0] == in && t->ne[1] == n_tok && t->ne[2] == 1 && t->ne[3] == 1
			   ? a : reshape(gb, a, in, n_tok, 1);
	int y = flat < 0 ? flat : pprpc_gb_mul_mat(gb, wo, flat, -1);
	int r = y < 0 ? y : pprpc_gb_add(gb, x, y, dst);

	if (r < 0)
		return r;
	*out = r;
	return 0;
}

/* ---- attention ----------------------------------------------------------------------- */

PPRPC_API void pprpc_attn_block_init(pprpc_attn_block *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->norm_w = cfg->wq = cfg->wk = cfg->wv = cfg->wo = -1;
	cfg->k_cache = cfg->v_cache = -1;
	cfg->norm_eps = 1e-6f;
	cfg->rope_mode = PPRPC_ROPE_NEOX;
	cfg->rope_base = 10000.0f;
	cfg->rope_scale = 1.0f;
}

static int attn_check(pprpc_graph_builder *gb, const pprpc_attn_block *c, int pos, int n_past,
		      int64_t n_tok)
{
	static const char B[] = "attention block";
	const int req[] = { c->norm_w, c->wq, c->wk, c->wv, c->wo, c->k_cache, c->v_cache, pos };
	static const char *const names[] = { "norm_w", "wq", "wk", "wv", "wo", "k_cache",
					     "v_cache", "pos" };
	const pprpc_tensor *kc;
	int rc;

	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
		if ((rc = need(gb, req[i], B, names[i])) < 0)
			return rc;
	if (c->n_head < 1 || c->n_kv_head < 1 || c->head_dim < 1 || n_past < 0)
		return failf(gb, PPRPC_EINVAL, "%s: n_head, n_kv_head, head_dim must be >= 1, n_past >= 0",
			     B);
	kc = &gb->t[c->k_cache].t;
	if ((rc = expect_shape(gb, c->k_cache, kc->dtype, c->head_dim, c->n_kv_head, kc->ne[2], 1,
			       B, "k_cache")) < 0 ||
	    (rc = expect_shape(gb, c->v_cache, kc->dtype, c->head_dim, c->n_kv_head, kc->ne[2], 1,
			       B, "v_cache (like k_cache)")) < 0 ||
	    (rc = expect_shape(gb, pos, PPRPC_I32, n_tok, 1, 1, 1, B, "pos")) < 0)
		return rc;
	if ((int64_t)n_past + n_tok > kc->ne[2])
		return failf(gb, PPRPC_ESHAPE, "%s: n_past %d + n_tok %lld exceeds the cache (%lld)", B,
			     n_past, (long long)n_tok, (long long)kc->ne[2]);
	return 0;
}

/* Write rows val ([D, n_kv_head, n_tok] or [D * n_kv_head, n_tok], contiguous)
 * at rows pos of cache, and return the view of the cache's first n_kv
 * positions [D, n_kv_head, n_kv] (read after the write: nodes run in order). */
static int cache_update(pprpc_graph_builder *gb, int cache, int val, int pos, int64_t n_tok,
			int64_t n_kv)
{
	const int64_t d = gb->t[cache].t.ne[0], h = gb->t[cache].t.ne[1];
	const int64_t n_ctx = gb->t[cache].t.ne[2];
	int rows, v;

	if ((rows = reshape(gb, cache, d * h, n_ctx, 1)) < 0)
		return rows;
	if ((v = reshape(gb, val, d * h, n_tok, 1)) < 0)
		return v;
	if ((v = pprpc_gb_set_rows(gb, rows, v, pos)) < 0)
		return v;
	return view(gb, cache, d, h, n_kv, gb->t[cache].t.nb[1], gb->t[cache].t.nb[2], 0);
}

static int rope(pprpc_graph_builder *gb, const pprpc_attn_block *c, int x, int pos)
{
	const int n_dims = c->rope_dims ? c->rope_dims : (int)c->head_dim;

	return pprpc_gb_rope(gb, x, pos, c->rope_mode, n_dims, c->rope_base, c->rope_scale, -1);
}

PPRPC_API int pprpc_gb_attention_block(pprpc_graph_builder *gb, const pprpc_attn_block *cfg, int x,
				       int pos, int n_past, int dst, int *out)
{
	const int64_t n_tok = check_x(gb, x, cfg->n_embd, "attention block");
	const int64_t d = cfg->head_dim;
	const float scale = cfg->scale != 0.0f ? cfg->scale : (float)(1.0 / sqrt((double)d));
	int rc, h, q, k, v, kv_k, kv_v, a;

	if (n_tok < 0)
		return (int)n_tok;
	if ((rc = attn_check(gb, cfg, pos, n_past, n_tok)) < 0)
		return rc;
	if ((h = norm_gain(gb, x, cfg->norm_w, cfg->norm_eps)) < 0)
		return h;
	if ((q = proj_heads(gb, cfg->wq, h, d, cfg->n_head)) < 0)
		return q;
	if ((k = proj_heads(gb, cfg->wk, h, d, cfg->n_kv_head)) < 0)
		return k;
	if ((v = pprpc_gb_mul_mat(gb, cfg->wv, h, -1)) < 0)
		return v;
	if ((q = rope(gb, cfg, q, pos)) < 0)
		return q;
	if ((k = rope(gb, cfg, k, pos)) < 0)
		return k;
	if ((kv_k = cache_update(gb, cfg->k_cache, k, pos, n_tok, n_past + n_tok)) < 0)
		return kv_k;
	if ((kv_v = cache_update(gb, cfg->v_cache, v, pos, n_tok, n_past + n_tok)) < 0)
		return kv_v;
	if ((a = pprpc_gb_attention(gb, q, kv_k, kv_v, scale, n_past, -1)) < 0)
		return a;
	return out_residual(gb, x, cfg->wo, a, dst, out);
}

/* ---- SwiGLU MLP ---------------------------------------------------------------------- */

PPRPC_API void pprpc_mlp_block_init(pprpc_mlp_block *cfg)
{
	cfg->norm_w = cfg->w_gate = cfg->w_up = cfg->w_down = -1;
	cfg->norm_eps = 1e-6f;
}

PPRPC_API int pprpc_gb_swiglu_mlp(pprpc_graph_builder *gb, const pprpc_mlp_block *cfg, int x,
				  int dst, int *out)
{
	static const char B[] = "swiglu mlp";
	int64_t n_embd = x >= 0 && x < gb->nt ? gb->t[x].t.ne[0] : 1;
	int64_t n_tok = check_x(gb, x, n_embd, B);
	int rc, h, g, u, a;

	if (n_tok < 0)
		return (int)n_tok;
	if ((rc = need(gb, cfg->norm_w, B, "norm_w")) < 0 ||
	    (rc = need(gb, cfg->w_gate, B, "w_gate")) < 0 ||
	    (rc = need(gb, cfg->w_up, B, "w_up")) < 0 ||
	    (rc = need(gb, cfg->w_down, B, "w_down")) < 0)
		return rc;
	if ((h = norm_gain(gb, x, cfg->norm_w, cfg->norm_eps)) < 0)
		return h;
	if ((g = pprpc_gb_mul_mat(gb, cfg->w_gate, h, -1)) < 0)
		return g;
	if ((u = pprpc_gb_mul_mat(gb, cfg->w_up, h, -1)) < 0)
		return u;
	if ((a = pprpc_gb_swiglu(gb, g, u, -1)) < 0)
		return a;
	return out_residual(gb, x, cfg->w_down, a, dst, out);
}

/* ---- Kimi Delta Attention -------------------------------------------------------------- */

PPRPC_API void pprpc_kda_block_init(pprpc_kda_block *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->norm_w = cfg->wq = cfg->wk = cfg->wv = -1;
	cfg->conv_q = cfg->conv_k = cfg->conv_v = -1;
	cfg->wg_a = cfg->wg = cfg->g_bias = cfg->a_log = cfg->wb = -1;
	cfg->o_norm_w = cfg->wog = cfg->wo = -1;
	cfg->conv_state_in = cfg->conv_state_out = cfg->state_in = cfg->state_out = -1;
	cfg->conv_kernel = 4;
	cfg->norm_eps = 1e-6f;
	cfg->o_norm_eps = 1e-6f;
}

static int kda_check(pprpc_graph_builder *gb, const pprpc_kda_block *c)
{
	static const char B[] = "kda block";
	const int req[] = { c->norm_w, c->wq, c->wk, c->wv, c->conv_q, c->conv_k, c->conv_v,
			    c->wg, c->wb, c->wog, c->wo, c->conv_state_in, c->conv_state_out,
			    c->state_in, c->state_out };
	static const char *const rnames[] = { "norm_w", "wq", "wk", "wv", "conv_q", "conv_k",
					      "conv_v", "wg", "wb", "wog", "wo", "conv_state_in",
					      "conv_state_out", "state_in", "state_out" };
	const int opt[] = { c->wg_a, c->g_bias, c->a_log, c->o_norm_w };
	static const char *const onames[] = { "wg_a", "g_bias", "a_log", "o_norm_w" };
	int64_t ch;
	int rc;

	for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
		if ((rc = need(gb, req[i], B, rnames[i])) < 0)
			return rc;
	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if ((rc = maybe(gb, opt[i], B, onames[i])) < 0)
			return rc;
	if (c->h_k < 1 || c->h_v < 1 || c->d_k < 1 || c->d_v < 1 || c->h_v % c->h_k != 0 ||
	    c->conv_kernel < 2)
		return failf(gb, PPRPC_EINVAL,
			     "%s: h_k, h_v, d_k, d_v must be >= 1 with h_v %% h_k == 0, conv_kernel >= 2",
			     B);
	ch = 2 * c->h_k * c->d_k + c->h_v * c->d_v;
	if ((rc = expect_shape(gb, c->conv_state_in, PPRPC_F32, ch, c->conv_kernel - 1, 1, 1, B,
			       "conv_state_in")) < 0 ||
	    (rc = expect_shape(gb, c->conv_state_out, PPRPC_F32, ch, c->conv_kernel - 1, 1, 1, B,
			       "conv_state_out")) < 0 ||
	    (rc = expect_shape(gb, c->state_in, PPRPC_F32, c->d_k, c->d_v, c->h_v, 1, B,
			       "state_in")) < 0 ||
	    (rc = expect_shape(gb, c->state_out, PPRPC_F32, c->d_k, c->d_v, c->h_v, 1, B,
			       "state_out")) < 0)
		return rc;
	return 0;
}

/* One stream (q, k or v) of the short convolution: channels [off, off + ch)
 * of the conv state. */
struct conv_stream {
	int w;          /* projection weight */
	int taps;       /* [K, ch] */
	int64_t ch, off;
	int y;          /* out: silu(conv(h W)) [ch, n_tok] */
	int tail;       /* out: the last K-1 inputs [ch, K-1], the new state */
};

/* y[t] = silu(sum_j taps[j] * xc[t + j]) with xc = concat(state, h W) along
 * time: K products of shifted views and K-1 adds, in order j = 0 .. K-1. */
static int short_conv(pprpc_graph_builder *gb, const pprpc_kda_block *c, int h, int64_t n_tok,
		      struct conv_stream *s)
{
	const int64_t km1 = c->conv_kernel - 1;
	const uint64_t col = (uint64_t)s->ch * sizeof(float);
	const pprpc_tensor *st = &gb->t[c->conv_state_in].t;
	int x, old, xc, acc = -1;

	if ((x = pprpc_gb_mul_mat(gb, s->w, h, -1)) < 0)
		return x;
	if ((old = view(gb, c->conv_state_in, s->ch, km1, 1, st->nb[1], st->nb[1] * (uint64_t)km1,
			(uint64_t)s->off * st->nb[0])) < 0)
		return old;
	if ((xc = pprpc_gb_concat(gb, old, x, 1, -1)) < 0)
		return xc;
	for (int64_t j = 0; j < c->conv_kernel; j++) {
		const pprpc_tensor *tw = &gb->t[s->taps].t;
		const int64_t ne[4] = { s->ch, 1, 1, 1 };
		const uint64_t nb[4] = { tw->nb[1], tw->nb[1] * (uint64_t)s->ch,
					 tw->nb[1] * (uint64_t)s->ch, tw->nb[1] * (uint64_t)s->ch };
		int xj, wj, m;

		if (tw->ne[0] != c->conv_kernel || tw->ne[1] != s->ch || tw->ne[2] != 1 || tw->ne[3] != 1)
			return failf(gb, PPRPC_ESHAPE, "kda block: conv taps must be [%d, %lld]",
				     c->conv_kernel, (long long)s->ch);
		if ((wj = pprpc_gb_view(gb, s->taps, tw->dtype, ne, nb, (uint64_t)j * tw->nb[0])) < 0)
			return wj;
		if ((xj = view(gb, xc, s->ch, n_tok, 1, col, col * (uint64_t)n_tok,
			       (uint64_t)j * col)) < 0)
			return xj;
		if ((m = pprpc_gb_mul(gb, xj, wj, -1)) < 0)
			return m;
		if (acc >= 0 && (m = pprpc_gb_add(gb, acc, m, -1)) < 0)
			return m;
		acc = m;
	}
	if ((s->y = pprpc_gb_silu(gb, acc, -1)) < 0)
		return s->y;
	s->tail = view(gb, xc, s->ch, km1, 1, col, col * (uint64_t)km1, (uint64_t)n_tok * col);
	return s->tail < 0 ? s->tail : 0;
}

/* g = -exp(a_log) * softplus(h [Wg_a] Wg + g_bias), [d_k, h_v, n_tok]. */
static int kda_gate(pprpc_graph_builder *gb, const pprpc_kda_block *c, int h)
{
	int t = h, g, ea;

	if (c->wg_a >= 0 && (t = pprpc_gb_mul_mat(gb, c->wg_a, h, -1)) < 0)
		return t;
	if ((g = proj_heads(gb, c->wg, t, c->d_k, c->h_v)) < 0)
		return g;
	if (c->g_bias >= 0) {
		int b = reshape(gb, c->g_bias, c->d_k, c->h_v, 1);

		if (b < 0 || (g = pprpc_gb_add(gb, g, b, -1)) < 0)
			return b < 0 ? b : g;
	}
	if ((g = pprpc_gb_softplus(gb, g, -1)) < 0)
		return g;
	if (c->a_log < 0)
		return pprpc_gb_scale(gb, g, -1.0f, 0.0f, -1);
	/* -exp(A) is per head: scale the tiny [1, h_v] first, then broadcast. */
	if ((ea = pprpc_gb_exp(gb, c->a_log, -1)) < 0 ||
	    (ea = pprpc_gb_scale(gb, ea, -1.0f, 0.0f, -1)) < 0)
		return ea;
	return pprpc_gb_mul(gb, g, ea, -1);
}

PPRPC_API int pprpc_gb_kda_block(pprpc_graph_builder *gb, const pprpc_kda_block *cfg, int x,
				 int dst, int *out)
{
	const int64_t n_tok = check_x(gb, x, cfg->n_embd, "kda block");
	const int64_t cq = cfg->h_k * cfg->d_k, cv = cfg->h_v * cfg->d_v;
	struct conv_stream s[3] = {
		{ .w = cfg->wq, .taps = cfg->conv_q, .ch = cq, .off = 0 },
		{ .w = cfg->wk, .taps = cfg->conv_k, .ch = cq, .off = cq },
		{ .w = cfg->wv, .taps = cfg->conv_v, .ch = cv, .off = 2 * cq },
	};
	int rc, h, q, k, v, g, beta, packed, o, s_new, gate;

	if (n_tok < 0)
		return (int)n_tok;
	if ((rc = kda_check(gb, cfg)) < 0)
		return rc;
	if ((h = norm_gain(gb, x, cfg->norm_w, cfg->norm_eps)) < 0)
		return h;
	for (int i = 0; i < 3; i++)
		if ((rc = short_conv(gb, cfg, h, n_tok, &s[i])) < 0)
			return rc;
	if ((q = reshape(gb, s[0].y, cfg->d_k, cfg->h_k, n_tok)) < 0)
		return q;
	if ((k = reshape(gb, s[1].y, cfg->d_k, cfg->h_k, n_tok)) < 0)
		return k;
	if ((v = reshape(gb, s[2].y, cfg->d_v, cfg->h_v, n_tok)) < 0)
		return v;
	if ((g = kda_gate(gb, cfg, h)) < 0)
		return g;
	if ((beta = pprpc_gb_mul_mat(gb, cfg->wb, h, -1)) < 0 ||
	    (beta = pprpc_gb_sigmoid(gb, beta, -1)) < 0 ||
	    (beta = reshape(gb, beta, 1, cfg->h_v, n_tok)) < 0)
		return beta;
	if ((packed = pprpc_gb_gated_delta_net(gb, q, k, v, g, beta, cfg->state_in,
					       (float)(1.0 / sqrt((double)cfg->d_k)), 1, -1)) < 0)
		return packed;
	if ((rc = pprpc_gb_gdn_views(gb, packed, cfg->d_v, cfg->h_v, n_tok, 1, cfg->d_k, &o,
				     &s_new)) < 0)
		return rc;
	/* States last: every read of the old states is an earlier node. */
	if ((rc = pprpc_gb_cpy(gb, s_new, PPRPC_F32, cfg->state_out)) < 0)
		return rc;
	for (int i = 0; i < 3; i++) {
		const pprpc_tensor *st = &gb->t[cfg->conv_state_out].t;
		int sv = view(gb, cfg->conv_state_out, s[i].ch, cfg->conv_kernel - 1, 1, st->nb[1],
			      st->nb[1] * (uint64_t)(cfg->conv_kernel - 1),
			      (uint64_t)s[i].off * st->nb[0]);

		if (sv < 0 || (rc = pprpc_gb_cpy(gb, s[i].tail, PPRPC_F32, sv)) < 0)
			return sv < 0 ? sv : rc;
	}
	if ((o = norm_gain(gb, o, cfg->o_norm_w, cfg->o_norm_eps)) < 0)
		return o;
	if ((gate = proj_heads(gb, cfg->wog, h, cfg->d_v, cfg->h_v)) < 0 ||
	    (gate = pprpc_gb_sigmoid(gb, gate, -1)) < 0 ||
	    (o = pprpc_gb_mul(gb, o, gate, -1)) < 0)
		return gate < 0 ? gate : o;
	return out_residual(gb, x, cfg->wo, o, dst, out);
}

/*
 * tools/bench/graphs.c — pprpc-bench's graphs: one per (stage, step, slot).
 *
 * Graphs are static, so attention needs one per (n_past, n_tok): step i is
 * prefill ubatch i (n_past = i * ub, the last one ragged when ub does not
 * divide the prompt) or decode step i - nub (one token).  A graph reads its
 * input from the stage's boundary slot k (stage 0: the ubatch's token ids;
 * later stages: the previous stage's activations) and writes its output to
 * slot k (the last stage: the token ARGMAX picks from the ubatch's last
 * position), so the pipeline (pprpc_pipeline.h) moves every boundary.
 * Positions live in a buffer of n_ctx entries; KV caches and KDA states in
 * the stage's state buffer, updated in place.
 */
#include <stdio.h>

#include "pprpc_blocks.h"
#include "tools/bench/bench.h"

void step_shape(const struct ctx *x, int i, int *n_past, int *n_tok)
{
	if (i < x->nub) {
		*n_past = i * x->m.ub;
		*n_tok = x->m.P - *n_past < x->m.ub ? x->m.P - *n_past : x->m.ub;
	} else {
		*n_past = x->m.P + (i - x->nub);
		*n_tok = 1;
	}
}

static int tadd(pprpc_graph_builder *gb, pprpc_buffer b, uint64_t off, int dtype, int64_t ne0, int64_t ne1,
		int64_t ne2)
{
	pprpc_tensor t = pprpc_tensor_make(b, off, dtype, ne0, ne1, ne2, 1);

	return pprpc_gb_tensor(gb, &t);
}

static int wadd(pprpc_graph_builder *gb, const struct ctx *x, const struct stage *st, int l, int id)
{
	struct wdesc d;

	weight_desc(&x->m, l, id, &d);
	return tadd(gb, st->w, st->woff[l < 0 ? 0 : l - st->l0 + 1][id], d.dtype, d.ne0, d.ne1, 1);
}

/* A block's weight field and the weight that fills it. */
struct wmap {
	int *field;
	int id;
};

static void wadd_all(pprpc_graph_builder *gb, const struct ctx *x, const struct stage *st, int l,
		     const struct wmap *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*w[i].field = wadd(gb, x, st, l, w[i].id);
}

/* Layer l's mixer (attention or KDA) on h; returns the new h or a code. */
static int add_mixer(pprpc_graph_builder *gb, struct ctx *x, const struct stage *st, int l, int h, int pos,
		     int n_past)
{
	const struct cfg *m = &x->m;
	const int64_t HD = (int64_t)m->H * m->D;
	uint64_t so = st->soff[l - st->l0];
	int rc;

	if (is_attn(m, l)) {
		pprpc_attn_block a;
		uint64_t cb = pprpc_type_nbytes(PPRPC_F16, m->D, m->H, m->n_ctx, 1);

		pprpc_attn_block_init(&a);
		{
			struct wmap w[] = { { &a.norm_w, A_NORM }, { &a.wq, A_Q }, { &a.wk, A_K }, { &a.wv, A_V },
					    { &a.wo, A_O } };

			wadd_all(gb, x, st, l, w, sizeof(w) / sizeof(w[0]));
		}
		a.k_cache = tadd(gb, st->st, so, PPRPC_F16, m->D, m->H, m->n_ctx);
		a.v_cache = tadd(gb, st->st, so + cb, PPRPC_F16, m->D, m->H, m->n_ctx);
		a.n_embd = m->E;
		a.n_head = a.n_kv_head = m->H;
		a.head_dim = m->D;
		rc = pprpc_gb_attention_block(gb, &a, h, pos, n_past, -1, &h);
	} else {
		pprpc_kda_block k;

		pprpc_kda_block_init(&k);
		{
			struct wmap w[] = { { &k.norm_w, K_NORM }, { &k.wq, K_Q }, { &k.wk, K_K }, { &k.wv, K_V },
					    { &k.conv_q, K_CQ }, { &k.conv_k, K_CK }, { &k.conv_v, K_CV },
					    { &k.wg, K_G }, { &k.g_bias, K_GB }, { &k.a_log, K_ALOG }, { &k.wb, K_B },
					    { &k.o_norm_w, K_ON }, { &k.wog, K_OG }, { &k.wo, K_O } };

			wadd_all(gb, x, st, l, w, sizeof(w) / sizeof(w[0]));
		}
		k.conv_kernel = KC;
		/* States updated in place (one writer, nodes in order). */
		k.conv_state_in = k.conv_state_out = tadd(gb, st->st, so, PPRPC_F32, 3 * HD, KC - 1, 1);
		k.state_in = k.state_out =
			tadd(gb, st->st, so + (uint64_t)3 * HD * (KC - 1) * 4, PPRPC_F32, m->D, m->D, m->H);
		k.n_embd = m->E;
		k.h_k = k.h_v = m->H;
		k.d_k = k.d_v = m->D;
		rc = pprpc_gb_kda_block(gb, &k, h, -1, &h);
	}
	return rc < 0 ? rc : h;
}

/* The graph of stage s for n_tok tokens at n_past on slot k. */
static int build(struct ctx *x, int s, int n_past, int n_tok, int k, pprpc_graph *out)
{
	const struct cfg *m = &x->m;
	struct stage *st = &x->st[s];
	const int last = s == x->S - 1;
	pprpc_graph_builder *gb;
	int h, pos, rc = 0;

	if (pprpc_graph_builder_new(&gb) < 0)
		return PPRPC_ENOMEM;
	pos = tadd(gb, st->pos, (uint64_t)n_past * 4, PPRPC_I32, n_tok, 1, 1);
	if (s == 0)
		h = pprpc_gb_get_rows(gb, wadd(gb, x, st, -1, G_EMB), tadd(gb, st->in[k], 0, PPRPC_I32, n_tok, 1, 1),
				      -1);
	else
		h = tadd(gb, st->in[k], 0, PPRPC_F32, m->E, n_tok, 1);
	for (int l = st->l0; l < st->l1 && h >= 0; l++) {
		pprpc_mlp_block mb;
		int dst = -1;

		if ((h = add_mixer(gb, x, st, l, h, pos, n_past)) < 0)
			break;
		if (!last && l == st->l1 - 1)
			dst = tadd(gb, st->out[k], 0, PPRPC_F32, m->E, n_tok, 1);
		pprpc_mlp_block_init(&mb);
		{
			struct wmap w[] = { { &mb.norm_w, M_NORM }, { &mb.w_gate, M_GATE }, { &mb.w_up, M_UP },
					    { &mb.w_down, M_DOWN } };

			wadd_all(gb, x, st, l, w, sizeof(w) / sizeof(w[0]));
		}
		if ((rc = pprpc_gb_swiglu_mlp(gb, &mb, h, dst, &h)) < 0)
			h = rc;
	}
	if (h >= 0 && last) {
		/* Greedy sampling of the ubatch's last token only. */
		const int64_t ne[4] = { m->E, 1, 1, 1 };
		const uint64_t nb[4] = { 4, (uint64_t)m->E * 4, (uint64_t)m->E * 4, (uint64_t)m->E * 4 };
		int v = pprpc_gb_view(gb, h, PPRPC_F32, ne, nb, (uint64_t)(n_tok - 1) * m->E * 4);
		int n = v < 0 ? v : pprpc_gb_rms_norm(gb, v, 1e-6f, -1);
		int g = n < 0 ? n : pprpc_gb_mul(gb, n, wadd(gb, x, st, -1, G_FNORM), -1);
		int lg = g < 0 ? g : pprpc_gb_mul_mat(gb, wadd(gb, x, st, -1, G_HEAD), g, -1);

		h = lg < 0 ? lg : pprpc_gb_argmax(gb, lg, tadd(gb, st->out[k], 0, PPRPC_I32, 1, 1, 1));
	}
	if (h < 0) {
		fprintf(stderr, "pprpc-bench: stage %d graph (n_past %d, n_tok %d): %s (%s)\n", s, n_past, n_tok,
			pprpc_strerror(h), pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		x->rpc_errors++;
		return h;
	}
	rc = pprpc_graph_create(st->c, 0, gb, out);
	pprpc_graph_builder_free(gb);
	if (rc < 0)
		return rpc_fail(x, s, "graph_create", rc);
	return 0;
}

int graph_get(struct ctx *x, int s, int i, int k, pprpc_graph *out)
{
	pprpc_graph *g = &x->st[s].g[i][k];
	int n_past, n_tok, rc;

	if (!g->id) {
		step_shape(x, i, &n_past, &n_tok);
		if ((rc = build(x, s, n_past, n_tok, k, g)) < 0)
			return rc;
	}
	*out = *g;
	return 0;
}

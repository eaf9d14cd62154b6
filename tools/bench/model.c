/*
 * tools/bench/model.c — pprpc-bench's hybrid transformer: weight shapes,
 * seeded weight bytes, where each stage keeps its weights and states.
 *
 * Layer l is an attention layer when (l + 1) % (kda_ratio + 1) == 0, else a
 * KDA layer; every layer ends with a SwiGLU MLP.  Weights come from --seed
 * per (layer, tensor), so any split computes the same model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"   /* kern_f32_to_f16 / _bf16 */
#include "tools/bench/bench.h"
#include "util/hash.h"

int rpc_fail(struct ctx *x, int s, const char *what, int rc)
{
	x->rpc_errors++;
	fprintf(stderr, "\npprpc-bench: rank %d (%s): %s failed: %s: %s\n", s, x->st[s].addr, what,
		pprpc_strerror(rc), pprpc_last_error(x->st[s].c));
	return rc;
}

int is_attn(const struct cfg *m, int l)
{
	return (l + 1) % (m->ratio + 1) == 0;
}

const char *wtype_name(int wtype)
{
	return wtype == WT_F16 ? "f16" : wtype == WT_BF16 ? "bf16" : "q8_0";
}

static int wdt(const struct cfg *m)
{
	return m->wtype == WT_F16 ? PPRPC_F16 : m->wtype == WT_BF16 ? PPRPC_BF16 : PPRPC_Q8_0;
}

/* Shape of weight id of a layer (attn or not); 0 if the layer has none.
 * Every q8_0 weight has ne0 in {E, F, H*D}. */
static int wshape(const struct cfg *m, int attn, int id, struct wdesc *d)
{
	const int64_t E = m->E, HD = (int64_t)m->H * m->D;
	const int p = wdt(m);

	if (id >= A_NORM && id <= A_O && !attn)
		return 0;
	if (id >= K_NORM && id <= K_O && attn)
		return 0;
	switch (id) {
	case M_NORM: case A_NORM: case K_NORM: *d = (struct wdesc){ PPRPC_F32, E, 1, 0.8, 1.2 }; break;
	case M_GATE: case M_UP: *d = (struct wdesc){ p, E, m->F, 0, 0 }; break;
	case M_DOWN: *d = (struct wdesc){ p, m->F, E, 0, 0 }; break;
	case A_Q: case A_K: case A_V: case K_Q: case K_K: case K_V: case K_G: case K_OG:
		*d = (struct wdesc){ p, E, HD, 0, 0 };
		break;
	case A_O: case K_O: *d = (struct wdesc){ p, HD, E, 0, 0 }; break;
	case K_CQ: case K_CK: case K_CV: *d = (struct wdesc){ PPRPC_F32, KC, HD, -0.6, 0.6 }; break;
	case K_GB: *d = (struct wdesc){ PPRPC_F32, HD, 1, -2.5, -1.0 }; break;
	case K_ALOG: *d = (struct wdesc){ PPRPC_F32, 1, m->H, -1.0, 0.5 }; break;
	case K_B: *d = (struct wdesc){ p, E, m->H, 0, 0 }; break;
	case K_ON: *d = (struct wdesc){ PPRPC_F32, m->D, 1, 0.7, 1.3 }; break;
	case G_EMB: *d = (struct wdesc){ p, E, m->V, -1.0, 1.0 }; break;
	case G_FNORM: *d = (struct wdesc){ PPRPC_F32, E, 1, 0.8, 1.2 }; break;
	case G_HEAD: *d = (struct wdesc){ p, E, m->V, 0, 0 }; break;
	default: return 0;
	}
	return 1;
}

int weight_desc(const struct cfg *m, int l, int id, struct wdesc *d)
{
	return wshape(m, l >= 0 && is_attn(m, l), id, d);
}

static double urand01(uint64_t *s)
{
	*s = splitmix64(*s);
	return unit_double(*s);
}

/* Generate the bytes of weight (layer, id); returns malloc'd bytes. */
static void *wgen(const struct cfg *m, int layer, int id, const struct wdesc *d, uint64_t *ret_size)
{
	const int64_t n = d->ne0 * d->ne1;
	uint64_t r = splitmix64(m->seed * 1000003ull + (uint64_t)(layer + 1) * 131ull + (uint64_t)id);
	double lo = d->lo, hi = d->hi;
	float *f = malloc((size_t)n * sizeof(float));
	uint64_t size = pprpc_type_nbytes(d->dtype, d->ne0, d->ne1, 1, 1);
	void *b = malloc(size);

	if (!f || !b) {
		free(f);
		free(b);
		return NULL;
	}
	if (lo == 0 && hi == 0) {
		hi = sqrt(3.0 / (double)d->ne0);
		lo = -hi;
	}
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)(lo + (hi - lo) * urand01(&r));
	if (d->dtype == PPRPC_F32)
		memcpy(b, f, size);
	else if (d->dtype == PPRPC_F16)
		for (int64_t i = 0; i < n; i++)
			((uint16_t *)b)[i] = kern_f32_to_f16(f[i]);
	else if (d->dtype == PPRPC_BF16)
		for (int64_t i = 0; i < n; i++)
			((uint16_t *)b)[i] = kern_f32_to_bf16(f[i]);
	else if (kern_q8_0_quantize_row(f, b, n) < 0) {
		free(f);
		free(b);
		return NULL;
	}
	free(f);
	*ret_size = size;
	return b;
}

static uint64_t al64(uint64_t v)
{
	return (v + 63) & ~63ull;
}

void plan_stage(const struct ctx *x, struct stage *st, int s)
{
	const struct cfg *m = &x->m;
	const int64_t HD = (int64_t)m->H * m->D;
	uint64_t w = 0, so = 0;
	struct wdesc d;

	memset(st->woff, 0xff, sizeof(st->woff));
	for (int id = G_EMB; id <= G_HEAD; id++) {
		if ((id == G_EMB && s != 0) || (id != G_EMB && s != x->S - 1))
			continue;
		wshape(m, 0, id, &d);
		st->woff[0][id] = w;
		w = al64(w + pprpc_type_nbytes(d.dtype, d.ne0, d.ne1, 1, 1));
	}
	for (int l = st->l0; l < st->l1; l++) {
		for (int id = 0; id < G_EMB; id++) {
			if (!wshape(m, is_attn(m, l), id, &d))
				continue;
			st->woff[l - st->l0 + 1][id] = w;
			w = al64(w + pprpc_type_nbytes(d.dtype, d.ne0, d.ne1, 1, 1));
		}
		st->soff[l - st->l0] = so;
		if (is_attn(m, l))
			so = al64(so + 2 * pprpc_type_nbytes(PPRPC_F16, m->D, m->H, m->n_ctx, 1));
		else
			so = al64(so + (uint64_t)3 * HD * (KC - 1) * 4 + (uint64_t)m->D * m->D * m->H * 4);
	}
	st->wbytes = w;
	st->sbytes = so ? so : 64;
}

uint64_t stage_in_bytes(const struct ctx *x, int s, int n_tok)
{
	return s == 0 ? (uint64_t)n_tok * 4 : (uint64_t)x->m.E * n_tok * 4;
}

uint64_t stage_out_bytes(const struct ctx *x, int s, int n_tok)
{
	return s == x->S - 1 ? 4 : (uint64_t)x->m.E * n_tok * 4;
}

uint64_t io_bytes(const struct ctx *x, int s, int ub)
{
	return al64((uint64_t)x->m.n_ctx * 4) + 2 * (al64(stage_in_bytes(x, s, ub)) + al64(stage_out_bytes(x, s, ub)));
}

int upload_weights(struct ctx *x, int s)
{
	const struct cfg *m = &x->m;
	struct stage *st = &x->st[s];
	int rc;

	if ((rc = pprpc_buffer_alloc(st->c, 0, st->wbytes, &st->w)) < 0)
		return rpc_fail(x, s, "buffer_alloc (weights)", rc);
	if ((rc = pprpc_buffer_alloc(st->c, 0, st->sbytes, &st->st)) < 0)
		return rpc_fail(x, s, "buffer_alloc (states)", rc);
	for (int li = 0; li <= st->l1 - st->l0; li++)
		for (int id = 0; id < NWID; id++) {
			int l = li ? st->l0 + li - 1 : -1;
			struct wdesc d;
			uint64_t size;
			void *b;

			if (st->woff[li][id] == UINT64_MAX || !wshape(m, l >= 0 && is_attn(m, l), id, &d))
				continue;
			if (!(b = wgen(m, l, id, &d, &size))) {
				fprintf(stderr, "pprpc-bench: cannot make weight %d of layer %d\n", id, l);
				return -1;
			}
			rc = pprpc_tensor_set(st->c, st->w, st->woff[li][id], b, size);
			free(b);
			if (rc < 0)
				return rpc_fail(x, s, "tensor_set (weights)", rc);
		}
	return 0;
}

/*
 * pprpc-bench — the main benchmark: a hybrid transformer (KDA and attention
 * layers, SwiGLU MLPs, embedding + final norm + LM head + greedy ARGMAX on
 * the device) split over the ranks, run as a prefill (ubatches) then a
 * greedy decode, sequential vs pipelined, in paired A/B runs.
 *
 * Layer l is an attention layer when (l + 1) % (kda_ratio + 1) == 0, else a
 * KDA layer; every layer ends with a SwiGLU MLP.  Weights come from --seed
 * per (layer, tensor), so any split computes the same model.
 *
 * Per stage, one graph per (n_past, n_tok) shape is built once (prefill
 * ubatches and decode steps) and reused by every pair and both modes; the
 * KV caches and KDA states live in one state buffer per stage that a
 * BUFFER_CLEAR resets before each run.  Token ids and positions live in
 * buffers of n_ctx entries and each graph reads its slice, so a prefill
 * ubatch needs no upload at all; a decode step uploads one id to stage 0.
 *
 * seq: each ubatch goes through the stages one after another, every call
 * synchronous (RUN; SEND + RECV then synchronize).  pp: the whole prefill is
 * issued asynchronously, per ubatch per stage RECV -> RUN -> SIGNAL -> SEND;
 * the in-order queues order the ubatches of one stage (KV cache, KDA
 * state, and the single boundary buffer: a stage's RECV of ubatch u+1 comes
 * after its RUN of u on the same queue, and SEND snapshots the output into
 * the daemon's staging ring before the next RUN overwrites it).  Decode is
 * the same in both modes: one token at a time.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "pprpc_blocks.h"
#include "tools/common/spawn.h"
#include "tools/common/measure.h"
#include "util/hash.h"
#include "util/list.h"

#define MAX_RANKS 16
#define MAX_PAIRS 64
#define MAX_LAYERS 256
#define MAX_SWEEP 16
#define KC 4   /* KDA conv taps */

static const char usage[] =
	"usage: pprpc-bench [--ranks HOST:PORT[,...] | --spawn N] [options]\n"
	"\n"
	"Builds a hybrid transformer (KDA + attention layers with RoPE and a KV cache,\n"
	"RMSNorm, SwiGLU MLPs, embedding, LM head and greedy ARGMAX on the device) with\n"
	"seeded weights, splits its layers over the ranks, and runs a prefill of the\n"
	"prompt in ubatches plus a greedy decode, in paired seq/pp runs (alternating\n"
	"order).  Reports prompt tok/s, TTFT, decode tok/s, the output token hash (must\n"
	"match between modes), memory, RPC errors, graph reuse, stage boundaries, and\n"
	"the geometric-mean pp/seq prompt-throughput ratio with a bootstrap 95% CI.\n"
	"Exit 0 when every run produced the same tokens and no RPC failed; 1 otherwise;\n"
	"2 for bad usage.\n"
	"\n"
	"  --ranks LIST           use running daemons (one stage each, in order)\n"
	"  --spawn N              start N local pprpcd (--threads 1) and stop them after\n"
	"  --spawn-devices LIST   with --spawn: rank i serves device LIST[i] (default cpu)\n"
	"  --spawn-arg ARG        with --spawn: extra daemon argument (repeatable)\n"
	"  --d-model N            hidden size (default 256)\n"
	"  --heads N              attention heads and KDA heads (default 4)\n"
	"  --head-dim N           head size (default 64)\n"
	"  --ff N                 MLP hidden size (default 2 * d-model)\n"
	"  --layers N             layers (default 8)\n"
	"  --kda-ratio R          R KDA layers per attention layer (default 3)\n"
	"  --vocab N              vocabulary (default 1024)\n"
	"  --wtype f16|bf16|q8_0  projection / embedding / head weights (default f16)\n"
	"  --split A,B,...        layers per rank (default: even)\n"
	"  --prompt-tokens N      deterministic prompt of N ids (default 256)\n"
	"  --prompt-file FILE     prompt ids (integers, whitespace or comma separated)\n"
	"  --ubatch N             prefill ubatch (default 64)\n"
	"  --batch N              logical batch (as llama_decode's n_batch): pp pipelines\n"
	"                         the ubatches of one batch and synchronizes between\n"
	"                         batches; rounded down to whole ubatches (default: the\n"
	"                         whole prompt)\n"
	"  --ubatch-sweep LIST    run the benchmark for each ubatch of LIST, skipping those\n"
	"                         whose buffers would cross a rank's memory floor\n"
	"  --gen N                generated tokens (default 8)\n"
	"  --pairs K              paired seq/pp runs (default 3)\n"
	"  --seed S               weights and prompt (default 1)\n"
	"  --json FILE            results as JSON\n"
	"  --trace FILE           Chrome trace-event JSON of the last pair (client timestamps)\n"
	"  --svg FILE             SVG Gantt chart of the last pair's prefill\n"
	"  --help\n";

enum wtype_id { WT_F16, WT_BF16, WT_Q8 };

/* Weights of a layer: MLP first, then the mixer's. */
enum wid {
	M_NORM, M_GATE, M_UP, M_DOWN,
	A_NORM, A_Q, A_K, A_V, A_O,
	K_NORM, K_Q, K_K, K_V, K_CQ, K_CK, K_CV, K_G, K_GB, K_ALOG, K_B, K_ON, K_OG, K_O,
	G_EMB, G_FNORM, G_HEAD,   /* global: stage 0 / last stage, layer index -1 */
	NWID
};

struct wdesc {
	int dtype;
	int64_t ne0, ne1;
	double lo, hi;   /* 0, 0: projection, uniform +-sqrt(3 / ne0) */
};

struct cfg {
	int E, H, D, F, L, ratio, V, wtype, P, ub, gen, pairs;
	int batch;               /* logical batch in tokens; 0 = the whole prompt */
	uint64_t seed;
	int n_ctx;
	int32_t *prompt;
};

struct stage {
	pprpc_client *c;
	const char *addr;
	int l0, l1;                         /* layers [l0, l1) */
	pprpc_buffer w, st, io;
	uint64_t woff[MAX_LAYERS + 1][NWID]; /* [l - l0 + 1]; [0] = globals */
	uint64_t soff[MAX_LAYERS];          /* state offset per layer */
	uint64_t wbytes, sbytes, iobytes;
	pprpc_graph *g;                     /* [ngraphs] */
	pprpc_timeline tl;
	uint64_t tl_val;
	uint64_t freemin;
	uint64_t setup_creates;             /* graphs created before the pairs */
};

/* IO buffer: positions and ids (n_ctx each), token out, boundary in/out. */
struct iolay {
	uint64_t pos, ids, tok, x, out, size;
};

struct bstat {
	uint64_t bytes, transfers, send_us, recv_us;
};

struct run_res {
	double prefill_s, ttft_s, decode_s;
	uint64_t hash;
	int32_t *toks;
};

struct mode_acc {
	double tps[MAX_PAIRS], ttft[MAX_PAIRS], dtps[MAX_PAIRS];
	uint64_t hash;
	int nrun, hash_mismatch;
	int rpc_errors;
	uint64_t creates[MAX_RANKS], runs[MAX_RANKS], captures[MAX_RANKS], replays[MAX_RANKS];
	uint64_t freemin[MAX_RANKS];
	struct bstat b[MAX_RANKS];
};

struct slice {
	int s, u, mode;      /* mode 0 seq, 1 pp; u = -1 - step for decode */
	double a, b;
};

struct ctx {
	struct cfg m;
	int S;
	struct stage st[MAX_RANKS];
	struct iolay io;
	int nub;                 /* prefill ubatches */
	int ngraphs;             /* nub + decode steps */
	int rpc_errors;
	uint64_t xfer_id;
	int trace_req, trace_on;
	struct slice *sl;
	int nsl, capsl;
	double t0;
	const char *mode_name;
};

static double urand01(uint64_t *s)
{
	*s = splitmix64(*s);
	return unit_double(*s);
}

static int rpc_fail(struct ctx *x, int s, const char *what, int rc)
{
	x->rpc_errors++;
	fprintf(stderr, "\npprpc-bench: rank %d (%s): %s failed: %s: %s\n", s, x->st[s].addr, what,
		pprpc_strerror(rc), pprpc_last_error(x->st[s].c));
	return rc;
}

/* ---- model ---------------------------------------------------------------------------- */

static int is_attn(const struct cfg *m, int l)
{
	return (l + 1) % (m->ratio + 1) == 0;
}

static int wdt(const struct cfg *m)
{
	return m->wtype == WT_F16 ? PPRPC_F16 : m->wtype == WT_BF16 ? PPRPC_BF16 : PPRPC_Q8_0;
}

/* Shape of weight id of a layer (attn or not); 0 if the layer has none. */
static int wshape(const struct cfg *m, int attn, int id, struct wdesc *d)
{
	const int64_t E = m->E, HD = (int64_t)m->H * m->D, C = 3 * HD;
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
	(void)C;
	return 1;
}

/* K_B with q8_0 needs ne1 only; ne0 = E.  Every q8_0 weight has ne0 in {E, F, H*D}. */

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

/* Offsets of the stage's weights and states (no allocation). */
static void plan_stage(const struct ctx *x, struct stage *st, int s)
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

static struct iolay plan_io(const struct cfg *m, int ub)
{
	struct iolay io;

	io.pos = 0;
	io.ids = al64((uint64_t)m->n_ctx * 4);
	io.tok = io.ids + al64((uint64_t)m->n_ctx * 4);
	io.x = io.tok + 64;
	io.out = io.x + al64((uint64_t)m->E * ub * 4);
	io.size = io.out + al64((uint64_t)m->E * ub * 4);
	return io;
}

/* ---- graphs --------------------------------------------------------------------------- */

static int tadd(pprpc_graph_builder *gb, pprpc_buffer b, uint64_t off, int dtype, int64_t ne0,
		int64_t ne1, int64_t ne2)
{
	pprpc_tensor t = pprpc_tensor_make(b, off, dtype, ne0, ne1, ne2, 1);

	return pprpc_gb_tensor(gb, &t);
}

static int wadd(pprpc_graph_builder *gb, const struct ctx *x, const struct stage *st, int l, int id)
{
	struct wdesc d;
	int attn = l >= 0 && is_attn(&x->m, l);

	wshape(&x->m, attn, id, &d);
	return tadd(gb, st->w, st->woff[l < 0 ? 0 : l - st->l0 + 1][id], d.dtype, d.ne0, d.ne1, 1);
}

/* The graph of stage s for n_tok tokens at n_past. */
static int build_graph(struct ctx *x, int s, int n_past, int n_tok, pprpc_graph *out)
{
	const struct cfg *m = &x->m;
	struct stage *st = &x->st[s];
	const int last = s == x->S - 1;
	const int64_t HD = (int64_t)m->H * m->D;
	pprpc_graph_builder *gb;
	int h, pos, rc = 0, o = -1;

	if (pprpc_graph_builder_new(&gb) < 0)
		return PPRPC_ENOMEM;
	pos = tadd(gb, st->io, x->io.pos + (uint64_t)n_past * 4, PPRPC_I32, n_tok, 1, 1);
	if (s == 0) {
		int ids = tadd(gb, st->io, x->io.ids + (uint64_t)n_past * 4, PPRPC_I32, n_tok, 1, 1);

		h = pprpc_gb_get_rows(gb, wadd(gb, x, st, -1, G_EMB), ids, -1);
	} else {
		h = tadd(gb, st->io, x->io.x, PPRPC_F32, m->E, n_tok, 1);
	}
	for (int l = st->l0; l < st->l1 && h >= 0 && rc >= 0; l++) {
		uint64_t so = st->soff[l - st->l0];
		pprpc_mlp_block mb;
		int dst = -1;

		if (is_attn(m, l)) {
			pprpc_attn_block a;
			uint64_t cb = pprpc_type_nbytes(PPRPC_F16, m->D, m->H, m->n_ctx, 1);

			pprpc_attn_block_init(&a);
			a.norm_w = wadd(gb, x, st, l, A_NORM);
			a.wq = wadd(gb, x, st, l, A_Q);
			a.wk = wadd(gb, x, st, l, A_K);
			a.wv = wadd(gb, x, st, l, A_V);
			a.wo = wadd(gb, x, st, l, A_O);
			a.k_cache = tadd(gb, st->st, so, PPRPC_F16, m->D, m->H, m->n_ctx);
			a.v_cache = tadd(gb, st->st, so + cb, PPRPC_F16, m->D, m->H, m->n_ctx);
			a.n_embd = m->E;
			a.n_head = a.n_kv_head = m->H;
			a.head_dim = m->D;
			rc = pprpc_gb_attention_block(gb, &a, h, pos, n_past, -1, &h);
		} else {
			pprpc_kda_block k;

			pprpc_kda_block_init(&k);
			k.norm_w = wadd(gb, x, st, l, K_NORM);
			k.wq = wadd(gb, x, st, l, K_Q);
			k.wk = wadd(gb, x, st, l, K_K);
			k.wv = wadd(gb, x, st, l, K_V);
			k.conv_q = wadd(gb, x, st, l, K_CQ);
			k.conv_k = wadd(gb, x, st, l, K_CK);
			k.conv_v = wadd(gb, x, st, l, K_CV);
			k.conv_kernel = KC;
			k.wg = wadd(gb, x, st, l, K_G);
			k.g_bias = wadd(gb, x, st, l, K_GB);
			k.a_log = wadd(gb, x, st, l, K_ALOG);
			k.wb = wadd(gb, x, st, l, K_B);
			k.o_norm_w = wadd(gb, x, st, l, K_ON);
			k.wog = wadd(gb, x, st, l, K_OG);
			k.wo = wadd(gb, x, st, l, K_O);
			/* States updated in place (one writer, nodes in order). */
			k.conv_state_in = k.conv_state_out =
				tadd(gb, st->st, so, PPRPC_F32, 3 * HD, KC - 1, 1);
			k.state_in = k.state_out = tadd(gb, st->st, so + (uint64_t)3 * HD * (KC - 1) * 4,
							PPRPC_F32, m->D, m->D, m->H);
			k.n_embd = m->E;
			k.h_k = k.h_v = m->H;
			k.d_k = k.d_v = m->D;
			rc = pprpc_gb_kda_block(gb, &k, h, -1, &h);
		}
		if (rc < 0)
			break;
		if (!last && l == st->l1 - 1)
			dst = tadd(gb, st->io, x->io.out, PPRPC_F32, m->E, n_tok, 1);
		pprpc_mlp_block_init(&mb);
		mb.norm_w = wadd(gb, x, st, l, M_NORM);
		mb.w_gate = wadd(gb, x, st, l, M_GATE);
		mb.w_up = wadd(gb, x, st, l, M_UP);
		mb.w_down = wadd(gb, x, st, l, M_DOWN);
		rc = pprpc_gb_swiglu_mlp(gb, &mb, h, dst, &h);
	}
	if (rc >= 0 && h >= 0 && last) {
		/* Greedy sampling of the ubatch's last token only. */
		const int64_t ne[4] = { m->E, 1, 1, 1 };
		const uint64_t nb[4] = { 4, (uint64_t)m->E * 4, (uint64_t)m->E * 4, (uint64_t)m->E * 4 };
		int v = pprpc_gb_view(gb, h, PPRPC_F32, ne, nb, (uint64_t)(n_tok - 1) * m->E * 4);
		int n = v < 0 ? v : pprpc_gb_rms_norm(gb, v, 1e-6f, -1);
		int g = n < 0 ? n : pprpc_gb_mul(gb, n, wadd(gb, x, st, -1, G_FNORM), -1);
		int lg = g < 0 ? g : pprpc_gb_mul_mat(gb, wadd(gb, x, st, -1, G_HEAD), g, -1);

		o = lg < 0 ? lg : pprpc_gb_argmax(gb, lg, tadd(gb, st->io, x->io.tok, PPRPC_I32, 1, 1, 1));
		rc = o < 0 ? o : 0;
	}
	if (h < 0)
		rc = h;
	if (rc < 0) {
		fprintf(stderr, "pprpc-bench: stage %d graph (n_past %d, n_tok %d): %s (%s)\n", s, n_past,
			n_tok, pprpc_strerror(rc), pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		x->rpc_errors++;
		return rc;
	}
	rc = pprpc_graph_create(st->c, 0, gb, out);
	pprpc_graph_builder_free(gb);
	if (rc < 0)
		return rpc_fail(x, s, "graph_create", rc);
	return 0;
}

/* Step i: prefill ubatch i (i < nub) or decode step i - nub. */
static void step_shape(const struct ctx *x, int i, int *n_past, int *n_tok)
{
	if (i < x->nub) {
		*n_past = i * x->m.ub;
		*n_tok = x->m.P - *n_past < x->m.ub ? x->m.P - *n_past : x->m.ub;
	} else {
		*n_past = x->m.P + (i - x->nub);
		*n_tok = 1;
	}
}

/* ---- setup ---------------------------------------------------------------------------- */

static int upload_weights(struct ctx *x, int s)
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

/* Bytes rank s needs for a run at ubatch ub (boundary buffers and ids). */
static uint64_t io_bytes(const struct ctx *x, int ub)
{
	return plan_io(&x->m, ub).size;
}

static int setup_ubatch(struct ctx *x)
{
	const struct cfg *m = &x->m;
	int32_t *pos = malloc((size_t)m->n_ctx * 4);
	int rc = 0;

	if (!pos)
		return -1;
	for (int i = 0; i < m->n_ctx; i++)
		pos[i] = i;
	x->io = plan_io(m, m->ub);
	x->nub = (m->P + m->ub - 1) / m->ub;
	x->ngraphs = x->nub + (m->gen - 1);
	for (int s = 0; s < x->S && rc >= 0; s++) {
		struct stage *st = &x->st[s];

		st->g = calloc((size_t)x->ngraphs, sizeof(pprpc_graph));
		if (!st->g) {
			rc = -1;
			break;
		}
		if ((rc = pprpc_buffer_alloc(st->c, 0, x->io.size, &st->io)) < 0) {
			rpc_fail(x, s, "buffer_alloc (io)", rc);
			break;
		}
		if ((rc = pprpc_tensor_set(st->c, st->io, x->io.pos, pos, (uint64_t)m->n_ctx * 4)) < 0 ||
		    (s == 0 && (rc = pprpc_tensor_set(st->c, st->io, x->io.ids, m->prompt,
						      (uint64_t)m->P * 4)) < 0)) {
			rpc_fail(x, s, "tensor_set (positions, prompt)", rc);
			break;
		}
		for (int i = 0; i < x->ngraphs && rc >= 0; i++) {
			int np, nt;

			step_shape(x, i, &np, &nt);
			rc = build_graph(x, s, np, nt, &st->g[i]);
		}
	}
	free(pos);
	return rc;
}

static void teardown_ubatch(struct ctx *x)
{
	for (int s = 0; s < x->S; s++) {
		struct stage *st = &x->st[s];

		for (int i = 0; st->g && i < x->ngraphs; i++)
			if (st->g[i].id)
				pprpc_graph_free(st->c, st->g[i]);
		free(st->g);
		st->g = NULL;
		if (st->io.id)
			pprpc_buffer_free(st->c, st->io);
		st->io.id = 0;
	}
}

/* ---- runs ----------------------------------------------------------------------------- */

static void add_slice(struct ctx *x, int mode, int s, int u, double a, double b)
{
	if (!x->trace_on)
		return;
	if (x->nsl == x->capsl) {
		int nc = x->capsl ? 2 * x->capsl : 256;
		struct slice *n = realloc(x->sl, (size_t)nc * sizeof(*n));

		if (!n)
			return;
		x->sl = n;
		x->capsl = nc;
	}
	x->sl[x->nsl++] = (struct slice){ s, u, mode, a, b };
}

/* Boundary s -> s+1 of step i, queued. */
static int boundary_async(struct ctx *x, int s, int n_tok)
{
	uint64_t bytes = (uint64_t)x->m.E * n_tok * 4, id = ++x->xfer_id;
	int rc;

	if ((rc = pprpc_send_async(x->st[s].c, x->st[s].io, x->io.out, bytes, id, x->st[s + 1].addr)) < 0)
		return rpc_fail(x, s, "send", rc);
	if ((rc = pprpc_recv_async(x->st[s + 1].c, x->st[s + 1].io, x->io.x, bytes, id, x->st[s].addr)) < 0)
		return rpc_fail(x, s + 1, "recv", rc);
	return 0;
}

static int sync_all(struct ctx *x)
{
	int ret = 0;

	for (int s = 0; s < x->S; s++) {
		int rc = pprpc_synchronize(x->st[s].c, 0);

		if (rc < 0 && ret == 0)
			ret = rpc_fail(x, s, "synchronize", rc);
	}
	return ret;
}

static int prefill_seq(struct ctx *x)
{
	for (int u = 0; u < x->nub; u++) {
		int np, nt, rc;

		step_shape(x, u, &np, &nt);
		for (int s = 0; s < x->S; s++) {
			double a = now_s();

			if ((rc = pprpc_graph_run(x->st[s].c, x->st[s].g[u])) < 0)
				return rpc_fail(x, s, "graph_run", rc);
			add_slice(x, 0, s, u, a, now_s());
			if (s + 1 < x->S) {
				if ((rc = boundary_async(x, s, nt)) < 0)
					return rc;
				if ((rc = pprpc_synchronize(x->st[s].c, 0)) < 0)
					return rpc_fail(x, s, "synchronize (send)", rc);
				if ((rc = pprpc_synchronize(x->st[s + 1].c, 0)) < 0)
					return rpc_fail(x, s + 1, "synchronize (recv)", rc);
			}
		}
	}
	return 0;
}

/* Ubatches [u0, u1) queued at once; with tracing, completion times come
 * from polling each stage's timeline (a SIGNAL after each RUN). */
static int prefill_pp_batch(struct ctx *x, int u0, int u1)
{
	double issue = now_s();
	uint64_t base[MAX_RANKS];
	int nu = u1 - u0, rc;
	double *done = NULL;

	for (int s = 0; s < x->S; s++)
		base[s] = x->st[s].tl_val;
	for (int u = u0; u < u1; u++) {
		int np, nt;

		step_shape(x, u, &np, &nt);
		for (int s = 0; s < x->S; s++) {
			struct stage *st = &x->st[s];

			/* s > 0: the RECV was queued with the previous stage's SEND. */
			if ((rc = pprpc_graph_run_async(st->c, st->g[u])) < 0)
				return rpc_fail(x, s, "graph_run_async", rc);
			if ((rc = pprpc_signal(st->c, st->tl, ++st->tl_val)) < 0)
				return rpc_fail(x, s, "signal", rc);
			if (s + 1 < x->S && (rc = boundary_async(x, s, nt)) < 0)
				return rc;
		}
	}
	if (x->trace_on && (done = calloc((size_t)x->S * nu, sizeof(double)))) {
		int seen[MAX_RANKS] = { 0 }, left = x->S * nu;

		while (left > 0) {
			for (int s = 0; s < x->S; s++) {
				uint64_t v;

				if (seen[s] == nu)
					continue;
				if ((rc = pprpc_timeline_query(x->st[s].c, x->st[s].tl, &v)) < 0) {
					free(done);
					return rpc_fail(x, s, "timeline_query", rc);
				}
				while (seen[s] < nu && v >= base[s] + (uint64_t)seen[s] + 1) {
					done[s * nu + seen[s]++] = now_s();
					left--;
				}
			}
			if (left > 0) {
				struct timespec ts = { 0, 200000 };

				nanosleep(&ts, NULL);
			}
		}
		/* A slice starts when the stage's previous ubatch and its input
		 * (the previous stage's same ubatch) were both done. */
		for (int s = 0; s < x->S; s++)
			for (int k = 0; k < nu; k++) {
				double a = issue;

				if (k > 0 && done[s * nu + k - 1] > a)
					a = done[s * nu + k - 1];
				if (s > 0 && done[(s - 1) * nu + k] > a)
					a = done[(s - 1) * nu + k];
				add_slice(x, 1, s, u0 + k, a, done[s * nu + k]);
			}
		free(done);
	}
	return sync_all(x);
}

/* The prefill in logical batches: within a batch the ubatches pipeline
 * over the stages; between batches every stage synchronizes (a new
 * llama_decode call in llama.cpp terms). */
static int prefill_pp(struct ctx *x)
{
	int per = x->m.batch > 0 ? x->m.batch / x->m.ub : x->nub;

	if (per < 1)
		per = 1;
	for (int u0 = 0; u0 < x->nub; u0 += per) {
		int rc = prefill_pp_batch(x, u0, u0 + per < x->nub ? u0 + per : x->nub);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One token: decode step i (0-based) feeds tok at position P + i. */
static int decode_step(struct ctx *x, int mode, int i, int32_t tok)
{
	int g = x->nub + i, rc;

	if ((rc = pprpc_tensor_set_async(x->st[0].c, x->st[0].io, x->io.ids + (uint64_t)(x->m.P + i) * 4,
					 &tok, 4)) < 0)
		return rpc_fail(x, 0, "tensor_set_async (token)", rc);
	for (int s = 0; s < x->S; s++) {
		double a = now_s();

		if ((rc = pprpc_graph_run_async(x->st[s].c, x->st[s].g[g])) < 0)
			return rpc_fail(x, s, "graph_run_async", rc);
		if (s + 1 < x->S && (rc = boundary_async(x, s, 1)) < 0)
			return rc;
		(void)a;
	}
	(void)mode;
	return sync_all(x);
}

static int read_tok(struct ctx *x, int32_t *tok)
{
	int rc = pprpc_tensor_get(x->st[x->S - 1].c, x->st[x->S - 1].io, x->io.tok, tok, 4);

	if (rc < 0)
		return rpc_fail(x, x->S - 1, "tensor_get (token)", rc);
	if (*tok < 0 || *tok >= x->m.V) {
		fprintf(stderr, "pprpc-bench: sampled token %d outside the vocabulary\n", *tok);
		x->rpc_errors++;
		return -1;
	}
	return 0;
}

static int run_once(struct ctx *x, int mode, struct run_res *r)
{
	double t0, t1;
	int32_t tok;
	int rc;

	for (int s = 0; s < x->S; s++)
		if ((rc = pprpc_buffer_clear(x->st[s].c, x->st[s].st, 0)) < 0)
			return rpc_fail(x, s, "buffer_clear (states)", rc);
	t0 = now_s();
	rc = mode ? prefill_pp(x) : prefill_seq(x);
	if (rc < 0)
		return rc;
	if ((rc = read_tok(x, &tok)) < 0)
		return rc;
	t1 = now_s();
	r->prefill_s = t1 - t0;
	r->ttft_s = t1 - t0;
	r->toks[0] = tok;
	for (int i = 0; i + 1 < x->m.gen; i++) {
		double a = now_s();

		if ((rc = decode_step(x, mode, i, tok)) < 0 || (rc = read_tok(x, &tok)) < 0)
			return rc;
		add_slice(x, mode, 0, -1 - i, a, now_s());
		r->toks[i + 1] = tok;
	}
	r->decode_s = now_s() - t1;
	r->hash = fnv1a64(r->toks, (size_t)x->m.gen * 4);
	return 0;
}

/* ---- statistics ------------------------------------------------------------------------ */

struct snap {
	uint64_t creates, runs, captures, replays, free_bytes;
	struct bstat b;
};

static int snap_rank(struct ctx *x, int s, struct snap *o)
{
	pprpc_stats *st;
	int rc = pprpc_stats_get(x->st[s].c, &st);

	memset(o, 0, sizeof(*o));
	if (rc < 0)
		return rpc_fail(x, s, "stats_get", rc);
	o->creates = pprpc_stats_u64(st, "devices", 0, "graph_creates");
	o->runs = pprpc_stats_u64(st, "devices", 0, "graph_runs");
	o->captures = pprpc_stats_u64(st, "devices", 0, "graph_captures");
	o->replays = pprpc_stats_u64(st, "devices", 0, "graph_replays");
	o->free_bytes = pprpc_stats_u64(st, "devices", 0, "info.free_bytes");
	for (int i = 0; i < pprpc_stats_count(st, "boundaries"); i++) {
		if (!strcmp(pprpc_stats_str(st, "boundaries", i, "direction"), "send")) {
			o->b.bytes += pprpc_stats_u64(st, "boundaries", i, "bytes");
			o->b.transfers += pprpc_stats_u64(st, "boundaries", i, "transfers");
			o->b.send_us += pprpc_stats_u64(st, "boundaries", i, "time_us");
		} else {
			o->b.recv_us += pprpc_stats_u64(st, "boundaries", i, "time_us");
		}
	}
	pprpc_stats_free(st);
	return 0;
}

static void acc_stats(struct ctx *x, struct mode_acc *a, const struct snap *before)
{
	for (int s = 0; s < x->S; s++) {
		struct snap n;

		if (snap_rank(x, s, &n) < 0)
			continue;
		a->creates[s] += n.creates - before[s].creates;
		a->runs[s] += n.runs - before[s].runs;
		a->captures[s] += n.captures - before[s].captures;
		a->replays[s] += n.replays - before[s].replays;
		if (!a->freemin[s] || n.free_bytes < a->freemin[s])
			a->freemin[s] = n.free_bytes;
		a->b[s].bytes += n.b.bytes - before[s].b.bytes;
		a->b[s].transfers += n.b.transfers - before[s].b.transfers;
		a->b[s].send_us += n.b.send_us - before[s].b.send_us;
		a->b[s].recv_us += n.b.recv_us - before[s].b.recv_us;
	}
}

/* Geometric mean of the pair ratios and a percentile bootstrap 95% CI
 * (1000 resamples, fixed-seed RNG). */
static void ratio_ci(const double *pp, const double *seq, int k, double *gm, double *lo, double *hi)
{
	double lr[MAX_PAIRS], bs[1000], sum = 0;
	uint64_t r = 0xB007ull;

	*gm = *lo = *hi = 0;
	if (k <= 0)
		return;
	for (int i = 0; i < k; i++) {
		lr[i] = log(pp[i] / seq[i]);
		sum += lr[i];
	}
	*gm = exp(sum / k);
	for (int b = 0; b < 1000; b++) {
		double s = 0;

		for (int i = 0; i < k; i++) {
			r = splitmix64(r);
			s += lr[r % (uint64_t)k];
		}
		bs[b] = exp(s / k);
	}
	qsort(bs, 1000, sizeof(double), cmp_double);
	*lo = bs[24];
	*hi = bs[974];
}

/* ---- outputs -------------------------------------------------------------------------- */

static const char *const mode_names[2] = { "seq", "pp" };

static void print_table(const struct ctx *x, const struct mode_acc *acc, double gm, double lo, double hi)
{
	printf("\n%-5s %12s %10s %12s %18s %8s %7s\n", "mode", "prompt_tok/s", "ttft_ms", "decode_tok/s",
	       "token_hash", "rpc_err", "runs");
	for (int mo = 0; mo < 2; mo++) {
		const struct mode_acc *a = &acc[mo];

		printf("%-5s %12.1f %10.2f %12.2f %016llx %8d %7d%s\n", mode_names[mo], median(a->tps, a->nrun),
		       median(a->ttft, a->nrun) * 1e3, median(a->dtps, a->nrun), (unsigned long long)a->hash,
		       a->rpc_errors, a->nrun, a->hash_mismatch ? "  HASH MISMATCH" : "");
	}
	printf("(medians over %d pairs; graphs built once per (n_past, n_tok) shape before the pairs:",
	       acc[0].nrun);
	for (int s = 0; s < x->S; s++)
		printf(" rank %d %llu", s, (unsigned long long)x->st[s].setup_creates);
	printf("; creates below are during the runs)\n");
	printf("\n%-5s %4s %-22s %14s %9s %9s %9s %9s\n", "mode", "rank", "addr", "free_min_MiB", "creates",
	       "runs", "captures", "replays");
	for (int mo = 0; mo < 2; mo++)
		for (int s = 0; s < x->S; s++)
			printf("%-5s %4d %-22s %14.1f %9llu %9llu %9llu %9llu\n", mode_names[mo], s, x->st[s].addr,
			       acc[mo].freemin[s] / 1048576.0, (unsigned long long)acc[mo].creates[s],
			       (unsigned long long)acc[mo].runs[s], (unsigned long long)acc[mo].captures[s],
			       (unsigned long long)acc[mo].replays[s]);
	if (x->S > 1) {
		printf("\n%-5s %-9s %10s %12s %12s %12s\n", "mode", "boundary", "transfers", "MiB", "send_ms",
		       "recv_ms");
		for (int mo = 0; mo < 2; mo++)
			for (int s = 0; s + 1 < x->S; s++)
				printf("%-5s %4d->%-3d %10llu %12.3f %12.2f %12.2f\n", mode_names[mo], s, s + 1,
				       (unsigned long long)acc[mo].b[s].transfers, acc[mo].b[s].bytes / 1048576.0,
				       acc[mo].b[s].send_us / 1e3, acc[mo].b[s + 1].recv_us / 1e3);
	}
	printf("\npp/seq prompt throughput: geomean %.3f, bootstrap 95%% CI [%.3f, %.3f] over %d pairs\n", gm, lo,
	       hi, acc[0].nrun);
}

static void json_mode(FILE *f, const struct ctx *x, const struct mode_acc *a)
{
	fprintf(f, "{\"prompt_tok_s\":%.3f,\"ttft_ms\":%.4f,\"decode_tok_s\":%.3f,\"token_hash\":\"%016llx\","
		   "\"hash_mismatch\":%d,\"rpc_errors\":%d,\"runs\":%d,\"prompt_tok_s_pairs\":[",
		median(a->tps, a->nrun), median(a->ttft, a->nrun) * 1e3, median(a->dtps, a->nrun),
		(unsigned long long)a->hash, a->hash_mismatch, a->rpc_errors, a->nrun);
	for (int i = 0; i < a->nrun; i++)
		fprintf(f, "%s%.3f", i ? "," : "", a->tps[i]);
	fprintf(f, "],\"ranks\":[");
	for (int s = 0; s < x->S; s++)
		fprintf(f, "%s{\"addr\":\"%s\",\"free_bytes_min\":%llu,\"graph_creates_setup\":%llu,\"graph_creates\":%llu,\"graph_runs\":%llu,"
			   "\"graph_captures\":%llu,\"graph_replays\":%llu}",
			s ? "," : "", x->st[s].addr, (unsigned long long)a->freemin[s],
			(unsigned long long)x->st[s].setup_creates, (unsigned long long)a->creates[s], (unsigned long long)a->runs[s],
			(unsigned long long)a->captures[s], (unsigned long long)a->replays[s]);
	fprintf(f, "],\"boundaries\":[");
	for (int s = 0; s + 1 < x->S; s++)
		fprintf(f, "%s{\"from\":%d,\"to\":%d,\"transfers\":%llu,\"bytes\":%llu,\"send_us\":%llu,\"recv_us\":%llu}",
			s ? "," : "", s, s + 1, (unsigned long long)a->b[s].transfers,
			(unsigned long long)a->b[s].bytes, (unsigned long long)a->b[s].send_us,
			(unsigned long long)a->b[s + 1].recv_us);
	fprintf(f, "]}");
}

static void json_result(FILE *f, const struct ctx *x, const struct mode_acc *acc, double gm, double lo,
			double hi, int ok)
{
	const struct cfg *m = &x->m;

	fprintf(f, "{\"ubatch\":%d,\"ubatches\":%d,\"ok\":%s,\"hash_match\":%s,\"seq\":", m->ub, x->nub,
		ok ? "true" : "false",
		acc[0].hash == acc[1].hash && !acc[0].hash_mismatch && !acc[1].hash_mismatch ? "true" : "false");
	json_mode(f, x, &acc[0]);
	fprintf(f, ",\"pp\":");
	json_mode(f, x, &acc[1]);
	fprintf(f, ",\"ratio_pp_seq\":{\"geomean\":%.5f,\"ci95_lo\":%.5f,\"ci95_hi\":%.5f,\"pairs\":%d}}", gm, lo, hi,
		acc[0].nrun);
}

static int write_trace(const struct ctx *x, const char *path)
{
	FILE *f = fopen(path, "w");
	int n = 0;

	if (!f) {
		fprintf(stderr, "pprpc-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
	for (int s = 0; s < x->S; s++) {
		fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d %s\"}}",
			n++ ? "," : "", s + 1, s, x->st[s].addr);
		for (int mo = 0; mo < 2; mo++)
			fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
				s + 1, mo + 1, mode_names[mo]);
	}
	for (int i = 0; i < x->nsl; i++) {
		const struct slice *sl = &x->sl[i];
		char name[48];

		if (sl->u >= 0)
			snprintf(name, sizeof(name), "ubatch %d", sl->u);
		else
			snprintf(name, sizeof(name), "decode %d", -1 - sl->u);
		fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
			   "\"args\":{\"stage\":%d}}",
			name, sl->s + 1, sl->mode + 1, (sl->a - x->t0) * 1e6,
			sl->b > sl->a ? (sl->b - sl->a) * 1e6 : 0, sl->s);
	}
	fputs("\n]}\n", f);
	return fclose(f) ? -1 : 0;
}

/* SVG Gantt chart: one panel per mode, ranks as rows, prefill ubatch slices
 * coloured by ubatch, boundary transfers as lines from the end of a slice to
 * the start of the same ubatch on the next rank. */
static int write_svg(const struct ctx *x, const char *path)
{
	const double W = 1000, left = 150, rowh = 28, gap = 40;
	double t0[2] = { 1e30, 1e30 }, t1[2] = { 0, 0 }, span = 0;
	FILE *f;
	int H;

	for (int i = 0; i < x->nsl; i++) {
		const struct slice *sl = &x->sl[i];

		if (sl->u < 0)
			continue;
		if (sl->a < t0[sl->mode])
			t0[sl->mode] = sl->a;
		if (sl->b > t1[sl->mode])
			t1[sl->mode] = sl->b;
	}
	for (int mo = 0; mo < 2; mo++)
		if (t1[mo] - t0[mo] > span)
			span = t1[mo] - t0[mo];
	if (span <= 0)
		span = 1e-3;
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "pprpc-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	H = (int)(2 * (x->S * rowh + gap) + 60);
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
		   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		(int)(W + left + 20), H);
	fprintf(f, "<text x=\"10\" y=\"18\" font-size=\"14\">pprpc-bench prefill, last pair: %d ubatches of %d "
		   "over %d ranks (time axis %.1f ms)</text>\n", x->nub, x->m.ub, x->S, span * 1e3);
	for (int mo = 0; mo < 2; mo++) {
		double y0 = 40 + mo * (x->S * rowh + gap);

		fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", y0 + 12, mode_names[mo]);
		for (int s = 0; s < x->S; s++)
			fprintf(f, "<text x=\"40\" y=\"%.1f\">rank %d</text>\n"
				   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
				y0 + 16 + s * rowh + rowh / 2, s, left, y0 + 16 + (s + 1) * rowh, left + W,
				y0 + 16 + (s + 1) * rowh);
		for (int i = 0; i < x->nsl; i++) {
			const struct slice *sl = &x->sl[i];
			double xa, xb, y;

			if (sl->mode != mo || sl->u < 0)
				continue;
			xa = left + (sl->a - t0[mo]) / span * W;
			xb = left + (sl->b - t0[mo]) / span * W;
			y = y0 + 16 + sl->s * rowh + 3;
			fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"hsl(%d,70%%,55%%)\" "
				   "stroke=\"#333\" stroke-width=\"0.5\"><title>%s rank %d ubatch %d: %.3f ms</title></rect>\n",
				xa, y, xb - xa > 0.5 ? xb - xa : 0.5, rowh - 6, (sl->u * 67) % 360, mode_names[mo], sl->s,
				sl->u, (sl->b - sl->a) * 1e3);
			if (xb - xa > 24)
				fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\">u%d</text>\n", xa + 3,
					y + rowh / 2, sl->u);
			/* The boundary: this slice's end to the next rank's start. */
			for (int j = 0; j < x->nsl; j++) {
				const struct slice *n = &x->sl[j];

				if (n->mode == mo && n->u == sl->u && n->s == sl->s + 1)
					fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000\" "
						   "stroke-width=\"1\"/>\n",
						xb, y + rowh - 6, left + (n->a - t0[mo]) / span * W, y + rowh + 3);
			}
		}
	}
	fputs("</svg>\n", f);
	return fclose(f) ? -1 : 0;
}

/* ---- main ----------------------------------------------------------------------------- */

static int32_t *read_prompt(const char *path, int *n)
{
	FILE *f = fopen(path, "r");
	int32_t *v = NULL;
	int cap = 0, c = 0;
	long t;

	if (!f)
		return NULL;
	while (fscanf(f, " %ld", &t) == 1) {
		if (c == cap) {
			int32_t *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 256) * 4);

			if (!nv)
				break;
			v = nv;
		}
		v[c++] = (int32_t)t;
		(void)fscanf(f, " ,");
	}
	fclose(f);
	*n = c;
	return v;
}

/* Run the pairs at the current ubatch; returns 1 if all runs agreed and no
 * RPC failed. */
static int bench_ubatch(struct ctx *x, FILE *json, int first_json)
{
	struct mode_acc acc[2];
	struct run_res r;
	double gm, lo, hi;
	uint64_t ref_hash = 0;
	int ok = 1, rpc0;

	memset(acc, 0, sizeof(acc));
	r.toks = calloc((size_t)x->m.gen, 4);
	if (!r.toks)
		return 0;
	rpc0 = x->rpc_errors;
	for (int s = 0; s < x->S; s++) {
		struct snap sn;

		snap_rank(x, s, &sn);
		x->st[s].setup_creates = sn.creates;
	}
	if (setup_ubatch(x) < 0) {
		teardown_ubatch(x);
		free(r.toks);
		return 0;
	}
	for (int s = 0; s < x->S; s++) {
		struct snap sn;

		snap_rank(x, s, &sn);
		x->st[s].setup_creates = sn.creates - x->st[s].setup_creates;
	}
	for (int k = 0; k < x->m.pairs && ok; k++) {
		for (int j = 0; j < 2; j++) {
			int mo = (k % 2) ? 1 - j : j;   /* alternate the order */
			struct mode_acc *a = &acc[mo];
			struct snap before[MAX_RANKS];
			int e0 = x->rpc_errors;

			x->trace_on = x->trace_req && k == x->m.pairs - 1;
			for (int s = 0; s < x->S; s++)
				snap_rank(x, s, &before[s]);
			fprintf(stderr, "\rpprpc-bench: ubatch %d pair %d/%d %-3s ...          ", x->m.ub, k + 1,
				x->m.pairs, mode_names[mo]);
			if (run_once(x, mo, &r) < 0) {
				a->rpc_errors += x->rpc_errors - e0;
				ok = 0;
				break;
			}
			acc_stats(x, a, before);
			a->rpc_errors += x->rpc_errors - e0;
			a->tps[a->nrun] = x->m.P / r.prefill_s;
			a->ttft[a->nrun] = r.ttft_s;
			a->dtps[a->nrun] = x->m.gen > 1 ? (x->m.gen - 1) / r.decode_s : 0;
			if (acc[0].nrun + acc[1].nrun == 0)
				ref_hash = r.hash;
			if (a->nrun == 0)
				a->hash = r.hash;
			if (r.hash != ref_hash)
				a->hash_mismatch = 1;
			a->nrun++;
			fprintf(stderr, "\rpprpc-bench: ubatch %d pair %d/%d %-3s %9.1f prompt tok/s, TTFT %.1f ms, "
					"%.1f decode tok/s, hash %016llx",
				x->m.ub, k + 1, x->m.pairs, mode_names[mo], a->tps[a->nrun - 1], r.ttft_s * 1e3,
				a->dtps[a->nrun - 1], (unsigned long long)r.hash);
		}
	}
	fprintf(stderr, "\n");
	if (x->m.gen > 0 && acc[0].nrun) {
		printf("generated ids:");
		for (int i = 0; i < x->m.gen && i < 16; i++)
			printf(" %d", r.toks[i]);
		printf("%s\n", x->m.gen > 16 ? " ..." : "");
	}
	{
		int n = acc[0].nrun < acc[1].nrun ? acc[0].nrun : acc[1].nrun;

		ratio_ci(acc[1].tps, acc[0].tps, n, &gm, &lo, &hi);
	}
	if (acc[0].hash != acc[1].hash || acc[0].hash_mismatch || acc[1].hash_mismatch || !acc[0].nrun ||
	    !acc[1].nrun)
		ok = 0;
	if (x->rpc_errors != rpc0)
		ok = 0;
	print_table(x, acc, gm, lo, hi);
	if (json) {
		if (!first_json)
			fputc(',', json);
		json_result(json, x, acc, gm, lo, hi, ok);
	}
	teardown_ubatch(x);
	free(r.toks);
	return ok;
}

/* A whole int option value; anything else is a usage error, not 0. */
static int int_arg(const char *opt, const char *v, int *out)
{
	char *e;
	long x;

	errno = 0;
	x = strtol(v, &e, 10);
	if (errno || e == v || *e || x < INT_MIN || x > INT_MAX) {
		fprintf(stderr, "pprpc-bench: %s needs an integer, got '%s'\n", opt, v);
		return -1;
	}
	*out = (int)x;
	return 0;
}

int main(int argc, char **argv)
{
	static struct ctx X;
	struct ctx *x = &X;
	struct cfg *m = &x->m;
	struct spawned sp[MAX_RANKS];
	char addrs[MAX_RANKS][64], spawn_dev[MAX_RANKS][64], binbuf[4096], err[512];
	const char *ranks = NULL, *json_path = NULL, *trace = NULL, *svg = NULL, *split = NULL;
	const char *spawn_devices = NULL, *spawn_args[16], *prompt_file = NULL, *sweep = NULL;
	int nspawn_args = 0, nspawn = 0, nranks = 0, ret = 1, splitv[MAX_RANKS], sweepv[MAX_SWEEP];
	int nsweep = 0, all_ok = 1, nrun_ub = 0;
	char skipped[MAX_SWEEP][200];
	FILE *json = NULL;

	signal(SIGPIPE, SIG_IGN);
	memset(sp, 0, sizeof(sp));
	*m = (struct cfg){ .E = 256, .H = 4, .D = 64, .F = 0, .L = 8, .ratio = 3, .V = 1024, .wtype = WT_F16,
			   .P = 256, .ub = 64, .gen = 8, .pairs = 3, .seed = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!v) {
			fprintf(stderr, "pprpc-bench: %s needs a value (or is unknown)\n%s", a, usage);
			return 2;
		}
		i++;
		if (!strcmp(a, "--ranks")) ranks = v;
		else if (!strcmp(a, "--spawn")) {
			if (int_arg(a, v, &nspawn) < 0)
				return 2;
		}
		else if (!strcmp(a, "--spawn-devices")) spawn_devices = v;
		else if (!strcmp(a, "--spawn-arg")) {
			if (nspawn_args == 16) {
				fprintf(stderr, "pprpc-bench: at most 16 --spawn-arg\n");
				return 2;
			}
			spawn_args[nspawn_args++] = v;
		}
		else if (!strcmp(a, "--d-model")) {
			if (int_arg(a, v, &m->E) < 0)
				return 2;
		}
		else if (!strcmp(a, "--heads")) {
			if (int_arg(a, v, &m->H) < 0)
				return 2;
		}
		else if (!strcmp(a, "--head-dim")) {
			if (int_arg(a, v, &m->D) < 0)
				return 2;
		}
		else if (!strcmp(a, "--ff")) {
			if (int_arg(a, v, &m->F) < 0)
				return 2;
		}
		else if (!strcmp(a, "--layers")) {
			if (int_arg(a, v, &m->L) < 0)
				return 2;
		}
		else if (!strcmp(a, "--kda-ratio")) {
			if (int_arg(a, v, &m->ratio) < 0)
				return 2;
		}
		else if (!strcmp(a, "--vocab")) {
			if (int_arg(a, v, &m->V) < 0)
				return 2;
		}
		else if (!strcmp(a, "--wtype")) {
			if (!strcmp(v, "f16")) m->wtype = WT_F16;
			else if (!strcmp(v, "bf16")) m->wtype = WT_BF16;
			else if (!strcmp(v, "q8_0")) m->wtype = WT_Q8;
			else {
				fprintf(stderr, "pprpc-bench: --wtype f16|bf16|q8_0\n");
				return 2;
			}
		}
		else if (!strcmp(a, "--split")) split = v;
		else if (!strcmp(a, "--prompt-tokens")) {
			if (int_arg(a, v, &m->P) < 0)
				return 2;
		}
		else if (!strcmp(a, "--prompt-file")) prompt_file = v;
		else if (!strcmp(a, "--ubatch")) {
			if (int_arg(a, v, &m->ub) < 0)
				return 2;
		}
		else if (!strcmp(a, "--batch")) {
			if (int_arg(a, v, &m->batch) < 0)
				return 2;
		}
		else if (!strcmp(a, "--ubatch-sweep")) sweep = v;
		else if (!strcmp(a, "--gen")) {
			if (int_arg(a, v, &m->gen) < 0)
				return 2;
		}
		else if (!strcmp(a, "--pairs")) {
			if (int_arg(a, v, &m->pairs) < 0)
				return 2;
		}
		else if (!strcmp(a, "--seed")) {
			char *e;

			errno = 0;
			m->seed = strtoull(v, &e, 10);
			if (errno || e == v || *e || *v == '-') {
				fprintf(stderr, "pprpc-bench: --seed needs an unsigned integer, got '%s'\n", v);
				return 2;
			}
		}
		else if (!strcmp(a, "--json")) json_path = v;
		else if (!strcmp(a, "--trace")) trace = v;
		else if (!strcmp(a, "--svg")) svg = v;
		else {
			fprintf(stderr, "pprpc-bench: unknown option %s\n%s", a, usage);
			return 2;
		}
	}
	if (!m->F)
		m->F = 2 * m->E;
	if (!ranks == !nspawn || nspawn < 0 || nspawn > MAX_RANKS) {
		fprintf(stderr, "pprpc-bench: give one of --ranks LIST or --spawn N (1..%d)\n", MAX_RANKS);
		return 2;
	}
	if (m->E < 1 || m->E > 65536 || m->H < 1 || m->D < 2 || m->D % 2 || m->L < 1 || m->L > MAX_LAYERS ||
	    m->ratio < 0 || m->V < 2 || m->F < 1 || m->ub < 1 || m->gen < 1 || m->pairs < 1 ||
	    m->pairs > MAX_PAIRS || m->P < 1 || m->batch < 0) {
		fprintf(stderr, "pprpc-bench: bad model or run sizes (see --help; --pairs 1..%d, --gen >= 1, "
				"--head-dim even)\n", MAX_PAIRS);
		return 2;
	}
	if (m->wtype == WT_Q8 && (m->E % 32 || m->F % 32 || (m->H * m->D) % 32)) {
		fprintf(stderr, "pprpc-bench: q8_0 needs --d-model, --ff and heads*head-dim multiples of 32\n");
		return 2;
	}
	if (prompt_file) {
		if (!(m->prompt = read_prompt(prompt_file, &m->P)) || m->P < 1) {
			fprintf(stderr, "pprpc-bench: %s: no token ids\n", prompt_file);
			return 2;
		}
		for (int i = 0; i < m->P; i++)
			if (m->prompt[i] < 0 || m->prompt[i] >= m->V) {
				fprintf(stderr, "pprpc-bench: %s: id %d outside [0, %d)\n", prompt_file, m->prompt[i], m->V);
				return 2;
			}
	} else {
		uint64_t r = splitmix64(m->seed ^ 0x9120ull);

		if (!(m->prompt = malloc((size_t)m->P * 4)))
			return 1;
		for (int i = 0; i < m->P; i++) {
			r = splitmix64(r);
			m->prompt[i] = (int32_t)(r % (uint64_t)m->V);
		}
	}
	m->n_ctx = m->P + m->gen;
	if (sweep) {
		struct int_list l;

		if (list_ints(sweep, &l, 1, INT_MAX) < 0) {
			fprintf(stderr, "pprpc-bench: bad --ubatch-sweep list (1..%d values >= 1)\n", INT_LIST_MAX);
			return 2;
		}
		for (nsweep = 0; nsweep < l.n; nsweep++)
			sweepv[nsweep] = (int)l.v[nsweep];
	}
	for (int i = 0; i < MAX_RANKS; i++)
		snprintf(spawn_dev[i], sizeof(spawn_dev[i]), "cpu");
	if (spawn_devices && list_split(spawn_devices, spawn_dev, MAX_RANKS) < 1) {
		fprintf(stderr, "pprpc-bench: bad --spawn-devices list\n");
		return 2;
	}
	if (ranks) {
		if ((nranks = list_split(ranks, addrs, MAX_RANKS)) < 1) {
			fprintf(stderr, "pprpc-bench: bad --ranks list (1..%d addresses)\n", MAX_RANKS);
			return 2;
		}
	} else {
		nranks = nspawn;
	}
	x->S = nranks;
	if (nranks > m->L) {
		fprintf(stderr, "pprpc-bench: %d ranks but only %d layers\n", nranks, m->L);
		return 2;
	}
	if (split) {
		struct int_list l;
		int n = list_ints(split, &l, 1, MAX_LAYERS), sum = 0;

		for (int i = 0; i < n; i++)
			sum += (int)(splitv[i] = (int)l.v[i]);
		if (n != nranks || sum != m->L) {
			fprintf(stderr, "pprpc-bench: --split needs %d counts >= 1 summing to --layers %d\n", nranks, m->L);
			return 2;
		}
	} else {
		for (int i = 0; i < nranks; i++)
			splitv[i] = m->L / nranks + (i < m->L % nranks);
	}
	for (int i = 0, l = 0; i < nranks; i++) {
		x->st[i].l0 = l;
		x->st[i].l1 = (l += splitv[i]);
	}
	if (nspawn) {
		const char *bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));

		setenv("OPENBLAS_NUM_THREADS", "1", 0);
		for (int s = 0; s < nspawn; s++) {
			const char *extra[24] = { "--threads", "1", "--devices", spawn_dev[s] };

			for (int k = 0; k < nspawn_args; k++)
				extra[4 + k] = spawn_args[k];
			extra[4 + nspawn_args] = NULL;
			if (spawn_daemon(bin, extra, 30000, &sp[s], err, sizeof(err)) < 0) {
				fprintf(stderr, "pprpc-bench: %s\n", err);
				spawn_dump_log(&sp[s]);
				spawn_stop(&sp[s], 0);
				goto out;
			}
			snprintf(addrs[s], sizeof(addrs[0]), "%s", sp[s].addr);
			fprintf(stderr, "started pprpcd pid %d on %s (--threads 1 --devices %s)\n", (int)sp[s].pid,
				sp[s].addr, spawn_dev[s]);
		}
	}
	x->t0 = now_s();
	x->trace_req = trace || svg;
	for (int s = 0; s < x->S; s++) {
		pprpc_connect_opts o = { .client_name = "pprpc-bench", .err_buf = err, .err_len = sizeof(err) };
		struct stage *st = &x->st[s];
		int rc = pprpc_connect(addrs[s], &o, &st->c);

		st->addr = addrs[s];
		if (rc < 0) {
			fprintf(stderr, "pprpc-bench: rank %d (%s): %s\n", s, addrs[s], err);
			x->rpc_errors++;
			goto out;
		}
		plan_stage(x, st, s);
		if ((rc = pprpc_timeline_create(st->c, 0, 0, &st->tl)) < 0) {
			rpc_fail(x, s, "timeline_create", rc);
			goto out;
		}
	}
	printf("pprpc-bench: %d layers (%d KDA : 1 attention), d_model %d, %d heads x %d, ff %d, vocab %d, "
	       "weights %s, seed %llu\n",
	       m->L, m->ratio, m->E, m->H, m->D, m->F, m->V,
	       m->wtype == WT_F16 ? "f16" : m->wtype == WT_BF16 ? "bf16" : "q8_0", (unsigned long long)m->seed);
	printf("prompt %d tokens, gen %d, %d pairs, %d ranks:", m->P, m->gen, m->pairs, x->S);
	for (int s = 0; s < x->S; s++)
		printf(" [%s layers %d-%d]", addrs[s], x->st[s].l0, x->st[s].l1 - 1);
	printf("\n");
	if (!nsweep)
		sweepv[nsweep++] = m->ub;
	/* Memory check before allocating anything: weights + states + io per rank. */
	for (int i = 0; i < nsweep; i++) {
		int fits = 1;

		for (int s = 0; s < x->S; s++) {
			pprpc_device_info di;
			uint64_t need = x->st[s].wbytes + x->st[s].sbytes + io_bytes(x, sweepv[i]);

			if (pprpc_device_get(x->st[s].c, 0, &di) < 0)
				continue;
			if (di.free_bytes < di.floor_bytes || need > di.free_bytes - di.floor_bytes) {
				snprintf(skipped[i], sizeof(skipped[i]),
					 "rank %d needs %.1f MiB, has %.1f MiB free above its %.1f MiB floor", s,
					 need / 1048576.0,
					 di.free_bytes > di.floor_bytes ? (di.free_bytes - di.floor_bytes) / 1048576.0 : 0.0,
					 di.floor_bytes / 1048576.0);
				printf("ubatch %d: skipped: %s\n", sweepv[i], skipped[i]);
				fits = 0;
				break;
			}
		}
		if (!fits)
			sweepv[i] = -sweepv[i];
	}
	for (int s = 0; s < x->S; s++)
		if (upload_weights(x, s) < 0)
			goto out;
	if (json_path && !(json = fopen(json_path, "w"))) {
		fprintf(stderr, "pprpc-bench: %s: %s\n", json_path, strerror(errno));
		goto out;
	}
	if (json)
		fprintf(json, "{\"tool\":\"pprpc-bench\",\"model\":{\"d_model\":%d,\"heads\":%d,\"head_dim\":%d,"
			      "\"ff\":%d,\"layers\":%d,\"kda_ratio\":%d,\"vocab\":%d,\"wtype\":\"%s\",\"seed\":%llu},"
			      "\"prompt_tokens\":%d,\"gen\":%d,\"pairs\":%d,\"ranks\":%d,\"results\":[",
			m->E, m->H, m->D, m->F, m->L, m->ratio, m->V,
			m->wtype == WT_F16 ? "f16" : m->wtype == WT_BF16 ? "bf16" : "q8_0", (unsigned long long)m->seed,
			m->P, m->gen, m->pairs, x->S);
	for (int i = 0; i < nsweep; i++) {
		if (sweepv[i] < 0)
			continue;
		m->ub = sweepv[i];
		x->nsl = 0;
		if (m->batch > 0 && m->batch / m->ub < (m->P + m->ub - 1) / m->ub)
			printf("\n== ubatch %d, logical batch %d tokens (%d ubatches)\n", m->ub,
			       (m->batch / m->ub > 0 ? m->batch / m->ub : 1) * m->ub,
			       m->batch / m->ub > 0 ? m->batch / m->ub : 1);
		else
			printf("\n== ubatch %d, logical batch = the whole prompt\n", m->ub);
		if (!bench_ubatch(x, json, nrun_ub == 0))
			all_ok = 0;
		nrun_ub++;
	}
	if (json) {
		fprintf(json, "],\"skipped\":[");
		for (int i = 0, n = 0; i < nsweep; i++)
			if (sweepv[i] < 0)
				fprintf(json, "%s{\"ubatch\":%d,\"reason\":\"%s\"}", n++ ? "," : "", -sweepv[i],
					skipped[i]);
		fprintf(json, "],\"ok\":%s}\n", all_ok && nrun_ub ? "true" : "false");
		if (fclose(json))
			all_ok = 0;
		json = NULL;
	}
	if (trace && write_trace(x, trace) < 0)
		all_ok = 0;
	if (svg && write_svg(x, svg) < 0)
		all_ok = 0;
	ret = all_ok && nrun_ub && x->rpc_errors == 0 ? 0 : 1;
	printf("\npprpc-bench: %s (%d RPC errors)\n", ret ? "FAIL" : "PASS", x->rpc_errors);
out:
	if (json)
		fclose(json);
	for (int s = 0; s < MAX_RANKS; s++)
		pprpc_close(x->st[s].c);
	for (int s = 0; s < MAX_RANKS; s++)
		if (sp[s].pid > 0)
			spawn_stop(&sp[s], 0);
	free(x->sl);
	free(m->prompt);
	return ret;
}

/*
 * daemon/backend/ggml/ggml_gdn.c — ggml's GATED_DELTA_NET on pprpc's own
 * kernels (kernels/ops.h; the chunked forms cpu_gdn_chunked.c and
 * cuda_gdn_chunked.cu), where they compute what ggml's op computes.
 *
 * ggml's op (ggml.h ggml_gated_delta_net; ggml-cpu ops.cpp, ggml-cuda
 * gated_delta_net.cu) against pprpc's (ops.h):
 *   - layout: q, k [S, H_k, T, B], v [S, H_v, T, B], g [1 or S, H_v, T, B],
 *     beta [1, H_v, T, B], state [S, S, H_v, B] with element (i, j) =
 *     S[i][j] ("stored transposed": row j of the buffer is column j of S):
 *     pprpc's sources exactly, d_k = d_v = S;
 *   - math: S' = diag(exp(g)) S (or exp(g) S), u = beta (v - S'^T k),
 *     S = S' + k u^T, o = S^T q / sqrt(S): pprpc's recurrence with f[0] =
 *     1.0f / sqrtf((float)S) (ggml's expression), no in-op L2 norm (i[0] =
 *     0; llama.cpp normalises q and k with L2_NORM nodes before);
 *   - head broadcast: value head h reads q/k head h % H_k (tiled, the
 *     order of ggml_repeat): pprpc's i[3] = 1;
 *   - output: o [S, H_v, T, B] then K state snapshots, most recent first;
 *     with K = 1 (llama.cpp's fused path) that is pprpc's packed dst byte
 *     for byte, and with T = 1 only slot 0 is written, the same bytes.
 * What differs, and stays with ggml's kernel:
 *   - K > 1 with T > 1 (snapshots of intermediate states): pprpc produces
 *     the final state only;
 *   - q/k with fewer sequences than v (ggml broadcasts them): pprpc wants
 *     one q/k per sequence;
 *   - gates: ggml exponentiates any gate; pprpc clamps a positive one to 0,
 *     and its chunked form spreads a NaN or infinite gate over its chunk.
 *     They agree on finite gates <= 0, which is every gate a model makes
 *     (g = -exp(A) softplus(.)), and only the data can tell: each run scans
 *     the gates first (on the GPU, next to the kernel) and a run whose gates
 *     leave that domain is computed by ggml's kernel ("gate").
 * Precision: on the CPU both are fp32 (pprpc's chunked form within 1e-5
 * of the recurrence, tests/unit/test_kernels_gdn_chunked.c).  On CUDA
 * pprpc's chunked form runs on bf16 tensor cores with split operands
 * (i[4] = 1: a bf16 and its bf16 remainder, three mma per product),
 * RMSE / RMS about 6.5e-6 of ggml's fp32 kernel (NMSE about 4e-11, within
 * test-backend-ops' 1e-7; doc/results/kda-cuda.md).  The one-bf16 form
 * (3.6e-3, NMSE 1e-5) is not used here: it fails that bound.
 *
 * When: decided per node at create time (gg->gdn): "off" (setting, or no
 * kernel for this device), "shape" (above), "auto" (the auto setting and a
 * node pprpc would run in its serial form: decode, or dimensions its CUDA
 * chunked kernels do not take), else pprpc's.  A run cuts its segments at
 * those nodes (ggml_run.c): everything before has completed when pprpc's
 * kernel starts, and it has completed before the next segment starts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/gdn_cuda.h"
#include "daemon/backend/ggml/ggml_engine.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "pprpc/types.h"
#include "proto/errtext.h"

#ifdef PPRPC_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* ---- the device -------------------------------------------------------------- */

void gge_gdn_dev_init(struct gge_dev *g)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(g->dev);
	const char *rname = reg ? ggml_backend_reg_name(reg) : "";
	struct ggml_backend_dev_props props;

	g->gdn_native = &g->gdn_native_own;
	g->gdn_ggml = g->gdn_ggml_own;
	if (g->type == GGML_BACKEND_DEVICE_TYPE_CPU && g->host) {
		g->gdn_kind = GGE_GDN_CPU;
		return;
	}
	if (strcmp(rname, "CUDA") != 0 || g->host) {
		snprintf(g->gdn_why, sizeof(g->gdn_why), "pprpc has no GATED_DELTA_NET kernel for a %s device",
			 rname[0] ? rname : "ggml");
		return;
	}
	memset(&props, 0, sizeof(props));
	ggml_backend_dev_get_props(g->dev, &props);
	if (gdn_cuda_find(props.device_id, &g->cuda_ordinal, g->gdn_why, sizeof(g->gdn_why)) == 0)
		g->gdn_kind = GGE_GDN_CUDA;
}

void gge_gdn_dev_fini(struct gge_dev *g)
{
	gdn_cuda_close(g->gdn_cuda);
	g->gdn_cuda = NULL;
}

void gge_dev_gdn_config(struct gge_dev *g, int mode, struct kern_gdn_stats *native, uint64_t *ggml_why,
			uint64_t floor)
{
	g->gdn_mode = mode;
	if (native)
		g->gdn_native = native;
	if (ggml_why)
		g->gdn_ggml = ggml_why;
	g->gdn_floor = floor;
}

void gge_dev_gdn_status(const struct gge_dev *g, char *buf, size_t len)
{
	static const char *const names[] = { "off", "auto", "on" };
	const char *m = g->gdn_mode >= 0 && g->gdn_mode <= GGE_GDN_ON ? names[g->gdn_mode] : "?";

	if (g->gdn_mode == GGE_GDN_OFF)
		snprintf(buf, len, "off");
	else if (g->gdn_kind == GGE_GDN_NONE)
		snprintf(buf, len, "off (%s asked: %.150s)", m, g->gdn_why);
	else if (g->gdn_kind == GGE_GDN_CUDA)
		snprintf(buf, len, "%s (pprpc's CUDA kernels on CUDA device %d)", m, g->cuda_ordinal);
	else
		snprintf(buf, len, "%s (pprpc's CPU kernels)", m);
}

/* ---- create time ------------------------------------------------------------- */

static void desc(struct kern_tensor *k, const struct ggml_tensor *t)
{
	memset(k, 0, sizeof(*k));
	k->dtype = PPRPC_F32;
	for (int i = 0; i < 4; i++) {
		k->ne[i] = t->ne[i];
		k->nb[i] = t->nb[i];
	}
	k->data = t->data;
}

/* Does pprpc's kernel compute node x exactly as ggml's does (file
 * comment)?  Fills n's descriptors and params when it does. */
static bool fits(const struct ggml_tensor *x, struct gge_gdn_node *n)
{
	const struct ggml_tensor *q = x->src[0], *k = x->src[1], *v = x->src[2];
	const int64_t S = v->ne[0], T = v->ne[2], B = v->ne[3];
	const int32_t K = ggml_get_op_params_i32(x, 0);
	int64_t n_o, n_s, ne[4] = { 0, 1, 1, 1 };
	char why[160];

	/* The rules checked ggml's constructor and kernels' own asserts
	 * (types, shapes, contiguity); what is left is where the two ops
	 * differ. */
	if (K != 1 && T != 1)
		return false;
	if (q->ne[3] != B || k->ne[3] != B || q->ne[0] != S || k->ne[0] != S)
		return false;
	for (int s = 0; s < 6; s++) {
		desc(&n->src[s], x->src[s]);
		if (!x->src[s]->data || kern_tensor_check(&n->src[s]) < 0)
			return false;
	}
	memset(&n->p, 0, sizeof(n->p));
	n->p.f[0] = 1.0f / sqrtf((float)S);  /* ggml's scale, the same float */
	n->p.i[3] = 1;                       /* ggml's head order: h % H_k */
	/* CUDA's chunked form with split bf16 operands: ggml's kernel is fp32
	 * and llama.cpp's test-backend-ops holds this op to NMSE 1e-7, which
	 * one bf16 per operand misses (about 1e-5); the CPU ignores it. */
	n->p.i[4] = 1;
	if (kern_gdn_layout(S, S, v->ne[1], T, B, &n_o, &n_s) < 0)
		return false;
	/* The packed o + state: ggml's whole dst for K = 1, its first slot
	 * and o for T = 1. */
	ne[0] = n_o + n_s;
	if (!x->data || kern_tensor_init_contig(&n->dst, PPRPC_F32, ne) < 0 ||
	    (uint64_t)(n_o + n_s) * sizeof(float) > ggml_nbytes(x))
		return false;
	n->dst.data = x->data;
	{
		const struct kern_tensor *sp[6] = { &n->src[0], &n->src[1], &n->src[2],
						    &n->src[3], &n->src[4], &n->src[5] };

		return kern_op_check_dst(PPRPC_OP_GATED_DELTA_NET, &n->p, sp, 6, &n->dst, why, sizeof(why)) == 0;
	}
}

/* Would pprpc's automatic choice take its chunked form for n? */
static bool would_chunk(const struct gge_dev *g, const struct gge_gdn_node *n)
{
	const int64_t d = n->src[0].ne[0], T = n->src[0].ne[2];

	if (g->gdn_kind == GGE_GDN_CPU)
		return T >= KERN_GDN_CHUNK_MIN_T;
#ifdef PPRPC_HAVE_CUDA
	return kern_cuda_gdn_chunked_fits(d, d, T);
#else
	(void)d;
	return false;
#endif
}

int gge_gdn_plan(struct gge_dev *g, struct gge_graph *gg)
{
	int n = 0;

	for (int k = 0; k < gg->nnodes; k++)
		n += gg->cg->nodes[k]->op == GGML_OP_GATED_DELTA_NET;
	if (!n)
		return 0;
	gg->gdn = calloc((size_t)n, sizeof(*gg->gdn));
	if (!gg->gdn)
		return PPRPC_ENOMEM;
	for (int k = 0; k < gg->nnodes; k++) {
		struct gge_gdn_node *x = &gg->gdn[gg->ngdn];

		if (gg->cg->nodes[k]->op != GGML_OP_GATED_DELTA_NET)
			continue;
		x->pos = k;
		if (g->gdn_mode == GGE_GDN_OFF || g->gdn_kind == GGE_GDN_NONE)
			x->why = GGE_GDN_WHY_OFF;
		else if (!fits(gg->cg->nodes[k], x))
			x->why = GGE_GDN_WHY_SHAPE;
		else if (g->gdn_mode == GGE_GDN_AUTO && !would_chunk(g, x))
			x->why = GGE_GDN_WHY_AUTO;
		else
			x->why = -1;
		gg->ngdn++;
	}
	return 0;
}

/* ---- run time ---------------------------------------------------------------- */

static const struct gge_gdn_node *at(const struct gge_graph *gg, int pos)
{
	for (int i = 0; i < gg->ngdn; i++)
		if (gg->gdn[i].pos == pos)
			return &gg->gdn[i];
	return NULL;
}

int gge_gdn_next_native(const struct gge_graph *gg, int from)
{
	for (int i = 0; i < gg->ngdn; i++)
		if (gg->gdn[i].why < 0 && gg->gdn[i].pos >= from)
			return gg->gdn[i].pos;
	return gg->nnodes;
}

void gge_gdn_count_ggml(struct gge_dev *g, const struct gge_graph *gg, int from, int to)
{
	for (int i = 0; i < gg->ngdn; i++)
		if (gg->gdn[i].pos >= from && gg->gdn[i].pos < to && gg->gdn[i].why >= 0)
			count(&g->gdn_ggml[gg->gdn[i].why]);
}

/* Every gate finite and <= 0 (g is contiguous: the rules). */
static bool gates_ok(const struct kern_tensor *g)
{
	const float *x = g->data;
	const int64_t n = kern_tensor_nelements(g);
	int bad = 0;

	for (int64_t i = 0; i < n; i++)
		bad |= !(x[i] <= 0.0f) || isinf(x[i]);
	return !bad;
}

static int run_cpu(struct gge_dev *g, const struct gge_gdn_node *n, int *ret_why, char *err, size_t errlen)
{
	struct kern_cpu_ctx ctx = { .nthreads = g->threads > 0 ? g->threads : 1, .gdn_stats = g->gdn_native };
	struct kern_tensor src[6], dst = n->dst;
	struct kern_tensor *sp[6];
	int rc;

	if (!gates_ok(&n->src[3])) {
		*ret_why = GGE_GDN_WHY_GATE;
		return 0;
	}
	for (int s = 0; s < 6; s++) {
		src[s] = n->src[s];
		sp[s] = &src[s];
	}
	rc = kern_cpu_run(&ctx, PPRPC_OP_GATED_DELTA_NET, &n->p, sp, 6, &dst);
	if (rc < 0)
		snprintf(err, errlen, "ggml:%s: pprpc's GATED_DELTA_NET failed: %s", g->name, pprpc_err_text(rc));
	return rc;
}

static int run_cuda(struct gge_dev *g, const struct gge_gdn_node *n, int *ret_why, char *err, size_t errlen)
{
	struct kern_tensor src[6], dst = n->dst;
	struct kern_tensor *sp[6];
	char why[256] = "";
	int rc, outcome;

	if (!g->gdn_cuda) {
		rc = gdn_cuda_open(g->cuda_ordinal, &g->gdn_cuda, why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errlen, "ggml:%s: %s", g->name, why);
			return rc;
		}
	}
	for (int s = 0; s < 6; s++) {
		src[s] = n->src[s];
		sp[s] = &src[s];
	}
	rc = gdn_cuda_run(g->gdn_cuda, g->gdn_floor, &n->p, sp, &dst, g->gdn_native, &outcome, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "ggml:%s: %s", g->name, why);
		return rc;
	}
	if (outcome == GDN_CUDA_GATE)
		*ret_why = GGE_GDN_WHY_GATE;
	else if (outcome == GDN_CUDA_NOMEM)
		*ret_why = GGE_GDN_WHY_NOMEM;
	return 0;
}

int gge_gdn_run(struct gge_dev *g, ggml_backend_t be, struct gge_graph *gg, int pos, char *err, size_t errlen)
{
	const struct gge_gdn_node *n = at(gg, pos);
	int why = -1, rc;

	if (!n || n->why >= 0) {
		snprintf(err, errlen, "ggml:%s: node %d is not one of pprpc's GATED_DELTA_NET", g->name, pos);
		return PPRPC_EINTERNAL;
	}
	rc = g->gdn_kind == GGE_GDN_CUDA ? run_cuda(g, n, &why, err, errlen) : run_cpu(g, n, &why, err, errlen);
	if (rc < 0 || why < 0)
		return rc;
	/* This run's data is outside what pprpc's kernel computes as ggml's
	 * does (or it has no room): ggml's kernel computes the node, over
	 * whatever pprpc's wrote. */
	count(&g->gdn_ggml[why]);
	return gge_run_segment(g, be, gg, pos, pos + 1, err, errlen);
}

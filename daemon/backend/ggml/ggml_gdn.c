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
 * When: decided per node at create time (gdn_plan): "off" (setting, or no
 * kernel for this device), "shape" (above), "auto" (the auto setting and a
 * node pprpc would run in its serial form: decode, or dimensions its CUDA
 * chunked kernels do not take), else pprpc's.  A run cuts its segments at
 * those nodes (ggml_run.c): everything before has completed when pprpc's
 * kernel starts, and it has completed before the next segment starts.
 *
 * An op of the device's table (ggml_ops.h): its setting, counters and
 * CUDA stream are this file's context, each node's descriptors its
 * state; the engine holds none of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_cuda_gdn.h"
#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/ggml_gdn.h"
#include "daemon/backend/ggml/ggml_ops.h"
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

/* The op's context: one per device. */
struct gdn_op {
	struct gge_dev *g;
	int mode;                        /* enum gge_gdn_mode */
	int kind;                        /* enum gge_gdn_kind: which of pprpc's kernels */
	char why[160];                   /* GGE_GDN_NONE: why not */
	uint64_t floor;                  /* device memory our workspace must leave free */
	struct kern_gdn_stats *native;   /* forms pprpc's kernels ran (relaxed atomics) */
	uint64_t *ggml;                  /* [GGE_GDN_WHY_COUNT]: nodes ggml's kernel ran */
	struct kern_gdn_stats native_own;
	uint64_t ggml_own[GGE_GDN_WHY_COUNT];
	struct gge_gdn_cuda *cuda;       /* made by the worker at the first native run */
};

/* A node pprpc's kernel runs: its descriptors. */
struct gdn_node {
	struct kern_tensor src[6], dst;
	struct pprpc_op_params p;
};

_Static_assert(sizeof(struct gdn_node) + sizeof(struct gge_op_node) <= GGE_OP_NODE_BYTES,
	       "a node's entry fits the graph's host charge");

static const struct gge_op_i gdn_op_i;

/* Which of pprpc's kernels the device could use. */
static void gdn_kind(struct gdn_op *o)
{
	const struct gge_dev *g = o->g;
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(g->dev);
	const char *rname = reg ? ggml_backend_reg_name(reg) : "";

	if (g->type == GGML_BACKEND_DEVICE_TYPE_CPU && g->host) {
		o->kind = GGE_GDN_CPU;
		return;
	}
	if (strcmp(rname, "CUDA") != 0 || g->host) {
		snprintf(o->why, sizeof(o->why), "pprpc has no GATED_DELTA_NET kernel for a %s device",
			 rname[0] ? rname : "ggml");
		return;
	}
	if (g->cuda_ordinal >= 0)
		o->kind = GGE_GDN_CUDA;
	else
		snprintf(o->why, sizeof(o->why), "%s", g->cuda_why);
}

static void gdn_fini(void *ctx)
{
	struct gdn_op *o = ctx;

	gdn_cuda_close(o->cuda);
	free(o);
}

static struct gdn_op *gdn_of(const struct gge_dev *g)
{
	struct gge_op *op = gge_dev_op_find(g, &gdn_op_i);

	return op ? op->ctx : NULL;
}

void gge_dev_gdn_config(struct gge_dev *g, int mode, struct kern_gdn_stats *native, uint64_t *ggml_why,
			uint64_t floor)
{
	struct gdn_op *o = gdn_of(g);
	struct gge_op *op;

	if (!o) {
		/* without it (no memory, a full table) ggml's kernel runs every node */
		o = calloc(1, sizeof(*o));
		if (!o)
			return;
		o->g = g;
		o->native = &o->native_own;
		o->ggml = o->ggml_own;
		gdn_kind(o);
		if (gge_dev_op_add(g, &gdn_op_i, o, &op) < 0) {
			free(o);
			return;
		}
	}
	o->mode = mode;
	if (native)
		o->native = native;
	if (ggml_why)
		o->ggml = ggml_why;
	o->floor = floor;
}

void gge_dev_gdn_status(const struct gge_dev *g, char *buf, size_t len)
{
	static const char *const names[] = { "off", "auto", "on" };
	const struct gdn_op *o = gdn_of(g);
	int mode = o ? o->mode : GGE_GDN_OFF;
	const char *m = mode >= 0 && mode <= GGE_GDN_ON ? names[mode] : "?";

	if (mode == GGE_GDN_OFF)
		snprintf(buf, len, "off");
	else if (o->kind == GGE_GDN_NONE)
		snprintf(buf, len, "off (%s asked: %.150s)", m, o->why);
	else if (o->kind == GGE_GDN_CUDA)
		snprintf(buf, len, "%s (pprpc's CUDA kernels on CUDA device %d)", m, g->cuda_ordinal);
	else
		snprintf(buf, len, "%s (pprpc's CPU kernels)", m);
}

int gge_dev_gdn_kind(const struct gge_dev *g)
{
	const struct gdn_op *o = gdn_of(g);

	return o ? o->kind : GGE_GDN_NONE;
}

uint64_t gge_dev_gdn_ggml_count(const struct gge_dev *g, int why)
{
	const struct gdn_op *o = gdn_of(g);

	return o && why >= 0 && why < GGE_GDN_WHY_COUNT ? __atomic_load_n(&o->ggml[why], __ATOMIC_RELAXED) : 0;
}

const struct kern_gdn_stats *gge_dev_gdn_native(const struct gge_dev *g)
{
	const struct gdn_op *o = gdn_of(g);

	return o ? o->native : NULL;
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
static bool fits(const struct ggml_tensor *x, struct gdn_node *n)
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
static bool would_chunk(const struct gdn_op *o, const struct gdn_node *n)
{
	const int64_t d = n->src[0].ne[0], T = n->src[0].ne[2];

	if (o->kind == GGE_GDN_CPU)
		return T >= KERN_GDN_CHUNK_MIN_T;
#ifdef PPRPC_HAVE_CUDA
	return kern_cuda_gdn_chunked_fits(d, d, T);
#else
	(void)d;
	return false;
#endif
}

static int gdn_plan(void *ctx, const struct ggml_tensor *x, void **ret_state, int *ret_why)
{
	struct gdn_op *o = ctx;
	struct gdn_node *n;

	*ret_state = NULL;
	if (o->mode == GGE_GDN_OFF || o->kind == GGE_GDN_NONE) {
		*ret_why = GGE_GDN_WHY_OFF;
		return 0;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return PPRPC_ENOMEM;
	if (!fits(x, n))
		*ret_why = GGE_GDN_WHY_SHAPE;
	else if (o->mode == GGE_GDN_AUTO && !would_chunk(o, n))
		*ret_why = GGE_GDN_WHY_AUTO;
	else
		*ret_state = n;
	if (!*ret_state)
		free(n);
	return 0;
}

static void gdn_state_free(void *ctx, void *state)
{
	(void)ctx;
	free(state);
}

static void gdn_count_ggml(void *ctx, int why)
{
	struct gdn_op *o = ctx;

	count(&o->ggml[why]);
}

/* ---- run time ---------------------------------------------------------------- */

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

static int run_cpu(struct gdn_op *o, const struct gdn_node *n, int *ret_why, char *err, size_t errlen)
{
	struct gge_dev *g = o->g;
	struct kern_cpu_ctx ctx = { .nthreads = g->threads > 0 ? g->threads : 1, .gdn_stats = o->native };
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

static int run_cuda(struct gdn_op *o, const struct gdn_node *n, int *ret_why, char *err, size_t errlen)
{
	struct gge_dev *g = o->g;
	struct kern_tensor src[6], dst = n->dst;
	struct kern_tensor *sp[6];
	char why[256] = "";
	int rc, outcome;

	if (!o->cuda) {
		rc = gdn_cuda_open(g->cuda_ordinal, &o->cuda, why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errlen, "ggml:%s: %s", g->name, why);
			return rc;
		}
	}
	for (int s = 0; s < 6; s++) {
		src[s] = n->src[s];
		sp[s] = &src[s];
	}
	rc = gdn_cuda_run(o->cuda, o->floor, &n->p, sp, &dst, o->native, &outcome, why, sizeof(why));
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

static int gdn_run(void *ctx, void *state, int *ret_why, char *err, size_t errlen)
{
	struct gdn_op *o = ctx;
	const struct gdn_node *n = state;
	int why = -1, rc;

	rc = o->kind == GGE_GDN_CUDA ? run_cuda(o, n, &why, err, errlen) : run_cpu(o, n, &why, err, errlen);
	if (rc < 0)
		return rc;
	/* This run's data is outside what pprpc's kernel computes as ggml's
	 * does (or it has no room): ggml's kernel computes the node, over
	 * whatever pprpc's wrote (ggml_run.c). */
	if (why >= 0)
		count(&o->ggml[why]);
	*ret_why = why;
	return 0;
}

static const struct gge_op_i gdn_op_i = {
	.op = GGML_OP_GATED_DELTA_NET,
	.plan = gdn_plan,
	.run = gdn_run,
	.count_ggml = gdn_count_ggml,
	.state_free = gdn_state_free,
	.fini = gdn_fini,
};

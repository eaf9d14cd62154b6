/*
 * daemon/backend/ggml/ggml_work.c — what one run of a created graph will
 * cost, from shapes alone, before anything runs: its work in flop (bounded
 * by max-graph-gflop, as a native graph is: issue 27.8) and the scratch
 * ggml's backend will allocate for it (charged before it is allocated:
 * issue 27.7, a MUL_MAT_ID plan of 74.5 GiB threw std::bad_alloc in
 * ggml-cpu and terminated the rank).
 *
 * Shapes are validated (ggml_wire.c, the rules): each tensor below 2^56
 * elements.  Zero strides make the work unrelated to the bytes a graph
 * holds, so it is counted from ne, never from memory.  Everything
 * saturates at GGE_WORK_CAP.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#define GGE_WORK_CAP (UINT64_MAX / 4)

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > GGE_WORK_CAP - b || b > GGE_WORK_CAP ? GGE_WORK_CAP : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return a && b > GGE_WORK_CAP / a ? GGE_WORK_CAP : a * b;
}

static uint64_t nel(const struct ggml_tensor *t)
{
	return t ? (uint64_t)ggml_nelements(t) : 0;
}

/* An op parameter used as a loop count: at least 1, at most the cap. */
static uint64_t count_param(const struct ggml_tensor *t, int i)
{
	int32_t v = t->op_params[i];

	return v < 1 ? 1 : (uint64_t)v;
}

static uint64_t log2_ceil(uint64_t n)
{
	uint64_t k = 1;

	while (k < 64 && (1ull << k) < n)
		k++;
	return k;
}

/* The products a node makes beyond touching its elements: the inner loop
 * of each op that has one, per output element (or per input for the
 * transposed convolutions).  Shapes as ggml.c's constructors make them. */
static uint64_t inner_work(const struct ggml_tensor *x)
{
	const struct ggml_tensor *a = x->src[0], *b = x->src[1], *c = x->src[2];
	uint64_t out = nel(x);

	switch (x->op) {
	case GGML_OP_MUL_MAT:
	case GGML_OP_MUL_MAT_ID:
		/* MUL_MAT_ID: out is [rows, experts used, tokens]: each used
		 * expert of each token is a row product of K */
		return sat_mul(2 * (uint64_t)a->ne[0], out);
	case GGML_OP_OUT_PROD:
		return sat_mul(2 * (uint64_t)a->ne[1], out);
	case GGML_OP_FLASH_ATTN_EXT:
		/* q [DK, n_q, H, B]; k [DK, n_kv]; v [DV, n_kv]: Q K^T and P V
		 * for every query row */
		return sat_mul(sat_mul(2 * (uint64_t)b->ne[1], (uint64_t)b->ne[0] + (uint64_t)c->ne[0]),
			       nel(a) / (uint64_t)(a->ne[0] ? a->ne[0] : 1));
	case GGML_OP_CONV_2D:
		/* kernel [KW, KH, Cin, Cout] */
		return sat_mul(2 * (uint64_t)a->ne[0] * (uint64_t)a->ne[1], sat_mul((uint64_t)a->ne[2], out));
	case GGML_OP_CONV_3D: {
		/* kernel [KW, KH, KD, c * oc], op_params[9] = c */
		uint64_t ch = count_param(x, 9);

		if (ch > (uint64_t)a->ne[3])
			ch = (uint64_t)a->ne[3];
		return sat_mul(sat_mul(2 * (uint64_t)a->ne[0] * (uint64_t)a->ne[1], (uint64_t)a->ne[2] * ch), out);
	}
	case GGML_OP_CONV_2D_DW:
		return sat_mul(2 * (uint64_t)a->ne[0] * (uint64_t)a->ne[1], out);
	case GGML_OP_CONV_TRANSPOSE_1D:
		/* kernel [K, Cout, Cin], input [L, Cin] */
		return sat_mul(2 * nel(a), (uint64_t)b->ne[0]);
	case GGML_OP_CONV_TRANSPOSE_2D:
		/* kernel [KW, KH, Cout, Cin], input [W, H, Cin, N] */
		return sat_mul(2 * (uint64_t)a->ne[0] * (uint64_t)a->ne[1], sat_mul((uint64_t)a->ne[2], nel(b)));
	case GGML_OP_POOL_1D:
		return sat_mul(count_param(x, 1), out);                       /* k0 */
	case GGML_OP_POOL_2D:
		return sat_mul(sat_mul(count_param(x, 1), count_param(x, 2)), out);  /* k0, k1 */
	case GGML_OP_POOL_2D_BACK:
		return sat_mul(sat_mul(count_param(x, 1), count_param(x, 2)), nel(a));
	case GGML_OP_ARGSORT:
		return sat_mul(nel(a), log2_ceil((uint64_t)a->ne[0]));
	case GGML_OP_TOP_K:
		return sat_mul(nel(a), log2_ceil((uint64_t)a->ne[0]));
	case GGML_OP_SSM_CONV:
		return sat_mul(2 * (uint64_t)b->ne[0], out);                  /* d_conv */
	case GGML_OP_SSM_SCAN:
		/* state [d_state, head_dim, n_head, n_seqs], x [head_dim, n_head, tokens, seqs] */
		return sat_mul(4 * (uint64_t)a->ne[0], nel(b));
	case GGML_OP_RWKV_WKV6:
	case GGML_OP_RWKV_WKV7:
	case GGML_OP_GATED_LINEAR_ATTN:
		/* k (or r) [S, H, T]: an S x S state per head and token */
		return sat_mul(4 * (uint64_t)a->ne[0], nel(a));
	case GGML_OP_GATED_DELTA_NET:
		/* as the native engine counts it (daemon/objects/graph.c): 8 d_k
		 * per element of v */
		return sat_mul(8 * (uint64_t)a->ne[0], nel(c));
	case GGML_OP_SOLVE_TRI:
		return sat_mul((uint64_t)a->ne[0], out);
	default:
		return 0;
	}
}

/* Elements a node touches: its output and its sources, except where a
 * kernel reads a table only through indices (GET_ROWS reads the rows it
 * copies, SET_ROWS writes them). */
static uint64_t touched(const struct ggml_tensor *x)
{
	uint64_t w = nel(x);

	if (x->op == GGML_OP_GET_ROWS)
		return sat_add(w, nel(x->src[1]));
	for (int s = 0; s < GGML_MAX_SRC; s++)
		if (x->src[s] && x->src[s] != x)
			w = sat_add(w, nel(x->src[s]));
	return w;
}

uint64_t gge_graph_work(const struct gge_graph *gg)
{
	uint64_t work = 0;

	for (int k = 0; k < gg->nnodes; k++) {
		const struct ggml_tensor *x = gg->cg->nodes[k];

		/* what no backend runs costs nothing (ggml_guard.c: runs) */
		if (ggml_op_is_empty(x->op) || !(x->flags & GGML_TENSOR_FLAG_COMPUTE) || ggml_is_empty(x))
			continue;
		work = sat_add(work, sat_add(touched(x), inner_work(x)));
	}
	return work;
}

/* ggml-cpu's own planner, ggml_graph_plan (ggml-cpu.c: the work buffer size
 * of every op, MUL_MAT_ID's per-expert row tables included): it only reads
 * shapes.  In a GGML_BACKEND_DL build the CPU backend is a module ggml
 * opened itself, so the symbol is found in the module that holds the
 * backend's registry functions. */
typedef struct ggml_cplan (*plan_fn)(const struct ggml_cgraph *cgraph, int n_threads,
				     struct ggml_threadpool *threadpool);

static plan_fn find_plan(const struct gge_dev *g)
{
	static plan_fn cached;
	static bool looked;
	ggml_backend_reg_t reg;
	Dl_info info;
	void *h;

	if (looked)
		return cached;
	looked = true;
	cached = (plan_fn)dlsym(RTLD_DEFAULT, "ggml_graph_plan");
	if (cached)
		return cached;
	reg = ggml_backend_dev_backend_reg(g->dev);
	if (!reg || !reg->iface.get_name || !dladdr((void *)reg->iface.get_name, &info) || !info.dli_fname)
		return NULL;
	h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return NULL;
	cached = (plan_fn)dlsym(h, "ggml_graph_plan");
	/* the module stays loaded by ggml: this handle only pins it */
	return cached;
}

/* Scratch of a device that is not ggml-cpu, per node, as its largest pool
 * allocations go (ggml-cuda.cu ggml_cuda_mul_mat_id: the sorted copies of
 * src1 and dst for each expert used, 2 int32 maps; a MUL_MAT's src1
 * converted to the weights' dot type, at most f32-sized; FLASH_ATTN_EXT's
 * K and V converted to f16).  The pool keeps its high-water mark, so the
 * largest node is what a run may demand. */
static uint64_t pool_need(const struct ggml_tensor *x)
{
	const struct ggml_tensor *a = x->src[0], *b = x->src[1], *c = x->src[2];

	switch (x->op) {
	case GGML_OP_MUL_MAT_ID: {
		uint64_t rows = (uint64_t)c->ne[0] * (uint64_t)c->ne[1];  /* experts used x tokens */

		return sat_add(sat_mul(sat_mul(rows, (uint64_t)b->ne[0] + (uint64_t)x->ne[0]), 4),
			       sat_add(sat_mul(rows, 8), sat_mul(nel(b), 4)));
	}
	case GGML_OP_MUL_MAT:
	case GGML_OP_OUT_PROD:
		return sat_add(sat_mul(nel(b), 4), sat_mul(nel(x), 4));
	case GGML_OP_FLASH_ATTN_EXT:
		return sat_add(sat_mul(nel(b), 2), sat_add(sat_mul(nel(c), 2), sat_mul(nel(x), 4)));
	default:
		(void)a;
		return 0;
	}
}

int gge_graph_scratch(const struct gge_dev *g, const struct gge_graph *gg, uint64_t *ret_bytes)
{
	uint64_t need = 0;

	if (g->type == GGML_BACKEND_DEVICE_TYPE_CPU) {
		plan_fn plan = find_plan(g);

		if (plan) {
			struct ggml_cplan cp = plan(gg->cg, g->threads > 0 ? g->threads : 1, NULL);

			*ret_bytes = cp.work_size;
			return 0;
		}
		return -1;
	}
	for (int k = 0; k < gg->nnodes; k++) {
		const struct ggml_tensor *x = gg->cg->nodes[k];
		uint64_t n;

		if (ggml_op_is_empty(x->op) || !(x->flags & GGML_TENSOR_FLAG_COMPUTE) || ggml_is_empty(x))
			continue;
		n = pool_need(x);
		if (n > need)
			need = n;
	}
	*ret_bytes = need;
	return 0;
}

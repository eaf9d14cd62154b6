/*
 * daemon/backend/ggml/ggml_guard.c — indices read from tensor data.
 *
 * Some kernels follow indices they read from a tensor's data: ggml-cpu
 * GGML_ASSERTs them for GET_ROWS / SET_ROWS / ADD_ID (the process aborts),
 * checks them only in debug builds for MUL_MAT_ID (an out-of-range expert id
 * writes past its work buffer), and not at all for GET_ROWS_BACK and
 * SSM_SCAN; ggml-cuda checks none.  Shapes cannot tell, so every such index
 * is checked before its node runs, as the native engine does (a GRAPH_RUN
 * with an id outside its table fails with PPRPC_ERANGE).
 *
 * When a guard's values are known is decided once, at create time, from the
 * nodes that write the index tensor's bytes before its user runs:
 *   - none: the values are the client's (inputs such as inp_out_ids or the
 *     KV cache slots) and are checked when the run starts (GGE_GUARD_START);
 *   - the last one is an ARGSORT or TOP_K that runs (runs(): the flag
 *     GGML_TENSOR_FLAG_COMPUTE, not empty, not a view op) covering the
 *     bytes with whole elements, read through the sort node or a view node
 *     of it (not a leaf over its bytes), whose indices are below its
 *     source's ne[0] <= the bound: proven, nothing to check (GGE_GUARD_PROVEN;
 *     llama.cpp's MoE expert ids);
 *   - anything else: the graph is computed up to that node, the values are
 *     checked, the run goes on (GGE_GUARD_SPLIT, ggml_run.c).
 * The search for writers is bounded (SCAN_BUDGET overlap tests per graph);
 * past it a guard is classed SPLIT, which is always safe.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "ggml-impl.h"
#include "pprpc/types.h"

#define SCAN_BUDGET (1u << 22)

struct gge_guard {
	int pos;          /* the user's position in the node order */
	int idx;          /* the index tensor (wire index) */
	int64_t bound;    /* values must be in [0, bound) */
	int when;         /* GGE_GUARD_* */
	/* START: another START guard reads the same tensor against a bound no
	 * larger, so this one holds whenever that one does */
	bool covered;
};

/* Which source holds indices, and what they index: dimension dim of source
 * `of` (-1: of the node itself).  Keep in step with the kernels, and with
 * rules/ggml_rules.h: an op that follows indices needs a line here before a
 * rule may accept it. */
static const struct {
	enum ggml_op op;
	int idx_src, of, dim;
} table[] = {
	{ GGML_OP_GET_ROWS, 1, 0, 1 },       /* rows of a */
	{ GGML_OP_GET_ROWS_BACK, 1, -1, 1 }, /* rows of the result */
	{ GGML_OP_SET_ROWS, 1, -1, 1 },      /* rows of the destination (the node views it) */
	{ GGML_OP_ADD_ID, 2, 1, 1 },         /* rows of b */
	{ GGML_OP_MUL_MAT_ID, 2, 0, 2 },     /* experts of as */
	{ GGML_OP_SSM_SCAN, 6, 0, 3 },       /* sequences of the state */
};

static uintptr_t lo(const struct ggml_tensor *t)
{
	return (uintptr_t)t->data;
}

/* Does a backend run node w?  ggml-cpu skips a view op and a node without
 * GGML_TENSOR_FLAG_COMPUTE (ggml-cpu.c:3140-3146, ggml_graph_compute_thread);
 * ggml-cuda skips those and an empty tensor (ggml-cuda.cu:4322, 4630).  A
 * node that does not run writes nothing and proves nothing: its bytes are
 * whatever the client left there (issue 27.2: an ARGSORT without the flag
 * "proved" indices the client wrote). */
static bool runs(const struct ggml_tensor *w)
{
	return !ggml_op_is_empty(w->op) && (w->flags & GGML_TENSOR_FLAG_COMPUTE) && !ggml_is_empty(w);
}

/* Is x the node w itself, or a node that views it through view ops (their
 * src[0] chain)?  Only then is x one of the sort's outputs as the backends
 * see the graph: ggml-cuda fuses ARGSORT -> VIEW -> GET_ROWS (the MoE top-k,
 * ggml-cuda.cu:3497-3537, topk-moe.cu:245) and then writes only the view's
 * elements of the sort's bytes; it refuses to fuse when the sort has another
 * user (ggml_can_fuse_subgraph_ext, ggml.c:7791-7803), but a leaf tensor over
 * the same bytes is no user it can see.  A leaf alias is checked as data. */
static bool viewed_from(const struct ggml_tensor *x, const struct ggml_tensor *w)
{
	for (int hops = 0; hops < 16 && x; hops++) {
		if (x == w)
			return true;
		if (x->op != GGML_OP_VIEW && x->op != GGML_OP_RESHAPE && x->op != GGML_OP_PERMUTE &&
		    x->op != GGML_OP_TRANSPOSE)
			return false;
		x = x->src[0];
	}
	return false;
}

/* Does node w, which runs and is the last writer of the bytes of index
 * tensor x (ex bytes from lo(x)), leave every element of x below bound?
 * Only a sort's output does: ARGSORT writes a permutation of [0, ne00) over
 * its whole output, TOP_K the first ne0 of it per row (ggml-cpu ops.cpp
 * argsort / top_k, ggml-cuda argsort.cu / top-k.cu), so its shape must be
 * the one that fills every row of w (ne1..3 those of the source, ne0 the
 * source's for ARGSORT, at most it for TOP_K); x must read whole,
 * aligned int32 elements of those bytes (a stride that is not a multiple
 * of 4 would compose an index of two), and ne00 must not exceed bound. */
static bool proves(const struct ggml_tensor *w, const struct ggml_tensor *x, uint64_t ex, uint64_t ew,
		   int64_t bound)
{
	const struct ggml_tensor *s = w->src[0];

	if ((w->op != GGML_OP_ARGSORT && w->op != GGML_OP_TOP_K) || !s || w->type != GGML_TYPE_I32 ||
	    x->type != GGML_TYPE_I32 || !ggml_is_contiguous(w) || s->ne[0] > bound || s->ne[0] < 1)
		return false;
	if (w->op == GGML_OP_ARGSORT ? w->ne[0] != s->ne[0] : w->ne[0] > s->ne[0])
		return false;
	for (int d = 1; d < GGML_MAX_DIMS; d++)
		if (w->ne[d] != s->ne[d])
			return false;
	for (int d = 0; d < GGML_MAX_DIMS; d++)
		if (x->ne[d] > 1 && x->nb[d] % sizeof(int32_t))
			return false;
	if (!viewed_from(x, w))
		return false;
	return ew >= ggml_nbytes(w) && lo(x) >= lo(w) && lo(x) + ex <= lo(w) + ggml_nbytes(w) &&
	       (lo(x) - lo(w)) % sizeof(int32_t) == 0;
}

/* Could position pos's index tensor idx hold values >= bound? */
static int classify(const struct gge_graph *gg, int pos, int idx, int64_t bound, uint64_t *budget)
{
	const struct ggml_tensor *x = gg->t[idx];
	uint64_t ex = gg->plan[idx].extent;

	for (int k = pos - 1; k >= 0; k--) {
		const struct ggml_tensor *w = gg->cg->nodes[k];
		uint64_t ew = gg->plan[gg->order[k]].reach;

		if (*budget == 0)
			return GGE_GUARD_SPLIT;
		(*budget)--;
		/* A node writes nothing outside its reach (ggml_wire.c; the
		 * rules hold its shape to what ggml makes); a node no backend
		 * runs writes nothing at all. */
		if (!runs(w) || !ew || !ex || lo(w) >= lo(x) + ex || lo(x) >= lo(w) + ew)
			continue;
		/* The last writer decides: a later one over the sort's bytes
		 * was met first and made this a SPLIT. */
		return proves(w, x, ex, ew, bound) ? GGE_GUARD_PROVEN : GGE_GUARD_SPLIT;
	}
	return GGE_GUARD_START;
}

static int by_tensor_then_bound(const void *a, const void *b)
{
	const struct gge_guard *x = *(const struct gge_guard *const *)a, *y = *(const struct gge_guard *const *)b;

	if (x->idx != y->idx)
		return x->idx < y->idx ? -1 : 1;
	if (x->bound != y->bound)
		return x->bound < y->bound ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A START guard's values are the client's, the same for every user: read
 * each index tensor once, against its smallest bound.  llama.cpp's graphs
 * index the KV cache with one slot tensor per K and V for all the layers:
 * on a GPU each read is a device-to-host copy and a synchronize, so a
 * 16-layer decode step makes 4 of them instead of 34. */
static int cover_start_guards(struct gge_graph *gg)
{
	struct gge_guard **v = malloc((size_t)gg->nguards * sizeof(*v));
	int n = 0;

	if (!v)
		return PPRPC_ENOMEM;
	for (int i = 0; i < gg->nguards; i++)
		if (gg->guards[i].when == GGE_GUARD_START)
			v[n++] = &gg->guards[i];
	qsort(v, (size_t)n, sizeof(*v), by_tensor_then_bound);
	for (int i = 1; i < n; i++)
		v[i]->covered = v[i]->idx == v[i - 1]->idx;
	free(v);
	return 0;
}

int gge_guards_plan(struct gge_graph *gg, const Pprpc__GgmlTensor *const *w, char *err, size_t errlen)
{
	uint64_t budget = SCAN_BUDGET;
	int n = 0;

	for (int k = 0; k < gg->nnodes; k++)
		for (size_t e = 0; e < sizeof(table) / sizeof(table[0]); e++)
			n += gg->cg->nodes[k]->op == table[e].op;
	if (!n)
		return 0;
	gg->guards = calloc((size_t)n, sizeof(*gg->guards));
	if (!gg->guards)
		return PPRPC_ENOMEM;
	for (int k = 0; k < gg->nnodes; k++) {
		const struct ggml_tensor *node = gg->cg->nodes[k];

		for (size_t e = 0; e < sizeof(table) / sizeof(table[0]); e++) {
			const struct ggml_tensor *x = node->src[table[e].idx_src];
			const struct ggml_tensor *of = table[e].of < 0 ? node : node->src[table[e].of];
			struct gge_guard *gd = &gg->guards[gg->nguards];

			if (node->op != table[e].op)
				continue;
			/* The rules require these; a rule set that lets one
			 * through must not turn into a crash here. */
			if (!x || !of || (x->type != GGML_TYPE_I32 && x->type != GGML_TYPE_I64)) {
				snprintf(err, errlen, "node #%d (%s): its indices must be an i32/i64 source %d",
					 gg->order[k], ggml_op_name(node->op), table[e].idx_src);
				return PPRPC_EINVAL;
			}
			gd->pos = k;
			gd->idx = w[gg->order[k]]->src[table[e].idx_src];
			gd->bound = of->ne[table[e].dim];
			gd->when = classify(gg, k, gd->idx, gd->bound, &budget);
			gg->nguards++;
		}
	}
	if (cover_start_guards(gg) < 0) {
		snprintf(err, errlen, "out of memory planning the index checks");
		return PPRPC_ENOMEM;
	}
	return 0;
}

int gge_guards_count(const struct gge_graph *gg, int when)
{
	int n = 0;

	for (int i = 0; i < gg->nguards; i++)
		n += gg->guards[i].when == when;
	return n;
}

int gge_guards_next_split(const struct gge_graph *gg, int from)
{
	for (int i = 0; i < gg->nguards; i++)
		if (gg->guards[i].pos >= from && gg->guards[i].when == GGE_GUARD_SPLIT)
			return gg->guards[i].pos;
	return gg->nnodes;
}

/* Host-visible bytes of x: in place, or copied into gg->scratch. */
static const uint8_t *host_bytes(struct gge_graph *gg, const struct ggml_tensor *x, uint64_t extent)
{
	void *s;

	if (ggml_backend_buffer_is_host(x->buffer))
		return x->data;
	if (gg->scratch_size < extent) {
		s = realloc(gg->scratch, (size_t)extent);
		if (!s)
			return NULL;
		gg->scratch = s;
		gg->scratch_size = (size_t)extent;
	}
	gge_buf_read(x->buffer, (uint64_t)((uint8_t *)x->data - (uint8_t *)ggml_backend_buffer_get_base(x->buffer)),
		     gg->scratch, extent);
	return gg->scratch;
}

void gge_guard_describe(const struct gge_graph *gg, int guard, int64_t value, const int64_t at[4], char *err,
			size_t errlen)
{
	const struct gge_guard *gd;

	if (guard < 0 || guard >= gg->nguards) {
		snprintf(err, errlen, "index %" PRId64 " outside its table (check #%d)", value, guard);
		return;
	}
	gd = &gg->guards[guard];
	snprintf(err, errlen,
		 "node #%d (%s): index %" PRId64 " at [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
		 "] of tensor #%d is outside [0, %" PRId64 ")",
		 gg->order[gd->pos], ggml_op_name(gg->cg->nodes[gd->pos]->op), value, at[0], at[1], at[2], at[3],
		 gd->idx, gd->bound);
}

static int check_one(struct gge_graph *gg, int guard, char *err, size_t errlen)
{
	const struct gge_guard *gd = &gg->guards[guard];
	const struct ggml_tensor *x = gg->t[gd->idx];
	uint64_t extent = gg->plan[gd->idx].extent;
	const uint8_t *p;

	if (!extent)
		return 0;
	p = host_bytes(gg, x, extent);
	if (!p) {
		snprintf(err, errlen, "cannot stage %" PRIu64 " bytes of indices", extent);
		return PPRPC_ENOMEM;
	}
	for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
		for (int64_t i2 = 0; i2 < x->ne[2]; i2++)
			for (int64_t i1 = 0; i1 < x->ne[1]; i1++)
				for (int64_t i0 = 0; i0 < x->ne[0]; i0++) {
					const uint8_t *e = p + i0 * x->nb[0] + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3];
					int64_t v;

					if (x->type == GGML_TYPE_I32) {
						int32_t v32;

						memcpy(&v32, e, sizeof(v32));
						v = v32;
					} else {
						memcpy(&v, e, sizeof(v));
					}
					if (v < 0 || v >= gd->bound) {
						const int64_t at[4] = { i0, i1, i2, i3 };

						gge_guard_describe(gg, guard, v, at, err, errlen);
						return PPRPC_ERANGE;
					}
				}
	return 0;
}

/* Does a node of the graph write bytes of tensor idx? */
static bool written(const struct gge_graph *gg, int idx)
{
	const struct ggml_tensor *x = gg->t[idx];
	uint64_t ex = gg->plan[idx].extent;

	for (int k = 0; k < gg->nnodes; k++) {
		const struct ggml_tensor *w = gg->cg->nodes[k];
		uint64_t ew = gg->plan[gg->order[k]].reach;

		if (!ggml_op_is_empty(w->op) && ew && lo(w) < lo(x) + ex && lo(x) < lo(w) + ew)
			return true;
	}
	return false;
}

/* Guard i, when the GPU must check it: 1; 0 when not; -1 when it cannot. */
static int gpu_check(const struct gge_graph *gg, int i)
{
	const struct gge_guard *gd = &gg->guards[i];
	const struct ggml_tensor *x = gg->t[gd->idx];
	const size_t es = x->type == GGML_TYPE_I64 ? sizeof(int64_t) : sizeof(int32_t);

	if (gd->when != GGE_GUARD_START || gd->covered || !gg->plan[gd->idx].extent)
		return 0;
	/* A bad index is copied as 0, which must be in range; whole
	 * elements are loaded. */
	if (gd->bound < 1 || (uintptr_t)x->data % es)
		return -1;
	for (int d = 0; d < 4; d++)
		if ((size_t)x->nb[d] % es)
			return -1;
	return written(gg, gd->idx) ? -1 : 1;
}

int gge_guards_gpu_count(const struct gge_graph *gg)
{
	int n = 0;

	for (int i = 0; i < gg->nguards; i++) {
		int c = gpu_check(gg, i);

		if (c < 0)
			return -1;
		n += c;
	}
	return n;
}

int gge_graph_shadow(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen)
{
	const uint64_t align = g->alignment > 256 ? g->alignment : 256;
	int n = gge_guards_gpu_count(gg), k = 0;
	uint64_t size = 0, at = 0;
	uint8_t *base;
	int rc;

	if (n < 0) {
		snprintf(err, errlen, "the graph's index checks cannot run on the GPU");
		return PPRPC_EINTERNAL;
	}
	gg->gpu_ready = n == 0;
	if (n == 0)
		return 0;
	gg->gpu_checks = calloc((size_t)n, sizeof(*gg->gpu_checks));
	if (!gg->gpu_checks) {
		snprintf(err, errlen, "out of memory for the graph's index checks");
		return PPRPC_ENOMEM;
	}
	for (int i = 0; i < gg->nguards; i++)
		if (gpu_check(gg, i) > 0)
			size += (gg->plan[gg->guards[i].idx].extent + align - 1) / align * align;
	rc = gge_buf_alloc(g, size, &gg->shadow, err, errlen);
	if (rc < 0)
		return rc;
	base = ggml_backend_buffer_get_base(gg->shadow);
	for (int i = 0; i < gg->nguards; i++) {
		const struct gge_guard *gd = &gg->guards[i];
		struct ggml_tensor *x = gg->t[gd->idx];
		struct kern_index_check *r = &gg->gpu_checks[k];

		if (gpu_check(gg, i) <= 0)
			continue;
		r->src = x->data;
		r->dst = base + at;
		memcpy(r->ne, x->ne, sizeof(r->ne));
		for (int d = 0; d < 4; d++)
			r->nb[d] = (int64_t)x->nb[d];
		r->bound = gd->bound;
		r->is64 = x->type == GGML_TYPE_I64;
		r->id = i;
		at += (gg->plan[gd->idx].extent + align - 1) / align * align;
		k++;
	}
	/* Only now (gpu_check reads the client's addresses): the users read
	 * the checked copies.  A START guard's tensor is uncovered once, so
	 * each is moved once. */
	for (int j = 0; j < k; j++) {
		struct ggml_tensor *x = gg->t[gg->guards[gg->gpu_checks[j].id].idx];

		x->data = gg->gpu_checks[j].dst;
		x->buffer = gg->shadow;
	}
	gg->ngpu_checks = k;
	gg->gpu_ready = true;
	return 0;
}

int gge_guards_check(struct gge_graph *gg, int from, int to, int when, char *err, size_t errlen)
{
	for (int i = 0; i < gg->nguards; i++) {
		const struct gge_guard *gd = &gg->guards[i];
		int rc;

		if (gd->pos < from || gd->pos >= to || gd->when != when || gd->covered)
			continue;
		rc = check_one(gg, i, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

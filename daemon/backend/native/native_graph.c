/*
 * daemon/backend/native/native_graph.c — validation and planning of native
 * graphs (see native_graph.h).
 */
#include "daemon/backend/native/native_graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/objects/buffer.h"
#include "daemon/objects/graph.h"
#include "kernels/ops.h"
#include "pprpc/types.h"
#include "proto/pprpc.pb-c.h"

#define ARENA_ALIGN 64

/* Per-tensor planning state. */
struct tplan {
	int base;          /* index of the tensor owning the bytes (self if not a view) */
	uint64_t offset;   /* byte offset from the base's first byte */
	uint64_t extent;
	int defined;       /* scratch base: some node has written it */
	int writer;        /* node writing this exact tensor, -1 none */
	struct dbuf *buf;  /* buffer-backed base */
	uint64_t arena_off;
};

static int same_layout(const struct kern_tensor *a, const struct kern_tensor *b)
{
	return a->dtype == b->dtype && !memcmp(a->ne, b->ne, sizeof(a->ne)) &&
	       !memcmp(a->nb, b->nb, sizeof(a->nb));
}

/* Where tensor i's bytes start: its buffer (NULL for the arena) and the
 * offset inside it.  Two buffer-backed entries may name the same bytes, so
 * aliasing is judged on these absolute positions, not on table indices. */
static uint64_t abs_start(const struct tplan *p, int i, const struct dbuf **ret_buf)
{
	const struct tplan *b = &p[p[i].base];

	*ret_buf = b->buf;
	return b->arena_off + p[i].offset;
}

static int overlaps(const struct tplan *p, int i, int j)
{
	const struct dbuf *bi, *bj;
	uint64_t si = abs_start(p, i, &bi), sj = abs_start(p, j, &bj);

	return bi == bj && kern_ranges_overlap(si, p[i].extent, sj, p[j].extent);
}

static int same_start(const struct tplan *p, int i, int j)
{
	const struct dbuf *bi, *bj;

	return abs_start(p, i, &bi) == abs_start(p, j, &bj) && bi == bj;
}

static int plan_tensors(const struct device_graph_env *env, const Pprpc__GraphCreate *m, struct graph *g,
			struct tplan *p, char *err, size_t errlen)
{
	for (int i = 0; i < g->ntensors; i++) {
		const Pprpc__Tensor *mt = m->tensors[i];
		struct kern_tensor *t = &g->t[i];
		int rc;

		if (mt->n_ne != PPRPC_MAX_DIMS || mt->n_nb != PPRPC_MAX_DIMS) {
			snprintf(err, errlen, "tensor %d: ne and nb must have 4 entries each", i);
			return PPRPC_EINVAL;
		}
		t->dtype = (int32_t)(mt->dtype > INT32_MAX ? -1 : (int32_t)mt->dtype);
		memcpy(t->ne, mt->ne, sizeof(t->ne));
		memcpy(t->nb, mt->nb, sizeof(t->nb));
		rc = kern_tensor_check(t);
		if (rc == 0)
			rc = kern_tensor_extent(t, &p[i].extent);
		if (rc < 0) {
			snprintf(err, errlen, "tensor %d: invalid descriptor (dtype %u, ne %" PRId64 "x%" PRId64
				 "x%" PRId64 "x%" PRId64 ")", i, mt->dtype, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
			return rc;
		}
		p[i].writer = -1;
		if (mt->view_of) {
			uint32_t parent = mt->view_of - 1;

			if (parent >= (uint32_t)i || mt->buffer) {
				snprintf(err, errlen, "tensor %d: a view must name an earlier tensor and no buffer", i);
				return PPRPC_EGRAPH;
			}
			if (!kern_region_ok(p[parent].extent, mt->offset, p[i].extent)) {
				snprintf(err, errlen, "tensor %d: view [%" PRIu64 ", +%" PRIu64
					 ") is outside tensor %u (%" PRIu64 " bytes)", i, mt->offset,
					 p[i].extent, parent, p[parent].extent);
				return PPRPC_ERANGE;
			}
			p[i].base = p[parent].base;
			p[i].offset = p[parent].offset + mt->offset;
		} else if (mt->buffer) {
			struct dbuf *b;

			rc = env->buffer(env->arg, mt->buffer, mt->offset, p[i].extent, &b, err, errlen);
			if (rc < 0)
				return rc;
			if (b->dev != g->dev) {
				snprintf(err, errlen, "tensor %d: buffer lives on %s, graph runs on %s", i,
					 b->dev->name, g->dev->name);
				return PPRPC_EINVAL;
			}
			p[i].base = i;
			p[i].offset = 0;
			p[i].buf = b;
			p[i].arena_off = mt->offset;
			if (graph_hold_buffer(g, b) < 0) {
				snprintf(err, errlen, "out of memory");
				return PPRPC_ENOMEM;
			}
		} else {
			p[i].base = i;
			p[i].offset = 0;
			if (mt->offset) {
				snprintf(err, errlen, "tensor %d: a scratch tensor has no offset", i);
				return PPRPC_EINVAL;
			}
			/* Linear placement: every scratch tensor gets its own bytes. */
			uint64_t off = (g->arena_size + ARENA_ALIGN - 1) & ~(uint64_t)(ARENA_ALIGN - 1);
			if (off < g->arena_size || p[i].extent > UINT64_MAX - off) {
				snprintf(err, errlen, "graph scratch space overflows");
				return PPRPC_ETOOBIG;
			}
			p[i].arena_off = off;
			g->arena_size = off + p[i].extent;
		}
	}
	return 0;
}

/* The kernels load elements directly: the first byte of every tensor must be
 * aligned to its element (buffers and the arena are page / 64-byte aligned,
 * so the offset from the base decides). */
static int check_alignment(const struct graph *g, const struct tplan *p, char *err, size_t errlen)
{
	for (int i = 0; i < g->ntensors; i++) {
		const struct kern_dtype_traits *tr = kern_dtype(g->t[i].dtype);
		uint64_t off = p[i].offset + p[p[i].base].arena_off;

		if (off % KERN_ALIGN(tr) != 0) {
			snprintf(err, errlen, "tensor %d: offset %" PRIu64 " is not aligned to its %s elements",
				 i, off, tr->name);
			return PPRPC_EINVAL;
		}
	}
	return 0;
}

static int check_nodes(const Pprpc__GraphCreate *m, struct graph *g, struct tplan *p, char *err,
		       size_t errlen)
{
	for (int i = 0; i < g->nnodes; i++) {
		const Pprpc__Node *mn = m->nodes[i];
		struct gnode *n = &g->nodes[i];
		const struct kern_tensor *src[PPRPC_MAX_SRC];
		int nsrc = kern_op_nsrc((int)(mn->op > INT32_MAX ? -1 : (int)mn->op));
		int rc;

		if (nsrc < 0) {
			snprintf(err, errlen, "node %d: unknown op %u", i, mn->op);
			return PPRPC_EINVAL;
		}
		if ((int)mn->n_src != nsrc) {
			snprintf(err, errlen, "node %d (%s): takes %d sources, got %zu", i,
				 kern_op_name((int)mn->op), nsrc, mn->n_src);
			return PPRPC_EINVAL;
		}
		if (mn->n_fparams > PPRPC_OP_MAX_F || mn->n_iparams > PPRPC_OP_MAX_I) {
			snprintf(err, errlen, "node %d: too many parameters", i);
			return PPRPC_EINVAL;
		}
		if (mn->dst < 0 || mn->dst >= g->ntensors) {
			snprintf(err, errlen, "node %d: destination index %d out of range", i, mn->dst);
			return PPRPC_EGRAPH;
		}
		n->op = (int)mn->op;
		n->nsrc = nsrc;
		n->dst = mn->dst;
		memset(&n->p, 0, sizeof(n->p));
		/* protobuf-c leaves empty repeated fields NULL. */
		if (mn->n_fparams)
			memcpy(n->p.f, mn->fparams, mn->n_fparams * sizeof(float));
		if (mn->n_iparams)
			memcpy(n->p.i, mn->iparams, mn->n_iparams * sizeof(int32_t));
		for (int s = 0; s < nsrc; s++) {
			int si = mn->src[s];

			if (si < 0 || si >= g->ntensors) {
				snprintf(err, errlen, "node %d: source index %d out of range", i, si);
				return PPRPC_EGRAPH;
			}
			/* Sources must precede users: a scratch tensor is read only
			 * after an earlier node wrote it (this also rules out cycles). */
			if (!p[p[si].base].buf && !p[p[si].base].defined) {
				snprintf(err, errlen, "node %d (%s): source %d (tensor %d) is read before any node writes it",
					 i, kern_op_name(n->op), s, si);
				return PPRPC_EGRAPH;
			}
			if (overlaps(p, si, n->dst) &&
			    !kern_overlap_allowed(same_start(p, si, n->dst), same_layout(&g->t[si], &g->t[n->dst]),
						  kern_op_inplace_ok(n->op))) {
				snprintf(err, errlen, "node %d (%s): output overlaps source %d", i,
					 kern_op_name(n->op), s);
				return PPRPC_EGRAPH;
			}
			n->src[s] = si;
			src[s] = &g->t[si];
		}
		/* SET_ROWS writes only some rows: a scratch table would hold
		 * garbage elsewhere. */
		if (n->op == PPRPC_OP_SET_ROWS && !p[p[n->dst].base].buf) {
			snprintf(err, errlen, "node %d (SET_ROWS): the table must live in a buffer", i);
			return PPRPC_EGRAPH;
		}
		if (p[n->dst].writer >= 0) {
			snprintf(err, errlen, "node %d: tensor %d is already written by node %d", i, n->dst,
				 p[n->dst].writer);
			return PPRPC_EGRAPH;
		}
		rc = kern_op_check_dst(n->op, &n->p, src, nsrc, &g->t[n->dst], err, errlen);
		if (rc < 0)
			return rc;
		p[n->dst].writer = i;
		p[p[n->dst].base].defined = 1;
	}
	return 0;
}

static void resolve_pointers(struct graph *g, const struct tplan *p)
{
	for (int i = 0; i < g->ntensors; i++) {
		const struct tplan *b = &p[p[i].base];
		uint8_t *base = b->buf ? b->buf->ptr + b->arena_off : (uint8_t *)g->arena + b->arena_off;

		g->t[i].data = base + p[i].offset;
	}
}

/* The work of one run in flop, roughly: every element a node reads or
 * writes (one each), plus the products of the ops that loop over an inner
 * dimension — MUL_MAT 2 K per output, ATTENTION 4 n_kv (Q K^T and P V),
 * GATED_DELTA_NET about 8 d_k per output of its o part (the state update
 * and read of each step).  Zero-stride (broadcast) sources make these
 * unrelated to the bytes a graph holds, which is why it is bounded by
 * max-graph-gflop, not by memory.  Saturates at UINT64_MAX / 2; shapes are
 * validated, each tensor below 2^34 elements. */
static uint64_t estimate_work(const struct graph *g)
{
	const uint64_t cap = UINT64_MAX / 2;
	uint64_t work = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		uint64_t out = (uint64_t)kern_tensor_nelements(&g->t[n->dst]), w = out, f = 0, inner = out;

		for (int s = 0; s < n->nsrc; s++)
			w += (uint64_t)kern_tensor_nelements(&g->t[n->src[s]]);
		if (n->op == PPRPC_OP_MUL_MAT) {
			f = 2 * (uint64_t)g->t[n->src[0]].ne[0];
		} else if (n->op == PPRPC_OP_ATTENTION) {
			f = 4 * (uint64_t)g->t[n->src[1]].ne[2];
		} else if (n->op == PPRPC_OP_GATED_DELTA_NET) {
			f = 8 * (uint64_t)g->t[n->src[0]].ne[0];
			inner = (uint64_t)kern_tensor_nelements(&g->t[n->src[2]]);  /* o part: v's shape */
		}
		if (f && inner > (cap - w) / f)
			return cap;
		w += inner * f;
		if (w > cap - work)
			return cap;
		work += w;
	}
	return work;
}

/* A create's state between begin and finish. */
struct native_job {
	struct graph *g;
	const struct device_graph_env *env;
	struct tplan *p;
};

void native_graph_drop(void *ctx, void *job)
{
	struct native_job *j = job;

	(void)ctx;
	if (!j)
		return;
	free(j->p);
	free(j);
}

int native_graph_begin(void *ctx, int wire, const void *msg, const struct device_graph_env *env, struct graph *g,
		       void **ret_job, char *err, size_t errlen)
{
	const Pprpc__GraphCreate *m = msg;
	struct native_job *j;
	int rc;

	(void)ctx;
	if (wire != DEVICE_WIRE_NATIVE) {
		snprintf(err, errlen, "%s runs native graphs only", g->dev->name);
		return PPRPC_EUNSUPP;
	}
	if (m->n_nodes == 0 || m->n_nodes > PPRPC_MAX_GRAPH_NODES || m->n_tensors > PPRPC_MAX_GRAPH_TENSORS) {
		snprintf(err, errlen, "a graph needs 1..%d nodes and at most %d tensors (got %zu, %zu)",
			 PPRPC_MAX_GRAPH_NODES, PPRPC_MAX_GRAPH_TENSORS, m->n_nodes, m->n_tensors);
		return m->n_nodes == 0 ? PPRPC_EINVAL : PPRPC_ETOOBIG;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return PPRPC_ENOMEM;
	j->g = g;
	j->env = env;
	g->ntensors = (int)m->n_tensors;
	g->nnodes = (int)m->n_nodes;
	g->t = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*g->t));
	g->nodes = calloc(m->n_nodes, sizeof(*g->nodes));
	j->p = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*j->p));
	rc = PPRPC_ENOMEM;
	if (!g->t || !g->nodes || !j->p)
		goto fail;
	rc = plan_tensors(env, m, g, j->p, err, errlen);
	if (rc < 0)
		goto fail;
	rc = check_alignment(g, j->p, err, errlen);
	if (rc < 0)
		goto fail;
	rc = check_nodes(m, g, j->p, err, errlen);
	if (rc < 0)
		goto fail;
	g->work = estimate_work(g);
	*ret_job = j;
	return 0;
fail:
	native_graph_drop(ctx, j);
	return rc;
}

void native_graph_build(void *ctx, void *job)
{
	(void)ctx, (void)job;
}

int native_graph_finish(void *ctx, void *job, char *err, size_t errlen)
{
	struct native_job *j = job;
	struct graph *g = j->g;
	int rc;

	/* A graph of a few hundred bytes can demand minutes of a device
	 * (issue 19.9: zero-stride ATTENTION ran ~60 s, holding the device
	 * from everyone): bounded before anything is allocated for it. */
	rc = j->env->work(j->env->arg, g->work, err, errlen);
	if (rc < 0)
		goto out;
	if (g->arena_size) {
		rc = j->env->charge(j->env->arg, g->arena_size, &g->footprint, err, errlen);
		if (rc < 0)
			goto out;
		rc = device_alloc(g->dev, g->arena_size, &g->arena, err, errlen);
		if (rc < 0)
			goto out;
	}
	resolve_pointers(g, j->p);
out:
	native_graph_drop(ctx, j);
	return rc;
}

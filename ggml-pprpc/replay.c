/*
 * ggml-pprpc/replay.c — the last graph a device ran, recognised without
 * serializing it again (pg.h: pg_snap_*).
 *
 * llama.cpp hands graph_compute the same graph for every decoded token.
 * Serializing it to look it up in the graph cache (graphs.c) costs about
 * 160 us for a 16-layer model on this project's 2-core test host, per rank
 * and per token.  The wire form is a function of the node list and, for
 * every tensor it reads, of the fields kept here (strides, indices, the
 * buffer handle and offset are derived from them, and a freed buffer evicts
 * every cached graph using it, and its snapshots with it): when all of
 * them compare equal, the serialization would be the same bytes, so the
 * cache entry is the same.  Exact comparisons only, never a hash: a false
 * match would run another graph than the one asked for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* What the serialization of one tensor reads of it. */
struct rec {
	const void *data, *buffer, *view_src;
	const void *src[GGML_MAX_SRC];
	size_t view_offs;
	int64_t ne[GGML_MAX_DIMS];
	size_t nb[GGML_MAX_DIMS];
	int32_t type, op, flags;
	int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];
	char name[GGML_MAX_NAME];
};

/* The cgraph's node list, then every tensor serialized (a node that
 * computes nothing is left out of the serialization, and what makes it so
 * is in its record), each with its record. */
struct pg_snap {
	const struct pg_cache_entry *e;
	int nnodes;
	size_t n;                           /* nnodes + tensors serialized */
	const struct ggml_tensor **ptr;
	struct rec *rec;
};

static void rec_fill(struct rec *r, const struct ggml_tensor *t)
{
	memset(r, 0, sizeof(*r));
	r->data = t->data;
	r->buffer = t->buffer;
	r->view_src = t->view_src;
	memcpy(r->src, t->src, sizeof(r->src));
	r->view_offs = t->view_offs;
	memcpy(r->ne, t->ne, sizeof(r->ne));
	memcpy(r->nb, t->nb, sizeof(r->nb));
	r->type = (int32_t)t->type;
	r->op = (int32_t)t->op;
	r->flags = t->flags;
	memcpy(r->op_params, t->op_params, sizeof(r->op_params));
	/* the string: the bytes after its end are whatever set_name left */
	snprintf(r->name, sizeof(r->name), "%s", t->name);
}

static int rec_equal(const struct rec *r, const struct ggml_tensor *t)
{
	return r->data == t->data && r->buffer == t->buffer && r->view_src == t->view_src &&
	       r->view_offs == t->view_offs && r->type == (int32_t)t->type && r->op == (int32_t)t->op &&
	       r->flags == t->flags && !memcmp(r->src, t->src, sizeof(r->src)) && !memcmp(r->ne, t->ne, sizeof(r->ne)) &&
	       !memcmp(r->nb, t->nb, sizeof(r->nb)) && !memcmp(r->op_params, t->op_params, sizeof(r->op_params)) &&
	       !strncmp(r->name, t->name, sizeof(r->name));
}

static void snap_free(struct pg_snap *s)
{
	if (!s)
		return;
	free(s->ptr);
	free(s->rec);
	free(s);
}

/* The snapshots of a device, most recently used first.  llama.cpp's
 * scheduler keeps several copies of a pipelined graph's inputs and cycles
 * through them (GGML_SCHED_MAX_COPIES, 4), so the same graph comes back
 * with other input tensors every other token: one snapshot per copy. */
struct pg_snaps {
	struct pg_snap *s[PG_SNAPS];
	int n;
};

static void to_front(struct pg_snaps *v, int i)
{
	struct pg_snap *x = v->s[i];

	memmove(&v->s[1], &v->s[0], (size_t)i * sizeof(v->s[0]));
	v->s[0] = x;
}

void pg_snap_forget(struct pg_device *d, const struct pg_cache_entry *e)
{
	struct pg_snaps *v = d->snaps;

	if (!v)
		return;
	for (int i = 0; i < v->n;) {
		if (e && v->s[i]->e != e) {
			i++;
			continue;
		}
		snap_free(v->s[i]);
		memmove(&v->s[i], &v->s[i + 1], (size_t)(v->n - i - 1) * sizeof(v->s[0]));
		v->n--;
	}
	if (!e) {
		free(v);
		d->snaps = NULL;
	}
}

void pg_snap_take(struct pg_device *d, const struct ggml_cgraph *g, const struct pg_wire *w,
		  struct pg_cache_entry *e)
{
	struct pg_snaps *v = d->snaps;
	struct pg_snap *s;
	int nn = ggml_graph_n_nodes((struct ggml_cgraph *)g);

	if (!v && !(v = d->snaps = calloc(1, sizeof(*v))))
		return; /* no snapshot: the next call serializes, which is correct */
	/* An entry reached through the slow path again: its graph changed
	 * while mapping to the same bytes (another input copy, say); the
	 * old snapshot stays, the new one joins it. */
	if (v->n == PG_SNAPS) {
		snap_free(v->s[PG_SNAPS - 1]);
		v->n--;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->e = e;
	s->nnodes = nn;
	s->n = (size_t)nn + w->n;
	s->ptr = malloc((s->n ? s->n : 1) * sizeof(*s->ptr));
	s->rec = malloc((s->n ? s->n : 1) * sizeof(*s->rec));
	if (!s->ptr || !s->rec) {
		snap_free(s);
		return;
	}
	for (int i = 0; i < nn; i++)
		s->ptr[i] = ggml_graph_node((struct ggml_cgraph *)g, i);
	memcpy(s->ptr + nn, w->ptr, w->n * sizeof(*s->ptr));
	for (size_t i = 0; i < s->n; i++)
		rec_fill(&s->rec[i], s->ptr[i]);
	v->s[v->n++] = s;
	to_front(v, v->n - 1);
}

static int snap_matches(const struct pg_snap *s, const struct ggml_cgraph *g)
{
	if (ggml_graph_n_nodes((struct ggml_cgraph *)g) != s->nnodes)
		return 0;
	for (int i = 0; i < s->nnodes; i++)
		if (ggml_graph_node((struct ggml_cgraph *)g, i) != s->ptr[i])
			return 0;
	/* The same node list: the serialization visits the same tensors, in
	 * the same order, as long as each holds what it held (their source
	 * and view pointers included). */
	for (size_t i = 0; i < s->n; i++)
		if (!rec_equal(&s->rec[i], s->ptr[i]))
			return 0;
	return 1;
}

struct pg_cache_entry *pg_snap_match(struct pg_device *d, const struct ggml_cgraph *g)
{
	struct pg_snaps *v = d->snaps;

	for (int i = 0; v && i < v->n; i++)
		if (snap_matches(v->s[i], g)) {
			to_front(v, i);
			return (struct pg_cache_entry *)v->s[0]->e;
		}
	return NULL;
}

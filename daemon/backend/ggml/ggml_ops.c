/*
 * daemon/backend/ggml/ggml_ops.c — the device's table of op implementations
 * and what a graph keeps of it (see ggml_ops.h).
 */
#include "daemon/backend/ggml/ggml_ops.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "ggml-impl.h"
#include "pprpc/types.h"

struct gge_op *gge_dev_op_find(const struct gge_dev *g, const struct gge_op_i *i)
{
	for (int k = 0; k < g->nops; k++)
		if (g->ops[k].i == i)
			return (struct gge_op *)&g->ops[k];
	return NULL;
}

int gge_dev_op_add(struct gge_dev *g, const struct gge_op_i *i, void *ctx, struct gge_op **ret)
{
	struct gge_op *op = gge_dev_op_find(g, i);

	if (!op) {
		if (g->nops == GGE_MAX_OPS)
			return PPRPC_ELIMIT;
		op = &g->ops[g->nops++];
		op->i = i;
		op->ctx = ctx;
	}
	*ret = op;
	return 0;
}

void gge_dev_ops_fini(struct gge_dev *g)
{
	for (int k = 0; k < g->nops; k++)
		if (g->ops[k].i->fini)
			g->ops[k].i->fini(g->ops[k].ctx);
	g->nops = 0;
}

static const struct gge_op *op_for(const struct gge_dev *g, enum ggml_op o)
{
	for (int k = 0; k < g->nops; k++)
		if (g->ops[k].i->op == o)
			return &g->ops[k];
	return NULL;
}

int gge_ops_plan(struct gge_dev *g, struct gge_graph *gg)
{
	int n = 0;

	if (!g->nops)
		return 0;
	for (int k = 0; k < gg->nnodes; k++)
		n += op_for(g, gg->cg->nodes[k]->op) != NULL;
	if (!n)
		return 0;
	gg->opn = calloc((size_t)n, sizeof(*gg->opn));
	if (!gg->opn)
		return PPRPC_ENOMEM;
	for (int k = 0; k < gg->nnodes; k++) {
		const struct gge_op *op = op_for(g, gg->cg->nodes[k]->op);
		struct gge_op_node *x = &gg->opn[gg->nopn];
		int rc;

		if (!op)
			continue;
		x->pos = k;
		x->op = op;
		x->why = -1;
		rc = op->i->plan(op->ctx, gg->cg->nodes[k], &x->state, &x->why);
		if (rc < 0)
			return rc;
		if (x->state)
			x->why = -1;
		else if (x->why < 0)
			x->why = 0;
		gg->nopn++;
	}
	return 0;
}

void gge_ops_free(struct gge_graph *gg)
{
	for (int k = 0; k < gg->nopn; k++)
		if (gg->opn[k].state)
			gg->opn[k].op->i->state_free(gg->opn[k].op->ctx, gg->opn[k].state);
	free(gg->opn);
	gg->opn = NULL;
	gg->nopn = 0;
}

int gge_ops_next_native(const struct gge_graph *gg, int from)
{
	for (int k = 0; k < gg->nopn; k++)
		if (gg->opn[k].why < 0 && gg->opn[k].pos >= from)
			return gg->opn[k].pos;
	return gg->nnodes;
}

int gge_ops_run(struct gge_graph *gg, int pos, int *ret_why, char *err, size_t errlen)
{
	for (int k = 0; k < gg->nopn; k++) {
		const struct gge_op_node *x = &gg->opn[k];

		if (x->pos == pos && x->why < 0)
			return x->op->i->run(x->op->ctx, x->state, ret_why, err, errlen);
	}
	snprintf(err, errlen, "node %d is run by none of pprpc's ops", pos);
	return PPRPC_EINTERNAL;
}

void gge_ops_count_ggml(const struct gge_graph *gg, int from, int to)
{
	for (int k = 0; k < gg->nopn; k++) {
		const struct gge_op_node *x = &gg->opn[k];

		if (x->pos >= from && x->pos < to && x->why >= 0 && x->op->i->count_ggml)
			x->op->i->count_ggml(x->op->ctx, x->why);
	}
}

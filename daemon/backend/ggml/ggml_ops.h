/*
 * daemon/backend/ggml/ggml_ops.h — op implementations of pprpc's own that
 * the engine may run instead of ggml's kernel for some nodes (the
 * GATED_DELTA_NET of ggml_gdn.c is one).
 *
 * The engine knows none of them: a device holds a small table of them
 * (gge_dev_op_add, by whoever configures the device: ggml_device.c, a test),
 * and the engine consults it when it builds a graph (which nodes the op
 * runs) and when it runs one (a run cuts its segments at those nodes:
 * everything before has completed when the op starts, and it has
 * completed before the next segment starts, ggml_run.c).  An op keeps its
 * state in its own context and in its nodes' states, never in the
 * engine's structs.
 */
#ifndef PPRPC_DAEMON_GGML_OPS_H
#define PPRPC_DAEMON_GGML_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "ggml.h"

struct gge_dev;
struct gge_graph;

struct gge_op_i {
	enum ggml_op op;             /* the ggml op it may compute */
	/* Create time, for node x of that op: 0 with *ret_state (pprpc's
	 * implementation runs it) or with *ret_state NULL and *ret_why >= 0
	 * (ggml's kernel does, the op's reason for counting); a negative
	 * code (PPRPC_ENOMEM) fails the create. */
	int (*plan)(void *ctx, const struct ggml_tensor *x, void **ret_state, int *ret_why);
	/* Run time (the device's worker), a node the op planned to run: 0
	 * with *ret_why -1 (it ran) or >= 0 (this run's data is not its to
	 * compute: ggml's kernel must, counted by the op already); or a
	 * negative code with the reason. */
	int (*run)(void *ctx, void *state, int *ret_why, char *err, size_t errlen);
	/* ggml's kernel ran a node the op declined at create, for why. */
	void (*count_ggml)(void *ctx, int why);
	void (*state_free)(void *ctx, void *state);
	/* The device closes. */
	void (*fini)(void *ctx);
};

#define GGE_MAX_OPS 4

/* One op of a device's table. */
struct gge_op {
	const struct gge_op_i *i;
	void *ctx;
};

/* A node a registered op was consulted for (struct gge_graph: opn). */
struct gge_op_node {
	int pos;                     /* position in the node order */
	const struct gge_op *op;
	int why;                     /* -1: the op runs it; else ggml's kernel (the op's reason) */
	void *state;
};

/* Host memory one node's entry may take at most (gge_graph_host_size);
 * an op's node state fits in it. */
#define GGE_OP_NODE_BYTES 1024

/* Register (i, ctx) on g, or find the one registered for i: *ret the
 * table's entry.  PPRPC_ELIMIT past GGE_MAX_OPS. */
int gge_dev_op_add(struct gge_dev *g, const struct gge_op_i *i, void *ctx, struct gge_op **ret);
/* The entry registered for i, or NULL. */
struct gge_op *gge_dev_op_find(const struct gge_dev *g, const struct gge_op_i *i);
/* Every op's fini (gge_dev_close). */
void gge_dev_ops_fini(struct gge_dev *g);

/* Create time: consult the ops for gg's nodes (gg->opn).  0 or a negative
 * code. */
int gge_ops_plan(struct gge_dev *g, struct gge_graph *gg);
void gge_ops_free(struct gge_graph *gg);
/* First node position >= from that an op runs, nnodes if none. */
int gge_ops_next_native(const struct gge_graph *gg, int from);
/* Run position pos, one of those: 0 with *ret_why as the op's run
 * says. */
int gge_ops_run(struct gge_graph *gg, int pos, int *ret_why, char *err, size_t errlen);
/* Count the nodes in [from, to) that ggml's backend just ran for ops that
 * declined them. */
void gge_ops_count_ggml(const struct gge_graph *gg, int from, int to);

#endif

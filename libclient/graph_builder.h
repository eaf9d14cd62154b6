/* libclient/graph_builder.h — the builder's internals (graph.c sends it). */
#ifndef PPRPC_LIBCLIENT_GRAPH_BUILDER_H
#define PPRPC_LIBCLIENT_GRAPH_BUILDER_H

#include "kernels/ops.h"
#include "pprpc_graph.h"

struct gb_tensor {
	pprpc_tensor t;   /* buffer 0 = scratch or view */
	int view_of;      /* 1 + index of the viewed tensor, 0 = none */
};

struct gb_node {
	int op;
	int nsrc;
	int src[PPRPC_MAX_SRC];
	int dst;
	struct pprpc_op_params p;
};

struct pprpc_graph_builder {
	struct gb_tensor *t;
	int nt, tcap;
	struct gb_node *n;
	int nn, ncap;
	char err[256];
};

#endif

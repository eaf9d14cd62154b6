/*
 * daemon/backend/native/native_graph.h — the native engine's graphs
 * (GRAPH_CREATE), shared by the backends that run pprpc's own kernels
 * (cpu/, cuda/): validation and planning of a Pprpc__GraphCreate into the
 * graph's tensors, nodes and arena.  The backends put these four in their
 * device_i (backend_impl.h: graph_begin ... graph_drop) and say
 * DEVICE_WIRE_NATIVE in graph_wires.
 *
 * A native graph is validated once, with the same shape rules the client
 * uses (kernels/ops.h): every tensor descriptor, every region against its
 * buffer, topology (each node reads only leaf tensors or outputs of earlier
 * nodes; each tensor is written by at most one node), and each node's
 * shapes and types.  Scratch tensors (no buffer) are placed in a per-graph
 * arena.  The result holds resolved data pointers, so GRAPH_RUN does no
 * checking at all.  What every engine shares (node cap, work bound, the
 * owner's charge) is objects/graph.c's, reached through the env.
 */
#ifndef PPRPC_DAEMON_NATIVE_GRAPH_H
#define PPRPC_DAEMON_NATIVE_GRAPH_H

#include <stddef.h>

#include "daemon/device/device.h"

/* begin (loop): the tensors and nodes validated, buffers held by g, the
 * work of a run estimated (g->work); build: nothing left; finish (loop):
 * the work bound, the arena charged and allocated, pointers resolved. */
int native_graph_begin(void *ctx, int wire, const void *msg, const struct device_graph_env *env, struct graph *g,
		       void **ret_job, char *err, size_t errlen);
void native_graph_build(void *ctx, void *job);
int native_graph_finish(void *ctx, void *job, char *err, size_t errlen);
void native_graph_drop(void *ctx, void *job);

/* The device_i rows (designated initializers). */
#define NATIVE_GRAPH_OPS                                                                        \
	.graph_begin = native_graph_begin, .graph_build = native_graph_build,                  \
	.graph_finish = native_graph_finish, .graph_drop = native_graph_drop

#endif

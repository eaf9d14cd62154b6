/*
 * tests/integration/ggml_wire.h — a local ggml graph in the wire form of
 * GGML_GRAPH_CREATE (doc/ggml.md), for the tests that compare what a ggml
 * device computes with what ggml computes in the test process.
 *
 * Tensors go out as ggml-rpc orders them: each node after its sources and
 * view source (depth first), nodes in graph order; a tensor's memory is the
 * remote buffer standing for its local buffer plus the same offset.
 */
#ifndef PPRPC_TESTS_GGML_WIRE_H
#define PPRPC_TESTS_GGML_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "proto/pprpc.pb-c.h"

/* A local buffer and the remote buffer handle standing for it. */
struct gw_map {
	ggml_backend_buffer_t local;
	uint64_t remote;
};

struct gw_graph {
	Pprpc__GgmlGraphCreate msg;
	Pprpc__GgmlTensor *t;        /* msg.tensors point here */
	Pprpc__GgmlTensor **tp;
	int32_t *nodes;
	struct ggml_tensor **local;  /* the local tensor of each wire tensor */
	size_t cap;
};

/* Serialize cg for device.  0, or -1 when a tensor's buffer is not mapped
 * or memory runs out. */
int gw_serialize(struct ggml_cgraph *cg, const struct gw_map *map, int nmap, uint32_t device, struct gw_graph *out);
/* Wire index of a local tensor, -1 if absent. */
int gw_index(const struct gw_graph *g, const struct ggml_tensor *t);
void gw_free(struct gw_graph *g);

#endif

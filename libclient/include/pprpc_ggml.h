/*
 * pprpc_ggml.h — ggml graphs on a rank's ggml devices (doc/ggml.md), for a
 * ggml backend such as libggml-pprpc.so.
 *
 * A rank serving a device as "ggml:CPU" / "ggml:CUDA0" runs ggml's own
 * kernels on graphs in ggml's terms: tensors with ggml's type and op
 * numbers, op_params as ggml lays them out, sources by index.  The caller
 * turns its ggml graph into an array of pprpc_ggml_tensor (pointers never
 * travel: a tensor's bytes are a buffer handle plus an offset) and the
 * library puts it on the wire.  The numbers mean what they mean in the
 * caller's ggml, so every graph names the caller's ggml_version() and the
 * rank refuses a graph of another ggml rather than misread it.
 *
 * A created ggml graph is a pprpc_graph like any other: pprpc_graph_run /
 * pprpc_graph_run_async run it, pprpc_graph_free frees it (pprpc.h).
 *
 * This header does not include ggml's: the limits below are ggml's, and a
 * caller that has both checks them (_Static_assert) where it converts.
 * Errors: negative PPRPC_E* codes, the message in pprpc_last_error.
 */
#ifndef PPRPC_GGML_H
#define PPRPC_GGML_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PPRPC_GGML_MAX_DIMS 4        /* GGML_MAX_DIMS */
#define PPRPC_GGML_MAX_SRC 10        /* GGML_MAX_SRC */
#define PPRPC_GGML_MAX_OP_PARAMS 64  /* GGML_MAX_OP_PARAMS, bytes */
#define PPRPC_GGML_MAX_NAME 63       /* bytes of a name that travel */

/* One tensor of a graph (or of an op query) in wire form.  Indices (src,
 * view_src) point to tensors earlier in the same array; -1 is none.  A
 * tensor that is only read (a weight, an input) has op 0 (GGML_OP_NONE)
 * and no sources.  The pointers are borrowed for the duration of the call
 * that takes the array. */
typedef struct pprpc_ggml_tensor {
	uint32_t type;                          /* enum ggml_type */
	uint32_t op;                            /* enum ggml_op */
	int64_t ne[PPRPC_GGML_MAX_DIMS];
	uint64_t nb[PPRPC_GGML_MAX_DIMS];       /* byte strides */
	const void *op_params;                  /* op_params_len bytes (may be NULL if 0) */
	uint32_t op_params_len;                 /* <= PPRPC_GGML_MAX_OP_PARAMS; trailing zeros may be left out */
	int32_t flags;                          /* GGML_TENSOR_FLAG_* */
	int32_t src[PPRPC_GGML_MAX_SRC];        /* the first n_src are sent */
	uint32_t n_src;                         /* <= PPRPC_GGML_MAX_SRC */
	int32_t view_src;                       /* -1: not a view */
	uint64_t view_offs;                     /* bytes into view_src */
	pprpc_buffer buffer;                    /* where its bytes are (0 in op queries) */
	uint64_t offset;                        /* bytes into buffer */
	const char *name;                       /* for the rank's error messages, at most
						 * PPRPC_GGML_MAX_NAME bytes; NULL or "" = none */
} pprpc_ggml_tensor;

/* A graph: tensors, and the nodes to compute in order (indices into
 * tensors; one listed twice runs twice). */
typedef struct pprpc_ggml_graph_desc {
	uint32_t device;                        /* a ggml device of the rank */
	const pprpc_ggml_tensor *tensors;
	size_t n_tensors;
	const int32_t *nodes;
	size_t n_nodes;
	const char *ggml_version;               /* ggml_version() of the caller's ggml */
} pprpc_ggml_graph_desc;

/* One op with its sources, for the questions ggml's device interface asks
 * about a single tensor (supports_op, get_alloc_size): tensors[node] is the
 * op.  The question is about the op, not where a graph puts it: placement
 * (buffer, offset) and flags are left 0. */
typedef struct pprpc_ggml_op_desc {
	uint32_t device;
	const pprpc_ggml_tensor *tensors;
	size_t n_tensors;
	int32_t node;
} pprpc_ggml_op_desc;

/* ---- graphs --------------------------------------------------------------------- */

/* Create the graph on the rank (GGML_GRAPH_CREATE; the rank validates it
 * completely, since ggml aborts on what it does not expect).  Errors: those
 * of the rank's validator (PPRPC_EINVAL, PPRPC_ESHAPE, PPRPC_EGRAPH,
 * PPRPC_EVERSION: another ggml, ...), PPRPC_ETOOBIG (over PPRPC_MAX_META in
 * wire form), PPRPC_EINVAL (a tensor over the limits above). */
PPRPC_API int pprpc_ggml_graph_create(pprpc_client *c, const pprpc_ggml_graph_desc *g, pprpc_graph *out);
/* Create the graph and queue its first run in one message, without waiting
 * (caps.ggml_create_run): a new graph costs no round trip.  The run is on
 * the device's queue as a pprpc_graph_run_async sent now would be; a create
 * the rank refuses fails the queue too (reported by the next
 * pprpc_synchronize), so nothing queued behind it computes on inputs the
 * graph never wrote.  *out is the request: its graph handle comes with the
 * reply (pprpc_request_graph), needed only to run the graph again or free
 * it.  Errors at sending as pprpc_ggml_graph_create, PPRPC_ENOMEM. */
PPRPC_API int pprpc_ggml_graph_create_run(pprpc_client *c, const pprpc_ggml_graph_desc *g, pprpc_request **out);

/* ---- op queries ------------------------------------------------------------------ */

/* Would the device run op (GGML_SUPPORTS: the rank's validator, then its
 * ggml's supports_op)?  *out_supported is 1 or 0; when 0 and reason is not
 * NULL, the rank's reason goes there (reason_len bytes, NUL-terminated).
 * An op the rank's validator refuses outright fails with its code. */
PPRPC_API int pprpc_ggml_op_supported(pprpc_client *c, const pprpc_ggml_op_desc *op, int *out_supported,
				      char *reason, size_t reason_len);
/* The bytes the device's buffer type allocates for op
 * (ggml_backend_buft_get_alloc_size on the rank: padding, scratch). */
PPRPC_API int pprpc_ggml_op_alloc_size(pprpc_client *c, const pprpc_ggml_op_desc *op, uint64_t *out_size);

/* ---- wire form ------------------------------------------------------------------- */

/* The message pprpc_ggml_graph_create sends (without the run request),
 * packed: equal bytes mean an equal graph on equal memory, which makes it a
 * cache key for created graphs; its length is what PPRPC_MAX_META bounds;
 * and it is what the daemon's fuzz corpus holds.  The same for an op query
 * (GGML_SUPPORTS).  *ret is malloc'ed: free it with free().  Errors:
 * PPRPC_EINVAL (limits above), PPRPC_ENOMEM. */
PPRPC_API int pprpc_ggml_graph_pack(const pprpc_ggml_graph_desc *g, uint8_t **ret, size_t *ret_len);
PPRPC_API int pprpc_ggml_op_pack(const pprpc_ggml_op_desc *op, uint8_t **ret, size_t *ret_len);

#ifdef __cplusplus
}
#endif
#endif

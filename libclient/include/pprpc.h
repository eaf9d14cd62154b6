/*
 * pprpc.h — the pprpc client library (libpprpc).
 *
 * A pprpc_client is one connection to one pprpcd rank.  Objects on the
 * daemon (buffers, graphs) are named by 64-bit handles the daemon issues;
 * tensors are plain values (pprpc_tensor) describing bytes in a buffer.
 *
 * Every function returns 0 (or a count) on success and a negative PPRPC_E*
 * code on failure; pprpc_strerror() names the code and pprpc_last_error()
 * gives the daemon's (or the library's) message for the last failure on
 * that client.  Out-parameters are written only on success.
 *
 * Thread safety: a pprpc_client may be used by one thread at a time.
 * Calls in this version are synchronous (they return when the daemon has
 * completed the command); the async API adds queued variants with the same
 * argument shapes.
 */
#ifndef PPRPC_H
#define PPRPC_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PPRPC_API __attribute__((visibility("default")))
#else
#define PPRPC_API
#endif

typedef struct pprpc_client pprpc_client;
typedef struct pprpc_graph_builder pprpc_graph_builder;
typedef uint64_t pprpc_buffer;   /* daemon-issued buffer handle, 0 = none */
typedef uint64_t pprpc_graph;    /* daemon-issued graph handle */

/* A tensor: element type, shape (ne[0] innermost), byte strides, and where
 * its bytes start (buffer + offset). */
typedef struct pprpc_tensor {
	int32_t dtype;
	int64_t ne[PPRPC_MAX_DIMS];
	uint64_t nb[PPRPC_MAX_DIMS];
	pprpc_buffer buffer;
	uint64_t offset;
} pprpc_tensor;

typedef struct pprpc_caps {
	int async, events, p2p, rdma;
} pprpc_caps;

typedef struct pprpc_device_info {
	uint32_t index;
	char name[32];           /* "cpu", "cuda:0" */
	char kind[16];           /* "cpu", "cuda" */
	char description[128];
	uint64_t total_bytes;
	uint64_t free_bytes;
	uint64_t floor_bytes;    /* allocations may not leave less than this free */
} pprpc_device_info;

typedef struct pprpc_connect_opts {
	const char *client_name;   /* shown in the daemon's logs and stats; may be NULL */
	int connect_timeout_ms;    /* 0 = 5000 */
	int io_timeout_ms;         /* per reply; 0 = wait forever */
	char *err_buf;             /* if set, pprpc_connect writes the reason of a failure here */
	size_t err_len;
} pprpc_connect_opts;

/* ---- library -------------------------------------------------------------- */

/* "0.1.0" */
PPRPC_API const char *pprpc_version_string(void);
/* Static text for a PPRPC_E* code ("invalid argument"). */
PPRPC_API const char *pprpc_strerror(int err);

/* ---- connection ------------------------------------------------------------- */

/* Connect to "HOST:PORT" (IPv6 as "[::1]:PORT") and exchange HELLO.  opts may
 * be NULL.  Errors: PPRPC_EINVAL (bad address), PPRPC_ECONN (unreachable),
 * PPRPC_ETIMEDOUT, PPRPC_EVERSION (daemon speaks another protocol). */
PPRPC_API int pprpc_connect(const char *addr, const pprpc_connect_opts *opts, pprpc_client **out);
/* Close the connection; the daemon frees this client's buffers and graphs.
 * NULL is accepted. */
PPRPC_API void pprpc_close(pprpc_client *c);
/* Message describing the last failure on c ("" if none).  Owned by c, valid
 * until the next call on c. */
PPRPC_API const char *pprpc_last_error(const pprpc_client *c);
PPRPC_API const char *pprpc_daemon_version(const pprpc_client *c);
PPRPC_API int pprpc_get_caps(const pprpc_client *c, pprpc_caps *out);
/* Devices as reported at HELLO (free memory as of then). */
PPRPC_API int pprpc_device_count(const pprpc_client *c);
PPRPC_API int pprpc_device_get(const pprpc_client *c, uint32_t index, pprpc_device_info *out);

/* ---- buffers ------------------------------------------------------------------ */

/* Allocate size bytes on a device; the memory reads as zeros.  Errors:
 * PPRPC_EFLOOR (would cross the memory floor), PPRPC_EINVAL, PPRPC_ELIMIT. */
PPRPC_API int pprpc_buffer_alloc(pprpc_client *c, uint32_t device, uint64_t size, pprpc_buffer *out);
PPRPC_API int pprpc_buffer_free(pprpc_client *c, pprpc_buffer buf);
/* Set every byte of the buffer to value. */
PPRPC_API int pprpc_buffer_clear(pprpc_client *c, pprpc_buffer buf, uint8_t value);

/* ---- tensor data ---------------------------------------------------------------- */

/* Write size bytes from data at buf+offset.  The bytes go from data to the
 * socket without a copy.  Errors: PPRPC_EHANDLE, PPRPC_ERANGE, PPRPC_ETOOBIG. */
PPRPC_API int pprpc_tensor_set(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data,
			       uint64_t size);
/* Read size bytes at buf+offset into data (received in place). */
PPRPC_API int pprpc_tensor_get(pprpc_client *c, pprpc_buffer buf, uint64_t offset, void *data,
			       uint64_t size);
/* Copy bytes between two buffers of the same device, on the daemon. */
PPRPC_API int pprpc_tensor_copy(pprpc_client *c, pprpc_buffer src, uint64_t src_offset,
				pprpc_buffer dst, uint64_t dst_offset, uint64_t size);

/* A contiguous tensor of the given shape at buf+offset (unused ne = 1). */
PPRPC_API pprpc_tensor pprpc_tensor_make(pprpc_buffer buf, uint64_t offset, int dtype, int64_t ne0,
					 int64_t ne1, int64_t ne2, int64_t ne3);
/* Bytes from the tensor's first to one past its last byte; 0 if invalid. */
PPRPC_API uint64_t pprpc_tensor_nbytes(const pprpc_tensor *t);
/* Bytes a contiguous tensor of this dtype and shape needs; 0 if invalid. */
PPRPC_API uint64_t pprpc_type_nbytes(int dtype, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Swap dimensions a and b (a view: only ne/nb change). */
PPRPC_API pprpc_tensor pprpc_tensor_permute2(pprpc_tensor t, int a, int b);

/* ---- graphs -------------------------------------------------------------------- */

/* A graph builder collects tensors and nodes; shapes are checked as nodes
 * are added, with the same rules the daemon applies.  Tensor indices
 * returned by the pprpc_gb_* functions name tensors inside one builder. */
PPRPC_API int pprpc_graph_builder_new(pprpc_graph_builder **out);
PPRPC_API void pprpc_graph_builder_free(pprpc_graph_builder *gb);
/* Message for the builder's last failure. */
PPRPC_API const char *pprpc_gb_error(const pprpc_graph_builder *gb);
/* Add a tensor living in a buffer (an input, a weight, or an output the
 * graph writes).  Returns its index. */
PPRPC_API int pprpc_gb_tensor(pprpc_graph_builder *gb, const pprpc_tensor *t);
/* A view of tensor src: new dtype/ne/nb, starting offset bytes into src. */
PPRPC_API int pprpc_gb_view(pprpc_graph_builder *gb, int src, int dtype, const int64_t ne[4],
			    const uint64_t nb[4], uint64_t offset);
/* A view of src with dimensions a and b swapped. */
PPRPC_API int pprpc_gb_permute2(pprpc_graph_builder *gb, int src, int a, int b);
/* Add a node.  dst < 0: the output is a new scratch tensor (placed by the
 * daemon) of the inferred shape; else dst names the tensor to write.
 * Returns the output's index.  Errors: PPRPC_ESHAPE, PPRPC_ETYPE,
 * PPRPC_EINVAL (see pprpc_gb_error). */
PPRPC_API int pprpc_gb_op(pprpc_graph_builder *gb, int op, const int *srcs, int nsrc,
			  const struct pprpc_op_params *params, int dst);
PPRPC_API int pprpc_gb_add(pprpc_graph_builder *gb, int a, int b, int dst);
PPRPC_API int pprpc_gb_mul(pprpc_graph_builder *gb, int a, int b, int dst);
PPRPC_API int pprpc_gb_scale(pprpc_graph_builder *gb, int a, float scale, float bias, int dst);
/* Cast/copy a into dtype (dst < 0: new contiguous scratch of a's shape). */
PPRPC_API int pprpc_gb_cpy(pprpc_graph_builder *gb, int a, int dtype, int dst);
/* dst[n,m] = sum_k w[k,n] * x[k,m] */
PPRPC_API int pprpc_gb_mul_mat(pprpc_graph_builder *gb, int w, int x, int dst);
/* The descriptor of tensor idx (buffer 0 for scratch). */
PPRPC_API int pprpc_gb_tensor_get(const pprpc_graph_builder *gb, int idx, pprpc_tensor *out);
PPRPC_API int pprpc_gb_node_count(const pprpc_graph_builder *gb);

/* Send the builder's graph to the daemon, which validates and plans it once.
 * The builder may be freed afterwards. */
PPRPC_API int pprpc_graph_create(pprpc_client *c, uint32_t device, const pprpc_graph_builder *gb,
				 pprpc_graph *out);
/* Run a created graph (returns when it completed). */
PPRPC_API int pprpc_graph_run(pprpc_client *c, pprpc_graph g);
PPRPC_API int pprpc_graph_free(pprpc_client *c, pprpc_graph g);

/* Wait until every earlier command on the device's queue completed. */
PPRPC_API int pprpc_fence(pprpc_client *c, uint32_t device);

/* ---- statistics ------------------------------------------------------------------ */

typedef struct pprpc_device_stats {
	pprpc_device_info info;
	uint64_t buffers, allocated_bytes, queue_depth, commands, errors;
	uint64_t graph_creates, graph_runs;
} pprpc_device_stats;

typedef struct pprpc_conn_stats {
	char peer[64];
	char transport[16];
	char role[16];
	uint64_t bytes_in, bytes_out, frames_in, frames_out, errors;
	uint64_t buffers, allocated_bytes;
} pprpc_conn_stats;

typedef struct pprpc_stats {
	char daemon_version[32];
	uint64_t uptime_ms;
	uint32_t ndevices;
	pprpc_device_stats *devices;
	uint32_t nconnections;
	pprpc_conn_stats *connections;
	uint64_t connections_total, protocol_errors, requests, request_errors;
} pprpc_stats;

/* Fetch the daemon's statistics; free with pprpc_stats_free. */
PPRPC_API int pprpc_stats_get(pprpc_client *c, pprpc_stats **out);
PPRPC_API void pprpc_stats_free(pprpc_stats *s);

#ifdef __cplusplus
}
#endif
#endif

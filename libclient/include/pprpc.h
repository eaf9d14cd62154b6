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
 *
 * Execution model: each device of a daemon has one in-order queue.  The
 * plain calls (pprpc_tensor_set, pprpc_graph_run, ...) return when the
 * command has completed.  The *_async calls queue the command and return at
 * once (they block only while the socket is full); queued commands execute
 * in order, and a failure is sticky: later commands of this client on that
 * queue are skipped until pprpc_synchronize reports the first failure and
 * clears it.  Timelines (monotonic 64-bit counters owned by a device queue)
 * order work across queues and ranks: SIGNAL sets a value when the queue
 * reaches it, WAIT holds a queue until a timeline (of any rank) reaches a
 * value.
 */
#ifndef PPRPC_H
#define PPRPC_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc/types.h"

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
	/* Shared key, for daemons started with auth-key-file (HMAC-SHA256
	 * challenge at HELLO; the key never travels).  auth_key (auth_key_len
	 * bytes, 32..4096) wins over auth_key_file (a file of >= 32 bytes with no
	 * permissions for group or others, one trailing newline ignored), which
	 * wins over the environment variable PPRPC_AUTH_KEY_FILE.  With a key,
	 * pprpc_connect also refuses a daemon that does not prove it holds the
	 * same key.  The caller keeps ownership; the library keeps no copy. */
	const char *auth_key_file;
	const void *auth_key;
	size_t auth_key_len;
} pprpc_connect_opts;

/* ---- library -------------------------------------------------------------- */

/* The library's release, as in pprpc.pc's Version ("MAJOR.MINOR.PATCH"). */
PPRPC_API const char *pprpc_version_string(void);
/* Static text for a PPRPC_E* code ("invalid argument"). */
PPRPC_API const char *pprpc_strerror(int err);

/* ---- connection ------------------------------------------------------------- */

/* Connect to "HOST:PORT" (IPv6 as "[::1]:PORT") and exchange HELLO
 * (authenticating both ways when a key is given, see pprpc_connect_opts).
 * opts may be NULL.  Errors: PPRPC_EINVAL (bad address, unusable key or key
 * file), PPRPC_EIO (key file unreadable), PPRPC_ECONN (unreachable),
 * PPRPC_ETIMEDOUT, PPRPC_EVERSION (daemon speaks another protocol),
 * PPRPC_EAUTH (the daemon refused our key or needs one we lack, or it could
 * not prove the key). */
PPRPC_API int pprpc_connect(const char *addr, const pprpc_connect_opts *opts, pprpc_client **out);
/* Close the connection; the daemon frees this client's buffers and graphs.
 * NULL is accepted. */
PPRPC_API void pprpc_close(pprpc_client *c);
/* Open a new session to the same address, after the daemon restarted or the
 * connection broke (calls then fail with PPRPC_ECLOSED / PPRPC_ECONN).  A
 * session is the daemon's state for this client: buffers, graphs, fences
 * and timeline values of the old one are gone, so handles obtained before
 * are invalid and must be allocated again; requests still in flight are
 * completed with PPRPC_ECLOSED.  opts NULL reuses the name, timeouts and
 * key file given to pprpc_connect (a raw auth_key is never kept: pass opts
 * again).  On failure c stays closed (calls fail) and may be retried. */
PPRPC_API int pprpc_reconnect(pprpc_client *c, const pprpc_connect_opts *opts);
/* Message describing the last failure on c ("" if none).  Owned by c, valid
 * until the next call on c. */
PPRPC_API const char *pprpc_last_error(const pprpc_client *c);
PPRPC_API const char *pprpc_daemon_version(const pprpc_client *c);
/* The daemon's effective CPU placement ("loop=0 cpu=1-3"). */
PPRPC_API const char *pprpc_daemon_placement(const pprpc_client *c);
/* The i-th configured device the daemon does not serve, with the reason
 * ("cuda:0 unavailable: no CUDA-capable device is detected"), or NULL. */
PPRPC_API const char *pprpc_device_unavailable(const pprpc_client *c, int i);
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
/* Transformer ops (semantics, params and output shapes: kernels/ops.h).
 * Like pprpc_gb_op: dst < 0 makes a new scratch output; returns the
 * output's index or PPRPC_ESHAPE / PPRPC_ETYPE / PPRPC_EINVAL. */
/* dst f32 [D, n, ...] = rows ids[n, ...] (i32) of table [D, V, ...]
 * (f32/f16/bf16/q8_0).  An id outside [0, V) fails the run (PPRPC_ERANGE). */
PPRPC_API int pprpc_gb_get_rows(pprpc_graph_builder *gb, int table, int ids, int dst);
/* Write rows of values (f32 [D, n, ...]) into table (an existing tensor,
 * f32/f16/bf16 [D, V, ...], usually a KV cache in a buffer) at i32 ids [n];
 * other rows are untouched.  Returns table.  An id outside [0, V) fails
 * the run with PPRPC_ERANGE and writes nothing. */
PPRPC_API int pprpc_gb_set_rows(pprpc_graph_builder *gb, int table, int values, int ids);
/* a and b joined along dim (0..3). */
PPRPC_API int pprpc_gb_concat(pprpc_graph_builder *gb, int a, int b, int dim, int dst);
/* x / sqrt(mean(x^2) + eps) over ne[0]. */
PPRPC_API int pprpc_gb_rms_norm(pprpc_graph_builder *gb, int a, float eps, int dst);
/* x / max(||x||, eps) over ne[0]. */
PPRPC_API int pprpc_gb_l2_norm(pprpc_graph_builder *gb, int a, float eps, int dst);
PPRPC_API int pprpc_gb_silu(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_sigmoid(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_softplus(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_exp(pprpc_graph_builder *gb, int a, int dst);
/* GELU, ggml's tanh approximation. */
PPRPC_API int pprpc_gb_gelu(pprpc_graph_builder *gb, int a, int dst);
/* silu(a) * b, same shapes. */
PPRPC_API int pprpc_gb_swiglu(pprpc_graph_builder *gb, int a, int b, int dst);
/* softmax(scale * a) over ne[0]; causal: row j of [n_kv, n_q, ...] sees keys
 * k <= j + n_past (n_past must be 0 when not causal). */
PPRPC_API int pprpc_gb_softmax(pprpc_graph_builder *gb, int a, float scale, int causal,
			       int n_past, int dst);
/* i32 [R1, R2, R3, 1]: index of each row's maximum of a [n, R1, R2, R3]. */
PPRPC_API int pprpc_gb_argmax(pprpc_graph_builder *gb, int a, int dst);
/* Rotary embedding of x f32 [head_dim, n_head, n_tok] at positions pos
 * (i32 [n_tok]): mode PPRPC_ROPE_NORMAL or PPRPC_ROPE_NEOX, the first n_dims
 * (even) elements of each head rotated, theta = pos * freq_scale *
 * freq_base^(-2i/n_dims).  Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_rope(pprpc_graph_builder *gb, int x, int pos, int mode, int n_dims,
			    float freq_base, float freq_scale, int dst);
/* Causal attention of q f32 [D, n_head, n_q] over the KV cache k, v
 * [D, n_kv_head, n_kv] (both f32 or both f16): query j sits at position
 * n_past + j and sees keys 0 ..= n_past + j (n_past + n_q <= n_kv).
 * Output f32 [D, n_head, n_q].  Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_attention(pprpc_graph_builder *gb, int q, int k, int v, float scale,
				 int n_past, int dst);
/* Gated delta rule (GDN / KDA); shapes and semantics in kernels/ops.h
 * (GATED_DELTA_NET).  The backend picks the serial or the chunked form
 * (to force one, set i[1] / i[2] through pprpc_gb_op).  All sources f32: q, k [d_k, H_k, T, B],
 * v [d_v, H_v, T, B], g [1 or d_k, H_v, T, B] (log-space gate, <= 0),
 * beta [1, H_v, T, B], state [d_k, d_v, H_v, B].  scale multiplies the
 * output (finite, nonzero: pass 1/sqrt(d_k) explicitly if that is the
 * model's choice); l2norm != 0 L2-normalises q and k inside the op with
 * eps 1e-6 (other eps: pprpc_gb_op with f[1]).  Returns the index of the
 * packed f32 output [d_v*H_v*T*B + d_k*d_v*H_v*B] (dst < 0: new scratch).
 * Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_gated_delta_net(pprpc_graph_builder *gb, int q, int k, int v, int g,
				       int beta, int state, float scale, int l2norm, int dst);
/* Views of a GATED_DELTA_NET packed output: *out_idx = o [d_v, H_v, T, B],
 * *state_idx = final state [d_k, d_v, H_v, B] (both contiguous f32).
 * Returns 0, or PPRPC_ESHAPE when packed is not a contiguous f32 tensor of
 * exactly that size, PPRPC_EINVAL for a bad index or dimension. */
PPRPC_API int pprpc_gb_gdn_views(pprpc_graph_builder *gb, int packed, int64_t d_v, int64_t h_v,
				 int64_t t, int64_t b, int64_t d_k, int *out_idx, int *state_idx);

/* Send the builder's graph to the daemon, which validates and plans it once.
 * The builder may be freed afterwards. */
PPRPC_API int pprpc_graph_create(pprpc_client *c, uint32_t device, const pprpc_graph_builder *gb,
				 pprpc_graph *out);
/* Run a created graph (returns when it completed). */
PPRPC_API int pprpc_graph_run(pprpc_client *c, pprpc_graph g);
PPRPC_API int pprpc_graph_free(pprpc_client *c, pprpc_graph g);

/* Wait until every earlier command of this client on the device's queue
 * completed (the same as pprpc_synchronize). */
PPRPC_API int pprpc_fence(pprpc_client *c, uint32_t device);

/* ---- cluster files ---------------------------------------------------------------- */

/* The ranks of a pipeline, in stage order: one per line "NAME HOST:PORT
 * [DEVICES]" ('#' comments).  Errors name file:line in err. */
typedef struct pprpc_cluster pprpc_cluster;
PPRPC_API int pprpc_cluster_load(const char *path, pprpc_cluster **out, char *err, size_t errlen);
PPRPC_API int pprpc_cluster_parse(const char *text, const char *path, pprpc_cluster **out, char *err,
				  size_t errlen);
PPRPC_API void pprpc_cluster_free(pprpc_cluster *c);
PPRPC_API int pprpc_cluster_size(const pprpc_cluster *c);
/* Rank i's name, address and devices (NULL when out of range). */
PPRPC_API const char *pprpc_cluster_name(const pprpc_cluster *c, int i);
PPRPC_API const char *pprpc_cluster_addr(const pprpc_cluster *c, int i);
PPRPC_API const char *pprpc_cluster_devices(const pprpc_cluster *c, int i);

/* ---- async execution ---------------------------------------------------------- */

typedef uint64_t pprpc_timeline;  /* daemon-issued timeline handle */

/* Queue a write of size bytes from data to buf+offset.  data may be reused
 * as soon as the call returns (the bytes are on their way). */
PPRPC_API int pprpc_tensor_set_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset,
				     const void *data, uint64_t size);
/* Queue a read of buf+offset into data.  The bytes are those of the buffer
 * when the queue reaches the command; data is valid after a later
 * pprpc_synchronize (or a host wait) returned 0.  data must stay valid
 * until then. */
PPRPC_API int pprpc_tensor_get_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, void *data,
				     uint64_t size);
/* Queue a copy between two buffers of one device. */
PPRPC_API int pprpc_tensor_copy_async(pprpc_client *c, pprpc_buffer src, uint64_t src_offset,
				      pprpc_buffer dst, uint64_t dst_offset, uint64_t size);
/* Queue a run of a created graph. */
PPRPC_API int pprpc_graph_run_async(pprpc_client *c, pprpc_graph g);

/* Create a timeline on a device's queue, starting at initial. */
PPRPC_API int pprpc_timeline_create(pprpc_client *c, uint32_t device, uint64_t initial,
				    pprpc_timeline *out);
PPRPC_API int pprpc_timeline_destroy(pprpc_client *c, pprpc_timeline t);
/* Queue SIGNAL(t, value) on t's queue: t becomes value when the queue gets
 * there.  value must exceed t's value at that point (else a sticky
 * PPRPC_EINVAL). */
PPRPC_API int pprpc_signal(pprpc_client *c, pprpc_timeline t, uint64_t value);
/* Queue WAIT on device's queue until timeline t reaches value.  t belongs
 * to the daemon at rank ("HOST:PORT"), or to this daemon when rank is NULL
 * or "": the daemon subscribes over its peer link and is released by a
 * notification. */
PPRPC_API int pprpc_wait(pprpc_client *c, uint32_t device, const char *rank, pprpc_timeline t,
			 uint64_t value);
/* The timeline's current value. */
PPRPC_API int pprpc_timeline_query(pprpc_client *c, pprpc_timeline t, uint64_t *out);
/* Block the caller until t >= value or timeout_ms passed (PPRPC_ETIMEDOUT). */
PPRPC_API int pprpc_timeline_host_wait(pprpc_client *c, pprpc_timeline t, uint64_t value,
				       int timeout_ms);

/* An event in the usual async-backend sense: a timeline plus the value of
 * its last record. */
typedef struct pprpc_event {
	pprpc_timeline timeline;
	uint64_t value;
	uint32_t device;
} pprpc_event;

/* Create an event on device (a fresh timeline at 0). */
PPRPC_API int pprpc_event_create(pprpc_client *c, uint32_t device, pprpc_event *out);
/* Record: SIGNAL the event's timeline with its next value. */
PPRPC_API int pprpc_event_record(pprpc_client *c, pprpc_event *ev);
/* Make device's queue (on the client c2's daemon) wait for the event's last
 * record; ev_rank is the address of the daemon owning the event (NULL if
 * c2 is that daemon). */
PPRPC_API int pprpc_event_wait(pprpc_client *c2, uint32_t device, const char *ev_rank,
			       const pprpc_event *ev);

/* Stage-boundary transfer, daemon to daemon (no bytes through the client).
 * SEND, queued on the daemon of c: when its queue reaches it, the region
 * (buf+offset, size bytes) is captured into the daemon's staging ring — the
 * queue moves on and later commands may overwrite the region — and the
 * daemon at dst_rank pulls it.  RECV, queued on the daemon of c2: when its
 * queue reaches it, the region is written with the bytes of the SEND with
 * the same transfer_id on src_rank, as they arrive.  Ids must be unique
 * among a source daemon's transfers in flight.  Failures (sizes differ, a
 * lost link) are sticky errors reported by pprpc_synchronize. */
PPRPC_API int pprpc_send_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, uint64_t size,
			       uint64_t transfer_id, const char *dst_rank);
PPRPC_API int pprpc_recv_async(pprpc_client *c2, pprpc_buffer buf, uint64_t offset, uint64_t size,
			       uint64_t transfer_id, const char *src_rank);

/* Can the daemon of c reach rank ("HOST:PORT") over a peer link?  Returns 0,
 * or an error with the reason in pprpc_last_error (used to fall back to
 * relaying boundaries through the client). */
PPRPC_API int pprpc_probe_rank(pprpc_client *c, const char *rank, int timeout_ms);

/* FENCE: wait until every earlier command of this client on the device's
 * queue completed.  Returns the queue's first failure since the last
 * synchronize (code; message and failing command in pprpc_last_error) and
 * clears it, or 0. */
PPRPC_API int pprpc_synchronize(pprpc_client *c, uint32_t device);

/* ---- pipelines ------------------------------------------------------------------ */

/* A pipeline of S stages, each a graph on one rank, fed M micro-batches.
 * Each stage has two slots (double-buffered boundaries): slot k's graph
 * reads in_buf[k] and writes out_buf[k] (offset 0, in_bytes / out_bytes).
 * Stage s's output of micro-batch m becomes stage s+1's input of
 * micro-batch m, so stage s's out_bytes must equal stage s+1's in_bytes.
 *
 * Schedule (fill-drain, forward only): micro-batch m uses slot m % 2.  On
 * the p2p path (the default), per micro-batch on stage s's queue: [WAIT]
 * RECV(in slot, from stage s-1; SET of the input on stage 0) RUN(slot)
 * SIGNAL(done_s = m+1) SEND(out slot, to stage s+1; GET on the last
 * stage): boundaries go daemon to daemon, everything is queued at once and
 * the caller blocks only for the last stage's outputs.  On the client path
 * the boundary travels through the caller: stage s's GET(out slot) is
 * relayed by a SET(in slot) on stage s+1.  The caller then blocks only where
 * it needs those bytes, so every stage has its next micro-batch queued
 * while the previous one's boundary is in flight.  Before blocking on stage
 * s-1's GET of m (queued behind a WAIT on stage s), the caller first takes
 * stage s's output of m-2, which is complete by then in a healthy run; if
 * stage s failed, that GET reports it, instead of the caller hanging behind
 * a WAIT whose SIGNAL was skipped.
 *
 * Write-after-read ordering: before stage s (not the last) runs micro-batch
 * m >= 2 into slot m % 2, its queue WAITs until stage s+1's done timeline
 * says micro-batch m-2 was consumed (a cross-rank WAIT when the two stages
 * live on different daemons).  Together with the in-order queues (the GET
 * of m precedes the RUN of m+2 on stage s; the RUN of m-2 precedes the SET
 * of m on stage s+1) no slot is overwritten while it is still read, and no
 * stage runs more than two micro-batches ahead of the next one (which also
 * bounds the daemons' staging memory). */
typedef struct pprpc_stage {
	pprpc_client *client;      /* connection to the stage's rank */
	const char *rank;          /* that rank's HOST:PORT (for cross-rank waits) */
	uint32_t device;
	pprpc_graph graph[2];      /* graph of slot k: in_buf[k] -> out_buf[k] */
	pprpc_buffer in_buf[2];
	pprpc_buffer out_buf[2];
	uint64_t in_bytes;         /* boundary sizes (input of this stage / output) */
	uint64_t out_bytes;
} pprpc_stage;

typedef struct pprpc_pipeline pprpc_pipeline;

/* What an observer learns when a stage's output of one micro-batch reached
 * the caller (times: CLOCK_MONOTONIC nanoseconds, measured by the client). */
typedef struct pprpc_pipeline_event {
	int stage, micro, slot;
	uint64_t issue_ns;         /* the stage's commands for the micro-batch were issued */
	uint64_t done_ns;          /* its output bytes had arrived */
	const void *data;          /* those bytes (a relay buffer, or outputs[m] for the
				    * last stage); valid during the callback only */
	uint64_t bytes;
} pprpc_pipeline_event;

/* How boundary tensors travel between stages. */
enum pprpc_transfer {
	PPRPC_TRANSFER_P2P = 0,     /* SEND/RECV daemon to daemon (default) */
	PPRPC_TRANSFER_CLIENT = 1,  /* through the client: GET then SET (exact fallback) */
};

typedef struct pprpc_pipeline_opts {
	/* PPRPC_TRANSFER_P2P unless the environment says PPRPC_P2P=0.  P2P
	 * falls back to the client path automatically when a stage's daemon
	 * cannot reach the previous stage's (probed at create); the reason is
	 * given by pprpc_pipeline_transfer. */
	int transfer;
	/* Test hook for negative controls: drop the write-after-read ordering
	 * that keeps a stage from overwriting a boundary slot still being read.
	 * Both slots collapse into slot 0, the WAITs are not issued, and each
	 * stage's GET of micro-batch m is queued after its RUN of m+1 (the run-
	 * ahead that the second slot and the WAITs exist to make safe), so the
	 * boundaries carry the wrong micro-batch.  Never set outside tests. */
	int unsafe_skip_war_wait;
	/* Optional: called from pprpc_pipeline_run, in the caller's thread, once
	 * per (stage, micro-batch) when that output arrived — for traces and
	 * for checking every boundary.  May be NULL. */
	void (*observe)(void *arg, const pprpc_pipeline_event *ev);
	void *observe_arg;
} pprpc_pipeline_opts;

/* Check the stages and create one "done" timeline per stage (on the stage's
 * device); stages and opts are copied (rank strings too).  opts may be NULL.
 * Errors: PPRPC_EINVAL (no stages, NULL client, zero sizes, boundary sizes
 * that do not chain, a missing rank where a cross-rank wait is needed),
 * PPRPC_ENOMEM, or a timeline_create failure (message in that stage's
 * pprpc_last_error). */
PPRPC_API int pprpc_pipeline_create(const pprpc_stage *stages, int nstages,
				    const pprpc_pipeline_opts *opts, pprpc_pipeline **out);
/* Destroy the timelines (the clients stay open; the caller owns them).
 * NULL is accepted. */
PPRPC_API void pprpc_pipeline_free(pprpc_pipeline *p);
/* Run M micro-batches through the stages with the fill-drain schedule:
 * inputs[m] (stage 0's in_bytes each) go in, outputs[m] (the last stage's
 * out_bytes each) come back.  Returns 0 when all are done and every queue
 * finished without error.  On a failure it stops issuing, releases every
 * queued WAIT (by destroying the timelines, which are then created again),
 * drains and synchronizes every stage (clearing their sticky errors), and
 * returns the first failure's code; pprpc_pipeline_error says which stage
 * and call (for a failed queued command: the daemon's report of it).
 * outputs are then unspecified.  The pipeline may be run again. */
PPRPC_API int pprpc_pipeline_run(pprpc_pipeline *p, int nmicro, const void *const *inputs,
				 void *const *outputs);
/* The path boundaries take ("p2p" or "client"); when p2p was asked for and
 * not used, *ret_reason says why (else it is set to ""). */
PPRPC_API const char *pprpc_pipeline_transfer(const pprpc_pipeline *p, const char **ret_reason);
/* Bytes of boundary tensors that passed through this process so far (0 on
 * the p2p path). */
PPRPC_API uint64_t pprpc_pipeline_client_bytes(const pprpc_pipeline *p);
/* Message for the pipeline's last failure (which stage, which call); "" if
 * none. */
PPRPC_API const char *pprpc_pipeline_error(const pprpc_pipeline *p);

/* ---- transformer blocks ------------------------------------------------------------ */

/* Builders of whole transformer blocks on top of the pprpc_gb_* ops, so a tool
 * does not wire nodes by hand.  A block takes tensor indices of one builder
 * (weights and states added with pprpc_gb_tensor from buffers) and
 * hyperparameters in a struct; call the matching *_init first: it sets every
 * tensor index to -1 ("none": an error for a required weight, "absent" for
 * an optional one) and the defaults named below.
 *
 * Activations are f32 [n_embd, n_tok] (one sequence; ne[0] innermost), x may
 * be any such tensor (a buffer input or an earlier block's output).  Every
 * projection is MUL_MAT with the weight stored ggml-style as [in, out]
 * (ne[0] = in), f32/f16/bf16/q8_0 (q8_0 needs in % 32 == 0); norm gains and
 * biases are 1-D [n] f32/f16/bf16.  Each block ends with the residual add
 * x + f(x) written to dst (dst < 0: a new scratch tensor; else an f32
 * [n_embd, n_tok] tensor of the builder, e.g. a stage-boundary buffer).
 * Functions return 0 and write *out (the output's index), or PPRPC_ESHAPE /
 * PPRPC_ETYPE / PPRPC_EINVAL with the reason in pprpc_gb_error; on failure
 * nodes already added stay in the builder, which should then be discarded.
 *
 * Graphs are static: shapes (n_tok) and the attention's n_past are fixed
 * when the graph is built, so a tool builds (and caches) one graph per
 * (n_past, n_tok) for attention layers — typically one prefill graph and
 * one decode graph per n_past — while KDA and MLP blocks depend on n_tok only.
 * What changes between runs lives in buffers: inputs, positions, caches and
 * recurrent states.
 *
 * States are read near the start of a block and rewritten by its last nodes
 * (SET_ROWS into the KV cache; CPY of the new conv and recurrent states).
 * The same tensor may be given as a state's input and output: the graph
 * rules allow it because no node reads and writes overlapping bytes and the
 * state has one writer, and nodes run in order on their queue, so the write
 * comes after every read.  Distinct in/out tensors give ping-pong states
 * (two graphs alternating) where a tool wants the old state kept. */

/* Pre-norm attention block with RoPE and a KV cache:
 *   h = rms_norm(x) * norm_w
 *   q, k, v = h Wq, h Wk, h Wv        [head_dim, n_head | n_kv_head, n_tok]
 *   q, k = rope(q, pos), rope(k, pos)
 *   k_cache[:, :, pos] = k; v_cache[:, :, pos] = v         (SET_ROWS)
 *   a = attention(q, k_cache[.., 0 : n_past + n_tok], v_cache[..], scale)
 *   out = x + a Wo
 * pos: i32 [n_tok] buffer tensor that must hold n_past .. n_past + n_tok - 1
 * (it is both RoPE's positions and the cache rows written; attention's
 * causal window comes from n_past, a build-time parameter).  Caches: f32 or
 * f16 (both the same) [head_dim, n_kv_head, n_ctx] buffer tensors,
 * n_past + n_tok <= n_ctx.  GQA: n_head % n_kv_head == 0. */
typedef struct pprpc_attn_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int wq, wk, wv;           /* [n_embd, n_head*head_dim], [n_embd, n_kv_head*head_dim] x2 */
	int wo;                   /* [n_head*head_dim, n_embd] */
	int k_cache, v_cache;     /* [head_dim, n_kv_head, n_ctx], written at rows pos */
	int64_t n_embd, n_head, n_kv_head, head_dim;
	int rope_mode;            /* PPRPC_ROPE_NEOX (default) or PPRPC_ROPE_NORMAL */
	int rope_dims;            /* rotated dims; 0 = head_dim */
	float rope_base;          /* default 10000 */
	float rope_scale;         /* freq_scale, default 1 */
	float scale;              /* attention scale; 0 = 1/sqrt(head_dim) */
} pprpc_attn_block;

PPRPC_API void pprpc_attn_block_init(pprpc_attn_block *cfg);
PPRPC_API int pprpc_gb_attention_block(pprpc_graph_builder *gb, const pprpc_attn_block *cfg, int x,
				       int pos, int n_past, int dst, int *out);

/* Pre-norm Kimi Delta Attention (KDA) block:
 *   h = rms_norm(x) * norm_w
 *   q, k, v = silu(conv_K(h Wq)), silu(conv_K(h Wk)), silu(conv_K(h Wv))
 *   g = -exp(a_log) * softplus(h [Wg_a] Wg + g_bias)  [d_k, h_v, n_tok], <= 0
 *   beta = sigmoid(h Wb)                               [1, h_v, n_tok]
 *   o, S = gated_delta_net(q, k, v, g, beta, S; l2norm q/k in-op, eps 1e-6,
 *                           scale 1/sqrt(d_k))          per-channel (KDA) gate
 *   o = rms_norm_per_head(o) * o_norm_w * sigmoid(h Wog)   (Kimi Linear's
 *                           gated norm with a sigmoid gate)
 *   out = x + o Wo
 * conv_K is a causal depthwise convolution along time with K taps per
 * channel (y[t] = sum_j w[j] * x[t - K + 1 + j]) over the last K-1 inputs of
 * the previous run followed by this run's inputs, built from CONCAT, MUL
 * and ADD; the last K-1 inputs become the new conv state.
 * Optional parts (-1): wg_a (a low-rank gate: h Wg_a Wg), g_bias, a_log
 * (without it g = -softplus(...)), o_norm_w (gain 1).
 * States (f32, zero for a fresh sequence):
 *   conv state [C, K-1] with C = 2*h_k*d_k + h_v*d_v, columns in time order
 *     (column j: the input K-1-j steps before this run's first token), each
 *     holding the q, k and v channels in that order (channels innermost,
 *     unlike ggml's [K-1, C], so that CONCAT along time needs no copy);
 *   recurrent state [d_k, d_v, h_v, 1] (GATED_DELTA_NET's state layout). */
typedef struct pprpc_kda_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int wq, wk;               /* [n_embd, h_k*d_k] */
	int wv;                   /* [n_embd, h_v*d_v] */
	int conv_q, conv_k, conv_v;  /* taps [K, channels] (ggml's ssm_conv1d layout) */
	int conv_kernel;          /* K >= 2, default 4 */
	int wg_a;                 /* optional [n_embd, rank] */
	int wg;                   /* [n_embd or rank, h_v*d_k] */
	int g_bias;               /* optional [h_v*d_k] */
	int a_log;                /* optional [1, h_v] (f32/f16/bf16) */
	int wb;                   /* [n_embd, h_v] */
	int o_norm_w;             /* optional [d_v] */
	int wog;                  /* [n_embd, h_v*d_v] output gate */
	int wo;                   /* [h_v*d_v, n_embd] */
	float o_norm_eps;         /* default 1e-6 */
	int conv_state_in, conv_state_out;   /* [C, K-1] f32, may be the same tensor */
	int state_in, state_out;             /* [d_k, d_v, h_v, 1] f32, may be the same */
	int64_t n_embd, h_k, h_v, d_k, d_v;  /* h_v % h_k == 0 */
} pprpc_kda_block;

PPRPC_API void pprpc_kda_block_init(pprpc_kda_block *cfg);
PPRPC_API int pprpc_gb_kda_block(pprpc_graph_builder *gb, const pprpc_kda_block *cfg, int x,
				 int dst, int *out);

/* Pre-norm SwiGLU MLP: out = x + swiglu(h Wgate, h Wup) Wdown with
 * h = rms_norm(x) * norm_w. */
typedef struct pprpc_mlp_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int w_gate, w_up;         /* [n_embd, n_ff] */
	int w_down;               /* [n_ff, n_embd] */
} pprpc_mlp_block;

PPRPC_API void pprpc_mlp_block_init(pprpc_mlp_block *cfg);
PPRPC_API int pprpc_gb_swiglu_mlp(pprpc_graph_builder *gb, const pprpc_mlp_block *cfg, int x,
				  int dst, int *out);

/* ---- statistics ------------------------------------------------------------------ */

typedef struct pprpc_device_stats {
	pprpc_device_info info;
	uint64_t buffers, allocated_bytes, queue_depth, commands, errors;
	uint64_t graph_creates, graph_runs;
	uint64_t graph_captures, graph_replays;  /* CUDA graphs: captured, replayed */
	uint64_t ipc_pool_bytes;  /* IPC staging pool for boundary SENDs (0 until first used) */
	char ipc_status[192];     /* "" no IPC, "not used yet", "ready", "off: <why>" */
	/* GPU-side timelines: WAITs held on the GPU, SIGNALs written from a GPU
	 * stream, and whether the device runs them ("" CPU, "on", "off: <why>") */
	uint64_t gpu_waits, gpu_signals;
	char async_status[192];
} pprpc_device_stats;

typedef struct pprpc_conn_stats {
	char peer[64];
	char transport[16];
	char role[16];
	uint64_t bytes_in, bytes_out, frames_in, frames_out, errors;
	uint64_t buffers, allocated_bytes;
	/* What the connection really runs on. */
	char rdma_device[32];    /* "" for tcp */
	int32_t gid_index;       /* -1 for tcp */
	uint32_t mtu;            /* RDMA path MTU (bytes) */
	uint32_t rdma_chunk, rdma_tx_depth, rdma_rx_depth;  /* ring geometry in use */
	char memlock_step[24];   /* requested | smaller-depth | single-256k-chunk */
	char memlock_why[160];
	char fallback_reason[200]; /* why TCP although RDMA was tried ("" if not) */
	char rdma_bulk[200];     /* large payloads: "read >= ..." (RDMA READ) or "off (why)" */
	uint64_t bulk_bytes_in, bulk_bytes_out;  /* of bytes_in/out, moved by RDMA READ */
} pprpc_conn_stats;

typedef struct pprpc_boundary_stats {
	char peer[64];           /* the other rank */
	char direction[8];       /* "send" | "recv" */
	char path[16];           /* "p2p-tcp" | "p2p-rdma" | "p2p-ipc" */
	uint64_t transfers, bytes, time_us, errors;
	uint64_t copy_us;        /* recv over IPC: time in the copies themselves */
	uint64_t ipc_bytes;      /* of bytes, those moved by IPC (copy throughput: ipc_bytes / copy_us) */
} pprpc_boundary_stats;

typedef struct pprpc_stats {
	char daemon_version[32];
	uint64_t uptime_ms;
	uint32_t ndevices;
	pprpc_device_stats *devices;
	uint32_t nconnections;
	pprpc_conn_stats *connections;
	uint64_t connections_total, protocol_errors, requests, request_errors;
	uint32_t nboundaries;
	pprpc_boundary_stats *boundaries;
	uint64_t staging_bytes, staging_used;
	uint32_t nlinks;                 /* the daemon's outbound peer links */
	pprpc_conn_stats *links;
	char rdma_status[256];           /* RDMA listener device, or why none */
} pprpc_stats;

/* Fetch the daemon's statistics; free with pprpc_stats_free. */
PPRPC_API int pprpc_stats_get(pprpc_client *c, pprpc_stats **out);
PPRPC_API void pprpc_stats_free(pprpc_stats *s);

#ifdef __cplusplus
}
#endif
#endif

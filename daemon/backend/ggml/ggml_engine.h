/*
 * daemon/backend/ggml/ggml_engine.h — the ggml engine's core: one ggml device
 * served by its own ggml backend, its buffers, and wire graphs turned into
 * ggml graphs (doc/ggml.md).
 *
 * Nothing here knows the daemon (connections, handles, queues, the device
 * vtable): ggml_device.c adapts the engine to the device interface and
 * ggml_graph.c to the requests (the device's graph ops), so the fuzz target
 * drives the engine alone.
 *
 * ggml aborts the process on invalid input (GGML_ASSERT), and some kernels
 * write through indices read from tensor data without any check.  So a
 * wire graph reaches ggml only through gge_graph_build, in this order:
 *   1. gge_wire_check (ggml_wire.c): structure — types, ne/nb, extents inside
 *      buffers and views inside their sources, sources before users, caps;
 *   2. materialization (ggml_build.c) into a no_alloc ggml context, each
 *      node checked by ggml_rules_check (rules/) as soon as its sources
 *      exist, then by the backend's supports_op;
 *   3. index guards (ggml_guard.c): every index a kernel will follow
 *      (GET_ROWS, SET_ROWS, MUL_MAT_ID, ...) is proven in range at create
 *      time or checked at run time before the node runs (ggml_run.c).
 */
#ifndef PPRPC_DAEMON_GGML_ENGINE_H
#define PPRPC_DAEMON_GGML_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "daemon/backend/ggml/ggml_ops.h"
#include "kernels/ops.h"
#include "proto/pprpc.pb-c.h"

/* Caps on one wire graph (the frame's meta limit usually binds first). */
#define GGE_MAX_TENSORS 131072
#define GGE_MAX_NODES 65536
/* Largest element count, extent or dense size of one tensor: far above any
 * buffer, low enough that ggml's int64/size_t arithmetic cannot wrap. */
#define GGE_MAX_BYTES (1ull << 56)

struct gge_dev {
	ggml_backend_dev_t dev;
	ggml_backend_t backend;          /* used by the device's worker only */
	ggml_backend_buffer_type_t buft;
	struct ggml_threadpool *tp;      /* ggml-cpu: persistent compute threads */
	void (*tp_free)(struct ggml_threadpool *tp);
	bool worker_ready;               /* gge_dev_worker_init ran */
	/* uploads queued on backend's stream (gge_buf_write_queued) that
	 * nothing has waited for yet (gge_dev_settle), and their pinned
	 * staging: pin_used bytes of GGE_PIN_BYTES in use until then */
	bool queued_writes;
	bool pin_none;                   /* no pinned staging to be had */
	ggml_backend_buffer_t pin_buf;
	uint8_t *pin;
	uint64_t pin_used;
	/* pinned memory a download is lent in (gge_buf_read_lend): made at
	 * first use, GGE_LEND_BYTES; lend_busy while a reply holds it (set
	 * on the worker, cleared on the loop) */
	bool lend_none;
	ggml_backend_buffer_t lend_buf;
	uint8_t *lend;
	atomic_int lend_busy;
	/* recorded behind the queued uploads for streams to wait on
	 * (gge_dev_uploads_event); up_ev_none: the device has no events */
	ggml_backend_event_t up_ev;
	bool up_ev_none;
	bool host;                       /* buffers are host memory */
	/* ggml-cpu's work buffer: the largest plan of a graph created so far,
	 * reserved under the memory floor (ggml_graph.c check_scratch; loop) */
	uint64_t work_reserved;
	size_t alignment, max_size;
	enum ggml_backend_dev_type type;
	int threads;                     /* 0 where the backend has no thread count */
	/* graphs built carry a graph id for their life (gge_graph_build) */
	bool graph_reuse;
	char name[64];                   /* ggml's device name ("CPU", "CUDA0") */
	char desc[200];
	/* the CUDA device of pprpcd's own runtime (ggml_cuda_find.h), -1
	 * where the device is not a ggml-cuda one, or cuda_why says why it is
	 * not seen: CUDA IPC at stage boundaries, streams holding waits
	 * (ggml_device.c) and pprpc's kernels (ggml_gdn.c) run there */
	int cuda_ordinal;
	char cuda_why[160];
	/* op implementations of pprpc's own (ggml_ops.h), by whoever
	 * configures the device */
	struct gge_op ops[GGE_MAX_OPS];
	int nops;
};

/* Open the ggml device called name (ggml_backend_dev_name), its backend
 * bounded to threads (0 = the backend's default).  PPRPC_EINVAL with the
 * names this ggml has when there is no such device, PPRPC_EDEVICE when its
 * backend cannot start. */
int gge_dev_open(const char *name, int threads, struct gge_dev **ret_g, char *err, size_t errlen);
void gge_dev_close(struct gge_dev *g);
/* On the thread that runs the device's graphs, before its first run. */
void gge_dev_worker_init(struct gge_dev *g);
/* Free and total memory behind the device's buffers (see ggml_device.c for
 * host memory, where ggml-cpu reports everything as free). */
int gge_dev_memory(const struct gge_dev *g, uint64_t *ret_free, uint64_t *ret_total);

/* ---- buffers ------------------------------------------------------------------
 * Buffers of the device's buffer type, zero-filled on allocation (a client
 * never sees another's freed data).  The byte operations take ranges the
 * caller has checked against the buffer; 0 or a negative code. */
int gge_buf_alloc(struct gge_dev *g, uint64_t size, ggml_backend_buffer_t *ret_b, char *err, size_t errlen);
void gge_buf_free(ggml_backend_buffer_t b);
/* A buffer over size bytes of host memory the caller owns (a mapped model
 * file's range: not zeroed, never freed by gge_buf_free), where the device
 * computes on host memory and ggml's device takes host pointers. */
int gge_buf_from_host(struct gge_dev *g, void *ptr, uint64_t size, ggml_backend_buffer_t *ret_b, char *err,
		      size_t errlen);
/* Whether host buffers are the engine's own mappings (gge_buf_alloc):
 * not under AddressSanitizer, whose redzones after malloc'ed memory find
 * an overflow past a buffer's end. */
#if defined(__SANITIZE_ADDRESS__)
#define GGE_HOST_MAPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GGE_HOST_MAPS 0
#endif
#endif
#ifndef GGE_HOST_MAPS
#define GGE_HOST_MAPS 1
#endif
/* Zeros over [off, off+n) of an engine host buffer (gge_buf_alloc's own
 * mapping) by giving its whole pages back to the kernel: they read as
 * zeros and are committed again only when touched (llama.cpp clears its KV
 * cache at every context made).  -1 for another buffer or a range of no
 * whole page: the caller writes the zeros. */
int gge_buf_zero_pages(ggml_backend_buffer_t b, uint64_t off, uint64_t n);
int gge_buf_write(ggml_backend_buffer_t b, uint64_t off, const void *src, uint64_t n);
int gge_buf_read(ggml_backend_buffer_t b, uint64_t off, void *dst, uint64_t n);
int gge_buf_fill(ggml_backend_buffer_t b, uint64_t off, int value, uint64_t n);
/* An upload of at most GGE_PIN_ONE bytes queued on the device's backend
 * stream (the worker's, or the loop's while it runs a command inline) from
 * pinned staging: a ggml-cuda device's TENSOR_SET costs a memcpy and the
 * copy's enqueueing instead of a pageable copy and a synchronize, for each
 * of the six inputs llama.cpp sets per decoded token (one H200 rank's
 * decode, bench/llama-vs-rpc/decode-probe.sh: 2.179 ms a token with the
 * synchronous copies, 1.955 queued).  A
 * graph run on the backend comes after it on the stream; every other
 * access to the device's memory calls gge_dev_settle first.  Larger
 * uploads, and other devices, copy at once. */
#define GGE_PIN_BYTES (4u << 20)
#define GGE_PIN_ONE (1u << 20)
int gge_buf_write_queued(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, const void *src, uint64_t n);
/* Wait for the queued uploads, if any. */
void gge_dev_settle(struct gge_dev *g);
/* The queued uploads ordered on the GPU instead of waited for: an event
 * recorded behind them, for the caller's streams to wait on (the staging
 * stays in use until a later settle).  NULL when nothing is queued, or
 * where the device has no events (then they were settled here).  A graph
 * run's host wait for its inputs' uploads cost 142 us of each decoded
 * token's GRAPH_RUN on an H100 (tests/gpu/token-trace.sh). */
ggml_backend_event_t gge_dev_uploads_event(struct gge_dev *g);
/* A download of at least GGE_PIN_READ_MIN bytes from a ggml-cuda buffer
 * goes through the pinned staging (the caller settled the uploads first):
 * ggml's synchronous copy into pageable memory took 146 us for a decoded
 * token's 608 KB of logits on an H100 (about 4 GB/s; token-trace.sh).
 * Smaller ones, and other devices, copy directly. */
#define GGE_PIN_READ_MIN (64u << 10)
int gge_buf_read_staged(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, void *dst, uint64_t n);
/* A download into pinned memory of the device's own, lent to the caller
 * (*ret) until gge_dev_lend_return, for a reply to be written from: the
 * staged read above still copied the bytes out of the staging into the
 * reply's memory (608 KB of logits per decoded token).  ggml-cuda only,
 * one lend at a time, at most GGE_LEND_BYTES; otherwise PPRPC_EBUSY and
 * nothing was read (the caller reads into memory of its own).  The caller
 * settled the uploads first.  Worker; the return on any thread. */
#define GGE_LEND_BYTES (4u << 20)
int gge_buf_read_lend(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, uint64_t n, void **ret);
void gge_dev_lend_return(struct gge_dev *g, void *p);
/* Ranges may overlap (memmove semantics). */
int gge_buf_copy(ggml_backend_buffer_t dst, uint64_t doff, ggml_backend_buffer_t src, uint64_t soff, uint64_t n);

/* ---- wire graphs ------------------------------------------------------------- */

/* A buffer a wire tensor names, as the caller resolved its handle. */
struct gge_wbuf {
	ggml_backend_buffer_t buf;
	uint64_t size;   /* bytes a tensor may use, from the buffer's base */
	void *owner;     /* the resolver's object behind it (the engine passes it on, never reads it) */
};

/* Resolve a buffer handle: 0 and *ret, or a negative code with the reason
 * (unknown or foreign handle, a buffer of another device). */
typedef int (*gge_resolve_fn)(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen);

/* GGE_GRAPH: every tensor has memory (GGML_GRAPH_CREATE).  GGE_PROBE: a
 * tensor without a buffer has none (GGML_SUPPORTS, GGML_ALLOC_SIZE: ggml
 * asks before it allocates). */
enum gge_mode { GGE_GRAPH = 0, GGE_PROBE = 1 };

/* What step 1 established about one wire tensor. */
struct gge_wt {
	int base;            /* the tensor owning the bytes: itself, or the view's base */
	uint64_t offs;       /* bytes from the base's first byte (views) */
	struct gge_wbuf wb;  /* the base's buffer (wb.buf NULL: no memory) */
	uint64_t offset;     /* the base's first byte in wb */
	uint64_t extent;     /* bytes from the first to one past the last element */
	uint64_t dense;      /* ggml_row_size(ne0) * ne1 * ne2 * ne3 */
	uint64_t reach;      /* the furthest byte a kernel may touch (ggml_wire.c: reach) */
	int node;            /* position in the node order, -1 for a leaf */
};

/* Step 1 over tensors[0 .. n) and the node order.  plan has n entries.
 * 0, or a negative code with the tensor named in err. */
int gge_wire_check(const Pprpc__GgmlTensor *const *t, size_t n, const int32_t *nodes, size_t nnodes,
		   enum gge_mode mode, gge_resolve_fn resolve, void *arg, struct gge_wt *plan, char *err,
		   size_t errlen);
/* Name of tensor i for messages ("#12 'ffn_up-3'"); buf holds it. */
const char *gge_wire_name(const Pprpc__GgmlTensor *t, size_t i, char *buf, size_t len);

struct gge_guard;

/* A created graph: its ggml context, tensors and cgraph, ready to re-run. */
struct gge_graph {
	void *mem;                   /* the context's memory (ours, so OOM fails cleanly) */
	struct ggml_context *ctx;
	struct ggml_cgraph *cg;
	struct ggml_tensor **t;      /* per wire tensor */
	struct gge_wt *plan;
	int *order;                  /* wire index of the node at each position */
	int ntensors, nnodes;
	struct gge_guard *guards;    /* ordered by node */
	int nguards;
	bool inited;                 /* buffer init_tensor done (first run) */
	struct gge_op_node *opn;     /* nodes an op of the device was asked about, by position */
	int nopn;
	void *scratch;               /* host copy of indices on device buffers */
	/* gge_graph_shadow: the copies of the client's index tensors that the
	 * GPU checks fill, and what to fill them from */
	ggml_backend_buffer_t shadow;
	struct kern_index_check *gpu_checks;
	int ngpu_checks;
	bool gpu_ready;              /* gge_graph_shadow succeeded */
	size_t scratch_size;
	uint64_t host_bytes;         /* what the graph holds in host memory */
	/* host memory reserved under the memory floor for the graph's life
	 * (its context: host_bytes; ggml_graph.c), released when it is freed
	 * (ggml_device.c) */
	uint64_t reserved;
};

/* Host memory gge_graph_build will take for a graph of n tensors and
 * nnodes nodes (its ggml context, ~33x the message that describes it, and
 * the engine's tables): known from the counts alone, so it is charged to
 * the memory floor and the connection before anything is allocated
 * (issue 27.9).  gg->host_bytes of the graph built. */
uint64_t gge_graph_host_size(size_t n, size_t nnodes);
/* Validate and materialize a whole graph (steps 1-3). */
int gge_graph_build(struct gge_dev *g, const Pprpc__GgmlTensor *const *t, size_t n, const int32_t *nodes,
		    size_t nnodes, gge_resolve_fn resolve, void *arg, struct gge_graph **ret_gg, char *err,
		    size_t errlen);
/* Run it (the device's worker thread): PPRPC_ERANGE when an index is out of
 * range (nothing after that node ran), PPRPC_EDEVICE when ggml fails. */
int gge_graph_compute(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen);
/* The same on another backend of the device (a stream's own: ggml_cuda_stream.c). */
int gge_graph_compute_on(struct gge_dev *g, ggml_backend_t be, struct gge_graph *gg, char *err, size_t errlen);
/* What every run does first, on the worker: the queued uploads landed,
 * the buffers' init_tensor on the first run. */
int gge_graph_prepare(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen);
/* The same for a run enqueued on a GPU stream: the uploads are ordered by
 * the event *ret_up (NULL: nothing to wait for) the caller makes its
 * streams wait on, instead of waited for here (gge_dev_uploads_event).
 * The first run settles them (its init_tensor writes device memory). */
int gge_graph_prepare_async(struct gge_dev *g, struct gge_graph *gg, ggml_backend_event_t *ret_up, char *err,
			    size_t errlen);
/* Can a run be enqueued on a GPU stream behind work that has not run yet
 * (a timeline WAIT held there)?  Not when something must be read on the
 * host in the middle of it: a split guard, a node of pprpc's own ops
 * (ggml_ops.h; GATED_DELTA_NET's gate scan), or a START guard the GPU
 * cannot check (gge_guards_gpu_count). */
bool gge_graph_async_ok(const struct gge_graph *gg);
void gge_graph_free(struct gge_graph *gg);
/* What one run costs, from shapes (ggml_work.c): its work in flop, for
 * max-graph-gflop (a node no backend runs costs nothing); the scratch
 * ggml's backend allocates for it in bytes — ggml-cpu's work buffer as its
 * own planner (ggml_graph_plan) sizes it, another device's pool by its
 * largest node.  gge_graph_scratch: 0, or -1 when ggml-cpu's planner cannot
 * be found (the graph must then be refused: its plan is unknown). */
uint64_t gge_graph_work(const struct gge_graph *gg);
int gge_graph_scratch(const struct gge_dev *g, const struct gge_graph *gg, uint64_t *ret_bytes);

/* GGML_SUPPORTS: would the device run tensors[node]?  A negative code for
 * a malformed request; else 0 with *ret_ok and, when false, the reason. */
int gge_probe_supports(struct gge_dev *g, const Pprpc__GgmlTensor *const *t, size_t n, int32_t node,
		       gge_resolve_fn resolve, void *arg, bool *ret_ok, char *err, size_t errlen);
/* GGML_ALLOC_SIZE: ggml_backend_buft_get_alloc_size of tensors[node]. */
int gge_probe_alloc_size(struct gge_dev *g, const Pprpc__GgmlTensor *const *t, size_t n, int32_t node,
			 gge_resolve_fn resolve, void *arg, uint64_t *ret_size, char *err, size_t errlen);

/* ---- internal to the engine (ggml_build.c, ggml_guard.c, ggml_run.c) ---- */

/* Create the guards of a materialized graph (gg->guards). */
int gge_guards_plan(struct gge_graph *gg, const Pprpc__GgmlTensor *const *w, char *err, size_t errlen);
/* Check the guards of class `when` (GGE_GUARD_*) for node positions in
 * [from, to). */
int gge_guards_check(struct gge_graph *gg, int from, int to, int when, char *err, size_t errlen);
/* How many guards a graph has of class when. */
int gge_guards_count(const struct gge_graph *gg, int when);
/* First node position >= from with a run-time split guard, nnodes if none. */
int gge_guards_next_split(const struct gge_graph *gg, int from);

enum { GGE_GUARD_PROVEN = 0, GGE_GUARD_START = 1, GGE_GUARD_SPLIT = 2 };

/* START guards checked on the GPU for one run at most; a graph with more
 * runs on the host's checks (gge_graph_async_ok). */
#define GGE_GPU_CHECKS_MAX 64
/* How many START guards a run must check (covered ones left out), or -1
 * when one cannot be checked on the GPU: a bound of 0, an element not
 * aligned to its size, bytes a node of the graph writes (its copy would go
 * stale within the run). */
int gge_guards_gpu_count(const struct gge_graph *gg);
/* Give each of them the graph's own copy of its index tensor, in a buffer
 * of the device (gg->shadow), which the graph's nodes read from now on,
 * and list them in gg->gpu_checks (src: the client's tensor, dst: the copy,
 * id: the guard's number for gge_guard_describe).  For a device whose streams check indices
 * on the GPU, once, at create.  0 or a negative code with the reason. */
int gge_graph_shadow(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen);
/* The message of a failed guard, as the host check words it. */
void gge_guard_describe(const struct gge_graph *gg, int guard, int64_t value, const int64_t at[4], char *err,
			size_t errlen);

/* Run node positions [from, to) on be, one of the device's backends
 * (ggml_run.c). */
int gge_run_segment(struct gge_dev *g, ggml_backend_t be, struct gge_graph *gg, int from, int to, char *err,
		    size_t errlen);

#endif

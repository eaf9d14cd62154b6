/*
 * pprpc.h — the pprpc client library (libpprpc): the core.
 *
 * The public headers, one concept each; each compiles alone as C and C++:
 *   pprpc.h           connections, buffers, tensors, queues, timelines,
 *                     events, stage-boundary transfers, cluster files,
 *                     statistics (this file)
 *   pprpc_graph.h     the graph builder (ops, shape checks) and GRAPH_CREATE
 *   pprpc_blocks.h    optional: whole transformer blocks on the builder
 *   pprpc_pipeline.h  optional: a fill-drain pipeline over stages
 *   pprpc_ggml.h      ggml graphs (the engine's wire form), for ggml
 *                     backends such as libggml-pprpc.so
 *   pprpc/types.h     the vocabulary shared with the daemon (error codes,
 *                     element types, ops), included by all of them
 *
 * A pprpc_client is one connection to one pprpcd rank.  Objects on the
 * daemon (buffers, graphs, timelines) are named by 64-bit handles the daemon
 * issues, each kind its own type; tensors are plain values (pprpc_tensor)
 * describing bytes in a buffer.
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

/* Daemon-issued handles.  Each kind is its own struct, so passing a buffer
 * where a timeline is expected does not compile (in C and C++); the id is
 * the daemon's 64-bit value, 0 = none.  They are values: copy them freely. */
typedef struct pprpc_buffer {
	uint64_t id;
} pprpc_buffer;
typedef struct pprpc_graph {
	uint64_t id;
} pprpc_graph;
typedef struct pprpc_timeline {
	uint64_t id;
} pprpc_timeline;

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
	int ggml_create_run;     /* GGML_GRAPH_CREATE may queue the graph's first run (ggml-pprpc) */
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
/* The largest bulk (tensor bytes) the daemon takes in one frame, as said at
 * HELLO; 0 when it did not say.  Larger transfers are split by the caller. */
PPRPC_API uint64_t pprpc_daemon_max_bulk(const pprpc_client *c);

/* The state of the connection.  A call that finds the stream closed, timed
 * out or out of sync breaks the connection: every pending request is
 * completed with the failure and later calls fail with PPRPC_ECONN, until
 * pprpc_reconnect opens a new session (whose daemon state starts empty).
 * This is a query, so that a caller holding daemon handles can tell "the
 * request failed" (the session goes on) from "the session is gone" (its
 * handles with it) without parsing messages.  More states may be added
 * (a reconnection in progress): treat every value but OPEN as unusable. */
enum pprpc_conn_state {
	PPRPC_CONN_OPEN = 0,     /* calls go to the daemon */
	PPRPC_CONN_BROKEN = 1    /* calls fail: pprpc_last_error says why it broke */
};
PPRPC_API int pprpc_connection_state(const pprpc_client *c);
/* Liveness: PING the daemon and wait at most timeout_ms (0: 5000) for the
 * answer.  The daemon's event loop answers at once even while its devices
 * run long graphs, so a timeout means its process is stopped or its host
 * unreachable; the connection then breaks (PPRPC_ETIMEDOUT).  Use a client
 * of its own for a watchdog thread: a client is one thread's at a time. */
PPRPC_API int pprpc_ping(pprpc_client *c, int timeout_ms);
/* An fd (an eventfd, a pipe's read end) that another thread makes readable
 * to end this client's waits: every wait in progress or to come then fails
 * with PPRPC_ECANCELED and the connection breaks.  -1 removes it.  The fd
 * stays the caller's (never read or closed here) and must stay open while
 * set. */
PPRPC_API void pprpc_set_cancel_fd(pprpc_client *c, int fd);
/* Whether c's waits for replies spin (on, the default) around the time the
 * last waits for the same request type took, and sleep before: a thread
 * woken from sleep takes 20 to 160 us to run on some hosts, more than a
 * decoded token's hops.  Off, every wait sleeps until its reply comes
 * (hosts where the ranks' work shares the caller's CPUs). */
PPRPC_API void pprpc_set_spin(pprpc_client *c, int on);
/* The request trace, a diagnostic (doc/llama.md: Tracing one token).
 * pprpc_trace_open writes PATH.PID (several processes may trace to one
 * PATH); a client given it by pprpc_set_trace writes a line per request
 * sent and per reply received, CLOCK_MONOTONIC ns first; pprpc_trace_event
 * adds a line of the caller's ("T_NS PID CONN client TYPE ID EVENT
 * [INFO]"; no field may hold spaces but INFO).  A trace may be shared by
 * clients of several threads; it stays the caller's, and must outlive the
 * clients set to it (NULL unsets).  Open returns PPRPC_EINVAL (no path,
 * cannot create) or PPRPC_ENOMEM. */
typedef struct pprpc_trace pprpc_trace;
PPRPC_API int pprpc_trace_open(const char *path, pprpc_trace **ret_t);
PPRPC_API void pprpc_trace_event(pprpc_trace *t, const char *conn, const char *type, uint64_t id,
				 const char *event, const char *info);
PPRPC_API void pprpc_trace_close(pprpc_trace *t);
PPRPC_API void pprpc_set_trace(pprpc_client *c, pprpc_trace *t);
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

/* ---- graphs ------------------------------------------------------------------ */

/* Graphs are made with a builder (pprpc_graph.h: pprpc_graph_create) or by
 * other front ends that create graph handles; here they run and go. */
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

/* ---- host pages ----------------------------------------------------------------- */

/* Memory of this process that daemons on the same host write reads into
 * straight from their devices: a pprpc_tensor_get or pprpc_tensor_get_async
 * whose destination lies in it sends no bytes over the link and copies
 * none on either side (a GPU's download goes by DMA into it when the
 * daemon could page-lock it).  The first read into it on a connection asks
 * the daemon to map it (one round trip); a daemon that cannot (another
 * host or user, no /proc) reads it by the link as any memory.  size bytes,
 * page-aligned, zeroed; NULL with errno on failure.  Free with
 * pprpc_host_free (never free()).  Any thread. */
PPRPC_API void *pprpc_host_alloc(uint64_t size);
PPRPC_API void pprpc_host_free(void *ptr);
/* Is c's daemon on this host (its boot id is ours)?  Only such a daemon
 * is asked to map host pages. */
PPRPC_API int pprpc_same_host(const pprpc_client *c);
/* Do size bytes at ptr lie in one pprpc_host_alloc block? */
PPRPC_API int pprpc_host_is(const void *ptr, uint64_t size);
/* How c's daemon has this process's host pages: mapped, of them
 * page-locked, and the reason of the last refusal ("" if none). */
PPRPC_API int pprpc_host_page_state(const pprpc_client *c, int *ret_mapped, int *ret_pinned, char *why,
				    size_t whylen);

/* ---- async execution ---------------------------------------------------------- */

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

/* The sticky async error: the first failure of a queued command whose reply
 * this client reads in passing (a pprpc_tensor_get_async the daemon refused,
 * say).  It is kept, with its message, until pprpc_synchronize reports it or
 * the caller takes it here: a host wait (pprpc_timeline_host_wait) proves
 * the queue got past a point, but not that the reads before it succeeded.
 * Both return the code (negative) or 0 when there is none.  peek leaves it;
 * take clears it and copies its message to msg (msglen bytes, truncated,
 * NUL-terminated; msg may be NULL). */
PPRPC_API int pprpc_async_error_peek(const pprpc_client *c);
PPRPC_API int pprpc_async_error_take(pprpc_client *c, char *msg, size_t msglen);

/* ---- requests ----------------------------------------------------------------- */

/* A request in flight whose reply the caller wants later: returned by calls
 * that queue work and also answer something (pprpc_ggml.h's create with
 * run).  Its reply is read by whichever later call on the client meets it
 * (no thread of its own), so waiting for it is often free.  The request is
 * the caller's until pprpc_request_free.  A broken connection completes
 * it with the failure, pprpc_reconnect and pprpc_close with PPRPC_ECLOSED,
 * so no wait hangs on a reply that cannot come; after pprpc_close only
 * pprpc_request_done / _error / _graph / _free may be called on it. */
typedef struct pprpc_request pprpc_request;

/* 1 when the reply (or the failure) is in, 0 while it is in flight. */
PPRPC_API int pprpc_request_done(const pprpc_request *r);
/* Make progress on c (the client r was sent on) until r is done, within
 * c's io timeout (on timeout the connection breaks: a late reply would be
 * out of sync).  Returns r's result: 0, the daemon's error code (message in
 * pprpc_request_error), or the connection's failure.  No I/O when r is
 * already done. */
PPRPC_API int pprpc_request_wait(pprpc_client *c, pprpc_request *r);
/* The message of r's failure ("" while in flight or on success).  Owned by
 * r. */
PPRPC_API const char *pprpc_request_error(const pprpc_request *r);
/* The graph handle a done create request got.  Errors: r's failure,
 * PPRPC_EBUSY (not done yet), PPRPC_EINVAL (r creates no graph),
 * PPRPC_EPROTO (the reply has no handle). */
PPRPC_API int pprpc_request_graph(const pprpc_request *r, pprpc_graph *out);
/* Let go of r.  One still in flight is not cancelled (the daemon runs it):
 * its reply is dropped when it comes and the library frees it then.  NULL
 * is accepted. */
PPRPC_API void pprpc_request_free(pprpc_request *r);

/* ---- statistics ------------------------------------------------------------------ */

/* A snapshot of the daemon's counters (STATS), as named values rather than
 * structs, so a counter the daemon adds appears here without changing the
 * ABI.  The names are the fields of StatsReply in proto/pprpc.proto:
 *
 *   the daemon's own values (list NULL, item 0): daemon_version, uptime_ms,
 *     connections_total, protocol_errors, requests, request_errors,
 *     staging_bytes, staging_used, rdma_status, ...
 *   lists, one item per device / connection / boundary / peer link:
 *     "devices"      info.name, info.free_bytes, info.floor_bytes, buffers,
 *                    allocated_bytes, queue_depth, commands, errors,
 *                    graph_creates, graph_runs, graph_captures,
 *                    graph_replays, gpu_waits, gpu_signals, gpu_recvs,
 *                    gpu_sends,
 *                    async_status,
 *                    ipc_pool_bytes, ipc_status, gdn_serial, gdn_chunked,
 *                    gdn_fallback, gdn_ggml_off, gdn_ggml_auto,
 *                    gdn_ggml_shape, gdn_ggml_gate, gdn_ggml_nomem,
 *                    gdn_native, ...
 *     "connections", "links"   peer, transport, role, bytes_in, bytes_out,
 *                    frames_in, frames_out, errors, rdma_device, gid_index,
 *                    mtu, memlock_step, fallback_reason, rdma_bulk, ...
 *     "boundaries"   peer, direction ("send" | "recv"), path, transfers,
 *                    bytes, time_us, errors, copy_us, ipc_bytes
 *     "exec_times"   device, type ("GRAPH_RUN", ...), execs, ns: time each
 *                    device's queue spent executing commands of a type
 * A nested message's fields are named "outer.inner" (info.free_bytes).
 * Every name and string stays valid until pprpc_stats_free. */
typedef struct pprpc_stats pprpc_stats;

enum pprpc_stat_type {
	PPRPC_STAT_UINT = 0,     /* counters, sizes, flags: .u */
	PPRPC_STAT_INT = 1,      /* signed values (gid_index -1 = none): .i */
	PPRPC_STAT_REAL = 2,     /* .d */
	PPRPC_STAT_STRING = 3    /* .s, never NULL */
};

/* One named value of a snapshot. */
typedef struct pprpc_stat {
	const char *name;
	int type;                /* enum pprpc_stat_type */
	uint64_t u;
	int64_t i;
	double d;
	const char *s;
} pprpc_stat;

/* Fetch the daemon's statistics; free with pprpc_stats_free (NULL is
 * accepted).  Errors: those of a call, PPRPC_ENOMEM. */
PPRPC_API int pprpc_stats_get(pprpc_client *c, pprpc_stats **out);
PPRPC_API void pprpc_stats_free(pprpc_stats *s);
/* The i-th list's name ("devices", ...), NULL past the last. */
PPRPC_API const char *pprpc_stats_list(const pprpc_stats *s, int i);
/* Items in a list (0 for an unknown list); list NULL: 1, the daemon's own
 * values. */
PPRPC_API int pprpc_stats_count(const pprpc_stats *s, const char *list);
/* The i-th value of an item, in the order of the wire message: 0, or
 * PPRPC_ERANGE past the last value (or for an item that does not exist).
 * For printing or exporting everything without knowing the names. */
PPRPC_API int pprpc_stats_field(const pprpc_stats *s, const char *list, int item, int i, pprpc_stat *out);
/* The value called name: 0, or PPRPC_EINVAL when the item has none. */
PPRPC_API int pprpc_stats_find(const pprpc_stats *s, const char *list, int item, const char *name,
			       pprpc_stat *out);
/* Shorthands: a numeric value as uint64 (negative ones as 0), a string; 0
 * and "" when the item has no such value. */
PPRPC_API uint64_t pprpc_stats_u64(const pprpc_stats *s, const char *list, int item, const char *name);
PPRPC_API const char *pprpc_stats_str(const pprpc_stats *s, const char *list, int item, const char *name);

#ifdef __cplusplus
}
#endif
#endif

/*
 * daemon/device/device.h — a compute device as the daemon sees it: a name,
 * a memory floor, a queue, statistics, and the calls that reach its backend.
 *
 * The backend behind it (daemon/backend/<kind>/, picked by the spec through
 * registry.c) implements the interfaces of backend_impl.h: device, buffers,
 * streams with events.  Nothing here depends on the kind of device; what
 * differs is a property (device_host_visible, device_holds_waits, ...).
 */
#ifndef PPRPC_DAEMON_DEVICE_H
#define PPRPC_DAEMON_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kernels/ops.h"

struct dbuf;
struct device_backend;
struct graph;
struct queue;
struct staging;
struct stream;

#define DEVICE_IPC_HANDLE 64   /* bytes of an IPC handle (a cudaIpcMemHandle_t) */

/* ggml-native-gdn: which kernel runs ggml's GATED_DELTA_NET on a ggml device
 * (daemon/backend/ggml/ggml_gdn.c). */
enum { DEVICE_GDN_NATIVE_OFF = 0, DEVICE_GDN_NATIVE_AUTO = 1, DEVICE_GDN_NATIVE_ON = 2 };
/* Why ggml's kernel ran a node: the setting is off (or the device has no
 * pprpc kernel), auto left a decode-sized node to it, the node is not one
 * pprpc computes the same way, the run's gates were outside the shared
 * domain, no workspace. */
enum { DEVICE_GDN_GGML_OFF, DEVICE_GDN_GGML_AUTO, DEVICE_GDN_GGML_SHAPE, DEVICE_GDN_GGML_GATE,
       DEVICE_GDN_GGML_NOMEM, DEVICE_GDN_GGML_WHYS };

struct device {
	uint32_t index;
	char name[32];            /* "cpu", "cuda:0" */
	char desc[128];
	uint64_t floor;           /* bytes that must stay free */
	/* host-memory devices: their buffers count as committed there from
	 * allocation to free, touched or not (hostmem.h); NULL elsewhere */
	struct hostmem *hostmem;
	struct queue *q;
	struct device_backend *be;  /* device.c: the backend's tables, contexts, properties */
	/* statistics: loop thread unless marked */
	uint64_t allocated;
	uint64_t nbuffers;
	uint64_t commands;
	uint64_t errors;
	uint64_t graph_creates;
	uint64_t graph_runs;
	uint64_t graph_captures;  /* CUDA graphs captured (worker thread; read loosely) */
	uint64_t graph_replays;
	uint64_t gpu_waits;       /* WAITs held on a device stream (worker, atomic) */
	uint64_t gpu_recvs;       /* RECVs held on a device stream (worker, atomic) */
	uint64_t gpu_sends;       /* SENDs put into a landing slot by a device stream (worker, atomic) */
	uint64_t gpu_signals;     /* SIGNALs written from a device stream */
	/* which GATED_DELTA_NET form of pprpc's kernels ran (kernels add
	 * atomically); on a ggml device, the nodes pprpc's kernels ran */
	struct kern_gdn_stats gdn_stats;
	/* Boundary transfers by IPC (xfer.c owns these; any device whose
	 * buffers have the IPC ops): the staging pool, made by the worker on
	 * first use; ipc_state: 0 not yet, 1 ready, -1 failed (ipc_why). */
	int ipc_state;
	struct staging *ipc_staging;
	void *ipc_mem;
	uint8_t ipc_handle[DEVICE_IPC_HANDLE];
	char ipc_why[160];
};

/* What a device says of itself in HELLO's DeviceInfo beyond its name and
 * memory: its ggml buffer type's alignment and largest buffer, ggml's
 * device type and release (zeros and NULL where no ggml engine serves it). */
struct device_info {
	uint64_t ggml_alignment;
	uint64_t ggml_max_size;
	uint32_t ggml_dev_type;
	const char *ggml_version;
};

/* An engine that can run GATED_DELTA_NET either with pprpc's kernels or
 * with its own (the ggml engine: device_gdn_report): the nodes its own
 * kernel ran, by reason (DEVICE_GDN_GGML_*), and the setting in words. */
struct device_gdn_report {
	uint64_t other_kernel[DEVICE_GDN_GGML_WHYS];
	char setting[192];
};

/* Settings a backend may use (from pprpcd.conf / flags). */
struct device_conf {
	uint64_t floor;           /* bytes that must stay free */
	int threads;              /* CPU kernel threads (0: all cores) */
	int cuda_graphs;          /* capture CUDA graphs on first run */
	int cpu_ipc;              /* CPU boundaries by cross-memory attach */
	int ggml_native_gdn;      /* DEVICE_GDN_NATIVE_* */
	int ggml_graph_reuse;     /* ggml devices: created graphs carry a graph id */
	/* host memory of the daemon's requests (hostmem.h): a backend that
	 * allocates host memory for a run reserves it here; a host-memory
	 * device subtracts what is reserved from its free memory.  NULL: not
	 * counted. */
	struct hostmem *hostmem;
};

/* Completion of work handed to a device stream: status 0 or a negative
 * code, why (may be NULL) the reason.  Any thread. */
typedef void (*device_done_fn)(void *arg, int status, const char *why);

/* Create the device named by spec ("cpu", "cuda:0", "ggml:CPU") as device number index,
 * with its queue.  Returns 0 or a negative code with the reason in err. */
int device_open(uv_loop_t *loop, const char *spec, uint32_t index, const struct device_conf *conf,
		struct device **ret_dev, char *err, size_t errlen);
/* Does spec name a known kind of device?  And is a device of that kind that
 * cannot run here to be skipped rather than fail the start? */
bool device_spec_known(const char *spec);
bool device_spec_may_be_absent(const char *spec);
/* How specs are spelt ("cpu, cuda:N"), for messages. */
const char *device_spec_names(void);
/* Finish the queued work and join the worker (device_close does it too). */
void device_stop(struct device *d);
void device_close(struct device *d);

/* ---- properties ---------------------------------------------------------- */

const char *device_kind(const struct device *d);
const struct device_info *device_info(const struct device *d);
/* Fill ret (any thread: the counters are read loosely); PPRPC_EUNSUPP where
 * the device has one implementation of GATED_DELTA_NET only. */
int device_gdn_report(const struct device *d, struct device_gdn_report *ret);
int device_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total);
/* Buffer memory is host-addressable (bulk can land in it). */
bool device_host_visible(const struct device *d);
/* Streams hold a WAIT on the device (a slot the device polls) instead of
 * the queue holding it back until its value is reached. */
bool device_holds_waits(const struct device *d);
/* Its streams hold a RECV on a landing slot's bell (device_land_submit). */
bool device_holds_lands(const struct device *d);
/* Streams finish each submission before it returns, on the caller's thread. */
bool device_completes_inline(const struct device *d);
/* The most work (flop) one graph run may demand on this device:
 * max-graph-gflop when set (setting > 0), the backend's own bound when auto
 * (setting < 0), no bound (0) when off (setting 0). */
#define DEVICE_GRAPH_GFLOP_FALLBACK 1024
uint64_t device_graph_flop_max(const struct device *d, int64_t setting);
/* For STATS: "" (the device never holds waits), "on", or "off: why". */
void device_waits_status(const struct device *d, char *buf, size_t len);

/* ---- buffers -------------------------------------------------------------- */

/* Reserve device memory, refusing when it would leave less than the floor
 * free (err names free memory and floor).  The memory reads as zeros. */
int device_alloc(struct device *d, uint64_t size, void **ret_ptr, char *err, size_t errlen);
/* device_alloc in halves, for an allocation whose page commits would hold
 * the loop (a host buffer of a GiB commits and zeroes a quarter million
 * pages): the floor check and the reservation on the loop, the backend's
 * allocation on any thread, the reservation given back when it failed
 * (or when its memory is freed without becoming a buffer: device_free
 * does both). */
int device_alloc_reserve(struct device *d, uint64_t size, char *err, size_t errlen);
void device_alloc_unreserve(struct device *d, uint64_t size);
int device_alloc_raw(struct device *d, uint64_t size, void **ret_ptr);
void device_free(struct device *d, void *ptr, uint64_t size);
/* Worker thread; each complete when it returns. */
int device_fill(struct device *d, void *dst, int value, uint64_t n);
int device_copy(struct device *d, void *dst, const void *src, uint64_t n);
int device_upload(struct device *d, void *dst_dev, const void *src_host, uint64_t n);
int device_download(struct device *d, void *dst_host, const void *src_dev, uint64_t n);
/* A download into the device's own page-locked memory, lent until
 * device_download_return (backend_impl.h: buffer_i.download_lend): 0, or
 * PPRPC_EBUSY / PPRPC_EUNSUPP and nothing read. */
int device_download_lend(struct device *d, const void *src_dev, uint64_t n, void **ret_host);
void device_download_return(struct device *d, void *host);
/* IPC between processes of one host (backend_impl.h: buffer_i.ipc_*). */
bool device_has_ipc(const struct device *d);
int device_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen);
int device_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		    size_t errlen);
int device_ipc_wait(struct device *d, char *err, size_t errlen);
/* Page-lock (on) or release (off) host memory for this device's copies:
 * 0, or PPRPC_EUNSUPP where the device has no use for it. */
int device_pin_host(struct device *d, void *ptr, uint64_t bytes, int on);
/* Mapped host memory as a buffer of the device (backend_impl.h: adopt):
 * device_adopts says whether it can, device_adopt makes size bytes at ptr
 * one (nothing is reserved under the floor: the pages are a file's, the
 * kernel drops them under pressure and reads them again), device_unadopt
 * releases it (the caller unmaps).  0 or PPRPC_EUNSUPP / the backend's
 * code with err. */
bool device_adopts(const struct device *d);
int device_adopt(struct device *d, void *ptr, uint64_t size, char *err, size_t errlen);
void device_unadopt(struct device *d, void *ptr, uint64_t size);

/* ---- streams and events ------------------------------------------------------ */

/*
 * Work on stream s's device stream (opened at the first submission), worker
 * thread: 0, and done(arg, status, why) runs exactly once when the device
 * finished (on any thread; before the call returns on a device that
 * completes inline); or a negative code with err, and done never runs.
 * wait_submit holds the stream until *slot != 0 (only where the device
 * holds waits; slot NULL: done behind the stream's work); write_submit
 * stores value in *slot from the stream.
 */
int device_graph_submit(struct device *d, struct stream *s, struct graph *g, device_done_fn done, void *arg,
			char *err, size_t errlen);
int device_wait_submit(struct device *d, struct stream *s, volatile uint64_t *slot, device_done_fn done, void *arg,
		       char *err, size_t errlen);
int device_write_submit(struct device *d, struct stream *s, volatile uint64_t *slot, uint64_t value,
			device_done_fn done, void *arg, char *err, size_t errlen);
/* Hold s's device stream until *bell >= gen, then copy n bytes of host
 * memory at src to dst (bell and src in memory device_pin_host locked),
 * then done; PPRPC_EUNSUPP where !device_holds_lands.  The caller makes
 * sure the bell is rung, also when the bytes never come. */
int device_land_submit(struct device *d, struct stream *s, const volatile uint64_t *bell, uint64_t gen, void *dst,
		       const void *src, uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen);
/* Once s's device stream gets there, copy n bytes of device memory at src
 * into host memory at dst, store gen in *bell, then done (dst and bell in
 * memory device_pin_host locked); PPRPC_EUNSUPP where !device_holds_lands
 * (nothing enqueued). */
int device_land_put_submit(struct device *d, struct stream *s, volatile uint64_t *bell, uint64_t gen, void *dst,
			   const void *src, uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen);
/* Loop thread, when s's connection is freed (nothing of it in flight). */
void device_stream_release(struct device *d, struct stream *s);
/* Events: a slot of host memory the device reads and writes, reading 0;
 * PPRPC_EUNSUPP on a device without them.  Any thread. */
int device_slot_alloc(struct device *d, volatile uint64_t **ret_slot);
void device_slot_free(struct device *d, volatile uint64_t *slot);
/* ---- graphs ----------------------------------------------------------------------- */

/* The wire forms of a graph a device's engine may take: native graphs
 * (GRAPH_CREATE: Pprpc__GraphCreate) and ggml graphs (GGML_GRAPH_CREATE:
 * Pprpc__GgmlGraphCreate; GGML_SUPPORTS and GGML_ALLOC_SIZE probe one node
 * of one).  The values are objects/graph.h's enum graph_kind. */
enum device_wire { DEVICE_WIRE_NATIVE = 0, DEVICE_WIRE_GGML = 1, DEVICE_WIRES };

/* The daemon's side of a graph create or probe, which the engine calls
 * (objects/graph.c fills it: the limits every engine shares live there,
 * one place each).  Loop thread. */
struct device_graph_env {
	/* [offset, +size) of a buffer handle of the request's owner: the
	 * buffer (not held: graph_hold_buffer), or a negative code with the
	 * reason (an unknown handle, a region outside the buffer) */
	int (*buffer)(void *arg, uint64_t handle, uint64_t offset, uint64_t size, struct dbuf **ret_b, char *err,
		      size_t errlen);
	/* Can the owner be charged bytes more (the graph's footprint)?  0
	 * with the page-rounded footprint, or PPRPC_ELIMIT naming the limit */
	int (*charge)(void *arg, uint64_t bytes, uint64_t *ret_footprint, char *err, size_t errlen);
	/* max-graph-gflop of the device for a run demanding work flop: 0, or
	 * PPRPC_ELIMIT naming the limit */
	int (*work)(void *arg, uint64_t work, char *err, size_t errlen);
	void *arg;
};

/* Does the device's engine take graphs of this wire form?  When not: 0
 * is false, and err says what the device runs instead. */
bool device_takes_wire(const struct device *d, int wire, char *err, size_t errlen);
/*
 * Create a graph of wire form `wire` from msg into g (made by graph.c: dev,
 * owner, refs), in three steps so the middle one may leave the loop
 * (h_ggml.c): begin (loop) checks msg and resolves its buffers through env,
 * holding them in g, into a job; build (any thread, once) validates from
 * what begin resolved alone; finish (loop) charges the costs through env
 * and fills g (its tensors or dev_priv), or fails, freeing the job either
 * way; drop (loop) frees a job that will not be finished.  PPRPC_EUNSUPP
 * with the reason on a device that does not take the form.
 */
int device_graph_begin(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
		       struct graph *g, void **ret_job, char *err, size_t errlen);
void device_graph_build(struct device *d, void *job);
int device_graph_finish(struct device *d, void *job, char *err, size_t errlen);
void device_graph_drop(struct device *d, void *job);
/* Probes of one node of a graph of wire form `wire` (ggml's device
 * supports_op and buffer type get_alloc_size: GGML_SUPPORTS,
 * GGML_ALLOC_SIZE).  A negative code for a malformed request or a device
 * without them; else 0 with the answer (*ret_ok false: why says why). */
int device_graph_supports(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
			  bool *ret_ok, char *why, size_t whylen);
int device_graph_alloc_size(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
			    uint64_t *ret_size, char *err, size_t errlen);
/* Drop the backend's per-graph state (loop, when the graph is destroyed). */
void device_graph_release(struct device *d, struct graph *g);
/* Host memory one run of g allocates beyond its tensors and arena (kernel
 * workspaces), an upper bound; the backend reserves it under the memory
 * floor for each run.  Loop, at GRAPH_CREATE. */
uint64_t device_graph_scratch(struct device *d, const struct graph *g);

#endif

/*
 * daemon/device/backend_impl.h — what a device backend implements.
 *
 * The split of ggml-backend-impl.h: a device (properties, memory, streams,
 * events), its buffers (memory of the device and the copies in and out of
 * it) and streams (ordered device work that completes through a callback).
 * Each interface is a table filled with designated initializers and each
 * op receives its own context: the device's, the buffer type's, or one
 * stream's.  Only backends and daemon/device/ include this header; the
 * daemon calls device.h.
 *
 * Optional ops are marked.  A backend leaves an absent one out of its
 * table; device_open() copies the tables and puts a stub in its place
 * (stubs.c: PPRPC_EUNSUPP, or nothing for a release), so no caller ever
 * tests for NULL.  A missing mandatory op fails the open.
 *
 * One execution model for every backend: the daemon's queue hands GRAPH_RUN,
 * WAIT and SIGNAL to the command's stream through stream_i and completes the
 * command when the stream calls done.  Where that happens is the backend's
 * business: the CPU runs the work inside the submit call and calls done
 * before returning; CUDA queues it on a CUDA stream and calls done from
 * CUDA's callback thread.  The queue handles both (queue.h: QCMD_PENDING).
 *
 * Adding a backend: a folder daemon/backend/<kind>/ with an open function
 * (backend_open_fn) and one line in registry.c.
 */
#ifndef PPRPC_DAEMON_BACKEND_IMPL_H
#define PPRPC_DAEMON_BACKEND_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/device/device.h"

struct graph;

/* What the daemon asks of a device (device_props below says what it got). */
struct device_props {
	char name[32];           /* "cpu", "cuda:0": unique in the daemon */
	char desc[128];          /* for humans: model, threads, memory */
	const char *kind;        /* the backend: "cpu", "cuda" (static string) */
	/* buffer type: buffer memory is host-addressable (bulk can be received
	 * straight into it, a SEND can stream from it in place) */
	bool host_visible;
	/* streams: wait_submit with a slot holds the stream on the device until
	 * the slot is set, without a thread blocking.  Without it the queue
	 * runs a WAIT only once its value is reached (qcmd.ready). */
	bool holds_waits;
	/* streams: land_submit holds the stream on a landing slot's bell and
	 * copies the slot into device memory from the stream (a RECV held on
	 * the GPU, daemon/xfer/dest.c); land_put_submit copies into a slot and
	 * rings its bell from the stream (a SEND behind a run, source.c) */
	bool holds_lands;
	/* streams: every submit calls done before it returns, on the calling
	 * thread (nothing is ever pending on the device afterwards) */
	bool completes_inline;
	/* why holds_waits is off where the backend could hold waits ("" when
	 * on, or when the backend never does): STATS shows it */
	char waits_why[160];
	/* the most work, in Gflop, one graph run may demand when max-graph-gflop
	 * is auto: a few seconds of this device at most (0: the daemon's
	 * fallback, DEVICE_GRAPH_GFLOP_FALLBACK) */
	uint64_t graph_gflop_auto;
	/* the wire forms of graph the engine takes (1 << DEVICE_WIRE_*), and
	 * HELLO's DeviceInfo of the device (zeros: no ggml side) */
	unsigned graph_wires;
	struct device_info info;
};

/* ---- device --------------------------------------------------------------------------- */

struct device_i {
	void (*get_props)(void *ctx, struct device_props *ret);
	int (*mem_info)(void *ctx, uint64_t *ret_free, uint64_t *ret_total);
	/* A stream context for one pprpc stream (a connection on this device),
	 * opened on the worker at its first submission, closed on the loop when
	 * the connection is freed (nothing of it in flight; the backend may keep
	 * it for reuse). */
	int (*stream_open)(void *ctx, void **ret_sctx, char *err, size_t errlen);
	void (*stream_close)(void *ctx, void *sctx);
	/* optional: events — 64-bit slots of host memory the device reads and
	 * writes (wait_submit, write_submit), cleared at allocation; any
	 * thread.  Absent: SIGNAL is published by its completion alone. */
	int (*slot_alloc)(void *ctx, volatile uint64_t **ret_slot);
	void (*slot_free)(void *ctx, volatile uint64_t *slot);
	/*
	 * optional (the four together): graphs of the wire forms in
	 * device_props.graph_wires, created in three steps (device.h:
	 * device_graph_begin): graph_begin (loop) checks msg, resolves its
	 * buffers through env (g holds them) and makes a job; graph_build
	 * (any thread, once) validates from the job alone; graph_finish
	 * (loop) charges through env and fills g, freeing the job either way;
	 * graph_drop (loop) frees an unfinished job.  Absent: PPRPC_EUNSUPP.
	 */
	int (*graph_begin)(void *ctx, int wire, const void *msg, const struct device_graph_env *env, struct graph *g,
			   void **ret_job, char *err, size_t errlen);
	void (*graph_build)(void *ctx, void *job);
	int (*graph_finish)(void *ctx, void *job, char *err, size_t errlen);
	void (*graph_drop)(void *ctx, void *job);
	/* optional: one node of msg — would the device run it (ggml's device
	 * supports_op), what memory would it take (the buffer type's
	 * get_alloc_size).  Absent: PPRPC_EUNSUPP. */
	int (*graph_supports)(void *ctx, int wire, const void *msg, const struct device_graph_env *env, bool *ret_ok,
			      char *why, size_t whylen);
	int (*graph_alloc_size)(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
				uint64_t *ret_size, char *err, size_t errlen);
	/* optional: drop the backend's per-graph state (g->dev_priv), loop
	 * thread, when nothing runs the graph any more */
	void (*graph_release)(void *ctx, struct graph *g);
	/* optional: host memory a run of g allocates beyond its tensors and
	 * arena (an upper bound; 0 when absent).  Loop thread, at GRAPH_CREATE.
	 * A backend that has some reserves it under the memory floor for each
	 * run (device_conf.hostmem). */
	uint64_t (*graph_scratch)(void *ctx, const struct graph *g);
	/* optional: device_gdn_report (device.h).  Absent: PPRPC_EUNSUPP. */
	int (*gdn_report)(void *ctx, struct device_gdn_report *ret);
	/* after the queue stopped: free everything, ctx included */
	void (*destroy)(void *ctx);
};

/* ---- buffers --------------------------------------------------------------------------------- */

/* Device memory, addressed by pointer (buffer objects and graph arenas hold
 * the pointers).  alloc and free run on the loop; the copies on the worker,
 * each complete when it returns. */
struct buffer_i {
	/* size bytes reading as zeros (no client sees another's data) */
	int (*alloc)(void *ctx, uint64_t size, void **ret_ptr);
	void (*free)(void *ctx, void *ptr, uint64_t size);
	int (*fill)(void *ctx, void *dst, int value, uint64_t n);
	int (*copy)(void *ctx, void *dst, const void *src, uint64_t n);
	/* host memory <-> device memory */
	int (*upload)(void *ctx, void *dst_dev, const void *src_host, uint64_t n);
	int (*download)(void *ctx, void *dst_host, const void *src_dev, uint64_t n);
	/*
	 * optional (all three or none): memory other processes of this host can
	 * read, for stage-boundary transfers.  ipc_export allocates bytes and
	 * exports them (handle: DEVICE_IPC_HANDLE bytes; freed with free);
	 * ipc_copy starts copying n bytes at off of another process's export
	 * into dst; ipc_wait waits for the copies started.
	 */
	int (*ipc_export)(void *ctx, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen);
	int (*ipc_copy)(void *ctx, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			size_t errlen);
	int (*ipc_wait)(void *ctx, char *err, size_t errlen);
	/* optional: page-lock host memory for fast copies with every device of
	 * this kind (on = 0 undoes it); where streams hold lands, mapped for
	 * the device at the same address (its stream may wait on a word of it) */
	int (*pin_host)(void *ctx, void *ptr, uint64_t bytes, int on);
	/* optional, host-visible devices: make size bytes of host memory the
	 * daemon mapped (a model file's range) a buffer of the device, as alloc
	 * would have; free of such a buffer then releases the device's hold on
	 * it and never the memory.  Loop or threadpool. */
	int (*adopt)(void *ctx, void *ptr, uint64_t size, char *err, size_t errlen);
	/* optional (both or none): download n bytes into host memory the
	 * device keeps page-locked and lend it (*ret_host) until
	 * download_return, so that a reply is written from it with no copy
	 * of the bytes between the device's and the socket's.  PPRPC_EBUSY
	 * when it is lent already or n does not fit: nothing was read, the
	 * caller downloads into memory of its own.  Worker; the return on any
	 * thread. */
	int (*download_lend)(void *ctx, const void *src_dev, uint64_t n, void **ret_host);
	void (*download_return)(void *ctx, void *host);
};

/* ---- streams and events ------------------------------------------------------------------------ */

/*
 * Every submit queues work on the stream behind what it holds and returns:
 * 0, and done(arg, status, why) runs exactly once when the device finished
 * (status < 0 when it failed there; on any thread, in submission order per
 * stream); or a negative code with err, and done never runs.  Worker thread.
 */
struct stream_i {
	int (*graph_submit)(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen);
	/* Hold the stream until *slot != 0 (device_props.holds_waits); slot
	 * NULL: nothing to wait for, done runs behind the stream's work. */
	int (*wait_submit)(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			   size_t errlen);
	/* Store value in *slot (a slot_alloc slot) once the stream gets there. */
	int (*write_submit)(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			    char *err, size_t errlen);
	/* optional (device_props.holds_lands): hold the stream until *bell >=
	 * gen, then copy n bytes of host memory at src into device memory at
	 * dst, then done.  bell and src lie in host memory pin_host locked for
	 * this device; whoever holds the wait must see that the bell is rung,
	 * also when the bytes never come (the caller's business: the done
	 * says only that the stream got there).  PPRPC_EUNSUPP: nothing was
	 * enqueued (absent, or the wait refused); another code: the stream
	 * may be held on the bell all the same. */
	int (*land_submit)(void *sctx, const volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
			   uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen);
	/* optional (device_props.holds_lands): once the stream gets there,
	 * copy n bytes of device memory at src into host memory at dst, then
	 * store gen in *bell, then done.  dst and bell lie in host memory
	 * pin_host locked for this device.  PPRPC_EUNSUPP: nothing was
	 * enqueued; another code: the copy may be on the stream, the bell not
	 * (the caller's answer must say the bytes did not come). */
	int (*land_put_submit)(void *sctx, volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
			       uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen);
};

/* ---- what a backend's open returns ---------------------------------------------------------------- */

struct backend_dev {
	const struct device_i *dev;
	void *dev_ctx;
	const struct buffer_i *buf;
	void *buf_ctx;              /* the buffer type's context */
	const struct stream_i *stream;  /* contexts: one per stream, from stream_open */
};

/*
 * Open the device named by arg (the spec after the registry prefix: "" for
 * "cpu", "0" for "cuda:0").  d is the daemon's device (index and floor are
 * set, the queue is not made yet): a backend may keep the pointer to count
 * into its statistics.  Returns 0 with *ret filled, or a negative code with
 * the reason in err; PPRPC_EUNSUPP or PPRPC_EDEVICE when the device cannot
 * run on this host or in this build.
 */
typedef int (*backend_open_fn)(struct device *d, const char *arg, const struct device_conf *conf,
			       struct backend_dev *ret, char *err, size_t errlen);

/* The table's rows (registry.c). */
struct backend_reg {
	/* The longest prefix of a spec that a row names picks the row; what
	 * follows is the open function's arg ("cpu" -> "", "cuda:0" -> "0"). */
	const char *prefix;
	/* A device of this kind that cannot run here is skipped with a warning
	 * (the daemon serves the others) instead of failing the start. */
	bool may_be_absent;
	backend_open_fn open;
};

/* The row whose prefix matches spec (*ret_arg: what follows it), or NULL. */
const struct backend_reg *backend_find(const char *spec, const char **ret_arg);
/* How specs are spelt, for messages: "cpu, cuda:N". */
const char *backend_names(void);

/* Copy a backend's tables into filled ones (stubs.c): absent optional ops
 * become stubs; PPRPC_EINTERNAL (err names the op) when a mandatory one is
 * missing. */
int backend_fill(const struct backend_dev *be, struct device_i *dev, struct buffer_i *buf, struct stream_i *stream,
		 char *err, size_t errlen);
#endif

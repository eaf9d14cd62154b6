/*
 * daemon/device/device.h — a compute device (CPU now, CUDA later) and its queue.
 */
#ifndef PPRPC_DAEMON_DEVICE_H
#define PPRPC_DAEMON_DEVICE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kernels/ops.h"

struct device_ops;
struct queue;
struct staging;

#define DEVICE_IPC_HANDLE 64   /* bytes of a cudaIpcMemHandle_t */
struct graph;

struct device {
	const struct device_ops *ops;
	uint32_t index;
	char name[32];            /* "cpu", "cuda:0" */
	char desc[128];
	uint64_t floor;           /* bytes that must stay free */
	struct queue *q;
	struct kern_cpu_ctx kctx;  /* kctx.gdn_stats points at gdn_stats */
	/* which GATED_DELTA_NET form ran (worker thread adds atomically) */
	struct kern_gdn_stats gdn_stats;
	/* statistics (loop thread) */
	uint64_t allocated;
	uint64_t nbuffers;
	uint64_t commands;
	uint64_t errors;
	uint64_t graph_creates;
	uint64_t graph_runs;
	uint64_t graph_captures;  /* CUDA graphs captured (worker thread; read loosely) */
	uint64_t graph_replays;
	bool ipc_enabled;         /* boundaries by IPC (CUDA: always; CPU: cpu-ipc) */
	/* GRAPH_RUN, WAIT and SIGNAL complete asynchronously on per-stream
	 * device streams, WAIT held on the device (device_impl.h) */
	bool async;
	char async_why[160];      /* why not, when the backend could but cannot here */
	uint64_t gpu_waits;       /* WAITs held on a device stream (worker, atomic) */
	uint64_t gpu_signals;     /* SIGNALs written from a device stream */
	/* GPU staging for CUDA IPC SENDs (xfer.c), made by the worker on first
	 * use; ipc_state: 0 not yet, 1 ready, -1 failed (ipc_why). */
	int ipc_state;
	struct staging *ipc_staging;
	void *ipc_mem;
	uint8_t ipc_handle[DEVICE_IPC_HANDLE];
	char ipc_why[160];
	/* ggml devices (kind "ggml"): what the served ggml buffer type and
	 * device report, for HELLO's DeviceInfo */
	uint64_t ggml_alignment;
	uint64_t ggml_max_size;
	uint32_t ggml_dev_type;
};

/* Completion of asynchronous device work (device_impl.h). */
typedef void (*device_done_fn)(void *arg, int status, const char *why);
struct stream;

/* Create the device named by spec ("cpu", "cuda:N", "ggml:NAME").  Returns
 * 0 or a negative code with the reason in err. */
int device_open(uv_loop_t *loop, const char *spec, uint32_t index, uint64_t floor, int threads,
		int cuda_graphs, struct device **ret_dev, char *err, size_t errlen);
/* Finish the queued work and join the worker (device_close does it too). */
void device_stop(struct device *d);
void device_close(struct device *d);

const char *device_kind(const struct device *d);
/* Served by the ggml engine: runs ggml graphs (GGML_GRAPH_CREATE), not
 * native ones. */
bool device_is_ggml(const struct device *d);
int device_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total);

/* Reserve device memory, refusing when it would leave less than the floor
 * free (err names free memory and floor).  The memory reads as zeros. */
int device_alloc(struct device *d, uint64_t size, void **ret_ptr, char *err, size_t errlen);
void device_free(struct device *d, void *ptr, uint64_t size);
/* True when buffer memory is host-addressable (bulk can land in it). */
bool device_host_visible(const struct device *d);
/* CUDA IPC between processes of one host (device_impl.h: ipc_pool, ipc_copy). */
bool device_has_ipc(const struct device *d);
int device_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen);
int device_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		    size_t errlen);
int device_ipc_wait(struct device *d, char *err, size_t errlen);
/* Page-lock (on) or release (off) host memory for this device's copies:
 * 0, or PPRPC_EUNSUPP where the device has no use for it. */
int device_pin_host(struct device *d, void *ptr, uint64_t bytes, int on);

/* Worker-thread operations. */
int device_fill(struct device *d, void *dst, int value, uint64_t n);
int device_copy(struct device *d, void *dst, const void *src, uint64_t n);
int device_upload(struct device *d, void *dst_dev, const void *src_host, uint64_t n);
int device_download(struct device *d, void *dst_host, const void *src_dev, uint64_t n);
int device_graph_run(struct device *d, struct graph *g, char *err, size_t errlen);
void device_graph_release(struct device *d, struct graph *g);

/* Asynchronous devices (d->async), worker thread: the device stream of s,
 * made on first use. */
int device_stream(struct device *d, struct stream *s, void **ret_ds, char *err, size_t errlen);
/* Loop thread, when s's connection is freed (nothing of it in flight). */
void device_stream_release(struct device *d, struct stream *s);
int device_graph_submit(struct device *d, struct stream *s, struct graph *g, device_done_fn done, void *arg,
			char *err, size_t errlen);
int device_wait_submit(struct device *d, struct stream *s, volatile uint64_t *slot, device_done_fn done, void *arg,
		       char *err, size_t errlen);
int device_write_submit(struct device *d, struct stream *s, volatile uint64_t *slot, uint64_t value,
			device_done_fn done, void *arg, char *err, size_t errlen);
int device_slot_alloc(struct device *d, volatile uint64_t **ret_slot);
void device_slot_free(struct device *d, volatile uint64_t *slot);

#endif

/*
 * daemon/backend/cuda/dev_cuda.h — the CUDA backend's insides, shared by dev_cuda.c
 * (device memory, copies, IPC) and dev_cuda_async.c (per-stream CUDA
 * streams, asynchronous completion, timeline waits and writes on the GPU).
 * Only for builds with CUDA.
 */
#ifndef PPRPC_DAEMON_DEV_CUDA_H
#define PPRPC_DAEMON_DEV_CUDA_H

#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "daemon/device/device_impl.h"
#include "kernels/cuda/cuda_ops.h"

#define CUDA_WORKSPACE_BYTES (256u << 20)
/* Other processes' GPU pools opened for IPC copies, kept open: a pool is
 * long-lived (one per source daemon and GPU) and opening one costs about a
 * millisecond.  A full table closes its least recently used entry. */
#define IPC_OPEN_MAX 16

struct ipc_open {
	cudaIpcMemHandle_t h;
	void *ptr;
	uint64_t last_use;
};

/* One pprpc stream's CUDA stream with everything its kernels use, so that a
 * stream held by a GPU-side wait holds nobody else: its own kernel
 * workspace, cuBLAS handle and status word. */
struct cuda_stream {
	struct cuda_stream *next;   /* the device's idle list */
	uint64_t id;                /* never reused: keys captured graphs */
	cudaStream_t stream;
	struct kern_cuda_ctx kctx;
	int32_t *status_host;       /* host view of kctx.status (mapped memory) */
};

struct slot_page;

struct cuda_dev {
	struct device base;
	int ordinal;
	/* the device's own stream: buffer set-up and the synchronous commands
	 * (TENSOR_SET/GET/COPY, CLEAR, SEND/RECV), which the queue runs only
	 * when their pprpc stream has nothing pending on the GPU */
	cudaStream_t stream;
	int use_graphs;            /* capture graphs on first run, replay after */
	struct ipc_open ipc[IPC_OPEN_MAX];  /* worker thread */
	uint64_t ipc_clock;
	/* dev_cuda_async.c */
	pthread_mutex_t lock;      /* idle, slot pages */
	struct cuda_stream *idle;  /* given back by closed connections, reused */
	uint64_t next_stream_id;
	struct slot_page *pages;
	char async_why[160];       /* why GPU-side waits are off ("" = on) */
};

static inline struct cuda_dev *cdev(struct device *d)
{
	return (struct cuda_dev *)d;
}

/* Make the device current on the calling thread (worker, loop, ...). */
int cuda_use(struct cuda_dev *c);

/* dev_cuda_async.c: set up (at open) and tear down (at destroy). */
int cuda_async_init(struct cuda_dev *c, char *err, size_t errlen);
void cuda_async_fini(struct cuda_dev *c);
/* The asynchronous entries of the ops table (device_impl.h). */
int cuda_stream_open(struct device *d, void **ret_ds, char *err, size_t errlen);
void cuda_stream_close(struct device *d, void *ds);
int cuda_graph_submit(struct device *d, void *ds, struct graph *g, device_done_fn done, void *arg, char *err,
		      size_t errlen);
int cuda_wait_submit(struct device *d, void *ds, volatile uint64_t *slot, device_done_fn done, void *arg,
		     char *err, size_t errlen);
int cuda_write_submit(struct device *d, void *ds, volatile uint64_t *slot, uint64_t value, device_done_fn done,
		      void *arg, char *err, size_t errlen);
int cuda_slot_alloc(struct device *d, volatile uint64_t **ret_slot);
void cuda_slot_free(struct device *d, volatile uint64_t *slot);
void cuda_graph_release(struct device *d, struct graph *g);
/* The synchronous GRAPH_RUN, for builds of the queue that do not submit. */
int cuda_graph_run(struct device *d, struct graph *g, char *err, size_t errlen);

#endif

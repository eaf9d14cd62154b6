/*
 * daemon/backend/cuda/cuda_backend.h — the CUDA backend's insides, shared by its
 * device (cuda_device.c), buffers (cuda_buffer.c) and streams with events
 * (cuda_stream.c).  Only for builds with CUDA.
 */
#ifndef PPRPC_DAEMON_CUDA_BACKEND_H
#define PPRPC_DAEMON_CUDA_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "daemon/backend/cuda/cuda_ipc.h"
#include "daemon/backend/cuda/cuda_memops.h"
#include "daemon/device/backend_impl.h"
#include "kernels/cuda/cuda_ops.h"

#define CUDA_WORKSPACE_BYTES (256u << 20)

struct cuda_dev;

/* A stream context: one pprpc stream's CUDA stream with everything its
 * kernels use, so that a stream held by a GPU-side wait holds nobody else:
 * its own kernel workspace, cuBLAS handle and status word. */
struct cuda_stream {
	struct cuda_stream *next;   /* the device's idle list */
	struct cuda_dev *c;
	uint64_t id;                /* never reused: keys captured graphs */
	cudaStream_t stream;
	struct kern_cuda_ctx kctx;
	int32_t *status_host;       /* host view of kctx.status (mapped memory) */
};

/* The device context, also the buffer type's. */
struct cuda_dev {
	struct device *dev;         /* the daemon's device: floor, statistics */
	char name[32];              /* "cuda:N", for messages */
	char desc[128];
	int ordinal;
	/* the device's own stream: buffer set-up and the synchronous copies
	 * (TENSOR_SET/GET/COPY, CLEAR, SEND/RECV), which the queue runs only
	 * when their pprpc stream has nothing pending on the GPU */
	cudaStream_t stream;
	int use_graphs;            /* capture graphs on first run, replay after */
	struct cuda_ipc_cache ipc;  /* other processes' pools opened (worker) */
	/* cuda_stream.c */
	pthread_mutex_t lock;      /* idle */
	struct cuda_stream *idle;  /* given back by closed connections, reused */
	uint64_t next_stream_id;
	struct cuda_slots slots;   /* WAITs on the GPU, SIGNALs from streams */
};

/* Make the device current on the calling thread (worker, loop, ...). */
int cuda_use(struct cuda_dev *c);

extern const struct buffer_i cuda_buffer_i;
extern const struct stream_i cuda_stream_i;

/* cuda_stream.c: set up (at open) and tear down (at destroy). */
int cuda_streams_init(struct cuda_dev *c, char *err, size_t errlen);
void cuda_streams_fini(struct cuda_dev *c);
/* The device interface's stream, event and graph entries. */
int cuda_stream_open(void *ctx, void **ret_sctx, char *err, size_t errlen);
void cuda_stream_close(void *ctx, void *sctx);
int cuda_slot_alloc(void *ctx, volatile uint64_t **ret_slot);
void cuda_slot_free(void *ctx, volatile uint64_t *slot);
void cuda_graph_release(void *ctx, struct graph *g);

#endif

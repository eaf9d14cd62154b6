/*
 * daemon/backend/ggml/ggml_device.h — the ggml engine as a daemon device
 * (ggml_device.c: the backend_impl.h interfaces, registry.c's "ggml:" row;
 * ggml_graph.c: its graph operations).  Inside daemon/backend/ggml/ only.
 */
#ifndef PPRPC_DAEMON_GGML_DEVICE_H
#define PPRPC_DAEMON_GGML_DEVICE_H

#include <pthread.h>
#include <stdbool.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/device/device.h"

struct gge_ipc_cuda;
struct gge_cuda_streams;

struct bmap {
	uintptr_t base;
	uint64_t size;
	ggml_backend_buffer_t buf;
};

/* The device's context (backend_impl.h: every device op's ctx). */
struct gdev {
	struct gge_dev *g;
	struct device *dev;  /* the daemon's device (names, for messages) */
	bool staged;       /* host memory served as device memory (PPRPC_GGML_STAGED) */
	struct hostmem *hostmem;  /* the daemon's host memory reservations, or NULL */
	pthread_mutex_t lock;
	struct bmap *map;  /* sorted by base */
	size_t n, cap;
	struct gge_ipc_cuda *ipc;  /* ggml-cuda: made by the worker at first use */
	/* ggml-cuda: streams that hold WAITs on the GPU (ggml_cuda_stream.h), or
	 * NULL and why not */
	struct gge_cuda_streams *streams;
	char waits_why[160];
};

/* The ggml buffer whose memory starts at base (a buffer's ptr); NULL when
 * the device allocated none there. */
ggml_backend_buffer_t ggml_device_buffer(struct gdev *gd, const void *base);

/* The graph operations (ggml_graph.c; backend_impl.h says what each does),
 * ctx a struct gdev. */
int ggml_graph_begin(void *ctx, int wire, const void *msg, const struct device_graph_env *env, struct graph *g,
		     void **ret_job, char *err, size_t errlen);
void ggml_graph_build(void *ctx, void *job);
int ggml_graph_finish(void *ctx, void *job, char *err, size_t errlen);
void ggml_graph_drop(void *ctx, void *job);
int ggml_graph_supports(void *ctx, int wire, const void *msg, const struct device_graph_env *env, bool *ret_ok,
			char *why, size_t whylen);
int ggml_graph_alloc_size(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
			  uint64_t *ret_size, char *err, size_t errlen);

#endif

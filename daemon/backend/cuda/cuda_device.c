/*
 * daemon/backend/cuda/cuda_device.c — the CUDA device: properties, memory
 * information, opening and closing.  Buffers are in cuda_buffer.c; streams,
 * GRAPH_RUN and the GPU-side timeline waits and writes in cuda_stream.c.
 *
 * cudart is linked statically and cuBLAS is loaded at run time, so the same
 * pprpcd binary starts on a host with no GPU and no CUDA libraries: opening
 * a cuda:N device then fails with CUDA's reason and the daemon serves its
 * other devices.  Kernel modules are loaded eagerly at open (lazy loading
 * deadlocks behind a stream blocked on a timeline wait: GPU-NOTES.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/native/native_graph.h"
#include "daemon/device/backend_impl.h"
#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/cuda_backend.h"

/* The worker thread and the loop thread both call in: make the device
 * current on whichever thread this is. */
int cuda_use(struct cuda_dev *c)
{
	return cudaSetDevice(c->ordinal) == cudaSuccess ? 0 : PPRPC_EDEVICE;
}

static void cuda_get_props(void *ctx, struct device_props *ret)
{
	struct cuda_dev *c = ctx;

	snprintf(ret->name, sizeof(ret->name), "%s", c->name);
	snprintf(ret->desc, sizeof(ret->desc), "%s", c->desc);
	ret->kind = "cuda";
	ret->host_visible = false;
	ret->holds_waits = c->slots.memops;
	ret->completes_inline = false;
	snprintf(ret->waits_why, sizeof(ret->waits_why), "%s", c->slots.memops ? "" : c->slots.waits_why);
	/* 1 Pflop: about a second of an H100/H200's dense tensor cores; a
	 * 70B-parameter model's 512-token ubatch is ~72 Tflop. */
	ret->graph_gflop_auto = 1ull << 20;
	ret->graph_wires = 1u << DEVICE_WIRE_NATIVE;
}

static int cuda_mem_info(void *ctx, uint64_t *ret_free, uint64_t *ret_total)
{
	size_t fr, total;

	if (cuda_use(ctx) < 0 || cudaMemGetInfo(&fr, &total) != cudaSuccess)
		return PPRPC_EDEVICE;
	*ret_free = fr;
	*ret_total = total;
	return 0;
}

static void cuda_destroy(void *ctx)
{
	struct cuda_dev *c = ctx;

	if (cuda_use(c) == 0) {
		cuda_ipc_close_all(&c->ipc);
		cuda_streams_fini(c);
		if (c->stream) {
			cudaStreamSynchronize(c->stream);
			cudaStreamDestroy(c->stream);
		}
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static const struct device_i cuda_device_i = {
	.get_props = cuda_get_props,
	.mem_info = cuda_mem_info,
	NATIVE_GRAPH_OPS,
	.stream_open = cuda_stream_open,
	.stream_close = cuda_stream_close,
	.slot_alloc = cuda_slot_alloc,
	.slot_free = cuda_slot_free,
	.graph_release = cuda_graph_release,
	.destroy = cuda_destroy,
};

int cuda_backend_open(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret,
		      char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	struct cuda_dev *c;
	cudaError_t e;
	char *end;
	long ordinal = strtol(arg, &end, 10);
	int n = 0;
	char why[200];

	if (arg[0] < '0' || arg[0] > '9' || *end || ordinal > 1024) {
		snprintf(err, errlen, "unknown device 'cuda:%s' (cuda:N, N a device number)", arg);
		return PPRPC_EINVAL;
	}
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(err, errlen, "cuda:%ld unavailable: %s", ordinal, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	if (ordinal >= n) {
		snprintf(err, errlen, "cuda:%ld unavailable: this host has %d CUDA device(s)", ordinal, n);
		return PPRPC_EDEVICE;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return PPRPC_ENOMEM;
	c->dev = d;
	c->ordinal = (int)ordinal;
	c->use_graphs = conf->cuda_graphs;
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->name, sizeof(c->name), "cuda:%d", c->ordinal);
	if ((e = cudaSetDevice(c->ordinal)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, c->ordinal)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
		snprintf(err, errlen, "%s: %s", c->name, cudaGetErrorString(e));
		cuda_destroy(c);
		return PPRPC_EDEVICE;
	}
	/* Every kernel is loaded now: lazy loading would deadlock behind a
	 * stream held by a timeline wait (GPU-NOTES.md). */
	if (kern_cuda_preload(why, sizeof(why)) < 0 || cuda_streams_init(c, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", c->name, why);
		cuda_destroy(c);
		return PPRPC_EDEVICE;
	}
	snprintf(c->desc, sizeof(c->desc), "%.80s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
		 prop.totalGlobalMem / 1073741824.0);
	ret->dev = &cuda_device_i;
	ret->dev_ctx = c;
	ret->buf = &cuda_buffer_i;
	ret->buf_ctx = c;
	ret->stream = &cuda_stream_i;
	return 0;
}

#else /* !PPRPC_HAVE_CUDA */

int cuda_backend_open(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret,
		      char *err, size_t errlen)
{
	(void)d, (void)conf, (void)ret;
	snprintf(err, errlen, "cuda:%s unavailable: this pprpcd was built without CUDA (nvcc not found at build time)",
		 arg);
	return PPRPC_EUNSUPP;
}

#endif

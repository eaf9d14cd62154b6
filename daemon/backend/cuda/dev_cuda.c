/*
 * daemon/backend/cuda/dev_cuda.c — the CUDA device backend.
 *
 * Buffers come from the stream-ordered allocator (and are zeroed, like the
 * CPU device's); the memory floor comes from cudaMemGetInfo.  The device's
 * own stream carries the synchronous commands (TENSOR_SET/GET/COPY, CLEAR,
 * SEND/RECV copies): the worker enqueues and waits, so errors are
 * attributed to the command that caused them.  GRAPH_RUN, WAIT and SIGNAL
 * go on each pprpc stream's own CUDA stream and complete asynchronously
 * (dev_cuda_async.c).
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

#include "daemon/device/device_impl.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/dev_cuda.h"

/* The worker thread and the loop thread both call in: make the device
 * current on whichever thread this is. */
int cuda_use(struct cuda_dev *c)
{
	return cudaSetDevice(c->ordinal) == cudaSuccess ? 0 : PPRPC_EDEVICE;
}

static int wait_stream(struct cuda_dev *c, char *err, size_t errlen)
{
	cudaError_t e = cudaStreamSynchronize(c->stream);

	if (e == cudaSuccess)
		return 0;
	if (err)
		snprintf(err, errlen, "%s: %s", c->base.name, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

static int cuda_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	size_t fr, total;

	if (cuda_use(cdev(d)) < 0 || cudaMemGetInfo(&fr, &total) != cudaSuccess)
		return PPRPC_EDEVICE;
	*ret_free = fr;
	*ret_total = total;
	return 0;
}

static int cuda_alloc(struct device *d, uint64_t size, void **ret_ptr)
{
	void *p = NULL;

	struct cuda_dev *c = cdev(d);

	/* Stream-ordered: cudaFree would wait for the whole device, and with
	 * a stream held by a timeline wait that the loop thread (the caller)
	 * must release, it would wait forever.  The device stream has nothing
	 * but allocations and synchronous copies on it. */
	if (cuda_use(c) < 0 || cudaMallocAsync(&p, size, c->stream) != cudaSuccess) {
		cudaGetLastError();
		return PPRPC_ENOMEM;
	}
	/* New buffers read as zeros: no client sees another's old data. */
	if (cudaMemsetAsync(p, 0, size, c->stream) != cudaSuccess || wait_stream(c, NULL, 0) < 0) {
		cudaFreeAsync(p, c->stream);
		return PPRPC_EDEVICE;
	}
	*ret_ptr = p;
	return 0;
}

/* Every command that used the memory has completed (buffers are freed when
 * their last reference goes), so ordering on the device stream suffices. */
static void cuda_free(struct device *d, void *ptr, uint64_t size)
{
	struct cuda_dev *c = cdev(d);

	(void)size;
	if (cuda_use(c) == 0)
		cudaFreeAsync(ptr, c->stream);
}

static int cuda_fill(struct device *d, void *dst, int value, uint64_t n)
{
	struct cuda_dev *c = cdev(d);

	if (cuda_use(c) < 0 || cudaMemsetAsync(dst, value, n, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int memcpy_kind(struct device *d, void *dst, const void *src, uint64_t n, enum cudaMemcpyKind kind)
{
	struct cuda_dev *c = cdev(d);

	if (cuda_use(c) < 0 || cudaMemcpyAsync(dst, src, n, kind, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int cuda_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyDeviceToDevice);
}

static int cuda_upload(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyHostToDevice);
}

static int cuda_download(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyDeviceToHost);
}

static int cuda_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err,
			 size_t errlen)
{
	cudaIpcMemHandle_t h;
	cudaError_t e;
	void *p = NULL;

	_Static_assert(sizeof(h) == DEVICE_IPC_HANDLE, "an IPC handle is 64 bytes");
	if (cuda_use(cdev(d)) < 0 || (e = cudaMalloc(&p, bytes)) != cudaSuccess ||
	    (e = cudaIpcGetMemHandle(&h, p)) != cudaSuccess) {
		e = cudaGetLastError();
		snprintf(err, errlen, "%s: GPU staging for IPC: %s", d->name, cudaGetErrorString(e));
		if (p)
			cudaFree(p);
		return PPRPC_EDEVICE;
	}
	memcpy(handle, &h, sizeof(h));
	*ret_ptr = p;
	return 0;
}

/* The pool behind handle, opened once (peer access enabled as needed). */
static void *ipc_open(struct cuda_dev *c, const uint8_t *handle, char *err, size_t errlen)
{
	struct ipc_open *slot = &c->ipc[0];
	cudaIpcMemHandle_t h;
	cudaError_t e;

	memcpy(&h, handle, sizeof(h));
	for (int i = 0; i < IPC_OPEN_MAX; i++) {
		if (c->ipc[i].ptr && !memcmp(&c->ipc[i].h, &h, sizeof(h))) {
			c->ipc[i].last_use = ++c->ipc_clock;
			return c->ipc[i].ptr;
		}
		if (!c->ipc[i].ptr || c->ipc[i].last_use < slot->last_use)
			slot = &c->ipc[i];
	}
	if (slot->ptr) {
		cudaIpcCloseMemHandle(slot->ptr);
		slot->ptr = NULL;
	}
	e = cudaIpcOpenMemHandle(&slot->ptr, h, cudaIpcMemLazyEnablePeerAccess);
	if (e != cudaSuccess) {
		cudaGetLastError();
		slot->ptr = NULL;
		snprintf(err, errlen, "%s: opening the source's GPU memory (cudaIpcOpenMemHandle): %s", c->base.name,
			 cudaGetErrorString(e));
		return NULL;
	}
	slot->h = h;
	slot->last_use = ++c->ipc_clock;
	return slot->ptr;
}

static int cuda_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			 size_t errlen)
{
	struct cuda_dev *c = cdev(d);
	uint8_t *src;
	cudaError_t e;

	if (cuda_use(c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", d->name);
		return PPRPC_EDEVICE;
	}
	src = ipc_open(c, handle, err, errlen);
	if (!src)
		return PPRPC_EDEVICE;
	/* Device to device: over NVLink when the GPUs have it. */
	if ((e = cudaMemcpyAsync(dst, src + off, n, cudaMemcpyDeviceToDevice, c->stream)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: IPC copy: %s", d->name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

/* Portable: one registration serves every GPU of the process. */
static int cuda_pin_host(struct device *d, void *ptr, uint64_t bytes, int on)
{
	cudaError_t e;

	if (cuda_use(cdev(d)) < 0)
		return PPRPC_EDEVICE;
	e = on ? cudaHostRegister(ptr, bytes, cudaHostRegisterPortable) : cudaHostUnregister(ptr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return PPRPC_EDEVICE;
	}
	return 0;
}

static int cuda_ipc_wait(struct device *d, char *err, size_t errlen)
{
	return wait_stream(cdev(d), err, errlen);
}

static void cuda_destroy(struct device *d)
{
	struct cuda_dev *c = cdev(d);

	if (cuda_use(c) == 0) {
		for (int i = 0; i < IPC_OPEN_MAX; i++)
			if (c->ipc[i].ptr)
				cudaIpcCloseMemHandle(c->ipc[i].ptr);
		cuda_async_fini(c);
		if (c->stream) {
			cudaStreamSynchronize(c->stream);
			cudaStreamDestroy(c->stream);
		}
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static const struct device_ops cuda_ops = {
	.kind = "cuda",
	.host_visible = false,
	.mem_info = cuda_mem_info,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.fill = cuda_fill,
	.copy = cuda_copy,
	.upload = cuda_upload,
	.download = cuda_download,
	.graph_run = cuda_graph_run,
	.graph_release = cuda_graph_release,
	.stream_open = cuda_stream_open,
	.stream_close = cuda_stream_close,
	.graph_submit = cuda_graph_submit,
	.wait_submit = cuda_wait_submit,
	.write_submit = cuda_write_submit,
	.slot_alloc = cuda_slot_alloc,
	.slot_free = cuda_slot_free,
	.ipc_pool = cuda_ipc_pool,
	.ipc_copy = cuda_ipc_copy,
	.ipc_wait = cuda_ipc_wait,
	.pin_host = cuda_pin_host,
	.destroy = cuda_destroy,
};

int cuda_device_create(struct device **ret_dev, int ordinal, int use_graphs, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	struct cuda_dev *c;
	cudaError_t e;
	int n = 0;
	char why[200];

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(err, errlen, "cuda:%d unavailable: %s", ordinal, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	if (ordinal < 0 || ordinal >= n) {
		snprintf(err, errlen, "cuda:%d unavailable: this host has %d CUDA device(s)", ordinal, n);
		return PPRPC_EDEVICE;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return PPRPC_ENOMEM;
	c->base.ops = &cuda_ops;
	c->base.ipc_enabled = true;
	c->ordinal = ordinal;
	c->use_graphs = use_graphs;
	pthread_mutex_init(&c->lock, NULL);
	snprintf(c->base.name, sizeof(c->base.name), "cuda:%d", ordinal);
	if ((e = cudaSetDevice(ordinal)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
		snprintf(err, errlen, "cuda:%d: %s", ordinal, cudaGetErrorString(e));
		cuda_destroy(&c->base);
		return PPRPC_EDEVICE;
	}
	/* Every kernel is loaded now: lazy loading would deadlock behind a
	 * stream held by a timeline wait (GPU-NOTES.md). */
	if (kern_cuda_preload(why, sizeof(why)) < 0 || cuda_async_init(c, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "cuda:%d: %s", ordinal, why);
		cuda_destroy(&c->base);
		return PPRPC_EDEVICE;
	}
	snprintf(c->base.desc, sizeof(c->base.desc), "%.80s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
		 prop.totalGlobalMem / 1073741824.0);
	*ret_dev = &c->base;
	return 0;
}

#else /* !PPRPC_HAVE_CUDA */

int cuda_device_create(struct device **ret_dev, int ordinal, int use_graphs, char *err, size_t errlen)
{
	(void)ret_dev;
	(void)use_graphs;
	snprintf(err, errlen, "cuda:%d unavailable: this pprpcd was built without CUDA (nvcc not found at build time)",
		 ordinal);
	return PPRPC_EUNSUPP;
}

#endif

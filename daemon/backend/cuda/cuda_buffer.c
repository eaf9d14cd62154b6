/*
 * daemon/backend/cuda/cuda_buffer.c — CUDA device memory, the copies in and
 * out of it, CUDA IPC between processes of one host, and host pinning.
 *
 * Buffers come from the stream-ordered allocator (and are zeroed, like the
 * CPU device's).  The device's own stream carries the copies (TENSOR_SET/
 * GET/COPY, CLEAR, SEND/RECV): the worker enqueues and waits, so errors are
 * attributed to the command that caused them.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/device/backend_impl.h"
#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/cuda_backend.h"

static int wait_stream(struct cuda_dev *c, char *err, size_t errlen)
{
	cudaError_t e = cudaStreamSynchronize(c->stream);

	if (e == cudaSuccess)
		return 0;
	if (err)
		snprintf(err, errlen, "%s: %s", c->name, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

static int cuda_alloc(void *ctx, uint64_t size, void **ret_ptr)
{
	struct cuda_dev *c = ctx;
	void *p = NULL;

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
static void cuda_free(void *ctx, void *ptr, uint64_t size)
{
	struct cuda_dev *c = ctx;

	(void)size;
	if (cuda_use(c) == 0)
		cudaFreeAsync(ptr, c->stream);
}

static int cuda_fill(void *ctx, void *dst, int value, uint64_t n)
{
	struct cuda_dev *c = ctx;

	if (cuda_use(c) < 0 || cudaMemsetAsync(dst, value, n, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int memcpy_kind(struct cuda_dev *c, void *dst, const void *src, uint64_t n, enum cudaMemcpyKind kind)
{
	if (cuda_use(c) < 0 || cudaMemcpyAsync(dst, src, n, kind, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int cuda_copy(void *ctx, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(ctx, dst, src, n, cudaMemcpyDeviceToDevice);
}

static int cuda_upload(void *ctx, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(ctx, dst, src, n, cudaMemcpyHostToDevice);
}

static int cuda_download(void *ctx, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(ctx, dst, src, n, cudaMemcpyDeviceToHost);
}

static int cuda_ipc_export_pool(void *ctx, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err,
				size_t errlen)
{
	struct cuda_dev *c = ctx;
	cudaError_t e;
	void *p = NULL;
	int rc;

	if (cuda_use(c) < 0 || (e = cudaMalloc(&p, bytes)) != cudaSuccess) {
		e = cudaGetLastError();
		snprintf(err, errlen, "%s: GPU staging for IPC: %s", c->name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	rc = cuda_ipc_export(c->name, p, handle, err, errlen);
	if (rc < 0) {
		cudaFree(p);
		return rc;
	}
	*ret_ptr = p;
	return 0;
}

static int cuda_ipc_copy(void *ctx, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			 size_t errlen)
{
	struct cuda_dev *c = ctx;

	if (cuda_use(c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", c->name);
		return PPRPC_EDEVICE;
	}
	return cuda_ipc_copy_async(&c->ipc, c->stream, c->name, dst, handle, off, n, err, errlen);
}

static int cuda_ipc_wait(void *ctx, char *err, size_t errlen)
{
	return wait_stream(ctx, err, errlen);
}

/* Portable: one registration serves every GPU of the process. */
static int cuda_pin_host(void *ctx, void *ptr, uint64_t bytes, int on)
{
	cudaError_t e;

	if (cuda_use(ctx) < 0)
		return PPRPC_EDEVICE;
	e = on ? cudaHostRegister(ptr, bytes, cudaHostRegisterPortable) : cudaHostUnregister(ptr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return PPRPC_EDEVICE;
	}
	return 0;
}

const struct buffer_i cuda_buffer_i = {
	.alloc = cuda_alloc,
	.free = cuda_free,
	.fill = cuda_fill,
	.copy = cuda_copy,
	.upload = cuda_upload,
	.download = cuda_download,
	.ipc_export = cuda_ipc_export_pool,
	.ipc_copy = cuda_ipc_copy,
	.ipc_wait = cuda_ipc_wait,
	.pin_host = cuda_pin_host,
};

#endif /* PPRPC_HAVE_CUDA */

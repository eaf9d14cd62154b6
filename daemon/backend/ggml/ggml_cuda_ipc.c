/* daemon/backend/ggml/ggml_cuda_ipc.c — CUDA IPC on a ggml-cuda device's memory
 * (ggml_cuda_ipc.h). */
#include "daemon/backend/ggml/ggml_cuda_ipc.h"

#include <stdio.h>
#include <stdlib.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/cuda_ipc.h"

struct gge_ipc_cuda {
	int ordinal;
	char who[40];
	/* the copies' stream: ggml-cuda synchronizes its own after every
	 * graph and buffer copy, so one of ours ordered by the queue suffices */
	cudaStream_t stream;
	struct cuda_ipc_cache cache;
};

static int use(struct gge_ipc_cuda *c, char *err, size_t errlen)
{
	cudaError_t e = cudaSetDevice(c->ordinal);

	if (e == cudaSuccess)
		return 0;
	cudaGetLastError();
	snprintf(err, errlen, "%s: CUDA device %d: %s", c->who, c->ordinal, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

int gge_ipc_cuda_open(int ordinal, const char *who, struct gge_ipc_cuda **ret, char *err, size_t errlen)
{
	struct gge_ipc_cuda *c = calloc(1, sizeof(*c));
	cudaError_t e;
	int rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	c->ordinal = ordinal;
	snprintf(c->who, sizeof(c->who), "%s", who);
	rc = use(c, err, errlen);
	if (rc == 0 && (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: a stream for IPC copies: %s", who, cudaGetErrorString(e));
		rc = PPRPC_EDEVICE;
	}
	if (rc < 0) {
		free(c);
		return rc;
	}
	*ret = c;
	return 0;
}

void gge_ipc_cuda_close(struct gge_ipc_cuda *c)
{
	if (!c)
		return;
	if (cudaSetDevice(c->ordinal) == cudaSuccess) {
		cudaStreamSynchronize(c->stream);
		cuda_ipc_close_all(&c->cache);
		cudaStreamDestroy(c->stream);
	}
	cudaGetLastError();
	free(c);
}

int gge_ipc_cuda_export(struct gge_ipc_cuda *c, void *base, uint8_t *handle, char *err, size_t errlen)
{
	int rc = use(c, err, errlen);

	return rc < 0 ? rc : cuda_ipc_export(c->who, base, handle, err, errlen);
}

int gge_ipc_cuda_copy(struct gge_ipc_cuda *c, void *dst, const uint8_t *handle, uint64_t off, uint64_t n,
		      char *err, size_t errlen)
{
	int rc = use(c, err, errlen);

	return rc < 0 ? rc : cuda_ipc_copy_async(&c->cache, c->stream, c->who, dst, handle, off, n, err, errlen);
}

int gge_ipc_cuda_wait(struct gge_ipc_cuda *c, char *err, size_t errlen)
{
	cudaError_t e = cudaStreamSynchronize(c->stream);

	if (e == cudaSuccess)
		return 0;
	cudaGetLastError();
	snprintf(err, errlen, "%s: IPC copy: %s", c->who, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

int gge_cuda_pin_host(int ordinal, void *ptr, uint64_t bytes, int on)
{
	cudaError_t e = cudaSetDevice(ordinal);

	if (e == cudaSuccess)
		/* Mapped: a stream of the device may wait on a word of it (a
		 * landing page's bell, ggml_cuda_stream.c). */
		e = on ? cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped)
		       : cudaHostUnregister(ptr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return PPRPC_EDEVICE;
	}
	return 0;
}

bool gge_cuda_host_pinned(const void *ptr, uint64_t bytes)
{
	const uint8_t *p = ptr;
	struct cudaPointerAttributes a;

	for (int i = 0; i < 2; i++) {
		const void *q = i ? p + bytes - 1 : p;

		if (cudaPointerGetAttributes(&a, q) != cudaSuccess) {
			cudaGetLastError();
			return false;
		}
		if (a.type != cudaMemoryTypeHost)
			return false;
	}
	return bytes > 0;
}

#endif /* PPRPC_HAVE_CUDA */

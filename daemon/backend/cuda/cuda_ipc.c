/* daemon/backend/cuda/cuda_ipc.c — CUDA IPC exports and copies (cuda_ipc.h). */
#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/cuda_ipc.h"
#include "daemon/device/device.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == DEVICE_IPC_HANDLE, "an IPC handle is 64 bytes");

int cuda_ipc_export(const char *who, void *p, uint8_t *handle, char *err, size_t errlen)
{
	cudaIpcMemHandle_t h;
	cudaError_t e = cudaIpcGetMemHandle(&h, p);

	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: exporting GPU memory for IPC (cudaIpcGetMemHandle): %s", who,
			 cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	memcpy(handle, &h, sizeof(h));
	return 0;
}

/* The export behind handle, opened once (peer access enabled as needed). */
static void *ipc_open(struct cuda_ipc_cache *cache, const char *who, const uint8_t *handle, char *err,
		      size_t errlen)
{
	struct ipc_open *slot = &cache->ipc[0];
	cudaIpcMemHandle_t h;
	cudaError_t e;

	memcpy(&h, handle, sizeof(h));
	for (int i = 0; i < IPC_OPEN_MAX; i++) {
		struct ipc_open *o = &cache->ipc[i];

		if (o->ptr && !memcmp(&o->h, &h, sizeof(h))) {
			o->last_use = ++cache->clock;
			return o->ptr;
		}
		if (!o->ptr || o->last_use < slot->last_use)
			slot = o;
	}
	if (slot->ptr) {
		cudaIpcCloseMemHandle(slot->ptr);
		slot->ptr = NULL;
	}
	e = cudaIpcOpenMemHandle(&slot->ptr, h, cudaIpcMemLazyEnablePeerAccess);
	if (e != cudaSuccess) {
		cudaGetLastError();
		slot->ptr = NULL;
		snprintf(err, errlen, "%s: opening the source's GPU memory (cudaIpcOpenMemHandle): %s", who,
			 cudaGetErrorString(e));
		return NULL;
	}
	slot->h = h;
	slot->last_use = ++cache->clock;
	return slot->ptr;
}

int cuda_ipc_copy_async(struct cuda_ipc_cache *cache, cudaStream_t stream, const char *who, void *dst,
			const uint8_t *handle, uint64_t off, uint64_t n, char *err, size_t errlen)
{
	uint8_t *src = ipc_open(cache, who, handle, err, errlen);
	cudaError_t e;

	if (!src)
		return PPRPC_EDEVICE;
	/* Device to device: over NVLink when the GPUs have it. */
	if ((e = cudaMemcpyAsync(dst, src + off, n, cudaMemcpyDeviceToDevice, stream)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: IPC copy: %s", who, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

void cuda_ipc_close_all(struct cuda_ipc_cache *cache)
{
	for (int i = 0; i < IPC_OPEN_MAX; i++)
		if (cache->ipc[i].ptr) {
			cudaIpcCloseMemHandle(cache->ipc[i].ptr);
			cache->ipc[i].ptr = NULL;
		}
}

#endif /* PPRPC_HAVE_CUDA */

/*
 * daemon/backend/cuda/cuda_ipc.h — CUDA IPC between processes of one host:
 * exporting GPU memory and copying out of another process's export.
 *
 * Shared by the native CUDA backend (cuda_buffer.c) and the ggml engine's
 * ggml-cuda devices (daemon/backend/ggml/ggml_cuda_ipc.c), so a stage boundary
 * between two GPU ranks of one host is a device-to-device copy whichever
 * backend serves each side.  Only for builds with CUDA.
 */
#ifndef PPRPC_DAEMON_CUDA_IPC_H
#define PPRPC_DAEMON_CUDA_IPC_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* Other processes' GPU pools opened for IPC copies, kept open: a pool is
 * long-lived (one per source daemon and GPU) and opening one costs about a
 * millisecond.  A full table closes its least recently used entry. */
#define IPC_OPEN_MAX 16

struct ipc_open {
	cudaIpcMemHandle_t h;
	void *ptr;
	uint64_t last_use;
};

/* One thread uses a cache (the device's worker). */
struct cuda_ipc_cache {
	struct ipc_open ipc[IPC_OPEN_MAX];
	uint64_t clock;
};

/* The export handle (DEVICE_IPC_HANDLE bytes) of memory at p, the start of
 * a cudaMalloc allocation of the current device.  0 or PPRPC_EDEVICE with
 * CUDA's text after who. */
int cuda_ipc_export(const char *who, void *p, uint8_t *handle, char *err, size_t errlen);
/* Start copying n bytes at off of the export behind handle into dst (on
 * the current device) on stream; the export is opened at first use.  0 or
 * PPRPC_EDEVICE with CUDA's text. */
int cuda_ipc_copy_async(struct cuda_ipc_cache *cache, cudaStream_t stream, const char *who, void *dst,
			const uint8_t *handle, uint64_t off, uint64_t n, char *err, size_t errlen);
/* Close every export opened (the device is current). */
void cuda_ipc_close_all(struct cuda_ipc_cache *cache);

#endif

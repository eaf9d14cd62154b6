/*
 * daemon/backend/ggml/ggml_cuda_ipc.h — CUDA IPC for a ggml-cuda device's stage
 * boundaries (ggml_device.c's buffer interface, backend_impl.h's ipc_*).
 * Free of ggml types, as ggml_cuda_gdn.h is: ggml-cuda's buffers are cudaMalloc
 * memory of the device's primary context, which pprpcd's own runtime
 * exports and copies into like the native CUDA device's
 * (daemon/backend/cuda/cuda_ipc.h).  Only in builds with CUDA.
 */
#ifndef PPRPC_DAEMON_GGML_CUDA_IPC_H
#define PPRPC_DAEMON_GGML_CUDA_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gge_ipc_cuda;

/* A copy stream and a cache of opened exports on CUDA device ordinal, made
 * at the first use (the device's worker).  0 or PPRPC_EDEVICE. */
int gge_ipc_cuda_open(int ordinal, const char *who, struct gge_ipc_cuda **ret, char *err, size_t errlen);
void gge_ipc_cuda_close(struct gge_ipc_cuda *c);
/* Export the allocation starting at base (a ggml-cuda buffer's base). */
int gge_ipc_cuda_export(struct gge_ipc_cuda *c, void *base, uint8_t *handle, char *err, size_t errlen);
/* Start copying n bytes at off of another process's export into dst; wait
 * for every copy started. */
int gge_ipc_cuda_copy(struct gge_ipc_cuda *c, void *dst, const uint8_t *handle, uint64_t off, uint64_t n,
		      char *err, size_t errlen);
int gge_ipc_cuda_wait(struct gge_ipc_cuda *c, char *err, size_t errlen);

/* Page-lock host memory (on) or undo it, in the device's primary context
 * that ggml-cuda's runtime shares (portable: every GPU of the process).
 * ggml-cuda then copies to and from it by DMA, without staging through
 * its own pinned buffer: the SEND's capture into the staging ring or a
 * landing page (daemon/xfer/land.h).  0 or PPRPC_EDEVICE. */
int gge_cuda_pin_host(int ordinal, void *ptr, uint64_t bytes, int on);
/* Are the first and last of bytes at ptr host memory page-locked for CUDA
 * (gge_cuda_pin_host, cudaHostAlloc)?  A download into it then needs no
 * staging: the copy is DMA into it. */
bool gge_cuda_host_pinned(const void *ptr, uint64_t bytes);

#endif

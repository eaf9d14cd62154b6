/* daemon/xfer/path_cuda_ipc.c — GPU to GPU on one host: the source's pool is
 * GPU memory exported with cudaIpcGetMemHandle; the destination opens it
 * and copies device to device (NVLink where present), asynchronously on
 * its stream, and waits once per batch (recv side of dest.c). */
#include "daemon/xfer/path.h"

#include "daemon/xfer/xdev.h"

static int cuda_copy_in(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n,
			char *err, size_t errlen)
{
	return xdev_ipc_copy(p->dev, dst, handle, off, n, err, errlen);
}

static int cuda_copy_wait(const struct xpath *p, char *err, size_t errlen)
{
	return xdev_ipc_wait(p->dev, err, errlen);
}

const struct xpath_ops xpath_cuda_ipc_ops = {
	.name = "cuda-ipc",
	.where = XS_POOL,
	.capture = xpath_pool_capture,
	.describe = xpath_pool_describe,
	.copy_in = cuda_copy_in,
	.copy_wait = cuda_copy_wait,
};

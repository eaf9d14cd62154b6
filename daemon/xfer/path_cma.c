/* daemon/xfer/path_cma.c — CPU daemons of one host (cpu-ipc): the source's
 * pool is its own memory, the destination reads it with one
 * process_vm_readv (cross-memory attach, as MPI libraries do within a
 * node): one copy instead of two through a socket. */
#include "daemon/xfer/path.h"

#include "daemon/xfer/xdev.h"

static int cma_copy_in(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n,
		       char *err, size_t errlen)
{
	return xdev_ipc_copy(p->dev, dst, handle, off, n, err, errlen);
}

static int cma_copy_wait(const struct xpath *p, char *err, size_t errlen)
{
	return xdev_ipc_wait(p->dev, err, errlen);
}

const struct xpath_ops xpath_cma_ops = {
	.name = "cma",
	.where = XS_POOL,
	.capture = xpath_pool_capture,
	.describe = xpath_pool_describe,
	.copy_in = cma_copy_in,
	.copy_wait = cma_copy_wait,
};

/* daemon/xfer/path_pool.c — what the two IPC paths share on the source:
 * chunks captured into the device's IPC pool, announced by pool offset. */
#include "daemon/xfer/path.h"

#include "daemon/core/staging.h"
#include "daemon/xfer/xdev.h"

int xpath_pool_capture(const struct xpath *p, int slot, const void *src, uint64_t n)
{
	return xdev_copy(p->dev, staging_ptr(p->slots, slot), src, n);
}

/* No bytes on the link: where they are in our pool.  The PULL stays open
 * until the destination releases them. */
void xpath_pool_describe(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor,
			 Pprpc__PullChunk *pc, const void **ret_bulk, uint64_t *ret_n)
{
	(void)tensor;
	pc->offset = ch->off;
	pc->size = ch->len;
	pc->ipc_handle.data = (uint8_t *)p->handle;
	pc->ipc_handle.len = XDEV_IPC_HANDLE;
	pc->ipc_offset = (uint64_t)ch->slot * p->slots->slot_size;
	pc->ipc_pool_bytes = p->slots->bytes;
	*ret_bulk = NULL;
	*ret_n = 0;
}

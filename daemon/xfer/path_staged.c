/* daemon/xfer/path_staged.c — chunks captured into the host staging ring,
 * bytes on the peer link (TCP or RDMA).  The ring is page-locked for GPU
 * copies (xfer_init), so the device-to-host capture runs at full speed. */
#include "daemon/xfer/path.h"

#include "daemon/core/staging.h"
#include "daemon/xfer/xdev.h"

static int staged_capture(const struct xpath *p, int slot, const void *src, uint64_t n)
{
	return xdev_download(p->dev, staging_ptr(p->slots, slot), src, n);
}

static void staged_describe(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor,
			    Pprpc__PullChunk *pc, const void **ret_bulk, uint64_t *ret_n)
{
	(void)tensor;
	pc->offset = ch->off;
	pc->size = ch->len;
	*ret_bulk = staging_ptr(p->slots, ch->slot);
	*ret_n = ch->len;
}

const struct xpath_ops xpath_staged_ops = {
	.name = "staged",
	.where = XS_STAGED,
	.capture = staged_capture,
	.describe = staged_describe,
	.copy_in = xpath_no_copy_in,
	.copy_wait = xpath_no_copy_wait,
};

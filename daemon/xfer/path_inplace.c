/* daemon/xfer/path_inplace.c — chunks streamed from the tensor itself (no
 * capture copy): only while nothing later in the SEND's stream can touch
 * the tensor (send_sm.h), and only for host-visible memory. */
#include "daemon/xfer/path.h"

static void inplace_describe(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor,
			     Pprpc__PullChunk *pc, const void **ret_bulk, uint64_t *ret_n)
{
	(void)p;
	pc->offset = ch->off;
	pc->size = ch->len;
	*ret_bulk = tensor + ch->off;
	*ret_n = ch->len;
}

const struct xpath_ops xpath_inplace_ops = {
	.name = "in-place",
	.where = XS_INPLACE,
	.capture = xpath_no_capture,
	.describe = inplace_describe,
	.copy_in = xpath_no_copy_in,
	.copy_wait = xpath_no_copy_wait,
};

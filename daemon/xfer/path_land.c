/* daemon/xfer/path_land.c — the transfer written into the destination's
 * landing slot (land.h) by the SEND's worker (source.c, land_put): the
 * PULL's one answer says so and carries no bytes. */
#include "daemon/xfer/path.h"

static void land_describe(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor,
			  Pprpc__PullChunk *pc, const void **ret_bulk, uint64_t *ret_n)
{
	(void)p, (void)tensor;
	pc->offset = ch->off;
	pc->size = ch->len;
	pc->landed = 1;
	*ret_bulk = NULL;
	*ret_n = 0;
}

const struct xpath_ops xpath_land_ops = {
	.name = "land",
	.where = XS_LANDED,
	.capture = xpath_no_capture,
	.describe = land_describe,
	.copy_in = xpath_no_copy_in,
	.copy_wait = xpath_no_copy_wait,
};

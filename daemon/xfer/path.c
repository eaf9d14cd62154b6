/* daemon/xfer/path.c — choosing a path, slots, stubs (see path.h). */
#include "daemon/xfer/path.h"

#include <stdio.h>

#include "daemon/core/staging.h"
#include "daemon/pprpcd.h"
#include "daemon/xfer/xdev.h"
#include "pprpc/types.h"

void xpath_source(struct pprpcd *d, struct device *dev, enum xs_where where, struct xpath *out)
{
	int state;

	out->dev = dev;
	out->slots = NULL;
	out->handle = NULL;
	switch (where) {
	case XS_STAGED:
		out->ops = &xpath_staged_ops;
		out->slots = &d->staging;
		break;
	case XS_POOL:
		out->ops = xdev_host_visible(dev) ? &xpath_cma_ops : &xpath_cuda_ipc_ops;
		out->slots = xdev_ipc_pool_peek(dev, &state, &out->handle);
		break;
	case XS_LANDED:
		out->ops = &xpath_land_ops;
		break;
	default:
		out->ops = &xpath_inplace_ops;
		break;
	}
}

void xpath_dest(struct device *dev, struct xpath *out)
{
	out->ops = xdev_host_visible(dev) ? &xpath_cma_ops : &xpath_cuda_ipc_ops;
	out->dev = dev;
	out->slots = NULL;
	out->handle = NULL;
}

int xpath_slot_take(const struct xpath *p)
{
	return p->slots ? staging_try_get(p->slots) : -1;
}

bool xpath_has_room(const struct xpath *p)
{
	return p->slots && staging_free_slots(p->slots) > 0;
}

void xpath_slot_put(const struct xpath *p, int slot)
{
	if (p->slots && slot >= 0)
		staging_put(p->slots, slot);
}

int xpath_no_capture(const struct xpath *p, int slot, const void *src, uint64_t n)
{
	(void)p, (void)slot, (void)src, (void)n;
	return PPRPC_EUNSUPP;
}

int xpath_no_copy_in(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		     size_t errlen)
{
	(void)dst, (void)handle, (void)off, (void)n;
	snprintf(err, errlen, "the %s path copies nothing at the destination", p->ops->name);
	return PPRPC_EUNSUPP;
}

int xpath_no_copy_wait(const struct xpath *p, char *err, size_t errlen)
{
	snprintf(err, errlen, "the %s path copies nothing at the destination", p->ops->name);
	return PPRPC_EUNSUPP;
}

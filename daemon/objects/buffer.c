/* daemon/objects/buffer.c — buffer objects (see buffer.h). */
#include "daemon/objects/buffer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/device/device.h"
#include "daemon/objects/owner.h"
#include "daemon/pprpcd.h"
#include "kernels/tensor.h"
#include "pprpc/types.h"

/* Whether o may hold one more buffer of size bytes (its footprint). */
static int owner_room(const struct owner *o, uint64_t size, uint64_t *ret_fp, char *err, size_t errlen)
{
	if (size == 0) {
		snprintf(err, errlen, "buffer size must be > 0");
		return PPRPC_EINVAL;
	}
	if (o->nbuffers >= o->max_buffers) {
		snprintf(err, errlen, "connection buffer limit (%u) reached", o->max_buffers);
		return PPRPC_ELIMIT;
	}
	return owner_charge_check(o, size, ret_fp, err, errlen);
}

int buffer_alloc_begin(struct owner *o, struct device *dev, uint64_t size, uint64_t *ret_fp, char *err,
		       size_t errlen)
{
	int rc = owner_room(o, size, ret_fp, err, errlen);

	return rc < 0 ? rc : device_alloc_reserve(dev, size, err, errlen);
}

/* A buffer object over ptr, charged to o (the memory is the caller's
 * when this fails). */
static int buffer_new(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t size, uint64_t fp, void *ptr,
		      struct dbuf **ret_b, char *err, size_t errlen)
{
	struct dbuf *b = calloc(1, sizeof(*b));
	int rc;

	if (!b) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	b->ptr = ptr;
	rc = htab_insert(&d->buffers, b, &b->handle);
	if (rc < 0) {
		if (rc == PPRPC_ELIMIT)
			snprintf(err, errlen, "daemon buffer limit (%u) reached", d->buffers.max);
		else
			snprintf(err, errlen, "out of memory");
		free(b);
		return rc;
	}
	b->dev = dev;
	b->size = size;
	b->footprint = fp;
	b->refs = 1;
	b->owner = o;
	owner_add_buffer(o, b);
	dev->nbuffers++;
	*ret_b = b;
	return 0;
}

int buffer_alloc_end(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t size, uint64_t fp, void *ptr,
		     struct dbuf **ret_b, char *err, size_t errlen)
{
	int rc = buffer_new(d, o, dev, size, fp, ptr, ret_b, err, errlen);

	if (rc < 0)
		device_free(dev, ptr, size); /* the memory and its reservation */
	return rc;
}

int buffer_adopt(struct pprpcd *d, struct owner *o, struct device *dev, void *ptr, uint64_t size,
		 const struct buffer_map *m, struct dbuf **ret_b, char *err, size_t errlen)
{
	uint64_t fp;
	int rc;

	if ((rc = owner_room(o, size, &fp, err, errlen)) < 0)
		return rc;
	if ((rc = device_adopt(dev, ptr, size, err, errlen)) < 0)
		return rc;
	rc = buffer_new(d, o, dev, size, fp, ptr, ret_b, err, errlen);
	if (rc < 0) {
		device_unadopt(dev, ptr, size);
		return rc;
	}
	(*ret_b)->m = *m;
	return 0;
}

int buffer_map_check(const struct dbuf *b, char *err, size_t errlen)
{
	return b->m.map && b->m.check ? b->m.check(b->m.ctx, err, errlen) : 0;
}

void buffer_map_want(const struct dbuf *b, uint64_t off, uint64_t len)
{
	if (b->m.map && b->m.want)
		b->m.want(b->m.ctx, off, len);
}

int buffer_alloc(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t size,
		 struct dbuf **ret_b, char *err, size_t errlen)
{
	uint64_t fp;
	void *ptr;
	int rc = buffer_alloc_begin(o, dev, size, &fp, err, errlen);

	if (rc < 0)
		return rc;
	rc = device_alloc_raw(dev, size, &ptr);
	if (rc < 0) {
		device_alloc_unreserve(dev, size);
		snprintf(err, errlen, "%s: allocation of %.1f MiB failed", dev->name, size / 1048576.0);
		return rc;
	}
	return buffer_alloc_end(d, o, dev, size, fp, ptr, ret_b, err, errlen);
}

struct dbuf *buffer_get(struct pprpcd *d, const struct owner *o, uint64_t handle)
{
	struct dbuf *b = htab_get(&d->buffers, handle);

	return b && b->owner == o ? b : NULL;
}

void buffer_ref(struct dbuf *b)
{
	b->refs++;
}

void buffer_unref(struct dbuf *b)
{
	if (--b->refs > 0)
		return;
	/* retired while held: its charge goes with the memory */
	if (b->owner)
		owner_drop_held(b->owner, b);
	if (b->m.map) {
		device_unadopt(b->dev, b->ptr, b->size);
		b->m.unmap(b->m.ctx, b->m.map, b->m.maplen, b->size);
	} else {
		device_free(b->dev, b->ptr, b->size);
	}
	b->dev->nbuffers--;
	free(b);
}

void buffer_retire(struct pprpcd *d, struct dbuf *b)
{
	if (!b->handle)
		return;
	htab_remove(&d->buffers, b->handle);
	b->handle = 0;
	/* Something still holds the memory (a graph that names it, a queued
	 * command): it stays charged to the owner until it is really freed
	 * (issue 27: BUFFER_FREE under a graph let --max-conn-mib 64 hold
	 * 480 MiB). */
	if (b->refs > 1) {
		owner_hold_buffer(b->owner, b);
	} else {
		owner_remove_buffer(b->owner, b);
		b->owner = NULL;
	}
	buffer_unref(b);
}

int buffer_region(struct pprpcd *d, const struct owner *o, uint64_t handle, uint64_t offset,
		  uint64_t size, struct dbuf **ret_b, char *err, size_t errlen)
{
	struct dbuf *b = buffer_get(d, o, handle);

	if (!b) {
		snprintf(err, errlen, "unknown buffer handle 0x%016" PRIx64, handle);
		return PPRPC_EHANDLE;
	}
	if (!kern_region_ok(b->size, offset, size)) {
		snprintf(err, errlen,
			 "region [%" PRIu64 ", +%" PRIu64 ") is outside buffer 0x%016" PRIx64 " of %" PRIu64 " bytes",
			 offset, size, handle, b->size);
		return PPRPC_ERANGE;
	}
	*ret_b = b;
	return 0;
}

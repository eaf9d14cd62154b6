/* daemon/xfer/xdev.c — the transfer part's device calls (see xdev.h). */
#include "daemon/xfer/xdev.h"

#include <stdio.h>
#include <stdlib.h>

#include "daemon/device/device.h"
#include "daemon/core/staging.h"
#include "daemon/exec/queue.h"
#include "daemon/pprpcd.h"

_Static_assert(XDEV_IPC_HANDLE == DEVICE_IPC_HANDLE, "one IPC handle size");

bool xdev_host_visible(const struct device *dev)
{
	return device_host_visible(dev);
}

bool xdev_has_ipc(const struct device *dev)
{
	return device_has_ipc(dev);
}

const char *xdev_name(const struct device *dev)
{
	return dev->name;
}

uint32_t xdev_index(const struct device *dev)
{
	return dev->index;
}

uint64_t xdev_queue_activity(const struct device *dev)
{
	return queue_activity(dev->q);
}

void xdev_queue_wake_word(struct device *dev, _Atomic uint32_t *word)
{
	queue_set_wake_word(dev->q, word);
}

bool xdev_holds_lands(const struct device *dev)
{
	return device_holds_lands(dev);
}

int xdev_land_submit(struct device *dev, struct stream *s, const volatile uint64_t *bell, uint64_t gen, void *dst,
		     const void *src, uint64_t n, void (*done)(void *arg, int status, const char *why), void *arg,
		     char *err, size_t errlen)
{
	int rc = device_land_submit(dev, s, bell, gen, dst, src, n, done, arg, err, errlen);

	if (rc == 0)
		__atomic_fetch_add(&dev->gpu_recvs, 1, __ATOMIC_RELAXED);
	return rc;
}

int xdev_land_put_submit(struct device *dev, struct stream *s, volatile uint64_t *bell, uint64_t gen, void *dst,
			 const void *src, uint64_t n, void (*done)(void *arg, int status, const char *why), void *arg,
			 char *err, size_t errlen)
{
	int rc = device_land_put_submit(dev, s, bell, gen, dst, src, n, done, arg, err, errlen);

	if (rc == 0)
		__atomic_fetch_add(&dev->gpu_sends, 1, __ATOMIC_RELAXED);
	return rc;
}

int xdev_pin_host(struct device *dev, void *ptr, uint64_t bytes, int on)
{
	return device_pin_host(dev, ptr, bytes, on);
}

int xdev_download(struct device *dev, void *dst_host, const void *src_dev, uint64_t n)
{
	return device_download(dev, dst_host, src_dev, n);
}

int xdev_upload(struct device *dev, void *dst_dev, const void *src_host, uint64_t n)
{
	return device_upload(dev, dst_dev, src_host, n);
}

int xdev_copy(struct device *dev, void *dst, const void *src, uint64_t n)
{
	return device_copy(dev, dst, src, n);
}

struct staging *xdev_ipc_pool_peek(struct device *dev, int *ret_state, const uint8_t **ret_handle)
{
	/* The worker fills the pool, then publishes ipc_state (release). */
	int st = __atomic_load_n(&dev->ipc_state, __ATOMIC_ACQUIRE);

	*ret_state = st;
	*ret_handle = st > 0 ? dev->ipc_handle : NULL;
	return st > 0 ? dev->ipc_staging : NULL;
}

int xdev_ipc_pool(struct pprpcd *d, struct device *dev, struct staging **ret_slots, const uint8_t **ret_handle)
{
	/* GPU memory is plentiful next to a boundary tensor: 1 GiB of 64 MiB
	 * slots keeps big transfers in few copies; a CPU pool is as large as
	 * the host staging ring. */
	uint64_t bytes = d->opts.ipc_pool_bytes ? d->opts.ipc_pool_bytes
			 : device_host_visible(dev) ? d->opts.staging_bytes : 1ull << 30;
	uint64_t slot = 64ull << 20, fr = 0, total = 0;
	struct staging *s;
	void *mem = NULL;

	if (dev->ipc_state) {
		if (dev->ipc_state < 0)
			return -1;
		*ret_slots = dev->ipc_staging;
		*ret_handle = dev->ipc_handle;
		return 0;
	}
	while (slot > (64u << 10) && bytes / slot < 16)
		slot /= 2;
	/* The pool is device memory like any buffer: it must leave the floor. */
	if (device_mem_info(dev, &fr, &total) == 0 && (bytes > fr || fr - bytes < dev->floor))
		snprintf(dev->ipc_why, sizeof(dev->ipc_why),
			 "a %llu MiB pool would leave less than the memory floor (%llu MiB free)",
			 (unsigned long long)(bytes >> 20), (unsigned long long)(fr >> 20));
	s = dev->ipc_why[0] ? NULL : calloc(1, sizeof(*s));
	if (!s || device_ipc_pool(dev, bytes, &mem, dev->ipc_handle, dev->ipc_why, sizeof(dev->ipc_why)) < 0 ||
	    staging_init_over(s, mem, bytes, slot) < 0) {
		if (!dev->ipc_why[0])
			snprintf(dev->ipc_why, sizeof(dev->ipc_why), "no memory for the IPC staging pool");
		if (mem)
			device_free(dev, mem, 0);
		free(s);
		__atomic_store_n(&dev->ipc_state, -1, __ATOMIC_RELEASE);
		LOG(d, LOG_WARN_, "%s: IPC sends disabled: %s", dev->name, dev->ipc_why);
		return -1;
	}
	dev->ipc_staging = s;
	dev->ipc_mem = mem;
	__atomic_store_n(&dev->ipc_state, 1, __ATOMIC_RELEASE);
	LOG(d, LOG_INFO_, "%s: IPC staging pool: %u slots of %llu MiB", dev->name, s->nslots,
	    (unsigned long long)(slot >> 20));
	*ret_slots = s;
	*ret_handle = dev->ipc_handle;
	return 0;
}

int xdev_ipc_copy(struct device *dev, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		  size_t errlen)
{
	return device_ipc_copy(dev, dst, handle, off, n, err, errlen);
}

int xdev_ipc_wait(struct device *dev, char *err, size_t errlen)
{
	return device_ipc_wait(dev, err, errlen);
}

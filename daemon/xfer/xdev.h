/*
 * daemon/xfer/xdev.h — every device call the transfer part makes, in one
 * place, so a change of the device layer (daemon/device) touches this file
 * and xdev.c only.  Worker-thread calls are marked; the rest run on the loop.
 */
#ifndef PPRPC_DAEMON_XFER_XDEV_H
#define PPRPC_DAEMON_XFER_XDEV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct device;
struct pprpcd;
struct staging;

#define XDEV_IPC_HANDLE 64      /* DEVICE_IPC_HANDLE */

bool xdev_host_visible(const struct device *dev);
bool xdev_has_ipc(const struct device *dev);
const char *xdev_name(const struct device *dev);
uint32_t xdev_index(const struct device *dev);    /* < PPRPCD_MAX_DEVICES */
/* Page-lock (on) / release host memory for dev's copies: 0 or < 0. */
/* dev's streams hold a RECV on a landing slot's bell (xdev_land_submit). */
bool xdev_holds_lands(const struct device *dev);
int xdev_pin_host(struct device *dev, void *ptr, uint64_t bytes, int on);

/* Changes whenever work arrives for dev's queue or it is kicked (any
 * thread: queue_activity). */
uint64_t xdev_queue_activity(const struct device *dev);
/* The word a command sleeps on in its exec on dev's worker (NULL: none):
 * queue_set_wake_word. */
void xdev_queue_wake_word(struct device *dev, _Atomic uint32_t *word);

/* Worker: device memory <-> host memory, and within the device. */
int xdev_download(struct device *dev, void *dst_host, const void *src_dev, uint64_t n);
int xdev_upload(struct device *dev, void *dst_dev, const void *src_host, uint64_t n);
int xdev_copy(struct device *dev, void *dst, const void *src, uint64_t n);

/* Worker: dev's IPC pool for SENDs, made on first use.  0 with its slots,
 * handle and size; or < 0 when it cannot be made (said once in the log,
 * and the device's stats say why). */
int xdev_ipc_pool(struct pprpcd *d, struct device *dev, struct staging **ret_slots, const uint8_t **ret_handle);
/* The pool if it is ready (any thread), else NULL; *ret_state: 0 not made,
 * 1 ready, -1 failed. */
struct staging *xdev_ipc_pool_peek(struct device *dev, int *ret_state, const uint8_t **ret_handle);

/* Worker: start copying n bytes at off of another process's exported pool
 * (handle) into dst; wait for the copies started. */
int xdev_ipc_copy(struct device *dev, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		  size_t errlen);
int xdev_ipc_wait(struct device *dev, char *err, size_t errlen);

/* Worker: hold stream s on dev until *bell >= gen, then copy the slot's n
 * bytes at src to dst, then done (device_land_submit); counted in the
 * device's gpu_recvs. */
struct stream;
int xdev_land_submit(struct device *dev, struct stream *s, const volatile uint64_t *bell, uint64_t gen, void *dst,
		     const void *src, uint64_t n, void (*done)(void *arg, int status, const char *why), void *arg,
		     char *err, size_t errlen);
/* Worker: once stream s on dev gets there, copy n bytes at src (device)
 * into the slot at dst and store gen in *bell, then done
 * (device_land_put_submit); counted in the device's gpu_sends. */
int xdev_land_put_submit(struct device *dev, struct stream *s, volatile uint64_t *bell, uint64_t gen, void *dst,
			 const void *src, uint64_t n, void (*done)(void *arg, int status, const char *why), void *arg,
			 char *err, size_t errlen);

#endif

/*
 * daemon/xfer/path.h — the data paths of a transfer, behind one vtable.
 *
 * A path says where a chunk's bytes wait on the source, how they get there,
 * what the PULL reply carries, and — for the IPC paths — how the
 * destination copies them out:
 *   staged    captured into a host staging slot, bytes on the link;
 *   in-place  streamed from the tensor itself, bytes on the link;
 *   cuda-ipc  captured into the GPU's IPC pool, the reply names pool and
 *             offset, the destination copies GPU to GPU;
 *   cma       the same protocol between CPU daemons of one host (cpu-ipc):
 *             the pool is host memory, the destination reads it with
 *             process_vm_readv;
 *   land      written into the destination's landing slot (land.h), one
 *             answer with no bytes.
 * The source picks a path per chunk from the mode send_sm decided; the
 * destination picks cuda-ipc or cma by its own device.  Optional operations
 * point to stubs returning PPRPC_EUNSUPP, so callers never test for NULL.
 */
#ifndef PPRPC_DAEMON_XFER_PATH_H
#define PPRPC_DAEMON_XFER_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/xfer/send_sm.h"
#include "proto/pprpc.pb-c.h"

struct device;
struct staging;
struct pprpcd;
struct xfer;

struct xpath {
	const struct xpath_ops *ops;
	struct device *dev;          /* the device the bytes come from / land in */
	struct staging *slots;       /* staged: the host ring; ipc: the device's pool */
	const uint8_t *handle;       /* ipc: the pool's handle (XDEV_IPC_HANDLE bytes) */
};

struct xpath_ops {
	const char *name;            /* for logs and statistics */
	enum xs_where where;
	/* Source, worker (optional): copy n bytes of the tensor at src into
	 * slot. */
	int (*capture)(const struct xpath *p, int slot, const void *src, uint64_t n);
	/* Source, loop: what the PULL reply for a published chunk carries:
	 * the announcement fields of pc and/or bulk bytes (*ret_bulk, *ret_n;
	 * tensor = the SEND's region). */
	void (*describe)(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor, Pprpc__PullChunk *pc,
			 const void **ret_bulk, uint64_t *ret_n);
	/* Destination, worker (optional): start copying n bytes at off of the
	 * source's pool (handle) into dst; wait for the copies started. */
	int (*copy_in)(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		       size_t errlen);
	int (*copy_wait)(const struct xpath *p, char *err, size_t errlen);
};

extern const struct xpath_ops xpath_staged_ops, xpath_inplace_ops, xpath_cuda_ipc_ops, xpath_cma_ops, xpath_land_ops;

/* The source's path for chunks kept at where (staged: the daemon's host
 * ring; pool: dev's IPC pool, which must be ready). */
void xpath_source(struct pprpcd *d, struct device *dev, enum xs_where where, struct xpath *out);
/* The destination's IPC path for a region on dev. */
void xpath_dest(struct device *dev, struct xpath *out);

/* Slots of the path.  Taking never blocks: -1 when the ring is full, and
 * the SEND then waits as a command that is not ready (its worker serves
 * other streams) until a slot comes back — a destination that stopped
 * reading must never hold a device worker. */
int xpath_slot_take(const struct xpath *p);
bool xpath_has_room(const struct xpath *p);
void xpath_slot_put(const struct xpath *p, int slot);

/* CMA, destination, loop: may the region's daemon read the pool a source
 * announced (handle) over its link to rank?  Only the pool of the process
 * at the other end of that link, the same pool for the link's life.  0, or
 * PPRPC_EAUTH with the reason (path_cma.c). */
int xpath_cma_check(struct xfer *xf, const char *rank, const uint8_t *handle, char *err, size_t errlen);
void xpath_cma_fini(struct xfer *xf);

/* Stubs for optional operations. */
int xpath_no_capture(const struct xpath *p, int slot, const void *src, uint64_t n);
int xpath_no_copy_in(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		     size_t errlen);
int xpath_no_copy_wait(const struct xpath *p, char *err, size_t errlen);
/* The pool paths' common part (path_pool.c). */
void xpath_pool_describe(const struct xpath *p, const struct xs_chunk *ch, const uint8_t *tensor,
			 Pprpc__PullChunk *pc, const void **ret_bulk, uint64_t *ret_n);
int xpath_pool_capture(const struct xpath *p, int slot, const void *src, uint64_t n);

#endif

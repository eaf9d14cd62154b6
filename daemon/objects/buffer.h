/*
 * daemon/objects/buffer.h — device buffers, each held by an owner
 * (objects/owner.h: a connection, or a fuzz target's stand-in).
 *
 * A buffer is reference-counted: its handle holds one reference, and so does
 * every in-flight use (a bulk being received into it, a reply being sent from
 * it, a queued command, a graph that names it).  BUFFER_FREE (or the owner's
 * disconnect) retires the handle at once; the memory goes back to the device
 * when the last use ends, so an in-flight write never touches freed memory.
 */
#ifndef PPRPC_DAEMON_BUFFER_H
#define PPRPC_DAEMON_BUFFER_H

#include <stddef.h>
#include <stdint.h>

struct pprpcd;
struct owner;
struct device;

struct dbuf {
	uint64_t handle;       /* 0 once retired */
	struct device *dev;
	/* NULL once retired, except while a retired buffer is still held:
	 * then the owner whose charge it still is (owner.h: held) */
	struct owner *owner;
	uint8_t *ptr;
	uint64_t size;
	uint64_t footprint;    /* size rounded to the page: charged to the owner */
	/* a model file's range mapped as the buffer (buffer_adopt), or
	 * zeros for device memory */
	struct buffer_map {
		void *map;
		uint64_t maplen;
		void *ctx;
		/* undoes the mapping when the memory goes */
		void (*unmap)(void *ctx, void *map, uint64_t maplen, uint64_t size);
		/* 0 while the file is still the one mapped, else why not */
		int (*check)(void *ctx, char *err, size_t errlen);
		/* a graph will read [off, off + len) of the buffer: read it
		 * ahead (may be NULL) */
		void (*want)(void *ctx, uint64_t off, uint64_t len);
	} m;
	int refs;
	struct dbuf *next, *prev;  /* owner's list */
};

int buffer_alloc(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t size,
		 struct dbuf **ret_b, char *err, size_t errlen);
/* buffer_alloc in halves around the memory's allocation
 * (device_alloc_raw), which may then run off the loop: begin checks the
 * owner's limits and reserves the memory under the floor (footprint in
 * *ret_fp); end registers ptr as the owner's buffer, or frees it and the
 * reservation.  A begin not followed by an end gives the reservation back
 * with device_alloc_unreserve (or device_free with the memory). */
int buffer_alloc_begin(struct owner *o, struct device *dev, uint64_t size, uint64_t *ret_fp, char *err,
		       size_t errlen);
int buffer_alloc_end(struct pprpcd *d, struct owner *o, struct device *dev, uint64_t size, uint64_t fp, void *ptr,
		     struct dbuf **ret_b, char *err, size_t errlen);
/* A buffer over size bytes at ptr that the caller mapped (map, maplen):
 * the device takes it (device_adopt), the owner is charged as for an
 * allocation but nothing is reserved under the memory floor (file pages,
 * reclaimable); the last reference releases it and calls m->unmap.  On
 * failure nothing is unmapped (the caller does). */
int buffer_adopt(struct pprpcd *d, struct owner *o, struct device *dev, void *ptr, uint64_t size,
		 const struct buffer_map *m, struct dbuf **ret_b, char *err, size_t errlen);

/* A mapped buffer's file checked (m.check): 0, or its code with why (a
 * file changed since it was mapped: its bytes are not the verified ones).
 * 0 for any other buffer.  Any thread. */
int buffer_map_check(const struct dbuf *b, char *err, size_t errlen);
/* A graph created over [off, off + len) of b: a mapped buffer reads that
 * region ahead of its first run (m.want); nothing for any other.  Any
 * thread. */
void buffer_map_want(const struct dbuf *b, uint64_t off, uint64_t len);

/* Look up a live buffer of owner o.  NULL when unknown, stale or owned
 * by someone else (indistinguishable on purpose). */
struct dbuf *buffer_get(struct pprpcd *d, const struct owner *o, uint64_t handle);
/* Retire the handle (drops the handle's reference). */
void buffer_retire(struct pprpcd *d, struct dbuf *b);
void buffer_ref(struct dbuf *b);
void buffer_unref(struct dbuf *b);

/* Resolve [offset, offset+size) of handle for o; writes a reason to err. */
int buffer_region(struct pprpcd *d, const struct owner *o, uint64_t handle, uint64_t offset,
		  uint64_t size, struct dbuf **ret_b, char *err, size_t errlen);

#endif

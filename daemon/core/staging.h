/*
 * daemon/core/staging.h — the SEND staging ring: fixed-size slots in one region
 * allocated at start.
 *
 * SEND captures the source tensor into slots when its queue reaches it, so
 * later work may overwrite the tensor at once; a slot is returned when its
 * bytes have been handed to the destination's link.  When every slot is
 * taken (the ring is full) the SEND waits — the back-pressure between a
 * fast producer and a slow consumer — as a command that is not ready, never
 * by blocking its device worker (a stopped destination would hold the
 * device for every client).  Fixed slots
 * (rather than a byte ring) keep the allocator trivial and lock-cheap and
 * let slots be freed out of order (transfers to different ranks finish in
 * any order).
 */
#ifndef PPRPC_DAEMON_STAGING_H
#define PPRPC_DAEMON_STAGING_H

#include <pthread.h>
#include <stdint.h>

struct staging {
	uint8_t *mem;
	uint64_t bytes;
	uint64_t slot_size;
	uint32_t nslots;
	uint32_t nfree;
	uint32_t *free_list;       /* stack of free slot indices */
	uint64_t high_water;       /* most slots ever in use */
	int borrowed;              /* mem belongs to the caller */
	pthread_mutex_t lock;
};

/* bytes total (>= 2 slots), slot_size the chunk of a transfer. */
int staging_init(struct staging *s, uint64_t bytes, uint64_t slot_size);
/* The same over memory the caller owns (a GPU pool): only the slots are
 * managed here, and staging_ptr gives addresses in that memory. */
int staging_init_over(struct staging *s, void *mem, uint64_t bytes, uint64_t slot_size);
void staging_fini(struct staging *s);
/* Take a slot if one is free: its index, or -1 (never blocks). */
int staging_try_get(struct staging *s);
/* Slots free now (any thread; stale as soon as it returns). */
uint32_t staging_free_slots(struct staging *s);
void staging_put(struct staging *s, int slot);
uint8_t *staging_ptr(const struct staging *s, int slot);
uint32_t staging_used(struct staging *s);

#endif

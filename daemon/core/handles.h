/*
 * daemon/core/handles.h — daemon-issued 64-bit handles.
 *
 * A handle is  kind:8 | tag:32 | slot index + 1:24.  The tag is drawn at
 * random (getrandom) each time a slot is filled, so a handle cannot be
 * guessed from another one — not from the client's own handles (the slot
 * next to its own, the same slot one generation on), nor across a daemon
 * restart — and a stale handle (a freed buffer) is refused instead of
 * reaching whatever took its slot (a new tag never equals the slot's
 * previous one).  The kind byte stops a graph handle from being used as a
 * buffer.  0 is never a valid handle.  Unguessable is not owned: callers
 * check the object's owner too (buffer_get, graph_get, h_timeline.c).
 * Used on the loop thread only.
 */
#ifndef PPRPC_DAEMON_HANDLES_H
#define PPRPC_DAEMON_HANDLES_H

#include <stdint.h>

enum handle_kind { HK_BUFFER = 1, HK_GRAPH = 2, HK_TIMELINE = 3, HK_HOST_PAGE = 4 };

/* Slots one table can hold (the 24 index bits; index + 1 is never 0). */
#define HTAB_MAX_SLOTS ((1u << 24) - 1)

struct handle_table {
	uint8_t kind;
	uint32_t cap;
	uint32_t count;
	uint32_t max;        /* most live objects allowed (<= HTAB_MAX_SLOTS) */
	void **obj;
	uint32_t *tag;       /* each slot's current (or last) tag */
	uint32_t *next_free; /* free list through unused slots */
	uint32_t free_head;  /* index + 1, 0 = empty */
	uint32_t pool[64];   /* random tags not used yet */
	uint32_t npool;
};

void htab_init(struct handle_table *t, enum handle_kind kind, uint32_t max);
void htab_fini(struct handle_table *t);
/* Returns 0 and the new handle, PPRPC_ELIMIT when full, PPRPC_ENOMEM, or
 * PPRPC_EINTERNAL when the system has no randomness to give. */
int htab_insert(struct handle_table *t, void *obj, uint64_t *ret_handle);
/* NULL when the handle is not live in this table. */
void *htab_get(const struct handle_table *t, uint64_t h);
/* Forget a live handle (no-op for an invalid one). */
void htab_remove(struct handle_table *t, uint64_t h);

#endif

/*
 * daemon/objects/handles.h — daemon-issued 64-bit handles.
 *
 * A handle is  kind:8 | generation:24 | slot index + 1:32.  The generation
 * changes each time a slot is reused, so a stale handle (a freed buffer) is
 * refused instead of reaching whatever took its slot; the kind byte stops a
 * graph handle from being used as a buffer.  0 is never a valid handle.
 * Used on the loop thread only.
 */
#ifndef PPRPC_DAEMON_HANDLES_H
#define PPRPC_DAEMON_HANDLES_H

#include <stdint.h>

enum handle_kind { HK_BUFFER = 1, HK_GRAPH = 2, HK_TIMELINE = 3 };

struct handle_table {
	uint8_t kind;
	uint32_t cap;
	uint32_t count;
	uint32_t max;        /* most live objects allowed */
	void **obj;
	uint32_t *gen;
	uint32_t *next_free; /* free list through unused slots */
	uint32_t free_head;  /* index + 1, 0 = empty */
	uint32_t gen_seed;   /* first generation of every slot (random per start) */
};

void htab_init(struct handle_table *t, enum handle_kind kind, uint32_t max);
void htab_fini(struct handle_table *t);
/* Returns 0 and the new handle, PPRPC_ELIMIT when full, PPRPC_ENOMEM. */
int htab_insert(struct handle_table *t, void *obj, uint64_t *ret_handle);
/* NULL when the handle is not live in this table. */
void *htab_get(const struct handle_table *t, uint64_t h);
/* Forget a live handle (no-op for an invalid one). */
void htab_remove(struct handle_table *t, uint64_t h);

#endif

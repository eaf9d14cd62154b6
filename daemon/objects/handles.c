/* daemon/objects/handles.c — generation-checked handle table (see handles.h). */
#include "daemon/objects/handles.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "pprpc/types.h"

#define GEN_MASK 0xffffffu

void htab_init(struct handle_table *t, enum handle_kind kind, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->kind = (uint8_t)kind;
	t->max = max;
	/* Generations start at a random value per daemon start, so a handle
	 * kept by a client across a daemon restart is refused (with odds of
	 * 1 in 2^24 against) instead of naming the new daemon's object in the
	 * same slot. */
	if (getrandom(&t->gen_seed, sizeof(t->gen_seed), GRND_NONBLOCK) != (ssize_t)sizeof(t->gen_seed)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		t->gen_seed = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec * 2654435761u;
	}
	t->gen_seed &= GEN_MASK;
	if (!t->gen_seed)
		t->gen_seed = 1;
}

void htab_fini(struct handle_table *t)
{
	free(t->obj);
	free(t->gen);
	free(t->next_free);
	memset(t, 0, sizeof(*t));
}

static int grow(struct handle_table *t)
{
	uint64_t ncap = t->cap ? (uint64_t)t->cap * 2 : 64;
	void **o;
	uint32_t *g, *nf;

	if (ncap > t->max)
		ncap = t->max;
	if (ncap <= t->cap)
		return PPRPC_ELIMIT;
	o = realloc(t->obj, ncap * sizeof(*o));
	if (!o)
		return PPRPC_ENOMEM;
	t->obj = o;
	g = realloc(t->gen, ncap * sizeof(*g));
	if (!g)
		return PPRPC_ENOMEM;
	t->gen = g;
	nf = realloc(t->next_free, ncap * sizeof(*nf));
	if (!nf)
		return PPRPC_ENOMEM;
	t->next_free = nf;
	for (uint32_t i = t->cap; i < (uint32_t)ncap; i++) {
		t->obj[i] = NULL;
		t->gen[i] = t->gen_seed;
		t->next_free[i] = t->free_head;
		t->free_head = i + 1;
	}
	t->cap = (uint32_t)ncap;
	return 0;
}

int htab_insert(struct handle_table *t, void *obj, uint64_t *ret_handle)
{
	uint32_t i;
	int rc;

	if (t->count >= t->max)
		return PPRPC_ELIMIT;
	if (!t->free_head && (rc = grow(t)) < 0)
		return rc;
	i = t->free_head - 1;
	t->free_head = t->next_free[i];
	t->obj[i] = obj;
	t->count++;
	*ret_handle = ((uint64_t)t->kind << 56) | ((uint64_t)(t->gen[i] & GEN_MASK) << 32) |
		      (uint64_t)(i + 1);
	return 0;
}

static int slot_of(const struct handle_table *t, uint64_t h, uint32_t *ret_i)
{
	uint32_t idx = (uint32_t)h;

	if ((h >> 56) != t->kind || idx == 0 || idx > t->cap)
		return -1;
	if (((h >> 32) & GEN_MASK) != (t->gen[idx - 1] & GEN_MASK) || !t->obj[idx - 1])
		return -1;
	*ret_i = idx - 1;
	return 0;
}

void *htab_get(const struct handle_table *t, uint64_t h)
{
	uint32_t i;

	return slot_of(t, h, &i) < 0 ? NULL : t->obj[i];
}

void htab_remove(struct handle_table *t, uint64_t h)
{
	uint32_t i;

	if (slot_of(t, h, &i) < 0)
		return;
	t->obj[i] = NULL;
	t->gen[i]++;
	if ((t->gen[i] & GEN_MASK) == 0)
		t->gen[i] = 1;
	t->next_free[i] = t->free_head;
	t->free_head = i + 1;
	t->count--;
}

/* daemon/core/handles.c — tagged handle table (see handles.h). */
#include "daemon/core/handles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pprpc/types.h"

#define IDX_BITS 24
#define IDX_MASK ((1u << IDX_BITS) - 1)

void htab_init(struct handle_table *t, enum handle_kind kind, uint32_t max)
{
	memset(t, 0, sizeof(*t));
	t->kind = (uint8_t)kind;
	t->max = max < HTAB_MAX_SLOTS ? max : HTAB_MAX_SLOTS;
}

void htab_fini(struct handle_table *t)
{
	free(t->obj);
	free(t->tag);
	free(t->next_free);
	memset(t, 0, sizeof(*t));
}

/* A fresh random tag other than avoid.  Drawn in batches: one getrandom
 * call per 64 handles.  getrandom blocks only until the kernel's pool is
 * first initialised (early boot), never afterwards. */
static int draw_tag(struct handle_table *t, uint32_t avoid, uint32_t *ret)
{
	for (;;) {
		if (!t->npool) {
			ssize_t n = getrandom(t->pool, sizeof(t->pool), 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n != (ssize_t)sizeof(t->pool))
				return PPRPC_EINTERNAL;
			t->npool = sizeof(t->pool) / sizeof(t->pool[0]);
		}
		*ret = t->pool[--t->npool];
		if (*ret != avoid)
			return 0;
	}
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
	g = realloc(t->tag, ncap * sizeof(*g));
	if (!g)
		return PPRPC_ENOMEM;
	t->tag = g;
	nf = realloc(t->next_free, ncap * sizeof(*nf));
	if (!nf)
		return PPRPC_ENOMEM;
	t->next_free = nf;
	/* Pushed in reverse so the lowest new slot is used first. */
	for (uint32_t i = (uint32_t)ncap; i-- > t->cap;) {
		t->obj[i] = NULL;
		t->tag[i] = 0;
		t->next_free[i] = t->free_head;
		t->free_head = i + 1;
	}
	t->cap = (uint32_t)ncap;
	return 0;
}

int htab_insert(struct handle_table *t, void *obj, uint64_t *ret_handle)
{
	uint32_t i, tag;
	int rc;

	if (t->count >= t->max)
		return PPRPC_ELIMIT;
	if (!t->free_head && (rc = grow(t)) < 0)
		return rc;
	i = t->free_head - 1;
	rc = draw_tag(t, t->tag[i], &tag);
	if (rc < 0)
		return rc;
	t->free_head = t->next_free[i];
	t->obj[i] = obj;
	t->tag[i] = tag;
	t->count++;
	*ret_handle = ((uint64_t)t->kind << 56) | ((uint64_t)tag << IDX_BITS) | (uint64_t)(i + 1);
	return 0;
}

static int slot_of(const struct handle_table *t, uint64_t h, uint32_t *ret_i)
{
	uint32_t idx = (uint32_t)h & IDX_MASK;

	if ((h >> 56) != t->kind || idx == 0 || idx > t->cap)
		return -1;
	if ((uint32_t)(h >> IDX_BITS) != t->tag[idx - 1] || !t->obj[idx - 1])
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
	/* The tag stays: the next one drawn for this slot must differ. */
	t->obj[i] = NULL;
	t->next_free[i] = t->free_head;
	t->free_head = i + 1;
	t->count--;
}

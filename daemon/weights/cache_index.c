/*
 * daemon/weights/cache_index.c — the cache entries the rank knows of: a
 * hash table by key (keys are SHA-256 outputs, so their first bytes are
 * the hash) and a list in order of use, so that eviction takes the least
 * recently used entry without sorting.  The caller holds w->lock.
 */
#include "daemon/weights/wsrc_impl.h"

#include <stdlib.h>
#include <string.h>

static size_t bucket(const struct cindex *c, const uint8_t key[32])
{
	uint64_t h;

	memcpy(&h, key, sizeof(h));
	return (size_t)(h & (c->nbuckets - 1));
}

struct centry *cidx_find(struct cindex *c, const uint8_t key[32])
{
	struct centry *e;

	if (!c->nbuckets)
		return NULL;
	for (e = c->buckets[bucket(c, key)]; e; e = e->hnext)
		if (!memcmp(e->key, key, 32))
			return e;
	return NULL;
}

/* Double the table when it holds as many entries as buckets. */
static int grow(struct cindex *c)
{
	size_t n = c->nbuckets ? c->nbuckets * 2 : 64, i;
	struct centry **b = calloc(n, sizeof(*b));
	struct centry *e, *next;
	struct cindex nc;

	if (!b)
		return -1;
	nc.buckets = b;
	nc.nbuckets = n;
	for (i = 0; i < c->nbuckets; i++) {
		for (e = c->buckets[i]; e; e = next) {
			size_t k = bucket(&nc, e->key);

			next = e->hnext;
			e->hnext = b[k];
			b[k] = e;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
	return 0;
}

static void lru_unlink(struct cindex *c, struct centry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->lru_head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->lru_tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_append(struct cindex *c, struct centry *e)
{
	e->prev = c->lru_tail;
	e->next = NULL;
	if (c->lru_tail)
		c->lru_tail->next = e;
	else
		c->lru_head = e;
	c->lru_tail = e;
}

struct centry *cidx_add(struct cindex *c, const uint8_t key[32], uint64_t bytes)
{
	struct centry *e;
	size_t k;

	if (c->count >= c->nbuckets && grow(c) < 0 && !c->nbuckets)
		return NULL;
	if (!(e = calloc(1, sizeof(*e))))
		return NULL;
	memcpy(e->key, key, 32);
	e->bytes = bytes;
	k = bucket(c, key);
	e->hnext = c->buckets[k];
	c->buckets[k] = e;
	lru_append(c, e);
	c->count++;
	return e;
}

void cidx_touch(struct cindex *c, struct centry *e)
{
	lru_unlink(c, e);
	lru_append(c, e);
}

void cidx_remove(struct cindex *c, struct centry *e)
{
	struct centry **pp = &c->buckets[bucket(c, e->key)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	c->count--;
	free(e);
}

void cidx_free(struct cindex *c)
{
	struct centry *e, *next;

	for (e = c->lru_head; e; e = next) {
		next = e->next;
		free(e);
	}
	free(c->buckets);
	memset(c, 0, sizeof(*c));
}

/*
 * ggml-pprpc/cache.c — a bounded map from byte strings to a value, least
 * recently used first out.
 *
 * Keys are serializations (a whole graph, or one op with its sources); a
 * hit needs the bytes to be equal, not only the hash, because a false hit
 * would run another graph than the one asked for.  Bounded by entries and
 * by key bytes; leaving entries go through the evict callback (the graph
 * cache frees the daemon's graph there).
 */
#include <stdlib.h>
#include <string.h>

#include "cache.h"

struct pg_cache {
	struct pg_cache_entry **bucket;
	size_t nbucket;          /* power of two */
	struct pg_cache_entry *head, *tail;  /* most / least recent */
	size_t n, max_n;
	size_t bytes, max_bytes;
	pg_cache_evict_fn evict;
	void *arg;
};

/* Test seam: tests/unit/test_pg_cache.c includes this file with a mask that
 * can make every key hash alike, to prove hits compare the bytes. */
#ifndef PG_CACHE_TEST_HASH
#define PG_CACHE_TEST_HASH(h) (h)
#endif

/* FNV-1a over 8-byte words, then the tail: graphs are hundreds of KiB and
 * hashed on every graph_compute. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return PG_CACHE_TEST_HASH(h ^ (h >> 32) ^ n);
}

struct pg_cache *pg_cache_new(size_t max_entries, size_t max_bytes, pg_cache_evict_fn evict, void *arg)
{
	struct pg_cache *c = calloc(1, sizeof(*c));
	size_t nb = 64;

	if (!c)
		return NULL;
	while (nb < max_entries && nb < (1u << 20))
		nb <<= 1;
	c->bucket = calloc(nb, sizeof(*c->bucket));
	if (!c->bucket) {
		free(c);
		return NULL;
	}
	c->nbucket = nb;
	c->max_n = max_entries ? max_entries : 1;
	c->max_bytes = max_bytes;
	c->evict = evict;
	c->arg = arg;
	return c;
}

static void lru_unlink(struct pg_cache *c, struct pg_cache_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct pg_cache *c, struct pg_cache_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void remove_entry(struct pg_cache *c, struct pg_cache_entry *e, int call_evict)
{
	struct pg_cache_entry **pp = &c->bucket[e->hash & (c->nbucket - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	c->n--;
	c->bytes -= e->klen;
	if (call_evict && c->evict)
		c->evict(c->arg, e);
	free(e->bufs);
	free(e);
}

void pg_cache_free(struct pg_cache *c)
{
	if (!c)
		return;
	while (c->tail)
		remove_entry(c, c->tail, 1);
	free(c->bucket);
	free(c);
}

struct pg_cache_entry *pg_cache_find(struct pg_cache *c, const uint8_t *key, size_t klen)
{
	uint64_t h = hash_bytes(key, klen);
	struct pg_cache_entry *e;

	for (e = c->bucket[h & (c->nbucket - 1)]; e; e = e->hnext) {
		if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
			pg_cache_touch(c, e);
			return e;
		}
	}
	return NULL;
}

void pg_cache_touch(struct pg_cache *c, struct pg_cache_entry *e)
{
	lru_unlink(c, e);
	lru_push_front(c, e);
}

struct pg_cache_entry *pg_cache_insert(struct pg_cache *c, const uint8_t *key, size_t klen, uint64_t value)
{
	struct pg_cache_entry *e = malloc(sizeof(*e) + klen);
	size_t b;

	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->hash = hash_bytes(key, klen);
	e->klen = klen;
	e->value = value;
	memcpy(e->key, key, klen);
	/* make room first: the new entry itself is never the one evicted */
	while (c->n > 0 && (c->n + 1 > c->max_n || (c->max_bytes && c->bytes + klen > c->max_bytes)))
		remove_entry(c, c->tail, 1);
	b = e->hash & (c->nbucket - 1);
	e->hnext = c->bucket[b];
	c->bucket[b] = e;
	lru_push_front(c, e);
	c->n++;
	c->bytes += klen;
	return e;
}

void pg_cache_evict_if(struct pg_cache *c, int (*pred)(void *arg, const struct pg_cache_entry *e), void *arg)
{
	struct pg_cache_entry *e = c->head, *next;

	for (; e; e = next) {
		next = e->next;
		if (pred(arg, e))
			remove_entry(c, e, 1);
	}
}

size_t pg_cache_count(const struct pg_cache *c)
{
	return c ? c->n : 0;
}

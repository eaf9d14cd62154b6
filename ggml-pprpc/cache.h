/*
 * ggml-pprpc/cache.h — a bounded map from byte strings to a value, least
 * recently used first out (cache.c).  The plugin keys its graph, supports_op
 * and alloc-size caches by serializations; no ggml in here, so the unit test
 * (tests/unit/test_pg_cache.c) builds without it.
 */
#ifndef PPRPC_GGML_CACHE_H
#define PPRPC_GGML_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct pg_cache;

struct pg_cache_entry {
	struct pg_cache_entry *hnext;        /* bucket chain */
	struct pg_cache_entry *prev, *next;  /* LRU list, most recent first */
	uint64_t hash;
	size_t klen;
	uint64_t value;
	uint64_t *bufs;                      /* graphs: buffers the graph uses (malloc'ed,
					      * freed with the entry) */
	size_t nbufs;
	void *aux;                           /* graphs: a create whose reply is to come
					      * (graphs.c), settled before the entry goes */
	uint8_t key[];
};

/* Called for every entry leaving the cache (the bounds, evict_if, free),
 * before it is freed: the graph cache sends GRAPH_FREE there. */
typedef void (*pg_cache_evict_fn)(void *arg, struct pg_cache_entry *e);

struct pg_cache *pg_cache_new(size_t max_entries, size_t max_bytes, pg_cache_evict_fn evict, void *arg);
void pg_cache_free(struct pg_cache *c);     /* evicts every entry first */
/* The entry with exactly these key bytes (compared in full, not only the
 * hash), made most recent; NULL if none. */
struct pg_cache_entry *pg_cache_find(struct pg_cache *c, const uint8_t *key, size_t klen);
/* Insert (the caller checked it is absent); the least recent entries are
 * evicted beyond the bounds.  NULL without memory. */
/* Make e the most recently used (found by other means than its key). */
void pg_cache_touch(struct pg_cache *c, struct pg_cache_entry *e);
struct pg_cache_entry *pg_cache_insert(struct pg_cache *c, const uint8_t *key, size_t klen, uint64_t value);
/* Evict every entry for which pred(arg, e) is true. */
void pg_cache_evict_if(struct pg_cache *c, int (*pred)(void *arg, const struct pg_cache_entry *e), void *arg);
size_t pg_cache_count(const struct pg_cache *c);

#endif

/*
 * tests/unit/test_pg_cache.c — the plugin's byte-keyed LRU map
 * (ggml-pprpc/cache.c, built in here): a hit needs equal bytes, not an
 * equal hash (every hash forced equal: each key still finds only itself); the
 * least recent entry leaves first, through the evict callback, at the entry
 * bound and at the byte bound; evict_if and free evict what they remove.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the code under test, with every hash forced to 0 while collide is set */
static int collide;
#define PG_CACHE_TEST_HASH(h) (collide ? 0 : (h))
#include "ggml-pprpc/cache.c"

struct evlog {
	int n;
	uint64_t values[64];
};

static void on_evict(void *arg, struct pg_cache_entry *e)
{
	struct evlog *l = arg;

	if (l->n < 64)
		l->values[l->n] = e->value;
	l->n++;
}

static void key_of(uint8_t *k, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		k[i] = (uint8_t)(seed * 31 + i);
}

static void test_exact_bytes(void **state)
{
	struct pg_cache *c = pg_cache_new(16, 0, NULL, NULL);
	uint8_t a[300], b[300];

	(void)state;
	key_of(a, sizeof(a), 1);
	memcpy(b, a, sizeof(b));
	assert_non_null(pg_cache_insert(c, a, sizeof(a), 42));
	assert_int_equal(pg_cache_find(c, b, sizeof(b))->value, 42);
	/* one byte different anywhere: no hit, first, middle and last */
	for (size_t at = 0; at < sizeof(b); at += 149) {
		b[at] ^= 1;
		assert_null(pg_cache_find(c, b, sizeof(b)));
		b[at] ^= 1;
	}
	b[299] ^= 0x80;
	assert_null(pg_cache_find(c, b, sizeof(b)));
	/* a prefix is another key */
	assert_null(pg_cache_find(c, a, sizeof(a) - 1));
	pg_cache_free(c);
}

/* Every key with the same hash (and so the same bucket): a hit still needs
 * the same bytes, and each key finds its own entry. */
static void test_collisions(void **state)
{
	struct pg_cache *c;
	uint8_t k[20][24];

	(void)state;
	collide = 1;
	c = pg_cache_new(64, 0, NULL, NULL);
	for (int i = 0; i < 20; i++) {
		key_of(k[i], sizeof(k[i]), (uint8_t)i);
		assert_null(pg_cache_find(c, k[i], sizeof(k[i])));
		assert_non_null(pg_cache_insert(c, k[i], sizeof(k[i]), (uint64_t)(1000 + i)));
	}
	for (int i = 19; i >= 0; i--)
		assert_int_equal(pg_cache_find(c, k[i], sizeof(k[i]))->value, (uint64_t)(1000 + i));
	k[5][23] ^= 1;
	assert_null(pg_cache_find(c, k[5], sizeof(k[5])));
	pg_cache_free(c);
	collide = 0;
}

static void test_lru_entries(void **state)
{
	struct evlog l = { 0 };
	struct pg_cache *c = pg_cache_new(3, 0, on_evict, &l);
	uint8_t k[5][8];

	(void)state;
	for (int i = 0; i < 5; i++)
		key_of(k[i], 8, (uint8_t)i);
	pg_cache_insert(c, k[0], 8, 100);
	pg_cache_insert(c, k[1], 8, 101);
	pg_cache_insert(c, k[2], 8, 102);
	/* touch 0: now 1 is the least recent */
	assert_non_null(pg_cache_find(c, k[0], 8));
	pg_cache_insert(c, k[3], 8, 103);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.values[0], 101);
	assert_null(pg_cache_find(c, k[1], 8));
	pg_cache_insert(c, k[4], 8, 104);
	assert_int_equal(l.n, 2);
	assert_int_equal(l.values[1], 102);
	assert_int_equal(pg_cache_count(c), 3);
	pg_cache_free(c);
	/* free evicts the rest, each once */
	assert_int_equal(l.n, 5);
}

static void test_byte_bound(void **state)
{
	struct evlog l = { 0 };
	struct pg_cache *c = pg_cache_new(100, 250, on_evict, &l);
	uint8_t k[4][100];

	(void)state;
	for (int i = 0; i < 4; i++)
		key_of(k[i], 100, (uint8_t)(i + 7));
	pg_cache_insert(c, k[0], 100, 0);
	pg_cache_insert(c, k[1], 100, 1);
	assert_int_equal(l.n, 0);
	pg_cache_insert(c, k[2], 100, 2);    /* 300 > 250: the oldest goes */
	assert_int_equal(l.n, 1);
	assert_int_equal(l.values[0], 0);
	assert_int_equal(pg_cache_count(c), 2);
	/* an entry larger than the bound still gets in, alone */
	{
		uint8_t big[400];

		key_of(big, sizeof(big), 99);
		assert_non_null(pg_cache_insert(c, big, sizeof(big), 9));
		assert_int_equal(pg_cache_count(c), 1);
		assert_int_equal(pg_cache_find(c, big, sizeof(big))->value, 9);
	}
	pg_cache_free(c);
	assert_int_equal(l.n, 4);
}

static int odd(void *arg, const struct pg_cache_entry *e)
{
	(void)arg;
	return (int)(e->value & 1);
}

static void test_evict_if(void **state)
{
	struct evlog l = { 0 };
	struct pg_cache *c = pg_cache_new(64, 0, on_evict, &l);
	uint8_t k[10][4];

	(void)state;
	for (int i = 0; i < 10; i++) {
		key_of(k[i], 4, (uint8_t)i);
		pg_cache_insert(c, k[i], 4, (uint64_t)i);
	}
	pg_cache_evict_if(c, odd, NULL);
	assert_int_equal(l.n, 5);
	assert_int_equal(pg_cache_count(c), 5);
	for (int i = 0; i < 10; i++) {
		struct pg_cache_entry *e = pg_cache_find(c, k[i], 4);

		if (i & 1)
			assert_null(e);
		else
			assert_int_equal(e->value, (uint64_t)i);
	}
	/* entries own their buffer list */
	{
		struct pg_cache_entry *e = pg_cache_find(c, k[0], 4);

		e->bufs = malloc(3 * sizeof(*e->bufs));
		e->nbufs = 3;
	}
	pg_cache_free(c);
	assert_int_equal(l.n, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_bytes),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_lru_entries),
		cmocka_unit_test(test_byte_bound),
		cmocka_unit_test(test_evict_if),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

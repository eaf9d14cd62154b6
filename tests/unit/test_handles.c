/*
 * tests/unit/test_handles.c — the tagged handle table: what a
 * handle encodes, and every way a handle from the wire can be wrong.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>

#include "daemon/core/handles.h"
#include "pprpc/types.h"

static int objs[300];

static void test_insert_get_remove(void **state)
{
	struct handle_table t;
	uint64_t h[3];

	(void)state;
	htab_init(&t, HK_BUFFER, 100);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(htab_insert(&t, &objs[i], &h[i]), 0);
		assert_true(h[i] != 0);
		/* kind in the top byte */
		assert_int_equal(h[i] >> 56, HK_BUFFER);
	}
	assert_true(h[0] != h[1] && h[1] != h[2] && h[0] != h[2]);
	assert_int_equal(t.count, 3);
	for (int i = 0; i < 3; i++)
		assert_ptr_equal(htab_get(&t, h[i]), &objs[i]);

	htab_remove(&t, h[1]);
	assert_int_equal(t.count, 2);
	assert_null(htab_get(&t, h[1]));
	assert_ptr_equal(htab_get(&t, h[0]), &objs[0]);
	assert_ptr_equal(htab_get(&t, h[2]), &objs[2]);
	/* removing twice, or something invalid, is a no-op */
	htab_remove(&t, h[1]);
	htab_remove(&t, 0);
	htab_remove(&t, UINT64_MAX);
	assert_int_equal(t.count, 2);
	htab_fini(&t);
}

static void test_stale_after_remove(void **state)
{
	struct handle_table t;
	uint64_t h1, h2;

	(void)state;
	htab_init(&t, HK_BUFFER, 100);
	assert_int_equal(htab_insert(&t, &objs[0], &h1), 0);
	htab_remove(&t, h1);
	/* the slot is reused for the next object ... */
	assert_int_equal(htab_insert(&t, &objs[1], &h2), 0);
	assert_int_equal((uint32_t)h2 & 0xffffff, (uint32_t)h1 & 0xffffff);
	/* ... but with a new generation: the old handle does not reach it */
	assert_true(h2 != h1);
	assert_null(htab_get(&t, h1));
	assert_ptr_equal(htab_get(&t, h2), &objs[1]);
	/* and removing through the stale handle does nothing */
	htab_remove(&t, h1);
	assert_ptr_equal(htab_get(&t, h2), &objs[1]);
	assert_int_equal(t.count, 1);
	htab_fini(&t);
}

static void test_slot_reuse_many_generations(void **state)
{
	struct handle_table t;
	uint64_t prev = 0, h;

	(void)state;
	htab_init(&t, HK_GRAPH, 1);
	/* a single slot recycled many times never repeats a recent handle */
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(htab_insert(&t, &objs[i % 300], &h), 0);
		assert_true(h != prev);
		assert_ptr_equal(htab_get(&t, h), &objs[i % 300]);
		if (prev)
			assert_null(htab_get(&t, prev));
		htab_remove(&t, h);
		prev = h;
	}
	htab_fini(&t);
}

/* Handles are not predictable from each other (issue 19.3): each fill of
 * a slot draws a random 32-bit tag, so neither the next slot's handle nor
 * the same slot's next handle follows from one a client holds. */
static void test_tags_unpredictable(void **state)
{
	enum { N = 64, R = 1000 };
	struct handle_table t;
	uint64_t h[N], prev, cur;
	uint32_t tags[R];
	int distinct = 0;

	(void)state;
	htab_init(&t, HK_TIMELINE, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(htab_insert(&t, &objs[i], &h[i]), 0);
	/* Neighbouring slots: all tags differ (2^-20 odds of a collision). */
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			assert_true((uint32_t)(h[i] >> 24) != (uint32_t)(h[j] >> 24));
	/* One slot refilled R times: never its previous tag, and nearly all
	 * different (a counter would make them consecutive). */
	prev = h[0];
	for (int r = 0; r < R; r++) {
		htab_remove(&t, prev);
		assert_int_equal(htab_insert(&t, &objs[0], &cur), 0);
		assert_int_equal((uint32_t)cur & 0xffffff, (uint32_t)h[0] & 0xffffff);
		assert_true((uint32_t)(cur >> 24) != (uint32_t)(prev >> 24));
		assert_true((uint32_t)(cur >> 24) != (uint32_t)(prev >> 24) + 1);
		tags[r] = (uint32_t)(cur >> 24);
		prev = cur;
	}
	for (int r = 0; r < R; r++) {
		int seen = 0;

		for (int q = 0; q < r && !seen; q++)
			seen = tags[q] == tags[r];
		distinct += !seen;
	}
	assert_true(distinct >= R - 2);
	htab_fini(&t);
}

static void test_wrong_kind(void **state)
{
	struct handle_table bufs, graphs;
	uint64_t hb, hg;

	(void)state;
	htab_init(&bufs, HK_BUFFER, 10);
	htab_init(&graphs, HK_GRAPH, 10);
	assert_int_equal(htab_insert(&bufs, &objs[0], &hb), 0);
	assert_int_equal(htab_insert(&graphs, &objs[1], &hg), 0);
	/* the same slot and tag by hand: only the kind differs */
	graphs.tag[((uint32_t)hg & 0xffffff) - 1] = (uint32_t)(hb >> 24);
	hg = (hb & 0x00ffffffffffffffull) | ((uint64_t)HK_GRAPH << 56);
	assert_ptr_equal(htab_get(&graphs, hg), &objs[1]);
	assert_true((hb & 0x00ffffffffffffffull) == (hg & 0x00ffffffffffffffull));
	assert_null(htab_get(&bufs, hg));
	assert_null(htab_get(&graphs, hb));
	htab_remove(&bufs, hg);
	assert_ptr_equal(htab_get(&bufs, hb), &objs[0]);
	/* the buffer handle with the kind byte changed by hand */
	assert_null(htab_get(&bufs, (hb & 0x00ffffffffffffffull) | ((uint64_t)HK_TIMELINE << 56)));
	assert_null(htab_get(&bufs, hb & 0x00ffffffffffffffull));
	htab_fini(&bufs);
	htab_fini(&graphs);
}

/* Two daemon starts (two tables) hand out different first handles, so a
 * handle kept across a restart is refused by the new daemon. */
static void test_restart_changes_generation(void **state)
{
	struct handle_table a, b;
	uint64_t ha, hb;

	(void)state;
	htab_init(&a, HK_BUFFER, 10);
	htab_init(&b, HK_BUFFER, 10);
	assert_int_equal(htab_insert(&a, &objs[0], &ha), 0);
	assert_int_equal(htab_insert(&b, &objs[0], &hb), 0);
	assert_true(ha != hb); /* 1 in 2^32 that the random tags agree */
	assert_null(htab_get(&b, ha));
	htab_fini(&a);
	htab_fini(&b);
}

static void test_zero_and_out_of_range(void **state)
{
	struct handle_table t;
	uint64_t h;

	(void)state;
	htab_init(&t, HK_BUFFER, 1000);
	/* empty table: nothing is valid, and nothing is read from NULL arrays */
	assert_null(htab_get(&t, 0));
	assert_null(htab_get(&t, ((uint64_t)HK_BUFFER << 56) | (1ull << 32) | 1));
	assert_int_equal(htab_insert(&t, &objs[0], &h), 0);
	assert_null(htab_get(&t, 0));
	/* index 0 with the right kind and tag */
	assert_null(htab_get(&t, h & ~0xffffffull));
	/* index just past the capacity, and far past it */
	assert_null(htab_get(&t, (h & ~0xffffffull) | (t.cap + 1)));
	assert_null(htab_get(&t, (h & ~0xffffffull) | 0xffffffull));
	/* an index inside the capacity but never handed out */
	assert_null(htab_get(&t, (h & ~0xffffffull) | 2));
	/* wrong tag on a live slot */
	assert_null(htab_get(&t, h ^ (1ull << 32)));
	assert_null(htab_get(&t, h | (0xffffffull << 32)));
	assert_ptr_equal(htab_get(&t, h), &objs[0]);
	htab_fini(&t);
}

static void test_limit(void **state)
{
	struct handle_table t;
	uint64_t h[200], extra;

	(void)state;
	/* 150 is past the first growth (64) and not a power of two */
	htab_init(&t, HK_BUFFER, 150);
	for (int i = 0; i < 150; i++)
		assert_int_equal(htab_insert(&t, &objs[i], &h[i]), 0);
	assert_int_equal(t.count, 150);
	assert_true(t.cap <= 150);
	assert_int_equal(htab_insert(&t, &objs[150], &extra), PPRPC_ELIMIT);
	for (int i = 0; i < 150; i++)
		assert_ptr_equal(htab_get(&t, h[i]), &objs[i]);
	/* one freed: one more fits, and it reuses a slot with a new handle */
	htab_remove(&t, h[42]);
	assert_int_equal(htab_insert(&t, &objs[151], &extra), 0);
	assert_true(extra != h[42]);
	assert_null(htab_get(&t, h[42]));
	assert_ptr_equal(htab_get(&t, extra), &objs[151]);
	assert_int_equal(htab_insert(&t, &objs[152], &extra), PPRPC_ELIMIT);
	htab_fini(&t);

	/* max 0: nothing ever */
	htab_init(&t, HK_BUFFER, 0);
	assert_int_equal(htab_insert(&t, &objs[0], &extra), PPRPC_ELIMIT);
	assert_null(htab_get(&t, 0));
	htab_fini(&t);
}

static void test_ret_handle_untouched_on_failure(void **state)
{
	struct handle_table t;
	uint64_t h = 0x1234;

	(void)state;
	htab_init(&t, HK_BUFFER, 0);
	assert_int_equal(htab_insert(&t, &objs[0], &h), PPRPC_ELIMIT);
	assert_int_equal(h, 0x1234);
	htab_fini(&t);
}

static void test_many_unique(void **state)
{
	enum { N = 5000 };
	struct handle_table t;
	uint64_t *h = calloc(N, sizeof(*h));

	(void)state;
	assert_non_null(h);
	htab_init(&t, HK_BUFFER, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(htab_insert(&t, (void *)(uintptr_t)(i + 1), &h[i]), 0);
	/* remove every other one, then re-add: all handles distinct, all valid */
	for (int i = 0; i < N; i += 2)
		htab_remove(&t, h[i]);
	for (int i = 1; i < N; i += 2)
		assert_ptr_equal(htab_get(&t, h[i]), (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < N; i += 2) {
		uint64_t old = h[i];

		assert_int_equal(htab_insert(&t, (void *)(uintptr_t)(i + 1), &h[i]), 0);
		assert_null(htab_get(&t, old));
	}
	for (int i = 0; i < N; i++)
		assert_ptr_equal(htab_get(&t, h[i]), (void *)(uintptr_t)(i + 1));
	assert_int_equal(t.count, N);
	htab_fini(&t);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_insert_get_remove),
		cmocka_unit_test(test_stale_after_remove),
		cmocka_unit_test(test_slot_reuse_many_generations),
		cmocka_unit_test(test_tags_unpredictable),
		cmocka_unit_test(test_wrong_kind),
		cmocka_unit_test(test_restart_changes_generation),
		cmocka_unit_test(test_zero_and_out_of_range),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_ret_handle_untouched_on_failure),
		cmocka_unit_test(test_many_unique),
	};

	return cmocka_run_group_tests_name("handles", tests, NULL, NULL);
}

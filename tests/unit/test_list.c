/*
 * tests/unit/test_list.c — the shared command-line list parsers
 * (util/list.h) and the hash/PRNG helpers (util/hash.h) against
 * reference values (splitmix64's published sequence).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "util/hash.h"
#include "util/list.h"

static void test_split(void **state)
{
	char out[3][LIST_ITEM_LEN];

	(void)state;
	assert_int_equal(list_split("127.0.0.1:1,[::1]:2", out, 3), 2);
	assert_string_equal(out[0], "127.0.0.1:1");
	assert_string_equal(out[1], "[::1]:2");
	/* empty entries are skipped, too many is an error */
	assert_int_equal(list_split(",cpu,,cuda:0,", out, 3), 2);
	assert_string_equal(out[1], "cuda:0");
	assert_int_equal(list_split("a,b,c,d", out, 3), -1);
	assert_int_equal(list_split("", out, 3), 0);
}

static void test_ints(void **state)
{
	struct int_list l = { { 0 }, 0 }, keep;

	(void)state;
	assert_int_equal(list_ints("2048, 4096 ,8192", &l, 1, 1 << 20), 3);
	assert_int_equal(l.n, 3);
	assert_true(l.v[0] == 2048 && l.v[1] == 4096 && l.v[2] == 8192);
	assert_int_equal(list_ints("-3", &l, -5, 5), 1);
	assert_true(l.v[0] == -3);
	keep = l;
	/* every refusal leaves the list as it was */
	const char *bad[] = { "", ",", "1,", ",1", "1,,2", "1 2", "12x", "0", "9999999", "1,99999999999999999999" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (list_ints(bad[i], &l, 1, 1 << 20) != -1)
			fail_msg("list_ints(\"%s\") accepted", bad[i]);
		assert_memory_equal(&l, &keep, sizeof(l));
	}
	assert_int_equal(list_ints("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", &l, 1, 100), INT_LIST_MAX);
	assert_int_equal(list_ints("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", &l, 1, 100), -1);
}

static void test_hash(void **state)
{
	uint64_t s = 0;

	(void)state;
	/* FNV-1a 64 with the tree's historical offset (util/hash.h) */
	assert_true(fnv1a64("", 0) == 0x14650fb0739d0383ull);
	assert_true(fnv1a64("a", 1) == 0x44bd8ad473cd9906ull);
	/* splitmix64 from state 0: the reference sequence's first two values */
	assert_true(splitmix64_next(&s) == 0xe220a8397b1dcdafull);
	assert_true(splitmix64_next(&s) == 0x6e789e6aa1b965f4ull);
	assert_true(splitmix64(0) == 0xe220a8397b1dcdafull);
	assert_true(unit_double(~0ull) < 1.0 && unit_double(0) == 0.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_ints),
		cmocka_unit_test(test_hash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

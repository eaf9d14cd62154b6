/* Unit tests: the cluster file (ranks of a pipeline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pprpc.h"

static void test_parse(void **state)
{
	pprpc_cluster *c;
	char err[256] = "";

	(void)state;
	assert_int_equal(pprpc_cluster_parse("# ranks\nr0 127.0.0.1:5000 cpu\n\n  r1\t[::1]:5001 cuda:0,cuda:1  # two GPUs\nr2 host:7\n",
					     "c.conf", &c, err, sizeof(err)),
			 0);
	assert_int_equal(pprpc_cluster_size(c), 3);
	assert_string_equal(pprpc_cluster_name(c, 1), "r1");
	assert_string_equal(pprpc_cluster_addr(c, 1), "[::1]:5001");
	assert_string_equal(pprpc_cluster_devices(c, 1), "cuda:0,cuda:1");
	assert_string_equal(pprpc_cluster_devices(c, 2), "cpu");
	assert_null(pprpc_cluster_addr(c, 3));
	assert_null(pprpc_cluster_name(c, -1));
	pprpc_cluster_free(c);
}

static void expect_error(const char *text, const char *needle)
{
	pprpc_cluster *c = NULL;
	char err[256] = "";

	assert_true(pprpc_cluster_parse(text, "c.conf", &c, err, sizeof(err)) < 0);
	if (!strstr(err, needle))
		fprintf(stderr, "'%s' lacks '%s'\n", err, needle);
	assert_non_null(strstr(err, needle));
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("", "no ranks");
	expect_error("# only a comment\n", "no ranks");
	expect_error("r0\n", "c.conf:1: expected NAME HOST:PORT");
	expect_error("r0 127.0.0.1:5000\nr1 127.0.0.1:70000\n", "c.conf:2: bad address");
	expect_error("r0 127.0.0.1:0\n", "bad address");
	expect_error("r0 a:1\nr0 b:2\n", "c.conf:2: rank name 'r0' repeated");
	expect_error("r0 a:1 cpu extra\n", "unexpected text");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests_name("cluster", tests, NULL, NULL);
}

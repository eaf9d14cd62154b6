/*
 * tests/unit/test_addr.c — "HOST:PORT" parsing, loopback detection and
 * address formatting (numeric addresses only: no name service is used).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "pprpc/types.h"
#include "util/addr.h"

#define DEF_PORT 50052

static void expect_split(const char *s, const char *want_host, uint16_t want_port)
{
	char host[64];
	uint16_t port = 1;

	memset(host, 'x', sizeof(host));
	if (addr_split(s, host, sizeof(host), &port, DEF_PORT) != 0)
		fail_msg("addr_split(\"%s\") refused", s);
	assert_string_equal(host, want_host);
	assert_int_equal(port, want_port);
}

static void expect_split_fails(const char *s)
{
	char host[64] = "untouched";
	uint16_t port = 4321;

	if (addr_split(s, host, sizeof(host), &port, DEF_PORT) != PPRPC_EINVAL)
		fail_msg("addr_split(\"%s\") accepted", s ? s : "(null)");
	/* outputs are written only on success */
	assert_string_equal(host, "untouched");
	assert_int_equal(port, 4321);
}

static void test_split_ok(void **state)
{
	(void)state;
	expect_split("127.0.0.1:5", "127.0.0.1", 5);
	expect_split("[::1]:7", "::1", 7);
	expect_split("::1", "::1", DEF_PORT);           /* bare v6, default port */
	expect_split("fe80::1:2:3", "fe80::1:2:3", DEF_PORT);
	expect_split("host", "host", DEF_PORT);         /* default port */
	expect_split("[::1]", "::1", DEF_PORT);
	expect_split("[fe80::1%eth0]:9", "fe80::1%eth0", 9);
	expect_split("node-3.example:65535", "node-3.example", 65535);
	expect_split("127.0.0.1:0", "127.0.0.1", 0);    /* ephemeral */
	expect_split("h:00080", "h", 80);
}

static void test_split_bad(void **state)
{
	(void)state;
	expect_split_fails(NULL);
	expect_split_fails("");
	expect_split_fails("x:");
	expect_split_fails("x:70000");
	expect_split_fails("x:65536");
	expect_split_fails("x:-1");
	expect_split_fails("x:5a");
	expect_split_fails("x:5 ");
	expect_split_fails("x:99999999999999999999999");
	expect_split_fails("[::1");
	expect_split_fails("[::1]:");
	expect_split_fails("[::1]x");
	expect_split_fails("[::1]:70000");
	expect_split_fails("[]:5");
	expect_split_fails("[]");
	expect_split_fails(":5");
}

static void test_split_hostlen(void **state)
{
	char host[4];
	uint16_t port = 0;

	(void)state;
	/* the host must fit with its terminator */
	assert_int_equal(addr_split("abc:1", host, sizeof(host), &port, DEF_PORT), 0);
	assert_string_equal(host, "abc");
	assert_int_equal(port, 1);
	assert_int_equal(addr_split("abcd:1", host, sizeof(host), &port, DEF_PORT), PPRPC_EINVAL);
	assert_int_equal(addr_split("[abcd]:1", host, sizeof(host), &port, DEF_PORT),
			 PPRPC_EINVAL);
	assert_int_equal(addr_split("::1:2", host, sizeof(host), &port, DEF_PORT), PPRPC_EINVAL);
	assert_string_equal(host, "abc");
}

static struct sockaddr_in v4(const char *a, uint16_t port)
{
	struct sockaddr_in in;

	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, a, &in.sin_addr), 1);
	return in;
}

static struct sockaddr_in6 v6(const char *a, uint16_t port)
{
	struct sockaddr_in6 in6;

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, a, &in6.sin6_addr), 1);
	return in6;
}

static void test_loopback(void **state)
{
	struct sockaddr_in a;
	struct sockaddr_in6 b;
	struct sockaddr_un u;

	(void)state;
	a = v4("127.0.0.1", 1);
	assert_true(addr_is_loopback((struct sockaddr *)&a));
	a = v4("127.255.255.254", 1);
	assert_true(addr_is_loopback((struct sockaddr *)&a));
	a = v4("127.0.0.0", 1);
	assert_true(addr_is_loopback((struct sockaddr *)&a));
	a = v4("128.0.0.1", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&a));
	a = v4("126.255.255.255", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&a));
	a = v4("10.0.0.1", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&a));
	a = v4("0.0.0.0", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&a));
	a = v4("1.0.0.127", 1); /* byte order: the 127 is in the wrong place */
	assert_false(addr_is_loopback((struct sockaddr *)&a));

	b = v6("::1", 1);
	assert_true(addr_is_loopback((struct sockaddr *)&b));
	b = v6("::", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&b));
	b = v6("::2", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&b));
	b = v6("fe80::1", 1);
	assert_false(addr_is_loopback((struct sockaddr *)&b));

	memset(&u, 0, sizeof(u));
	u.sun_family = AF_UNIX;
	assert_false(addr_is_loopback((struct sockaddr *)&u));
}

static void test_format(void **state)
{
	char buf[64];
	struct sockaddr_in a;
	struct sockaddr_in6 b;
	struct sockaddr_un u;

	(void)state;
	a = v4("127.0.0.1", 5);
	addr_format((struct sockaddr *)&a, buf, sizeof(buf));
	assert_string_equal(buf, "127.0.0.1:5");
	a = v4("10.1.2.3", 65535);
	addr_format((struct sockaddr *)&a, buf, sizeof(buf));
	assert_string_equal(buf, "10.1.2.3:65535");
	b = v6("::1", 7);
	addr_format((struct sockaddr *)&b, buf, sizeof(buf));
	assert_string_equal(buf, "[::1]:7");
	b = v6("fe80::a:b", 50052);
	addr_format((struct sockaddr *)&b, buf, sizeof(buf));
	assert_string_equal(buf, "[fe80::a:b]:50052");
	memset(&u, 0, sizeof(u));
	u.sun_family = AF_UNIX;
	addr_format((struct sockaddr *)&u, buf, sizeof(buf));
	assert_string_equal(buf, "?");
	/* a short buffer is truncated, still terminated */
	a = v4("127.0.0.1", 5);
	memset(buf, 'z', sizeof(buf));
	addr_format((struct sockaddr *)&a, buf, 6);
	assert_string_equal(buf, "127.0");
}

/* Formatting what addr_split gave, after a numeric resolve, round-trips. */
static void test_split_resolve_format(void **state)
{
	static const char *const in[] = { "127.0.0.1:5", "[::1]:7", "10.0.0.2:50052" };
	char host[64], buf[64];
	uint16_t port;

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct sockaddr_storage ss;
		socklen_t sl = 0;

		assert_int_equal(addr_split(in[i], host, sizeof(host), &port, DEF_PORT), 0);
		assert_int_equal(addr_resolve(host, port, &ss, &sl), 0);
		assert_true(sl > 0);
		addr_format((struct sockaddr *)&ss, buf, sizeof(buf));
		assert_string_equal(buf, in[i]);
		assert_int_equal(addr_is_loopback((struct sockaddr *)&ss), i < 2);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_ok),
		cmocka_unit_test(test_split_bad),
		cmocka_unit_test(test_split_hostlen),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_split_resolve_format),
	};

	return cmocka_run_group_tests_name("addr", tests, NULL, NULL);
}

/*
 * tests/unit/test_hostmem.c — the host memory floor counts what the daemon
 * committed (hostmem.h, issue 27.10): a buffer counts whether or not its
 * pages are touched, once and not twice, and MemAvailable rising under the
 * daemon's commitments does not widen what it may take.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "daemon/core/hostmem.h"
#include "pprpc/types.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024 * MIB)

/* A hostmem whose baseline is avail: as if the daemon started on a host
 * with avail bytes available. */
static void init_at(struct hostmem *h, uint64_t floor, uint64_t avail)
{
	hostmem_init(h, floor);
	atomic_store(&h->baseline, avail);
}

/* Committed but untouched: MemAvailable has not moved, the free figure has. */
static void test_untouched_counts(void **state)
{
	struct hostmem h;

	(void)state;
	init_at(&h, 10 * GIB - 512 * MIB, 10 * GIB);
	hostmem_commit(&h, 448 * MIB);
	assert_int_equal(hostmem_free_now(&h, 10 * GIB), 10 * GIB - 448 * MIB);
	hostmem_uncommit(&h, 448 * MIB);
	assert_int_equal(hostmem_committed(&h), 0);
}

/* Committed and touched: MemAvailable shows it and so does committed; the
 * free figure subtracts it once. */
static void test_touched_counts_once(void **state)
{
	struct hostmem h;

	(void)state;
	init_at(&h, 0, 10 * GIB);
	hostmem_commit(&h, 448 * MIB);
	assert_int_equal(hostmem_free_now(&h, 10 * GIB - 448 * MIB), 10 * GIB - 448 * MIB);
}

/* Another process gives memory back while the daemon holds buffers: the
 * daemon's share stays what it was. */
static void test_others_freeing(void **state)
{
	struct hostmem h;

	(void)state;
	init_at(&h, 10 * GIB - 512 * MIB, 10 * GIB);
	hostmem_commit(&h, 448 * MIB);
	assert_int_equal(hostmem_free_now(&h, 11 * GIB), 10 * GIB - 448 * MIB);
	/* and another process taking memory counts at once */
	assert_int_equal(hostmem_free_now(&h, 9 * GIB), 9 * GIB);
}

/* Reservations count in both figures, and once. */
static void test_reserved(void **state)
{
	struct hostmem h;

	(void)state;
	init_at(&h, 0, 10 * GIB);
	hostmem_commit(&h, 1 * GIB);
	atomic_store(&h.reserved, 256 * MIB);
	assert_int_equal(hostmem_free_now(&h, 10 * GIB), 10 * GIB - 1 * GIB - 256 * MIB);
	assert_int_equal(hostmem_free_now(&h, 8 * GIB), 8 * GIB - 256 * MIB);
}

/* Holding nothing, the daemon takes MemAvailable as its new baseline. */
static void test_baseline_refresh(void **state)
{
	struct hostmem h;

	(void)state;
	init_at(&h, 0, 10 * GIB);
	assert_int_equal(hostmem_free_now(&h, 12 * GIB), 12 * GIB);
	assert_int_equal(atomic_load(&h.baseline), 12 * GIB);
	hostmem_commit(&h, 1 * GIB);
	assert_int_equal(hostmem_free_now(&h, 14 * GIB), 11 * GIB);
}

/* The finding's sequence against the live host: a floor 512 MiB below what
 * is available, 448 MiB committed untouched, then 256 MiB of packing. */
static void test_reserve_refused(void **state)
{
	struct hostmem h;
	uint64_t avail, total;
	char err[256] = "";

	(void)state;
	assert_int_equal(hostmem_meminfo(&avail, &total), 0);
	init_at(&h, avail - 512 * MIB, avail);
	hostmem_commit(&h, 448 * MIB);
	assert_int_equal(hostmem_reserve(&h, 256 * MIB, err, sizeof(err)), PPRPC_EFLOOR);
	assert_non_null(strstr(err, "memory floor"));
	assert_non_null(strstr(err, "committed"));
	assert_int_equal(hostmem_reserved(&h), 0);
	/* with the buffer gone the packing fits (the host's noise aside: the
	 * margin is 256 MiB) */
	hostmem_uncommit(&h, 448 * MIB);
	atomic_store(&h.baseline, avail);
	assert_int_equal(hostmem_reserve(&h, 256 * MIB, err, sizeof(err)), 0);
	hostmem_release(&h, 256 * MIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_untouched_counts),
		cmocka_unit_test(test_touched_counts_once),
		cmocka_unit_test(test_others_freeing),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_baseline_refresh),
		cmocka_unit_test(test_reserve_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

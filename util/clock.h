/*
 * util/clock.h — the one monotonic clock reading of the daemon and the
 * client library: CLOCK_MONOTONIC in nanoseconds, the time base of the
 * request trace (a rank's and a client's lines on one host compare
 * directly) and of the queue's exec times.  Header-only.
 */
#ifndef PPRPC_UTIL_CLOCK_H
#define PPRPC_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif

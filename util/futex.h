/*
 * util/futex.h — a 32-bit futex word shared between threads or processes
 * (a MAP_SHARED page: not FUTEX_PRIVATE), for the two sides that use it:
 * the landing pages' wake word (daemon/xfer/land.c) and the device queue
 * that moves it when work comes (daemon/exec/queue.c).
 */
#ifndef PPRPC_UTIL_FUTEX_H
#define PPRPC_UTIL_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Wake every thread asleep on w. */
static inline void futex_wake_all(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep while *w == seq, at most timeout_us (a wake, a signal or another
 * value ends it early: callers check what they wait for again). */
static inline void futex_wait_us(_Atomic uint32_t *w, uint32_t seq, uint64_t timeout_us)
{
	struct timespec ts = { (time_t)(timeout_us / 1000000u), (long)(timeout_us % 1000000u) * 1000 };

	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, seq, &ts, NULL, 0);
}

#endif

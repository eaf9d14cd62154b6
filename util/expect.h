/*
 * util/expect.h — when a recurring event should come, from the last ones,
 * and the window around it in which a waiter spins instead of sleeping.
 *
 * Why: on the hosts ranks run on, a thread asleep for a millisecond takes
 * 20 to 160 us to run again once woken (bench/wake-probe.c: idle CPUs and
 * halted virtual CPUs), while a decoded token's hops take a few us each.
 * Sleeping through a wait that is known to end at about the same time as
 * the last ones, and spinning only around that time, keeps the wake-up off
 * the token's path at a bounded cost in CPU.  Used by the landing pages'
 * RECV (daemon/xfer/land.c), the daemon's loop and workers waiting for a
 * client's next token (daemon/server/wake_ahead.c) and the client waiting
 * for a reply (libclient/rpc.c).
 */
#ifndef PPRPC_UTIL_EXPECT_H
#define PPRPC_UTIL_EXPECT_H

#include <stdatomic.h>
#include <stdint.h>

/* A moving average of how long the event took (us); 0 = never seen. */
struct expect {
	_Atomic uint64_t us;
};

static inline uint64_t expect_us(const struct expect *e)
{
	return atomic_load_explicit(&e->us, memory_order_relaxed);
}

/* One more observation: the next one is much like the last ones.  One
 * far longer (a host that stalled a thread for milliseconds) counts as
 * twice the estimate: it moves it by a quarter, not off the pace. */
static inline void expect_note(struct expect *e, uint64_t us)
{
	uint64_t v = atomic_load_explicit(&e->us, memory_order_relaxed);

	if (v && us > 2 * v)
		us = 2 * v;
	atomic_store_explicit(&e->us, v ? (3 * v + us) / 4 : us, memory_order_relaxed);
}

/* Forget: what comes next is not like what came before. */
static inline void expect_reset(struct expect *e)
{
	atomic_store_explicit(&e->us, 0, memory_order_relaxed);
}

/* How far around the expected time to spin: a quarter of it, at least
 * 100 us (a wake-up's worth; the spread of a token's hops is below that). */
static inline uint64_t expect_margin_us(uint64_t est_us)
{
	return est_us / 4 > 100 ? est_us / 4 : 100;
}

/* From how long after the wait began to spin: est - margin, 0 when the
 * estimate is shorter than its margin. */
static inline uint64_t expect_spin_from_us(uint64_t est_us)
{
	uint64_t m = expect_margin_us(est_us);

	return est_us > m ? est_us - m : 0;
}

/* One turn of a spin: let the core's other thread run. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif

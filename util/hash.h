/*
 * util/hash.h — the one FNV-1a hash and splitmix64 generator of the tree
 * (parity hashes, seeded weights and patterns in tools, benchmarks and
 * tests).  Header-only and valid C, C++ and CUDA (host and device code), so
 * the CUDA benchmarks draw from the same functions.
 *
 * Not for anything secret: nonces and keys come from proto/auth.h.
 */
#ifndef PPRPC_UTIL_HASH_H
#define PPRPC_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define UTIL_HD __host__ __device__
#else
#define UTIL_HD
#endif

/* The offset is not FNV's published basis (14695981039346656037): every
 * copy this header replaced had lost its last digit.  Any start
 * value hashes as well; this one is kept so that token hashes stay equal
 * to those recorded in doc/results. */
#define FNV1A64_OFFSET 1469598103934665603ull
#define FNV1A64_PRIME 1099511628211ull
#define SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull

/* FNV-1a (with the offset above) over n bytes. */
static inline uint64_t fnv1a64(const void *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p;
	uint64_t h = FNV1A64_OFFSET;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * FNV1A64_PRIME;
	return h;
}

/* splitmix64's output function: a bijection that spreads every input bit
 * over the whole word. */
static inline UTIL_HD uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The splitmix64 value that follows state x (x itself is not advanced):
 * callers iterate it as x = splitmix64(x) or hash an index with it. */
static inline UTIL_HD uint64_t splitmix64(uint64_t x)
{
	return mix64(x + SPLITMIX64_GAMMA);
}

/* The classic generator: advance *state by the gamma, return its mix. */
static inline UTIL_HD uint64_t splitmix64_next(uint64_t *state)
{
	return mix64(*state += SPLITMIX64_GAMMA);
}

/* The top 53 bits of x as a double in [0, 1). */
static inline UTIL_HD double unit_double(uint64_t x)
{
	return (double)(x >> 11) / 9007199254740992.0;
}

#endif

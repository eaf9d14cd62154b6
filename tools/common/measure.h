/*
 * tools/common/measure.h — what every benchmark and tool measures with:
 * a monotonic clock, seeded patterns and a fast hash for parity checks,
 * and order statistics for reporting medians and spreads.
 */
#ifndef PPRPC_TOOLS_MEASURE_H
#define PPRPC_TOOLS_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "util/hash.h"  /* splitmix64 for the patterns */

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

/* Word i of the pattern depends on the seed and on i, so bytes landing at
 * the wrong offset are caught, not only wrong bytes. */
void fill_pattern(void *buf, size_t len, uint64_t seed);
/* FNV-1a over 64-bit words in four independent lanes (one multiply chain
 * per lane keeps a 256 MiB hash well under a second), folded with FNV-1a
 * over the lane values and the length.  Benchmarks compare these. */
uint64_t hash64(const void *buf, size_t len);

/* qsort comparator for doubles. */
int cmp_double(const void *a, const void *b);
/* Median of v[0..n) (0 when n < 1); sorts v in place. */
double median_sorting(double *v, int n);
/* Median of v[0..n) without touching v (0 when n < 1; NaN if out of memory). */
double median(const double *v, int n);
/* Nearest-rank percentile p (0..100) of a sorted array. */
double pct_sorted(const double *v, int n, double p);
void min_max(const double *v, int n, double *lo, double *hi);

/* len bytes, committed and faulted in, so no page fault lands in a timed
 * region.  Free with munmap.  NULL on failure. */
void *alloc_touched(size_t len);

#endif

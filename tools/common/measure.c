/* tools/common/measure.c — clocks, patterns, hashes, order statistics (see measure.h). */
#include "tools/common/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fill_pattern(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t i, words = len / 8;

	for (i = 0; i < words; i++) {
		uint64_t v = splitmix64(seed ^ i);

		memcpy(p + i * 8, &v, 8);
	}
	for (i = words * 8; i < len; i++)
		p[i] = (uint8_t)splitmix64(seed ^ (i / 8));
}

uint64_t hash64(const void *buf, size_t len)
{
	const uint64_t prime = 0x100000001b3ull;
	const uint8_t *p = buf;
	uint64_t h[4] = { 0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
			  0xc2b2ae3d27d4eb4full };
	uint64_t out = 0xcbf29ce484222325ull;
	size_t i = 0;

	for (; i + 32 <= len; i += 32) {
		for (int j = 0; j < 4; j++) {
			uint64_t w;

			memcpy(&w, p + i + 8 * j, 8);
			h[j] = (h[j] ^ w) * prime;
		}
	}
	for (; i < len; i++)
		h[0] = (h[0] ^ p[i]) * prime;
	for (int j = 0; j < 4; j++)
		for (int k = 0; k < 8; k++)
			out = (out ^ ((h[j] >> (8 * k)) & 0xff)) * prime;
	for (int k = 0; k < 8; k++)
		out = (out ^ (((uint64_t)len >> (8 * k)) & 0xff)) * prime;
	return out;
}

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double median_sorting(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double median(const double *v, int n)
{
	double *s, m;

	if (n <= 0)
		return 0;
	s = malloc(sizeof(double) * (size_t)n);
	if (!s)
		return NAN;
	memcpy(s, v, sizeof(double) * (size_t)n);
	m = median_sorting(s, n);
	free(s);
	return m;
}

double pct_sorted(const double *v, int n, double p)
{
	int k = (int)ceil(p / 100.0 * n);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

void min_max(const double *v, int n, double *lo, double *hi)
{
	*lo = *hi = v[0];
	for (int i = 1; i < n; i++) {
		if (v[i] < *lo)
			*lo = v[i];
		if (v[i] > *hi)
			*hi = v[i];
	}
}

void *alloc_touched(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, len);
	return p;
}

/*
 * bench/int_list.h — "512,2048,8192": a comma-separated list of positive
 * integers, as the kda benches take their sizes.  Header-only so the C and
 * the CUDA (C++) bench share it.
 */
#ifndef PPRPC_BENCH_INT_LIST_H
#define PPRPC_BENCH_INT_LIST_H

#include <stdint.h>
#include <stdlib.h>

#define INT_LIST_MAX 16

struct int_list {
	int64_t v[INT_LIST_MAX];
	int n;
};

/* 0, or -1 for an empty list, a value <= 0, junk, or more than
 * INT_LIST_MAX values. */
static inline int int_list_parse(const char *s, struct int_list *l)
{
	char *end;

	l->n = 0;
	while (*s) {
		long long x = strtoll(s, &end, 10);

		if (l->n == INT_LIST_MAX || end == s || x <= 0 || (*end && *end != ','))
			return -1;
		l->v[l->n++] = x;
		s = *end == ',' ? end + 1 : end;
	}
	return l->n > 0 ? 0 : -1;
}

#endif

/*
 * util/list.h — comma-separated lists from command lines ("a,b,c" of
 * rank addresses, device names, token counts, ubatch sizes).  One parser
 * for the tools, benchmarks (C and CUDA) and tests.
 */
#ifndef PPRPC_UTIL_LIST_H
#define PPRPC_UTIL_LIST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIST_ITEM_LEN 64

/* Split s at commas into out[0..max) (each entry cut to 63 characters;
 * empty entries are skipped).  Returns the number of entries, or -1 when
 * there are more than max (or no memory). */
int list_split(const char *s, char out[][LIST_ITEM_LEN], int max);

#define INT_LIST_MAX 16

struct int_list {
	int64_t v[INT_LIST_MAX];
	int n;
};

/* Parse whole numbers separated by commas (blanks around them allowed)
 * into *out.  Returns the count (>= 1), or -1 (*out untouched) for an
 * empty list, junk, a value outside [lo, hi], or more than INT_LIST_MAX
 * values. */
int list_ints(const char *s, struct int_list *out, int64_t lo, int64_t hi);

#ifdef __cplusplus
}
#endif
#endif

/* util/list.c — see list.h. */
#include "util/list.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int list_split(const char *s, char out[][LIST_ITEM_LEN], int max)
{
	char *list = strdup(s), *save = NULL;
	int n = 0;

	if (!list)
		return -1;
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == max) {
			n = -1;
			break;
		}
		snprintf(out[n++], LIST_ITEM_LEN, "%s", t);
	}
	free(list);
	return n;
}

int list_ints(const char *s, struct int_list *out, int64_t lo, int64_t hi)
{
	struct int_list l;

	l.n = 0;
	for (;;) {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(s, &end, 10);
		if (end == s || errno || v < lo || v > hi || l.n == INT_LIST_MAX)
			return -1;
		l.v[l.n++] = v;
		while (isspace((unsigned char)*end))
			end++;
		if (!*end) {
			*out = l;
			return l.n;
		}
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

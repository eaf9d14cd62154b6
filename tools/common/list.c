/* tools/common/list.c — see list.h. */
#include "tools/common/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int parse_list(const char *s, char out[][64], int max)
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
		snprintf(out[n++], 64, "%s", t);
	}
	free(list);
	return n;
}

/* tools/common/stats.c — see stats.h. */
#include "tools/common/stats.h"

#include <string.h>

int stats_item(const pprpc_stats *s, const char *list, const char *name1, const char *want1, const char *name2,
	       const char *want2)
{
	for (int i = 0; i < pprpc_stats_count(s, list); i++)
		if (!strcmp(pprpc_stats_str(s, list, i, name1), want1) &&
		    (!name2 || !strcmp(pprpc_stats_str(s, list, i, name2), want2)))
			return i;
	return -1;
}

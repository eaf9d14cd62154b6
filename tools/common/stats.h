/*
 * tools/common/stats.h — finding items in a statistics snapshot
 * (pprpc_stats_*) by their string values, as tools, benchmarks and tests do
 * for "the recv boundary from rank X".
 */
#ifndef PPRPC_TOOLS_STATS_H
#define PPRPC_TOOLS_STATS_H

#include "pprpc.h"

/* Index of the first item of list whose value name1 is want1 and, when
 * name2 is not NULL, whose value name2 is want2; -1 if none. */
int stats_item(const pprpc_stats *s, const char *list, const char *name1, const char *want1, const char *name2,
	       const char *want2);

#endif

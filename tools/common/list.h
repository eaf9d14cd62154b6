/*
 * tools/common/list.h — comma-separated command-line lists (ranks,
 * devices, token counts) split into fixed-size entries.
 */
#ifndef PPRPC_TOOLS_LIST_H
#define PPRPC_TOOLS_LIST_H

/* Split s at commas into out[0..max) (each entry cut to 63 characters).
 * Returns the number of entries, or -1 when there are more than max (or
 * no memory). */
int parse_list(const char *s, char out[][64], int max);

#endif

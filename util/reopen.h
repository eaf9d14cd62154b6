/*
 * util/reopen.h — an open file of its own for a thread that reads a file
 * another descriptor already names.
 *
 * The kernel keeps a file's readahead state per open file (not per
 * descriptor, nor per file): threads reading different parts through one
 * open file look like random access to it, and it then reads in single
 * pages, which later mappings of the file fault in page by page and
 * compute over at a fraction of the speed (measured: doc/weights.md).
 * So a thread that streams its own part of a file reads it through an
 * open file of its own.  Re-opened through /proc/self/fd, it is the same
 * file whatever happened to its name since.
 */
#ifndef PPRPC_UTIL_REOPEN_H
#define PPRPC_UTIL_REOPEN_H

#include <fcntl.h>
#include <stdio.h>

/* A new read-only open file of fd's file, or -1 (no /proc): the caller then
 * reads through fd itself. */
static inline int fd_reopen(int fd)
{
	char path[48];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

#endif

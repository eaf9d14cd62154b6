/*
 * daemon/handlers/filerange.h — a FileRange of the wire (a model file's
 * identity, an offset, a hint), checked: TENSOR_FILL's and BUFFER_ALLOC's.
 */
#ifndef PPRPC_DAEMON_FILERANGE_H
#define PPRPC_DAEMON_FILERANGE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"
#include "util/filesum.h"

/* size bytes of the range f: hashes of 32 bytes, inside the file's size,
 * a hint shorter than hintlen.  0 with *id, *ret_off and hint filled, or
 * PPRPC_EINVAL / PPRPC_ERANGE with the reason (what: the request's name). */
int filerange_parse(const Pprpc__FileRange *f, uint64_t size, const char *what, struct filesum *id,
		    uint64_t *ret_off, char *hint, size_t hintlen, char *err, size_t errlen);

#endif

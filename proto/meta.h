/*
 * proto/meta.h — packing and bounded unpacking of protobuf-c meta messages.
 *
 * Unpacking uses an allocator with a byte budget: a 1 MiB meta can claim a
 * few million repeated elements, and protobuf-c sizes its arrays from counts
 * found in the input.  The budget turns that into a clean PPRPC_ETOOBIG.
 */
#ifndef PPRPC_PROTO_META_H
#define PPRPC_PROTO_META_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"

/* Bytes of decoded structures one meta may produce. */
#define META_DECODE_BUDGET (64u << 20)

/* Decode len bytes as a message of type d.  Returns 0 and *out (free with
 * meta_free), or PPRPC_EPROTO (malformed) / PPRPC_ETOOBIG (over budget) /
 * PPRPC_EINVAL (a string field holds a NUL byte: as a C string it would
 * read shorter than it was sent). */
int meta_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		ProtobufCMessage **out);
void meta_free(ProtobufCMessage *m);

/* Encoded size and encoding (wrappers, so callers need no protobuf-c calls). */
size_t meta_size(const ProtobufCMessage *m);
size_t meta_pack(const ProtobufCMessage *m, uint8_t *out);

#endif

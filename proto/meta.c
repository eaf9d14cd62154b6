/* proto/meta.c — bounded protobuf-c unpacking (see meta.h). */
#include "proto/meta.h"

#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

/* Each allocation carries its size in front so the budget can be returned
 * on free.  The budget itself must outlive the message: the top-level
 * message is one of our allocations, so once unpack returned, its chunk
 * header's spare slot is set to point back to the budget. */
struct budget {
	ProtobufCAllocator a;
	size_t used;
	size_t cap;
	int refused;   /* an allocation was denied for the budget */
};

struct chunk_head {
	size_t size;
	struct budget *owner; /* set on the message's own chunk; keeps 16-byte alignment */
};

static void *budget_alloc(void *data, size_t size)
{
	struct budget *b = data;
	struct chunk_head *h;

	if (size > b->cap - b->used) {
		b->refused = 1;
		return NULL;
	}
	h = malloc(sizeof(*h) + size);
	if (!h)
		return NULL;
	h->size = size;
	h->owner = NULL;
	b->used += size;
	return h + 1;
}

static void budget_free(void *data, void *p)
{
	struct budget *b = data;
	struct chunk_head *h;

	if (!p)
		return;
	h = (struct chunk_head *)p - 1;
	b->used -= h->size;
	free(h);
}

/* Bytes of a varint at p (at most 10), 0 if it does not end within len. */
static size_t varint(const uint8_t *p, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len && i < 10; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*ret = v;
			return i + 1;
		}
	}
	return 0;
}

/* Nesting of sub-messages this walk follows (the schema's is far lower). */
#define MAX_DEPTH 16

/*
 * protobuf-c hands string fields over as C strings: one holding a NUL byte
 * would be read shorter than it was sent ("\0host:port" as "", a local
 * rank), and the daemon would act on another value than the sender meant.
 * Such a message is refused.  The walk follows the wire encoding the
 * unpacker already accepted, field by field, into sub-messages.  Returns 0
 * or PPRPC_EINVAL.
 */
static int strings_clean(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth)
{
	size_t i = 0, n;
	uint64_t key, l;

	while (i < len) {
		n = varint(p + i, len - i, &key);
		if (!n)
			return PPRPC_EINVAL;
		i += n;
		switch (key & 7) {
		case 0:
			n = varint(p + i, len - i, &l);
			if (!n)
				return PPRPC_EINVAL;
			i += n;
			break;
		case 1:
		case 5: {
			size_t w = (key & 7) == 1 ? 8 : 4;

			if (len - i < w)
				return PPRPC_EINVAL;
			i += w;
			break;
		}
		case 2: {
			const ProtobufCFieldDescriptor *f;

			n = varint(p + i, len - i, &l);
			if (!n || l > len - i - n)
				return PPRPC_EINVAL;
			i += n;
			f = key >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p + i, 0, (size_t)l))
				return PPRPC_EINVAL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
			    (depth >= MAX_DEPTH || strings_clean(f->descriptor, p + i, (size_t)l, depth + 1) < 0))
				return PPRPC_EINVAL;
			i += (size_t)l;
			break;
		}
		default:
			return PPRPC_EINVAL; /* groups: not in our schema */
		}
	}
	return 0;
}

int meta_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		ProtobufCMessage **out)
{
	struct budget *b = malloc(sizeof(*b));
	ProtobufCMessage *m;

	if (!b)
		return PPRPC_ENOMEM;
	b->a.alloc = budget_alloc;
	b->a.free = budget_free;
	b->a.allocator_data = b;
	b->used = 0;
	b->cap = META_DECODE_BUDGET;
	b->refused = 0;
	m = protobuf_c_message_unpack(d, &b->a, len, buf);
	if (!m) {
		int rc = b->refused ? PPRPC_ETOOBIG : PPRPC_EPROTO;

		free(b);
		return rc;
	}
	((struct chunk_head *)m - 1)->owner = b;
	if (strings_clean(d, buf, len, 0) < 0) {
		meta_free(m);
		return PPRPC_EINVAL;
	}
	*out = m;
	return 0;
}

void meta_free(ProtobufCMessage *m)
{
	struct budget *b;

	if (!m)
		return;
	b = ((struct chunk_head *)m - 1)->owner;
	protobuf_c_message_free_unpacked(m, &b->a);
	free(b);
}

size_t meta_size(const ProtobufCMessage *m)
{
	return protobuf_c_message_get_packed_size(m);
}

size_t meta_pack(const ProtobufCMessage *m, uint8_t *out)
{
	return protobuf_c_message_pack(m, out);
}

/* proto/meta.c — bounded protobuf-c unpacking (see meta.h). */
#include "proto/meta.h"

#include <stdlib.h>

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

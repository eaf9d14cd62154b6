/* daemon/xfer/transfer.c — transfers by id (see transfer.h). */
#include "daemon/xfer/transfer.h"

static unsigned bucket_of(uint64_t id)
{
	/* Ids are often small consecutive numbers: mix before masking. */
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (unsigned)(id & (XFER_BUCKETS - 1));
}

void xfer_table_add(struct xfer_table *t, struct xfer_node *n, uint64_t id)
{
	unsigned b = bucket_of(id);

	n->id = id;
	n->hnext = t->bucket[b];
	t->bucket[b] = n;
	n->prev = NULL;
	n->next = t->head;
	if (t->head)
		t->head->prev = n;
	t->head = n;
	t->count++;
}

void xfer_table_del(struct xfer_table *t, struct xfer_node *n)
{
	for (struct xfer_node **pp = &t->bucket[bucket_of(n->id)]; *pp; pp = &(*pp)->hnext)
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	if (n->prev)
		n->prev->next = n->next;
	else
		t->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->prev = n->next = n->hnext = NULL;
	t->count--;
}

struct xfer_node *xfer_table_find(const struct xfer_table *t, uint64_t id)
{
	for (struct xfer_node *n = t->bucket[bucket_of(id)]; n; n = n->hnext)
		if (n->id == id)
			return n;
	return NULL;
}

struct xfer_node *xfer_table_find_next(const struct xfer_node *n)
{
	for (struct xfer_node *m = n->hnext; m; m = m->hnext)
		if (m->id == n->id)
			return m;
	return NULL;
}

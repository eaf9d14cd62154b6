/* daemon/objects/owner.c — object ownership and accounting (see owner.h). */
#include "daemon/objects/owner.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/objects/buffer.h"
#include "daemon/objects/graph.h"
#include "daemon/objects/hostpage.h"
#include "daemon/objects/timeline.h"
#include "pprpc/types.h"

void owner_init(struct owner *o, uint64_t max_bytes, uint32_t max_buffers, uint32_t max_graphs)
{
	memset(o, 0, sizeof(*o));
	o->max_bytes = max_bytes;
	o->max_buffers = max_buffers;
	o->max_graphs = max_graphs;
}

int owner_charge_check(const struct owner *o, uint64_t size, uint64_t *ret_footprint, char *err,
		       size_t errlen)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), max = o->max_bytes;
	uint64_t fp = size > UINT64_MAX - (page - 1) ? UINT64_MAX : (size + page - 1) / page * page;

	if (max && (fp > max || o->charged > max - fp)) {
		snprintf(err, errlen,
			 "connection memory limit (%" PRIu64 " MiB) reached: %" PRIu64 " bytes held, %" PRIu64
			 " more requested (page-rounded)", max >> 20, o->charged, fp);
		return PPRPC_ELIMIT;
	}
	*ret_footprint = fp;
	return 0;
}

#define LIST_ADD(head, x)                 \
	do {                              \
		(x)->prev = NULL;         \
		(x)->next = (head);       \
		if (head)                 \
			(head)->prev = (x); \
		(head) = (x);             \
	} while (0)
#define LIST_DEL(head, x)                            \
	do {                                         \
		if ((x)->prev)                       \
			(x)->prev->next = (x)->next; \
		else                                 \
			(head) = (x)->next;          \
		if ((x)->next)                       \
			(x)->next->prev = (x)->prev; \
		(x)->next = (x)->prev = NULL;        \
	} while (0)

void owner_add_buffer(struct owner *o, struct dbuf *b)
{
	LIST_ADD(o->bufs, b);
	o->nbuffers++;
	o->allocated += b->size;
	o->charged += b->footprint;
}

void owner_remove_buffer(struct owner *o, struct dbuf *b)
{
	LIST_DEL(o->bufs, b);
	o->nbuffers--;
	o->allocated -= b->size;
	o->charged -= b->footprint;
}

void owner_hold_buffer(struct owner *o, struct dbuf *b)
{
	LIST_DEL(o->bufs, b);
	o->nbuffers--;
	o->allocated -= b->size;
	LIST_ADD(o->held, b);
}

void owner_drop_held(struct owner *o, struct dbuf *b)
{
	LIST_DEL(o->held, b);
	o->charged -= b->footprint;
}

void owner_add_graph(struct owner *o, struct graph *g)
{
	LIST_ADD(o->graphs, g);
	o->ngraphs++;
	o->charged += g->footprint;
}

void owner_remove_graph(struct owner *o, struct graph *g)
{
	LIST_DEL(o->graphs, g);
	o->ngraphs--;
	o->charged -= g->footprint;
}

void owner_add_timeline(struct owner *o, struct timeline *t)
{
	LIST_ADD(o->timelines, t);
}

void owner_remove_timeline(struct owner *o, struct timeline *t)
{
	LIST_DEL(o->timelines, t);
}

void owner_add_hostpage(struct owner *o, struct hostpage *p)
{
	LIST_ADD(o->hostpages, p);
	o->nhostpages++;
}

void owner_remove_hostpage(struct owner *o, struct hostpage *p)
{
	LIST_DEL(o->hostpages, p);
	o->nhostpages--;
}

void owner_release(struct pprpcd *d, struct owner *o)
{
	/* Each retire takes the object off the list it is read from. */
	while (o->graphs)
		graph_retire(d, o->graphs);
	while (o->timelines)
		timeline_retire(d, o->timelines);
	while (o->bufs)
		buffer_retire(d, o->bufs);
	while (o->hostpages)
		hostpage_retire(d, o->hostpages);
	/* what in-flight work still holds outlives the owner: no charge to
	 * return to it any more */
	while (o->held) {
		struct dbuf *b = o->held;

		owner_drop_held(o, b);
		b->owner = NULL;
	}
}

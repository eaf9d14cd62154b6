/*
 * daemon/objects/owner.h — who owns buffers, graphs and timelines, and what
 * they cost it.
 *
 * Every object names its owner; the owner keeps one list per kind, the
 * counters its limits are checked against, and the limits themselves.
 * Objects call only this interface, never the connection behind it: struct
 * conn embeds a struct owner and fills its limits at accept (max-conn-*),
 * handlers pass &c->own.  The rule: objects/ includes no server/ header, so
 * buffers, graphs and timelines can be read, changed and tested without the
 * connection layer (the fuzz targets use an owner without a transport).
 * A connection's teardown retires what its owner holds (owner_release);
 * what other parts keep per connection goes through the close hooks of
 * pprpcd.h (pprpcd_on_conn_close), not through calls from conn.c.
 *
 * Charging: an object's page-rounded footprint is checked before anything
 * is allocated (owner_charge_check) and charged when the object joins its
 * owner's list (owner_add_*), uncharged when it leaves (owner_remove_*: its
 * handle retired).  Loop thread only.
 */
#ifndef PPRPC_DAEMON_OWNER_H
#define PPRPC_DAEMON_OWNER_H

#include <stddef.h>
#include <stdint.h>

struct pprpcd;
struct dbuf;
struct graph;
struct timeline;
struct hostpage;

struct owner {
	/* Limits, filled by whoever embeds the owner. */
	uint64_t max_bytes;          /* device memory footprint; 0 = no cap but the memory floor */
	uint32_t max_buffers;
	uint32_t max_graphs;
	/* Accounting. */
	uint64_t nbuffers;
	uint64_t allocated;          /* bytes of its buffers, as asked for */
	uint64_t ngraphs;
	uint64_t charged;            /* page-rounded device memory held (buffers, arenas) */
	/* What it owns, one list per kind (linked through the objects' next/prev). */
	struct dbuf *bufs;
	struct dbuf *held;           /* retired buffers still in use: charged until freed */
	struct graph *graphs;
	struct timeline *timelines;
	struct hostpage *hostpages;   /* clients' memory mapped for GETs (hostpage.h) */
	uint32_t nhostpages;
	uint32_t hostpage_maps;       /* ever mapped (the first few are logged) */
};

/* An owner holding nothing, with these limits. */
void owner_init(struct owner *o, uint64_t max_bytes, uint32_t max_buffers, uint32_t max_graphs);

/* Can o hold size more bytes of device memory?  0 with the page-rounded
 * footprint of size (what an allocation really costs), or PPRPC_ELIMIT with
 * a message naming the limit.  Checked before allocating (buffer_alloc,
 * graph_create, the ggml engine's graphs). */
int owner_charge_check(const struct owner *o, uint64_t size, uint64_t *ret_footprint, char *err,
		       size_t errlen);

/* List an object under its owner and charge its footprint; remove does the
 * reverse (the object's retire). */
void owner_add_buffer(struct owner *o, struct dbuf *b);
void owner_remove_buffer(struct owner *o, struct dbuf *b);
/* A buffer retired while something still holds it (a graph, a queued
 * command) leaves the handle list and the buffer count but stays charged
 * (on the held list) until its memory is freed: owner_drop_held. */
void owner_hold_buffer(struct owner *o, struct dbuf *b);
void owner_drop_held(struct owner *o, struct dbuf *b);
void owner_add_graph(struct owner *o, struct graph *g);
void owner_remove_graph(struct owner *o, struct graph *g);
void owner_add_timeline(struct owner *o, struct timeline *t);
void owner_remove_timeline(struct owner *o, struct timeline *t);
void owner_add_hostpage(struct owner *o, struct hostpage *p);
void owner_remove_hostpage(struct owner *o, struct hostpage *p);

/* The owner goes away: retire every object it holds — graphs first (they
 * hold buffers), then timelines (their waiters fail with PPRPC_ECANCELED),
 * then buffers and host pages.  Memory still in use (a queued command, a reply being
 * written) goes back with its last reference. */
void owner_release(struct pprpcd *d, struct owner *o);

#endif

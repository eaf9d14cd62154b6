/*
 * daemon/server/dispatch.h — the dispatch table: message type → handler.
 */
#ifndef PPRPC_DAEMON_DISPATCH_H
#define PPRPC_DAEMON_DISPATCH_H

#include <protobuf-c/protobuf-c.h>

#include "proto/pprpc.pb-c.h"

struct conn;
struct graph;
struct pprpcd;
struct request;

struct handler {
	const ProtobufCMessageDescriptor *desc;   /* request meta */
	/* optional: the request carries bulk.  Validate the request and name
	 * where the bulk goes (*ret_dst); on failure fill r->errmsg and return
	 * a negative code — the bulk is then read and discarded. */
	int (*bulk)(struct conn *c, struct request *r, void **ret_dst);
	/* Handle a complete, decoded request.  Replies now or later. */
	void (*run)(struct conn *c, struct request *r);
	/* optional: the tensor bytes the decoded request names (an
	 * allocation's size, a region's), counted in STATS request_counts */
	uint64_t (*bytes)(const ProtobufCMessage *m);
	/* a graph or stage-boundary request (GRAPH_CREATE, GGML_GRAPH_CREATE,
	 * GRAPH_RUN, SEND, RECV): the client connection that sends it is done
	 * loading */
	int ends_load;
};

/* NULL for a type this daemon does not implement. */
const struct handler *dispatch_lookup(unsigned type);
/* At start, after the parts': the close hooks of handlers that keep
 * something per connection (pprpcd_on_conn_close).  0 or PPRPC_ELIMIT. */
int dispatch_start(struct pprpcd *d);
/* HOST_WAIT and SUBSCRIBE wait on the loop; their close hook drops a
 * closed connection's (h_timeline.c). */
int h_timeline_start(struct pprpcd *d);

/* Handlers (h_*.c). */
void h_hello(struct conn *c, struct request *r);
void h_buffer_alloc(struct conn *c, struct request *r);
void h_buffer_free(struct conn *c, struct request *r);
void h_buffer_clear(struct conn *c, struct request *r);
int h_tensor_set_bulk(struct conn *c, struct request *r, void **ret_dst);
void h_tensor_set(struct conn *c, struct request *r);
void h_tensor_get(struct conn *c, struct request *r);
void h_tensor_copy(struct conn *c, struct request *r);
void h_tensor_fill(struct conn *c, struct request *r);
void h_host_page_map(struct conn *c, struct request *r);
void h_host_page_unmap(struct conn *c, struct request *r);
/* h_map.c: BUFFER_ALLOC naming a file (h_buffer_alloc hands it over) */
struct device;
void h_buffer_map(struct conn *c, struct request *r, struct device *dev);
void h_graph_create(struct conn *c, struct request *r);
void h_graph_run(struct conn *c, struct request *r);
/* Queue one run of g (a live graph of c) on its device's stream for the
 * queued request r: what GRAPH_RUN does once it found the graph. */
void graph_run_queue(struct conn *c, const struct request *r, struct graph *g);
void h_graph_free(struct conn *c, struct request *r);
void h_fence(struct conn *c, struct request *r);
void h_stats(struct conn *c, struct request *r);
void h_timeline_create(struct conn *c, struct request *r);
void h_timeline_destroy(struct conn *c, struct request *r);
void h_timeline_query(struct conn *c, struct request *r);
void h_signal(struct conn *c, struct request *r);
void h_wait(struct conn *c, struct request *r);
void h_host_wait(struct conn *c, struct request *r);
void h_subscribe(struct conn *c, struct request *r);
void h_send(struct conn *c, struct request *r);
void h_recv(struct conn *c, struct request *r);
void h_pull(struct conn *c, struct request *r);
void h_pull_release(struct conn *c, struct request *r);
void h_pull_check(struct conn *c, struct request *r);
void h_ping(struct conn *c, struct request *r);
void h_probe(struct conn *c, struct request *r);
void h_ggml_graph_create(struct conn *c, struct request *r);
void h_ggml_supports(struct conn *c, struct request *r);
void h_ggml_alloc_size(struct conn *c, struct request *r);

#endif

/*
 * daemon/objects/graph.h — validated, planned compute graphs.
 *
 * GRAPH_CREATE is validated once, with the same shape rules the client uses
 * (kernels/ops.h): every tensor descriptor, every region against its buffer,
 * topology (each node reads only leaf tensors or outputs of earlier nodes;
 * each tensor is written by at most one node), and each node's shapes and
 * types.  Scratch tensors (no buffer) are placed in a per-graph arena.  The
 * result holds resolved data pointers, so GRAPH_RUN does no checking at all.
 */
#ifndef PPRPC_DAEMON_GRAPH_H
#define PPRPC_DAEMON_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "proto/pprpc.pb-c.h"

struct pprpcd;
struct owner;
struct dbuf;
struct device;

struct gnode {
	int op;
	int nsrc;
	int src[PPRPC_MAX_SRC];
	int dst;
	struct pprpc_op_params p;
};

/* GRAPH_NATIVE: planned here (t, nodes, arena); GRAPH_GGML: a ggml graph,
 * planned by the ggml engine, dev_priv its state (daemon/backend/ggml/). */
enum graph_kind { GRAPH_NATIVE = 0, GRAPH_GGML = 1 };

struct graph {
	uint64_t handle;
	int kind;                 /* enum graph_kind */
	struct owner *owner;
	struct device *dev;
	int refs;                 /* the handle + queued runs */
	int ntensors;
	struct kern_tensor *t;    /* data pointers resolved */
	struct dbuf **bufs;       /* referenced buffers (refs held), nbufs */
	int nbufs;
	int nnodes;
	struct gnode *nodes;
	void *arena;
	uint64_t arena_size;
	void *dev_priv;           /* the backend's per-graph state (a CUDA graph) */
	uint64_t work;            /* rough cost of a run in flop (saturates; graph.c) */
	uint64_t host_scratch;    /* host memory a run allocates (device_graph_scratch) */
	uint64_t footprint;       /* arena, page-rounded: charged to the owner */
	/* A run reads on the host what earlier parts of it computed (a ggml
	 * graph's split guards, pprpc's GATED_DELTA_NET): the queue hands it
	 * to the device only when its stream has nothing pending there, and
	 * the device runs it to its end in the submit. */
	bool sync_run;
	struct graph *next, *prev;  /* owner's list */
};

/* Validate and plan.  Returns 0 and *ret_g (refs = 1), or a negative code
 * with the reason in err.  Allocates the arena on the device (memory floor
 * applies). */
int graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GraphCreate *m,
		 struct graph **ret_g, char *err, size_t errlen);
/* A graph planned by a backend of its own (GRAPH_GGML): owner o, device
 * dev, refs = 1, room to hold max_bufs buffers (graph_hold_buffer); the
 * caller sets dev_priv, released through device_graph_release with the
 * graph.  Drop a half-built one with graph_unref. */
int graph_new_backend(struct owner *o, struct device *dev, int kind, size_t max_bufs, struct graph **ret_g);
/* Keep b alive while g exists (once per buffer; at most max_bufs). */
void graph_hold_buffer(struct graph *g, struct dbuf *b);

/* max-graph-gflop for a graph of dev whose run demands about work flop:
 * 0, or PPRPC_ELIMIT naming the limit.  Native graphs (estimate_work) and
 * ggml graphs (gge_graph_work) both pass here at create. */
int graph_work_check(const struct pprpcd *d, const struct device *dev, uint64_t work, char *err, size_t errlen);

/* Work (flop) up to which a GRAPH_RUN may run inline on the loop (h_graph.c):
 * tens of microseconds of CPU at most, about what the two thread hand-offs
 * it saves cost.  (-DGRAPH_INLINE_WORK=0 turns it off, for measuring.) */
#ifndef GRAPH_INLINE_WORK
#define GRAPH_INLINE_WORK (1u << 14)
#endif

/* Room for one more graph of o (max-conn-graphs)?  0, or PPRPC_ELIMIT
 * with the limit in err: checked before a graph is planned, so a client at
 * its limit costs no planning. */
int graph_room(const struct owner *o, char *err, size_t errlen);
/* Give a created graph (refs = 1) its handle and list it under o, charging
 * its footprint; on failure g is dropped and err says why. */
int graph_register(struct pprpcd *d, struct owner *o, struct graph *g, char *err, size_t errlen);

/* Retire the handle and drop its reference (GRAPH_FREE, disconnect). */
void graph_retire(struct pprpcd *d, struct graph *g);
struct graph *graph_get(struct pprpcd *d, const struct owner *o, uint64_t handle);
void graph_ref(struct graph *g);
void graph_unref(struct graph *g);

#endif

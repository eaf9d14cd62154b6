/*
 * daemon/objects/graph.h — compute graphs as daemon objects: a handle, an
 * owner, references, the buffers they hold, and the limits every engine
 * shares (node cap, work bound, the owner's charge).
 *
 * The device's engine validates and plans a graph (device.h:
 * device_graph_begin): the native engine a GRAPH_CREATE
 * (daemon/backend/native/: tensors, nodes, an arena, data pointers resolved
 * so GRAPH_RUN checks nothing), the ggml engine a GGML_GRAPH_CREATE
 * (daemon/backend/ggml/: its state in dev_priv).  It reaches the daemon's
 * side (buffers by handle, the shared limits) through the env this file
 * gives it.
 */
#ifndef PPRPC_DAEMON_GRAPH_H
#define PPRPC_DAEMON_GRAPH_H

#include <stdatomic.h>
#include <stdbool.h>
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

/* GRAPH_NATIVE: planned by the native engine (t, nodes, arena);
 * GRAPH_GGML: a ggml graph, planned by the ggml engine, dev_priv its state.
 * The values are the wire forms of device.h (DEVICE_WIRE_*). */
enum graph_kind { GRAPH_NATIVE = 0, GRAPH_GGML = 1 };
struct graph_job;

struct graph {
	uint64_t handle;
	int kind;                 /* enum graph_kind */
	struct owner *owner;
	struct device *dev;
	int refs;                 /* the handle + queued runs */
	int ntensors;
	struct kern_tensor *t;    /* data pointers resolved */
	struct dbuf **bufs;       /* referenced buffers (refs held), nbufs */
	int nbufs, bufs_cap;
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
	/* Set for each run (h_graph.c): the run's stream's count of commands
	 * queued that take a run's output on the device (a SEND into a landing
	 * slot, exec/stream.h: follow).  Non-zero after the launch: the backend
	 * does not wait for the run's end on the submitting thread. */
	const atomic_int *run_follow;
	struct graph *next, *prev;  /* owner's list */
};

/*
 * A create of wire form kind (enum graph_kind) on device number device, msg
 * its message (nnodes its node count, for the node cap), in the device's
 * three steps (device.h: device_graph_begin): begin (loop) to a job, build
 * (any thread, once), finish (loop) to the graph (refs = 1, not yet
 * registered) or a negative code with the reason, freeing the job either
 * way; drop (loop) a job that will not be finished.  msg must outlive the
 * job.
 */
int graph_begin(struct pprpcd *d, struct owner *o, int kind, uint32_t device, const void *msg, size_t nnodes,
		struct graph_job **ret_j, char *err, size_t errlen);
void graph_build(struct graph_job *j);
int graph_finish(struct graph_job *j, struct graph **ret_g, char *err, size_t errlen);
void graph_drop(struct graph_job *j);
/* A native create in one go (the three in a row). */
int graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GraphCreate *m,
		 struct graph **ret_g, char *err, size_t errlen);
/* A probe of one node of a graph of wire form kind on device number
 * device (GGML_SUPPORTS: *ret_ok; GGML_ALLOC_SIZE: *ret_size): a negative
 * code for a malformed request or a device without it, else 0. */
enum { GRAPH_PROBE_SUPPORTS, GRAPH_PROBE_ALLOC_SIZE };
int graph_probe(struct pprpcd *d, const struct owner *o, int kind, uint32_t device, int probe, const void *msg,
		bool *ret_ok, uint64_t *ret_size, char *err, size_t errlen);
/* The device of a request, or NULL with the reason in err. */
struct device *graph_device(struct pprpcd *d, uint32_t index, char *err, size_t errlen);
/* Keep b alive while g exists (an engine, for each buffer its graph
 * names; once per buffer).  0 or PPRPC_ENOMEM. */
int graph_hold_buffer(struct graph *g, struct dbuf *b);

/* max-graph-gflop for a graph of dev whose run demands about work flop:
 * 0, or PPRPC_ELIMIT naming the limit.  Every engine's graphs pass here
 * at create (the env's work). */
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

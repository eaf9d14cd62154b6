/*
 * ggml-pprpc/pg.h — internals of libggml-pprpc.so, the ggml backend that
 * maps ggml's backend interface (ggml-backend-impl.h) onto pprpc ranks.
 *
 * Objects and who owns them:
 *   pg_registry  one per process (ggml_backend_init): the ranks and devices.
 *   pg_rank      one connection to one pprpcd; every call on it holds its
 *                lock (a pprpc_client is single-threaded, and llama.cpp may
 *                call from several threads, test-backend-ops -j does).
 *   pg_device    one ggml device per served ggml device of a rank (PPRPC0,
 *                PPRPC1, ...), with its buffer type and its caches (graphs,
 *                supports_op, alloc sizes), all guarded by the rank's lock.
 *   pg_buffer    one daemon buffer; ggml sees a fake base address.
 *   pg_backend   a ggml stream on a device.  All backends of one device share
 *                the rank's connection and so the daemon's one queue for it:
 *                daemon objects belong to a connection, and a buffer must be
 *                usable by every backend of its device.
 *   pg_event     a timeline on the device of the event plus its last value.
 *
 * libpprpc is used through its public headers alone (pprpc.h for the
 * connection, requests and the sticky async error, pprpc_ggml.h for ggml
 * graphs and op queries), as by any program: the Makefile builds the
 * plugin without the tree's root on the include path, and make test-install
 * builds it against an installed tree (own headers by file name, beside the
 * sources).
 *
 * Errors: where ggml takes a status (graph_compute, alloc_buffer) a failure
 * is logged and returned.  Most calls have none (set/get/synchronize, the
 * events): a failure there is a rank fault (fault.c) that ends the call with
 * a C++ exception (throw.cpp) instead of returning bytes the rank did not
 * produce.  After a fault every call fails and the process exits with status
 * 75 soon after, so that a restart that waits for the ranks serves again; a
 * watchdog thread (monitor.c) finds a rank that stopped answering.
 */
#ifndef PPRPC_GGML_PG_H
#define PPRPC_GGML_PG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml-backend-impl.h"
#include "ggml.h"
#include "pprpc.h"
#include "pprpc_ggml.h"
#include "pprpc_weights.h"
#include "cache.h"

/* ggml's logger (what ggml-impl.h's GGML_LOG_* call; that header is not
 * meant for C users): messages go through the tool's log callback. */
GGML_API void ggml_log_internal(enum ggml_log_level level, const char *format, ...);
#define PG_LOG_INFO(...) ggml_log_internal(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define PG_LOG_WARN(...) ggml_log_internal(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define PG_LOG_ERROR(...) ggml_log_internal(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
#define PG_LOG_DEBUG(...) ggml_log_internal(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)

#define PG_MAX_RANKS 64
#define PG_MAX_DEVICES 256

/* The process's rank fault (fault.c): the first failure that leaves this
 * process with rank state it cannot trust.  Shared by every rank. */
struct pg_fault {
	atomic_int failed;
	pthread_mutex_t lock;
	char why[1024];          /* the first fault, naming its rank and devices */
	int efd;                 /* eventfd, readable once failed: ends every wait (pprpc_set_cancel_fd) */
	long exit_ms;            /* exit this long after the fault (PPRPC_FAULT_EXIT_MS); -1 = never */
};

struct pg_weights;

struct pg_rank {
	struct pg_fault *fault;  /* the registry's */
	struct pg_weights *weights;  /* the registry's (weights.c) */
	int index;
	char name[64];           /* cluster file name, or "rank<i>" */
	char addr[128];          /* HOST:PORT, also how the other daemons reach it */
	pprpc_client *c;
	pthread_mutex_t lock;
	int dead;                /* connection lost: later calls fail loudly */
	char dead_why[512];
	uint64_t next_xfer;      /* transfer ids of SENDs from this rank */
	int timeout_ms;          /* per reply (PPRPC_TIMEOUT_MS) */
	char devs[96];           /* its ggml devices, "PPRPC0,PPRPC1", for messages */
	pprpc_trace *trace;      /* the registry's (PPRPC_TRACE), NULL = off */
	int host_pages;          /* on this host, PPRPC_HOST_PAGES on: reads may land in host pages */
};

/* Counters of one device (this process's view; the daemon counts too). */
struct pg_stats {
	uint64_t graph_creates;      /* GGML_GRAPH_CREATE sent (cache misses) */
	uint64_t graph_runs;         /* runs queued: GRAPH_RUN, or a create that runs */
	uint64_t graph_replays;      /* runs of the last graph seen again unserialized (replay.c) */
	uint64_t create_waits;       /* a create's handle was needed before its reply came */
	uint64_t graph_evictions;    /* GRAPH_FREE of cached graphs (bound or buffer freed) */
	uint64_t supports_queries;   /* GGML_SUPPORTS sent */
	uint64_t supports_cached;    /* supports_op answered from the cache */
	uint64_t alloc_size_queries; /* GGML_ALLOC_SIZE sent */
	uint64_t p2p_copies;         /* cpy_tensor_async as SEND/RECV between ranks */
	uint64_t p2p_bytes;
	uint64_t local_copies;       /* TENSOR_COPY on the same device */
	/* where the caller waited for the rank */
	uint64_t fences;             /* synchronize (FENCE) */
	uint64_t fences_skipped;     /* synchronize behind queued writes alone: no FENCE */
	uint64_t host_waits;         /* event_synchronize (HOST_WAIT) */
	uint64_t host_wait_fences;   /* ... that fell back to a FENCE */
	uint64_t reads;              /* get_tensor (a TENSOR_GET waited for) */
};

struct pg_snaps;

struct pg_device {
	struct ggml_backend_device gdev;      /* context = this */
	struct ggml_backend_buffer_type buft; /* context = this */
	struct ggml_backend_buffer_type host_buft; /* host pages (host_buffer.c) */
	struct pg_rank *rank;
	uint32_t index;                       /* device index on the rank */
	char name[32];                        /* "PPRPC0" */
	char desc[256];
	char rdev[32];                        /* the rank's name for it: "ggml:CPU" */
	uint64_t alignment, max_size;
	int maps_files;                       /* the rank maps model files as buffers */
	int async;                            /* the rank reported async + events */
	int create_run;                       /* a new graph's create queues its run
					       * (caps.ggml_create_run, PPRPC_GRAPH_CREATE_RUN) */
	struct pg_cache *graphs;              /* serialized graph -> daemon graph handle */
	struct pg_snaps *snaps;               /* the last graphs run, to see them again cheaply */
	struct pg_cache *supports;            /* serialized op -> supported (0/1) */
	struct pg_cache *alloc_sizes;         /* serialized op -> alloc size */
	struct pg_stats st;
	/* Queued commands issued to this device's queue, and how many of them
	 * the last successful FENCE covered: a synchronize with nothing issued
	 * since has nothing to wait for and no failure to report (llama.cpp
	 * synchronizes every backend several times per token).  Of them, the
	 * plain writes (TENSOR_SETs, whose bytes left with the call), and how
	 * many there were at that FENCE: a synchronize behind writes alone has
	 * nothing this process could observe to wait for (events.c). */
	uint64_t submitted, fenced;
	uint64_t writes, writes_fenced;
};

struct pg_monitor;

struct pg_registry {
	struct ggml_backend_reg reg;
	struct pg_fault fault;
	struct pg_monitor *monitor;
	struct pg_weights *weights;
	pprpc_trace *trace;      /* PPRPC_TRACE, for the process's life (exit flushes it) */
	int nrank;
	struct pg_rank rank[PG_MAX_RANKS];
	int ndev;
	struct pg_device *dev[PG_MAX_DEVICES];
};

struct pg_buffer {
	struct pg_device *dev;
	pprpc_buffer handle;
	void *base;              /* reserved address range (PROT_NONE); or: */
	size_t reserved;
	size_t size;
	/* over llama.cpp's mapped model (pg_buffer_from_host_ptr): base is
	 * the host pointer, nothing reserved; mapped: the rank maps its copy,
	 * else each weight is filled or sent as llama.cpp places it */
	int host_backed, mapped;
};

struct pg_backend {
	struct pg_device *dev;
};

struct pg_event {
	struct pg_device *dev;
	pprpc_timeline tl;
	uint64_t value;          /* last recorded value (0: never recorded) */
	uint64_t seq;            /* dev->submitted when it was recorded */
	uint64_t done;           /* a value seen complete (HOST_WAIT answered) */
};

/* ---- rank.c ------------------------------------------------------------------ */

/* Connect to r->addr (HELLO; key from PPRPC_AUTH_KEY_FILE).  err gets the
 * reason on failure. */
int pg_rank_open(struct pg_rank *r, char *err, size_t errlen);
void pg_rank_close(struct pg_rank *r);
/* The rank's lock; a thread holds at most one (pg_fatal lets it go). */
void pg_lock(struct pg_rank *r);
void pg_unlock(struct pg_rank *r);
/* After a failed libpprpc call on r: rc < 0 and the client's message.  Marks
 * the rank dead when the connection is gone.  Returns rc. */
int pg_rank_failed(struct pg_rank *r, int rc);
/* A void ggml call failed: raise the rank fault (fault.c) with "rank N NAME
 * (ADDR) device DEV: COMMAND: reason", release the rank lock this thread
 * holds, and throw (throw.h).  After an earlier fault the exception carries
 * that fault's message (the cause), not this call's.  With or without the
 * rank's lock; r may be NULL (no rank involved). */
_Noreturn void pg_fatal(const struct pg_rank *r, const char *dev, const char *command, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* pg_fatal with the rank's last error (or why it is dead). */
_Noreturn void pg_fatal_rc(const struct pg_rank *r, const char *dev, const char *command, int rc);
/* Before issuing work on r: throw if a fault was raised or r is dead. */
void pg_check_alive(const struct pg_rank *r, const char *dev, const char *command);
/* Raise the fault for a failure that a ggml status reports (graph_compute):
 * no exception.  msg says what failed. */
void pg_rank_fault(const struct pg_rank *r, const char *dev, const char *msg);
/* A fresh transfer id for a SEND from r (unique among r's transfers: random
 * start, then counting, since other clients share the daemon's id space). */
uint64_t pg_rank_xfer_id(struct pg_rank *r);
/* The rank's STATS (pprpc_stats_get).  Returns 0 or a negative code (the
 * rank marked dead when the connection is gone). */
int pg_rank_stats(struct pg_rank *r, pprpc_stats **ret);

/* ---- fault.c ------------------------------------------------------------------ */

/* PPRPC_FAULT_EXIT_MS and the eventfd.  0 or a negative code (err). */
int pg_fault_init(struct pg_fault *f, char *err, size_t errlen);
/* Record a fault (the first is the cause; later ones are logged), wake every
 * wait, and arm the exit.  Never throws. */
void pg_fault_raise(struct pg_fault *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pg_fault_failed(struct pg_fault *f);
/* The first fault's message. */
void pg_fault_why(struct pg_fault *f, char *buf, size_t len);
/* The fault of this process's registry (for failures with no rank). */
struct pg_fault *pg_process_fault(void);
/* A line on stderr, "pprpc: ..." with syslog priority prio (3 err, 4
 * warning, 6 info) under journald: for what must be out before an exit. */
void pg_say(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- monitor.c ------------------------------------------------------------------ */

/* The liveness watchdog: a thread with a connection of its own to every
 * rank, PINGing each every PPRPC_LIVENESS_MS (default 1000; 0 = off) and
 * raising the fault when one does not answer within
 * PPRPC_LIVENESS_TIMEOUT_MS (default 4000) or its connection closes.
 * Returns 0 or a negative code (err). */
int pg_monitor_start(struct pg_registry *pr, char *err, size_t errlen);

/* ---- buffer.c, backend.c ------------------------------------------------------------------ */

/* The context of a ggml buffer / backend, or NULL when it is not one of
 * ours. */
struct pg_buffer *pg_buffer_of(ggml_backend_buffer_t buf);
struct pg_backend *pg_backend_of(ggml_backend_t backend);

/* ---- device.c ------------------------------------------------------------------ */

extern const struct ggml_backend_device_i pg_device_iface;
/* What the rank's STATS say of one of its devices (the "devices" list,
 * info.*). */
struct pg_dev_info {
	uint32_t index;
	const char *name, *kind, *description, *ggml_version;  /* never NULL */
	uint64_t ggml_alignment, ggml_max_size;
	int maps_files;          /* BUFFER_ALLOC with a file is served */
};
/* Make the ggml device for device `index` of rank r (info from STATS). */
int pg_device_create(struct pg_registry *reg, struct pg_rank *r, const struct pg_dev_info *di, int ggml_index,
		     struct pg_device **ret_dev, char *err, size_t errlen);
/* Item i of the "devices" list of s.  The strings are s's. */
void pg_dev_info_get(const pprpc_stats *s, int i, struct pg_dev_info *di);
void pg_device_destroy(struct pg_device *d);

/* ---- buffer.c ------------------------------------------------------------------ */

extern const struct ggml_backend_buffer_type_i pg_buft_iface;
/* host_buffer.c: the device's host buffer type (NULL where the rank is not
 * on this host or PPRPC_HOST_PAGES=0) */
void pg_host_buft_init(struct pg_device *d);
ggml_backend_buffer_type_t pg_host_buft(struct pg_device *d);
/* Where a tensor's bytes are on its rank: buffer handle and offset.  Returns
 * 0, or -1 when the tensor is not in one of our buffers (err says why). */
int pg_tensor_loc(const struct ggml_tensor *t, struct pg_buffer **ret_buf, uint64_t *ret_off);
/* The alloc size ggml asks of the buffer type (GGML_ALLOC_SIZE when the rank's
 * answer may differ from ggml_nbytes). */
size_t pg_alloc_size(struct pg_device *d, const struct ggml_tensor *t);

/* Queue writes of size bytes at offset into t (at buffer offset off);
 * read them (async: queued, data valid after a synchronize).  With the
 * rank's lock; a failure is a rank fault naming command (pg_fatal). */
void pg_buffer_set(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, const void *data, size_t offset,
		   size_t size, const char *command);
void pg_buffer_get(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, void *data, size_t offset,
		   size_t size, int async, const char *command);
/* Queue a write of size bytes at buffer offset off; with key (32 bytes)
 * the rank keeps them in its weights cache (pprpc_weights.h).  With the
 * rank's lock. */
void pg_buffer_set_keyed(struct pg_buffer *b, uint64_t off, const void *data, size_t size, const uint8_t *key,
			 const char *command);
/* The device's buffer over llama.cpp's mapping of the model (ptr, size):
 * the rank's own mapping of its copy, else a buffer each weight is filled
 * or sent into as llama.cpp places it (init_tensor).  NULL on failure. */
ggml_backend_buffer_t pg_buffer_from_host_ptr(ggml_backend_dev_t dev, void *ptr, size_t size, size_t max_tensor_size);
/* Bytes per frame for rank r. */
uint64_t pg_chunk_bytes(const struct pg_rank *r);

/* ---- weights.c ------------------------------------------------------------------ */

/* PPRPC_WEIGHTS*, PPRPC_SUMS_DIR; gives every rank the registry's state. */
int pg_weights_init(struct pg_registry *pr, char *err, size_t errlen);
void pg_weights_free(struct pg_weights *w);
/* set_tensor of size bytes at buffer offset off: a weight the rank fills
 * from its model file or cache, else sends with a cache key.  0 when done
 * (filled or sent), 1 when this is no weight to try (the caller sends).
 * Without the rank's lock. */
int pg_weights_set(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, const void *data, size_t size);
/* Whether devices that can may take host pointers (PPRPC_WEIGHTS_MAP). */
int pg_weights_maps(const struct pg_weights *w);
/* Whether d may take host pointers now: its rank maps files, and has a
 * copy of a GGUF file this process maps (asked once per file and device,
 * by mapping a page of it).  A device whose rank has none allocates and is
 * sent or filled as usual: a buffer over llama.cpp's range would cost its
 * whole size, other devices' layers included.  Without locks held. */
int pg_weights_rank_has_model(struct pg_device *d);
/* The file and offset the n bytes at p of this process's mappings are:
 * 0 with the file's identity, the offset and the rank-side hint, or -1 with
 * why not.  Without the rank's lock. */
int pg_weights_locate(struct pg_weights *w, const void *p, size_t n, pprpc_file_id *id, uint64_t *ret_off,
		      char *hint, size_t hintlen, char *why, size_t whylen);
/* size bytes of rank r's copy of file were mapped as a buffer (summary). */
void pg_weights_mapped(struct pg_registry *pr, struct pg_rank *r, uint64_t size, const char *file);
/* The load is over (a compute): its summary line, once. */
void pg_weights_done(struct pg_registry *pr);

/* ---- copy.c ------------------------------------------------------------------ */

/* Copy n bytes between two of our buffers (TENSOR_COPY on one device, else
 * SEND/RECV daemon to daemon), queued on both sides.  Takes the locks. */
int pg_copy_between(struct pg_buffer *sb, uint64_t soff, struct pg_buffer *db, uint64_t doff, size_t n);

/* ---- backend.c ------------------------------------------------------------------ */

ggml_backend_t pg_backend_new(struct pg_device *d);

/* ---- events.c ------------------------------------------------------------------ */

ggml_backend_event_t pg_event_new(ggml_backend_dev_t dev);
void pg_event_free(ggml_backend_dev_t dev, ggml_backend_event_t ev);
void pg_event_synchronize(ggml_backend_dev_t dev, ggml_backend_event_t ev);
void pg_event_record(ggml_backend_t backend, ggml_backend_event_t ev);
void pg_event_wait(ggml_backend_t backend, ggml_backend_event_t ev);
/* FENCE on the device's queue; a failure reported there is a rank fault. */
void pg_device_sync(struct pg_device *d, const char *why);

/* ---- serialize.c ------------------------------------------------------------------ */

/* A ggml graph (or one op with its sources) in wire form (pprpc_ggml.h). */
struct pg_wire {
	pprpc_ggml_tensor *t;    /* strides as sent */
	size_t n, cap;
	int32_t *nodes;
	size_t nnodes;
	const struct ggml_tensor **ptr;  /* the tensor behind each index */
	uint64_t *bufs;          /* distinct buffer handles referenced */
	size_t nbufs, bufcap;
	/* pointer -> index map (open addressing) */
	const struct ggml_tensor **keys;
	int32_t *vals;
	size_t mapcap, mapused;
	int with_buffers;        /* 0: placement left out (supports / alloc-size queries) */
	int with_names;
	struct pg_device *dev;
	char err[256];
};

/* Serialize the graph's nodes, in order, with every tensor they read.
 * Sources that are not nodes of this graph travel as plain tensors (op
 * NONE: they are data, not work), views keep their view source. */
int pg_wire_graph(struct pg_wire *w, struct pg_device *d, const struct ggml_cgraph *g, int with_names);

/* replay.c: the last PG_SNAPS graphs a device ran, recognised without
 * serializing.  pg_snap_take records g (as w serialized it) for cache entry
 * e; a later pg_snap_match returns e when g is such a graph unchanged (the
 * same node list, and every tensor its serialization read holds the same
 * fields), so its serialization would be the same bytes; NULL otherwise.
 * Snapshots go with their entry (pg_snap_forget, from the cache's
 * eviction; NULL: all of them). */
#define PG_SNAPS 8
void pg_snap_take(struct pg_device *d, const struct ggml_cgraph *g, const struct pg_wire *w,
		  struct pg_cache_entry *e);
struct pg_cache_entry *pg_snap_match(struct pg_device *d, const struct ggml_cgraph *g);
void pg_snap_forget(struct pg_device *d, const struct pg_cache_entry *e);
/* One op with its sources (no placement, no names): supports/alloc-size. */
int pg_wire_op(struct pg_wire *w, struct pg_device *d, const struct ggml_tensor *op, int32_t *ret_node);
void pg_wire_free(struct pg_wire *w);
/* w as libpprpc takes it: a graph on device, or the op query of node
 * (on w's device).  They point into w. */
void pg_wire_graph_desc(const struct pg_wire *w, uint32_t device, pprpc_ggml_graph_desc *g);
void pg_wire_op_desc(const struct pg_wire *w, int32_t node, pprpc_ggml_op_desc *op);
/* Packed bytes of w as a GgmlGraphCreate (the graph cache key) or as the op
 * query (the op caches' key).  malloc'ed. */
int pg_wire_pack_graph(const struct pg_wire *w, uint32_t device, uint8_t **ret, size_t *ret_len);
int pg_wire_pack_op(const struct pg_wire *w, int32_t node, uint8_t **ret, size_t *ret_len);

/* ---- dump.c -------------------------------------------------------------------- */

/* PPRPC_DUMP_GRAPHS=DIR: write a created graph's packed message there. */
void pg_dump_graph(const struct pg_device *d, const uint8_t *msg, size_t len);

/* ---- cache.c: ggml-pprpc/cache.h ---- */

/* ---- graphs.c ------------------------------------------------------------------ */

/* The daemon graph for g: a cached handle when the serialization is
 * byte-identical to one created before, else GGML_GRAPH_CREATE; 0 when g
 * has no node that computes anything.  *ran is set when the create also
 * queued the run (d->create_run): nothing more to send.  With the rank's
 * lock held.  Returns 0 or a negative code (message in err). */
int pg_graph_get(struct pg_device *d, const struct ggml_cgraph *g, pprpc_graph *ret, int *ran, char *err,
		 size_t errlen);
/* A buffer is going away: free the cached graphs that use it. */
void pg_graphs_drop_buffer(struct pg_device *d, pprpc_buffer buf);
/* Per-device caches (graphs; supports and alloc size). */
int pg_caches_init(struct pg_device *d);
void pg_caches_fini(struct pg_device *d);
/* supports_op through GGML_SUPPORTS, cached by the op's serialization. */
int pg_supports_op(struct pg_device *d, const struct ggml_tensor *op);

/* ---- env.c ------------------------------------------------------------------ */

/* Integer from the environment, def when unset; a malformed value is an
 * error (message in err). */
int pg_env_int(const char *name, long def, long min, long max, long *ret, char *err, size_t errlen);
/* PPRPC_TRACE=PATH: the request trace, written to PATH.PID (NULL when
 * unset; doc/llama.md: Tracing one token). */
int pg_env_trace(pprpc_trace **ret_t, char *err, size_t errlen);

#endif

/*
 * daemon/pprpcd.h — the daemon context.  There are no process-wide mutable
 * globals: everything hangs off struct pprpcd, passed to every part.
 *
 * It belongs to the bottom layer, daemon/core/ (doc/layers.md): every part
 * includes it, so it includes only core/ (and util/, include/): the state
 * it holds by value is of core's types (handle tables, host memory, the
 * staging ring, the log), the rest is pointers to the parts' own.  What the
 * server provides to the parts below it goes through d->ops
 * (core/core_impl.h), which pprpcd_bind fills.
 */
#ifndef PPRPC_DAEMON_PPRPCD_H
#define PPRPC_DAEMON_PPRPCD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/core/handles.h"
#include "daemon/core/hostmem.h"
#include "daemon/core/log.h"
#include "daemon/core/staging.h"
#include "util/version.h"

#define PPRPCD_MAX_DEVICES 16
#define AFFINITY_MAX_CPUS 1024

/* CPU sets for the event-loop thread and the device workers (and their
 * BLAS / kernel threads).  An empty set means "not pinned".  Parsed and
 * applied by the server (server/options.h, affinity.h). */
struct cpu_affinity {
	uint64_t loop[AFFINITY_MAX_CPUS / 64];
	uint64_t device[AFFINITY_MAX_CPUS / 64];
	int has_loop, has_device;
};

struct device;
struct pprpcd;
struct conn;
struct tcp_listener;
struct peer;
struct rtl_map;
struct xfer;
struct bstat;
struct rdma_ctx;
struct rdma_listener;
struct mconn;
struct deadline;
struct core_ops;

enum { PPRPCD_TRANSPORT_AUTO, PPRPCD_TRANSPORT_TCP, PPRPCD_TRANSPORT_RDMA };

struct pprpcd_opts {
	char listen[300];          /* HOST:PORT */
	char port_file[4096];
	char devices[256];         /* comma-separated */
	int threads;               /* CPU device threads, 0 = all cores */
	uint64_t memory_floor;     /* bytes */
	uint64_t max_bulk;         /* largest bulk payload accepted */
	uint32_t max_meta;
	uint32_t max_buffers;      /* per daemon */
	uint32_t max_graphs;
	uint32_t max_timelines;
	/* Per connection (0 for max_conn_bytes = no cap but the memory floor). */
	uint32_t max_conn_buffers;
	uint64_t max_conn_bytes;   /* device memory footprint, page-rounded */
	uint32_t max_conn_graphs;
	uint32_t max_conn_inflight; /* queued commands + unsent replies */
	uint64_t max_conn_reply_bytes; /* TENSOR_GET copies held for one connection's replies */
	uint32_t max_graph_nodes;  /* <= PPRPC_MAX_GRAPH_NODES */
	int64_t max_graph_gflop;   /* work one graph run may demand: -1 auto (per device), 0 off */
	uint32_t max_conns;        /* connections served at once (clients and peers) */
	uint64_t hello_timeout_ms; /* HELLO (and a metrics request) must complete within this, 0 = never */
	char auth_key_file[4096];  /* "" = no authentication */
	int insecure_listen;       /* allow a non-loopback listen address without a key */
	uint64_t staging_bytes;    /* SEND staging ring */
	uint32_t drain_ms;         /* SIGTERM: how long queued work may finish */
	uint64_t xfer_timeout_ms;  /* a transfer half without its partner fails after this */
	uint64_t peer_timeout_ms;  /* a peer link silent this long with requests outstanding is dropped */
	uint64_t peer_connect_timeout_ms;  /* a peer link not up (connected, HELLO answered) this long fails */
	int cuda_graphs;           /* capture CUDA graphs on first run, replay after */
	int send_in_place;         /* a SEND with nothing behind it streams from the tensor (xfer/send_sm.h) */
	uint64_t direct_min;       /* smaller SENDs are always captured (xfer/send_sm.h) */
	int cpu_ipc;               /* CPU boundaries between daemons of one host by cross-memory attach */
	int land;                  /* small boundaries between daemons of one host by landing pages (xfer/land.h) */
	uint64_t land_wait_us;     /* how long a RECV waits in place for its landing slot */
	int land_hold;             /* a GPU device's stream holds a landed RECV on the slot's bell (xfer/dest.c) */
	uint64_t land_hold_lead_us; /* a held RECV goes to the GPU this long before its bytes are expected (0: at once) */
	int land_gpu_send;         /* a GPU device's stream fills and rings a SEND's landing slot (xfer/source.c) */
	int wake_ahead;            /* loop and workers awake when a client's next requests are due (server/wake_ahead.h) */
	int ggml_native_gdn;       /* DEVICE_GDN_NATIVE_*: pprpc's GATED_DELTA_NET on ggml devices */
	int ggml_graph_reuse;      /* ggml devices: created graphs carry a graph id (ggml_build.c) */
	uint64_t ipc_pool_bytes;   /* IPC staging pool per device (0: 1 GiB GPU, staging size CPU) */
	char metrics_listen[300];  /* Prometheus endpoint, "" = off */
	char model_dir[4096];      /* the rank's model files (weights filled from them), "" = none */
	int map_model_files;       /* host-memory devices map weights from model_dir (h_map.c) */
	int map_read_ahead;        /* ... and read the mapped ranges ahead (daemon/weights/wahead.c) */
	int map_recall;            /* ... and the last load's at a client's HELLO (daemon/weights/wrecall.c) */
	char weights_cache[4096];  /* content-addressed weights cache, "" = none */
	char trace_file[4096];     /* request trace (core/trace.h), "" = off */
	uint64_t weights_cache_bytes;  /* its bound */
	int transport;             /* PPRPCD_TRANSPORT_*: peer links and the listener */
	uint32_t rdma_chunk;       /* RDMA ring geometry (rdma_ring.h) */
	uint32_t rdma_tx_depth;
	uint32_t rdma_rx_depth;
	uint32_t rdma_bulk_threshold;  /* 0: PPRPC_RDMA_BULK=off */
	uint32_t rdma_bulk_threshold_set;  /* the threshold, kept while bulk is off */
	struct cpu_affinity affinity;
	char config_path[4096];
	int log_level;
};

/* Clients' requests of one message type in one phase (conn.c: a client
 * connection loads until its first graph or boundary request, then runs), and the
 * tensor bytes they named (dispatch.h: handler.bytes).  STATS
 * request_counts. */
enum { PPRPCD_PHASE_LOAD, PPRPCD_PHASE_RUN, PPRPCD_PHASES };
#define PPRPCD_REQ_TYPES 40  /* >= MSG_TYPE_COUNT (conn.c asserts it) */
struct pprpcd_req_count {
	uint64_t requests;
	uint64_t bytes;
};

struct pprpcd_stats {
	uint64_t connections_total;
	uint64_t protocol_errors;
	uint64_t requests;
	uint64_t request_errors;
	uint64_t fills, fills_failed;  /* TENSOR_FILL (h_fill.c) */
	/* clients' host pages (h_hostpage.c): mapped, of them page-locked;
	 * TENSOR_GETs that landed in one and their bytes (h_tensor.c) */
	uint64_t host_pages, host_pages_pinned, host_page_gets, host_page_bytes;
	struct pprpcd_req_count by_type[PPRPCD_PHASES][PPRPCD_REQ_TYPES];
};

/* What a part keeps per connection (transfers it serves, waits held on a
 * device for the connection's streams) is dropped by a hook the part
 * registers when it starts (pprpcd_on_conn_close), not by the connection
 * layer calling into it: server/conn.c knows no part behind the handlers.
 * Hooks run on the loop thread, in registration order, once the transport
 * of c closed and its queued work is cancelled, before the objects c owns
 * are retired (objects/owner.h). */
typedef void (*pprpcd_conn_hook)(struct pprpcd *d, struct conn *c);
#define PPRPCD_MAX_CONN_HOOKS 8

struct pprpcd {
	uv_loop_t *loop;
	const struct core_ops *ops;        /* the server's, for the parts below it (pprpcd_bind) */
	struct pprpcd_opts opts;
	struct log_cfg log;
	struct tcp_listener *listener;
	struct rdma_ctx *rdma;             /* NULL when RDMA is off or unavailable */
	struct rdma_listener *rdma_listener;
	char rdma_status[256];             /* why RDMA is not used, or the device serving it */
	uint16_t port;
	struct device *dev[PPRPCD_MAX_DEVICES];
	uint32_t ndev;
	struct hostmem hostmem;    /* host memory of requests outside buffers (memory floor) */
	struct handle_table buffers;
	struct handle_table graphs;
	struct handle_table timelines;
	struct handle_table hostpages;  /* clients' host pages (objects/hostpage.h) */
	uint64_t hostpage_pinned;       /* bytes of them page-locked (HOSTPAGE_PIN_MAX) */
	/* Timeline values and every worker blocked in WAIT (timeline.h). */
	pthread_mutex_t tl_lock;
	pthread_cond_t tl_cond;
	struct tl_gpu_wait *gpu_waits;   /* WAITs held on a device stream (tl_lock) */
	atomic_int stopping_workers;
	struct peer *peers;        /* outbound links to other ranks (peer.c) */
	uint64_t peer_links;       /* links opened so far: each one's serial (peer.c) */
	struct rtl_map *mirrors;   /* remote timelines waited on (peer/mirror.c) */
	/* Stage-boundary transfers (daemon/xfer). */
	struct xfer *xfer;             /* the part's context (xfer_impl.h) */
	struct staging staging;
	struct bstat *bstats;
	struct device *staging_pinned_by;  /* whose backend page-locked the staging ring */
	char boot_id[40];              /* this host's, for IPC between daemons */
	int xfer_ready;
	struct conn *conns;        /* doubly linked list of live connections */
	pprpcd_conn_hook conn_hooks[PPRPCD_MAX_CONN_HOOKS];  /* pprpcd_on_conn_close */
	uint32_t nconn_hooks;
	uint32_t nconns;           /* on that list */
	uint64_t conns_refused;    /* accepted and closed at once: max-conns reached */
	uint64_t next_conn_id;
	struct pprpcd_stats stats;
	uint64_t start_ms;
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_timer_t tick;           /* watchdog pings, STATUS lines, drain checks */
	uint64_t watchdog_usec;
	uint64_t drain_deadline;   /* loop time (ms) when draining ends, 0 = not draining */
	struct deadline *deadline; /* the exit deadline's thread (deadline.c), once shutdown began */
	uint64_t last_status_ms;
	uv_tcp_t metrics;
	int metrics_on;
	struct mconn *mconns;      /* metrics requests being served (metrics.c) */
	uint32_t nmconns;
	char placement[512];       /* effective CPU placement */
	char unavail[PPRPCD_MAX_DEVICES][256];  /* configured devices that cannot run, and why */
	uint32_t nunavail;
	int stopping;
	/* creates and large host allocations on libuv's threadpool (h_ggml.c,
	 * h_buffer.c): the devices they use stay open until the last comes
	 * back (pprpcd_conn_gone) */
	uint32_t async_creates;
	struct trace *trace;       /* trace-file (core/trace.h), NULL when off */
	struct wake_ahead *wake;   /* server/wake_ahead.h, NULL when off */
	struct wsrc *weights;      /* model-dir and weights-cache (daemon/weights), NULL when neither */
	/* Shared key (proto/auth.h); auth_key_len 0 = no authentication. */
	uint8_t auth_key[4096];
	size_t auth_key_len;
};

#define LOG(d, lvl, ...) log_msg(&(d)->log, (lvl), __VA_ARGS__)

/* The daemon's life (start, run, stop) is the server's: server/server.h;
 * its settings are read by server/options.h. */

/* The services of the bottom layer (core/core.c), for every part. */

/* Register fn to run when any connection closes (see pprpcd_conn_hook);
 * at start, before the first connection.  PPRPC_ELIMIT past
 * PPRPCD_MAX_CONN_HOOKS (a build defect, reported at start). */
int pprpcd_on_conn_close(struct pprpcd *d, pprpcd_conn_hook fn);
/* Run the hooks for c (server/conn.c, as c's transport closes). */
void pprpcd_conn_closed(struct pprpcd *d, struct conn *c);

/* Wake every device worker to re-check commands that were not ready
 * (through d->ops: the server knows the queues). */
void pprpcd_kick_queues(struct pprpcd *d);

/* Device by wire index, NULL if out of range. */
struct device *pprpcd_device(struct pprpcd *d, uint32_t index);

#endif

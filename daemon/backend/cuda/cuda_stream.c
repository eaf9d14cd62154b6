/*
 * daemon/backend/cuda/cuda_stream.c — the CUDA backend's streams and events:
 * one CUDA stream per pprpc stream, GRAPH_RUN with CUDA-graph replay,
 * timeline WAITs held on the GPU and SIGNALs written from the stream.
 *
 * WAITs, SIGNALs and completions are cuda_memops.h's, on the pprpc stream's
 * CUDA stream.  Kernels report data-dependent failures (an id outside its
 * table) in the stream's mapped status word, which the completion of a
 * graph run reads.
 *
 * Each CUDA stream has its own kernel workspace, cuBLAS handle and status
 * word: two pprpc streams of one device run concurrently, and one held by a
 * wait must not hold the other (a shared workspace would need an ordering
 * between them, which is the deadlock this avoids).  Streams of closed
 * connections are kept and reused: destroying a cuBLAS handle or freeing
 * the workspace may wait for the whole device, which can be held by a
 * timeline wait that only this thread would release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/device/backend_impl.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include "daemon/backend/cuda/cuda_backend.h"

/* Captured graphs kept per graph: one per CUDA stream that ran it. */
#define GRAPH_EXECS 4

/* ---- per-stream contexts ------------------------------------------------------ */

static void stream_destroy(struct cuda_stream *s)
{
	if (s->kctx.blas)
		kern_cuda_blas_destroy(s->kctx.blas);
	if (s->kctx.workspace)
		cudaFree(s->kctx.workspace);
	if (s->status_host)
		cudaFreeHost(s->status_host);
	if (s->stream)
		cudaStreamDestroy(s->stream);
	free(s);
}

static int stream_create(struct cuda_dev *c, struct cuda_stream **ret, char *err, size_t errlen)
{
	struct cuda_stream *s = calloc(1, sizeof(*s));
	char why[200] = "";
	cudaError_t e;

	if (!s)
		return PPRPC_ENOMEM;
	s->c = c;
	s->kctx.device = c->ordinal;
	/* pprpc_gdn_runs_total shows which GATED_DELTA_NET form ran here too */
	s->kctx.gdn_stats = &c->dev->gdn_stats;
	if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaMalloc(&s->kctx.workspace, CUDA_WORKSPACE_BYTES)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&s->status_host, sizeof(int32_t), cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&s->kctx.status, s->status_host, 0)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: a CUDA stream with its %u MiB workspace: %s", c->name,
			 CUDA_WORKSPACE_BYTES >> 20, cudaGetErrorString(e));
		goto fail;
	}
	*s->status_host = 0;
	s->kctx.stream = s->stream;
	s->kctx.workspace_bytes = CUDA_WORKSPACE_BYTES;
	if (kern_cuda_blas_create(s->stream, &s->kctx.blas, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", c->name, why);
		goto fail;
	}
	s->id = ++c->next_stream_id;
	*ret = s;
	return 0;
fail:
	stream_destroy(s);
	return PPRPC_EDEVICE;
}

int cuda_stream_open(void *ctx, void **ret_sctx, char *err, size_t errlen)
{
	struct cuda_dev *c = ctx;
	struct cuda_stream *s;
	int rc;

	pthread_mutex_lock(&c->lock);
	s = c->idle;
	if (s)
		c->idle = s->next;
	pthread_mutex_unlock(&c->lock);
	if (!s) {
		size_t fr = 0, total = 0;

		if (cuda_use(c) < 0) {
			snprintf(err, errlen, "%s: cannot make the device current", c->name);
			return PPRPC_EDEVICE;
		}
		/* The workspace is device memory like any buffer: it must leave
		 * the floor (every connection that runs graphs here has one). */
		if (cudaMemGetInfo(&fr, &total) == cudaSuccess &&
		    (fr < CUDA_WORKSPACE_BYTES || fr - CUDA_WORKSPACE_BYTES < c->dev->floor)) {
			snprintf(err, errlen,
				 "%s: a CUDA stream for this connection needs a %u MiB workspace, which would leave less "
				 "than the memory floor (%zu MiB free)",
				 c->name, CUDA_WORKSPACE_BYTES >> 20, fr >> 20);
			return PPRPC_EFLOOR;
		}
		pthread_mutex_lock(&c->lock);
		rc = stream_create(c, &s, err, errlen);
		pthread_mutex_unlock(&c->lock);
		if (rc < 0)
			return rc;
	}
	s->next = NULL;
	*ret_sctx = s;
	return 0;
}

/* Back to the idle list: its work may still run, which is harmless (the
 * next user's work queues behind it on the same CUDA stream). */
void cuda_stream_close(void *ctx, void *sctx)
{
	struct cuda_dev *c = ctx;
	struct cuda_stream *s = sctx;

	pthread_mutex_lock(&c->lock);
	s->next = c->idle;
	c->idle = s;
	pthread_mutex_unlock(&c->lock);
}

int cuda_streams_init(struct cuda_dev *c, char *err, size_t errlen)
{
	struct cuda_stream *s;
	int rc;

	/* One stream context now: a missing cuBLAS fails the open, not the
	 * first GRAPH_RUN. */
	pthread_mutex_lock(&c->lock);
	rc = stream_create(c, &s, err, errlen);
	if (rc == 0) {
		s->next = c->idle;
		c->idle = s;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	cuda_slots_init(&c->slots, c->ordinal);
	return 0;
}

void cuda_streams_fini(struct cuda_dev *c)
{
	while (c->idle) {
		struct cuda_stream *s = c->idle;

		c->idle = s->next;
		cudaStreamSynchronize(s->stream);
		stream_destroy(s);
	}
	cuda_slots_fini(&c->slots);
}

int cuda_slot_alloc(void *ctx, volatile uint64_t **ret_slot)
{
	return cuda_slots_alloc(&((struct cuda_dev *)ctx)->slots, ret_slot);
}

void cuda_slot_free(void *ctx, volatile uint64_t *slot)
{
	cuda_slots_free(&((struct cuda_dev *)ctx)->slots, slot);
}

/* ---- graphs ------------------------------------------------------------------- */

/* Enqueue every node of g on s (plain launches, or inside a capture). */
static int launch_nodes(struct cuda_stream *s, const struct graph *g, char *err, size_t errlen)
{
	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		struct kern_tensor *src[PPRPC_MAX_SRC];
		char why[200] = "";
		int rc;

		for (int k = 0; k < n->nsrc; k++)
			src[k] = &g->t[n->src[k]];
		rc = kern_cuda_run(&s->kctx, n->op, &n->p, src, n->nsrc, &g->t[n->dst], why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errlen, "node %d (%s) failed: %s", i, kern_op_name(n->op), why);
			return rc;
		}
	}
	return 0;
}

/* Per-graph CUDA state: one instantiated capture per CUDA stream that ran
 * the graph (a capture bakes in that stream's workspace and status word),
 * or why there is none. */
struct cuda_graph_state {
	struct {
		uint64_t sid;
		cudaGraphExec_t exec;
		uint64_t last_use;
	} e[GRAPH_EXECS];
	uint64_t clock;
	int failed;               /* capture impossible: plain launches from now on */
};

/* The exec slot of stream s: found, or the least recently used one
 * (emptied) for a new capture. */
static int exec_slot(struct cuda_graph_state *st, uint64_t sid)
{
	int lru = 0;

	for (int i = 0; i < GRAPH_EXECS; i++) {
		if (st->e[i].exec && st->e[i].sid == sid)
			return i;
		if (!st->e[i].exec || (st->e[lru].exec && st->e[i].last_use < st->e[lru].last_use))
			lru = i;
	}
	if (st->e[lru].exec) {
		cudaGraphExecDestroy(st->e[lru].exec);
		st->e[lru].exec = NULL;
	}
	st->e[lru].sid = sid;
	return lru;
}

/*
 * The first run of a graph on a stream is captured into a CUDA graph and
 * every later run replays it: one launch instead of one per node (and no
 * per-node host work).  A graph whose capture fails (an op that cannot be
 * captured) falls back to plain launches for good; the device's counters
 * say which happened.  The tensors' addresses are fixed for the graph's
 * lifetime, so a capture never goes stale.
 */
static int run_captured(struct cuda_stream *s, struct graph *g, char *err, size_t errlen)
{
	struct cuda_graph_state *st = g->dev_priv;
	cudaGraph_t graph = NULL;
	cudaError_t e;
	int i, rc;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return launch_nodes(s, g, err, errlen);
		g->dev_priv = st;
	}
	if (st->failed)
		return launch_nodes(s, g, err, errlen);
	i = exec_slot(st, s->id);
	if (!st->e[i].exec) {
		if (cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
			st->failed = 1;
			cudaGetLastError();
			return launch_nodes(s, g, err, errlen);
		}
		rc = launch_nodes(s, g, err, errlen);
		e = cudaStreamEndCapture(s->stream, &graph);
		if (rc < 0 || e != cudaSuccess || cudaGraphInstantiate(&st->e[i].exec, graph, 0) != cudaSuccess) {
			/* Not capturable: run it the plain way, now and later. */
			if (graph)
				cudaGraphDestroy(graph);
			st->e[i].exec = NULL;
			st->failed = 1;
			cudaGetLastError();
			return launch_nodes(s, g, err, errlen);
		}
		cudaGraphDestroy(graph);
		s->c->dev->graph_captures++;
	} else {
		s->c->dev->graph_replays++;
	}
	st->e[i].last_use = ++st->clock;
	if ((e = cudaGraphLaunch(st->e[i].exec, s->stream)) != cudaSuccess) {
		snprintf(err, errlen, "%s: graph launch: %s", s->c->name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

static int enqueue_graph(struct cuda_stream *s, struct graph *g, char *err, size_t errlen)
{
	if (cuda_use(s->c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", s->c->name);
		return PPRPC_EDEVICE;
	}
	return s->c->use_graphs ? run_captured(s, g, err, errlen) : launch_nodes(s, g, err, errlen);
}

/* Data-dependent failures found on the GPU (an id outside its table) are
 * reported through the stream's mapped status word (cuda_check_fn: plain
 * memory, no CUDA call). */
static int take_status(void *ctx, char *why, size_t whylen)
{
	struct cuda_stream *s = ctx;
	int rc = *(volatile int32_t *)s->status_host;

	if (rc) {
		*(volatile int32_t *)s->status_host = 0;
		snprintf(why, whylen, "a row id lies outside its table");
	}
	return rc;
}

void cuda_graph_release(void *ctx, struct graph *g)
{
	struct cuda_graph_state *st = g->dev_priv;

	if (st && cuda_use(ctx) == 0)
		for (int i = 0; i < GRAPH_EXECS; i++)
			if (st->e[i].exec)
				cudaGraphExecDestroy(st->e[i].exec);
	free(st);
	g->dev_priv = NULL;
}

/* ---- submissions ---------------------------------------------------------------- */

static int cuda_graph_submit(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct cuda_stream *s = sctx;
	int rc = enqueue_graph(s, g, err, errlen);

	/* A launch error leaves earlier nodes queued; the stream is marked
	 * failed by the caller and nothing waits for them. */
	return rc < 0 ? rc : cuda_completion_add(s->stream, s->c->name, take_status, s, done, arg, err, errlen);
}

static int use(struct cuda_stream *s, char *err, size_t errlen)
{
	if (cuda_use(s->c) == 0)
		return 0;
	snprintf(err, errlen, "%s: cannot make the device current", s->c->name);
	return PPRPC_EDEVICE;
}

static int cuda_wait_submit(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			    size_t errlen)
{
	struct cuda_stream *s = sctx;
	int rc = use(s, err, errlen);

	return rc < 0 ? rc : cuda_memop_wait(&s->c->slots, s->stream, s->c->name, slot, done, arg, err, errlen);
}

static int cuda_write_submit(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			     char *err, size_t errlen)
{
	struct cuda_stream *s = sctx;
	int rc = use(s, err, errlen);

	return rc < 0 ? rc
		      : cuda_memop_write(&s->c->slots, s->stream, s->c->name, slot, value, done, arg, err, errlen);
}

const struct stream_i cuda_stream_i = {
	.graph_submit = cuda_graph_submit,
	.wait_submit = cuda_wait_submit,
	.write_submit = cuda_write_submit,
};

#endif /* PPRPC_HAVE_CUDA */

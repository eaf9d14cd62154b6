/*
 * daemon/backend/cuda/cuda_stream.c — the CUDA backend's streams and events:
 * one CUDA stream per pprpc stream, GRAPH_RUN with CUDA-graph replay,
 * timeline WAITs held on the GPU and SIGNALs written from the stream.
 *
 * A WAIT is cuStreamWaitValue64 on a 64-bit slot of host-mapped memory: the
 * GPU polls it and the CUDA stream stays held until the host stores 1 (the
 * timeline reached the value, or the wait must end: timeline.c).  No CPU
 * thread blocks.  A SIGNAL is cuStreamWriteValue64 of the value into the
 * timeline's slot, followed by a completion callback that publishes it.
 * Both entry points come from the driver at run time
 * (cudaGetDriverEntryPointByVersion), so there is no link-time libcuda.
 *
 * Completion: cudaStreamAddCallback, not cudaLaunchHostFunc, because its
 * callback also runs (with the error) after a device fault; with a host
 * function a faulted context would leave the command pending forever.
 * Callbacks run on a CUDA thread in stream order and make no CUDA call.
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

#include <cuda.h>

#include "daemon/backend/cuda/cuda_backend.h"

/* Host-mapped slots for waits and signals, carved from pages. */
#define SLOT_PAGE_BYTES 65536u
#define SLOTS_PER_PAGE (SLOT_PAGE_BYTES / sizeof(uint64_t))
/* Captured graphs kept per graph: one per CUDA stream that ran it. */
#define GRAPH_EXECS 4

typedef CUresult (*memop_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

static memop_fn wait_value64, write_value64;

struct slot_page {
	struct slot_page *next;
	uint64_t *mem;                 /* SLOTS_PER_PAGE slots */
	uint8_t used[SLOTS_PER_PAGE];
};

/* ---- driver entry points -------------------------------------------------- */

static int resolve(const char *name, memop_fn *ret, char *why, size_t whylen)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !fn) {
		cudaGetLastError();
		snprintf(why, whylen, "the driver has no %s", name);
		return -1;
	}
	*ret = (memop_fn)fn;
	return 0;
}

/* Can this device hold a stream on a 64-bit host-mapped value?  Sets
 * waits_why when not (the queue then holds WAITs until they are decided,
 * and SIGNALs are published by their completion alone). */
static int memops_supported(struct cuda_dev *c)
{
	typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	attr_fn get_attr = NULL;
	int v = 0;

	if (resolve("cuStreamWaitValue64", &wait_value64, c->waits_why, sizeof(c->waits_why)) < 0 ||
	    resolve("cuStreamWriteValue64", &write_value64, c->waits_why, sizeof(c->waits_why)) < 0)
		return 0;
	if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", (void **)&get_attr, 12000, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !get_attr ||
	    get_attr(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, (CUdevice)c->ordinal) != CUDA_SUCCESS) {
		cudaGetLastError();
		v = 0;
	}
	if (!v) {
		snprintf(c->waits_why, sizeof(c->waits_why), "the device has no 64-bit stream memory operations");
		return 0;
	}
	return 1;
}

/* ---- slots ------------------------------------------------------------------- */

static int slot_page_add(struct cuda_dev *c)
{
	struct slot_page *p = calloc(1, sizeof(*p));
	void *dptr = NULL;

	if (!p)
		return PPRPC_ENOMEM;
	/* Portable: GPUs of other ordinals may wait on it too.  The device
	 * address must be the host address (unified addressing): slots are
	 * handed around as host pointers. */
	if (cudaHostAlloc((void **)&p->mem, SLOT_PAGE_BYTES, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess ||
	    cudaHostGetDevicePointer(&dptr, p->mem, 0) != cudaSuccess || dptr != (void *)p->mem) {
		cudaGetLastError();
		if (p->mem)
			cudaFreeHost(p->mem);
		free(p);
		return PPRPC_EDEVICE;
	}
	memset(p->mem, 0, SLOT_PAGE_BYTES);
	p->next = c->pages;
	c->pages = p;
	return 0;
}

/* Slots are only of use with stream memory operations (the pages exist
 * only then). */
int cuda_slot_alloc(void *ctx, volatile uint64_t **ret_slot)
{
	struct cuda_dev *c = ctx;
	int rc = 0;

	if (!c->memops)
		return PPRPC_EUNSUPP;
	pthread_mutex_lock(&c->lock);
	for (int tries = 0; tries < 2; tries++) {
		for (struct slot_page *p = c->pages; p; p = p->next)
			for (size_t i = 0; i < SLOTS_PER_PAGE; i++)
				if (!p->used[i]) {
					p->used[i] = 1;
					p->mem[i] = 0;
					*ret_slot = &p->mem[i];
					goto out;
				}
		if (tries == 0 && (rc = slot_page_add(c)) < 0)
			break;
	}
	if (rc == 0)
		rc = PPRPC_ENOMEM;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void cuda_slot_free(void *ctx, volatile uint64_t *slot)
{
	struct cuda_dev *c = ctx;

	pthread_mutex_lock(&c->lock);
	for (struct slot_page *p = c->pages; p; p = p->next)
		if ((uint64_t *)slot >= p->mem && (uint64_t *)slot < p->mem + SLOTS_PER_PAGE) {
			p->used[(uint64_t *)slot - p->mem] = 0;
			break;
		}
	pthread_mutex_unlock(&c->lock);
}

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
	if (memops_supported(c) && slot_page_add(c) == 0)
		c->memops = true;
	else if (!c->waits_why[0])
		snprintf(c->waits_why, sizeof(c->waits_why), "no host-mapped memory for timeline slots");
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
	while (c->pages) {
		struct slot_page *p = c->pages;

		c->pages = p->next;
		cudaFreeHost(p->mem);
		free(p);
	}
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
 * reported through the stream's mapped status word.  Plain memory: no CUDA
 * call, so callbacks may use it. */
static int take_status(struct cuda_stream *s, char *err, size_t errlen, const char *devname)
{
	int rc = *(volatile int32_t *)s->status_host;

	if (rc) {
		*(volatile int32_t *)s->status_host = 0;
		snprintf(err, errlen, "%s: a row id lies outside its table", devname);
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

struct completion {
	struct cuda_stream *s;
	device_done_fn done;
	void *arg;
	int check_status;        /* a graph ran: read the status word */
	char name[32];
};

static void CUDART_CB on_complete(cudaStream_t stream, cudaError_t status, void *p)
{
	struct completion *cp = p;
	char why[256] = "";
	int rc = 0;

	(void)stream;
	if (status != cudaSuccess) {
		/* cudaGetErrorString only looks the text up: no device work. */
		snprintf(why, sizeof(why), "%s: %s", cp->name, cudaGetErrorString(status));
		rc = PPRPC_EDEVICE;
	} else if (cp->check_status) {
		rc = take_status(cp->s, why, sizeof(why), cp->name);
	}
	cp->done(cp->arg, rc, why[0] ? why : NULL);
	free(cp);
}

/* Queue the completion callback behind what was just enqueued on s. */
static int add_completion(struct cuda_stream *s, int check_status, device_done_fn done, void *arg, char *err,
			  size_t errlen)
{
	struct completion *cp = calloc(1, sizeof(*cp));
	cudaError_t e;

	if (!cp) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	cp->s = s;
	cp->done = done;
	cp->arg = arg;
	cp->check_status = check_status;
	snprintf(cp->name, sizeof(cp->name), "%s", s->c->name);
	if ((e = cudaStreamAddCallback(s->stream, on_complete, cp, 0)) != cudaSuccess) {
		cudaGetLastError();
		free(cp);
		snprintf(err, errlen, "%s: completion callback: %s", s->c->name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

static int cuda_graph_submit(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen)
{
	int rc = enqueue_graph(sctx, g, err, errlen);

	/* A launch error leaves earlier nodes queued; the stream is marked
	 * failed by the caller and nothing waits for them. */
	return rc < 0 ? rc : add_completion(sctx, 1, done, arg, err, errlen);
}

/* One stream memory operation on the slot (none when op is NULL), then the
 * completion callback. */
static int memop_submit(struct cuda_stream *s, memop_fn op, const char *opname, volatile uint64_t *slot,
			uint64_t value, unsigned flags, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct cuda_dev *c = s->c;
	CUresult r;

	if (cuda_use(c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", c->name);
		return PPRPC_EDEVICE;
	}
	if (op && (r = op((CUstream)s->stream, (CUdeviceptr)(uintptr_t)slot, value, flags)) != CUDA_SUCCESS) {
		snprintf(err, errlen, "%s: %s failed (CUresult %d)", c->name, opname, (int)r);
		return PPRPC_EDEVICE;
	}
	return add_completion(s, 0, done, arg, err, errlen);
}

/* The memory operations exist only where the device has them (memops):
 * elsewhere the daemon never passes a slot (holds_waits is off, slots are
 * refused), and these refuse one too rather than call a missing entry. */
static int no_memops(struct cuda_stream *s, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: no stream memory operations: %s", s->c->name, s->c->waits_why);
	return PPRPC_EUNSUPP;
}

static int cuda_wait_submit(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			    size_t errlen)
{
	struct cuda_stream *s = sctx;

	if (slot && !s->c->memops)
		return no_memops(s, err, errlen);
	/* GEQ is a cyclic comparison ((int64_t)(*slot - 1) >= 0): a private
	 * slot going from 0 to 1 is the one safe use. */
	return memop_submit(s, slot ? wait_value64 : NULL, "cuStreamWaitValue64", slot, 1, CU_STREAM_WAIT_VALUE_GEQ,
			    done, arg, err, errlen);
}

static int cuda_write_submit(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			     char *err, size_t errlen)
{
	struct cuda_stream *s = sctx;

	if (!s->c->memops)
		return no_memops(s, err, errlen);
	return memop_submit(s, write_value64, "cuStreamWriteValue64", slot, value, CU_STREAM_WRITE_VALUE_DEFAULT,
			    done, arg, err, errlen);
}

const struct stream_i cuda_stream_i = {
	.graph_submit = cuda_graph_submit,
	.wait_submit = cuda_wait_submit,
	.write_submit = cuda_write_submit,
};

#endif /* PPRPC_HAVE_CUDA */

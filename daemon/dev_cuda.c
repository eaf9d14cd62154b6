/*
 * daemon/dev_cuda.c — the CUDA device backend.
 *
 * One stream per device queue; buffers are cudaMalloc'd (and zeroed, like
 * the CPU device's); the memory floor comes from cudaMemGetInfo.  The
 * device's worker thread enqueues each command on the stream and waits for
 * it, so commands complete in order and errors are attributed to the
 * command that caused them (kern_cuda_run reports launch errors, the
 * stream synchronisation reports execution errors with CUDA's own text).
 *
 * cudart is linked statically and cuBLAS is loaded at run time, so the same
 * pprpcd binary starts on a host with no GPU and no CUDA libraries: opening
 * a cuda:N device then fails with CUDA's reason and the daemon serves its
 * other devices.  Kernel modules are loaded eagerly at open (lazy loading
 * deadlocks behind a stream blocked on a timeline wait: GPU-NOTES.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/device_impl.h"
#include "daemon/graph.h"
#include "pprpc_types.h"

#ifdef PPRPC_HAVE_CUDA

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_ops.h"

#define WORKSPACE_BYTES (256u << 20)
/* Other processes' GPU pools opened for IPC copies, kept open: a pool is
 * long-lived (one per source daemon and GPU) and opening one costs about a
 * millisecond.  A full table closes its least recently used entry. */
#define IPC_OPEN_MAX 16

struct ipc_open {
	cudaIpcMemHandle_t h;
	void *ptr;
	uint64_t last_use;
};

struct cuda_dev {
	struct device base;
	int ordinal;
	cudaStream_t stream;
	struct kern_cuda_ctx kctx;
	int32_t *status_host;      /* host view of kctx.status (mapped memory) */
	int use_graphs;            /* capture graphs on first run, replay after */
	struct ipc_open ipc[IPC_OPEN_MAX];  /* worker thread */
	uint64_t ipc_clock;
};

static struct cuda_dev *cdev(struct device *d)
{
	return (struct cuda_dev *)d;
}

/* The worker thread and the loop thread both call in: make the device
 * current on whichever thread this is. */
static int use(struct cuda_dev *c)
{
	return cudaSetDevice(c->ordinal) == cudaSuccess ? 0 : PPRPC_EDEVICE;
}

static int wait_stream(struct cuda_dev *c, char *err, size_t errlen)
{
	cudaError_t e = cudaStreamSynchronize(c->stream);

	if (e == cudaSuccess)
		return 0;
	if (err)
		snprintf(err, errlen, "%s: %s", c->base.name, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

static int cuda_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	size_t fr, total;

	if (use(cdev(d)) < 0 || cudaMemGetInfo(&fr, &total) != cudaSuccess)
		return PPRPC_EDEVICE;
	*ret_free = fr;
	*ret_total = total;
	return 0;
}

static int cuda_alloc(struct device *d, uint64_t size, void **ret_ptr)
{
	void *p = NULL;

	if (use(cdev(d)) < 0 || cudaMalloc(&p, size) != cudaSuccess)
		return PPRPC_ENOMEM;
	/* New buffers read as zeros: no client sees another's old data. */
	if (cudaMemset(p, 0, size) != cudaSuccess) {
		cudaFree(p);
		return PPRPC_EDEVICE;
	}
	*ret_ptr = p;
	return 0;
}

static void cuda_free(struct device *d, void *ptr, uint64_t size)
{
	(void)size;
	if (use(cdev(d)) == 0)
		cudaFree(ptr);
}

static int cuda_fill(struct device *d, void *dst, int value, uint64_t n)
{
	struct cuda_dev *c = cdev(d);

	if (use(c) < 0 || cudaMemsetAsync(dst, value, n, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int memcpy_kind(struct device *d, void *dst, const void *src, uint64_t n, enum cudaMemcpyKind kind)
{
	struct cuda_dev *c = cdev(d);

	if (use(c) < 0 || cudaMemcpyAsync(dst, src, n, kind, c->stream) != cudaSuccess)
		return PPRPC_EDEVICE;
	return wait_stream(c, NULL, 0);
}

static int cuda_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyDeviceToDevice);
}

static int cuda_upload(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyHostToDevice);
}

static int cuda_download(struct device *d, void *dst, const void *src, uint64_t n)
{
	return memcpy_kind(d, dst, src, n, cudaMemcpyDeviceToHost);
}

static int cuda_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err,
			 size_t errlen)
{
	cudaIpcMemHandle_t h;
	cudaError_t e;
	void *p = NULL;

	_Static_assert(sizeof(h) == DEVICE_IPC_HANDLE, "an IPC handle is 64 bytes");
	if (use(cdev(d)) < 0 || (e = cudaMalloc(&p, bytes)) != cudaSuccess ||
	    (e = cudaIpcGetMemHandle(&h, p)) != cudaSuccess) {
		e = cudaGetLastError();
		snprintf(err, errlen, "%s: GPU staging for IPC: %s", d->name, cudaGetErrorString(e));
		if (p)
			cudaFree(p);
		return PPRPC_EDEVICE;
	}
	memcpy(handle, &h, sizeof(h));
	*ret_ptr = p;
	return 0;
}

/* The pool behind handle, opened once (peer access enabled as needed). */
static void *ipc_open(struct cuda_dev *c, const uint8_t *handle, char *err, size_t errlen)
{
	struct ipc_open *slot = &c->ipc[0];
	cudaIpcMemHandle_t h;
	cudaError_t e;

	memcpy(&h, handle, sizeof(h));
	for (int i = 0; i < IPC_OPEN_MAX; i++) {
		if (c->ipc[i].ptr && !memcmp(&c->ipc[i].h, &h, sizeof(h))) {
			c->ipc[i].last_use = ++c->ipc_clock;
			return c->ipc[i].ptr;
		}
		if (!c->ipc[i].ptr || c->ipc[i].last_use < slot->last_use)
			slot = &c->ipc[i];
	}
	if (slot->ptr) {
		cudaIpcCloseMemHandle(slot->ptr);
		slot->ptr = NULL;
	}
	e = cudaIpcOpenMemHandle(&slot->ptr, h, cudaIpcMemLazyEnablePeerAccess);
	if (e != cudaSuccess) {
		cudaGetLastError();
		slot->ptr = NULL;
		snprintf(err, errlen, "%s: opening the source's GPU memory (cudaIpcOpenMemHandle): %s", c->base.name,
			 cudaGetErrorString(e));
		return NULL;
	}
	slot->h = h;
	slot->last_use = ++c->ipc_clock;
	return slot->ptr;
}

static int cuda_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			 size_t errlen)
{
	struct cuda_dev *c = cdev(d);
	uint8_t *src;
	cudaError_t e;

	if (use(c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", d->name);
		return PPRPC_EDEVICE;
	}
	src = ipc_open(c, handle, err, errlen);
	if (!src)
		return PPRPC_EDEVICE;
	/* Device to device: over NVLink when the GPUs have it. */
	if ((e = cudaMemcpyAsync(dst, src + off, n, cudaMemcpyDeviceToDevice, c->stream)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "%s: IPC copy: %s", d->name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

/* Portable: one registration serves every GPU of the process. */
static int cuda_pin_host(struct device *d, void *ptr, uint64_t bytes, int on)
{
	cudaError_t e;

	if (use(cdev(d)) < 0)
		return PPRPC_EDEVICE;
	e = on ? cudaHostRegister(ptr, bytes, cudaHostRegisterPortable) : cudaHostUnregister(ptr);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return PPRPC_EDEVICE;
	}
	return 0;
}

static int cuda_ipc_wait(struct device *d, char *err, size_t errlen)
{
	return wait_stream(cdev(d), err, errlen);
}

/* Enqueue every node of g on the stream (plain launches, or inside a
 * capture). */
static int launch_nodes(struct cuda_dev *c, const struct graph *g, char *err, size_t errlen)
{
	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		struct kern_tensor *src[PPRPC_MAX_SRC];
		char why[200] = "";
		int rc;

		for (int s = 0; s < n->nsrc; s++)
			src[s] = &g->t[n->src[s]];
		rc = kern_cuda_run(&c->kctx, n->op, &n->p, src, n->nsrc, &g->t[n->dst], why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errlen, "node %d (%s) failed: %s", i, kern_op_name(n->op), why);
			return rc;
		}
	}
	return 0;
}

/* Per-graph CUDA state: the instantiated capture, or why there is none. */
struct cuda_graph_state {
	cudaGraphExec_t exec;
	int failed;               /* capture impossible: plain launches from now on */
};

/*
 * The first run of a graph is captured into a CUDA graph and every later
 * run replays it: one launch instead of one per node (and no per-node
 * host work).  A graph whose capture fails (an op that cannot be captured)
 * falls back to plain launches for good; the device's counters say which
 * happened.  The tensors' addresses are fixed for the graph's lifetime, so
 * a capture never goes stale.
 */
static int run_captured(struct cuda_dev *c, struct graph *g, char *err, size_t errlen)
{
	struct cuda_graph_state *st = g->dev_priv;
	cudaGraph_t graph = NULL;
	cudaError_t e;
	int rc;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return launch_nodes(c, g, err, errlen);
		g->dev_priv = st;
	}
	if (st->failed)
		return launch_nodes(c, g, err, errlen);
	if (!st->exec) {
		if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
			st->failed = 1;
			cudaGetLastError();
			return launch_nodes(c, g, err, errlen);
		}
		rc = launch_nodes(c, g, err, errlen);
		e = cudaStreamEndCapture(c->stream, &graph);
		if (rc < 0 || e != cudaSuccess || cudaGraphInstantiate(&st->exec, graph, 0) != cudaSuccess) {
			/* Not capturable: run it the plain way, now and later. */
			if (graph)
				cudaGraphDestroy(graph);
			st->exec = NULL;
			st->failed = 1;
			cudaGetLastError();
			return launch_nodes(c, g, err, errlen);
		}
		cudaGraphDestroy(graph);
		c->base.graph_captures++;
	} else {
		c->base.graph_replays++;
	}
	if ((e = cudaGraphLaunch(st->exec, c->stream)) != cudaSuccess) {
		snprintf(err, errlen, "%s: graph launch: %s", c->base.name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

static int cuda_graph_run(struct device *d, struct graph *g, char *err, size_t errlen)
{
	struct cuda_dev *c = cdev(d);
	int rc;

	if (use(c) < 0) {
		snprintf(err, errlen, "%s: cannot make the device current", d->name);
		return PPRPC_EDEVICE;
	}
	rc = c->use_graphs ? run_captured(c, g, err, errlen) : launch_nodes(c, g, err, errlen);
	if (rc < 0) {
		wait_stream(c, NULL, 0);
		return rc;
	}
	if (wait_stream(c, err, errlen) < 0)
		return PPRPC_EDEVICE;
	/* Data-dependent failures found on the GPU (an id outside its table)
	 * are reported through the mapped status word. */
	rc = *(volatile int32_t *)c->status_host;
	if (rc) {
		*(volatile int32_t *)c->status_host = 0;
		snprintf(err, errlen, "%s: a row id lies outside its table", d->name);
		return rc;
	}
	return 0;
}

static void cuda_graph_release(struct device *d, struct graph *g)
{
	struct cuda_graph_state *st = g->dev_priv;

	if (st && st->exec && use(cdev(d)) == 0)
		cudaGraphExecDestroy(st->exec);
	free(st);
	g->dev_priv = NULL;
}

static void cuda_destroy(struct device *d)
{
	struct cuda_dev *c = cdev(d);

	if (use(c) == 0) {
		for (int i = 0; i < IPC_OPEN_MAX; i++)
			if (c->ipc[i].ptr)
				cudaIpcCloseMemHandle(c->ipc[i].ptr);
		if (c->kctx.blas)
			kern_cuda_blas_destroy(c->kctx.blas);
		if (c->kctx.workspace)
			cudaFree(c->kctx.workspace);
		if (c->status_host)
			cudaFreeHost(c->status_host);
		if (c->stream)
			cudaStreamDestroy(c->stream);
	}
	free(c);
}

static const struct device_ops cuda_ops = {
	.kind = "cuda",
	.host_visible = false,
	.mem_info = cuda_mem_info,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.fill = cuda_fill,
	.copy = cuda_copy,
	.upload = cuda_upload,
	.download = cuda_download,
	.graph_run = cuda_graph_run,
	.graph_release = cuda_graph_release,
	.ipc_pool = cuda_ipc_pool,
	.ipc_copy = cuda_ipc_copy,
	.ipc_wait = cuda_ipc_wait,
	.pin_host = cuda_pin_host,
	.destroy = cuda_destroy,
};

int cuda_device_create(struct device **ret_dev, int ordinal, int use_graphs, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	struct cuda_dev *c;
	cudaError_t e;
	int n = 0;
	char why[200];

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(err, errlen, "cuda:%d unavailable: %s", ordinal, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	if (ordinal < 0 || ordinal >= n) {
		snprintf(err, errlen, "cuda:%d unavailable: this host has %d CUDA device(s)", ordinal, n);
		return PPRPC_EDEVICE;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return PPRPC_ENOMEM;
	c->base.ops = &cuda_ops;
	c->base.ipc_enabled = true;
	c->ordinal = ordinal;
	c->use_graphs = use_graphs;
	c->kctx.device = ordinal;
	/* pprpc_gdn_runs_total shows which GATED_DELTA_NET form ran here too */
	c->kctx.gdn_stats = &c->base.gdn_stats;
	snprintf(c->base.name, sizeof(c->base.name), "cuda:%d", ordinal);
	if ((e = cudaSetDevice(ordinal)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaMalloc(&c->kctx.workspace, WORKSPACE_BYTES)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&c->status_host, sizeof(int32_t), cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&c->kctx.status, c->status_host, 0)) != cudaSuccess) {
		snprintf(err, errlen, "cuda:%d: %s", ordinal, cudaGetErrorString(e));
		cuda_destroy(&c->base);
		return PPRPC_EDEVICE;
	}
	*c->status_host = 0;
	c->kctx.stream = c->stream;
	c->kctx.workspace_bytes = WORKSPACE_BYTES;
	if (kern_cuda_blas_create(c->stream, &c->kctx.blas, why, sizeof(why)) < 0 ||
	    kern_cuda_preload(why, sizeof(why)) < 0) {
		snprintf(err, errlen, "cuda:%d: %s", ordinal, why);
		cuda_destroy(&c->base);
		return PPRPC_EDEVICE;
	}
	snprintf(c->base.desc, sizeof(c->base.desc), "%.80s, sm_%d%d, %.1f GiB", prop.name, prop.major, prop.minor,
		 prop.totalGlobalMem / 1073741824.0);
	*ret_dev = &c->base;
	return 0;
}

#else /* !PPRPC_HAVE_CUDA */

int cuda_device_create(struct device **ret_dev, int ordinal, int use_graphs, char *err, size_t errlen)
{
	(void)ret_dev;
	(void)use_graphs;
	snprintf(err, errlen, "cuda:%d unavailable: this pprpcd was built without CUDA (nvcc not found at build time)",
		 ordinal);
	return PPRPC_EUNSUPP;
}

#endif

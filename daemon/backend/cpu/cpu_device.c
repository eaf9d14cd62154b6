/*
 * daemon/backend/cpu/cpu_device.c — the CPU device: host memory, kernels
 * from kernels/cpu with OpenBLAS, run by the device's worker thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cblas.h>

#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/backend/native/native_graph.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

static void cpu_get_props(void *ctx, struct device_props *ret)
{
	struct cpu_dev *c = ctx;

	snprintf(ret->name, sizeof(ret->name), "cpu");
	snprintf(ret->desc, sizeof(ret->desc), "host CPU, %d threads, OpenBLAS", c->kctx.nthreads);
	ret->kind = "cpu";
	ret->host_visible = true;
	/* A WAIT cannot be held without blocking the worker, which serves
	 * every stream: the queue holds it until its value is reached. */
	ret->holds_waits = false;
	ret->completes_inline = true;
	ret->waits_why[0] = '\0';
	/* Measured on the 2-vCPU development VM: ATTENTION runs at 5-6 Gflop/s
	 * per thread, sgemm several times faster.  32 Gflop per thread is at
	 * most seconds of the device (about 6 s of attention there), not
	 * minutes. */
	ret->graph_gflop_auto = 32 * (uint64_t)c->kctx.nthreads;
	ret->graph_wires = 1u << DEVICE_WIRE_NATIVE;
}

/* MemAvailable less reservations, or the baseline less all the daemon has
 * committed, the smaller (hostmem_free_now): what a buffer may take without
 * crossing the floor, and the free figure DEVICE_INFO and the metrics show. */
static int cpu_mem_info(void *ctx, uint64_t *ret_free, uint64_t *ret_total)
{
	struct cpu_dev *c = ctx;
	uint64_t avail, total;
	int rc = hostmem_meminfo(&avail, &total);

	if (rc < 0)
		return rc;
	*ret_free = hostmem_free_now(c->hostmem, avail);
	*ret_total = total;
	return 0;
}

/* The kernels' workspaces of the hungriest node (nodes run one at a time). */
static uint64_t cpu_graph_scratch(void *ctx, const struct graph *g)
{
	struct cpu_dev *c = ctx;
	uint64_t most = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		struct kern_tensor *src[PPRPC_MAX_SRC];
		uint64_t b;

		for (int s = 0; s < n->nsrc; s++)
			src[s] = &g->t[n->src[s]];
		b = kern_cpu_scratch(&c->kctx, n->op, &n->p, src, n->nsrc, &g->t[n->dst]);
		most = b > most ? b : most;
	}
	return most;
}

/* Every stream runs on the worker with the device's kernel context. */
static int cpu_stream_open(void *ctx, void **ret_sctx, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	*ret_sctx = ctx;
	return 0;
}

static void cpu_stream_close(void *ctx, void *sctx)
{
	(void)ctx, (void)sctx;
}

static void cpu_destroy(void *ctx)
{
	free(ctx);
}

static const struct device_i cpu_device_i = {
	.get_props = cpu_get_props,
	.mem_info = cpu_mem_info,
	NATIVE_GRAPH_OPS,
	.graph_scratch = cpu_graph_scratch,
	.stream_open = cpu_stream_open,
	.stream_close = cpu_stream_close,
	.destroy = cpu_destroy,
};

int cpu_backend_open(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret,
		     char *err, size_t errlen)
{
	struct cpu_dev *c;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (arg[0]) {
		snprintf(err, errlen, "unknown device 'cpu%s' (the CPU device is 'cpu')", arg);
		return PPRPC_EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	c->dev = d;
	c->hostmem = conf->hostmem;
	c->kctx.nthreads = conf->threads > 0 ? conf->threads : (int)(ncpu > 0 ? ncpu : 1);
	/* --threads bounds BLAS too, or every daemon's matmul takes all cores. */
	openblas_set_num_threads(c->kctx.nthreads);
	c->kctx.gdn_stats = &d->gdn_stats;
	ret->dev = &cpu_device_i;
	ret->dev_ctx = c;
	ret->buf = conf->cpu_ipc ? &cpu_buffer_ipc_i : &cpu_buffer_i;
	ret->buf_ctx = c;
	ret->stream = &cpu_stream_i;
	return 0;
}

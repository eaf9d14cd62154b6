/*
 * daemon/backend/cpu/dev_cpu.c — the CPU device backend.
 *
 * Buffers are anonymous mappings committed up front (MAP_POPULATE): the
 * memory floor is checked against MemAvailable, which only drops once pages
 * are touched, so lazily committed buffers would let many allocations pass
 * the check and then overcommit.  Fresh mappings read as zeros, so one
 * client never sees another's freed data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cblas.h>

#include "daemon/device/device_impl.h"
#include "daemon/device/hostmem.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

static int cpu_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	(void)d;
	return hostmem_info(ret_free, ret_total);
}

static int cpu_alloc(struct device *d, uint64_t size, void **ret_ptr)
{
	void *p;

	(void)d;
	if (size == 0 || size > (uint64_t)SIZE_MAX / 2)
		return PPRPC_EINVAL;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return PPRPC_ENOMEM;
	*ret_ptr = p;
	return 0;
}

static void cpu_free(struct device *d, void *ptr, uint64_t size)
{
	(void)d;
	munmap(ptr, (size_t)size);
}

static int cpu_fill(struct device *d, void *dst, int value, uint64_t n)
{
	(void)d;
	memset(dst, value, (size_t)n);
	return 0;
}

static int cpu_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	(void)d;
	memmove(dst, src, (size_t)n);
	return 0;
}

static int cpu_xfer(struct device *d, void *dst, const void *src, uint64_t n)
{
	(void)d;
	memcpy(dst, src, (size_t)n);
	return 0;
}

static int cpu_graph_run(struct device *d, struct graph *g, char *err, size_t errlen)
{
	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		struct kern_tensor *src[PPRPC_MAX_SRC];
		int rc;

		for (int s = 0; s < n->nsrc; s++)
			src[s] = &g->t[n->src[s]];
		rc = kern_cpu_run(&d->kctx, n->op, &n->p, src, n->nsrc, &g->t[n->dst]);
		if (rc < 0) {
			snprintf(err, errlen, "node %d (%s) failed: %s", i, kern_op_name(n->op),
				 rc == PPRPC_ENOMEM ? "out of memory" : "kernel error");
			return rc;
		}
	}
	return 0;
}

static void cpu_destroy(struct device *d)
{
	free(d);
}

/*
 * Cross-memory attach between CPU-device daemons of one host (opt-in,
 * cpu-ipc): the same boundary protocol as CUDA IPC, with the pool being
 * ordinary memory of the source process, named by pid and address, and the
 * destination reading it with one process_vm_readv (a single copy, as MPI
 * libraries do within a node).  It needs ptrace-level access to the source
 * (same user, and Yama ptrace_scope 0 or CAP_SYS_PTRACE), hence opt-in.
 */
struct cma_handle {
	char magic[8];
	uint64_t pid;
	uint64_t addr;
	uint64_t bytes;
};

static const char CMA_MAGIC[8] = "pprpcCMA";

static int cpu_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err,
			size_t errlen)
{
	struct cma_handle h;

	_Static_assert(sizeof(h) <= DEVICE_IPC_HANDLE, "fits an IPC handle");
	if (cpu_alloc(d, bytes, ret_ptr) < 0) {
		snprintf(err, errlen, "cannot map %llu bytes for the IPC pool", (unsigned long long)bytes);
		return PPRPC_ENOMEM;
	}
	memcpy(h.magic, CMA_MAGIC, sizeof(h.magic));
	h.pid = (uint64_t)getpid();
	h.addr = (uint64_t)(uintptr_t)*ret_ptr;
	h.bytes = bytes;
	memset(handle, 0, DEVICE_IPC_HANDLE);
	memcpy(handle, &h, sizeof(h));
	return 0;
}

static int cpu_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			size_t errlen)
{
	struct cma_handle h;
	uint64_t done = 0;

	(void)d;
	memcpy(&h, handle, sizeof(h));
	if (memcmp(h.magic, CMA_MAGIC, sizeof(h.magic)) || off > h.bytes || n > h.bytes - off) {
		snprintf(err, errlen, "not a CPU IPC handle, or outside its pool");
		return PPRPC_EPROTO;
	}
	while (done < n) {
		struct iovec l = { (uint8_t *)dst + done, (size_t)(n - done) };
		struct iovec r = { (void *)(uintptr_t)(h.addr + off + done), (size_t)(n - done) };
		ssize_t k = process_vm_readv((pid_t)h.pid, &l, 1, &r, 1, 0);

		if (k <= 0) {
			snprintf(err, errlen, "process_vm_readv from pid %llu: %s", (unsigned long long)h.pid,
				 k < 0 ? strerror(errno) : "no progress");
			return PPRPC_EDEVICE;
		}
		done += (uint64_t)k;
	}
	return 0;
}

static int cpu_ipc_wait(struct device *d, char *err, size_t errlen)
{
	(void)d, (void)err, (void)errlen;
	return 0; /* process_vm_readv is done when it returns */
}

static const struct device_ops cpu_ops = {
	.kind = "cpu",
	.host_visible = true,
	.mem_info = cpu_mem_info,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.fill = cpu_fill,
	.copy = cpu_copy,
	.upload = cpu_xfer,
	.download = cpu_xfer,
	.graph_run = cpu_graph_run,
	.graph_release = device_graph_release_none,
	.ipc_pool = cpu_ipc_pool,
	.ipc_copy = cpu_ipc_copy,
	.ipc_wait = cpu_ipc_wait,
	.destroy = cpu_destroy,
};

void cpu_device_enable_ipc(struct device *d)
{
	d->ipc_enabled = true;
}

int cpu_device_create(struct device **ret_dev, int threads, char *err, size_t errlen)
{
	struct device *d = calloc(1, sizeof(*d));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	(void)err;
	(void)errlen;
	if (!d)
		return PPRPC_ENOMEM;
	d->ops = &cpu_ops;
	snprintf(d->name, sizeof(d->name), "cpu");
	d->kctx.nthreads = threads > 0 ? threads : (int)(ncpu > 0 ? ncpu : 1);
	/* --threads bounds BLAS too, or every daemon's matmul takes all cores. */
	openblas_set_num_threads(d->kctx.nthreads);
	d->kctx.gdn_stats = &d->gdn_stats;
	snprintf(d->desc, sizeof(d->desc), "host CPU, %d threads, OpenBLAS", d->kctx.nthreads);
	*ret_dev = d;
	return 0;
}

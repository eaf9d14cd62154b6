/*
 * daemon/backend/cpu/cpu_buffer.c — CPU device memory, and boundaries
 * between CPU daemons of one host by cross-memory attach.
 *
 * Buffers are anonymous mappings, faulted in as they are written: the
 * memory floor counts a buffer as committed from allocation, touched or
 * not (hostmem.h, issue 27.10), so nothing needs the pages up front, and
 * prefaulting (MAP_POPULATE) took 256 ms on the event loop for 448 MiB.
 * Fresh mappings read as zeros, so one client never sees another's freed
 * data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "daemon/backend/cpu/cpu_backend.h"
#include "pprpc/types.h"

static int map_anon(uint64_t size, int populate, void **ret_ptr)
{
	void *p;

	if (size == 0 || size > (uint64_t)SIZE_MAX / 2)
		return PPRPC_EINVAL;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
	if (p == MAP_FAILED)
		return PPRPC_ENOMEM;
	*ret_ptr = p;
	return 0;
}

static int cpu_alloc(void *ctx, uint64_t size, void **ret_ptr)
{
	(void)ctx;
	return map_anon(size, 0, ret_ptr);
}

static void cpu_free(void *ctx, void *ptr, uint64_t size)
{
	(void)ctx;
	munmap(ptr, (size_t)size);
}

static int cpu_fill(void *ctx, void *dst, int value, uint64_t n)
{
	(void)ctx;
	memset(dst, value, (size_t)n);
	return 0;
}

static int cpu_copy(void *ctx, void *dst, const void *src, uint64_t n)
{
	(void)ctx;
	memmove(dst, src, (size_t)n);
	return 0;
}

/* Host and device memory are the same memory. */
static int cpu_xfer(void *ctx, void *dst, const void *src, uint64_t n)
{
	(void)ctx;
	memcpy(dst, src, (size_t)n);
	return 0;
}

/*
 * Cross-memory attach between CPU-device daemons of one host (opt-in,
 * cpu-ipc): the same boundary protocol as CUDA IPC, with the exported memory
 * being ordinary memory of the source process, named by pid and address,
 * and the destination reading it with one process_vm_readv (a single copy,
 * as MPI libraries do within a node).  It needs ptrace-level access to the
 * source (same user, and Yama ptrace_scope 0 or CAP_SYS_PTRACE), hence
 * opt-in.
 */
struct cma_handle {
	char magic[8];
	uint64_t pid;
	uint64_t addr;
	uint64_t bytes;
};

static const char CMA_MAGIC[8] = "pprpcCMA";

static int cpu_ipc_export(void *ctx, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen)
{
	struct cma_handle h;

	_Static_assert(sizeof(h) <= DEVICE_IPC_HANDLE, "fits an IPC handle");
	/* The pool is made once per device and does not pass device_alloc,
	 * so nothing counts it as committed: it is faulted in here, and
	 * MemAvailable shows it from then on. */
	(void)ctx;
	if (map_anon(bytes, 1, ret_ptr) < 0) {
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

static int cpu_ipc_copy(void *ctx, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			size_t errlen)
{
	struct cma_handle h;
	uint64_t done = 0;

	(void)ctx;
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

static int cpu_ipc_wait(void *ctx, char *err, size_t errlen)
{
	(void)ctx, (void)err, (void)errlen;
	return 0; /* process_vm_readv is done when it returns */
}

const struct buffer_i cpu_buffer_i = {
	.alloc = cpu_alloc,
	.free = cpu_free,
	.fill = cpu_fill,
	.copy = cpu_copy,
	.upload = cpu_xfer,
	.download = cpu_xfer,
};

const struct buffer_i cpu_buffer_ipc_i = {
	.alloc = cpu_alloc,
	.free = cpu_free,
	.fill = cpu_fill,
	.copy = cpu_copy,
	.upload = cpu_xfer,
	.download = cpu_xfer,
	.ipc_export = cpu_ipc_export,
	.ipc_copy = cpu_ipc_copy,
	.ipc_wait = cpu_ipc_wait,
};

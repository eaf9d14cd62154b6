/* daemon/backend/cuda/cuda_memops.c — slots, stream memory operations and
 * completions on a CUDA stream (cuda_memops.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include <cuda.h>

#include "daemon/backend/cuda/cuda_memops.h"

/* Host-mapped slots for waits and signals, carved from pages. */
#define SLOT_PAGE_BYTES 65536u
#define SLOTS_PER_PAGE (SLOT_PAGE_BYTES / sizeof(uint64_t))

typedef CUresult (*memop_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

/* Resolved once for the process (every device has the same driver). */
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

/* Can this device hold a stream on a 64-bit host-mapped value? */
static int memops_supported(struct cuda_slots *s, int ordinal)
{
	typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	attr_fn get_attr = NULL;
	int v = 0;

	if (resolve("cuStreamWaitValue64", &wait_value64, s->waits_why, sizeof(s->waits_why)) < 0 ||
	    resolve("cuStreamWriteValue64", &write_value64, s->waits_why, sizeof(s->waits_why)) < 0)
		return 0;
	if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", (void **)&get_attr, 12000, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !get_attr ||
	    get_attr(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, (CUdevice)ordinal) != CUDA_SUCCESS) {
		cudaGetLastError();
		v = 0;
	}
	if (!v) {
		snprintf(s->waits_why, sizeof(s->waits_why), "the device has no 64-bit stream memory operations");
		return 0;
	}
	return 1;
}

/* ---- slots ------------------------------------------------------------------- */

static int slot_page_add(struct cuda_slots *s)
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
	p->next = s->pages;
	s->pages = p;
	return 0;
}

void cuda_slots_init(struct cuda_slots *s, int ordinal)
{
	pthread_mutex_init(&s->lock, NULL);
	s->pages = NULL;
	s->waits_why[0] = '\0';
	s->memops = memops_supported(s, ordinal) && slot_page_add(s) == 0;
	if (!s->memops && !s->waits_why[0])
		snprintf(s->waits_why, sizeof(s->waits_why), "no host-mapped memory for timeline slots");
}

void cuda_slots_fini(struct cuda_slots *s)
{
	while (s->pages) {
		struct slot_page *p = s->pages;

		s->pages = p->next;
		cudaFreeHost(p->mem);
		free(p);
	}
	pthread_mutex_destroy(&s->lock);
}

/* Slots are only of use with stream memory operations (the pages exist
 * only then). */
int cuda_slots_alloc(struct cuda_slots *s, volatile uint64_t **ret_slot)
{
	int rc = 0;

	if (!s->memops)
		return PPRPC_EUNSUPP;
	pthread_mutex_lock(&s->lock);
	for (int tries = 0; tries < 2; tries++) {
		for (struct slot_page *p = s->pages; p; p = p->next)
			for (size_t i = 0; i < SLOTS_PER_PAGE; i++)
				if (!p->used[i]) {
					p->used[i] = 1;
					p->mem[i] = 0;
					*ret_slot = &p->mem[i];
					goto out;
				}
		if (tries == 0 && (rc = slot_page_add(s)) < 0)
			break;
	}
	if (rc == 0)
		rc = PPRPC_ENOMEM;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void cuda_slots_free(struct cuda_slots *s, volatile uint64_t *slot)
{
	pthread_mutex_lock(&s->lock);
	for (struct slot_page *p = s->pages; p; p = p->next)
		if ((uint64_t *)slot >= p->mem && (uint64_t *)slot < p->mem + SLOTS_PER_PAGE) {
			p->used[(uint64_t *)slot - p->mem] = 0;
			break;
		}
	pthread_mutex_unlock(&s->lock);
}

/* ---- completions ------------------------------------------------------------- */

struct completion {
	device_done_fn done;
	void *arg;
	cuda_check_fn check;
	void *check_ctx;
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
	} else if (cp->check) {
		char what[224] = "";

		rc = cp->check(cp->check_ctx, what, sizeof(what));
		if (rc < 0)
			snprintf(why, sizeof(why), "%s: %s", cp->name, what);
	}
	cp->done(cp->arg, rc, why[0] ? why : NULL);
	free(cp);
}

int cuda_completion_add(cudaStream_t stream, const char *name, cuda_check_fn check, void *check_ctx,
			device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct completion *cp = calloc(1, sizeof(*cp));
	cudaError_t e;

	if (!cp) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	cp->done = done;
	cp->arg = arg;
	cp->check = check;
	cp->check_ctx = check_ctx;
	snprintf(cp->name, sizeof(cp->name), "%s", name);
	if ((e = cudaStreamAddCallback(stream, on_complete, cp, 0)) != cudaSuccess) {
		cudaGetLastError();
		free(cp);
		snprintf(err, errlen, "%s: completion callback: %s", name, cudaGetErrorString(e));
		return PPRPC_EDEVICE;
	}
	return 0;
}

/* ---- memory operations ------------------------------------------------------- */

/* The memory operations exist only where the device has them (memops):
 * elsewhere the daemon never passes a slot (holds_waits is off, slots are
 * refused), and these refuse one too rather than call a missing entry. */
static int memop(const struct cuda_slots *s, memop_fn op, const char *opname, cudaStream_t stream, const char *name,
		 const volatile uint64_t *slot, uint64_t value, unsigned flags, char *err, size_t errlen)
{
	CUresult r;

	if (!s->memops) {
		snprintf(err, errlen, "%s: no stream memory operations: %s", name, s->waits_why);
		return PPRPC_EUNSUPP;
	}
	if ((r = op((CUstream)stream, (CUdeviceptr)(uintptr_t)slot, value, flags)) != CUDA_SUCCESS) {
		snprintf(err, errlen, "%s: %s failed (CUresult %d)", name, opname, (int)r);
		return PPRPC_EDEVICE;
	}
	return 0;
}

int cuda_memop_wait(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		    device_done_fn done, void *arg, char *err, size_t errlen)
{
	/* GEQ is a cyclic comparison ((int64_t)(*slot - 1) >= 0): a private
	 * slot going from 0 to 1 is the one safe use. */
	int rc = slot ? memop(s, wait_value64, "cuStreamWaitValue64", stream, name, slot, 1, CU_STREAM_WAIT_VALUE_GEQ,
			      err, errlen)
		      : 0;

	return rc < 0 ? rc : cuda_completion_add(stream, name, NULL, NULL, done, arg, err, errlen);
}

int cuda_memop_wait_geq(const struct cuda_slots *s, cudaStream_t stream, const char *name,
			const volatile uint64_t *word, uint64_t value, char *err, size_t errlen)
{
	return memop(s, wait_value64, "cuStreamWaitValue64", stream, name, word, value, CU_STREAM_WAIT_VALUE_GEQ, err,
		     errlen);
}

int cuda_memop_store(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		     uint64_t value, char *err, size_t errlen)
{
	return memop(s, write_value64, "cuStreamWriteValue64", stream, name, slot, value, CU_STREAM_WRITE_VALUE_DEFAULT,
		     err, errlen);
}

int cuda_memop_write(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		     uint64_t value, device_done_fn done, void *arg, char *err, size_t errlen)
{
	int rc = cuda_memop_store(s, stream, name, slot, value, err, errlen);

	return rc < 0 ? rc : cuda_completion_add(stream, name, NULL, NULL, done, arg, err, errlen);
}

#endif /* PPRPC_HAVE_CUDA */

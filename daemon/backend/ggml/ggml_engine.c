/*
 * daemon/backend/ggml/ggml_engine.c — a ggml device, its backend and its
 * buffers (see ggml_engine.h).
 *
 * The byte operations go through the buffer's own interface (ggml's
 * set/get/memset/cpy_tensor on a one-dimensional I8 stand-in tensor over the
 * range), so device memory (ggml-cuda) works as host memory does.  Host
 * buffers need none of it: the device layer moves their bytes itself
 * (ggml_device.c), except when told to stage them (PPRPC_GGML_STAGED, a test
 * of this path on ggml-cpu).
 */
#include "daemon/backend/ggml/ggml_engine.h"

#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/backend/ggml/ggml_cuda_find.h"
#include "daemon/backend/ggml/ggml_load.h"
#include "daemon/core/hostmem.h"
#include "ggml-backend-impl.h"
#include "pprpc/types.h"

typedef void (*set_n_threads_fn)(ggml_backend_t backend, int n_threads);
typedef struct ggml_threadpool *(*tp_new_fn)(struct ggml_threadpool_params *params);
typedef void (*tp_free_fn)(struct ggml_threadpool *tp);
typedef void (*set_tp_fn)(ggml_backend_t backend, struct ggml_threadpool *tp);

static void list_devices(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ggml_backend_dev_count() && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%sggml:%s", i ? ", " : "",
				 ggml_backend_dev_name(ggml_backend_dev_get(i)));

		if (k < 0)
			break;
		used += (size_t)k;
	}
}

/* The backend's threads: --threads, or every core. */
static void setup_threads(struct gge_dev *g, int threads)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(g->dev);
	set_n_threads_fn set_n = reg ? (set_n_threads_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads") : NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int n = threads > 0 ? threads : (int)(ncpu > 0 ? ncpu : 1);

	if (!set_n)
		return;
	set_n(g->backend, n);
	g->threads = n;
}

/* ggml-cpu's persistent thread pool, made by the worker at its first run:
 * a run then wakes threads instead of creating them, and they start from
 * the worker, so they get the CPU set --cpu-affinity gave it (so do
 * OpenMP's, in an OpenMP build of ggml).  Without one ggml makes a pool per
 * run, which is slower, not wrong. */
void gge_dev_worker_init(struct gge_dev *g)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(g->dev);
	tp_new_fn tp_new = reg ? (tp_new_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new") : NULL;
	tp_free_fn tp_free = reg ? (tp_free_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free") : NULL;
	set_tp_fn set_tp = reg ? (set_tp_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_threadpool") : NULL;
	struct ggml_threadpool_params p;

	if (g->worker_ready)
		return;
	g->worker_ready = true;
	if (!g->threads || !tp_new || !tp_free || !set_tp)
		return;
	p = ggml_threadpool_params_default(g->threads);
	g->tp = tp_new(&p);
	if (!g->tp)
		return;
	g->tp_free = tp_free;
	set_tp(g->backend, g->tp);
}

/* A ggml-cuda device's ordinal in pprpcd's runtime (ggml_cuda_find.h). */
static void find_cuda(struct gge_dev *g)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(g->dev);
	struct ggml_backend_dev_props props;

	g->cuda_ordinal = -1;
	if (!reg || strcmp(ggml_backend_reg_name(reg), "CUDA") != 0 || g->host)
		return;
	memset(&props, 0, sizeof(props));
	ggml_backend_dev_get_props(g->dev, &props);
	if (gge_cuda_find(props.device_id, &g->cuda_ordinal, g->cuda_why, sizeof(g->cuda_why)) < 0)
		g->cuda_ordinal = -1;
}

int gge_dev_open(const char *name, int threads, struct gge_dev **ret_g, char *err, size_t errlen)
{
	ggml_backend_dev_t dev;
	struct gge_dev *g;
	char names[200];
	int rc;

	rc = gge_backends_load(err, errlen);
	if (rc < 0)
		return rc;
	dev = ggml_backend_dev_by_name(name);
	if (!dev) {
		list_devices(names, sizeof(names));
		snprintf(err, errlen, "unknown ggml device '%s' (this ggml has: %s)", name, names[0] ? names : "none");
		return PPRPC_EINVAL;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return PPRPC_ENOMEM;
	g->dev = dev;
	snprintf(g->name, sizeof(g->name), "%s", ggml_backend_dev_name(dev));
	g->backend = ggml_backend_dev_init(dev, NULL);
	if (!g->backend) {
		snprintf(err, errlen, "ggml:%s: its backend does not start", g->name);
		rc = PPRPC_EDEVICE;
		goto fail;
	}
	g->buft = ggml_backend_dev_buffer_type(dev);
	g->host = ggml_backend_buft_is_host(g->buft);
	g->alignment = ggml_backend_buft_get_alignment(g->buft);
	g->max_size = ggml_backend_buft_get_max_size(g->buft);
	g->type = ggml_backend_dev_type(dev);
	setup_threads(g, threads);
	find_cuda(g);
	if (g->threads)
		snprintf(g->desc, sizeof(g->desc), "ggml %s: %.60s, %d threads", g->name,
			 ggml_backend_dev_description(dev), g->threads);
	else
		snprintf(g->desc, sizeof(g->desc), "ggml %s: %.90s", g->name, ggml_backend_dev_description(dev));
	*ret_g = g;
	return 0;
fail:
	gge_dev_close(g);
	return rc;
}

void gge_dev_close(struct gge_dev *g)
{
	if (!g)
		return;
	/* the ops' streams and workspaces before the backend */
	gge_dev_ops_fini(g);
	/* The pool goes after the backend that points at it; the staging of
	 * queued uploads after the backend finished with it. */
	if (g->up_ev)
		ggml_backend_event_free(g->up_ev);
	if (g->backend)
		ggml_backend_free(g->backend);
	if (g->pin_buf)
		ggml_backend_buffer_free(g->pin_buf);
	if (g->lend_buf)
		ggml_backend_buffer_free(g->lend_buf);
	if (g->tp)
		g->tp_free(g->tp);
	free(g);
}

/* Host memory is read where the native cpu device reads it: ggml-cpu
 * reports all of it as free, which would make the memory floor a no-op, and
 * both devices must see each other's allocations. */
int gge_dev_memory(const struct gge_dev *g, uint64_t *ret_free, uint64_t *ret_total)
{
	size_t fr = 0, total = 0;

	if (g->host)
		return hostmem_meminfo(ret_free, ret_total);
	ggml_backend_dev_memory(g->dev, &fr, &total);
	if (!total)
		return PPRPC_EDEVICE;
	*ret_free = fr;
	*ret_total = total;
	return 0;
}

/* ---- buffers ------------------------------------------------------------------ */

/* A large host buffer in transparent huge pages where the kernel offers
 * them (THP "madvise" or "always"): committing a GiB takes 512 faults of
 * 2 MiB instead of 262144 of 4 KiB (this VM: 2.3 s instead of 5.0 s), and
 * the weights a graph streams through miss the TLB less.  Advice only:
 * a kernel without THP, or memory that is no anonymous mapping, ignores it. */
static void huge_pages(void *base, size_t size)
{
	const uintptr_t huge = (uintptr_t)2 << 20;
	uintptr_t a = ((uintptr_t)base + huge - 1) & ~(huge - 1), e = ((uintptr_t)base + size) & ~(huge - 1);

	if (size >= 4 * huge && e > a)
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
}

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

/* A buffer of anon_alloc: its memory goes with it. */
static void anon_free(ggml_backend_buffer_t b)
{
	munmap(ggml_backend_buffer_get_base(b), page_round(b->size));
}

/*
 * Host memory of the engine's own for a host device: an anonymous mapping,
 * zero from the kernel and committed page by page as it is first used,
 * under a ggml buffer over its pointer that unmaps it when freed.  ggml's
 * own host buffers come from malloc, whose reused memory holds what it
 * held: they had to be cleared, committing every page at allocation (a
 * 31 MiB compute buffer took 30-60 ms on the development VM, on the
 * client's critical path at every model load, where llama.cpp alone
 * commits its pages as its first graph touches them).  The memory floor
 * counts the whole buffer from its allocation either way (hostmem.h:
 * committed, touched or not).  NULL where ggml's device takes no host
 * pointers (then ggml's buffer, cleared), and under AddressSanitizer: a
 * mapping has no redzone, and the hostile runs want an overflow past a
 * buffer's end found (malloc's memory has one).
 */
static ggml_backend_buffer_t anon_alloc(struct gge_dev *g, size_t size)
{
	struct ggml_backend_dev_props props;
	ggml_backend_buffer_t b;
	void *p;

	if (!GGE_HOST_MAPS)
		return NULL;
	ggml_backend_dev_get_props(g->dev, &props);
	if (!props.caps.buffer_from_host_ptr)
		return NULL;
	p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	huge_pages(p, size);
	b = ggml_backend_dev_buffer_from_host_ptr(g->dev, p, size, size);
	/* ours to free: a buffer that frees something itself is not */
	if (!b || b->iface.free_buffer || ggml_backend_buffer_get_base(b) != p) {
		if (b)
			ggml_backend_buffer_free(b);
		munmap(p, page_round(size));
		return NULL;
	}
	b->iface.free_buffer = anon_free;
	return b;
}

int gge_buf_alloc(struct gge_dev *g, uint64_t size, ggml_backend_buffer_t *ret_b, char *err, size_t errlen)
{
	ggml_backend_buffer_t b;

	if (size == 0 || size > g->max_size || size > (uint64_t)SIZE_MAX / 2) {
		snprintf(err, errlen, "ggml:%s: a buffer holds 1 to %zu bytes", g->name, g->max_size);
		return PPRPC_ETOOBIG;
	}
	if (g->host && (b = anon_alloc(g, (size_t)size))) {
		*ret_b = b;
		return 0;
	}
	b = ggml_backend_buft_alloc_buffer(g->buft, (size_t)size);
	if (!b) {
		snprintf(err, errlen, "ggml:%s: allocation of %llu bytes failed", g->name, (unsigned long long)size);
		return PPRPC_ENOMEM;
	}
	/* A size ggml rounded down would let extents pass that the memory
	 * does not have. */
	if (ggml_backend_buffer_get_size(b) < size) {
		ggml_backend_buffer_free(b);
		snprintf(err, errlen, "ggml:%s: the buffer came back smaller than asked", g->name);
		return PPRPC_EDEVICE;
	}
	if (g->host)
		huge_pages(ggml_backend_buffer_get_base(b), (size_t)size);
	/* Zeros: no client sees another's data. */
	ggml_backend_buffer_clear(b, 0);
	*ret_b = b;
	return 0;
}

void gge_buf_free(ggml_backend_buffer_t b)
{
	if (b)
		ggml_backend_buffer_free(b);
}

int gge_buf_from_host(struct gge_dev *g, void *ptr, uint64_t size, ggml_backend_buffer_t *ret_b, char *err,
		      size_t errlen)
{
	struct ggml_backend_dev_props props;
	ggml_backend_buffer_t b;

	ggml_backend_dev_get_props(g->dev, &props);
	if (!g->host || !props.caps.buffer_from_host_ptr) {
		snprintf(err, errlen, "ggml:%s computes on memory of its own, not on a mapped file", g->name);
		return PPRPC_EUNSUPP;
	}
	if (size == 0 || size > g->max_size || size > (uint64_t)SIZE_MAX / 2) {
		snprintf(err, errlen, "ggml:%s: a buffer holds 1 to %zu bytes", g->name, g->max_size);
		return PPRPC_ETOOBIG;
	}
	/* ggml-cpu asserts its alignment (an abort, not an error) */
	if (g->alignment && (uintptr_t)ptr % g->alignment) {
		snprintf(err, errlen, "ggml:%s: the mapped bytes are not aligned to %zu", g->name, g->alignment);
		return PPRPC_EINVAL;
	}
	b = ggml_backend_dev_buffer_from_host_ptr(g->dev, ptr, (size_t)size, (size_t)size);
	if (!b) {
		snprintf(err, errlen, "ggml:%s: no buffer over %llu mapped bytes", g->name, (unsigned long long)size);
		return PPRPC_ENOMEM;
	}
	if (ggml_backend_buffer_get_base(b) != ptr || ggml_backend_buffer_get_size(b) < size) {
		ggml_backend_buffer_free(b);
		snprintf(err, errlen, "ggml:%s: the buffer over mapped bytes is not at them", g->name);
		return PPRPC_EDEVICE;
	}
	*ret_b = b;
	return 0;
}

/* A one-dimensional I8 tensor over [off, off + n) of b, for ggml's tensor
 * calls (they take tensors, not ranges). */
static void range_tensor(struct ggml_tensor *t, ggml_backend_buffer_t b, uint64_t off, uint64_t n)
{
	memset(t, 0, sizeof(*t));
	t->type = GGML_TYPE_I8;
	t->buffer = b;
	t->ne[0] = (int64_t)n;
	t->ne[1] = t->ne[2] = t->ne[3] = 1;
	t->nb[0] = 1;
	t->nb[1] = t->nb[2] = t->nb[3] = (size_t)n;
	t->data = (uint8_t *)ggml_backend_buffer_get_base(b) + off;
}

int gge_buf_write(ggml_backend_buffer_t b, uint64_t off, const void *src, uint64_t n)
{
	struct ggml_tensor t;

	if (n == 0)
		return 0;
	range_tensor(&t, b, off, n);
	ggml_backend_tensor_set(&t, src, 0, (size_t)n);
	return 0;
}

/* bytes of ggml's host buffer type of the device (cudaMallocHost for
 * ggml-cuda: pinned), made at first use into *buf and *base; *none once
 * there was none to be had.  false then. */
static bool host_area_ready(struct gge_dev *g, ggml_backend_buffer_t *buf, uint8_t **base, bool *none, size_t bytes)
{
	ggml_backend_buffer_type_t hb;

	if (*base || *none)
		return *base != NULL;
	hb = ggml_backend_dev_host_buffer_type(g->dev);
	*buf = hb ? ggml_backend_buft_alloc_buffer(hb, bytes) : NULL;
	*none = !*buf;
	if (!*buf)
		return false;
	*base = ggml_backend_buffer_get_base(*buf);
	return true;
}

/* The pinned staging of queued uploads. */
static bool pin_ready(struct gge_dev *g)
{
	return host_area_ready(g, &g->pin_buf, &g->pin, &g->pin_none, GGE_PIN_BYTES);
}

int gge_buf_write_queued(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, const void *src, uint64_t n)
{
	struct ggml_tensor t;

	/* ggml-cuda only (other backends keep the synchronous copy), and small
	 * uploads only: a large one is bandwidth, not latency, and would
	 * cycle the staging (it settles what is queued first: the stream
	 * order is not the synchronous copy's). */
	if (g->cuda_ordinal < 0 || !g->backend->iface.set_tensor_async ||
	    !ggml_backend_supports_buft(g->backend, b->buft) || n > GGE_PIN_ONE || !pin_ready(g)) {
		gge_dev_settle(g);
		return gge_buf_write(b, off, src, n);
	}
	if (n == 0)
		return 0;
	/* The staging is reused once what was copied from it has landed. */
	if (g->pin_used + n > GGE_PIN_BYTES)
		gge_dev_settle(g);
	memcpy(g->pin + g->pin_used, src, (size_t)n);
	range_tensor(&t, b, off, n);
	ggml_backend_tensor_set_async(g->backend, &t, g->pin + g->pin_used, 0, (size_t)n);
	g->pin_used += (n + 63) & ~(uint64_t)63;
	g->queued_writes = true;
	return 0;
}

void gge_dev_settle(struct gge_dev *g)
{
	if (!g->queued_writes)
		return;
	ggml_backend_synchronize(g->backend);
	g->queued_writes = false;
	g->pin_used = 0;
}

ggml_backend_event_t gge_dev_uploads_event(struct gge_dev *g)
{
	if (!g->queued_writes)
		return NULL;
	if (!g->up_ev && !g->up_ev_none) {
		g->up_ev = ggml_backend_event_new(g->dev);
		g->up_ev_none = !g->up_ev;
	}
	if (!g->up_ev) {
		gge_dev_settle(g);
		return NULL;
	}
	ggml_backend_event_record(g->up_ev, g->backend);
	return g->up_ev;
}

int gge_buf_read_staged(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, void *dst, uint64_t n)
{
	struct ggml_tensor t;

	if (g->cuda_ordinal < 0 || n < GGE_PIN_READ_MIN || !g->backend->iface.get_tensor_async ||
	    !ggml_backend_supports_buft(g->backend, b->buft) || !pin_ready(g))
		return gge_buf_read(b, off, dst, n);
	/* The staging is free once the uploads landed. */
	gge_dev_settle(g);
	for (uint64_t done = 0; done < n;) {
		uint64_t k = n - done < GGE_PIN_BYTES ? n - done : GGE_PIN_BYTES;

		range_tensor(&t, b, off + done, k);
		ggml_backend_tensor_get_async(g->backend, &t, g->pin, 0, (size_t)k);
		ggml_backend_synchronize(g->backend);
		memcpy((uint8_t *)dst + done, g->pin, (size_t)k);
		done += k;
	}
	return 0;
}

/* The memory downloads are lent in. */
static bool lend_ready(struct gge_dev *g)
{
	return host_area_ready(g, &g->lend_buf, &g->lend, &g->lend_none, GGE_LEND_BYTES);
}

int gge_buf_read_lend(struct gge_dev *g, ggml_backend_buffer_t b, uint64_t off, uint64_t n, void **ret)
{
	struct ggml_tensor t;

	if (g->cuda_ordinal < 0 || n == 0 || n > GGE_LEND_BYTES || !g->backend->iface.get_tensor_async ||
	    !ggml_backend_supports_buft(g->backend, b->buft))
		return PPRPC_EBUSY;
	if (atomic_exchange(&g->lend_busy, 1))
		return PPRPC_EBUSY; /* a reply still holds it */
	if (!lend_ready(g)) {
		atomic_store(&g->lend_busy, 0);
		return PPRPC_EBUSY;
	}
	range_tensor(&t, b, off, n);
	ggml_backend_tensor_get_async(g->backend, &t, g->lend, 0, (size_t)n);
	ggml_backend_synchronize(g->backend);
	*ret = g->lend;
	return 0;
}

void gge_dev_lend_return(struct gge_dev *g, void *p)
{
	if (p && p == g->lend)
		atomic_store(&g->lend_busy, 0);
}

int gge_buf_read(ggml_backend_buffer_t b, uint64_t off, void *dst, uint64_t n)
{
	struct ggml_tensor t;

	if (n == 0)
		return 0;
	range_tensor(&t, b, off, n);
	ggml_backend_tensor_get(&t, dst, 0, (size_t)n);
	return 0;
}

int gge_buf_zero_pages(ggml_backend_buffer_t b, uint64_t off, uint64_t n)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), s, e, a, z;

	if (b->iface.free_buffer != anon_free)
		return -1;
	s = (uintptr_t)ggml_backend_buffer_get_base(b) + off;
	e = s + n;
	a = (s + pg - 1) / pg * pg;
	z = e / pg * pg;
	if (z <= a)
		return -1;
	/* a private anonymous mapping's pages read as zeros once dropped */
	if (madvise((void *)a, z - a, MADV_DONTNEED) != 0)
		return -1;
	memset((void *)s, 0, a - s);
	memset((void *)z, 0, e - z);
	return 0;
}

int gge_buf_fill(ggml_backend_buffer_t b, uint64_t off, int value, uint64_t n)
{
	struct ggml_tensor t;

	if (n == 0)
		return 0;
	if (off == 0 && n == ggml_backend_buffer_get_size(b)) {
		ggml_backend_buffer_clear(b, (uint8_t)value);
		return 0;
	}
	/* ggml_backend_tensor_memset asserts the hook exists. */
	if (!b->iface.memset_tensor)
		return PPRPC_EUNSUPP;
	range_tensor(&t, b, off, n);
	ggml_backend_tensor_memset(&t, (uint8_t)value, 0, (size_t)n);
	return 0;
}

int gge_buf_copy(ggml_backend_buffer_t dst, uint64_t doff, ggml_backend_buffer_t src, uint64_t soff, uint64_t n)
{
	struct ggml_tensor ts, td;
	uint8_t *bounce;
	bool overlap;

	if (n == 0)
		return 0;
	/* Buffer copies do not promise memmove semantics: overlapping ranges
	 * of one buffer go through host memory. */
	overlap = dst == src && doff < soff + n && soff < doff + n;
	if (!overlap) {
		range_tensor(&ts, src, soff, n);
		range_tensor(&td, dst, doff, n);
		ggml_backend_tensor_copy(&ts, &td);
		return 0;
	}
	bounce = malloc((size_t)n);
	if (!bounce)
		return PPRPC_ENOMEM;
	gge_buf_read(src, soff, bounce, n);
	gge_buf_write(dst, doff, bounce, n);
	free(bounce);
	return 0;
}

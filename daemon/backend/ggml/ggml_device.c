/*
 * daemon/backend/ggml/ggml_device.c — the ggml engine as a device backend
 * (backend_impl.h: device, buffers, streams; registry.c: "ggml:NAME").
 *
 * A buffer of a ggml device is a ggml backend buffer of the device's buffer
 * type; the daemon knows it by its base address (struct dbuf's ptr), which
 * is what the buffer interface passes around.  This file maps addresses
 * back to ggml buffers (sorted by base, under a lock: the loop allocates and
 * frees, the worker copies) for device memory, where every byte moves
 * through ggml's buffer interface.  Host buffers (ggml-cpu) are
 * host-visible: bulk lands in them directly and the byte operations are
 * plain memory operations, as ggml-cpu's own are.
 *
 * A ggml-cuda device also exports an IPC pool and copies out of another
 * process's (ggml_cuda_ipc.h), so a stage boundary between two GPU ranks of one
 * host is a device-to-device copy, as between native cuda:N devices.
 *
 * Streams of a ggml-cuda device hold timeline WAITs on the GPU and
 * complete from CUDA's callback thread, as the native cuda:N device's do
 * (ggml_cuda_stream.h).  Elsewhere they complete inline, as the CPU device's
 * do: a GRAPH_RUN computes inside its submit, on the device's worker (never
 * on the loop: a ggml graph reports no small work, graph.c).  Either way
 * queues, fences, sticky errors, timelines and SEND/RECV work as on the
 * native devices.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_device.h"
#include "daemon/backend/ggml/ggml_gdn.h"
#include "daemon/backend/ggml/ggml_cuda_ipc.h"
#include "daemon/backend/ggml/ggml_cuda_stream.h"
#include "daemon/device/backend_impl.h"
#include "daemon/core/hostmem.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

/* Index of the last entry with base <= p, or -1; under the lock. */
static long find(const struct gdev *gd, uintptr_t p)
{
	size_t lo = 0, hi = gd->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (gd->map[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/* The buffer holding [p, p + n) and p's offset in it. */
static ggml_backend_buffer_t lookup(struct gdev *gd, const void *p, uint64_t n, uint64_t *ret_off)
{
	ggml_backend_buffer_t b = NULL;
	long i;

	pthread_mutex_lock(&gd->lock);
	i = find(gd, (uintptr_t)p);
	if (i >= 0) {
		const struct bmap *m = &gd->map[i];
		uint64_t off = (uintptr_t)p - m->base;

		if (off <= m->size && n <= m->size - off) {
			b = m->buf;
			*ret_off = off;
		}
	}
	pthread_mutex_unlock(&gd->lock);
	return b;
}

ggml_backend_buffer_t ggml_device_buffer(struct gdev *gd, const void *base)
{
	ggml_backend_buffer_t b = NULL;
	long i;

	pthread_mutex_lock(&gd->lock);
	i = find(gd, (uintptr_t)base);
	if (i >= 0 && gd->map[i].base == (uintptr_t)base)
		b = gd->map[i].buf;
	pthread_mutex_unlock(&gd->lock);
	return b;
}

/* ---- device ------------------------------------------------------------------- */

static void gdev_get_props(void *ctx, struct device_props *ret)
{
	struct gdev *gd = ctx;

	snprintf(ret->name, sizeof(ret->name), "ggml:%.26s", gd->g->name);
	snprintf(ret->desc, sizeof(ret->desc), "%.110s%s", gd->g->desc, gd->staged ? " (staged)" : "");
	ret->kind = "ggml";
	ret->host_visible = gd->g->host && !gd->staged;
	/* Elsewhere the worker computes every stream's graphs: a WAIT is held
	 * by the queue until its value is reached, as on the CPU device. */
	ret->holds_waits = gd->streams != NULL;
#ifdef PPRPC_HAVE_CUDA
	ret->holds_lands = gd->streams && gge_cuda_streams_lands(gd->streams);
#endif
	ret->completes_inline = gd->streams == NULL;
	/* max-graph-gflop auto: 1 Tflop per CPU thread (a ggml graph is a whole
	 * stage of llama.cpp's model, not one of pprpc's native layers: 32 per
	 * thread, the native CPU device's, refused a 51 Gflop estimate of
	 * test-backend-ops' MUL_MAT_VEC_FUSION on a 1-thread rank), 1 Pflop on a
	 * GPU (cuda_device.c) */
	ret->graph_gflop_auto = gd->g->host ? 1024 * (uint64_t)(gd->g->threads > 0 ? gd->g->threads : 1) : 1ull << 20;
	snprintf(ret->waits_why, sizeof(ret->waits_why), "%s", gd->waits_why);
	ret->graph_wires = 1u << DEVICE_WIRE_GGML;
	ret->info.ggml_alignment = gd->g->alignment;
	ret->info.ggml_max_size = gd->g->max_size;
	ret->info.ggml_dev_type = (uint32_t)gd->g->type;
	ret->info.ggml_version = ggml_version();
}

/* A host device counts host memory as the native cpu device does
 * (hostmem_free_now): reservations, and every host buffer and arena the
 * daemon committed, touched or not (ggml's CPU buffers are malloc'ed and
 * untouched until written: issue 27.10).  Both share one memory floor. */
static int gdev_mem_info(void *ctx, uint64_t *ret_free, uint64_t *ret_total)
{
	struct gdev *gd = ctx;
	int rc = gge_dev_memory(gd->g, ret_free, ret_total);

	if (rc < 0 || !gd->g->host || !gd->hostmem)
		return rc;
	*ret_free = hostmem_free_now(gd->hostmem, *ret_free);
	return 0;
}

/* ggml-cuda: a stream of its own per pprpc stream.  Elsewhere every stream
 * runs on the worker with the device's one ggml backend. */
static int gdev_stream_open(void *ctx, void **ret_sctx, char *err, size_t errlen)
{
	struct gdev *gd = ctx;

#ifdef PPRPC_HAVE_CUDA
	if (gd->streams)
		return gge_cuda_stream_open(gd->streams, ret_sctx, err, errlen);
#endif
	(void)err, (void)errlen;
	*ret_sctx = gd;
	return 0;
}

static void gdev_stream_close(void *ctx, void *sctx)
{
#ifdef PPRPC_HAVE_CUDA
	struct gdev *gd = ctx;

	if (gd->streams)
		gge_cuda_stream_close(gd->streams, sctx);
#else
	(void)ctx, (void)sctx;
#endif
}

static int gdev_slot_alloc(void *ctx, volatile uint64_t **ret_slot)
{
#ifdef PPRPC_HAVE_CUDA
	struct gdev *gd = ctx;

	if (gd->streams)
		return gge_cuda_slot_alloc(gd->streams, ret_slot);
#endif
	(void)ctx, (void)ret_slot;
	return PPRPC_EUNSUPP;
}

static void gdev_slot_free(void *ctx, volatile uint64_t *slot)
{
#ifdef PPRPC_HAVE_CUDA
	struct gdev *gd = ctx;

	if (gd->streams)
		gge_cuda_slot_free(gd->streams, slot);
#else
	(void)ctx, (void)slot;
#endif
}

static void gdev_graph_release(void *ctx, struct graph *g)
{
	struct gdev *gd = ctx;
	struct gge_graph *gg = g->dev_priv;

	if (g->kind == GRAPH_GGML && gg) {
		/* what ggml_graph.c reserved for its context, on the daemon's
		 * hostmem (the one gd->hostmem points to) */
		if (gd->hostmem && gg->reserved)
			hostmem_release(gd->hostmem, gg->reserved);
		gge_graph_free(gg);
	}
	g->dev_priv = NULL;
}

static void gdev_destroy(void *ctx)
{
	struct gdev *gd = ctx;

	/* Buffers and graphs were released before (device_close runs last). */
	for (size_t i = 0; i < gd->n; i++)
		gge_buf_free(gd->map[i].buf);
	free(gd->map);
#ifdef PPRPC_HAVE_CUDA
	gge_ipc_cuda_close(gd->ipc);
	/* their backends before the device's */
	gge_cuda_streams_close(gd->streams);
#endif
	gge_dev_close(gd->g);
	pthread_mutex_destroy(&gd->lock);
	free(gd);
}

/* GATED_DELTA_NET nodes ggml's own kernel ran, by reason, and the
 * ggml-native-gdn setting in words (the op's own counters: ggml_gdn.c) */
static int gdev_gdn_report(void *ctx, struct device_gdn_report *ret)
{
	struct gdev *gd = ctx;

	for (int r = 0; r < DEVICE_GDN_GGML_WHYS; r++)
		ret->other_kernel[r] = gge_dev_gdn_ggml_count(gd->g, r);
	gge_dev_gdn_status(gd->g, ret->setting, sizeof(ret->setting));
	return 0;
}

static const struct device_i gdev_device_i = {
	.get_props = gdev_get_props,
	.mem_info = gdev_mem_info,
	.stream_open = gdev_stream_open,
	.stream_close = gdev_stream_close,
	.slot_alloc = gdev_slot_alloc,
	.slot_free = gdev_slot_free,
	.graph_begin = ggml_graph_begin,
	.graph_build = ggml_graph_build,
	.graph_finish = ggml_graph_finish,
	.graph_drop = ggml_graph_drop,
	.graph_supports = ggml_graph_supports,
	.graph_alloc_size = ggml_graph_alloc_size,
	.graph_release = gdev_graph_release,
	.gdn_report = gdev_gdn_report,
	.destroy = gdev_destroy,
};

/* ---- buffers ------------------------------------------------------------------ */

/* b in the map by its base (freed when it cannot be kept). */
static int map_add(struct gdev *gd, ggml_backend_buffer_t b, uint64_t size, void **ret_ptr)
{
	uintptr_t base = (uintptr_t)ggml_backend_buffer_get_base(b);
	long i;

	pthread_mutex_lock(&gd->lock);
	if (gd->n == gd->cap) {
		size_t cap = gd->cap ? gd->cap * 2 : 64;
		struct bmap *m = realloc(gd->map, cap * sizeof(*m));

		if (!m) {
			pthread_mutex_unlock(&gd->lock);
			gge_buf_free(b);
			return PPRPC_ENOMEM;
		}
		gd->map = m;
		gd->cap = cap;
	}
	i = find(gd, base) + 1;
	memmove(&gd->map[i + 1], &gd->map[i], (gd->n - (size_t)i) * sizeof(*gd->map));
	gd->map[i] = (struct bmap){ base, size, b };
	gd->n++;
	pthread_mutex_unlock(&gd->lock);
	*ret_ptr = (void *)base;
	return 0;
}

static int gdev_alloc(void *ctx, uint64_t size, void **ret_ptr)
{
	struct gdev *gd = ctx;
	ggml_backend_buffer_t b;
	char why[160];
	int rc = gge_buf_alloc(gd->g, size, &b, why, sizeof(why));

	return rc < 0 ? rc : map_add(gd, b, size, ret_ptr);
}

/* A mapped file's range: a ggml buffer over it, freed by gdev_free like
 * any other (ggml frees no memory of a buffer made from a pointer). */
static int gdev_adopt(void *ctx, void *ptr, uint64_t size, char *err, size_t errlen)
{
	struct gdev *gd = ctx;
	ggml_backend_buffer_t b;
	void *base;
	int rc = gge_buf_from_host(gd->g, ptr, size, &b, err, errlen);

	if (rc == 0 && (rc = map_add(gd, b, size, &base)) < 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

static void gdev_free(void *ctx, void *ptr, uint64_t size)
{
	struct gdev *gd = ctx;
	ggml_backend_buffer_t b = NULL;
	long i;

	(void)size;
	pthread_mutex_lock(&gd->lock);
	i = find(gd, (uintptr_t)ptr);
	if (i >= 0 && gd->map[i].base == (uintptr_t)ptr) {
		b = gd->map[i].buf;
		memmove(&gd->map[i], &gd->map[i + 1], (gd->n - (size_t)i - 1) * sizeof(*gd->map));
		gd->n--;
	}
	pthread_mutex_unlock(&gd->lock);
	gge_buf_free(b);
}

/* host buffers: plain memory */

static int host_fill(void *ctx, void *dst, int value, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b = value == 0 ? lookup(gd, dst, n, &off) : NULL;

	if (!b || gge_buf_zero_pages(b, off, n) < 0)
		memset(dst, value, (size_t)n);
	return 0;
}

static int host_copy(void *ctx, void *dst, const void *src, uint64_t n)
{
	(void)ctx;
	memmove(dst, src, (size_t)n);
	return 0;
}

static int host_xfer(void *ctx, void *dst, const void *src, uint64_t n)
{
	(void)ctx;
	memcpy(dst, src, (size_t)n);
	return 0;
}

/* device buffers: through ggml */

/* Uploads are queued on the backend's stream (gge_buf_write_queued); the
 * other byte operations settle them first.  All run on the worker, or on
 * the loop while it runs a command inline (never both). */

static int dev_fill(void *ctx, void *dst, int value, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd, dst, n, &off);

	gge_dev_settle(gd->g);
	return b ? gge_buf_fill(b, off, value, n) : PPRPC_EINTERNAL;
}

static int dev_copy(void *ctx, void *dst, const void *src, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t doff, soff;
	ggml_backend_buffer_t bd = lookup(gd, dst, n, &doff);
	ggml_backend_buffer_t bs = lookup(gd, src, n, &soff);

	gge_dev_settle(gd->g);
	return bd && bs ? gge_buf_copy(bd, doff, bs, soff, n) : PPRPC_EINTERNAL;
}

static int dev_upload(void *ctx, void *dst_dev, const void *src_host, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd, dst_dev, n, &off);

	return b ? gge_buf_write_queued(gd->g, b, off, src_host, n) : PPRPC_EINTERNAL;
}

static int dev_download(void *ctx, void *dst_host, const void *src_dev, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd, src_dev, n, &off);

	gge_dev_settle(gd->g);
	return b ? gge_buf_read_staged(gd->g, b, off, dst_host, n) : PPRPC_EINTERNAL;
}

static int dev_download_lend(void *ctx, const void *src_dev, uint64_t n, void **ret_host)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd, src_dev, n, &off);

	if (!b)
		return PPRPC_EINTERNAL;
	gge_dev_settle(gd->g);
	return gge_buf_read_lend(gd->g, b, off, n, ret_host);
}

static void dev_download_return(void *ctx, void *host)
{
	struct gdev *gd = ctx;

	gge_dev_lend_return(gd->g, host);
}

static const struct buffer_i gdev_host_buffer_i = {
	.alloc = gdev_alloc,
	.adopt = gdev_adopt,
	.free = gdev_free,
	.fill = host_fill,
	.copy = host_copy,
	.upload = host_xfer,
	.download = host_xfer,
};

/* device memory moved through ggml (ggml-cuda's adds IPC below) */
#define GDEV_DEV_BUFFER_OPS \
	.alloc = gdev_alloc, .free = gdev_free, .fill = dev_fill, .copy = dev_copy, .upload = dev_upload, \
	.download_lend = dev_download_lend, .download_return = dev_download_return

static const struct buffer_i gdev_dev_buffer_i = { GDEV_DEV_BUFFER_OPS, .download = dev_download };

#ifdef PPRPC_HAVE_CUDA
/* ggml-cuda buffers: the same, and CUDA IPC at stage boundaries (worker). */

static int ipc_ready(struct gdev *gd, char *err, size_t errlen)
{
	char who[48];

	if (gd->ipc)
		return 0;
	snprintf(who, sizeof(who), "ggml:%.30s", gd->g->name);
	return gge_ipc_cuda_open(gd->g->cuda_ordinal, who, &gd->ipc, err, errlen);
}

/* The pool is a buffer of the device like any other (zeroed, in the map),
 * so the source's capture is a plain device copy into it. */
static int cuda_ipc_pool(void *ctx, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen)
{
	struct gdev *gd = ctx;
	void *p = NULL;
	int rc = ipc_ready(gd, err, errlen);

	if (rc == 0 && (rc = gdev_alloc(gd, bytes, &p)) < 0)
		snprintf(err, errlen, "ggml:%s: no %llu MiB buffer for the IPC pool", gd->g->name,
			 (unsigned long long)(bytes >> 20));
	if (rc == 0 && (rc = gge_ipc_cuda_export(gd->ipc, p, handle, err, errlen)) < 0)
		gdev_free(gd, p, bytes);
	if (rc == 0)
		*ret_ptr = p;
	return rc;
}

static int cuda_ipc_copy(void *ctx, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			 size_t errlen)
{
	struct gdev *gd = ctx;
	uint64_t doff;
	int rc = ipc_ready(gd, err, errlen);

	if (rc < 0)
		return rc;
	if (!lookup(gd, dst, n, &doff)) {
		snprintf(err, errlen, "ggml:%s: IPC copy into memory that is no buffer of the device", gd->g->name);
		return PPRPC_EINTERNAL;
	}
	gge_dev_settle(gd->g);
	return gge_ipc_cuda_copy(gd->ipc, dst, handle, off, n, err, errlen);
}

static int cuda_ipc_wait(void *ctx, char *err, size_t errlen)
{
	struct gdev *gd = ctx;
	int rc = ipc_ready(gd, err, errlen);

	return rc < 0 ? rc : gge_ipc_cuda_wait(gd->ipc, err, errlen);
}

static int cuda_pin_host(void *ctx, void *ptr, uint64_t bytes, int on)
{
	struct gdev *gd = ctx;

	return gge_cuda_pin_host(gd->g->cuda_ordinal, ptr, bytes, on);
}

/* Into page-locked memory (a client's host page, a landing page) the
 * download is DMA straight there; else through the engine's staging. */
static int cuda_download(void *ctx, void *dst_host, const void *src_dev, uint64_t n)
{
	struct gdev *gd = ctx;
	uint64_t off;
	ggml_backend_buffer_t b;

	if (!gge_cuda_host_pinned(dst_host, n))
		return dev_download(ctx, dst_host, src_dev, n);
	b = lookup(gd, src_dev, n, &off);
	gge_dev_settle(gd->g);
	return b ? gge_buf_read(b, off, dst_host, n) : PPRPC_EINTERNAL;
}

static const struct buffer_i gdev_cuda_buffer_i = {
	GDEV_DEV_BUFFER_OPS,
	.download = cuda_download,
	.ipc_export = cuda_ipc_pool,
	.ipc_copy = cuda_ipc_copy,
	.ipc_wait = cuda_ipc_wait,
	.pin_host = cuda_pin_host,
};
#endif

/* Host memory, device memory moved through ggml, or ggml-cuda's. */
static const struct buffer_i *buffer_table(const struct gdev *gd)
{
	if (gd->g->host && !gd->staged)
		return &gdev_host_buffer_i;
#ifdef PPRPC_HAVE_CUDA
	if (gd->g->cuda_ordinal >= 0 && !gd->staged)
		return &gdev_cuda_buffer_i;
#endif
	return &gdev_dev_buffer_i;
}

/* ---- streams ------------------------------------------------------------------ */

static int gdev_graph_submit(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct gdev *gd = sctx;
	char why[512];
	int rc;

	if (g->kind != GRAPH_GGML || !g->dev_priv) {
		snprintf(err, errlen, "a ggml device runs ggml graphs only");
		return PPRPC_EINTERNAL;
	}
	rc = gge_graph_compute(gd->g, g->dev_priv, why, sizeof(why));
	done(arg, rc, rc < 0 ? why : NULL);
	return 0;
}

/* The queue runs a WAIT only once it is decided (holds_waits is off). */
static int gdev_wait_submit(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			    size_t errlen)
{
	(void)sctx;
	if (slot) {
		snprintf(err, errlen, "a ggml device does not hold waits");
		return PPRPC_EUNSUPP;
	}
	done(arg, 0, NULL);
	return 0;
}

static int gdev_write_submit(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			     char *err, size_t errlen)
{
	(void)sctx, (void)err, (void)errlen;
	__atomic_store_n(slot, value, __ATOMIC_RELEASE);
	done(arg, 0, NULL);
	return 0;
}

static const struct stream_i gdev_stream_i = {
	.graph_submit = gdev_graph_submit,
	.wait_submit = gdev_wait_submit,
	.write_submit = gdev_write_submit,
};

/* (ints: the two sides are different enums) */
_Static_assert((int)DEVICE_GDN_NATIVE_OFF == (int)GGE_GDN_OFF && (int)DEVICE_GDN_NATIVE_AUTO == (int)GGE_GDN_AUTO &&
		       (int)DEVICE_GDN_NATIVE_ON == (int)GGE_GDN_ON,
	       "ggml-native-gdn values are the engine's modes");
_Static_assert((int)DEVICE_GDN_GGML_OFF == (int)GGE_GDN_WHY_OFF && (int)DEVICE_GDN_GGML_AUTO == (int)GGE_GDN_WHY_AUTO &&
		       (int)DEVICE_GDN_GGML_SHAPE == (int)GGE_GDN_WHY_SHAPE &&
		       (int)DEVICE_GDN_GGML_GATE == (int)GGE_GDN_WHY_GATE &&
		       (int)DEVICE_GDN_GGML_NOMEM == (int)GGE_GDN_WHY_NOMEM &&
		       (int)DEVICE_GDN_GGML_WHYS == (int)GGE_GDN_WHY_COUNT,
	       "the device counts the engine's reasons");

/* registry.c: "ggml:NAME", arg = NAME (ggml_backend_dev_name). */
int ggml_backend_open(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret,
		      char *err, size_t errlen)
{
	struct gdev *gd;
	const char *st = getenv("PPRPC_GGML_STAGED");
	int rc;

	if (!arg[0]) {
		snprintf(err, errlen, "ggml: needs a ggml device name (ggml:CPU, ggml:CUDA0, ...)");
		return PPRPC_EINVAL;
	}
	gd = calloc(1, sizeof(*gd));
	if (!gd) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	gd->dev = d;
	gd->hostmem = conf->hostmem;
	rc = gge_dev_open(arg, conf->threads, &gd->g, err, errlen);
	if (rc < 0) {
		free(gd);
		return rc;
	}
	pthread_mutex_init(&gd->lock, NULL);
	/* PPRPC_GGML_STAGED=1 serves host memory as device memory is served
	 * (bulk staged, bytes through ggml's buffer interface): the ggml-cuda
	 * path, testable on ggml-cpu (make integration runs test_ggml so). */
	gd->staged = st && !strcmp(st, "1");
	/* GATED_DELTA_NET on pprpc's kernels: counted where STATS and the
	 * metrics read the native devices' counters. */
	gge_dev_gdn_config(gd->g, conf->ggml_native_gdn, &d->gdn_stats, NULL, conf->floor);
	gd->g->graph_reuse = conf->ggml_graph_reuse;
	ret->stream = &gdev_stream_i;
#ifdef PPRPC_HAVE_CUDA
	if (gd->g->cuda_ordinal >= 0 && !gd->staged) {
		char why[160];

		/* Without them (no memory operations, PPRPC_GGML_GPU_WAITS=0)
		 * the device holds WAITs on the host, as ggml-cpu does. */
		rc = gge_cuda_streams_open(gd->g, &gd->streams, why, sizeof(why));
		if (rc == 0)
			ret->stream = &gge_cuda_stream_i;
		else
			snprintf(gd->waits_why, sizeof(gd->waits_why), "%s", why);
	}
#endif
	ret->dev = &gdev_device_i;
	ret->dev_ctx = gd;
	ret->buf = buffer_table(gd);
	ret->buf_ctx = gd;
	return 0;
}

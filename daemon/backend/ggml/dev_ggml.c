/*
 * daemon/backend/ggml/dev_ggml.c — the device interface over the ggml engine.
 *
 * A buffer of a ggml device is a ggml backend buffer of the device's buffer
 * type; the daemon knows it by its base address (struct dbuf's ptr), which
 * is what the device interface passes around.  This file maps addresses
 * back to ggml buffers (sorted by base, under a lock: the loop thread
 * allocates and frees, the worker copies) for device memory, where every
 * byte moves through ggml's buffer interface.  Host buffers (ggml-cpu) are
 * host-visible: bulk lands in them directly and the byte operations are
 * plain memory operations, as ggml-cpu's own are.
 *
 * Execution is synchronous: GRAPH_RUN computes on the worker thread, so
 * queues, fences, sticky errors, timelines and SEND/RECV work as on the
 * native cpu device.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/dev_ggml.h"
#include "daemon/device/device_impl.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

struct bmap {
	uintptr_t base;
	uint64_t size;
	ggml_backend_buffer_t buf;
};

struct ggml_device {
	struct device d;   /* first: the daemon frees through it */
	struct gge_dev *g;
	pthread_mutex_t lock;
	struct bmap *map;  /* sorted by base */
	size_t n, cap;
};

static struct ggml_device *gd_of(struct device *d)
{
	return (struct ggml_device *)d;
}

struct gge_dev *dev_ggml_engine(struct device *d)
{
	return gd_of(d)->g;
}

/* Index of the last entry with base <= p, or -1; under the lock. */
static long find(const struct ggml_device *gd, uintptr_t p)
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
static ggml_backend_buffer_t lookup(struct ggml_device *gd, const void *p, uint64_t n, uint64_t *ret_off)
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

ggml_backend_buffer_t dev_ggml_buffer(struct device *d, const void *base)
{
	struct ggml_device *gd = gd_of(d);
	ggml_backend_buffer_t b = NULL;
	long i;

	pthread_mutex_lock(&gd->lock);
	i = find(gd, (uintptr_t)base);
	if (i >= 0 && gd->map[i].base == (uintptr_t)base)
		b = gd->map[i].buf;
	pthread_mutex_unlock(&gd->lock);
	return b;
}

static int gdev_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	return gge_dev_memory(gd_of(d)->g, ret_free, ret_total);
}

static int gdev_alloc(struct device *d, uint64_t size, void **ret_ptr)
{
	struct ggml_device *gd = gd_of(d);
	ggml_backend_buffer_t b;
	char why[160];
	uintptr_t base;
	long i;
	int rc = gge_buf_alloc(gd->g, size, &b, why, sizeof(why));

	if (rc < 0)
		return rc;
	base = (uintptr_t)ggml_backend_buffer_get_base(b);
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

static void gdev_free(struct device *d, void *ptr, uint64_t size)
{
	struct ggml_device *gd = gd_of(d);
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

/* ---- host buffers: plain memory --------------------------------------------- */

static int host_fill(struct device *d, void *dst, int value, uint64_t n)
{
	(void)d;
	memset(dst, value, (size_t)n);
	return 0;
}

static int host_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	(void)d;
	memmove(dst, src, (size_t)n);
	return 0;
}

static int host_xfer(struct device *d, void *dst, const void *src, uint64_t n)
{
	(void)d;
	memcpy(dst, src, (size_t)n);
	return 0;
}

/* ---- device buffers: through ggml ------------------------------------------- */

static int dev_fill(struct device *d, void *dst, int value, uint64_t n)
{
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd_of(d), dst, n, &off);

	return b ? gge_buf_fill(b, off, value, n) : PPRPC_EINTERNAL;
}

static int dev_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	uint64_t doff, soff;
	ggml_backend_buffer_t bd = lookup(gd_of(d), dst, n, &doff);
	ggml_backend_buffer_t bs = lookup(gd_of(d), src, n, &soff);

	return bd && bs ? gge_buf_copy(bd, doff, bs, soff, n) : PPRPC_EINTERNAL;
}

static int dev_upload(struct device *d, void *dst_dev, const void *src_host, uint64_t n)
{
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd_of(d), dst_dev, n, &off);

	return b ? gge_buf_write(b, off, src_host, n) : PPRPC_EINTERNAL;
}

static int dev_download(struct device *d, void *dst_host, const void *src_dev, uint64_t n)
{
	uint64_t off;
	ggml_backend_buffer_t b = lookup(gd_of(d), src_dev, n, &off);

	return b ? gge_buf_read(b, off, dst_host, n) : PPRPC_EINTERNAL;
}

/* ---- graphs ------------------------------------------------------------------ */

static int gdev_graph_run(struct device *d, struct graph *g, char *err, size_t errlen)
{
	if (g->kind != GRAPH_GGML || !g->dev_priv) {
		snprintf(err, errlen, "%s runs ggml graphs only", d->name);
		return PPRPC_EINTERNAL;
	}
	return gge_graph_compute(gd_of(d)->g, g->dev_priv, err, errlen);
}

static void gdev_graph_release(struct device *d, struct graph *g)
{
	(void)d;
	if (g->kind == GRAPH_GGML)
		gge_graph_free(g->dev_priv);
	g->dev_priv = NULL;
}

static void gdev_destroy(struct device *d)
{
	struct ggml_device *gd = gd_of(d);

	/* Buffers and graphs were released before (device_close runs last). */
	for (size_t i = 0; i < gd->n; i++)
		gge_buf_free(gd->map[i].buf);
	free(gd->map);
	gge_dev_close(gd->g);
	pthread_mutex_destroy(&gd->lock);
	free(gd);
}

static const struct device_ops gdev_host_ops = {
	.kind = "ggml",
	.host_visible = true,
	.mem_info = gdev_mem_info,
	.alloc = gdev_alloc,
	.free = gdev_free,
	.fill = host_fill,
	.copy = host_copy,
	.upload = host_xfer,
	.download = host_xfer,
	.graph_run = gdev_graph_run,
	.graph_release = gdev_graph_release,
	.destroy = gdev_destroy,
};

static const struct device_ops gdev_dev_ops = {
	.kind = "ggml",
	.host_visible = false,
	.mem_info = gdev_mem_info,
	.alloc = gdev_alloc,
	.free = gdev_free,
	.fill = dev_fill,
	.copy = dev_copy,
	.upload = dev_upload,
	.download = dev_download,
	.graph_run = gdev_graph_run,
	.graph_release = gdev_graph_release,
	.destroy = gdev_destroy,
};

int ggml_device_create(struct device **ret_dev, const char *name, int threads, char *err, size_t errlen)
{
	struct ggml_device *gd = calloc(1, sizeof(*gd));
	bool staged;
	int rc;

	if (!gd)
		return PPRPC_ENOMEM;
	rc = gge_dev_open(name, threads, &gd->g, err, errlen);
	if (rc < 0) {
		free(gd);
		return rc;
	}
	pthread_mutex_init(&gd->lock, NULL);
	/* PPRPC_GGML_STAGED=1 serves host memory as device memory is served
	 * (bulk staged, bytes through ggml's buffer interface): the ggml-cuda
	 * path, testable on ggml-cpu (make integration runs test_ggml so). */
	staged = getenv("PPRPC_GGML_STAGED") && !strcmp(getenv("PPRPC_GGML_STAGED"), "1");
	gd->d.ops = gd->g->host && !staged ? &gdev_host_ops : &gdev_dev_ops;
	snprintf(gd->d.name, sizeof(gd->d.name), "ggml:%.26s", gd->g->name);
	snprintf(gd->d.desc, sizeof(gd->d.desc), "%.110s%s", gd->g->desc, staged ? " (staged)" : "");
	gd->d.ggml_alignment = gd->g->alignment;
	gd->d.ggml_max_size = gd->g->max_size;
	gd->d.ggml_dev_type = (uint32_t)gd->g->type;
	*ret_dev = &gd->d;
	return 0;
}

/*
 * tests/fuzz/fuzz_daemon.h — a minimal daemon context for the fuzz targets
 * that reach past the decoders (fuzz_graph, fuzz_msgs).
 *
 * Built once per process and never torn down (a fuzz target has no exit
 * hook): a struct pprpcd with default options except memory floor 0, one
 * thread and a 1 MiB staging ring; a uv loop that the targets run only to
 * collect completions; one CPU device (its queue worker starts here); an
 * owner connection (calloc'ed, no transport) and FZ_NBUF buffers of
 * different sizes that inputs name by a small index.
 *
 * Device memory is an anonymous mapping, which ASan knows nothing about: an
 * access past a buffer but inside its last page would go unnoticed.  The
 * tail of each static buffer's last page is therefore poisoned by hand, and
 * fuzz_graph poisons everything but the tensors' own extents around a run.
 * The shadow is NOT reset by munmap (clang 14), so whatever is poisoned must
 * be unpoisoned before the memory goes back to the device.
 */
#ifndef PPRPC_TESTS_FUZZ_DAEMON_H
#define PPRPC_TESTS_FUZZ_DAEMON_H

#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/objects/buffer.h"
#include "daemon/server/conn.h"
#include "daemon/server/options.h"
#include "daemon/server/server.h"
#include "daemon/device/device.h"
#include "daemon/objects/graph.h"
#include "daemon/objects/hostpage.h"
#include "daemon/pprpcd.h"
#include "daemon/objects/timeline.h"
#include "daemon/xfer/xfer.h"
#include "kernels/ops.h"
#include "pprpc/types.h"

#define FZ_CHECK(c)                                                                  \
	do {                                                                         \
		if (!(c)) {                                                          \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                     \
		}                                                                    \
	} while (0)

/* Sizes are multiples of 8 (ASan granules) and, but for the last, not of the
 * page size, so every buffer has a poisoned tail in its last page. */
#define FZ_NBUF 4
static const uint64_t fz_buf_size[FZ_NBUF] = { 256, 4000, 65536 - 24, (1u << 20) - 64 };

struct fz {
	struct pprpcd d;
	struct conn *owner;
	struct dbuf *buf[FZ_NBUF];
};

static uint64_t fz_page_round(uint64_t n)
{
	uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE);

	return (n + ps - 1) / ps * ps;
}

/* Make [p, p+size) addressable and the rest of its last page poisoned. */
static void fz_guard(void *p, uint64_t size)
{
	ASAN_UNPOISON_MEMORY_REGION(p, size);
	ASAN_POISON_MEMORY_REGION((uint8_t *)p + size, fz_page_round(size) - size);
}

/* Before the mapping goes back to the device. */
static void fz_unguard(void *p, uint64_t size)
{
	ASAN_UNPOISON_MEMORY_REGION(p, fz_page_round(size));
}

static struct fz *fz_get(void)
{
	static struct fz *fz;
	char err[256];

	if (fz)
		return fz;
	fz = calloc(1, sizeof(*fz));
	FZ_CHECK(fz);
	struct pprpcd *d = &fz->d;

	pprpcd_bind(d);   /* the server's connection calls, as pprpcd_start does */
	pprpcd_opts_default(&d->opts);
	d->opts.memory_floor = 0;
	d->opts.threads = 1;
	d->opts.staging_bytes = 1u << 20;   /* 16 slots of 64 KiB */
	d->opts.xfer_timeout_ms = 1;        /* xfer_expire() drops leftovers at once */
	d->opts.max_bulk = 1u << 20;
	d->opts.cpu_ipc = 1;
	d->loop = uv_default_loop();
	log_setup(&d->log, getenv("FUZZ_LOG") ? LOG_DEBUG_ : 0);
	htab_init(&d->buffers, HK_BUFFER, d->opts.max_buffers);
	htab_init(&d->graphs, HK_GRAPH, d->opts.max_graphs);
	hostpage_sys_init(d);
	timeline_sys_init(d);
	FZ_CHECK(xfer_init(d) == 0);
	/* The IPC boundary protocol (PULL with ipc_host, pool chunks,
	 * PULL_RELEASE) over the CPU device's cross-memory attach (cpu_ipc),
	 * with a 1 MiB pool of 64 KiB slots. */
	if (device_open(d->loop, "cpu", 0, &(struct device_conf){ .threads = 1, .cpu_ipc = 1 }, &d->dev[0], err,
			sizeof(err)) < 0) {
		fprintf(stderr, "fuzz: device_open: %s\n", err);
		abort();
	}
	snprintf(d->boot_id, sizeof(d->boot_id), "x");
	d->opts.ipc_pool_bytes = 1u << 20;
	d->ndev = 1;
	snprintf(d->placement, sizeof(d->placement), "fuzz");
	fz->owner = calloc(1, sizeof(*fz->owner));
	FZ_CHECK(fz->owner);
	fz->owner->d = d;
	fz->owner->refs = 1;
	fz->owner->hello_done = 1;
	owner_init(&fz->owner->own, d->opts.max_conn_bytes, d->opts.max_conn_buffers, d->opts.max_conn_graphs);
	snprintf(fz->owner->name, sizeof(fz->owner->name), "fuzz-owner");
	for (int i = 0; i < FZ_NBUF; i++) {
		if (buffer_alloc(d, &fz->owner->own, d->dev[0], fz_buf_size[i], &fz->buf[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "fuzz: buffer_alloc: %s\n", err);
			abort();
		}
		fz_guard(fz->buf[i]->ptr, fz->buf[i]->size);
	}
	return fz;
}

/* A handle field as the input gives it: a small value names a static buffer
 * (0 stays 0: "none"), anything else is passed through as garbage. */
static uint64_t fz_map_buffer(const struct fz *fz, uint64_t v)
{
	if (v == 0 || v > 64)
		return v;
	return fz->buf[(v - 1) % FZ_NBUF]->handle;
}

/* The harness's own bound on scratch space: graph_create would map the whole
 * arena (MAP_POPULATE), and a 2-element tensor with a huge stride claims
 * gigabytes legitimately.  Above 1 TiB the daemon refuses on its own (more
 * than the free memory), so that range stays in. */
#define FZ_MAX_SCRATCH (16ull << 20)

static int fz_scratch_ok(const Pprpc__GraphCreate *m)
{
	uint64_t total = 0;

	for (size_t i = 0; i < m->n_tensors; i++) {
		const Pprpc__Tensor *mt = m->tensors[i];
		struct kern_tensor t;
		uint64_t ext;

		if (mt->buffer || mt->view_of || mt->n_ne != PPRPC_MAX_DIMS || mt->n_nb != PPRPC_MAX_DIMS)
			continue;
		memset(&t, 0, sizeof(t));
		t.dtype = mt->dtype > INT32_MAX ? -1 : (int32_t)mt->dtype;
		memcpy(t.ne, mt->ne, sizeof(t.ne));
		memcpy(t.nb, mt->nb, sizeof(t.nb));
		if (kern_tensor_check(&t) < 0 || kern_tensor_extent(&t, &ext) < 0)
			continue;
		if (ext >= (1ull << 40))
			return 1;
		total += ext + 64;
		if (total > FZ_MAX_SCRATCH)
			return 0;
	}
	return 1;
}

/* Work a validated graph asks of the CPU, in element operations (rough).
 * Kernels legitimately take time in proportion; the harness runs a graph
 * only below FZ_MAX_WORK so that one input stays in the milliseconds. */
#define FZ_MAX_WORK (2ll << 20)

static int64_t fz_graph_work(const struct graph *g)
{
	int64_t work = 0;

	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		const struct kern_tensor *dst = &g->t[n->dst];
		int64_t w = kern_tensor_nelements(dst), f = 1;

		for (int s = 0; s < n->nsrc; s++)
			w += kern_tensor_nelements(&g->t[n->src[s]]);
		switch (n->op) {
		case PPRPC_OP_MUL_MAT:
			f = g->t[n->src[0]].ne[0];               /* K per output */
			w += kern_tensor_nelements(dst) * (f > 1 ? f : 1);
			break;
		case PPRPC_OP_ATTENTION:
			f = g->t[n->src[1]].ne[2];               /* n_kv per output */
			w += 2 * kern_tensor_nelements(dst) * f;
			break;
		case PPRPC_OP_GATED_DELTA_NET:
			f = g->t[n->src[0]].ne[2];               /* T steps over the state */
			w += 4 * kern_tensor_nelements(&g->t[n->src[5]]) * f;
			break;
		default:
			break;
		}
		if (w < 0 || w > FZ_MAX_WORK)
			return FZ_MAX_WORK + 1;
		work += w;
		if (work > FZ_MAX_WORK)
			return work;
	}
	return work;
}

#endif

/*
 * daemon/backend/ggml/ggml_serve.c — the ggml requests on the daemon's side
 * (see ggml_serve.h).
 *
 * The engine sees buffers only through resolve(): a handle names a live
 * buffer of this connection on this device, or the request fails with the
 * handle named.  A graph holds a reference on every buffer it names, as a
 * native graph does, so BUFFER_FREE while the graph lives retires the
 * handle and keeps the memory until GRAPH_FREE.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/dev_ggml.h"
#include "daemon/backend/ggml/ggml_serve.h"
#include "daemon/device/device.h"
#include "daemon/core/hostmem.h"
#include "daemon/objects/buffer.h"
#include "daemon/objects/graph.h"
#include "daemon/pprpcd.h"
#include "daemon/objects/owner.h"
#include "pprpc/types.h"

struct resolver {
	struct pprpcd *d;
	const struct owner *o;
	struct device *dev;
	struct graph *g;   /* holds what it names; NULL for probes */
};

static int resolve(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	struct resolver *r = arg;
	struct dbuf *b = buffer_get(r->d, r->o, handle);

	if (!b) {
		snprintf(err, errlen, "unknown buffer handle 0x%016" PRIx64, handle);
		return PPRPC_EHANDLE;
	}
	if (b->dev != r->dev) {
		snprintf(err, errlen, "buffer 0x%016" PRIx64 " lives on %s, the graph is for %s", handle,
			 b->dev->name, r->dev->name);
		return PPRPC_EINVAL;
	}
	ret->buf = dev_ggml_buffer(r->dev, b->ptr);
	if (!ret->buf) {
		snprintf(err, errlen, "buffer 0x%016" PRIx64 " is not a ggml buffer", handle);
		return PPRPC_EINTERNAL;
	}
	ret->size = b->size;
	if (r->g)
		graph_hold_buffer(r->g, b);
	return 0;
}

/* The request's device, which must be a ggml one. */
static struct device *ggml_dev(struct pprpcd *d, uint32_t index, int *ret_rc, char *err, size_t errlen)
{
	struct device *dev = pprpcd_device(d, index);

	if (!dev) {
		snprintf(err, errlen, "no device %u (this daemon has %u)", index, d->ndev);
		*ret_rc = PPRPC_EINVAL;
		return NULL;
	}
	if (!device_is_ggml(dev)) {
		snprintf(err, errlen, "device %u (%s) is not a ggml device (serve one with --devices ggml:NAME)", index,
			 dev->name);
		*ret_rc = PPRPC_EUNSUPP;
		return NULL;
	}
	return dev;
}

/* What a run will ask of ggml's backend beyond the graph's tensors, checked
 * before any run allocates it (issue 27.7: ggml-cpu's new[] of a 74.5 GiB
 * MUL_MAT_ID plan threw and terminated the rank).  ggml-cpu keeps one work
 * buffer, grown to the largest plan it has run and never shrunk
 * (ggml-cpu.cpp ggml_backend_cpu_graph_compute): its growth is reserved
 * under the memory floor for the daemon's life, as what ggml has been
 * allowed to commit.  A GPU's pool keeps its high-water mark as well: the
 * graph's need must fit in the device's free memory above its floor. */
static int check_scratch(struct pprpcd *d, struct device *dev, struct gge_dev *eng, uint64_t need, char *err,
			 size_t errlen)
{
	uint64_t fr = 0, total = 0;
	char why[240];
	int rc;

	if (eng->host) {
		if (need <= eng->work_reserved)
			return 0;
		rc = hostmem_reserve(&d->hostmem, need - eng->work_reserved, why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errlen, "the graph's ggml work buffer (%.1f MiB): %s", need / 1048576.0, why);
			return rc;
		}
		eng->work_reserved = need;
		return 0;
	}
	rc = device_mem_info(dev, &fr, &total);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot read free memory", dev->name);
		return rc;
	}
	if (need > fr || fr - need < dev->floor) {
		snprintf(err, errlen, "%s: the graph's ggml scratch (%.1f MiB) would leave %.1f MiB free, below the "
			 "memory floor of %.1f MiB", dev->name, need / 1048576.0, need > fr ? 0.0 : (fr - need) / 1048576.0,
			 dev->floor / 1048576.0);
		return PPRPC_EFLOOR;
	}
	return 0;
}

/* The graph built: its work bounded (max-graph-gflop, as a native graph's:
 * issue 27.8), its scratch and context charged to the connection. */
static int check_costs(struct pprpcd *d, struct owner *o, struct resolver *r, struct gge_graph *gg, char *err,
		       size_t errlen)
{
	struct gge_dev *eng = dev_ggml_engine(r->dev);
	uint64_t need = 0;
	int rc = graph_work_check(d, r->dev, gge_graph_work(gg), err, errlen);

	if (rc < 0)
		return rc;
	if (gge_graph_scratch(eng, gg, &need) < 0) {
		snprintf(err, errlen, "ggml:%s: ggml-cpu's planner (ggml_graph_plan) was not found, so the graph's work "
			 "buffer cannot be sized before it is allocated", eng->name);
		return PPRPC_EINTERNAL;
	}
	/* the connection pays for both; the work buffer is shared by the
	 * device's graphs, so this errs towards refusing */
	if (need > UINT64_MAX / 2 - gg->host_bytes)
		need = UINT64_MAX / 2 - gg->host_bytes;
	rc = owner_charge_check(o, gg->host_bytes + need, &r->g->footprint, err, errlen);
	if (rc < 0)
		return rc;
	return check_scratch(d, r->dev, eng, need, err, errlen);
}

/*
 * A create in three steps (ggml_serve.h): begin on the loop resolves every
 * buffer the tensors name into the job's own table, build decodes and
 * checks the graph from that table alone (so it may run on any thread:
 * gge_graph_build reads only what the engine fixed at open, struct gge_dev's
 * rest — work_reserved, the worker's backend — is for the loop and the
 * device's worker), finish charges its costs and makes it a graph object on
 * the loop.  Small creates run the three in a row.
 */
struct slot {
	uint64_t handle;           /* 0: empty (a tensor without a buffer names none) */
	struct gge_wbuf wb;
};

struct ggml_create {
	struct pprpcd *d;
	struct owner *o;
	const Pprpc__GgmlGraphCreate *m;
	struct device *dev;
	struct graph *g;           /* holds every buffer of tab */
	uint64_t host;             /* reserved under the floor for the context */
	struct slot *tab;          /* open addressing, mask + 1 slots */
	size_t mask;
	/* The first handle begin could not resolve, in the order build asks
	 * (tensors that are not views, by index): build stops at it, so the
	 * handles after it are never asked for. */
	uint64_t bad;
	int bad_rc;
	char bad_err[240];
	struct gge_graph *gg;      /* built */
	int rc;                    /* build's result */
	char err[320];
};

static size_t slot_of(const struct ggml_create *j, uint64_t handle)
{
	/* Fibonacci hashing: handles carry a generation in their high bits */
	size_t h = (size_t)((handle * 0x9E3779B97F4A7C15ull) >> 32) & j->mask;

	while (j->tab[h].handle && j->tab[h].handle != handle)
		h = (h + 1) & j->mask;
	return h;
}

/* build's resolver: reads the job's table, nothing of the daemon. */
static int resolve_table(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	struct ggml_create *j = arg;
	size_t h = slot_of(j, handle);

	if (j->tab[h].handle == handle) {
		*ret = j->tab[h].wb;
		return 0;
	}
	if (j->bad_rc < 0) {
		snprintf(err, errlen, "%s", j->bad_err);
		return j->bad_rc;
	}
	snprintf(err, errlen, "buffer 0x%016" PRIx64 " was not resolved before the build", handle);
	return PPRPC_EINTERNAL;
}

/* Every buffer handle build can ask for, resolved (and held by the graph)
 * on the loop. */
static int resolve_all(struct ggml_create *j)
{
	struct resolver r = { j->d, j->o, j->dev, j->g };
	size_t n = 16;

	while (n < 2 * j->m->n_tensors)
		n *= 2;
	j->tab = calloc(n, sizeof(*j->tab));
	if (!j->tab)
		return PPRPC_ENOMEM;
	j->mask = n - 1;
	for (size_t i = 0; i < j->m->n_tensors; i++) {
		const Pprpc__GgmlTensor *t = j->m->tensors[i];
		size_t h;

		if (t->view_src >= 0 || !t->buffer)
			continue;
		h = slot_of(j, t->buffer);
		if (j->tab[h].handle)
			continue;
		j->bad_rc = resolve(&r, t->buffer, &j->tab[h].wb, j->bad_err, sizeof(j->bad_err));
		if (j->bad_rc < 0) {
			j->bad = t->buffer;
			return 0;
		}
		j->tab[h].handle = t->buffer;
	}
	return 0;
}

void ggml_serve_create_drop(struct ggml_create *j)
{
	if (!j)
		return;
	gge_graph_free(j->gg);
	if (j->host)
		hostmem_release(&j->d->hostmem, j->host);
	if (j->g)
		graph_unref(j->g);
	free(j->tab);
	free(j);
}

int ggml_serve_create_begin(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct ggml_create **ret_j, char *err, size_t errlen)
{
	struct ggml_create *j;
	struct device *dev;
	uint64_t host, fp;
	char why[240];
	int rc = 0;

	dev = ggml_dev(d, m->device, &rc, err, errlen);
	if (!dev)
		return rc;
	if (!m->ggml_version || strcmp(m->ggml_version, ggml_version()) != 0) {
		snprintf(err, errlen, "this rank runs ggml %s (llama.cpp %s), the graph comes from ggml %s: "
			 "op numbering and parameters differ between releases, so it cannot be validated",
			 ggml_version(), PPRPC_LLAMA_RELEASE, m->ggml_version && *m->ggml_version ? m->ggml_version : "(not said)");
		return PPRPC_EVERSION;
	}
	if (m->n_nodes > d->opts.max_graph_nodes) {
		snprintf(err, errlen, "graph node limit (%u) exceeded: the graph has %zu nodes", d->opts.max_graph_nodes,
			 m->n_nodes);
		return PPRPC_ELIMIT;
	}
	if (m->n_tensors > GGE_MAX_TENSORS) {
		snprintf(err, errlen, "a ggml graph has at most %d tensors (got %zu)", GGE_MAX_TENSORS, m->n_tensors);
		return PPRPC_ETOOBIG;
	}
	/* The graph's context and tables, from the counts alone: charged to
	 * the connection and reserved under the memory floor before they are
	 * allocated, held until the graph is freed (issue 27.9: 40 graphs
	 * took 1,242 MiB past the floor). */
	host = gge_graph_host_size(m->n_tensors, m->n_nodes);
	rc = owner_charge_check(o, host, &fp, err, errlen);
	if (rc < 0)
		return rc;
	j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	j->d = d;
	j->o = o;
	j->m = m;
	j->dev = dev;
	rc = hostmem_reserve(&d->hostmem, host, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "the graph's ggml context (%.1f MiB for %zu tensors): %s", host / 1048576.0,
			 m->n_tensors, why);
		goto fail;
	}
	j->host = host;
	rc = graph_new_backend(o, dev, GRAPH_GGML, m->n_tensors, &j->g);
	if (rc == 0)
		rc = resolve_all(j);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	*ret_j = j;
	return 0;
fail:
	ggml_serve_create_drop(j);
	return rc;
}

void ggml_serve_create_build(struct ggml_create *j)
{
	j->rc = gge_graph_build(dev_ggml_engine(j->dev), (const Pprpc__GgmlTensor *const *)j->m->tensors,
				j->m->n_tensors, j->m->nodes, j->m->n_nodes, resolve_table, j, &j->gg, j->err,
				sizeof(j->err));
}

int ggml_serve_create_finish(struct ggml_create *j, struct graph **ret_g, char *err, size_t errlen)
{
	struct resolver r = { j->d, j->o, j->dev, j->g };
	struct graph *g = j->g;
	int rc = j->rc;

	if (rc < 0)
		snprintf(err, errlen, "%s", j->err);
	else
		rc = check_costs(j->d, j->o, &r, j->gg, err, errlen);
	if (rc < 0) {
		ggml_serve_create_drop(j);
		return rc;
	}
	/* released with the graph (dev_ggml.c: gdev_graph_release) */
	j->gg->reserved = j->host;
	g->dev_priv = j->gg;
	/* A device whose streams run graphs behind held WAITs checks the
	 * client's indices on the GPU, into copies of its own; without them
	 * (no memory for the copies) the graph waits for its stream. */
	g->sync_run = !gge_graph_async_ok(j->gg);
	if (!g->sync_run && dev_ggml_gpu_streams(j->dev)) {
		char why2[200];

		g->sync_run = gge_graph_shadow(dev_ggml_engine(j->dev), j->gg, why2, sizeof(why2)) < 0;
	}
	/* the graph owns them now */
	j->gg = NULL;
	j->host = 0;
	j->g = NULL;
	ggml_serve_create_drop(j);
	*ret_g = g;
	return 0;
}

int ggml_serve_graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct graph **ret_g, char *err, size_t errlen)
{
	struct ggml_create *j;
	int rc = ggml_serve_create_begin(d, o, m, &j, err, errlen);

	if (rc < 0)
		return rc;
	ggml_serve_create_build(j);
	return ggml_serve_create_finish(j, ret_g, err, errlen);
}

int ggml_serve_supports(struct pprpcd *d, struct owner *o, const Pprpc__GgmlSupports *m, bool *ret_ok, char *why,
			size_t whylen)
{
	struct resolver r = { d, o, NULL, NULL };
	int rc = 0;

	r.dev = ggml_dev(d, m->device, &rc, why, whylen);
	if (!r.dev)
		return rc;
	return gge_probe_supports(dev_ggml_engine(r.dev), (const Pprpc__GgmlTensor *const *)m->tensors, m->n_tensors,
				  m->node, resolve, &r, ret_ok, why, whylen);
}

int ggml_serve_alloc_size(struct pprpcd *d, struct owner *o, const Pprpc__GgmlAllocSize *m, uint64_t *ret_size,
			  char *err, size_t errlen)
{
	struct resolver r = { d, o, NULL, NULL };
	int rc = 0;

	r.dev = ggml_dev(d, m->device, &rc, err, errlen);
	if (!r.dev)
		return rc;
	return gge_probe_alloc_size(dev_ggml_engine(r.dev), (const Pprpc__GgmlTensor *const *)m->tensors,
				    m->n_tensors, m->node, resolve, &r, ret_size, err, errlen);
}

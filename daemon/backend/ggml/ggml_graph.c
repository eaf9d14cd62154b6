/*
 * daemon/backend/ggml/ggml_graph.c — the ggml device's graph operations
 * (backend_impl.h: graph_begin ... graph_drop, graph_supports,
 * graph_alloc_size): GGML_GRAPH_CREATE, GGML_SUPPORTS and GGML_ALLOC_SIZE
 * made into the engine's calls (doc/ggml.md).
 *
 * The engine sees buffers only through resolve(): a handle names a live
 * buffer of the request's owner on this device (the env's buffer), or the
 * request fails with the handle named.  A graph holds a reference on every
 * buffer it names, as a native graph does, so BUFFER_FREE while the graph
 * lives retires the handle and keeps the memory until GRAPH_FREE.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_device.h"
#include "daemon/device/device.h"
#include "daemon/core/hostmem.h"
#include "daemon/objects/buffer.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

struct resolver {
	struct gdev *gd;
	const struct device_graph_env *env;
	struct device *dev;
	struct graph *g;   /* holds what it names; NULL for probes */
};

static int resolve(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	struct resolver *r = arg;
	struct dbuf *b;
	int rc = r->env->buffer(r->env->arg, handle, 0, 0, &b, err, errlen);

	if (rc < 0)
		return rc;
	if (b->dev != r->dev) {
		snprintf(err, errlen, "buffer 0x%016" PRIx64 " lives on %s, the graph is for %s", handle,
			 b->dev->name, r->dev->name);
		return PPRPC_EINVAL;
	}
	ret->buf = ggml_device_buffer(r->gd, b->ptr);
	if (!ret->buf) {
		snprintf(err, errlen, "buffer 0x%016" PRIx64 " is not a ggml buffer", handle);
		return PPRPC_EINTERNAL;
	}
	ret->size = b->size;
	ret->owner = b;
	if (r->g && graph_hold_buffer(r->g, b) < 0) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	return 0;
}

/* What a run will ask of ggml's backend beyond the graph's tensors, checked
 * before any run allocates it (issue 27.7: ggml-cpu's new[] of a 74.5 GiB
 * MUL_MAT_ID plan threw and terminated the rank).  ggml-cpu keeps one work
 * buffer, grown to the largest plan it has run and never shrunk
 * (ggml-cpu.cpp ggml_backend_cpu_graph_compute): its growth is reserved
 * under the memory floor for the daemon's life, as what ggml has been
 * allowed to commit.  A GPU's pool keeps its high-water mark as well: the
 * graph's need must fit in the device's free memory above its floor. */
static int check_scratch(struct gdev *gd, struct device *dev, uint64_t need, char *err, size_t errlen)
{
	struct gge_dev *eng = gd->g;
	uint64_t fr = 0, total = 0;
	char why[240];
	int rc;

	if (eng->host) {
		if (need <= eng->work_reserved)
			return 0;
		rc = gd->hostmem ? hostmem_reserve(gd->hostmem, need - eng->work_reserved, why, sizeof(why)) : 0;
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
static int check_costs(struct resolver *r, struct gge_graph *gg, char *err, size_t errlen)
{
	struct gge_dev *eng = r->gd->g;
	uint64_t need = 0;
	int rc = r->env->work(r->env->arg, gge_graph_work(gg), err, errlen);

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
	rc = r->env->charge(r->env->arg, gg->host_bytes + need, &r->g->footprint, err, errlen);
	if (rc < 0)
		return rc;
	return check_scratch(r->gd, r->dev, need, err, errlen);
}

/*
 * A create in three steps (device.h: device_graph_begin): begin on the loop resolves every
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
	struct gdev *gd;
	const struct device_graph_env *env;
	const Pprpc__GgmlGraphCreate *m;
	struct device *dev;
	struct graph *g;           /* graph.c's, holds every buffer of tab */
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
	struct resolver r = { j->gd, j->env, j->dev, j->g };
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

void ggml_graph_drop(void *ctx, void *job)
{
	struct ggml_create *j = job;

	(void)ctx;
	if (!j)
		return;
	gge_graph_free(j->gg);
	if (j->host && j->gd->hostmem)
		hostmem_release(j->gd->hostmem, j->host);
	free(j->tab);
	free(j);
}

int ggml_graph_begin(void *ctx, int wire, const void *msg, const struct device_graph_env *env, struct graph *g,
		     void **ret_job, char *err, size_t errlen)
{
	const Pprpc__GgmlGraphCreate *m = msg;
	struct gdev *gd = ctx;
	struct ggml_create *j;
	uint64_t host, fp;
	char why[240];
	int rc = 0;

	if (wire != DEVICE_WIRE_GGML) {
		snprintf(err, errlen, "%s runs ggml graphs (GGML_GRAPH_CREATE), not native ones", g->dev->name);
		return PPRPC_EUNSUPP;
	}
	if (!m->ggml_version || strcmp(m->ggml_version, ggml_version()) != 0) {
		snprintf(err, errlen, "this rank runs ggml %s (llama.cpp %s), the graph comes from ggml %s: "
			 "op numbering and parameters differ between releases, so it cannot be validated",
			 ggml_version(), PPRPC_LLAMA_RELEASE, m->ggml_version && *m->ggml_version ? m->ggml_version : "(not said)");
		return PPRPC_EVERSION;
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
	rc = env->charge(env->arg, host, &fp, err, errlen);
	if (rc < 0)
		return rc;
	j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	j->gd = gd;
	j->env = env;
	j->m = m;
	j->dev = g->dev;
	j->g = g;
	rc = gd->hostmem ? hostmem_reserve(gd->hostmem, host, why, sizeof(why)) : 0;
	if (rc < 0) {
		snprintf(err, errlen, "the graph's ggml context (%.1f MiB for %zu tensors): %s", host / 1048576.0,
			 m->n_tensors, why);
		goto fail;
	}
	j->host = host;
	rc = resolve_all(j);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	*ret_job = j;
	return 0;
fail:
	ggml_graph_drop(ctx, j);
	return rc;
}

void ggml_graph_build(void *ctx, void *job)
{
	struct ggml_create *j = job;

	(void)ctx;
	j->rc = gge_graph_build(j->gd->g, (const Pprpc__GgmlTensor *const *)j->m->tensors, j->m->n_tensors,
				j->m->nodes, j->m->n_nodes, resolve_table, j, &j->gg, j->err, sizeof(j->err));
}

int ggml_graph_finish(void *ctx, void *job, char *err, size_t errlen)
{
	struct ggml_create *j = job;
	struct resolver r = { j->gd, j->env, j->dev, j->g };
	struct graph *g = j->g;
	int rc = j->rc;

	if (rc < 0)
		snprintf(err, errlen, "%s", j->err);
	else
		rc = check_costs(&r, j->gg, err, errlen);
	if (rc < 0) {
		ggml_graph_drop(ctx, j);
		return rc;
	}
	/* weights of a mapped model file: read from its disk while this
	 * graph waits for its first run, not by its page faults one by one
	 * (daemon/weights/wahead.c); in the order the wire names them */
	for (int i = 0; i < j->gg->ntensors; i++) {
		const struct gge_wt *p = &j->gg->plan[i];

		if (p->wb.owner && p->base == i)
			buffer_map_want(p->wb.owner, p->offset, p->reach > p->dense ? p->reach : p->dense);
	}
	/* released with the graph (ggml_device.c: gdev_graph_release) */
	j->gg->reserved = j->host;
	g->dev_priv = j->gg;
	/* A device whose streams run graphs behind held WAITs checks the
	 * client's indices on the GPU, into copies of its own; without them
	 * (no memory for the copies) the graph waits for its stream. */
	g->sync_run = !gge_graph_async_ok(j->gg);
	if (!g->sync_run && j->gd->streams) {
		char why2[200];

		g->sync_run = gge_graph_shadow(j->gd->g, j->gg, why2, sizeof(why2)) < 0;
	}
	/* the graph owns them now */
	j->gg = NULL;
	j->host = 0;
	ggml_graph_drop(ctx, j);
	return 0;
}

int ggml_graph_supports(void *ctx, int wire, const void *msg, const struct device_graph_env *env, bool *ret_ok,
			char *why, size_t whylen)
{
	const Pprpc__GgmlSupports *m = msg;
	struct gdev *gd = ctx;
	struct resolver r = { gd, env, gd->dev, NULL };

	(void)wire;
	return gge_probe_supports(gd->g, (const Pprpc__GgmlTensor *const *)m->tensors, m->n_tensors, m->node, resolve,
				  &r, ret_ok, why, whylen);
}

int ggml_graph_alloc_size(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
			  uint64_t *ret_size, char *err, size_t errlen)
{
	const Pprpc__GgmlAllocSize *m = msg;
	struct gdev *gd = ctx;
	struct resolver r = { gd, env, gd->dev, NULL };

	(void)wire;
	return gge_probe_alloc_size(gd->g, (const Pprpc__GgmlTensor *const *)m->tensors, m->n_tensors, m->node,
				    resolve, &r, ret_size, err, errlen);
}

/*
 * daemon/objects/graph.c — graph objects: handles, references, the owner's
 * charge, and the limits every engine shares (node cap, work bound, memory
 * charge), one place each.  Validation and planning are the engines'
 * (daemon/backend/native/, daemon/backend/ggml/), reached through the
 * device (device.h: device_graph_begin).
 */
#include "daemon/objects/graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/objects/buffer.h"
#include "daemon/device/device.h"
#include "daemon/objects/owner.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"

_Static_assert((int)GRAPH_NATIVE == (int)DEVICE_WIRE_NATIVE && (int)GRAPH_GGML == (int)DEVICE_WIRE_GGML,
	       "a graph's kind is the wire form its device took");

int graph_work_check(const struct pprpcd *d, const struct device *dev, uint64_t work, char *err, size_t errlen)
{
	uint64_t max = device_graph_flop_max(dev, d->opts.max_graph_gflop);

	if (!max || work <= max)
		return 0;
	snprintf(err, errlen, "graph work limit (max-graph-gflop %" PRIu64 " on %s) exceeded: one run demands about %"
		 PRIu64 " Gflop", (uint64_t)(max / 1000000000u), dev->name, (uint64_t)(work / 1000000000u));
	return PPRPC_ELIMIT;
}

static void graph_destroy(struct graph *g)
{
	if (g->dev_priv)
		device_graph_release(g->dev, g);
	for (int i = 0; i < g->nbufs; i++)
		buffer_unref(g->bufs[i]);
	if (g->arena)
		device_free(g->dev, g->arena, g->arena_size);
	free(g->bufs);
	free(g->t);
	free(g->nodes);
	free(g);
}

/* ---- the daemon's side of a create (device.h: struct device_graph_env) ---- */

struct graph_job {
	struct pprpcd *d;
	struct owner *o;
	struct graph *g;
	struct device_graph_env env;
	void *dev_job;             /* the engine's, from device_graph_begin */
};

static int env_buffer(void *arg, uint64_t handle, uint64_t offset, uint64_t size, struct dbuf **ret_b, char *err,
		      size_t errlen)
{
	struct graph_job *j = arg;

	return buffer_region(j->d, j->o, handle, offset, size, ret_b, err, errlen);
}

static int env_charge(void *arg, uint64_t bytes, uint64_t *ret_footprint, char *err, size_t errlen)
{
	struct graph_job *j = arg;

	return owner_charge_check(j->o, bytes, ret_footprint, err, errlen);
}

static int env_work(void *arg, uint64_t work, char *err, size_t errlen)
{
	struct graph_job *j = arg;

	return graph_work_check(j->d, j->g ? j->g->dev : NULL, work, err, errlen);
}

static void env_init(struct graph_job *j)
{
	j->env.buffer = env_buffer;
	j->env.charge = env_charge;
	j->env.work = env_work;
	j->env.arg = j;
}

struct device *graph_device(struct pprpcd *d, uint32_t index, char *err, size_t errlen)
{
	struct device *dev = pprpcd_device(d, index);

	if (!dev)
		snprintf(err, errlen, "no device %u (this daemon has %u)", index, d->ndev);
	return dev;
}

int graph_hold_buffer(struct graph *g, struct dbuf *b)
{
	for (int i = 0; i < g->nbufs; i++)
		if (g->bufs[i] == b)
			return 0;
	if (g->nbufs == g->bufs_cap) {
		int cap = g->bufs_cap ? 2 * g->bufs_cap : 8;
		struct dbuf **v = realloc(g->bufs, (size_t)cap * sizeof(*v));

		if (!v)
			return PPRPC_ENOMEM;
		g->bufs = v;
		g->bufs_cap = cap;
	}
	g->bufs[g->nbufs++] = b;
	buffer_ref(b);
	return 0;
}

void graph_drop(struct graph_job *j)
{
	if (!j)
		return;
	if (j->dev_job)
		device_graph_drop(j->g->dev, j->dev_job);
	if (j->g)
		graph_unref(j->g);
	free(j);
}

int graph_begin(struct pprpcd *d, struct owner *o, int kind, uint32_t device, const void *msg, size_t nnodes,
		struct graph_job **ret_j, char *err, size_t errlen)
{
	struct graph_job *j;
	struct device *dev;
	int rc;

	/* the node cap of every engine */
	if (nnodes > d->opts.max_graph_nodes) {
		snprintf(err, errlen, "graph node limit (%u) exceeded: the graph has %zu nodes", d->opts.max_graph_nodes,
			 nnodes);
		return PPRPC_ELIMIT;
	}
	dev = graph_device(d, device, err, errlen);
	if (!dev)
		return PPRPC_EINVAL;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->g = calloc(1, sizeof(*j->g)))) {
		free(j);
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	j->d = d;
	j->o = o;
	env_init(j);
	j->g->kind = kind;
	j->g->dev = dev;
	j->g->owner = o;
	j->g->refs = 1;
	/* Never small enough to run inline on the loop unless the engine
	 * says otherwise (the native one estimates it; ggml's graphs compute
	 * on threads that belong to the device's worker). */
	j->g->work = UINT64_MAX / 2;
	rc = device_graph_begin(dev, kind, msg, &j->env, j->g, &j->dev_job, err, errlen);
	if (rc < 0) {
		j->dev_job = NULL;
		graph_drop(j);
		return rc;
	}
	*ret_j = j;
	return 0;
}

void graph_build(struct graph_job *j)
{
	device_graph_build(j->g->dev, j->dev_job);
}

int graph_finish(struct graph_job *j, struct graph **ret_g, char *err, size_t errlen)
{
	struct pprpcd *d = j->d;
	struct graph *g = j->g;
	int rc = device_graph_finish(g->dev, j->dev_job, err, errlen);

	j->dev_job = NULL;  /* finish freed it */
	if (rc < 0)
		goto fail;
	/* The kernels' workspaces are reserved under the floor for each run;
	 * one that could not be reserved even now is refused at once. */
	g->host_scratch = device_graph_scratch(g->dev, g);
	if (g->host_scratch) {
		rc = hostmem_reserve(&d->hostmem, g->host_scratch, err, errlen);
		if (rc < 0)
			goto fail;
		hostmem_release(&d->hostmem, g->host_scratch);
	}
	j->g = NULL;
	graph_drop(j);
	*ret_g = g;
	return 0;
fail:
	graph_drop(j);
	return rc;
}

int graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GraphCreate *m, struct graph **ret_g, char *err,
		 size_t errlen)
{
	struct graph_job *j;
	int rc = graph_begin(d, o, GRAPH_NATIVE, m->device, m, m->n_nodes, &j, err, errlen);

	if (rc < 0)
		return rc;
	graph_build(j);
	return graph_finish(j, ret_g, err, errlen);
}

int graph_probe(struct pprpcd *d, const struct owner *o, int kind, uint32_t device, int probe, const void *msg,
		bool *ret_ok, uint64_t *ret_size, char *err, size_t errlen)
{
	struct graph_job j = { .d = d, .o = (struct owner *)o };
	struct device *dev = graph_device(d, device, err, errlen);

	if (!dev)
		return PPRPC_EINVAL;
	env_init(&j);
	if (probe == GRAPH_PROBE_SUPPORTS)
		return device_graph_supports(dev, kind, msg, &j.env, ret_ok, err, errlen);
	return device_graph_alloc_size(dev, kind, msg, &j.env, ret_size, err, errlen);
}
int graph_room(const struct owner *o, char *err, size_t errlen)
{
	if (o->ngraphs < o->max_graphs)
		return 0;
	snprintf(err, errlen, "connection graph limit (%u) reached", o->max_graphs);
	return PPRPC_ELIMIT;
}

int graph_register(struct pprpcd *d, struct owner *o, struct graph *g, char *err, size_t errlen)
{
	int rc = htab_insert(&d->graphs, g, &g->handle);

	if (rc < 0) {
		if (rc == PPRPC_ELIMIT)
			snprintf(err, errlen, "daemon graph limit (%u) reached", d->graphs.max);
		else
			snprintf(err, errlen, "out of memory");
		graph_unref(g);
		return rc;
	}
	owner_add_graph(o, g);
	g->dev->graph_creates++;
	return 0;
}

struct graph *graph_get(struct pprpcd *d, const struct owner *o, uint64_t handle)
{
	struct graph *g = htab_get(&d->graphs, handle);

	return g && g->owner == o ? g : NULL;
}

void graph_ref(struct graph *g)
{
	g->refs++;
}

void graph_unref(struct graph *g)
{
	if (--g->refs == 0)
		graph_destroy(g);
}

void graph_retire(struct pprpcd *d, struct graph *g)
{
	if (!g->handle)
		return;
	htab_remove(&d->graphs, g->handle);
	g->handle = 0;
	owner_remove_graph(g->owner, g);
	g->owner = NULL;
	graph_unref(g);
}

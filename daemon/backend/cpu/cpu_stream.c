/*
 * daemon/backend/cpu/cpu_stream.c — the CPU stream: work runs inside the
 * submit call, on the device's worker thread, and done is called before
 * it returns.  Nothing is ever left pending, so the queue's rules for
 * device work (queue.h) cost nothing here.
 */
#include <stdio.h>

#include "daemon/backend/cpu/cpu_backend.h"
#include "daemon/objects/graph.h"
#include "pprpc/types.h"

static int cpu_graph_submit(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct cpu_dev *c = sctx;
	char why[256];

	(void)err, (void)errlen;
	/* The kernels' workspaces count under the memory floor, for the run. */
	if (g->host_scratch && c->hostmem) {
		int rc = hostmem_reserve(c->hostmem, g->host_scratch, why, sizeof(why));

		if (rc < 0) {
			done(arg, rc, why);
			return 0;
		}
	}
	for (int i = 0; i < g->nnodes; i++) {
		const struct gnode *n = &g->nodes[i];
		struct kern_tensor *src[PPRPC_MAX_SRC];
		int rc;

		for (int s = 0; s < n->nsrc; s++)
			src[s] = &g->t[n->src[s]];
		rc = kern_cpu_run(&c->kctx, n->op, &n->p, src, n->nsrc, &g->t[n->dst]);
		if (rc < 0) {
			snprintf(why, sizeof(why), "node %d (%s) failed: %s", i, kern_op_name(n->op),
				 rc == PPRPC_ENOMEM ? "out of memory" : "kernel error");
			if (g->host_scratch && c->hostmem)
				hostmem_release(c->hostmem, g->host_scratch);
			done(arg, rc, why);
			return 0;
		}
	}
	if (g->host_scratch && c->hostmem)
		hostmem_release(c->hostmem, g->host_scratch);
	done(arg, 0, NULL);
	return 0;
}

/* The queue runs a WAIT only once it is decided (holds_waits is off), so
 * there is never a slot to hold on. */
static int cpu_wait_submit(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			   size_t errlen)
{
	(void)sctx;
	if (slot) {
		snprintf(err, errlen, "the CPU device does not hold waits");
		return PPRPC_EUNSUPP;
	}
	done(arg, 0, NULL);
	return 0;
}

static int cpu_write_submit(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			    char *err, size_t errlen)
{
	(void)sctx, (void)err, (void)errlen;
	__atomic_store_n(slot, value, __ATOMIC_RELEASE);
	done(arg, 0, NULL);
	return 0;
}

const struct stream_i cpu_stream_i = {
	.graph_submit = cpu_graph_submit,
	.wait_submit = cpu_wait_submit,
	.write_submit = cpu_write_submit,
};

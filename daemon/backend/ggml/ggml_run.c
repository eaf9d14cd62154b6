/*
 * daemon/backend/ggml/ggml_run.c — running a created graph (the device's
 * worker thread).
 *
 * A run is a sequence of segments of the node order, cut where an index
 * guard must see values computed earlier in the same run (ggml_guard.c) and
 * around each node one of pprpc's own ops runs (ggml_ops.h: GATED_DELTA_NET);
 * most graphs are one segment.  A segment boundary is a point where
 * everything before has completed on the device (ggml_backend_graph_compute
 * synchronizes), which is what lets a node go to a kernel that is not
 * ggml's, on a stream that is not ggml's.
 *
 * The first run also gives each tensor's buffer its init_tensor (ggml-cuda
 * zeroes the padding of quantized rows there): done on the worker, so it is
 * ordered with the commands before it on the queue.
 */
#include <stdio.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "pprpc/types.h"

static int init_tensors(struct gge_graph *gg, char *err, size_t errlen)
{
	for (int i = 0; i < gg->ntensors; i++) {
		struct ggml_tensor *t = gg->t[i];

		if (t->view_src || !t->buffer || !t->buffer->iface.init_tensor)
			continue;
		if (ggml_backend_buffer_init_tensor(t->buffer, t) != GGML_STATUS_SUCCESS) {
			snprintf(err, errlen, "tensor #%d: its buffer's init_tensor failed", i);
			return PPRPC_EDEVICE;
		}
	}
	return 0;
}

int gge_run_segment(struct gge_dev *g, ggml_backend_t be, struct gge_graph *gg, int from, int to, char *err,
		    size_t errlen)
{
	struct ggml_cgraph view;
	enum ggml_status st;

	if (from == 0 && to == gg->nnodes) {
		st = ggml_backend_graph_compute(be, gg->cg);
	} else {
		view = ggml_graph_view(gg->cg, from, to);
		st = ggml_backend_graph_compute(be, &view);
	}
	if (st == GGML_STATUS_SUCCESS)
		return 0;
	snprintf(err, errlen, "ggml:%s: graph compute failed (%s) in nodes %d..%d", g->name, ggml_status_to_string(st),
		 from, to - 1);
	return st == GGML_STATUS_ALLOC_FAILED ? PPRPC_ENOMEM : PPRPC_EDEVICE;
}

int gge_graph_prepare(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen)
{
	int rc;

	gge_dev_worker_init(g);
	/* The guards read indices and pprpc's kernels run on streams of their
	 * own: every upload must have landed (ggml's segments would see them
	 * in stream order anyway). */
	gge_dev_settle(g);
	if (!gg->inited) {
		rc = init_tensors(gg, err, errlen);
		if (rc < 0)
			return rc;
		gg->inited = true;
	}
	return 0;
}

int gge_graph_prepare_async(struct gge_dev *g, struct gge_graph *gg, ggml_backend_event_t *ret_up, char *err,
			    size_t errlen)
{
	*ret_up = NULL;
	if (!gg->inited)
		return gge_graph_prepare(g, gg, err, errlen);
	gge_dev_worker_init(g);
	*ret_up = gge_dev_uploads_event(g);
	return 0;
}

int gge_graph_compute(struct gge_dev *g, struct gge_graph *gg, char *err, size_t errlen)
{
	return gge_graph_compute_on(g, g->backend, gg, err, errlen);
}

int gge_graph_compute_on(struct gge_dev *g, ggml_backend_t be, struct gge_graph *gg, char *err, size_t errlen)
{
	int rc = gge_graph_prepare(g, gg, err, errlen);

	if (rc < 0)
		return rc;
	rc = gge_guards_check(gg, 0, gg->nnodes, GGE_GUARD_START, err, errlen);
	for (int from = 0; rc == 0 && from < gg->nnodes;) {
		int to = gge_guards_next_split(gg, from + 1), native = gge_ops_next_native(gg, from);

		/* Everything before `from` has run: its split guards see the
		 * values this run produced. */
		rc = gge_guards_check(gg, from, from + 1, GGE_GUARD_SPLIT, err, errlen);
		if (rc < 0)
			break;
		if (native == from) {
			int why = -1;

			rc = gge_ops_run(gg, from, &why, err, errlen);
			/* this run's data is not the op's to compute: ggml's kernel
			 * computes the node (over whatever the op wrote) */
			if (rc == 0 && why >= 0)
				rc = gge_run_segment(g, be, gg, from, from + 1, err, errlen);
			from++;
			continue;
		}
		if (native < to)
			to = native;
		rc = gge_run_segment(g, be, gg, from, to, err, errlen);
		if (rc == 0)
			gge_ops_count_ggml(gg, from, to);
		from = to;
	}
	return rc;
}

bool gge_graph_async_ok(const struct gge_graph *gg)
{
	int checks = gge_guards_gpu_count(gg);

	return gge_guards_count(gg, GGE_GUARD_SPLIT) == 0 && gge_ops_next_native(gg, 0) == gg->nnodes &&
	       checks >= 0 && checks <= GGE_GPU_CHECKS_MAX;
}

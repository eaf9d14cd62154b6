/*
 * tools/bench/runs.c — one prefill + greedy decode, sequential or
 * pipelined, through the library's pipeline (pprpc_pipeline_run).
 *
 * Both modes run the same commands on the same graphs; only the overlap
 * differs, so the ratio measures pipelining and nothing else:
 *   pp   one pipeline run per logical batch: its ubatches are issued at
 *        once and flow stage to stage (per stage: [WAIT] RECV RUN SIGNAL
 *        SEND, boundaries daemon to daemon; stage 0 gets the ubatch's token
 *        ids, the last stage returns the token its ARGMAX picked);
 *   seq  one pipeline run per ubatch: the same commands, but every ubatch
 *        has left the last stage (and every queue was fenced) before the
 *        next one starts.
 * Decode is the same in both: one pipeline run per token.
 *
 * A micro-batch's graph depends on its step (n_past, n_tok) and on the
 * slot the pipeline gives it (m % 2 within a run), so the plan callback
 * hands the pipeline graph (step, slot) and the step's boundary sizes; the
 * graphs both modes use are built before the pairs (setup_ubatch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/common/measure.h"
#include "util/hash.h"

int batch_end(const struct ctx *x, int u0)
{
	int per = x->m.batch > 0 ? x->m.batch / x->m.ub : x->nub;

	if (per < 1)
		per = 1;
	return u0 + per < x->nub ? u0 + per : x->nub;
}

/* The pipeline asks what stage s runs for micro-batch m of the current run. */
static int plan(void *arg, int s, int m, int slot, pprpc_micro_plan *pl)
{
	struct ctx *x = arg;
	int n_past, n_tok, rc;

	step_shape(x, x->step0 + m, &n_past, &n_tok);
	if ((rc = graph_get(x, s, x->step0 + m, slot, &pl->graph)) < 0)
		return rc;
	pl->in_bytes = stage_in_bytes(x, s, n_tok);
	pl->out_bytes = stage_out_bytes(x, s, n_tok);
	return 0;
}

/* Traced runs: when each stage finished each micro-batch (the pipeline
 * polls the timelines of stages whose outputs do not come back). */
static void observe(void *arg, const pprpc_pipeline_event *ev)
{
	struct ctx *x = arg;
	size_t i = (size_t)ev->stage * x->ev_m + ev->micro;

	if (x->ev_issue && ev->micro < x->ev_m) {
		x->ev_issue[i] = ev->issue_ns;
		x->ev_done[i] = ev->done_ns;
	}
}

static void add_slice(struct ctx *x, int mode, int s, int u, double a, double b)
{
	if (x->nsl == x->capsl) {
		int nc = x->capsl ? 2 * x->capsl : 256;
		struct slice *n = realloc(x->sl, (size_t)nc * sizeof(*n));

		if (!n)
			return;
		x->sl = n;
		x->capsl = nc;
	}
	x->sl[x->nsl++] = (struct slice){ s, u, mode, a, b };
}

/* One pipeline run of M micro-batches from step step0.  Traced: a slice
 * per (stage, micro-batch) from when it could start (issued, its input
 * done on the previous stage, the stage's previous micro-batch done) to
 * when the stage finished it — measured the same way in both modes. */
static int pipe_run(struct ctx *x, int step0, int M, const void *const *in, void *const *out)
{
	int rc;

	x->step0 = step0;
	x->ev_m = M;
	if (x->trace_on) {
		x->ev_issue = calloc((size_t)x->S * M, sizeof(uint64_t));
		x->ev_done = calloc((size_t)x->S * M, sizeof(uint64_t));
	}
	rc = pprpc_pipeline_run(x->trace_on ? x->pipe_traced : x->pipe, M, in, out);
	if (rc < 0) {
		x->rpc_errors++;
		fprintf(stderr, "\npprpc-bench: pipeline run (step %d, %d micro-batches) failed: %s: %s\n", step0, M,
			pprpc_strerror(rc), pprpc_pipeline_error(x->trace_on ? x->pipe_traced : x->pipe));
	}
	if (rc == 0 && x->ev_issue && x->ev_done)
		for (int s = 0; s < x->S; s++)
			for (int m = 0; m < M; m++) {
				size_t i = (size_t)s * M + m;
				uint64_t a = x->ev_issue[i];

				if (m > 0 && x->ev_done[i - 1] > a)
					a = x->ev_done[i - 1];
				if (s > 0 && x->ev_done[i - M] > a)
					a = x->ev_done[i - M];
				add_slice(x, x->mode, s, step0 + m < x->nub ? step0 + m : -1 - (step0 + m - x->nub),
					  a * 1e-9, x->ev_done[i] * 1e-9);
			}
	free(x->ev_issue);
	free(x->ev_done);
	x->ev_issue = x->ev_done = NULL;
	return rc;
}

static int prefill(struct ctx *x, int mode, int32_t *tok)
{
	const void **in = calloc((size_t)x->nub, sizeof(*in));
	void **out = calloc((size_t)x->nub, sizeof(*out));
	int32_t *ids = x->m.prompt, *outs = calloc((size_t)x->nub, sizeof(*outs));
	int rc = 0;

	if (!in || !out || !outs) {
		rc = PPRPC_ENOMEM;
		fprintf(stderr, "pprpc-bench: out of memory\n");
		goto out;
	}
	for (int u = 0; u < x->nub; u++) {
		in[u] = ids + (size_t)u * x->m.ub;
		out[u] = &outs[u];
	}
	if (mode == 0)
		for (int u = 0; u < x->nub && rc == 0; u++)
			rc = pipe_run(x, u, 1, &in[u], &out[u]);
	else
		for (int u0 = 0; u0 < x->nub && rc == 0; u0 = batch_end(x, u0))
			rc = pipe_run(x, u0, batch_end(x, u0) - u0, &in[u0], &out[u0]);
	if (rc == 0)
		*tok = outs[x->nub - 1];
out:
	free(in);
	free(out);
	free(outs);
	return rc;
}

static int check_tok(struct ctx *x, int32_t tok)
{
	if (tok >= 0 && tok < x->m.V)
		return 0;
	fprintf(stderr, "pprpc-bench: sampled token %d outside the vocabulary\n", tok);
	x->rpc_errors++;
	return -1;
}

int run_once(struct ctx *x, int mode, struct run_res *r)
{
	double t0, t1;
	int32_t tok;
	int rc;

	x->mode = mode;
	for (int s = 0; s < x->S; s++)
		if ((rc = pprpc_buffer_clear(x->st[s].c, x->st[s].st, 0)) < 0)
			return rpc_fail(x, s, "buffer_clear (states)", rc);
	t0 = now_s();
	if ((rc = prefill(x, mode, &tok)) < 0 || (rc = check_tok(x, tok)) < 0)
		return rc;
	t1 = now_s();
	r->prefill_s = t1 - t0;
	r->ttft_s = t1 - t0;
	r->toks[0] = tok;
	for (int i = 0; i + 1 < x->m.gen; i++) {
		const void *in = &tok;
		void *out = &tok;

		if ((rc = pipe_run(x, x->nub + i, 1, &in, &out)) < 0 || (rc = check_tok(x, tok)) < 0)
			return rc;
		r->toks[i + 1] = tok;
	}
	r->decode_s = now_s() - t1;
	r->hash = fnv1a64(r->toks, (size_t)x->m.gen * 4);
	return 0;
}

/* ---- setup ------------------------------------------------------------------------ */

static int alloc_io(struct ctx *x, int s, const int32_t *pos)
{
	struct stage *st = &x->st[s];
	int rc;

	st->in_max = stage_in_bytes(x, s, x->m.ub);
	st->out_max = stage_out_bytes(x, s, x->m.ub);
	if ((rc = pprpc_buffer_alloc(st->c, 0, (uint64_t)x->m.n_ctx * 4, &st->pos)) < 0)
		return rpc_fail(x, s, "buffer_alloc (positions)", rc);
	for (int k = 0; k < 2; k++)
		if ((rc = pprpc_buffer_alloc(st->c, 0, st->in_max, &st->in[k])) < 0 ||
		    (rc = pprpc_buffer_alloc(st->c, 0, st->out_max, &st->out[k])) < 0)
			return rpc_fail(x, s, "buffer_alloc (boundary slots)", rc);
	if ((rc = pprpc_tensor_set(st->c, st->pos, 0, pos, (uint64_t)x->m.n_ctx * 4)) < 0)
		return rpc_fail(x, s, "tensor_set (positions)", rc);
	return 0;
}

/* The graphs the modes use: seq and decode run every step alone (slot 0),
 * pp's ubatch u is micro-batch u - u0 of its logical batch. */
static int build_graphs(struct ctx *x, int s)
{
	pprpc_graph g;
	int rc = 0;

	for (int u0 = 0; u0 < x->nub && rc == 0; u0 = batch_end(x, u0))
		for (int u = u0; u < batch_end(x, u0) && rc == 0; u++)
			if ((rc = graph_get(x, s, u, 0, &g)) == 0)
				rc = graph_get(x, s, u, (u - u0) % 2, &g);
	for (int i = x->nub; i < x->nsteps && rc == 0; i++)
		rc = graph_get(x, s, i, 0, &g);
	return rc;
}

int setup_ubatch(struct ctx *x)
{
	const struct cfg *m = &x->m;
	pprpc_stage stages[MAX_RANKS];
	pprpc_pipeline_opts o = { .plan = plan, .plan_arg = x };
	/* Traces come from their own pipeline: polling the timelines costs
	 * client time that timed runs must not pay. */
	pprpc_pipeline_opts ot = { .plan = plan, .plan_arg = x, .observe = observe, .observe_arg = x,
				   .observe_poll_us = 200 };
	int32_t *pos = malloc((size_t)m->n_ctx * 4);
	const char *why = "";
	int rc = 0;

	if (!pos)
		return -1;
	for (int i = 0; i < m->n_ctx; i++)
		pos[i] = i;
	x->nub = (m->P + m->ub - 1) / m->ub;
	x->nsteps = x->nub + (m->gen - 1);
	memset(stages, 0, sizeof(stages));
	for (int s = 0; s < x->S && rc == 0; s++) {
		struct stage *st = &x->st[s];

		if (!(st->g = calloc((size_t)x->nsteps, sizeof(*st->g)))) {
			rc = -1;
			break;
		}
		if ((rc = alloc_io(x, s, pos)) < 0 || (rc = build_graphs(x, s)) < 0)
			break;
		stages[s] = (pprpc_stage){ .client = st->c, .rank = st->addr, .device = 0,
					   .graph = { st->g[0][0], st->g[0][0] },
					   .in_buf = { st->in[0], st->in[1] }, .out_buf = { st->out[0], st->out[1] },
					   .in_bytes = st->in_max, .out_bytes = st->out_max };
	}
	free(pos);
	if (rc < 0)
		return rc;
	if ((rc = pprpc_pipeline_create(stages, x->S, &o, &x->pipe)) < 0 ||
	    (x->trace_req && (rc = pprpc_pipeline_create(stages, x->S, &ot, &x->pipe_traced)) < 0)) {
		x->rpc_errors++;
		fprintf(stderr, "pprpc-bench: pipeline_create failed: %s: %s\n", pprpc_strerror(rc),
			pprpc_last_error(x->st[0].c));
		return rc;
	}
	if (strcmp(pprpc_pipeline_transfer(x->pipe, &why), "p2p"))
		printf("pprpc-bench: boundaries go through this process: %s\n", why);
	return 0;
}

void teardown_ubatch(struct ctx *x)
{
	pprpc_pipeline_free(x->pipe);
	pprpc_pipeline_free(x->pipe_traced);
	x->pipe = x->pipe_traced = NULL;
	for (int s = 0; s < x->S; s++) {
		struct stage *st = &x->st[s];
		pprpc_buffer *bufs[] = { &st->pos, &st->in[0], &st->in[1], &st->out[0], &st->out[1] };

		for (int i = 0; st->g && i < x->nsteps; i++)
			for (int k = 0; k < 2; k++)
				if (st->g[i][k].id)
					pprpc_graph_free(st->c, st->g[i][k]);
		free(st->g);
		st->g = NULL;
		for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
			if (bufs[i]->id)
				pprpc_buffer_free(st->c, *bufs[i]);
			bufs[i]->id = 0;
		}
	}
}

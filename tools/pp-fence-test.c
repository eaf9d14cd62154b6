/*
 * pp-fence-test — pipelined vs sequential execution over pprpc stages, with
 * parity and sentinel checks (the main job).
 *
 * One stage per rank; each stage is L layers of
 *     h = W^T x            (MUL_MAT, W f16 [D, D], x f32 [D, T])
 *     r = x + h            (ADD: residual)
 *     x = r * g            (MUL by a per-channel gain g f32 [D, 1]: the norm)
 * The "norm" is a fixed per-channel gain (not RMS_NORM: the stack must
 * stay linear for the sentinels below) with values in [0.80, 0.90], and W
 * has entries uniform in
 * [-1/sqrt(D), 1/sqrt(D)]: ||I + W^T|| stays near 1.15, so each layer
 * multiplies the magnitude by about 0.85 * 1.15 and values stay bounded
 * through any number of stages.  All weights come from --seed.
 *
 * Each micro-batch's token 0 is its sentinel: every channel is set to
 * v(m) = 1 + (m + 1 + u) / (M + 1) (u in [0, 0.5) from the seed).  The
 * stack is linear and tokens are independent, so stage s's output token 0
 * must be v(m) * r_s, with r_s the float64 propagation of a vector of ones;
 * the values of two micro-batches differ by at least 1/(M+1) relatively,
 * far above the 1e-2 tolerance, so a boundary carrying another micro-batch
 * (or a half-overwritten one) is caught even if both modes agreed.
 *
 * A run of T tokens is split like a prompt into M ubatches of
 * u = ceil(T / M) tokens, the last one ragged (T - (M-1) u): it runs its
 * own graphs (built for its size, on the same slot buffers), given to the
 * pipeline through its plan callback.
 *
 * Sequential mode (the reference) pushes each micro-batch through all
 * stages with synchronous calls; pipelined mode uses pprpc_pipeline_run,
 * whose boundaries go daemon to daemon (SEND/RECV, --transfer p2p, the
 * default) or through this process (--transfer client).  On the client
 * path every boundary of every micro-batch is compared byte for byte (hash
 * and max |diff| reported on a mismatch); on the p2p path the boundaries
 * never reach this process, so the final outputs are compared (a wrong
 * boundary changes them) and carry the sentinels.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/tensor.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "pprpc_pipeline.h"
#include "libclient/pipeline_hooks.h"
#include "tools/common/spawn.h"
#include "tools/common/measure.h"
#include "tools/common/report.h"
#include "util/hash.h"
#include "util/list.h"

#define MAX_RANKS 16
#define MAX_TOKENS INT_LIST_MAX
#define MAX_REPEAT 50

static const char usage[] =
	"usage: pp-fence-test [--ranks HOST:PORT[,HOST:PORT...] | --spawn N] [options]\n"
	"\n"
	"Runs M micro-batches through one stage per rank, sequentially (synchronous\n"
	"calls, the reference) and pipelined (pprpc_pipeline_run: async queues,\n"
	"double-buffered boundaries, timeline waits), compares every stage boundary\n"
	"of every micro-batch bit for bit, checks each micro-batch's sentinel, and\n"
	"prints per token count: sequential and pipelined wall time (median of\n"
	"--repeat paired runs), speedup, the ideal S*T/(T+(S-1)*u) (S*M/(S+M-1)\n"
	"when u divides T), efficiency, RPC\n"
	"errors and sentinel failures.  Exit status 0 only when parity and sentinels\n"
	"hold and no RPC failed; 1 otherwise; 2 for bad usage.\n"
	"\n"
	"  --ranks LIST           use running daemons (one stage each)\n"
	"  --cluster FILE         the ranks of a cluster file (NAME HOST:PORT DEVICES per line)\n"
	"  --spawn-devices LIST   with --spawn: rank i serves device LIST[i] (e.g. cuda:0,cuda:1;\n"
	"                         default cpu)\n"
	"  --spawn-arg ARG        with --spawn: pass ARG to every daemon (repeatable, e.g.\n"
	"                         --spawn-arg --cuda-graphs=0)\n"
	"  --spawn N              start N local pprpcd (--threads 1, OPENBLAS_NUM_THREADS=1\n"
	"                         unless set) and stop them after\n"
	"  --ubatches M           micro-batches (default 8)\n"
	"  --tokens T[,T...]      tokens per run, each split into M micro-batches of\n"
	"                         ceil(T/M) tokens, the last one ragged (default\n"
	"                         2048,4096,8192)\n"
	"  --width D              hidden size (default 512)\n"
	"  --layers-per-stage L   matmul + residual + norm layers per stage (default 2)\n"
	"  --mode seq|pp|both     what to run (default both; parity needs both)\n"
	"  --repeat R             paired seq/pp runs per token count (default 5)\n"
	"  --seed S               weights, inputs and sentinels (default 1)\n"
	"  --json FILE            write the results as JSON\n"
	"  --trace FILE           write a Chrome trace-event JSON (open in Perfetto)\n"
	"  --svg FILE             SVG Gantt chart of the last run (seq RUNs, pp micro-batches)\n"
	"  --transfer p2p|client  how boundaries travel (default p2p: daemon to daemon;\n"
	"                         falls back to client, with the reason, if the daemons\n"
	"                         cannot reach each other; PPRPC_P2P=0 forces client)\n"
	"  --unsafe-no-war        negative control: the pipeline drops its\n"
	"                         write-after-read protection (must FAIL; uses the\n"
	"                         client path, where that protection is needed)\n"
	"  --help\n"
	"\n"
	"Trace: one process per rank; all times are taken by this client.  Row\n"
	"\"seq\" has one slice per synchronous command (SET, RUN, GET: from the call\n"
	"to its return).  Row \"pp\" has one slice per micro-batch: from when its\n"
	"commands were issued, or when the stage's previous micro-batch's output\n"
	"arrived if that was later, until its own output arrived at the client —\n"
	"an upper bound of the queue's execution, including the relay.  Row\n"
	"\"client\" on process 0 shows the runs themselves.\n";

struct stage {
	pprpc_client *c;
	const char *addr;
	pprpc_buffer w[64], g[64];      /* per layer */
	pprpc_buffer in[2], out[2];
	pprpc_graph graph[2];
	pprpc_graph tail[2];            /* the ragged last ubatch's graphs (none if T % u == 0) */
};


struct ctx {
	int S, M, D, L, repeat, unsafe, do_seq, do_pp;
	int client_transfer;            /* --transfer client */
	int used_p2p;                   /* what the pipeline actually used */
	char fallback[320];
	uint64_t client_boundary_bytes;
	uint64_t seed;
	struct stage st[MAX_RANKS];
	uint16_t *w16[MAX_RANKS];       /* [L][D*D] */
	float *gain[MAX_RANKS];         /* [L][D] */
	double *ones_ref[MAX_RANKS];    /* r_s: float64 image of a ones vector after stage s */
	int rpc_errors, sentinel_failures, parity_failures;
	struct trace tr;
	const char *svg;                /* --svg: Gantt of the last repeat of the last token count */
	struct gantt_slice *gantt;
	int ngantt, capgantt;
	/* per token count */
	int Tm;                         /* tokens of a full ubatch: ceil(T / M) */
	int Tlast;                      /* tokens of the last one (<= Tm) */
	uint64_t bytes;                 /* one boundary of one full micro-batch */
	float **seq_out;                /* [s * M + m] */
	float **pp_out;                 /* [s * M + m] (observer copies) */
	int pp_seen;
	uint64_t *pp_issue, *pp_done;   /* [s * M + m] */
};

/* Uniform in [-1, 1). */
static float urand(uint64_t *s)
{
	*s = splitmix64(*s);
	return (float)(unit_double(*s) * 2.0 - 1.0);
}

static int rpc_fail(struct ctx *x, const char *what, int s, int rc)
{
	x->rpc_errors++;
	fprintf(stderr, "pp-fence-test: stage %d (%s): %s failed: %s: %s\n", s, x->st[s].addr, what,
		pprpc_strerror(rc), pprpc_last_error(x->st[s].c));
	return rc;
}

/* ---- trace ------------------------------------------------------------------ */

/* One slice in the trace (and, for the last repeat, in the Gantt chart). */
static void tr_slice(struct ctx *x, int pid, int tid, const char *name, double a, double b, int T, int m)
{
	char args[48];

	snprintf(args, sizeof(args), "\"tokens\":%d,\"ubatch\":%d", T, m);
	trace_slice(&x->tr, pid, tid, name, a, b, args);
}

static void gantt_add(struct ctx *x, int panel, int row, int m, double a, double b)
{
	if (!x->svg || x->ngantt == x->capgantt)
		return;
	x->gantt[x->ngantt++] = (struct gantt_slice){ panel, row, m, a, b };
}

static void tr_names(struct ctx *x)
{
	struct trace *t = &x->tr;
	char name[96];

	trace_process(t, 0, "client");
	trace_thread(t, 0, 0, "client");
	for (int s = 0; s < x->S; s++) {
		snprintf(name, sizeof(name), "rank %d %s", s, x->st[s].addr);
		trace_process(t, s + 1, name);
		trace_thread(t, s + 1, 1, "seq (device queue)");
		trace_thread(t, s + 1, 2, "pp (device queue)");
	}
}

/* ---- model -------------------------------------------------------------------- */

static void make_weights(struct ctx *x)
{
	double a = 1.0 / sqrt((double)x->D);
	size_t dd = (size_t)x->D * x->D;

	for (int s = 0; s < x->S; s++) {
		uint64_t r = splitmix64(x->seed * 1000003ull + (uint64_t)s);
		double *v = malloc(sizeof(double) * x->D), *h = malloc(sizeof(double) * x->D);

		x->w16[s] = malloc(dd * 2 * x->L);
		x->gain[s] = malloc(sizeof(float) * x->D * x->L);
		x->ones_ref[s] = malloc(sizeof(double) * x->D);
		if (!v || !h || !x->w16[s] || !x->gain[s] || !x->ones_ref[s]) {
			fprintf(stderr, "pp-fence-test: out of memory\n");
			exit(1);
		}
		for (size_t i = 0; i < dd * x->L; i++)
			x->w16[s][i] = kern_f32_to_f16((float)(urand(&r) * a));
		for (int i = 0; i < x->D * x->L; i++)
			x->gain[s][i] = 0.85f + 0.05f * urand(&r);
		/* r_s = stage s applied (in float64) to r_{s-1}, r_{-1} = ones. */
		for (int i = 0; i < x->D; i++)
			v[i] = s ? x->ones_ref[s - 1][i] : 1.0;
		for (int l = 0; l < x->L; l++) {
			const uint16_t *w = x->w16[s] + dd * l;

			for (int n = 0; n < x->D; n++) {
				double acc = 0;

				for (int k = 0; k < x->D; k++)
					acc += (double)kern_f16_to_f32(w[(size_t)n * x->D + k]) * v[k];
				h[n] = (v[n] + acc) * (double)x->gain[s][l * x->D + n];
			}
			memcpy(v, h, sizeof(double) * x->D);
		}
		memcpy(x->ones_ref[s], v, sizeof(double) * x->D);
		free(v);
		free(h);
	}
}

static double sentinel_value(const struct ctx *x, int m)
{
	double u = unit_double(splitmix64(x->seed ^ 0x5EA7ull)) * 0.5;

	return 1.0 + (m + 1 + u) / (x->M + 1);
}

/* Tokens and boundary bytes of micro-batch m. */
static int tokens_of(const struct ctx *x, int m)
{
	return m == x->M - 1 ? x->Tlast : x->Tm;
}

static uint64_t bytes_of(const struct ctx *x, int m)
{
	return (uint64_t)x->D * tokens_of(x, m) * sizeof(float);
}

/* The ragged last micro-batch runs its own graphs. */
static pprpc_graph graph_of(const struct stage *st, const struct ctx *x, int m, int k)
{
	return m == x->M - 1 && x->Tlast != x->Tm ? st->tail[k] : st->graph[k];
}

static void make_input(const struct ctx *x, int T, int m, float *in)
{
	uint64_t r = splitmix64(x->seed * 7919ull + (uint64_t)T * 131ull + (uint64_t)m);
	size_t n = (size_t)x->D * tokens_of(x, m);

	for (size_t i = 0; i < n; i++)
		in[i] = urand(&r);
	for (int i = 0; i < x->D; i++)
		in[i] = (float)sentinel_value(x, m);
}

/* Does stage s's output of micro-batch m carry m's sentinel in token 0? */
static int sentinel_ok(const struct ctx *x, int s, int m, const float *out)
{
	double v = sentinel_value(x, m), maxref = 0, maxdiff = 0;

	for (int i = 0; i < x->D; i++) {
		double e = v * x->ones_ref[s][i];

		maxref = fmax(maxref, fabs(e));
		maxdiff = fmax(maxdiff, fabs((double)out[i] - e));
	}
	/* 1e-2 relative: GPU tensor cores round activations to f16 (~1e-3 per
	 * layer), while another micro-batch's sentinel differs by at least
	 * 1/(M+1) (11% at M = 8) — a swap is still caught by a wide margin.
	 * Bit-exactness is checked separately, against sequential mode. */
	return maxdiff <= 1e-2 * maxref && maxref > 0;
}

static int upload_weights(struct ctx *x, int s)
{
	struct stage *st = &x->st[s];
	size_t dd = (size_t)x->D * x->D;
	int rc;

	for (int l = 0; l < x->L; l++) {
		if ((rc = pprpc_buffer_alloc(st->c, 0, dd * 2, &st->w[l])) < 0 ||
		    (rc = pprpc_buffer_alloc(st->c, 0, sizeof(float) * x->D, &st->g[l])) < 0)
			return rpc_fail(x, "buffer_alloc (weights)", s, rc);
		if ((rc = pprpc_tensor_set(st->c, st->w[l], 0, x->w16[s] + dd * l, dd * 2)) < 0 ||
		    (rc = pprpc_tensor_set(st->c, st->g[l], 0, x->gain[s] + x->D * l, sizeof(float) * x->D)) < 0)
			return rpc_fail(x, "tensor_set (weights)", s, rc);
	}
	return 0;
}

/* Slot k's graph of stage s for T tokens: in[k] -> L layers -> out[k]. */
static int build_graph(struct ctx *x, int s, int k, int T, pprpc_graph *out)
{
	struct stage *st = &x->st[s];
	pprpc_graph_builder *gb;
	pprpc_tensor tin = pprpc_tensor_make(st->in[k], 0, PPRPC_F32, x->D, T, 1, 1);
	pprpc_tensor tout = pprpc_tensor_make(st->out[k], 0, PPRPC_F32, x->D, T, 1, 1);
	int cur, iout, rc;

	if (pprpc_graph_builder_new(&gb) < 0)
		return PPRPC_ENOMEM;
	cur = pprpc_gb_tensor(gb, &tin);
	iout = pprpc_gb_tensor(gb, &tout);
	for (int l = 0; l < x->L && cur >= 0; l++) {
		pprpc_tensor tw = pprpc_tensor_make(st->w[l], 0, PPRPC_F16, x->D, x->D, 1, 1);
		pprpc_tensor tg = pprpc_tensor_make(st->g[l], 0, PPRPC_F32, x->D, 1, 1, 1);
		int iw = pprpc_gb_tensor(gb, &tw), ig = pprpc_gb_tensor(gb, &tg), h;

		h = pprpc_gb_mul_mat(gb, iw, cur, -1);
		h = h < 0 ? h : pprpc_gb_add(gb, cur, h, -1);
		cur = h < 0 ? h : pprpc_gb_mul(gb, h, ig, l == x->L - 1 ? iout : -1);
	}
	if (cur < 0) {
		fprintf(stderr, "pp-fence-test: graph build: %s\n", pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		x->rpc_errors++;
		return cur;
	}
	rc = pprpc_graph_create(st->c, 0, gb, out);
	pprpc_graph_builder_free(gb);
	if (rc < 0)
		return rpc_fail(x, "graph_create", s, rc);
	return 0;
}

static int setup_tokens(struct ctx *x)
{
	for (int s = 0; s < x->S; s++)
		for (int k = 0; k < 2; k++) {
			struct stage *st = &x->st[s];
			int rc;

			if ((rc = pprpc_buffer_alloc(st->c, 0, x->bytes, &st->in[k])) < 0 ||
			    (rc = pprpc_buffer_alloc(st->c, 0, x->bytes, &st->out[k])) < 0)
				return rpc_fail(x, "buffer_alloc (boundaries)", s, rc);
			if ((rc = build_graph(x, s, k, x->Tm, &st->graph[k])) < 0 ||
			    (x->Tlast != x->Tm && (rc = build_graph(x, s, k, x->Tlast, &st->tail[k])) < 0))
				return rc;
		}
	return 0;
}

static void teardown_tokens(struct ctx *x)
{
	for (int s = 0; s < x->S; s++)
		for (int k = 0; k < 2; k++) {
			struct stage *st = &x->st[s];

			if (st->graph[k].id)
				pprpc_graph_free(st->c, st->graph[k]);
			if (st->tail[k].id)
				pprpc_graph_free(st->c, st->tail[k]);
			if (st->in[k].id)
				pprpc_buffer_free(st->c, st->in[k]);
			if (st->out[k].id)
				pprpc_buffer_free(st->c, st->out[k]);
			st->graph[k].id = st->tail[k].id = st->in[k].id = st->out[k].id = 0;
		}
}

/* ---- the two modes -------------------------------------------------------------- */

static int run_seq(struct ctx *x, int T, float **in, double *ret_s)
{
	double t0 = now_s();

	for (int m = 0; m < x->M; m++) {
		const float *src = in[m];
		int k = m % 2;

		for (int s = 0; s < x->S; s++) {
			struct stage *st = &x->st[s];
			float *dst = x->seq_out[(size_t)s * x->M + m];
			double a = now_s(), b, c, d;
			int rc;

			if ((rc = pprpc_tensor_set(st->c, st->in[k], 0, src, bytes_of(x, m))) < 0)
				return rpc_fail(x, "tensor_set", s, rc);
			b = now_s();
			if ((rc = pprpc_graph_run(st->c, graph_of(st, x, m, k))) < 0)
				return rpc_fail(x, "graph_run", s, rc);
			c = now_s();
			if ((rc = pprpc_tensor_get(st->c, st->out[k], 0, dst, bytes_of(x, m))) < 0)
				return rpc_fail(x, "tensor_get", s, rc);
			d = now_s();
			tr_slice(x, s + 1, 1, "SET", a, b, T, m);
			tr_slice(x, s + 1, 1, "RUN", b, c, T, m);
			tr_slice(x, s + 1, 1, "GET", c, d, T, m);
			gantt_add(x, 0, s, m, b, c);
			src = dst;
		}
	}
	*ret_s = now_s() - t0;
	tr_slice(x, 0, 0, "seq run", t0, t0 + *ret_s, T, -1);
	return 0;
}

static void observe(void *arg, const pprpc_pipeline_event *ev)
{
	struct ctx *x = arg;
	size_t i = (size_t)ev->stage * x->M + ev->micro;

	if (ev->stage < 0 || ev->stage >= x->S || ev->micro < 0 || ev->micro >= x->M ||
	    ev->bytes != bytes_of(x, ev->micro))
		return;
	x->pp_issue[i] = ev->issue_ns;
	x->pp_done[i] = ev->done_ns;
	/* Without bytes: a p2p stage's run seen done by the trace's poll. */
	if (!ev->data)
		return;
	if (ev->data != x->pp_out[i])  /* the last stage's outputs land in place */
		memcpy(x->pp_out[i], ev->data, ev->bytes);
	x->pp_seen++;
}

/* The ragged last micro-batch: its graphs and sizes. */
static int plan(void *arg, int stage, int micro, int slot, pprpc_micro_plan *pl)
{
	struct ctx *x = arg;

	pl->graph = graph_of(&x->st[stage], x, micro, slot);
	pl->in_bytes = pl->out_bytes = bytes_of(x, micro);
	return 0;
}

/* One pipeline per token count, run --repeat times (it must be reusable). */
static int make_pipeline(struct ctx *x, pprpc_pipeline **out)
{
	pprpc_stage stages[MAX_RANKS];
	pprpc_pipeline_opts o = { .observe = observe, .observe_arg = x, .plan = plan, .plan_arg = x,
				  /* a trace wants every stage's times, also on p2p */
				  .observe_poll_us = x->tr.f || x->svg ? 200 : 0,
				  .transfer = x->client_transfer ? PPRPC_TRANSFER_CLIENT : PPRPC_TRANSFER_P2P };
	const char *why = "";
	int rc;

	memset(stages, 0, sizeof(stages));
	for (int s = 0; s < x->S; s++) {
		struct stage *st = &x->st[s];

		stages[s].client = st->c;
		stages[s].rank = st->addr;
		stages[s].device = 0;
		for (int k = 0; k < 2; k++) {
			stages[s].graph[k] = st->graph[k];
			stages[s].in_buf[k] = st->in[k];
			stages[s].out_buf[k] = st->out[k];
		}
		stages[s].in_bytes = stages[s].out_bytes = x->bytes;
	}
	rc = pprpc_pipeline_create(stages, x->S, &o, out);
	if (rc == 0) {
		pipeline_hook_skip_war_wait(*out, x->unsafe);
		x->used_p2p = !strcmp(pprpc_pipeline_transfer(*out, &why), "p2p");
		if (!x->client_transfer && !x->used_p2p && strcmp(x->fallback, why)) {
			snprintf(x->fallback, sizeof(x->fallback), "%s", why);
			printf("pp-fence-test: p2p transfers not used: %s; boundaries go through the client\n", why);
		}
	}
	if (rc < 0) {
		x->rpc_errors++;
		fprintf(stderr, "pp-fence-test: pipeline_create failed: %s: %s\n", pprpc_strerror(rc),
			pprpc_last_error(x->st[0].c));
	}
	return rc;
}

static int run_pp(struct ctx *x, pprpc_pipeline *p, int T, float **in, float **out, double *ret_s)
{
	double t0;
	int rc;

	uint64_t cb0 = pprpc_pipeline_client_bytes(p);

	x->pp_seen = 0;
	t0 = now_s();
	rc = pprpc_pipeline_run(p, x->M, (const void *const *)in, (void *const *)out);
	*ret_s = now_s() - t0;
	x->client_boundary_bytes += pprpc_pipeline_client_bytes(p) - cb0;
	if (rc < 0) {
		x->rpc_errors++;
		fprintf(stderr, "pp-fence-test: pipeline_run failed: %s: %s\n", pprpc_strerror(rc),
			pprpc_pipeline_error(p));
	}
	if (rc == 0 && (x->tr.f || x->svg)) {
		double base_s = 0;  /* the events' times are CLOCK_MONOTONIC, like now_s() */

		/* Every stage: on the p2p path the pipeline polled the others. */
		for (int s = 0; s < x->S; s++) {
			uint64_t prev = 0;

			for (int m = 0; m < x->M; m++) {
				size_t i = (size_t)s * x->M + m;
				uint64_t a = x->pp_issue[i] > prev ? x->pp_issue[i] : prev;
				char name[32];

				snprintf(name, sizeof(name), "ub %d", m);
				tr_slice(x, s + 1, 2, name, base_s + a * 1e-9, base_s + x->pp_done[i] * 1e-9, T, m);
				gantt_add(x, 1, s, m, base_s + a * 1e-9, base_s + x->pp_done[i] * 1e-9);
				prev = x->pp_done[i];
			}
		}
		tr_slice(x, 0, 0, "pp run", t0, t0 + *ret_s, T, -1);
	}
	return rc;
}

/* ---- checks ------------------------------------------------------------------------ */

static int check_sentinels(struct ctx *x, float **outs, const char *mode, int T, int first_stage)
{
	int bad = 0;

	for (int s = first_stage; s < x->S; s++)
		for (int m = 0; m < x->M; m++)
			if (!sentinel_ok(x, s, m, outs[(size_t)s * x->M + m])) {
				if (bad < 8)
					fprintf(stderr, "pp-fence-test: %s T=%d: stage %d output of ubatch %d does not carry its sentinel\n",
						mode, T, s, m);
				bad++;
			}
	x->sentinel_failures += bad;
	return bad;
}

static int compare(struct ctx *x, int T)
{
	int bad = 0;

	int first = x->used_p2p ? x->S - 1 : 0;

	if (x->pp_seen != (x->S - first) * x->M) {
		fprintf(stderr, "pp-fence-test: T=%d: pipeline reported %d of %d boundaries\n", T, x->pp_seen,
			(x->S - first) * x->M);
		x->parity_failures++;
		return 1;
	}
	for (int s = first; s < x->S; s++)
		for (int m = 0; m < x->M; m++) {
			const float *a = x->seq_out[(size_t)s * x->M + m], *b = x->pp_out[(size_t)s * x->M + m];
			size_t n = bytes_of(x, m) / sizeof(float);
			double md = 0;

			if (!memcmp(a, b, bytes_of(x, m)))
				continue;
			for (size_t i = 0; i < n; i++)
				md = fmax(md, fabs((double)a[i] - b[i]));
			if (bad < 8)
				fprintf(stderr, "pp-fence-test: T=%d stage %d ubatch %d: seq hash %016llx, pp hash %016llx, max |diff| %.3g\n",
					T, s, m, (unsigned long long)fnv1a64(a, bytes_of(x, m)),
					(unsigned long long)fnv1a64(b, bytes_of(x, m)), md);
			bad++;
		}
	if (bad)
		x->parity_failures++;
	return bad;
}

/* ---- output ------------------------------------------------------------------------- */

struct result {
	int T, ubatch, last;             /* tokens, a full ubatch's, the last one's */
	double seq_s, pp_s, speedup, ideal, eff;
	int rpc_errors, sentinel_failures, parity_ok;
};

/* What the daemons say the boundaries ran on (their STATS): proof of the
 * path (p2p-tcp, p2p-rdma, p2p-ipc), not the client's assumption. */
static void print_boundary_paths(struct ctx *x)
{
	for (int s = 0; s < x->S; s++) {
		pprpc_stats *st = NULL;

		if (!x->st[s].c || pprpc_stats_get(x->st[s].c, &st) < 0)
			continue;
		for (int i = 0; i < pprpc_stats_count(st, "boundaries"); i++) {
			const char *dir = pprpc_stats_str(st, "boundaries", i, "direction");

			printf("boundary: rank %d (%s) %s %s %s via %s: %llu transfers, %.1f MiB, %llu errors\n", s,
			       x->st[s].addr, dir, !strcmp(dir, "send") ? "to" : "from",
			       pprpc_stats_str(st, "boundaries", i, "peer"), pprpc_stats_str(st, "boundaries", i, "path"),
			       (unsigned long long)pprpc_stats_u64(st, "boundaries", i, "transfers"),
			       pprpc_stats_u64(st, "boundaries", i, "bytes") / 1048576.0,
			       (unsigned long long)pprpc_stats_u64(st, "boundaries", i, "errors"));
		}
		/* Where the WAITs were held: on the GPU (stream memory
		 * operations) or resolved by the daemon's worker. */
		for (int i = 0; i < pprpc_stats_count(st, "devices"); i++) {
#define D(name) (unsigned long long)pprpc_stats_u64(st, "devices", i, name)
			if (pprpc_stats_str(st, "devices", i, "async_status")[0])
				printf("timelines: rank %d (%s) %s: GPU-side %s, %llu WAITs held on the GPU, %llu SIGNALs "
				       "written from a stream, graph runs %llu (captures %llu, replays %llu)\n",
				       s, x->st[s].addr, pprpc_stats_str(st, "devices", i, "info.name"),
				       pprpc_stats_str(st, "devices", i, "async_status"), D("gpu_waits"), D("gpu_signals"),
				       D("graph_runs"), D("graph_captures"), D("graph_replays"));
#undef D
		}
		pprpc_stats_free(st);
	}
}

static int write_json(const char *path, const struct ctx *x, const struct result *res, int nres, int parity)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "pp-fence-test: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"parity\": %s, \"rpc_errors\": %d, \"sentinel_failures\": %d, \"stages\": %d, "
		   "\"ubatches\": %d, \"width\": %d, \"layers_per_stage\": %d, \"repeat\": %d, "
		   "\"unsafe_no_war\": %s, \"transfer\": \"%s\", \"client_boundary_bytes\": %llu, \"results\": [",
		parity ? "true" : "false", x->rpc_errors, x->sentinel_failures, x->S, x->M, x->D, x->L, x->repeat,
		x->unsafe ? "true" : "false", x->used_p2p ? "p2p" : "client",
		(unsigned long long)x->client_boundary_bytes);
	for (int i = 0; i < nres; i++)
		fprintf(f, "%s{\"tokens\": %d, \"ubatch\": %d, \"last_ubatch\": %d, \"seq_s\": %.6f, \"pp_s\": %.6f, "
			   "\"speedup\": %.4f, \"ideal\": %.4f, \"efficiency\": %.4f}",
			i ? ", " : "", res[i].T, res[i].ubatch, res[i].last, res[i].seq_s, res[i].pp_s, res[i].speedup,
			res[i].ideal, res[i].eff);
	fprintf(f, "]}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- main --------------------------------------------------------------------------- */

static int run_tokens(struct ctx *x, int T, struct result *res)
{
	size_t nbuf = (size_t)x->S * x->M;
	float **in = calloc((size_t)x->M, sizeof(float *)), **pp_final = calloc((size_t)x->M, sizeof(float *));
	double seq_t[MAX_REPEAT], pp_t[MAX_REPEAT];
	pprpc_pipeline *pipe = NULL;
	int nseq = 0, npp = 0, ok = 1, sent0 = x->sentinel_failures, rpc0 = x->rpc_errors, rc = 0;

	memset(res, 0, sizeof(*res));
	res->T = T;
	res->ubatch = (T + x->M - 1) / x->M;
	res->last = T - (x->M - 1) * res->ubatch;
	x->Tm = (T + x->M - 1) / x->M;
	x->Tlast = T - (x->M - 1) * x->Tm;
	x->bytes = (uint64_t)x->D * x->Tm * sizeof(float);
	x->seq_out = calloc(nbuf, sizeof(float *));
	x->pp_out = calloc(nbuf, sizeof(float *));
	x->pp_issue = calloc(nbuf, sizeof(uint64_t));
	x->pp_done = calloc(nbuf, sizeof(uint64_t));
	if (!in || !pp_final || !x->seq_out || !x->pp_out || !x->pp_issue || !x->pp_done)
		goto oom;
	for (int m = 0; m < x->M; m++)
		if (!(in[m] = malloc(x->bytes)))
			goto oom;
	for (size_t i = 0; i < nbuf; i++)
		if (!(x->seq_out[i] = malloc(x->bytes)) || !(x->pp_out[i] = malloc(x->bytes)))
			goto oom;
	for (int m = 0; m < x->M; m++) {
		make_input(x, T, m, in[m]);
		/* The pipeline's final outputs land here directly. */
		pp_final[m] = x->pp_out[(size_t)(x->S - 1) * x->M + m];
	}
	rc = setup_tokens(x);
	if (rc == 0 && x->do_pp)
		rc = make_pipeline(x, &pipe);
	if (x->svg) {
		struct gantt_slice *g = realloc(x->gantt, 2 * nbuf * sizeof(*g));

		if (!g)
			goto oom;
		x->gantt = g;
		x->capgantt = 2 * (int)nbuf;
	}
	for (int r = 0; r < x->repeat && rc == 0; r++) {
		x->ngantt = 0;   /* the chart keeps the last repeat */
		if (x->do_seq) {
			rc = run_seq(x, T, in, &seq_t[nseq]);
			if (rc < 0)
				break;
			nseq++;
			if (check_sentinels(x, x->seq_out, "seq", T, 0))
				ok = 0;
		}
		if (x->do_pp) {
			for (size_t i = 0; i < nbuf; i++)
				memset(x->pp_out[i], 0xFF, x->bytes); /* NaNs: nothing stale passes */
			rc = run_pp(x, pipe, T, in, pp_final, &pp_t[npp]);
			if (rc < 0) {
				ok = 0;
				rc = 0; /* the pipeline can run again; keep measuring */
				continue;
			}
			npp++;
			if (check_sentinels(x, x->pp_out, x->unsafe ? "pp (unsafe)" : "pp", T,
					    x->used_p2p ? x->S - 1 : 0))
				ok = 0;
			if (x->do_seq && compare(x, T))
				ok = 0;
		}
	}
	if (rc < 0)
		ok = 0;
	res->seq_s = median_sorting(seq_t, nseq);
	res->pp_s = median_sorting(pp_t, npp);
	res->speedup = res->pp_s > 0 ? res->seq_s / res->pp_s : 0;
	/* Stage time proportional to tokens: seq takes S*T, pp fills and drains
	 * with full ubatches, T + (S-1)*u (S*M/(S+M-1) when u divides T). */
	res->ideal = (double)x->S * T / (T + (double)(x->S - 1) * x->Tm);
	res->eff = res->ideal > 0 ? res->speedup / res->ideal : 0;
	res->rpc_errors = x->rpc_errors - rpc0;
	res->sentinel_failures = x->sentinel_failures - sent0;
	res->parity_ok = ok;
	goto out;
oom:
	fprintf(stderr, "pp-fence-test: out of memory for T=%d\n", T);
	rc = -1;
	res->parity_ok = 0;
out:
	pprpc_pipeline_free(pipe);
	teardown_tokens(x);
	for (int m = 0; in && m < x->M; m++)
		free(in[m]);
	for (size_t i = 0; i < nbuf; i++) {
		if (x->seq_out)
			free(x->seq_out[i]);
		if (x->pp_out)
			free(x->pp_out[i]);
	}
	free(in);
	free(pp_final);
	free(x->seq_out);
	free(x->pp_out);
	free(x->pp_issue);
	free(x->pp_done);
	x->seq_out = x->pp_out = NULL;
	x->pp_issue = x->pp_done = NULL;
	return rc;
}

int main(int argc, char **argv)
{
	static struct ctx X;
	struct ctx *x = &X;
	struct spawned sp[MAX_RANKS];
	struct result res[MAX_TOKENS];
	char addrs[MAX_RANKS][64], binbuf[4096], err[512];
	struct int_list toks;
	const char *ranks = NULL, *tokens = "2048,4096,8192", *mode = "both", *json = NULL, *trace = NULL;
	const char *cluster = NULL, *spawn_devices = NULL, *spawn_args[16];
	int nspawn_args = 0;
	char spawn_dev[MAX_RANKS][64];
	char cluster_ranks[4096] = "";
	int nspawn = 0, nranks = 0, ntok, nres = 0, ret = 1, parity;

	/* A rank that goes away must fail our calls, not kill us (libpprpc
	 * writes with writev, which raises SIGPIPE). */
	signal(SIGPIPE, SIG_IGN);
	x->M = 8;
	x->D = 512;
	x->L = 2;
	x->repeat = 5;
	x->seed = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--unsafe-no-war")) {
			x->unsafe = 1;
			continue;
		} else if (!v) {
			fprintf(stderr, "pp-fence-test: %s needs a value (or is unknown)\n%s", a, usage);
			return 2;
		}
		i++;
		if (!strcmp(a, "--ranks"))
			ranks = v;
		else if (!strcmp(a, "--cluster"))
			cluster = v;
		else if (!strcmp(a, "--spawn-devices"))
			spawn_devices = v;
		else if (!strcmp(a, "--spawn-arg")) {
			if (nspawn_args == 16) {
				fprintf(stderr, "pp-fence-test: at most 16 --spawn-arg\n");
				return 2;
			}
			spawn_args[nspawn_args++] = v;
		}
		else if (!strcmp(a, "--spawn"))
			nspawn = atoi(v);
		else if (!strcmp(a, "--ubatches"))
			x->M = atoi(v);
		else if (!strcmp(a, "--tokens"))
			tokens = v;
		else if (!strcmp(a, "--width"))
			x->D = atoi(v);
		else if (!strcmp(a, "--layers-per-stage"))
			x->L = atoi(v);
		else if (!strcmp(a, "--mode"))
			mode = v;
		else if (!strcmp(a, "--repeat"))
			x->repeat = atoi(v);
		else if (!strcmp(a, "--seed"))
			x->seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--json"))
			json = v;
		else if (!strcmp(a, "--trace"))
			trace = v;
		else if (!strcmp(a, "--svg"))
			x->svg = v;
		else if (!strcmp(a, "--transfer")) {
			if (strcmp(v, "p2p") && strcmp(v, "client")) {
				fprintf(stderr, "pp-fence-test: --transfer p2p|client\n");
				return 2;
			}
			x->client_transfer = !strcmp(v, "client");
		}
		else {
			fprintf(stderr, "pp-fence-test: unknown option %s\n%s", a, usage);
			return 2;
		}
	}
	/* The negative control removes protection the client path needs (the
	 * p2p path orders boundaries by snapshot and queue position). */
	if (x->unsafe)
		x->client_transfer = 1;
	x->do_seq = !strcmp(mode, "seq") || !strcmp(mode, "both");
	x->do_pp = !strcmp(mode, "pp") || !strcmp(mode, "both");
	if (!x->do_seq && !x->do_pp) {
		fprintf(stderr, "pp-fence-test: --mode seq|pp|both\n");
		return 2;
	}
	if (cluster) {
		pprpc_cluster *cl;
		size_t o = 0;

		if (ranks) {
			fprintf(stderr, "pp-fence-test: --cluster and --ranks exclude each other\n");
			return 2;
		}
		if (pprpc_cluster_load(cluster, &cl, err, sizeof(err)) < 0) {
			fprintf(stderr, "pp-fence-test: %s\n", err);
			return 2;
		}
		for (int i = 0; i < pprpc_cluster_size(cl) && o < sizeof(cluster_ranks); i++)
			o += (size_t)snprintf(cluster_ranks + o, sizeof(cluster_ranks) - o, "%s%s", i ? "," : "",
					      pprpc_cluster_addr(cl, i));
		pprpc_cluster_free(cl);
		ranks = cluster_ranks;
	}
	if (!ranks == !nspawn || nspawn < 0 || nspawn > MAX_RANKS) {
		fprintf(stderr, "pp-fence-test: give one of --ranks LIST, --cluster FILE or --spawn N (1..%d)\n",
			MAX_RANKS);
		return 2;
	}
	for (int i = 0; i < MAX_RANKS; i++)
		snprintf(spawn_dev[i], sizeof(spawn_dev[i]), "cpu");
	if (spawn_devices && list_split(spawn_devices, spawn_dev, MAX_RANKS) < 1) {
		fprintf(stderr, "pp-fence-test: bad --spawn-devices list\n");
		return 2;
	}
	if (x->M < 1 || x->M > 1024 || x->D < 1 || x->D > 8192 || x->L < 1 || x->L > 64 || x->repeat < 1 ||
	    x->repeat > MAX_REPEAT) {
		fprintf(stderr, "pp-fence-test: --ubatches 1..1024, --width 1..8192, --layers-per-stage 1..64, --repeat 1..%d\n",
			MAX_REPEAT);
		return 2;
	}
	ntok = list_ints(tokens, &toks, 1, 1 << 20);
	if (ntok < 1) {
		fprintf(stderr, "pp-fence-test: bad --tokens list (1..%d counts, each 1..2^20)\n", INT_LIST_MAX);
		return 2;
	}
	for (int i = 0; i < ntok; i++) {
		int64_t u = (toks.v[i] + x->M - 1) / x->M;

		/* ceil(T/M)-token ubatches must make M of them (T = 9, M = 4
		 * gives 3 of 3 tokens: not 4 ubatches). */
		if (toks.v[i] <= (int64_t)(x->M - 1) * u) {
			fprintf(stderr, "pp-fence-test: --tokens %lld in ubatches of %lld (ceil(T/%d)) makes fewer "
				"than %d ubatches\n", (long long)toks.v[i], (long long)u, x->M, x->M);
			return 2;
		}
	}
	memset(sp, 0, sizeof(sp));
	if (ranks) {
		nranks = list_split(ranks, addrs, MAX_RANKS);
		if (nranks < 1) {
			fprintf(stderr, "pp-fence-test: bad --ranks list (1..%d addresses)\n", MAX_RANKS);
			return 2;
		}
	} else {
		const char *bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));

		/* One core per rank: pprpcd's --threads does not reach OpenBLAS,
		 * which would otherwise start a thread per core in every daemon. */
		setenv("OPENBLAS_NUM_THREADS", "1", 0);

		for (; nranks < nspawn; nranks++) {
			const char *extra[24] = { "--threads", "1", "--devices", spawn_dev[nranks] };

			for (int k = 0; k < nspawn_args; k++)
				extra[4 + k] = spawn_args[k];
			extra[4 + nspawn_args] = NULL;

			if (spawn_daemon(bin, extra, 30000, &sp[nranks], err, sizeof(err)) < 0) {
				fprintf(stderr, "pp-fence-test: %s\n", err);
				spawn_dump_log(&sp[nranks]);
				spawn_stop(&sp[nranks], 0);
				goto out;
			}
			snprintf(addrs[nranks], sizeof(addrs[0]), "%s", sp[nranks].addr);
			printf("started pprpcd pid %d on %s (--threads 1 --devices %s)\n", (int)sp[nranks].pid,
			       sp[nranks].addr, spawn_dev[nranks]);
		}
	}
	x->S = nranks;
	if (trace && trace_open(&x->tr, trace, now_s()) < 0) {
		fprintf(stderr, "pp-fence-test: %s: %s\n", trace, strerror(errno));
		goto out;
	}
	x->tr.t0 = now_s();
	make_weights(x);
	for (int s = 0; s < x->S; s++) {
		pprpc_connect_opts o = { .client_name = "pp-fence-test", .err_buf = err, .err_len = sizeof(err) };
		int rc = pprpc_connect(addrs[s], &o, &x->st[s].c);

		x->st[s].addr = addrs[s];
		if (rc < 0) {
			fprintf(stderr, "pp-fence-test: rank %d (%s): %s\n", s, addrs[s], err);
			x->rpc_errors++;
			goto out;
		}
		if (upload_weights(x, s) < 0)
			goto out;
	}
	tr_names(x);
	printf("pp-fence-test: %d stages x %d layers (matmul f16 + residual + gain norm), width %d, %d ubatches, "
	       "mode %s, transfer %s, repeat %d, seed %llu%s\n",
	       x->S, x->L, x->D, x->M, mode, x->client_transfer ? "client" : "p2p", x->repeat, (unsigned long long)x->seed,
	       x->unsafe ? ", UNSAFE: no write-after-read protection (negative control)" : "");
	printf("%7s %14s %10s %10s %8s %6s %6s %8s %9s %7s\n", "tokens", "ubatch", "seq_s", "pp_s", "speedup",
	       "ideal", "eff", "rpc_err", "sentinel", "parity");
	for (int i = 0; i < ntok; i++) {
		struct result *r = &res[nres++];
		int T = (int)toks.v[i];

		if (run_tokens(x, T, r) < 0 && x->rpc_errors == 0)
			x->rpc_errors++;
		char ub[32];

		/* a ragged last ubatch shows as "u (last l)" */
		if (r->last != r->ubatch)
			snprintf(ub, sizeof(ub), "%d (last %d)", r->ubatch, r->last);
		else
			snprintf(ub, sizeof(ub), "%d", r->ubatch);
		printf("%7d %14s %10.4f %10.4f %8.3f %6.3f %6.3f %8d %9d %7s\n", r->T, ub, r->seq_s, r->pp_s,
		       r->speedup, r->ideal, r->eff, r->rpc_errors, r->sentinel_failures,
		       !(x->do_seq && x->do_pp) ? "n/a" : r->parity_ok ? "ok" : "FAIL");
		fflush(stdout);
	}
	parity = x->parity_failures == 0;
	for (int i = 0; i < nres; i++)
		if (!res[i].parity_ok)
			parity = 0;
	if (json && write_json(json, x, res, nres, parity) < 0)
		goto out;
	print_boundary_paths(x);
	ret = parity && x->sentinel_failures == 0 && x->rpc_errors == 0 ? 0 : 1;
	printf("pp-fence-test: %s (parity %s, %d RPC errors, %d sentinel failures; transfer %s, %llu boundary bytes through the client)\n",
	       ret ? "FAIL" : "PASS", parity ? "ok" : "FAILED", x->rpc_errors, x->sentinel_failures,
	       x->do_pp ? (x->used_p2p ? "p2p" : "client") : "n/a", (unsigned long long)x->client_boundary_bytes);
out:
	if (trace_close(&x->tr) < 0)
		ret = 1;
	if (x->svg && nres > 0) {
		static const char *const panels[2] = { "seq (RUN)", "pp" };
		char title[160];

		snprintf(title, sizeof(title), "pp-fence-test, last run of %d tokens: %d ubatches over %d ranks",
			 res[nres - 1].T, x->M, x->S);
		if (gantt_svg(x->svg, title, panels, 2, x->S, x->gantt, x->ngantt) < 0)
			ret = 1;
	}
	free(x->gantt);
	for (int s = 0; s < MAX_RANKS; s++)
		pprpc_close(x->st[s].c);
	for (int s = 0; s < MAX_RANKS; s++)
		if (sp[s].pid > 0) {
			int st = spawn_stop(&sp[s], 0);

			printf("stopped pprpcd on %s (exit status %d)\n", addrs[s], st);
		}
	for (int s = 0; s < MAX_RANKS; s++) {
		free(x->w16[s]);
		free(x->gain[s]);
		free(x->ones_ref[s]);
	}
	return ret;
}

/*
 * bench/ops — CPU time per op for representative LLM shapes, measured
 * through a real pprpcd (the path a scheduler uses: the daemon's CPU
 * backend, OpenBLAS for MUL_MAT, kernels/cpu for the rest).
 *
 *   bench-ops [--rank HOST:PORT | --pprpcd PATH] [--threads N] [--runs N]
 *             [--only SUBSTRING] [--budget SECONDS]
 *
 * Each case is one graph of one node whose sources are seeded inputs in
 * daemon buffers and whose output is a buffer; it is created once and run
 * with pprpc_graph_run (which returns when the run completed), one warm-up
 * run and then --runs timed runs (default 7; fewer when a case would pass
 * --budget seconds, default 8, but at least 3).  Reported per case: median
 * and [min..max] wall time of a run as the client sees it, "net" = median
 * minus the median round trip of a trivial graph (one in-place SCALE of 4
 * floats, timed the same way first), GFLOP/s from net time for the compute
 * ops, GB/s (each source's bytes and the output once) for the memory-bound
 * ones, and FNV-1a 64 of the output bytes after the runs: the inputs are
 * seeded, so equal hashes across builds or machines mean bit-identical
 * results (kernels, thread counts and BLAS builds can change them; every
 * kernel is deterministic for a fixed build and thread count).
 *
 * This is a profile, not a comparison: it has no baseline side (DESIGN.md's
 * paired-run rule applies to comparisons; run two builds against the same
 * hashes to compare them).  With --rank the daemon is not ours: its thread
 * count and load are whatever they are.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "tools/common/spawn.h"
#include "tools/common/measure.h"
#include "util/hash.h"

#define MAX_RUNS 1000

/* ---- cases ---------------------------------------------------------------------------------- */

enum fill {
	FILL_UNIFORM,  /* floats in [lo, hi] */
	FILL_POS,      /* i32 lo, lo + 1, ... (RoPE positions) */
	FILL_IDS,      /* i32 uniform in [0, hi) (row ids) */
};

struct src_spec {
	int dtype;
	int64_t ne[4];
	enum fill fill;
	double lo, hi;
};

struct bench_case {
	const char *name;
	const char *shape;
	int op;
	int nsrc;
	struct src_spec src[6];
	struct pprpc_op_params p;
	double flops;          /* per run; 0: a memory-bound op (GB/s) */
	double bytes;          /* per run for GB/s; 0: every source and the output */
};

#define U(lo, hi) FILL_UNIFORM, lo, hi

/* Causal prefill of n queries from position 0: keys seen = n (n + 1) / 2. */
#define CAUSAL_KEYS(n) ((double)(n) * ((n) + 1) / 2)

static const struct bench_case CASES[] = {
	{ "MUL_MAT f16", "4096x4096 x 1", PPRPC_OP_MUL_MAT, 2,
	  { { PPRPC_F16, { 4096, 4096, 1, 1 }, U(-0.03, 0.03) },
	    { PPRPC_F32, { 4096, 1, 1, 1 }, U(-1, 1) } },
	  { .f = { 0 } }, 2.0 * 4096 * 4096 * 1, 0 },
	{ "MUL_MAT f16", "4096x4096 x 512", PPRPC_OP_MUL_MAT, 2,
	  { { PPRPC_F16, { 4096, 4096, 1, 1 }, U(-0.03, 0.03) },
	    { PPRPC_F32, { 4096, 512, 1, 1 }, U(-1, 1) } },
	  { .f = { 0 } }, 2.0 * 4096 * 4096 * 512, 0 },
	{ "MUL_MAT q8_0", "4096x4096 x 1", PPRPC_OP_MUL_MAT, 2,
	  { { PPRPC_Q8_0, { 4096, 4096, 1, 1 }, U(-0.03, 0.03) },
	    { PPRPC_F32, { 4096, 1, 1, 1 }, U(-1, 1) } },
	  { .f = { 0 } }, 2.0 * 4096 * 4096 * 1, 0 },
	{ "MUL_MAT q8_0", "4096x4096 x 512", PPRPC_OP_MUL_MAT, 2,
	  { { PPRPC_Q8_0, { 4096, 4096, 1, 1 }, U(-0.03, 0.03) },
	    { PPRPC_F32, { 4096, 512, 1, 1 }, U(-1, 1) } },
	  { .f = { 0 } }, 2.0 * 4096 * 4096 * 512, 0 },
	{ "RMS_NORM", "4096 x 512", PPRPC_OP_RMS_NORM, 1,
	  { { PPRPC_F32, { 4096, 512, 1, 1 }, U(-2, 2) } },
	  { .f = { 1e-6f } }, 0, 0 },
	{ "ROPE neox", "128x32 heads x 512 tok", PPRPC_OP_ROPE, 2,
	  { { PPRPC_F32, { 128, 32, 512, 1 }, U(-1, 1) },
	    { PPRPC_I32, { 512, 1, 1, 1 }, FILL_POS, 0, 0 } },
	  { .f = { 10000.0f, 1.0f }, .i = { PPRPC_ROPE_NEOX, 128 } }, 0, 0 },
	{ "ATTENTION prefill", "D128 32q/8kv heads, 512 q, f16 kv", PPRPC_OP_ATTENTION, 3,
	  { { PPRPC_F32, { 128, 32, 512, 1 }, U(-1, 1) },
	    { PPRPC_F16, { 128, 8, 512, 1 }, U(-1, 1) },
	    { PPRPC_F16, { 128, 8, 512, 1 }, U(-1, 1) } },
	  { .f = { 0.08838835f }, .i = { 0 } }, 4.0 * 128 * 32 * CAUSAL_KEYS(512), 0 },
	{ "ATTENTION decode", "D128 32q/8kv heads, 1 q over 4096 keys, f16 kv",
	  PPRPC_OP_ATTENTION, 3,
	  { { PPRPC_F32, { 128, 32, 1, 1 }, U(-1, 1) },
	    { PPRPC_F16, { 128, 8, 4096, 1 }, U(-1, 1) },
	    { PPRPC_F16, { 128, 8, 4096, 1 }, U(-1, 1) } },
	  { .f = { 0.08838835f }, .i = { 4095 } }, 4.0 * 128 * 32 * 4096, 0 },
	/* ~7 d_k d_v flops per token and head: decay, S^T k, rank-1 update,
	 * S^T q (each a multiply-add over the state). */
	{ "GATED_DELTA_NET kda", "T512 H16 dk=dv=128, l2 in-op", PPRPC_OP_GATED_DELTA_NET, 6,
	  { { PPRPC_F32, { 128, 16, 512, 1 }, U(-1, 1) },
	    { PPRPC_F32, { 128, 16, 512, 1 }, U(-1, 1) },
	    { PPRPC_F32, { 128, 16, 512, 1 }, U(-1, 1) },
	    { PPRPC_F32, { 128, 16, 512, 1 }, U(-0.3, 0) },
	    { PPRPC_F32, { 1, 16, 512, 1 }, U(0.05, 0.95) },
	    { PPRPC_F32, { 128, 128, 16, 1 }, U(-0.1, 0.1) } },
	  { .f = { 0.08838835f, 1e-6f }, .i = { 1 } }, 7.0 * 128 * 128 * 16 * 512, 0 },
	{ "SOFTMAX causal", "512 keys x 512 q x 32 heads", PPRPC_OP_SOFTMAX, 1,
	  { { PPRPC_F32, { 512, 512, 32, 1 }, U(-4, 4) } },
	  { .f = { 0.08838835f }, .i = { 1, 0 } }, 0, 0 },
	/* Only the rows fetched are read: 512 rows of 4096 f16 + the f32 output. */
	{ "GET_ROWS f16", "512 rows of 4096 from 32768", PPRPC_OP_GET_ROWS, 2,
	  { { PPRPC_F16, { 4096, 32768, 1, 1 }, U(-1, 1) },
	    { PPRPC_I32, { 512, 1, 1, 1 }, FILL_IDS, 0, 32768 } },
	  { .f = { 0 } }, 0, 512.0 * 4096 * (2 + 4) },
};

#define NCASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

/* Sorts v. */
static double unif(uint64_t *s)
{
	return unit_double(splitmix64_next(s));
}

/* The seeded bytes of one source (malloc'd, *ret_size bytes). */
static void *make_input(const struct src_spec *sp, uint64_t seed, uint64_t *ret_size)
{
	const int64_t n = sp->ne[0] * sp->ne[1] * sp->ne[2] * sp->ne[3];
	const uint64_t size = pprpc_type_nbytes(sp->dtype, sp->ne[0], sp->ne[1], sp->ne[2], sp->ne[3]);
	void *bytes = malloc(size);
	float *f = NULL;

	if (!bytes)
		return NULL;
	if (sp->dtype == PPRPC_I32) {
		int32_t *v = bytes;

		for (int64_t i = 0; i < n; i++)
			v[i] = sp->fill == FILL_POS ? (int32_t)(sp->lo + (double)i)
						    : (int32_t)(unif(&seed) * sp->hi);
		*ret_size = size;
		return bytes;
	}
	f = sp->dtype == PPRPC_F32 ? bytes : malloc((size_t)n * sizeof(float));
	if (!f) {
		free(bytes);
		return NULL;
	}
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)(sp->lo + (sp->hi - sp->lo) * unif(&seed));
	if (sp->dtype == PPRPC_F16)
		for (int64_t i = 0; i < n; i++)
			((uint16_t *)bytes)[i] = kern_f32_to_f16(f[i]);
	else if (sp->dtype == PPRPC_Q8_0 && kern_q8_0_quantize_row(f, bytes, n) < 0) {
		free(f);
		free(bytes);
		return NULL;
	}
	if (f != bytes)
		free(f);
	*ret_size = size;
	return bytes;
}

/* ---- one case ------------------------------------------------------------------------------------- */

struct ctx {
	pprpc_client *c;
	int runs;
	double budget_s;
	double rtt_s;      /* median round trip of the trivial graph */
};

struct result {
	int runs;
	double med_s, min_s, max_s;
	uint64_t hash;
	double bytes;
};

/* Time `runs` runs of g (after one warm-up); stops early past the budget
 * once 3 runs are in. */
static int time_runs(struct ctx *x, pprpc_graph g, struct result *r)
{
	double t[MAX_RUNS], start;
	int rc, n = 0;

	if ((rc = pprpc_graph_run(x->c, g)) < 0)
		return rc;
	start = now_s();
	while (n < x->runs && (n < 3 || now_s() - start < x->budget_s)) {
		double t0 = now_s();

		if ((rc = pprpc_graph_run(x->c, g)) < 0)
			return rc;
		t[n++] = now_s() - t0;
	}
	r->runs = n;
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	r->min_s = t[0];
	r->max_s = t[n - 1];
	r->med_s = median_sorting(t, n);
	return 0;
}

/* Build the case's one-node graph; out NULL: a scratch output (to learn its
 * shape), else the output tensor.  Returns the builder or NULL. */
static pprpc_graph_builder *build(const struct bench_case *bc, const pprpc_tensor *src,
				  const pprpc_tensor *out, pprpc_tensor *ret_out)
{
	pprpc_graph_builder *gb;
	int idx[6], dst = -1, rc;

	if (pprpc_graph_builder_new(&gb) < 0)
		return NULL;
	for (int i = 0; i < bc->nsrc; i++)
		if ((idx[i] = pprpc_gb_tensor(gb, &src[i])) < 0)
			goto fail;
	if (out && (dst = pprpc_gb_tensor(gb, out)) < 0)
		goto fail;
	if ((rc = pprpc_gb_op(gb, bc->op, idx, bc->nsrc, &bc->p, dst)) < 0)
		goto fail;
	if (ret_out && pprpc_gb_tensor_get(gb, rc, ret_out) < 0)
		goto fail;
	return gb;
fail:
	fprintf(stderr, "bench-ops: %s: %s\n", bc->name, pprpc_gb_error(gb));
	pprpc_graph_builder_free(gb);
	return NULL;
}

static int run_case(struct ctx *x, int ci, struct result *r)
{
	const struct bench_case *bc = &CASES[ci];
	pprpc_buffer bufs[7] = { 0 };
	pprpc_tensor src[6], out;
	pprpc_graph_builder *gb = NULL;
	pprpc_graph g = { 0 };
	void *host = NULL;
	uint64_t out_bytes = 0;
	int rc = PPRPC_ENOMEM;

	r->bytes = 0;
	for (int i = 0; i < bc->nsrc; i++) {
		uint64_t size;
		void *bytes = make_input(&bc->src[i], 1000003ull * (uint64_t)(ci + 1) + (uint64_t)i,
					 &size);
		const int64_t *ne = bc->src[i].ne;

		if (!bytes)
			goto out;
		rc = pprpc_buffer_alloc(x->c, 0, size, &bufs[i]);
		if (rc == 0)
			rc = pprpc_tensor_set(x->c, bufs[i], 0, bytes, size);
		free(bytes);
		if (rc < 0)
			goto out;
		src[i] = pprpc_tensor_make(bufs[i], 0, bc->src[i].dtype, ne[0], ne[1], ne[2], ne[3]);
		r->bytes += (double)size;
	}
	rc = PPRPC_EINVAL;
	if (!(gb = build(bc, src, NULL, &out)))
		goto out;
	pprpc_graph_builder_free(gb);
	out_bytes = pprpc_type_nbytes(out.dtype, out.ne[0], out.ne[1], out.ne[2], out.ne[3]);
	if ((rc = pprpc_buffer_alloc(x->c, 0, out_bytes, &bufs[6])) < 0)
		goto out;
	out = pprpc_tensor_make(bufs[6], 0, out.dtype, out.ne[0], out.ne[1], out.ne[2], out.ne[3]);
	rc = PPRPC_EINVAL;
	if (!(gb = build(bc, src, &out, NULL)))
		goto out;
	if ((rc = pprpc_graph_create(x->c, 0, gb, &g)) < 0 || (rc = time_runs(x, g, r)) < 0)
		goto out;
	rc = PPRPC_ENOMEM;
	if (!(host = malloc(out_bytes)))
		goto out;
	if ((rc = pprpc_tensor_get(x->c, bufs[6], 0, host, out_bytes)) < 0)
		goto out;
	r->hash = fnv1a64(host, out_bytes);
	r->bytes = bc->bytes > 0 ? bc->bytes : r->bytes + (double)out_bytes;
out:
	if (rc < 0)
		fprintf(stderr, "bench-ops: %s %s: %s (%s)\n", bc->name, bc->shape, pprpc_strerror(rc),
			pprpc_last_error(x->c));
	free(host);
	pprpc_graph_builder_free(gb);
	if (g.id)
		pprpc_graph_free(x->c, g);
	for (int i = 0; i < 7; i++)
		if (bufs[i].id)
			pprpc_buffer_free(x->c, bufs[i]);
	return rc;
}

/* The round trip of a graph that does almost nothing: x = x * 1 + 0 on 4
 * floats, in place. */
static int measure_rtt(struct ctx *x)
{
	pprpc_graph_builder *gb = NULL;
	pprpc_buffer b = { 0 };
	pprpc_graph g = { 0 };
	pprpc_tensor t;
	struct result r;
	int rc, i;

	if ((rc = pprpc_buffer_alloc(x->c, 0, 16, &b)) < 0 ||
	    (rc = pprpc_graph_builder_new(&gb)) < 0)
		goto out;
	t = pprpc_tensor_make(b, 0, PPRPC_F32, 4, 1, 1, 1);
	if ((i = rc = pprpc_gb_tensor(gb, &t)) < 0 || (rc = pprpc_gb_scale(gb, i, 1.0f, 0.0f, i)) < 0 ||
	    (rc = pprpc_graph_create(x->c, 0, gb, &g)) < 0)
		goto out;
	{
		struct ctx many = *x;

		many.runs = 200;
		many.budget_s = 5;
		if ((rc = time_runs(&many, g, &r)) < 0)
			goto out;
	}
	x->rtt_s = r.med_s;
out:
	pprpc_graph_builder_free(gb);
	if (g.id)
		pprpc_graph_free(x->c, g);
	if (b.id)
		pprpc_buffer_free(x->c, b);
	return rc;
}

/* ---- main ---------------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-ops [--rank HOST:PORT | --pprpcd PATH] [--threads N] [--runs N]\n"
		"                 [--only SUBSTRING] [--budget SECONDS]\n"
		"  --rank HOST:PORT   use a running pprpcd (default: start one on 127.0.0.1:0)\n"
		"  --pprpcd PATH      daemon binary to start (default: next to this program)\n"
		"  --threads N        --threads for the started daemon (default: all cores)\n"
		"  --runs N           timed runs per case after one warm-up (default 7)\n"
		"  --only SUBSTRING   cases whose name contains it (e.g. MUL_MAT)\n"
		"  --budget SECONDS   stop a case's runs after this long, keeping >= 3 (default 8)\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rank", required_argument, NULL, 'r' },   { "pprpcd", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' }, { "runs", required_argument, NULL, 'n' },
		{ "only", required_argument, NULL, 'o' },   { "budget", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },         { 0 } };
	const char *rank = NULL, *bin = NULL, *only = NULL, *threads = NULL;
	struct ctx x = { .runs = 7, .budget_s = 8 };
	struct spawned d = { 0 };
	char binbuf[512], err[512] = "";
	int opt, status = 1, failed = 0;
	double t_start = now_s();

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': rank = optarg; break;
		case 'p': bin = optarg; break;
		case 't': threads = optarg; break;
		case 'n': x.runs = atoi(optarg); break;
		case 'o': only = optarg; break;
		case 'b': x.budget_s = atof(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (x.runs < 1 || x.runs > MAX_RUNS || !(x.budget_s > 0) ||
	    (threads && atoi(threads) < 1)) {
		usage(stderr);
		return 2;
	}
	if (!rank) {
		const char *extra[] = { threads ? "--threads" : NULL, threads, NULL };

		if (!bin)
			bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));
		if (spawn_daemon(bin, extra, 20000, &d, err, sizeof(err)) < 0) {
			fprintf(stderr, "bench-ops: %s\n", err);
			spawn_dump_log(&d);
			spawn_stop(&d, 0);
			return 1;
		}
		rank = d.addr;
	}
	{
		pprpc_connect_opts o = { .client_name = "bench-ops", .err_buf = err, .err_len = sizeof(err) };
		pprpc_device_info di;
		int rc = pprpc_connect(rank, &o, &x.c);

		if (rc < 0) {
			fprintf(stderr, "bench-ops: connect %s: %s (%s)\n", rank, pprpc_strerror(rc), err);
			goto out;
		}
		if (pprpc_device_get(x.c, 0, &di) < 0 || strcmp(di.kind, "cpu") != 0)
			fprintf(stderr, "bench-ops: note: device 0 is not the CPU device\n");
		printf("bench-ops: pprpcd %s at %s, device 0 = %s (%s), placement %s%s%s\n",
		       pprpc_daemon_version(x.c), rank, di.name, di.description,
		       pprpc_daemon_placement(x.c), threads ? ", threads " : "", threads ? threads : "");
	}
	if (measure_rtt(&x) < 0) {
		fprintf(stderr, "bench-ops: trivial graph failed: %s\n", pprpc_last_error(x.c));
		goto out;
	}
	printf("round trip of a trivial graph (median of 200): %.3f ms; net = median - that\n\n",
	       x.rtt_s * 1e3);
	printf("%-20s %-44s %4s %10s %10s %21s %9s %8s  %s\n", "op", "shape", "runs", "median ms",
	       "net ms", "[min .. max] ms", "GFLOP/s", "GB/s", "output hash");
	for (int i = 0; i < NCASES; i++) {
		const struct bench_case *bc = &CASES[i];
		struct result r;
		char range[32], gf[16] = "-", gbs[16] = "-";
		double net;

		if (only && !strstr(bc->name, only))
			continue;
		if (run_case(&x, i, &r) < 0) {
			failed++;
			continue;
		}
		net = r.med_s - x.rtt_s > 0 ? r.med_s - x.rtt_s : r.med_s;
		snprintf(range, sizeof(range), "[%.3f .. %.3f]", r.min_s * 1e3, r.max_s * 1e3);
		if (bc->flops > 0)
			snprintf(gf, sizeof(gf), "%.2f", bc->flops / net * 1e-9);
		else
			snprintf(gbs, sizeof(gbs), "%.2f", r.bytes / net * 1e-9);
		printf("%-20s %-44s %4d %10.3f %10.3f %21s %9s %8s  %016" PRIx64 "\n", bc->name,
		       bc->shape, r.runs, r.med_s * 1e3, net * 1e3, range, gf, gbs, r.hash);
		fflush(stdout);
	}
	printf("\ntotal %.1f s%s\n", now_s() - t_start, failed ? ", some cases FAILED" : "");
	status = failed ? 1 : 0;
out:
	pprpc_close(x.c);
	if (d.pid > 0)
		spawn_stop(&d, 0);
	return status;
}

/*
 * bench/graph_replay — what a GRAPH_RUN costs with CUDA-graph replay next
 * to plain per-node launches, in the same run.
 *
 *   bench-graph_replay [--pprpcd PATH] [--device cuda:0] [--nodes K]
 *                      [--width N] [--runs R] [--json FILE]
 *
 * Two daemons serve the same device: the candidate with --cuda-graphs=1
 * (the first run of a graph is captured, later runs replay it: one launch),
 * the baseline with --cuda-graphs=0 (one launch per node, every run).  Both
 * get the same graph of K small nodes over N floats (a chain of SCALE, SILU
 * and ADD into scratch tensors, ending in an output buffer): small enough
 * that what is measured is the per-run and per-node overhead, not the
 * arithmetic.  One run = pprpc_graph_run_async + pprpc_synchronize, timed
 * from the call to the return; runs alternate between the daemons so drift
 * hits both alike.  Reported: p50 and p99 per run on each side, per-node
 * cost, and the time ratio baseline/candidate per block of 50 runs (block
 * medians): median [min..max].
 *
 * Parity in the same run: both outputs are read back and hashed after the
 * runs (the same kernels on the same input: identical bytes), and each
 * daemon's STATS must show the path: captures and replays on the
 * candidate, none on the baseline.  Exit status 1 when either fails.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "tools/common/measure.h"
#include "tools/common/spawn.h"

#define BLOCK 50

struct side {
	const char *name;
	const char *flag;
	struct spawned d;
	pprpc_client *c;
	pprpc_buffer x, y;
	pprpc_graph g;
	double *t;           /* seconds per run */
	uint64_t hash;
	uint64_t captures, replays, runs;
};

static int fail(pprpc_client *c, const char *what, int rc)
{
	fprintf(stderr, "bench-graph_replay: %s: %s (%s)\n", what, pprpc_strerror(rc), c ? pprpc_last_error(c) : "");
	return -1;
}

/* x -> K nodes -> y; values stay bounded (scale by 1/2, silu, add). */
static int build(struct side *s, int nodes, int width)
{
	pprpc_tensor tx = pprpc_tensor_make(s->x, 0, PPRPC_F32, width, 1, 1, 1);
	pprpc_tensor ty = pprpc_tensor_make(s->y, 0, PPRPC_F32, width, 1, 1, 1);
	pprpc_graph_builder *gb;
	int ix, iy, cur, rc;

	if (pprpc_graph_builder_new(&gb) < 0)
		return -1;
	ix = pprpc_gb_tensor(gb, &tx);
	iy = pprpc_gb_tensor(gb, &ty);
	cur = ix;
	for (int k = 0; k < nodes && cur >= 0; k++) {
		int last = k == nodes - 1 ? iy : -1;

		switch (k % 3) {
		case 0: cur = pprpc_gb_scale(gb, cur, 0.5f, 0.25f, last); break;
		case 1: cur = pprpc_gb_silu(gb, cur, last); break;
		default: cur = pprpc_gb_add(gb, cur, ix, last); break;
		}
	}
	if (cur < 0) {
		fprintf(stderr, "bench-graph_replay: graph: %s\n", pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		return -1;
	}
	rc = pprpc_graph_create(s->c, 0, gb, &s->g);
	pprpc_graph_builder_free(gb);
	return rc < 0 ? fail(s->c, "graph_create", rc) : 0;
}

static int setup(struct side *s, const char *bin, const char *device, int nodes, int width, const float *in)
{
	const char *extra[] = { "--devices", device, s->flag, "--threads", "1", NULL };
	pprpc_connect_opts o = { .client_name = "bench-graph_replay" };
	char err[512];
	int rc;

	if (spawn_daemon(bin, extra, 30000, &s->d, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-graph_replay: %s daemon: %s\n", s->name, err);
		return -1;
	}
	printf("started pprpcd pid %d on %s (--devices %s %s)\n", (int)s->d.pid, s->d.addr, device, s->flag);
	if ((rc = pprpc_connect(s->d.addr, &o, &s->c)) < 0)
		return fail(NULL, "connect", rc);
	if ((rc = pprpc_buffer_alloc(s->c, 0, (uint64_t)width * 4, &s->x)) < 0 ||
	    (rc = pprpc_buffer_alloc(s->c, 0, (uint64_t)width * 4, &s->y)) < 0)
		return fail(s->c, "buffer_alloc", rc);
	if ((rc = pprpc_tensor_set(s->c, s->x, 0, in, (uint64_t)width * 4)) < 0)
		return fail(s->c, "tensor_set", rc);
	return build(s, nodes, width);
}

static int run_once(struct side *s, double *ret_s)
{
	double t0 = now_s();
	int rc = pprpc_graph_run_async(s->c, s->g);

	if (rc == 0)
		rc = pprpc_synchronize(s->c, 0);
	*ret_s = now_s() - t0;
	return rc < 0 ? fail(s->c, "graph_run", rc) : 0;
}

static int finish(struct side *s, int width)
{
	float *out = malloc((size_t)width * 4);
	pprpc_stats *st = NULL;
	int rc;

	if (!out)
		return -1;
	rc = pprpc_tensor_get(s->c, s->y, 0, out, (uint64_t)width * 4);
	if (rc < 0) {
		free(out);
		return fail(s->c, "tensor_get", rc);
	}
	s->hash = hash64(out, (size_t)width * 4);
	free(out);
	if ((rc = pprpc_stats_get(s->c, &st)) < 0)
		return fail(s->c, "stats", rc);
	s->captures = pprpc_stats_u64(st, "devices", 0, "graph_captures");
	s->replays = pprpc_stats_u64(st, "devices", 0, "graph_replays");
	s->runs = pprpc_stats_u64(st, "devices", 0, "graph_runs");
	pprpc_stats_free(st);
	return 0;
}

static double pctl(const double *v, int n, double p)
{
	double *c = malloc(sizeof(double) * (size_t)n), r;

	if (!c)
		return 0;
	memcpy(c, v, sizeof(double) * (size_t)n);
	qsort(c, (size_t)n, sizeof(double), cmp_double);
	r = pct_sorted(c, n, p);
	free(c);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pprpcd", required_argument, NULL, 'p' }, { "device", required_argument, NULL, 'd' },
		{ "nodes", required_argument, NULL, 'k' },  { "width", required_argument, NULL, 'w' },
		{ "runs", required_argument, NULL, 'r' },   { "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct side sd[2] = { { .name = "candidate (replay)", .flag = "--cuda-graphs=1" },
			      { .name = "baseline (plain launches)", .flag = "--cuda-graphs=0" } };
	const char *device = "cpu", *json = NULL, *bin;
	char binbuf[512];
	int nodes = 64, width = 4096, runs = 400, opt, ret = 1, nblk = 0, ok = 1;
	double ratio[256], lo, hi;
	float *in = NULL;

	bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': bin = optarg; break;
		case 'd': device = optarg; break;
		case 'k': nodes = atoi(optarg); break;
		case 'w': width = atoi(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 'j': json = optarg; break;
		default:
			printf("usage: bench-graph_replay [--pprpcd PATH] [--device cuda:0] [--nodes K] [--width N] "
			       "[--runs R] [--json FILE]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (nodes < 1 || nodes > 4096 || width < 1 || runs < BLOCK || runs > BLOCK * 256) {
		fprintf(stderr, "bench-graph_replay: need 1 <= nodes <= 4096, width >= 1, %d <= runs <= %d\n", BLOCK,
			BLOCK * 256);
		return 2;
	}
	in = malloc((size_t)width * 4);
	for (int i = 0; in && i < width; i++)
		in[i] = (float)((i % 97) - 48) / 16.0f;
	for (int k = 0; k < 2; k++) {
		sd[k].t = calloc((size_t)runs, sizeof(double));
		if (!in || !sd[k].t || setup(&sd[k], bin, device, nodes, width, in) < 0)
			goto out;
	}
	/* Untimed: the candidate captures here; both warm their paths. */
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < 2; k++) {
			double junk;

			if (run_once(&sd[k], &junk) < 0)
				goto out;
		}
	for (int i = 0; i < runs; i++)
		for (int j = 0; j < 2; j++) {
			int k = (i + j) % 2; /* alternate who goes first */

			if (run_once(&sd[k], &sd[k].t[i]) < 0)
				goto out;
		}
	for (int b = 0; b + BLOCK <= runs; b += BLOCK)
		ratio[nblk++] = median(sd[1].t + b, BLOCK) / median(sd[0].t + b, BLOCK);
	min_max(ratio, nblk, &lo, &hi);
	for (int k = 0; k < 2; k++)
		if (finish(&sd[k], width) < 0)
			goto out;

	printf("graph: %d nodes over %d floats on %s, %d runs per side (alternating), run = GRAPH_RUN + FENCE\n", nodes,
	       width, device, runs);
	for (int k = 0; k < 2; k++)
		printf("%-26s p50 %8.1f us  p99 %8.1f us  per node %6.2f us  (daemon: runs %" PRIu64 ", captures %" PRIu64
		       ", replays %" PRIu64 ")\n",
		       sd[k].name, pctl(sd[k].t, runs, 50) * 1e6, pctl(sd[k].t, runs, 99) * 1e6,
		       pctl(sd[k].t, runs, 50) * 1e6 / nodes, sd[k].runs, sd[k].captures, sd[k].replays);
	printf("time ratio baseline/candidate: median %.3f [%.3f..%.3f] over %d blocks of %d\n", median(ratio, nblk), lo,
	       hi, nblk, BLOCK);
	if (sd[0].hash != sd[1].hash) {
		printf("parity: FAILED (output hash %016" PRIx64 " with replay, %016" PRIx64 " without)\n", sd[0].hash,
		       sd[1].hash);
		ok = 0;
	} else {
		printf("parity: ok (output hash %016" PRIx64 " on both)\n", sd[0].hash);
	}
	/* Proof of the path, from the daemons: a CUDA device captures on the
	 * candidate only; a CPU device captures nowhere. */
	if (sd[1].captures || sd[1].replays || (strncmp(device, "cuda", 4) == 0 && sd[0].replays < (uint64_t)runs)) {
		printf("path: FAILED (candidate %" PRIu64 " replays, baseline %" PRIu64 " captures)\n", sd[0].replays,
		       sd[1].captures);
		ok = 0;
	}
	if (json) {
		FILE *f = fopen(json, "w");

		if (f) {
			fprintf(f,
				"{\"device\":\"%s\",\"nodes\":%d,\"width\":%d,\"runs\":%d,\"replay_p50_us\":%.2f,"
				"\"plain_p50_us\":%.2f,\"ratio_median\":%.4f,\"ratio_min\":%.4f,\"ratio_max\":%.4f,"
				"\"parity\":%s}\n",
				device, nodes, width, runs, pctl(sd[0].t, runs, 50) * 1e6, pctl(sd[1].t, runs, 50) * 1e6,
				median(ratio, nblk), lo, hi, ok ? "true" : "false");
			fclose(f);
		}
	}
	ret = ok ? 0 : 1;
out:
	for (int k = 0; k < 2; k++) {
		if (sd[k].c)
			pprpc_close(sd[k].c);
		if (sd[k].d.pid > 0)
			spawn_stop(&sd[k].d, 0);
		free(sd[k].t);
	}
	free(in);
	return ret;
}

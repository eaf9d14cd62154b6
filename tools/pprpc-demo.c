/*
 * pprpc-demo — the foundation's end-to-end run: start local daemons (or use
 * given ranks), place one stage of a small residual MLP on each, run a batch
 * through the stages and check the result against a float64 reference.
 *
 *   pprpc-demo [--spawn N | --ranks HOST:PORT,...] [--width D] [--tokens T] [--seed S]
 *
 * Until stage-boundary transfers exist, the boundary tensor travels through
 * this process (get from rank r, set on rank r+1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/tensor.h"
#include "pprpc.h"
#include "pprpc_graph.h"
#include "tools/common/spawn.h"
#include "tools/common/measure.h"
#include "util/hash.h"
#include "util/list.h"

#define MAX_RANKS 8

struct stage {
	pprpc_client *c;
	pprpc_buffer w, x, y;
	pprpc_graph g;
	uint64_t arena;
};

static float frand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (float)((*s >> 11) % 2001) / 1000.0f - 1.0f;
}

static int die(const char *what, pprpc_client *c, int rc)
{
	fprintf(stderr, "pprpc-demo: %s failed: %s%s%s\n", what, pprpc_strerror(rc), c ? ": " : "",
		c ? pprpc_last_error(c) : "");
	return 1;
}

/* Stage graph: y = x + scale * (W^T x), W f16 [D, D], x, y f32 [D, T]. */
static int build_stage(struct stage *s, int D, int T, const uint16_t *w16, float scale)
{
	pprpc_graph_builder *gb;
	pprpc_tensor tw, tx, ty;
	int iw, ix, iy, h, rc;

	if ((rc = pprpc_buffer_alloc(s->c, 0, (uint64_t)D * D * 2, &s->w)) < 0 ||
	    (rc = pprpc_buffer_alloc(s->c, 0, (uint64_t)D * T * 4, &s->x)) < 0 ||
	    (rc = pprpc_buffer_alloc(s->c, 0, (uint64_t)D * T * 4, &s->y)) < 0)
		return die("buffer_alloc", s->c, rc);
	if ((rc = pprpc_tensor_set(s->c, s->w, 0, w16, (uint64_t)D * D * 2)) < 0)
		return die("tensor_set (weights)", s->c, rc);
	tw = pprpc_tensor_make(s->w, 0, PPRPC_F16, D, D, 1, 1);
	tx = pprpc_tensor_make(s->x, 0, PPRPC_F32, D, T, 1, 1);
	ty = pprpc_tensor_make(s->y, 0, PPRPC_F32, D, T, 1, 1);
	if (pprpc_graph_builder_new(&gb) < 0)
		return 1;
	iw = pprpc_gb_tensor(gb, &tw);
	ix = pprpc_gb_tensor(gb, &tx);
	iy = pprpc_gb_tensor(gb, &ty);
	h = pprpc_gb_mul_mat(gb, iw, ix, -1);
	h = pprpc_gb_scale(gb, h, scale, 0.0f, -1);
	rc = pprpc_gb_add(gb, h, ix, iy);
	if (rc < 0) {
		fprintf(stderr, "pprpc-demo: graph build: %s\n", pprpc_gb_error(gb));
		pprpc_graph_builder_free(gb);
		return 1;
	}
	rc = pprpc_graph_create(s->c, 0, gb, &s->g);
	pprpc_graph_builder_free(gb);
	if (rc < 0)
		return die("graph_create", s->c, rc);
	return 0;
}

int main(int argc, char **argv)
{
	struct spawned sp[MAX_RANKS];
	struct stage st[MAX_RANKS];
	char addrs[MAX_RANKS][64], binbuf[4096], err[512];
	const char *ranks = NULL, *bin, *key_file = NULL;
	int nspawn = 2, nranks = 0, D = 256, T = 64, ret = 1;
	uint64_t seed = 1;
	const float scale = 0.05f;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--spawn") && i + 1 < argc)
			nspawn = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			ranks = argv[++i];
		else if (!strcmp(argv[i], "--width") && i + 1 < argc)
			D = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
			T = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--auth-key-file") && i + 1 < argc)
			key_file = argv[++i];
		else {
			fprintf(stderr, "usage: pprpc-demo [--spawn N | --ranks HOST:PORT,...] [--width D] [--tokens T] [--seed S] [--auth-key-file FILE]\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (D < 1 || D > 8192 || T < 1 || T > 65536 || nspawn < 1 || nspawn > MAX_RANKS) {
		fprintf(stderr, "pprpc-demo: --width 1..8192, --tokens 1..65536, --spawn 1..%d\n", MAX_RANKS);
		return 2;
	}
	/* The library reads the key from the environment; spawned daemons
	 * get the same key. */
	if (key_file)
		setenv("PPRPC_AUTH_KEY_FILE", key_file, 1);
	key_file = getenv("PPRPC_AUTH_KEY_FILE");
	memset(sp, 0, sizeof(sp));
	memset(st, 0, sizeof(st));
	if (ranks) {
		nranks = list_split(ranks, addrs, MAX_RANKS);
		if (nranks < 1) {
			fprintf(stderr, "pprpc-demo: bad --ranks list (1..%d addresses)\n", MAX_RANKS);
			return 2;
		}
	} else {
		bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));
		for (; nranks < nspawn; nranks++) {
			const char *const extra[] = { "--threads", "1", key_file && *key_file ? "--auth-key-file" : NULL,
						      key_file, NULL };

			if (spawn_daemon(bin, extra, 10000, &sp[nranks], err, sizeof(err)) < 0) {
				fprintf(stderr, "pprpc-demo: %s\n", err);
				spawn_dump_log(&sp[nranks]);
				goto out;
			}
			snprintf(addrs[nranks], sizeof(addrs[0]), "%s", sp[nranks].addr);
			printf("started pprpcd pid %d on %s\n", (int)sp[nranks].pid, sp[nranks].addr);
		}
	}

	/* Weights: one f16 [D, D] matrix per stage, deterministic from the seed. */
	size_t nw = (size_t)D * D, nx = (size_t)D * T;
	uint16_t *w16 = malloc(nw * 2 * nranks);
	float *x0 = malloc(nx * 4), *cur = malloc(nx * 4);
	double *ref = malloc(nx * 8), *tmp = malloc(nx * 8);
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;

	if (!w16 || !x0 || !cur || !ref || !tmp)
		goto out;
	for (size_t i = 0; i < nw * nranks; i++)
		w16[i] = kern_f32_to_f16(frand(&s));
	for (size_t i = 0; i < nx; i++)
		x0[i] = frand(&s);

	for (int r = 0; r < nranks; r++) {
		pprpc_connect_opts o = { .client_name = "pprpc-demo", .err_buf = err, .err_len = sizeof(err) };
		int rc = pprpc_connect(addrs[r], &o, &st[r].c);

		if (rc < 0) {
			fprintf(stderr, "pprpc-demo: rank %d (%s): %s\n", r, addrs[r], err);
			goto out;
		}
		if (build_stage(&st[r], D, T, w16 + nw * r, scale))
			goto out;
		printf("rank %d (%s, pprpcd %s): stage graph created, weights %.1f KiB uploaded\n", r, addrs[r],
		       pprpc_daemon_version(st[r].c), nw * 2 / 1024.0);
	}

	double t0 = now_s();
	memcpy(cur, x0, nx * 4);
	for (int r = 0; r < nranks; r++) {
		int rc;

		if ((rc = pprpc_tensor_set(st[r].c, st[r].x, 0, cur, nx * 4)) < 0)
			return die("tensor_set", st[r].c, rc);
		if ((rc = pprpc_graph_run(st[r].c, st[r].g)) < 0)
			return die("graph_run", st[r].c, rc);
		if ((rc = pprpc_tensor_get(st[r].c, st[r].y, 0, cur, nx * 4)) < 0)
			return die("tensor_get", st[r].c, rc);
		printf("rank %d: ran stage, boundary %zu bytes -> %s (hash %016llx)\n", r, nx * 4,
		       r + 1 < nranks ? "next rank via client" : "client",
		       (unsigned long long)fnv1a64(cur, nx * 4));
	}
	double t1 = now_s();

	/* float64 reference of the same stack. */
	for (size_t i = 0; i < nx; i++)
		ref[i] = x0[i];
	for (int r = 0; r < nranks; r++) {
		const uint16_t *w = w16 + nw * r;

		for (int t = 0; t < T; t++)
			for (int n = 0; n < D; n++) {
				double acc = 0;

				for (int k = 0; k < D; k++)
					acc += (double)kern_f16_to_f32(w[(size_t)n * D + k]) * ref[(size_t)t * D + k];
				tmp[(size_t)t * D + n] = ref[(size_t)t * D + n] + scale * acc;
			}
		memcpy(ref, tmp, nx * 8);
	}
	double maxdiff = 0, maxref = 0;

	for (size_t i = 0; i < nx; i++) {
		maxdiff = fmax(maxdiff, fabs(cur[i] - ref[i]));
		maxref = fmax(maxref, fabs(ref[i]));
	}
	/* f32 accumulation over D terms per stage: relative error well under 1e-4. */
	int ok = maxdiff <= 1e-4 * (1.0 + maxref);
	printf("%d stages x %d tokens x width %d: %.2f ms, max |diff| vs float64 reference %.3g (%s)\n", nranks, T,
	       D, (t1 - t0) * 1e3, maxdiff, ok ? "ok" : "MISMATCH");
	for (int r = 0; r < nranks; r++) {
		pprpc_stats *ps;

		if (pprpc_stats_get(st[r].c, &ps) == 0) {
			printf("rank %d stats: requests %llu, errors %llu, graph creates %llu, runs %llu, allocated %.1f KiB\n",
			       r, (unsigned long long)pprpc_stats_u64(ps, NULL, 0, "requests"),
			       (unsigned long long)pprpc_stats_u64(ps, NULL, 0, "request_errors"),
			       (unsigned long long)pprpc_stats_u64(ps, "devices", 0, "graph_creates"),
			       (unsigned long long)pprpc_stats_u64(ps, "devices", 0, "graph_runs"),
			       pprpc_stats_u64(ps, "devices", 0, "allocated_bytes") / 1024.0);
			pprpc_stats_free(ps);
		}
	}
	ret = ok ? 0 : 1;
	free(w16);
	free(x0);
	free(cur);
	free(ref);
	free(tmp);
out:
	for (int r = 0; r < nranks; r++)
		pprpc_close(st[r].c);
	for (int r = 0; r < MAX_RANKS; r++)
		if (sp[r].pid > 0) {
			int stc = spawn_stop(&sp[r], 0);

			printf("stopped pprpcd pid on %s (exit status %d)\n", addrs[r], stc);
		}
	return ret;
}

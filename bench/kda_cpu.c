/*
 * bench/kda_cpu — GATED_DELTA_NET on the CPU: the serial form against the
 * chunked (WY / UT) form, in one process, straight through kern_cpu_run.
 *
 *   bench-kda_cpu [--T 512,2048,8192] [--H 4,16] [--D 128] [--chunks 16,32,64]
 *                 [--reps 5] [--threads N] [--kinds gdn,kda] [--sweep]
 *
 * Per (kind, T, H): one sequence (B = 1), H_k = H_v = H, d_k = d_v = D,
 * in-op L2 norm, gates in [-0.5, 0] (GDN one per head, KDA one per key
 * channel), beta in [0.05, 0.95], a random initial state.  Each rep runs
 * the serial form (i[2] = 1) and every chunk length (i[1] = C) once, the
 * order rotating from rep to rep (paired, alternating: drift hits every
 * candidate alike); times are medians over reps.  Parity in the same run:
 * max over elements of |chunked - serial| / (|serial| + RMS(serial)), o and
 * final state separately (the unit tests hold the same forms to 1e-5
 * against a float64 reference).  The kern_gdn_stats counters taken around
 * each candidate prove which path ran ("ser" / "c16".. / "fb:<reason>").
 *
 * --sweep: also T = 1 .. 128 at H = 16 for the serial/chunked threshold.
 *
 * Results on the development VM (AMD EPYC Zen 4, 2 vCPUs, OpenBLAS 0.3.21
 * pthread, gcc -O2, --threads 2, D = 128, 5 reps) are recorded next to the
 * defaults they chose (KERN_GDN_CHUNK_DEFAULT, KERN_GDN_CHUNK_MIN_T) in
 * kernels/cpu/cpu_gdn_select.c.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/list.h"
#include "kernels/ops.h"

#define MAXN INT_LIST_MAX

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(double lo, double hi)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static struct kern_tensor contig(int64_t a, int64_t b, int64_t c, int64_t d, float lo, float hi)
{
	const int64_t ne[4] = { a, b, c, d };
	struct kern_tensor t;
	int64_t n = a * b * c * d;

	if (kern_tensor_init_contig(&t, PPRPC_F32, ne) < 0)
		abort();
	t.data = malloc((size_t)n * sizeof(float));
	if (!t.data)
		abort();
	for (int64_t i = 0; i < n; i++)
		((float *)t.data)[i] = (float)urand(lo, hi);
	return t;
}

/* Which path the counters say ran between two snapshots. */
static void path_name(const struct kern_gdn_stats *a, const struct kern_gdn_stats *b, char *buf,
		      size_t len)
{
	snprintf(buf, len, "?");
	if (b->serial != a->serial)
		snprintf(buf, len, "ser");
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		if (b->chunked[i] != a->chunked[i])
			snprintf(buf, len, "c%d", 16 << i);
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		if (b->fallback[i] != a->fallback[i])
			snprintf(buf, len, "fb:%s", kern_gdn_fallback_name(i));
}

static double max_rel(const float *got, const float *want, int64_t n)
{
	double rms = 0, worst = 0;

	for (int64_t i = 0; i < n; i++)
		rms += (double)want[i] * want[i];
	rms = sqrt(rms / (double)n);
	for (int64_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]) / (fabs(want[i]) + rms);

		if (!(e <= worst))
			worst = e;  /* NaN sticks */
	}
	return worst;
}

/* One (kind, T, H) line; chunk lengths in cl.  Returns 0 or -1. */
static int run_case(int kda, int64_t T, int64_t H, int64_t D, const struct int_list *cl, int reps,
		    int threads)
{
	struct kern_gdn_stats st = { 0 }, s0, s1;
	struct kern_cpu_ctx ctx = { .nthreads = threads, .gdn_stats = &st };
	struct kern_tensor src[6], *sp[6], dst[1 + MAXN];
	int64_t n_o, n_s, ne[4] = { 0, 1, 1, 1 };
	int ncand = 1 + cl->n;
	double *times = calloc((size_t)(ncand * reps), sizeof(double));
	char paths[1 + MAXN][24];
	struct pprpc_op_params p[1 + MAXN];

	if (!times || kern_gdn_layout(D, D, H, T, 1, &n_o, &n_s) < 0)
		return -1;
	src[0] = contig(D, H, T, 1, -1, 1);
	src[1] = contig(D, H, T, 1, -1, 1);
	src[2] = contig(D, H, T, 1, -1, 1);
	src[3] = contig(kda ? D : 1, H, T, 1, -0.5f, 0);
	src[4] = contig(1, H, T, 1, 0.05f, 0.95f);
	src[5] = contig(D, D, H, 1, -0.5f, 0.5f);
	for (int s = 0; s < 6; s++)
		sp[s] = &src[s];
	ne[0] = n_o + n_s;
	for (int c = 0; c < ncand; c++) {
		if (kern_tensor_init_contig(&dst[c], PPRPC_F32, ne) < 0)
			return -1;
		dst[c].data = malloc((size_t)ne[0] * sizeof(float));
		if (!dst[c].data)
			return -1;
		memset(&p[c], 0, sizeof(p[c]));
		p[c].f[0] = (float)(1.0 / sqrt((double)D));
		p[c].f[1] = 1e-6f;
		p[c].i[0] = 1;
		if (c == 0)
			p[c].i[2] = 1;
		else
			p[c].i[1] = (int32_t)cl->v[c - 1];
		snprintf(paths[c], sizeof(paths[c]), "-");
	}
	/* rep -1 warms up (page faults, OpenBLAS buffers) and is not timed. */
	for (int r = -1; r < reps; r++) {
		for (int i = 0; i < ncand; i++) {
			int c = (i + (r < 0 ? 0 : r)) % ncand;
			double t0;
			int rc;

			kern_gdn_stats_read(&st, &s0);
			t0 = now();
			rc = kern_cpu_run(&ctx, PPRPC_OP_GATED_DELTA_NET, &p[c], sp, 6, &dst[c]);
			if (r >= 0)
				times[c * reps + r] = now() - t0;
			if (rc < 0) {
				fprintf(stderr, "kern_cpu_run: %d\n", rc);
				return -1;
			}
			kern_gdn_stats_read(&st, &s1);
			path_name(&s0, &s1, paths[c], sizeof(paths[c]));
		}
	}
	{
		double ms = 1e3 * median(times, reps);

		printf("%-3s T=%-5lld H=%-3lld D=%-3lld  serial[%s] %9.2f ms", kda ? "KDA" : "GDN",
		       (long long)T, (long long)H, (long long)D, paths[0], ms);
		for (int c = 1; c < ncand; c++) {
			double mc = 1e3 * median(times + c * reps, reps);
			double eo = max_rel(dst[c].data, dst[0].data, n_o);
			double es = max_rel((float *)dst[c].data + n_o, (float *)dst[0].data + n_o,
					    n_s);

			printf(" | C=%-2lld[%s] %8.2f ms x%5.2f  rel o %.1e S %.1e",
			       (long long)cl->v[c - 1], paths[c], mc, ms / mc, eo, es);
		}
		printf("\n");
		fflush(stdout);
	}
	for (int s = 0; s < 6; s++)
		free(src[s].data);
	for (int c = 0; c < ncand; c++)
		free(dst[c].data);
	free(times);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench-kda_cpu [--T 512,2048,8192] [--H 4,16] [--D 128] "
		"[--chunks 16,32,64]\n"
		"                     [--reps 5] [--threads N] [--kinds gdn,kda] [--sweep]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "T", required_argument, NULL, 'T' },
		{ "H", required_argument, NULL, 'H' },
		{ "D", required_argument, NULL, 'D' },
		{ "chunks", required_argument, NULL, 'c' },
		{ "reps", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 'j' },
		{ "kinds", required_argument, NULL, 'k' },
		{ "sweep", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct int_list Ts = { { 512, 2048, 8192 }, 3 }, Hs = { { 4, 16 }, 2 };
	struct int_list cl = { { 16, 32, 64 }, 3 };
	int64_t D = 128;
	int reps = 5, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), sweep = 0;
	int kinds = 3;  /* bit 0 GDN, bit 1 KDA */
	int opt;

	if (threads < 1)
		threads = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		struct int_list d;

		switch (opt) {
		case 'T':
			if (list_ints(optarg, &Ts, 1, INT64_MAX) < 0)
				goto bad;
			break;
		case 'H':
			if (list_ints(optarg, &Hs, 1, INT64_MAX) < 0)
				goto bad;
			break;
		case 'D':
			if (list_ints(optarg, &d, 1, INT64_MAX) != 1)
				goto bad;
			D = d.v[0];
			break;
		case 'c':
			if (list_ints(optarg, &cl, 1, INT64_MAX) < 0)
				goto bad;
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps < 1)
				goto bad;
			break;
		case 'j':
			threads = atoi(optarg);
			if (threads < 1)
				goto bad;
			break;
		case 'k':
			kinds = (strstr(optarg, "gdn") ? 1 : 0) | (strstr(optarg, "kda") ? 2 : 0);
			if (!kinds)
				goto bad;
			break;
		case 's':
			sweep = 1;
			break;
		default:
			goto bad;
		}
	}
	printf("bench-kda_cpu: threads %d, reps %d (median), D %lld, B 1, H_k = H_v; "
	       "xN = serial / chunked; rel = max |chunked - serial| / (|serial| + rms)\n",
	       threads, reps, (long long)D);
	for (int kda = 0; kda < 2; kda++) {
		if (!(kinds & (1 << kda)))
			continue;
		for (int h = 0; h < Hs.n; h++)
			for (int t = 0; t < Ts.n; t++)
				if (run_case(kda, Ts.v[t], Hs.v[h], D, &cl, reps, threads) < 0)
					return 1;
		if (sweep) {
			static const int64_t sw[] = { 1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128 };

			for (size_t t = 0; t < sizeof(sw) / sizeof(sw[0]); t++)
				if (run_case(kda, sw[t], 16, D, &cl, reps * 4, threads) < 0)
					return 1;
		}
	}
	return 0;
bad:
	usage();
	return 2;
}

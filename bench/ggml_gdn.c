/*
 * bench/ggml_gdn — ggml's GATED_DELTA_NET in pprpcd's ggml engine, ggml's
 * kernel against pprpc's (ggml-native-gdn), in one process on one ggml
 * device (ggml:CUDA0 by default; ggml:CPU works too).
 *
 *   bench-ggml_gdn [--device CUDA0] [--T 2048,8192] [--H 32,96] [--S 128]
 *                  [--B 1] [--kinds kda,gdn] [--reps 10] [--ref-cpu]
 *
 * Per (kind, T, H): a graph of one GATED_DELTA_NET node as llama.cpp's
 * fused path makes it (K = 1; H_k = H_v = H; q and k L2-normalised here,
 * as the model's L2_NORM nodes do; gates in [-0.6, -0.01], KDA one per key
 * channel; beta in [0.05, 0.95]; a small random initial state), in buffers
 * of the device, created twice through the engine (gge_graph_build): with
 * the setting off (ggml's kernel) and auto (pprpc's chunked form where it
 * takes it).  Each is run once to warm up, then --reps times; a run is
 * gge_graph_compute, i.e. everything a GRAPH_RUN does on the worker for it
 * (ggml's graph compute and synchronize; or the gate scan, pprpc's kernel
 * and its stream's synchronize).  Reported: median ms with the spread
 * (min - max), ggml / pprpc, which of pprpc's forms ran (the engine's
 * counters), and the parity of pprpc's output against ggml's on the same
 * device: RMSE / RMS and NMSE (sum err^2 / sum ref^2, test-backend-ops'
 * measure, whose bound for this op is 1e-7) of o and of the final state.
 * --ref-cpu also computes the graph with ggml-cpu and compares both
 * against it (slow for long T: ggml-cpu's kernel is serial).
 *
 * The two runtimes: ggml-cuda comes from the ggml libraries pprpcd is
 * linked with (LD_LIBRARY_PATH=<llama.cpp CUDA build>/bin), pprpc's kernels
 * from this binary (doc/ggml.md).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/ggml_gdn.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "pprpc/types.h"
#include "tests/integration/ggml_wire.h"
#include "util/list.h"

struct opts {
	const char *device;
	struct int_list T, H;
	int64_t S, B;
	int reps;
	bool kda, gdn, ref_cpu;
};

/* One graph over buffers of one backend buffer type. */
struct net {
	struct ggml_context *ctx;
	ggml_backend_buffer_t buf;
	struct ggml_cgraph *gf;
	struct ggml_tensor *in[6], *out;
};

/* The inputs, on the host. */
struct inputs {
	float *x[6];
	size_t n[6];
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float frand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*s >> 40) & 0xffffff) / 16777216.0f;
}

static void inputs_make(struct inputs *in, int64_t S, int64_t H, int64_t T, int64_t B, bool kda)
{
	const size_t tok = (size_t)(S * H * T * B);
	uint64_t seed = 12345;

	in->n[0] = in->n[1] = in->n[2] = tok;
	in->n[3] = kda ? tok : (size_t)(H * T * B);
	in->n[4] = (size_t)(H * T * B);
	in->n[5] = (size_t)(S * S * H * B);
	for (int i = 0; i < 6; i++) {
		in->x[i] = malloc(in->n[i] * sizeof(float));
		if (!in->x[i]) {
			fprintf(stderr, "out of host memory\n");
			exit(1);
		}
	}
	for (int i = 0; i < 3; i++)
		for (size_t e = 0; e < tok; e++)
			in->x[i][e] = 2.0f * frand(&seed) - 1.0f;
	/* q and k rows of unit length, as after the model's L2_NORM */
	for (int i = 0; i < 2; i++)
		for (size_t r = 0; r < tok / (size_t)S; r++) {
			float *row = in->x[i] + r * (size_t)S;
			double ss = 0;

			for (int64_t c = 0; c < S; c++)
				ss += (double)row[c] * row[c];
			for (int64_t c = 0; c < S; c++)
				row[c] = (float)(row[c] / sqrt(ss + 1e-12));
		}
	for (size_t e = 0; e < in->n[3]; e++)
		in->x[3][e] = -0.01f - 0.59f * frand(&seed);
	for (size_t e = 0; e < in->n[4]; e++)
		in->x[4][e] = 0.05f + 0.9f * frand(&seed);
	for (size_t e = 0; e < in->n[5]; e++)
		in->x[5][e] = 0.2f * frand(&seed) - 0.1f;
}

static void inputs_free(struct inputs *in)
{
	for (int i = 0; i < 6; i++)
		free(in->x[i]);
}

static int net_make(struct net *n, ggml_backend_buffer_type_t buft, const struct inputs *in, int64_t S, int64_t H,
		    int64_t T, int64_t B, bool kda)
{
	struct ggml_init_params p = { .mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead(),
				      .no_alloc = true };

	memset(n, 0, sizeof(*n));
	n->ctx = ggml_init(p);
	if (!n->ctx)
		return -1;
	for (int i = 0; i < 3; i++)
		n->in[i] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, H, T, B);
	n->in[3] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, kda ? S : 1, H, T, B);
	n->in[4] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, 1, H, T, B);
	n->in[5] = ggml_new_tensor_4d(n->ctx, GGML_TYPE_F32, S, S, H, B);
	n->out = ggml_gated_delta_net(n->ctx, n->in[0], n->in[1], n->in[2], n->in[3], n->in[4], n->in[5], 1);
	n->gf = ggml_new_graph(n->ctx);
	ggml_build_forward_expand(n->gf, n->out);
	n->buf = ggml_backend_alloc_ctx_tensors_from_buft(n->ctx, buft);
	if (!n->buf)
		return -1;
	for (int i = 0; i < 6; i++)
		ggml_backend_tensor_set(n->in[i], in->x[i], 0, in->n[i] * sizeof(float));
	return 0;
}

static void net_free(struct net *n)
{
	if (n->buf)
		ggml_backend_buffer_free(n->buf);
	if (n->ctx)
		ggml_free(n->ctx);
}

static int resolve(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	ggml_backend_buffer_t b = arg;

	if (handle != 1) {
		snprintf(err, errlen, "unknown buffer");
		return PPRPC_EHANDLE;
	}
	ret->buf = b;
	ret->size = ggml_backend_buffer_get_size(b);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Time reps runs of n's graph through the engine with the setting mode;
 * the output lands in *ret_out (host copy, malloc'ed). */
static int timed(struct gge_dev *g, struct net *n, int mode, int reps, double *ret_med, double *ret_min,
		 double *ret_max, float **ret_out, struct kern_gdn_stats *native, uint64_t *ggml_why)
{
	struct gw_map map = { n->buf, 1 };
	struct gge_graph *gg = NULL;
	struct gw_graph w;
	double *t = calloc((size_t)reps, sizeof(double));
	char err[512] = "";
	int rc;

	if (!t || gw_serialize(n->gf, &map, 1, 0, &w) < 0) {
		free(t);
		return -1;
	}
	gge_dev_gdn_config(g, mode, native, ggml_why, 0);
	rc = gge_graph_build(g, (const Pprpc__GgmlTensor *const *)w.msg.tensors, w.msg.n_tensors, w.msg.nodes,
			     w.msg.n_nodes, resolve, n->buf, &gg, err, sizeof(err));
	if (rc == 0)
		rc = gge_graph_compute(g, gg, err, sizeof(err));  /* warm-up */
	for (int r = 0; rc == 0 && r < reps; r++) {
		double t0 = now_ms();

		rc = gge_graph_compute(g, gg, err, sizeof(err));
		t[r] = now_ms() - t0;
	}
	if (rc < 0) {
		fprintf(stderr, "engine: %s\n", err);
	} else {
		qsort(t, (size_t)reps, sizeof(double), cmp_double);
		*ret_med = t[reps / 2];
		*ret_min = t[0];
		*ret_max = t[reps - 1];
		*ret_out = malloc(ggml_nbytes(n->out));
		ggml_backend_tensor_get(n->out, *ret_out, 0, ggml_nbytes(n->out));
	}
	gge_graph_free(gg);
	gw_free(&w);
	free(t);
	return rc;
}

/* RMSE / RMS and NMSE of got against ref over n floats. */
static void parity(const float *got, const float *ref, size_t n, double *ret_rel, double *ret_nmse)
{
	double ss = 0, se = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - ref[i];

		ss += (double)ref[i] * ref[i];
		se += d * d;
	}
	*ret_nmse = ss > 0 ? se / ss : (se > 0 ? INFINITY : 0);
	*ret_rel = sqrt(*ret_nmse);
}

static void print_parity(const char *what, const float *got, const float *ref, size_t n_o, size_t n_s)
{
	double r1, m1, r2, m2;

	parity(got, ref, n_o, &r1, &m1);
	parity(got + n_o, ref + n_o, n_s, &r2, &m2);
	printf("    %-22s o: rmse/rms %.2e nmse %.2e | state: rmse/rms %.2e nmse %.2e%s\n", what, r1, m1, r2, m2,
	       m1 <= 1e-7 && m2 <= 1e-7 ? "" : "  (over test-backend-ops' 1e-7)");
}

static const char *forms(const struct kern_gdn_stats *a, const struct kern_gdn_stats *b, const uint64_t *ga,
			 const uint64_t *gb, char *buf, size_t len)
{
	size_t u = 0;

	buf[0] = '\0';
	if (b->serial != a->serial)
		u += (size_t)snprintf(buf + u, len - u, "serial x%llu ", (unsigned long long)(b->serial - a->serial));
	for (int i = 0; i < KERN_GDN_NCHUNK && u < len; i++)
		if (b->chunked[i] != a->chunked[i])
			u += (size_t)snprintf(buf + u, len - u, "chunked C=%d x%llu ", 16 << i,
					      (unsigned long long)(b->chunked[i] - a->chunked[i]));
	for (int i = 0; i < KERN_GDN_FB_COUNT && u < len; i++)
		if (b->fallback[i] != a->fallback[i])
			u += (size_t)snprintf(buf + u, len - u, "fallback %s x%llu ", kern_gdn_fallback_name(i),
					      (unsigned long long)(b->fallback[i] - a->fallback[i]));
	for (int i = 0; i < GGE_GDN_WHY_COUNT && u < len; i++)
		if (gb[i] != ga[i])
			u += (size_t)snprintf(buf + u, len - u, "ggml(reason %d) x%llu ", i,
					      (unsigned long long)(gb[i] - ga[i]));
	return buf;
}

static int one(struct gge_dev *g, ggml_backend_t cpu, const struct opts *o, bool kda, int64_t H, int64_t T)
{
	const int64_t S = o->S, B = o->B;
	const size_t n_o = (size_t)(S * H * T * B), n_s = (size_t)(S * S * H * B);
	struct kern_gdn_stats native = { 0 }, before;
	uint64_t why[GGE_GDN_WHY_COUNT] = { 0 }, why_before[GGE_GDN_WHY_COUNT];
	double g_med, g_min, g_max, p_med, p_min, p_max;
	float *ref = NULL, *got = NULL;
	struct inputs in;
	struct net n;
	char fb[200];
	int rc;

	inputs_make(&in, S, H, T, B, kda);
	rc = net_make(&n, ggml_backend_dev_buffer_type(g->dev), &in, S, H, T, B, kda);
	if (rc < 0) {
		fprintf(stderr, "cannot allocate the graph's buffers on ggml:%s\n", g->name);
		goto out;
	}
	rc = timed(g, &n, GGE_GDN_OFF, o->reps, &g_med, &g_min, &g_max, &ref, &native, why);
	kern_gdn_stats_read(&native, &before);
	memcpy(why_before, why, sizeof(why));
	if (rc == 0)
		rc = timed(g, &n, GGE_GDN_AUTO, o->reps, &p_med, &p_min, &p_max, &got, &native, why);
	if (rc < 0)
		goto out;
	printf("%s T=%lld H=%lld S=%lld B=%lld: ggml %.3f ms [%.3f - %.3f], pprpc %.3f ms [%.3f - %.3f], x%.2f; pprpc ran: %s\n",
	       kda ? "KDA" : "GDN", (long long)T, (long long)H, (long long)S, (long long)B, g_med, g_min, g_max, p_med,
	       p_min, p_max, g_med / p_med, forms(&before, &native, why_before, why, fb, sizeof(fb)));
	print_parity("pprpc vs ggml:", got, ref, n_o, n_s);
	if (o->ref_cpu && cpu) {
		float *want = malloc((n_o + n_s) * sizeof(float));
		struct net c;

		memset(&c, 0, sizeof(c));
		if (want && net_make(&c, ggml_backend_get_default_buffer_type(cpu), &in, S, H, T, B, kda) == 0 &&
		    ggml_backend_graph_compute(cpu, c.gf) == GGML_STATUS_SUCCESS) {
			ggml_backend_tensor_get(c.out, want, 0, (n_o + n_s) * sizeof(float));
			print_parity("pprpc vs ggml-cpu:", got, want, n_o, n_s);
			print_parity("ggml vs ggml-cpu:", ref, want, n_o, n_s);
		} else {
			fprintf(stderr, "ggml-cpu reference failed\n");
		}
		net_free(&c);
		free(want);
	}
	fflush(stdout);
out:
	free(ref);
	free(got);
	net_free(&n);
	inputs_free(&in);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-ggml_gdn [--device CUDA0] [--T 2048,8192] [--H 32,96] [--S 128] [--B 1]\n"
			"                      [--kinds kda,gdn] [--reps 10] [--ref-cpu]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "device", required_argument, NULL, 'd' }, { "T", required_argument, NULL, 'T' },
		{ "H", required_argument, NULL, 'H' },      { "S", required_argument, NULL, 'S' },
		{ "B", required_argument, NULL, 'B' },      { "kinds", required_argument, NULL, 'k' },
		{ "reps", required_argument, NULL, 'r' },   { "ref-cpu", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .device = "CUDA0", .S = 128, .B = 1, .reps = 10, .kda = true, .gdn = false };
	struct gge_dev *g = NULL;
	ggml_backend_t cpu = NULL;
	char err[512] = "";
	int c, rc = 0;

	list_ints("2048,8192", &o.T, 1, 1 << 20);
	list_ints("32,96", &o.H, 1, 4096);
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': o.device = optarg; break;
		case 'T': if (list_ints(optarg, &o.T, 1, 1 << 20) < 0) usage(); break;
		case 'H': if (list_ints(optarg, &o.H, 1, 4096) < 0) usage(); break;
		case 'S': o.S = atoll(optarg); break;
		case 'B': o.B = atoll(optarg); break;
		case 'r': o.reps = atoi(optarg); break;
		case 'c': o.ref_cpu = true; break;
		case 'k':
			o.kda = strstr(optarg, "kda") != NULL;
			o.gdn = strstr(optarg, "gdn") != NULL;
			break;
		default: usage();
		}
	}
	if (o.reps < 1 || o.S < 1 || o.B < 1 || (!o.kda && !o.gdn))
		usage();
	if (gge_dev_open(o.device, 0, &g, err, sizeof(err)) < 0) {
		fprintf(stderr, "ggml:%s: %s\n", o.device, err);
		return 1;
	}
	gge_dev_gdn_config(g, GGE_GDN_AUTO, NULL, NULL, 0);
	gge_dev_gdn_status(g, err, sizeof(err));
	printf("ggml:%s (%s); pprpc's kernels: %s; reps %d\n", g->name, g->desc, err, o.reps);
	if (gge_dev_gdn_kind(g) == GGE_GDN_NONE) {
		gge_dev_close(g);
		return 1;
	}
	if (o.ref_cpu)
		cpu = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, NULL);
	for (int k = 0; k < 2 && rc == 0; k++) {
		if ((k == 0 && !o.kda) || (k == 1 && !o.gdn))
			continue;
		for (int h = 0; h < o.H.n && rc == 0; h++)
			for (int t = 0; t < o.T.n && rc == 0; t++)
				rc = one(g, cpu, &o, k == 0, o.H.v[h], o.T.v[t]);
	}
	if (cpu)
		ggml_backend_free(cpu);
	gge_dev_close(g);
	return rc < 0 ? 1 : 0;
}

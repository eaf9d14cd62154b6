/*
 * bench/kda_cuda — GATED_DELTA_NET on one CUDA device: our serial kernel
 * against the chunked (WY / UT, bf16 tensor core) form, in one process,
 * straight through kern_cuda_run, plus a bf16 cuBLAS GEMM as the ceiling.
 *
 *   bench-kda-cuda [--T 2048,8192,32768] [--H 32,96] [--D 128]
 *                  [--chunks 16,32,64] [--reps 7] [--kinds kda,gdn] [--sweep]
 *                  [--split]
 *
 * --split runs the chunked form with i[4] = 1 (operands as two bf16
 * planes, three mma per product: about fp32's accuracy, ops.h).
 *
 * Per (kind, T, H): one sequence (B = 1), H_k = H_v = H, d_k = d_v = D, in-op
 * L2 norm, gates in [-0.5, 0] (GDN one per head, KDA one per key channel),
 * beta in [0.05, 0.95], a random initial state, all f32 (the op's dtype;
 * the chunked kernels convert to bf16 inside).  Each rep runs the serial
 * form (i[2] = 1) and every chunk length (i[1] = C) once, the order
 * rotating from rep to rep; each run is timed with CUDA events around its
 * kern_cuda_run; reported: median ms and the spread (min - max) over reps,
 * serial / chunked, and TFLOP/s.
 *
 * FLOP count of the chunked form (multiply-add = 2), per token and head:
 *   6 D V          w S0, Gam q S0, k^T v_new (three d_k x d_v products)
 *   + 2 C D        A and Aq (two half C x C x D products)
 *   + C (D + V)    T (beta Gam k), T (beta v) (T lower triangular)
 *   + C V          Aq v_new (lower triangular)
 *   + C^2 / 3      the triangular solve
 * The serial form does 8 D V per token and head (decay, S^T k, update,
 * S^T q); its TFLOP/s use that count.
 *
 * Parity in the same run: RMSE / RMS of chunked against serial, o and the
 * final state separately, reduced on the GPU in double.  kern_gdn_stats
 * deltas around each candidate prove which path ran ("ser", "c32", or
 * "fallback N" with N an enum kern_gdn_fallback; the CPU objects that
 * name it stay out of this binary, which links no BLAS).
 *
 * --sweep: T = 1 .. 256 at H = 32, automatic choice (i[1] = i[2] = 0)
 * against forced serial and the first --chunks length, for the threshold.
 *
 * Results on an H200 (and how they were run): doc/results/kda-cuda.md; the
 * defaults they chose are in kernels/cuda/cuda_gdn_select.cu.
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "util/list.h"
#include "util/hash.h"
#include "kernels/ops.h"
}
#include "kernels/cuda/cuda_ops.h"

#define MAXN INT_LIST_MAX
#define CK(x)                                                                              \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,                  \
				cudaGetErrorString(e_));                                   \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct stat3 {
	double med, lo, hi;
};

static struct stat3 stats(double *v, int n)
{
	struct stat3 s;

	qsort(v, (size_t)n, sizeof(double), cmp_double);
	s.med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	s.lo = v[0];
	s.hi = v[n - 1];
	return s;
}

/* Uniform [lo, hi) from a hash of the index (splitmix64). */
__global__ void k_fill(float *p, int64_t n, uint64_t seed, float lo, float hi)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		uint64_t z = mix64(seed + (uint64_t)i * SPLITMIX64_GAMMA);

		p[i] = lo + (hi - lo) * (float)unit_double(z);
	}
}

/* sum (a - b)^2 and sum b^2 over n elements, in double. */
__global__ void k_diff(const float *a, const float *b, int64_t n, double *out)
{
	__shared__ double sd[256], sw[256];
	double d = 0.0, w = 0.0;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		double x = (double)a[i] - (double)b[i];

		d += x * x;
		w += (double)b[i] * b[i];
	}
	sd[threadIdx.x] = d;
	sw[threadIdx.x] = w;
	__syncthreads();
	for (int s = 128; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s) {
			sd[threadIdx.x] += sd[threadIdx.x + s];
			sw[threadIdx.x] += sw[threadIdx.x + s];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		atomicAdd(&out[0], sd[0]);
		atomicAdd(&out[1], sw[0]);
	}
}

static double rmse(const float *got, const float *want, int64_t n, double *scratch)
{
	double h[2];

	CK(cudaMemset(scratch, 0, 2 * sizeof(double)));
	k_diff<<<1024, 256>>>(got, want, n, scratch);
	CK(cudaMemcpy(h, scratch, sizeof(h), cudaMemcpyDeviceToHost));
	return h[1] > 0 ? sqrt(h[0] / h[1]) : sqrt(h[0]);
}

static void fill(float *p, int64_t n, uint64_t seed, float lo, float hi)
{
	k_fill<<<4096, 256>>>(p, n, seed, lo, hi);
	CK(cudaGetLastError());
}

static void contig(struct kern_tensor *t, void *data, int64_t a, int64_t b, int64_t c, int64_t d)
{
	const int64_t ne[4] = { a, b, c, d };

	kern_tensor_init_contig(t, PPRPC_F32, ne);
	t->data = data;
}

struct problem {
	struct kern_tensor src[6], dst[2];  /* dst[0] serial, dst[1] candidate */
	struct kern_tensor *sp[6];
	int64_t n_o, n_s;
	void *mem[8];
};

static void problem_init(struct problem *p, bool kda, int64_t T, int64_t H, int64_t D)
{
	const int64_t G = kda ? D : 1;
	const int64_t ne[6][4] = { { D, H, T, 1 }, { D, H, T, 1 }, { D, H, T, 1 },
				   { G, H, T, 1 }, { 1, H, T, 1 }, { D, D, H, 1 } };
	const float lo[6] = { -1, -1, -1, -0.5f, 0.05f, -0.5f }, hi[6] = { 1, 1, 1, 0, 0.95f, 0.5f };

	memset(p, 0, sizeof(*p));
	for (int s = 0; s < 6; s++) {
		int64_t n = ne[s][0] * ne[s][1] * ne[s][2] * ne[s][3];

		CK(cudaMalloc(&p->mem[s], (size_t)n * 4));
		fill((float *)p->mem[s], n, 1000 + 77 * s, lo[s], hi[s]);
		contig(&p->src[s], p->mem[s], ne[s][0], ne[s][1], ne[s][2], ne[s][3]);
		p->sp[s] = &p->src[s];
	}
	kern_gdn_layout(D, D, H, T, 1, &p->n_o, &p->n_s);
	for (int i = 0; i < 2; i++) {
		CK(cudaMalloc(&p->mem[6 + i], (size_t)(p->n_o + p->n_s) * 4));
		contig(&p->dst[i], p->mem[6 + i], p->n_o + p->n_s, 1, 1, 1);
	}
}

static void problem_free(struct problem *p)
{
	for (int i = 0; i < 8; i++)
		cudaFree(p->mem[i]);
}

static bool g_split;  /* --split: i[4] = 1 for the chunked runs */

/* One timed kern_cuda_run; returns ms. */
static double run(const struct kern_cuda_ctx *ctx, struct problem *p, int dst, int chunk,
		  bool serial, cudaEvent_t e0, cudaEvent_t e1)
{
	struct pprpc_op_params prm;
	char err[512];
	float ms;

	memset(&prm, 0, sizeof(prm));
	prm.f[0] = 1.0f / sqrtf((float)p->src[0].ne[0]);
	prm.f[1] = 1e-6f;
	prm.i[0] = 1;
	prm.i[1] = chunk;
	prm.i[2] = serial;
	prm.i[4] = !serial && g_split;
	CK(cudaEventRecord(e0, (cudaStream_t)ctx->stream));
	if (kern_cuda_run(ctx, PPRPC_OP_GATED_DELTA_NET, &prm, p->sp, 6, &p->dst[dst], err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "kern_cuda_run: %s\n", err);
		exit(1);
	}
	CK(cudaEventRecord(e1, (cudaStream_t)ctx->stream));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	return ms;
}

/* Path counted since *before, as text. */
static const char *path_of(const struct kern_gdn_stats *now, const struct kern_gdn_stats *before,
			   char *buf, size_t len)
{
	snprintf(buf, len, "?");
	if (now->serial != before->serial)
		snprintf(buf, len, "ser");
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		if (now->chunked[i] != before->chunked[i])
			snprintf(buf, len, "c%d", 16 << i);
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		if (now->fallback[i] != before->fallback[i])
			snprintf(buf, len, "fallback %d", i);  /* enum kern_gdn_fallback */
	return buf;
}

static double chunk_flops(double T, double H, double D, double C)
{
	return T * H * (6 * D * D + 2 * C * D + C * (D + D) + C * D + C * C / 3);
}

/* bf16 GEMM ceiling: n x n x n, fp32 accumulate, median of 10. */
static double gemm_ceiling(cudaStream_t st, int n)
{
	cublasHandle_t h;
	void *a, *b, *c;
	float one = 1.0f, zero = 0.0f, ms;
	double t[10];
	cudaEvent_t e0, e1;

	CK(cudaMalloc(&a, (size_t)n * n * 2));
	CK(cudaMalloc(&b, (size_t)n * n * 2));
	CK(cudaMalloc(&c, (size_t)n * n * 4));
	CK(cudaMemset(a, 0x3c, (size_t)n * n * 2));
	CK(cudaMemset(b, 0x3c, (size_t)n * n * 2));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas init failed\n");
		exit(1);
	}
	for (int r = -2; r < 10; r++) {
		CK(cudaEventRecord(e0, st));
		if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
				 CUDA_R_16BF, n, &zero, c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
				 CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "cublasGemmEx failed\n");
			exit(1);
		}
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (r >= 0)
			t[r] = ms;
	}
	cublasDestroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return 2.0 * n * (double)n * n / (stats(t, 10).med * 1e-3) / 1e12;
}

static int bad_arg(const char *opt, const char *want)
{
	fprintf(stderr, "bench-kda-cuda: %s: expected %s\n", opt, want);
	return 2;
}

int main(int argc, char **argv)
{
	struct int_list Ts = { { 2048, 8192, 32768 }, 3 }, Hs = { { 32, 96 }, 2 };
	struct int_list chunks = { { 16, 32, 64 }, 3 };
	int64_t D = 128;
	int reps = 7, sweep = 0, kinds = 3;  /* bit 0 gdn, bit 1 kda */
	static const struct option opts[] = {
		{ "T", required_argument, NULL, 'T' },	   { "H", required_argument, NULL, 'H' },
		{ "D", required_argument, NULL, 'D' },	   { "chunks", required_argument, NULL, 'c' },
		{ "reps", required_argument, NULL, 'r' }, { "kinds", required_argument, NULL, 'k' },
		{ "sweep", no_argument, NULL, 's' },	   { "split", no_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	struct kern_cuda_ctx ctx;
	struct kern_gdn_stats gs;
	cudaStream_t st;
	cudaEvent_t e0, e1;
	double *scratch, ceil_tf;
	size_t ws = 0;
	char err[512];
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'T':
			if (list_ints(optarg, &Ts, 1, INT64_MAX) < 0)
				return bad_arg("--T", "up to 16 positive integers like 2048,8192");
			break;
		case 'H':
			if (list_ints(optarg, &Hs, 1, INT64_MAX) < 0)
				return bad_arg("--H", "up to 16 positive integers like 2048,8192");
			break;
		case 'D':
			D = atoll(optarg);
			if (D != 64 && D != 128)
				return bad_arg("--D", "64 or 128");
			break;
		case 'c':
			if (list_ints(optarg, &chunks, 1, INT64_MAX) < 0)
				return bad_arg("--chunks", "up to 16 positive integers like 2048,8192");
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps < 1 || reps > 64)
				return bad_arg("--reps", "1..64");
			break;
		case 'k':
			kinds = (strstr(optarg, "gdn") ? 1 : 0) | (strstr(optarg, "kda") ? 2 : 0);
			if (!kinds)
				return bad_arg("--kinds", "gdn, kda or gdn,kda");
			break;
		case 's':
			sweep = 1;
			break;
		case 'p':
			g_split = true;
			break;
		default:
			fprintf(stderr, "usage: %s [--T list] [--H list] [--D n] [--chunks list] "
					"[--reps n] [--kinds kda,gdn] [--sweep] [--split]\n", argv[0]);
			return 2;
		}
	}
	CK(cudaSetDevice(0));
	{
		cudaDeviceProp prop;

		CK(cudaGetDeviceProperties(&prop, 0));
		printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
		       prop.multiProcessorCount);
	}
	CK(cudaStreamCreate(&st));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaMalloc(&scratch, 2 * sizeof(double)));
	ceil_tf = gemm_ceiling(st, 8192);
	printf("ceiling: cuBLAS bf16 GEMM 8192^3 (fp32 accumulate): %.0f TFLOP/s\n", ceil_tf);

	for (int i = 0; i < Ts.n; i++)
		for (int j = 0; j < Hs.n; j++)
			for (int c = 0; c < chunks.n; c++) {
				size_t w = kern_cuda_gdn_ws_bytes(D, D, Hs.v[j], Ts.v[i], 1,
								  (int)chunks.v[c], g_split);
				ws = w > ws ? w : ws;
			}
	memset(&ctx, 0, sizeof(ctx));
	memset(&gs, 0, sizeof(gs));
	ctx.stream = st;
	ctx.gdn_stats = &gs;
	ctx.workspace_bytes = ws;
	CK(cudaMalloc(&ctx.workspace, ws));
	if (kern_cuda_preload(err, sizeof(err)) < 0) {
		fprintf(stderr, "preload: %s\n", err);
		return 1;
	}
	printf("workspace %.2f GiB; D = %lld, reps %d; chunked operands %s; ms = median [min - max]\n",
	       ws / 1073741824.0, (long long)D, reps, g_split ? "split bf16 (i[4] = 1)" : "bf16");

	for (int kda = 0; kda < 2; kda++) {
		if (!(kinds & (1 << kda)))
			continue;
		for (int i = 0; i < Ts.n; i++)
			for (int j = 0; j < Hs.n; j++) {
				const int64_t T = Ts.v[i], H = Hs.v[j];
				const int nc = chunks.n + 1;  /* 0 = serial */
				double t[MAXN + 1][64];
				struct problem p;
				struct stat3 s0;
				char pth[MAXN + 1][32];

				problem_init(&p, kda, T, H, D);
				for (int k = 0; k < nc; k++) {  /* warm-up, and the paths */
					struct kern_gdn_stats b = gs;

					run(&ctx, &p, k ? 1 : 0, k ? (int)chunks.v[k - 1] : 0, k == 0, e0, e1);
					path_of(&gs, &b, pth[k], sizeof(pth[k]));
				}
				for (int r = 0; r < reps; r++)
					for (int kk = 0; kk < nc; kk++) {
						const int k = (kk + r) % nc;

						t[k][r] = run(&ctx, &p, k ? 1 : 0,
							      k ? (int)chunks.v[k - 1] : 0, k == 0, e0, e1);
					}
				s0 = stats(t[0], reps);
				printf("%s T %6lld H %3lld  serial %9.3f ms [%.3f - %.3f] %5.2f TFLOP/s (%s)\n",
				       kda ? "KDA" : "GDN", (long long)T, (long long)H, s0.med, s0.lo,
				       s0.hi, 8.0 * T * H * D * D / (s0.med * 1e-3) / 1e12, pth[0]);
				for (int k = 1; k < nc; k++) {
					const int C = (int)chunks.v[k - 1];
					struct stat3 s;
					double eo, es, tf;

					/* the candidate's output: rerun untimed into dst[1] */
					run(&ctx, &p, 1, C, false, e0, e1);
					eo = rmse((float *)p.dst[1].data, (float *)p.dst[0].data, p.n_o, scratch);
					es = rmse((float *)p.dst[1].data + p.n_o,
						  (float *)p.dst[0].data + p.n_o, p.n_s, scratch);
					s = stats(t[k], reps);
					tf = chunk_flops((double)T, (double)H, (double)D, C) / (s.med * 1e-3) / 1e12;
					printf("%s T %6lld H %3lld  C=%-2d   %9.3f ms [%.3f - %.3f] x%6.2f  "
					       "%6.1f TFLOP/s (%4.1f%% of GEMM)  rmse/rms o %.2e state %.2e (%s)\n",
					       kda ? "KDA" : "GDN", (long long)T, (long long)H, C, s.med, s.lo,
					       s.hi, s0.med / s.med, tf, 100.0 * tf / ceil_tf, eo, es, pth[k]);
				}
				fflush(stdout);
				problem_free(&p);
			}
	}

	if (sweep) {
		static const int64_t sw[] = { 1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256 };
		const int H = 32;

		const int C = (int)chunks.v[0];

		printf("sweep: H %d, auto (i[1] = i[2] = 0) vs serial vs C=%d, median of %d\n", H, C,
		       reps);
		for (int kda = 0; kda < 2; kda++)
			for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++) {
				struct problem p;
				double t[3][64];
				struct stat3 s[3];
				char pa[32];
				struct kern_gdn_stats b;

				problem_init(&p, kda, sw[i], H, D);
				b = gs;
				run(&ctx, &p, 1, 0, false, e0, e1);
				path_of(&gs, &b, pa, sizeof(pa));
				run(&ctx, &p, 0, 0, true, e0, e1);
				run(&ctx, &p, 1, C, false, e0, e1);
				for (int r = 0; r < reps; r++) {
					t[0][r] = run(&ctx, &p, 1, 0, false, e0, e1);
					t[1][r] = run(&ctx, &p, 0, 0, true, e0, e1);
					t[2][r] = run(&ctx, &p, 1, C, false, e0, e1);
				}
				for (int k = 0; k < 3; k++)
					s[k] = stats(t[k], reps);
				printf("%s T %4lld  auto %.4f ms (%s)  serial %.4f  C=%d %.4f  serial/C x%.2f\n",
				       kda ? "KDA" : "GDN", (long long)sw[i], s[0].med, pa, s[1].med, C,
				       s[2].med, s[1].med / s[2].med);
				problem_free(&p);
			}
	}
	cudaFree(ctx.workspace);
	cudaFree(scratch);
	return 0;
}

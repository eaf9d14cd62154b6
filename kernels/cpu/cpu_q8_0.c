/*
 * kernels/cpu/cpu_q8_0.c — Q8_0 on the CPU: block expansion (GET_ROWS, and
 * the packing step of MUL_MAT's sgemm path) and the direct dot kernel
 * MUL_MAT uses for few activation columns (decode).
 *
 * Why two MUL_MAT paths: with M <= KERN_Q8_0_DIRECT_MAX_M activation
 * columns the product is bound by reading the weights; expanding all of
 * them to f32 first would read 34 bytes per 32 weights, write 128 and
 * read those 128 again.  The direct kernel expands one weight row at a
 * time into a cache-resident f32 row and dots it with every column.  For
 * larger M, sgemm's blocking wins and the expansion is amortised over the
 * columns (cpu_mul_mat.c).
 *
 * Both paths compute with the exact dequantized weights f32(d) * q (exact
 * in f32): the activations are not quantized, unlike ggml's vec_dot_q8_0,
 * so the result is an f32 matmul of the dequantized weights.
 */
#include "kernels/cpu/cpu_row_impl.h"
#include "kernels/quant.h"

#include <stdlib.h>

void kern_cpu_q8_0_to_f32(void *dst, uint64_t dnb, const void *src, uint64_t snb, int64_t n)
{
	const char *s = src;
	char *d = dst;
	float tmp[KERN_Q8_0_BLCK];

	(void)snb;  /* blocks along ne[0] are always packed (kern_tensor_check) */
	if (dnb == sizeof(float)) {
		kern_q8_0_dequantize_row(src, dst, n);
		return;
	}
	for (int64_t b = 0; b < n / KERN_Q8_0_BLCK; b++) {
		kern_q8_0_dequantize_row(s + b * sizeof(struct kern_q8_0_block), tmp, KERN_Q8_0_BLCK);
		for (int k = 0; k < KERN_Q8_0_BLCK; k++)
			*(float *)(d + (uint64_t)(b * KERN_Q8_0_BLCK + k) * dnb) = tmp[k];
	}
}

/* Independent partial sums: lets the compiler vectorize the loop without
 * reassociating (no -ffast-math needed). */
#define DOT_LANES 8

/* sum_k w[k] * x[k] in f32 over DOT_LANES lanes (K is a multiple of 32). */
static float dot_f32(const float *w, const float *x, int64_t K)
{
	float acc[DOT_LANES] = { 0 }, total = 0.0f;

	for (int64_t k = 0; k < K; k += DOT_LANES)
		for (int l = 0; l < DOT_LANES; l++)
			acc[l] += w[k + l] * x[k + l];
	for (int l = 0; l < DOT_LANES; l++)
		total += acc[l];
	return total;
}

struct mmq_job {
	const struct kern_tensor *w, *x, *d;
	const float *xp;    /* packed activations [K, M, C2, C3], or NULL: x is packed */
	int64_t r2, r3;
};

/* Item = (n, i12, i13): one weight row against the M columns of one
 * activation slice. */
static int mmq_items(void *arg, int64_t t0, int64_t t1)
{
	const struct mmq_job *j = arg;
	const struct kern_tensor *w = j->w, *x = j->x, *d = j->d;
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	/* One weight row expanded: read from cache by each of the M dots. */
	float *wf = malloc((size_t)K * sizeof(float));

	if (!wf)
		return PPRPC_ENOMEM;
	for (int64_t t = t0; t < t1; t++) {
		int64_t n = t % N, s = t / N;
		int64_t i12 = s % x->ne[2], i13 = s / x->ne[2];
		const struct kern_q8_0_block *wr =
			(const struct kern_q8_0_block *)cpu_row_at(w, n, i12 / j->r2, i13 / j->r3);
		float *drow = (float *)cpu_row_at(d, 0, i12, i13) + n;

		kern_q8_0_dequantize_row(wr, wf, K);
		for (int64_t m = 0; m < M; m++) {
			const float *xr = j->xp ? j->xp + ((s * M + m) * K)
						: (const float *)cpu_row_at(x, m, i12, i13);

			/* dst is contiguous [N, M, ...]: column m is N floats on. */
			drow[m * N] = dot_f32(wf, xr, K);
		}
	}
	free(wf);
	return 0;
}

struct pack_job {
	const struct kern_tensor *x;
	float *buf;
};

static int pack_x(void *arg, int64_t r0, int64_t r1)
{
	const struct pack_job *j = arg;

	for (int64_t r = r0; r < r1; r++)
		cpu_load_f32(j->buf + r * j->x->ne[0], cpu_row(j->x, r), j->x->nb[0], j->x->ne[0]);
	return 0;
}

int kern_cpu_mul_mat_q8_0(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
			  struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	struct mmq_job j = { .w = w, .x = x, .d = dst, .r2 = x->ne[2] / w->ne[2],
			     .r3 = x->ne[3] / w->ne[3] };
	int64_t slices = x->ne[2] * x->ne[3];
	float *buf = NULL;
	int rc;

	(void)p;
	/* Rows of x must be packed f32 for the dot; pack the whole of x
	 * otherwise (it is small: few columns). */
	if (x->nb[0] != sizeof(float)) {
		struct pack_job pj;
		size_t bytes;

		if (__builtin_mul_overflow((size_t)kern_tensor_nelements(x), sizeof(float), &bytes))
			return PPRPC_ETOOBIG;
		buf = malloc(bytes);
		if (!buf)
			return PPRPC_ENOMEM;
		pj = (struct pack_job){ .x = x, .buf = buf };
		rc = kern_cpu_parallel(ctx, cpu_nrows(x), kern_tensor_nelements(x), pack_x, &pj);
		if (rc < 0)
			goto out;
		j.xp = buf;
	}
	rc = kern_cpu_parallel(ctx, w->ne[1] * slices,
			       w->ne[0] * w->ne[1] * slices * x->ne[1], mmq_items, &j);
out:
	free(buf);
	return rc;
}

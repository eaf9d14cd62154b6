/*
 * kernels/cpu/cpu_mul_mat.c — MUL_MAT through OpenBLAS sgemm.
 *
 * Per batch slice, dst[n,m] = sum_k src0[k,n] * src1[k,m] is, in row-major
 * terms, C[M,N] = B[M,K] * A[N,K]^T with A the src0 slice and B the src1
 * slice.  sgemm needs f32 rows with unit element stride and a leading
 * dimension >= K; an operand that is not already like that (f16/bf16
 * weights, transposed or broadcast views) is packed into a contiguous f32
 * temporary (its size counts under the daemon's memory floor:
 * cpu_scratch.c).  A weight slice is packed once and then used for every src1
 * slice it is broadcast to.
 *
 * Q8_0 weights are expanded to f32 by the same packing step, or, for few
 * activation columns, multiplied directly by cpu_q8_0.c.
 *
 * Batch broadcast follows ggml: with r2 = C2 / B2, src1 slice i12 uses
 * weight slice i12 / r2 (likewise dim 3), so consecutive activation slices
 * share one weight slice (grouped-query attention).
 */
#include "kernels/cpu/cpu_impl.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>

/* An operand slice [K, rows] as sgemm sees it. */
struct operand {
	const struct kern_tensor *t;
	bool direct;      /* usable in place; else packed into buf */
	int64_t ld;       /* leading dimension in floats */
	float *buf;
	kern_cpu_cvt_fn cvt;
};

struct pack_job {
	const struct operand *op;
	const char *base;  /* first byte of the slice */
};

static int pack_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct pack_job *j = arg;
	const struct kern_tensor *t = j->op->t;
	int64_t k = t->ne[0];

	for (int64_t r = r0; r < r1; r++)
		j->op->cvt(j->op->buf + r * k, sizeof(float), j->base + r * t->nb[1], t->nb[0], k);
	return 0;
}

static int operand_init(struct operand *op, const struct kern_tensor *t)
{
	int64_t k = t->ne[0], rows = t->ne[1];
	size_t bytes;

	*op = (struct operand){ .t = t, .ld = k,
				.cvt = t->dtype == PPRPC_Q8_0 ? kern_cpu_q8_0_to_f32
							      : kern_cpu_cvt(t->dtype, PPRPC_F32) };
	if (!op->cvt)
		return PPRPC_ETYPE;
	if (kern_cpu_mm_direct(t)) {
		op->direct = true;
		if (rows > 1)
			op->ld = (int64_t)(t->nb[1] / sizeof(float));
		return 0;
	}
	if (__builtin_mul_overflow((size_t)k, (size_t)rows, &bytes) ||
	    __builtin_mul_overflow(bytes, sizeof(float), &bytes))
		return PPRPC_ETOOBIG;
	op->buf = malloc(bytes);
	return op->buf ? 0 : PPRPC_ENOMEM;
}

/* The f32 rows of slice (i2, i3), packing them first if needed. */
static int operand_slice(const struct kern_cpu_ctx *ctx, const struct operand *op,
			 int64_t i2, int64_t i3, const float **out)
{
	const struct kern_tensor *t = op->t;
	struct pack_job j = { .op = op,
			      .base = (const char *)t->data + i2 * t->nb[2] + i3 * t->nb[3] };
	int rc;

	if (op->direct) {
		*out = (const float *)j.base;
		return 0;
	}
	rc = kern_cpu_parallel(ctx, t->ne[1], t->ne[0] * t->ne[1], pack_rows, &j);
	if (rc < 0)
		return rc;
	*out = op->buf;
	return 0;
}

int kern_cpu_mul_mat(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		     struct kern_tensor *const *src, struct kern_tensor *dst)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
	struct operand a, b = { 0 };
	int rc;

	if (w->dtype == PPRPC_Q8_0 && M <= KERN_Q8_0_DIRECT_MAX_M)
		return kern_cpu_mul_mat_q8_0(ctx, p, src, dst);
	/* sgemm takes int dimensions (blasint may be wider; int is safe). */
	if (K > INT_MAX || N > INT_MAX || M > INT_MAX)
		return PPRPC_ETOOBIG;
	rc = operand_init(&a, w);
	if (rc < 0)
		goto out;
	rc = operand_init(&b, x);
	if (rc < 0)
		goto out;

	for (int64_t i03 = 0; i03 < w->ne[3]; i03++) {
		for (int64_t i02 = 0; i02 < w->ne[2]; i02++) {
			const float *A;

			rc = operand_slice(ctx, &a, i02, i03, &A);
			if (rc < 0)
				goto out;
			for (int64_t i13 = i03 * r3; i13 < (i03 + 1) * r3; i13++) {
				for (int64_t i12 = i02 * r2; i12 < (i02 + 1) * r2; i12++) {
					const float *B;
					float *C = (float *)((char *)dst->data + i12 * dst->nb[2] +
							     i13 * dst->nb[3]);

					rc = operand_slice(ctx, &b, i12, i13, &B);
					if (rc < 0)
						goto out;
					cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
						    (blasint)M, (blasint)N, (blasint)K, 1.0f,
						    B, (blasint)b.ld, A, (blasint)a.ld,
						    0.0f, C, (blasint)N);
				}
			}
		}
	}
	rc = 0;
out:
	free(a.buf);
	free(b.buf);
	return rc;
}

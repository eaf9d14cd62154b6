/*
 * kernels/cuda/cuda_mul_mat.cu — MUL_MAT with f32|f16|bf16 weights through
 * cuBLAS (Q8_0 weights: cuda_q8_0.cu).
 *
 * dst[n, m] = sum_k w[k, n] x[k, m] per batch slice is, column-major,
 * C[N, M] = A[K, N]^T B[K, M] with ldc = N: one cublasGemmEx, or one
 * cublasGemmStridedBatchedEx over the activation slices of a weight slice
 * (stride 0 for A when consecutive slices share it, ggml's broadcast:
 * activation slice i12 uses weight slice i12 / (C2 / B2), likewise dim 3).
 *
 * Precision, all with CUBLAS_COMPUTE_32F (f32 accumulation):
 *  - f32 weights: f32 x f32 (no TF32: the default math mode never uses it
 *    for COMPUTE_32F), so the result matches the CPU's sgemm up to
 *    summation order.
 *  - f16 / bf16 weights: the activations are rounded to the weight type
 *    (into the workspace) so the product runs on tensor cores; relative
 *    RMS error vs the CPU (f32 activations) is about 3e-4 (f16) / 2e-3
 *    (bf16).  Activations beyond f16's range (|x| > 65504) become inf.
 *
 * Operands cuBLAS cannot read in place (element stride != element size, a
 * row stride below K or not a multiple of the element) are packed into the
 * workspace first; kcu_mul_mat_ws says how much that takes.
 */
#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/cuda_blas_impl.cuh"

#include <limits.h>

__global__ void k_pack(kcu_t s, int sdt, char *d, int ddt, int64_t n, bool small)
{
	const int es = ddt == PPRPC_F32 ? 4 : 2;

	KCU_FOR(l, n) {
		int64_t i[4];

		kcu_unravel(s.ne, l, i, small);
		kcu_store(d + l * es, ddt, kcu_load(kcu_at(s, i[0], i[1], i[2], i[3]), sdt));
	}
}

int kcu_pack(const struct kern_cuda_ctx *ctx, const struct kern_tensor *t, int ddt, void *out,
	     char *err, size_t errlen)
{
	int64_t n = kern_tensor_nelements(t);

	k_pack<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(t), t->dtype, (char *)out, ddt, n, kcu_small(n));
	return kcu_launched("MUL_MAT (pack)", err, errlen);
}

static cudaDataType cuda_type(int dtype)
{
	return dtype == PPRPC_F16 ? CUDA_R_16F : dtype == PPRPC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

int kcu_gemm_run(const struct kern_cuda_ctx *ctx, const struct kcu_gemm *g, char *err,
		 size_t errlen)
{
	const struct kcu_blas *b = (const struct kcu_blas *)ctx->blas;
	const float one = 1.0f, zero = 0.0f;
	cudaDataType t = cuda_type(g->ab);
	cublasStatus_t st;

	if (!b)
		return kern_errf(err, errlen, PPRPC_EUNSUPP, "MUL_MAT: cuBLAS is not loaded");
	if (g->N > INT_MAX || g->M > INT_MAX || g->K > INT_MAX || g->lda > INT_MAX ||
	    g->ldb > INT_MAX || g->ldc > INT_MAX || g->batch > INT_MAX)
		return kern_errf(err, errlen, PPRPC_ETOOBIG, "MUL_MAT: a dimension exceeds INT_MAX");
	if (g->batch == 1)
		st = b->gemm_ex(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->N, (int)g->M, (int)g->K,
				&one, g->A, t, (int)g->lda, g->B, t, (int)g->ldb, &zero, g->C,
				CUDA_R_32F, (int)g->ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	else
		st = b->gemm_sb_ex(b->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->N, (int)g->M,
				   (int)g->K, &one, g->A, t, (int)g->lda, g->sA, g->B, t,
				   (int)g->ldb, g->sB, &zero, g->C, CUDA_R_32F, (int)g->ldc, g->sC,
				   (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS)
		return kern_errf(err, errlen, PPRPC_EDEVICE, "MUL_MAT: cuBLAS GEMM: %s",
				 kcu_blas_str(b, st));
	return 0;
}

/* Can cuBLAS read t ([K, rows, ...] of element size es) in place?  Then
 * *ld is its leading dimension in elements. */
static bool direct(const struct kern_tensor *t, int es, int64_t *ld)
{
	int64_t K = t->ne[0];

	if (t->nb[0] != (uint64_t)es || t->nb[2] % es || t->nb[3] % es)
		return false;
	if (t->ne[1] == 1) {
		*ld = K;
		return true;
	}
	if (t->nb[1] % es || t->nb[1] / es < (uint64_t)K || t->nb[1] / es > INT_MAX)
		return false;
	*ld = (int64_t)(t->nb[1] / es);
	return true;
}

/* What the float-weight path needs: packed weights, packed/converted
 * activations. */
struct plan {
	int es;               /* weight element size */
	bool w_pack, x_pack;  /* x_pack: into the weight dtype */
	int64_t lda, ldb;
	size_t w_bytes, x_bytes;
};

static void make_plan(const struct kern_tensor *w, const struct kern_tensor *x, struct plan *pl)
{
	pl->es = kcu_esize(w->dtype);
	pl->w_pack = !direct(w, pl->es, &pl->lda);
	if (pl->w_pack)
		pl->lda = w->ne[0];
	pl->x_pack = w->dtype != PPRPC_F32 || !direct(x, 4, &pl->ldb);
	if (pl->x_pack)
		pl->ldb = x->ne[0];
	pl->w_bytes = pl->w_pack ? (size_t)kern_tensor_nelements(w) * pl->es : 0;
	pl->x_bytes = pl->x_pack ? (size_t)kern_tensor_nelements(x) * pl->es : 0;
}

size_t kcu_mul_mat_ws(struct kern_tensor *const *src, const struct kern_tensor *dst)
{
	struct plan pl;

	(void)dst;
	if (src[0]->dtype == PPRPC_Q8_0)
		return kcu_mul_mat_q8_0_ws(src);
	make_plan(src[0], src[1], &pl);
	return kcu_ws_round(pl.w_bytes) + kcu_ws_round(pl.x_bytes);
}

KCU_DECL(mul_mat)
{
	const struct kern_tensor *w = src[0], *x = src[1];
	const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	const int64_t B2 = w->ne[2], B3 = w->ne[3], C2 = x->ne[2], C3 = x->ne[3];
	const int64_t r2 = C2 / B2, r3 = C3 / B3;
	struct kcu_arena ar = { (char *)ctx->workspace, ctx->workspace_bytes };
	const char *wb = (const char *)w->data, *xb = (const char *)x->data;
	int64_t wnb2, wnb3, xnb2, xnb3;  /* batch strides in elements */
	struct plan pl;
	int rc;

	(void)p;
	if (w->dtype == PPRPC_Q8_0)
		return kcu_mul_mat_q8_0(ctx, src, dst, err, errlen);
	if (!ctx->blas)
		return kern_errf(err, errlen, PPRPC_EUNSUPP, "MUL_MAT: cuBLAS is not loaded");
	make_plan(w, x, &pl);
	wnb2 = (int64_t)(w->nb[2] / pl.es);
	wnb3 = (int64_t)(w->nb[3] / pl.es);
	xnb2 = (int64_t)(x->nb[2] / 4);
	xnb3 = (int64_t)(x->nb[3] / 4);
	if (pl.w_pack) {
		void *buf = kcu_take(&ar, pl.w_bytes);

		rc = buf ? kcu_pack(ctx, w, w->dtype, buf, err, errlen)
			 : kern_errf(err, errlen, PPRPC_ELIMIT, "MUL_MAT: workspace too small");
		if (rc < 0)
			return rc;
		wb = (const char *)buf;
		wnb2 = K * N;
		wnb3 = K * N * B2;
	}
	if (pl.x_pack) {
		void *buf = kcu_take(&ar, pl.x_bytes);

		rc = buf ? kcu_pack(ctx, x, w->dtype, buf, err, errlen)
			 : kern_errf(err, errlen, PPRPC_ELIMIT, "MUL_MAT: workspace too small");
		if (rc < 0)
			return rc;
		xb = (const char *)buf;
		xnb2 = K * M;
		xnb3 = K * M * C2;
	}

	for (int64_t i13 = 0; i13 < C3; i13++) {
		const int64_t i03 = i13 / r3;
		/* r2 == 1: every activation slice has its own weight slice, one
		 * batched call per i13; else one call per weight slice with A
		 * repeated (stride 0) over its r2 activation slices. */
		const int64_t calls = r2 == 1 ? 1 : B2;

		for (int64_t c = 0; c < calls; c++) {
			const int64_t i02 = r2 == 1 ? 0 : c, i12 = r2 == 1 ? 0 : c * r2;
			struct kcu_gemm g = {
				.ab = w->dtype,
				.N = N, .M = M, .K = K, .lda = pl.lda, .ldb = pl.ldb, .ldc = N,
				.A = wb + (i02 * wnb2 + i03 * wnb3) * pl.es,
				/* x's elements are f32 or, packed, the weight type:
				 * pl.es bytes either way (f32 weights: 4). */
				.B = xb + (i12 * xnb2 + i13 * xnb3) * pl.es,
				.C = (float *)dst->data + (i13 * C2 + i12) * M * N,
				.sA = r2 == 1 ? wnb2 : 0,
				.sB = xnb2,
				.sC = M * N,
				.batch = r2 == 1 ? C2 : r2,
			};

			rc = kcu_gemm_run(ctx, &g, err, errlen);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

int kcu_mul_mat_preload(char *err, size_t errlen)
{
	return kcu_touch(k_pack, "MUL_MAT", err, errlen);
}

/*
 * kernels/cuda/cuda_blas_impl.cuh — the cuBLAS entry points MUL_MAT uses,
 * resolved with dlsym by cuda_blas.cu (pprpcd has no link-time dependency
 * on libcublas: it must start on a host without CUDA libraries).  Only the
 * types come from cublas_api.h.
 */
#ifndef PPRPC_KERNELS_CUDA_BLAS_IMPL_CUH
#define PPRPC_KERNELS_CUDA_BLAS_IMPL_CUH

#include <cublas_api.h>

typedef cublasStatus_t (*kcu_blas_create_fn)(cublasHandle_t *handle);
typedef cublasStatus_t (*kcu_blas_destroy_fn)(cublasHandle_t handle);
typedef cublasStatus_t (*kcu_blas_set_stream_fn)(cublasHandle_t handle, cudaStream_t stream);
typedef const char *(*kcu_blas_status_string_fn)(cublasStatus_t status);
typedef cublasStatus_t (*kcu_blas_gemm_ex_fn)(
	cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
	int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
	cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
	cublasComputeType_t computeType, cublasGemmAlgo_t algo);
typedef cublasStatus_t (*kcu_blas_gemm_sb_ex_fn)(
	cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
	int k, const void *alpha, const void *A, cudaDataType Atype, int lda, long long strideA,
	const void *B, cudaDataType Btype, int ldb, long long strideB, const void *beta, void *C,
	cudaDataType Ctype, int ldc, long long strideC, int batchCount,
	cublasComputeType_t computeType, cublasGemmAlgo_t algo);

/* What kern_cuda_blas_create returns (struct kern_cuda_ctx.blas). */
struct kcu_blas {
	void *lib;                  /* dlopen handle */
	cublasHandle_t handle;
	kcu_blas_create_fn create;
	kcu_blas_destroy_fn destroy;
	kcu_blas_set_stream_fn set_stream;
	kcu_blas_status_string_fn status_string;  /* optional: may be NULL */
	kcu_blas_gemm_ex_fn gemm_ex;
	kcu_blas_gemm_sb_ex_fn gemm_sb_ex;
};

/* Status -> text ("CUBLAS_STATUS_..." when the library can say). */
static inline const char *kcu_blas_str(const struct kcu_blas *b, cublasStatus_t s)
{
	return b && b->status_string ? b->status_string(s) : "cuBLAS error";
}

#endif

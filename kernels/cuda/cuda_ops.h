/*
 * kernels/cuda/cuda_ops.h — the op set on CUDA devices (interface between
 * the CUDA device backend in daemon/dev_cuda.c and the kernels).
 *
 * Same semantics, shapes and parameters as kernels/ops.h: every op's CUDA
 * result is compared with the CPU kernel by `make test-cuda`.  Descriptors
 * hold device pointers in .data.  Everything is enqueued on ctx->stream and
 * returns without synchronising; errors are returned as PPRPC_E* codes with
 * the CUDA error text in err.
 *
 * This header is C (included by the daemon); the implementation is CUDA C++
 * with extern "C" entry points.
 */
#ifndef PPRPC_KERNELS_CUDA_OPS_H
#define PPRPC_KERNELS_CUDA_OPS_H

#include <stddef.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct kern_cuda_ctx {
	void *stream;          /* cudaStream_t */
	void *blas;            /* cublasHandle_t (from kern_cuda_blas_create), NULL = none */
	void *workspace;       /* device scratch for kernels that need it */
	size_t workspace_bytes;
	int device;            /* CUDA device ordinal */
};

/* Run one op on the stream.  Descriptors must have passed
 * kern_op_check_dst (the caller validated them).  Returns 0 or a negative
 * code; err gets the reason (CUDA error string included). */
int kern_cuda_run(const struct kern_cuda_ctx *ctx, int op, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, int nsrc, struct kern_tensor *dst, char *err, size_t errlen);

/* cuBLAS is loaded at run time (dlopen), so pprpcd has no link-time
 * dependency on it.  Returns 0 and a handle bound to stream, or a negative
 * code with the reason (e.g. libcublas not found). */
int kern_cuda_blas_create(void *stream, void **ret_handle, char *err, size_t errlen);
void kern_cuda_blas_destroy(void *handle);

/* Load every kernel module eagerly (touch each kernel once) so no lazy
 * module load can happen behind a stream waiting on a timeline — that
 * deadlocks (see GPU-NOTES.md). */
int kern_cuda_preload(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

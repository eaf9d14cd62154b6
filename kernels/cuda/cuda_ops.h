/*
 * kernels/cuda/cuda_ops.h — the op set on CUDA devices (interface between
 * the CUDA device backend in daemon/backend/cuda/ and the kernels).
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/ops.h"

struct kern_cuda_ctx {
	void *stream;          /* cudaStream_t */
	void *blas;            /* from kern_cuda_blas_create (opaque), NULL = none:
				* MUL_MAT then fails with PPRPC_EUNSUPP */
	void *workspace;       /* device scratch for kernels that need it
				* (kern_cuda_workspace_bytes), 256-byte aligned */
	size_t workspace_bytes;
	int device;            /* CUDA device ordinal */
	/* Optional device-visible int32 (device memory or host-mapped), 0 while
	 * all is well.  Data-dependent failures found on the GPU (a GET_ROWS or
	 * SET_ROWS id outside the table) store their PPRPC_E* code there
	 * (PPRPC_ERANGE, the only one so far; a plain store, so mapped host
	 * memory works) and kern_cuda_run returns 0 without synchronising;
	 * the backend reads it when the graph has completed and clears it.
	 * NULL: kern_cuda_run synchronises the stream after those two ops and
	 * returns PPRPC_ERANGE itself (simple, but no CUDA graph capture and
	 * never behind a timeline wait). */
	int32_t *status;
	/* Optional: which GATED_DELTA_NET form ran (cuda_gdn_select.cu adds
	 * with relaxed atomics, as the CPU backend does); NULL = not counted. */
	struct kern_gdn_stats *gdn_stats;
};

/* Run one op on the stream.  Descriptors must have passed
 * kern_op_check_dst (the caller validated them).  Returns 0 or a negative
 * code; err gets the reason (CUDA error string included).  Fails with
 * PPRPC_ELIMIT when ctx->workspace_bytes < kern_cuda_workspace_bytes(). */
int kern_cuda_run(const struct kern_cuda_ctx *ctx, int op, const struct pprpc_op_params *p,
		  struct kern_tensor *const *src, int nsrc, struct kern_tensor *dst, char *err, size_t errlen);

/* Bytes of ctx->workspace kern_cuda_run needs for this node (0 for most
 * ops); the backend sizes one workspace per stream as the maximum over a
 * graph's nodes.  Same descriptors as kern_cuda_run (data may be NULL).
 * Returns SIZE_MAX when the descriptors are invalid. */
size_t kern_cuda_workspace_bytes(int op, const struct pprpc_op_params *p,
				 struct kern_tensor *const *src, int nsrc,
				 const struct kern_tensor *dst);

/* Workspace bytes with which GATED_DELTA_NET's chunked form (chunk length
 * chunk: 16, 32 or 64; split: i[4] = 1, twice the operand bytes) runs
 * every (b, h) in one launch.  It is not a need:
 * with less it runs the (b, h) in groups that fit, and with less than one
 * (b, h)'s share (kern_cuda_gdn_ws_bytes(.., h_v = 1, .., b = 1, ..)) the
 * serial form runs instead (kern_gdn_stats fallback "nomem").  A backend
 * that can afford it sizes its workspace with this for long prefills. */
size_t kern_cuda_gdn_ws_bytes(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t, int64_t b,
			      int chunk, bool split);

/* GATED_DELTA_NET's automatic choice on CUDA (i[1] = i[2] = 0;
 * cuda_gdn_select.cu, measured in doc/results/kda-cuda.md): the chunked
 * form with this chunk length from this many tokens per sequence. */
#define KERN_CUDA_GDN_CHUNK_DEFAULT 16
#define KERN_CUDA_GDN_CHUNK_MIN_T 8

/* Would the automatic choice take the chunked form for these dimensions:
 * T >= KERN_CUDA_GDN_CHUNK_MIN_T, d_k 64 or 128, d_v a multiple of 32 up
 * to 256?  (The device's capability and the workspace are checked when it
 * runs; failing those, the serial form runs and is counted as a fallback.) */
bool kern_cuda_gdn_chunked_fits(int64_t d_k, int64_t d_v, int64_t t);

/* Enqueue on stream a scan of the n contiguous f32 gates at x (device
 * memory) that stores 1 into *flag (device-visible) when any gate is not
 * finite and <= 0: the domain where pprpc's GATED_DELTA_NET computes what
 * ggml's op computes (cuda_gdn_gate.cu).  *flag is never cleared here.
 * Returns 0 or PPRPC_EDEVICE with CUDA's text. */
int kern_cuda_gdn_gate_scan(void *stream, const float *x, int64_t n, int32_t *flag, char *err,
			    size_t errlen);

/* Indices checked on the GPU (cuda_index_check.cu; the descriptors:
 * ops.h): each check's elements copied from src to dst, one outside
 * [0, bound) as 0 and reported in *fault (host-mapped, cleared by the
 * caller), elected through *claim (a device word: gen must differ from the
 * previous call's on the same word).  Enqueued on stream; 0 or
 * PPRPC_EDEVICE. */
int kern_cuda_index_check(void *stream, const struct kern_index_check *c, int n, struct kern_index_fault *fault,
			  unsigned *claim, unsigned gen, char *err, size_t errlen);

/* cuBLAS is loaded at run time (dlopen), so pprpcd has no link-time
 * dependency on it.  Returns 0 and a handle bound to stream (an opaque
 * object holding the library, its entry points and a cublasHandle_t), or a
 * negative code with the reason (e.g. libcublas not found, with the dlerror
 * text).  Call with the device current. */
int kern_cuda_blas_create(void *stream, void **ret_handle, char *err, size_t errlen);
void kern_cuda_blas_destroy(void *handle);

/* Load every kernel module eagerly (touch each kernel once) so no lazy
 * module load can happen behind a stream waiting on a timeline — that
 * deadlocks (see GPU-NOTES.md).  Call once per device, with it current.
 * cuBLAS's own kernels are beyond its reach: the daemon should also set
 * CUDA_MODULE_LOADING=EAGER before its first CUDA call. */
int kern_cuda_preload(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif

/*
 * kernels/cuda/cuda_gdn_impl.cuh — internal to GATED_DELTA_NET on CUDA: the
 * arguments both forms read (serial, cuda_gdn.cu; chunked,
 * cuda_gdn_chunked.cu) and the entry points the path choice
 * (cuda_gdn_select.cu) calls.  Mirrors kernels/cpu/cpu_gdn_impl.h.
 */
#ifndef PPRPC_KERNELS_CUDA_GDN_IMPL_CUH
#define PPRPC_KERNELS_CUDA_GDN_IMPL_CUH

#include "kernels/cuda/cuda_impl.cuh"

struct gdn_args {
	kcu_t q, k, v, g, beta, s0;
	float *o;   /* o part of dst: [d_v, H_v, T, B] contiguous */
	float *s;   /* state part of dst: [d_k, d_v, H_v, B] contiguous */
	int64_t d_k, d_v, h_v, t, b, rep;  /* rep = H_v / H_k */
	int64_t h_k;
	bool kda, l2;
	bool tiled;  /* i[3] = 1: value head h reads q/k head h % H_k */
	bool split;  /* i[4] = 1: the chunked form's operands as two bf16 planes */
	float scale, eps;
};

/* The q/k head value head h reads (ops.h, i[3]). */
static __host__ __device__ __forceinline__ int64_t gdn_key_head(const gdn_args &a, int64_t h)
{
	return a.tiled ? h % a.h_k : h / a.rep;
}

/* The serial recurrence (the reference form on the GPU). */
int kcu_gdn_serial(const struct kern_cuda_ctx *ctx, const gdn_args *a, char *err, size_t errlen);

/* Why the chunked form cannot run; checked before anything is launched. */
enum kcu_gdn_unsupp {
	KCU_GDN_OK = 0,
	KCU_GDN_LAYOUT,   /* d_k not 64 or 128, or d_v not a multiple of 32 up to 256 */
	KCU_GDN_ARCH,     /* no bf16 tensor cores (compute capability < 8.0) or too
			   * little shared memory for this chunk length */
	KCU_GDN_NOMEM,    /* the workspace cannot hold the scratch of one (b, h) */
};

/* d_k and d_v the chunked kernels take (the KCU_GDN_LAYOUT test). */
bool kcu_gdn_chunked_layout_ok(int64_t d_k, int64_t d_v);

/* Can the chunked form with chunk length chunk run on ctx's device for a?
 * KCU_GDN_OK or the reason. */
int kcu_gdn_chunked_check(const struct kern_cuda_ctx *ctx, const gdn_args *a, int chunk);

/* The chunked (WY / UT) form; call only after kcu_gdn_chunked_check said
 * KCU_GDN_OK.  Returns 0 or a launch error (PPRPC_EDEVICE). */
int kcu_gdn_chunked(const struct kern_cuda_ctx *ctx, const gdn_args *a, int chunk, char *err,
		    size_t errlen);

/* Workspace bytes the chunked form would like: all (b, h) at once.  With
 * less it runs the (b, h) in groups that fit (slower: fewer CTAs per
 * launch); below one (b, h)'s share it cannot run at all. */
size_t kcu_gdn_chunked_ws(int64_t d_k, int64_t d_v, int64_t h_v, int64_t t, int64_t b, int chunk,
			  bool split);

int kcu_gdn_chunked_preload(char *err, size_t errlen);

#endif

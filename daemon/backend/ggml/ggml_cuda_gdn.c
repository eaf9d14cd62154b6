/*
 * daemon/backend/ggml/ggml_cuda_gdn.c — pprpc's CUDA GATED_DELTA_NET on a
 * ggml-cuda device's memory (ggml_cuda_gdn.h says why a stream of its own).
 */
#include "daemon/backend/ggml/ggml_cuda_gdn.h"

#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_ops.h"

/* The workspace lets the chunked form run every (b, h) in one launch; past
 * this it runs them in groups (kern_cuda_gdn_ws_bytes: Kimi-Linear's
 * 32 heads of 128 at T = 8192 want 285 MiB, 96 heads 855 MiB). */
#define WS_MAX (1ull << 30)

struct gge_gdn_cuda {
	int ordinal;
	cudaStream_t stream;
	void *ws;
	size_t ws_bytes;
	volatile int32_t *flag_host;  /* the gate scan's answer, host-mapped */
	int32_t *flag_dev;
};

static int cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
	cudaGetLastError();
	snprintf(err, errlen, "pprpc's GATED_DELTA_NET on CUDA: %s: %s", what, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

void gdn_cuda_close(struct gge_gdn_cuda *c)
{
	if (!c)
		return;
	cudaSetDevice(c->ordinal);
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	if (c->ws)
		cudaFree(c->ws);
	if (c->flag_host)
		cudaFreeHost((void *)c->flag_host);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	cudaGetLastError();
	free(c);
}

int gdn_cuda_open(int ordinal, struct gge_gdn_cuda **ret, char *err, size_t errlen)
{
	struct gge_gdn_cuda *c = calloc(1, sizeof(*c));
	char why[256] = "";
	cudaError_t e;
	int rc;

	if (!c)
		return PPRPC_ENOMEM;
	c->ordinal = ordinal;
	if ((e = cudaSetDevice(ordinal)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&c->flag_host, sizeof(int32_t), cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&c->flag_dev, (void *)c->flag_host, 0)) != cudaSuccess) {
		rc = cuda_fail(e, "a stream and its status word", err, errlen);
		gdn_cuda_close(c);
		return rc;
	}
	/* Loads pprpc's kernels and gives the chunked ones their shared
	 * memory before the first launch. */
	rc = kern_cuda_preload(why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "pprpc's GATED_DELTA_NET on CUDA: %s", why);
		gdn_cuda_close(c);
		return rc;
	}
	*ret = c;
	return 0;
}

/* Replace the workspace with one of up to want bytes (at least one
 * (b, h)'s share, one), leaving floor bytes of the device free.  Keeps the
 * old one when nothing larger fits. */
static void ws_grow(struct gge_gdn_cuda *c, size_t want, size_t one, uint64_t floor)
{
	size_t fr = 0, total = 0, avail;

	if (want > WS_MAX)
		want = WS_MAX > one ? WS_MAX : one;
	if (want <= c->ws_bytes)
		return;
	if (cudaMemGetInfo(&fr, &total) != cudaSuccess) {
		cudaGetLastError();
		return;
	}
	avail = fr + c->ws_bytes;  /* the old one goes first */
	if (avail < floor || avail - floor < want)
		want = avail > floor ? (size_t)(avail - floor) & ~(size_t)0xfffff : 0;
	if (want < one || want <= c->ws_bytes)
		return;
	if (c->ws)
		cudaFree(c->ws);
	c->ws = NULL;
	c->ws_bytes = 0;
	if (cudaMalloc(&c->ws, want) == cudaSuccess) {
		c->ws_bytes = want;
		return;
	}
	cudaGetLastError();
	c->ws = NULL;
	if (cudaMalloc(&c->ws, one) == cudaSuccess) {
		c->ws_bytes = one;
		return;
	}
	cudaGetLastError();
	c->ws = NULL;
}

static void add(uint64_t *dst, uint64_t v)
{
	if (v)
		__atomic_fetch_add(dst, v, __ATOMIC_RELAXED);
}

int gdn_cuda_run(struct gge_gdn_cuda *c, uint64_t floor, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst, struct kern_gdn_stats *native,
		 int *ret_outcome, char *err, size_t errlen)
{
	const struct kern_tensor *q = src[0], *v = src[2], *g = src[3];
	const int64_t d_k = q->ne[0], d_v = v->ne[0], h_v = v->ne[1], t = q->ne[2], b = q->ne[3];
	const int chunk = KERN_CUDA_GDN_CHUNK_DEFAULT;
	struct kern_gdn_stats ran = { 0 };
	struct kern_cuda_ctx kctx;
	cudaError_t e;
	int rc;

	if ((e = cudaSetDevice(c->ordinal)) != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	/* Only the chunked form uses the workspace; without room for one
	 * (b, h) it would run the serial form, which ggml's kernel does as
	 * well. */
	if (p->i[1] == 0 && p->i[2] == 0 && kern_cuda_gdn_chunked_fits(d_k, d_v, t)) {
		const bool split = p->i[4] == 1;
		const size_t one = kern_cuda_gdn_ws_bytes(d_k, d_v, 1, t, 1, chunk, split);

		ws_grow(c, kern_cuda_gdn_ws_bytes(d_k, d_v, h_v, t, b, chunk, split), one, floor);
		if (c->ws_bytes < one) {
			*ret_outcome = GDN_CUDA_NOMEM;
			return 0;
		}
	}
	memset(&kctx, 0, sizeof(kctx));
	kctx.stream = c->stream;
	kctx.workspace = c->ws;
	kctx.workspace_bytes = c->ws_bytes;
	kctx.device = c->ordinal;
	kctx.gdn_stats = &ran;
	/* The stream is idle (every run ends with its synchronize). */
	*c->flag_host = 0;
	rc = kern_cuda_gdn_gate_scan(c->stream, g->data, kern_tensor_nelements(g), c->flag_dev, err, errlen);
	if (rc == 0)
		rc = kern_cuda_run(&kctx, PPRPC_OP_GATED_DELTA_NET, p, src, 6, dst, err, errlen);
	e = cudaStreamSynchronize(c->stream);
	if (rc < 0)
		return rc;
	if (e != cudaSuccess)
		return cuda_fail(e, "the kernel", err, errlen);
	if (*c->flag_host) {
		*ret_outcome = GDN_CUDA_GATE;
		return 0;
	}
	add(&native->serial, ran.serial);
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		add(&native->chunked[i], ran.chunked[i]);
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		add(&native->fallback[i], ran.fallback[i]);
	*ret_outcome = GDN_CUDA_RAN;
	return 0;
}

#else /* !PPRPC_HAVE_CUDA */

int gdn_cuda_open(int ordinal, struct gge_gdn_cuda **ret, char *err, size_t errlen)
{
	(void)ordinal, (void)ret;
	snprintf(err, errlen, "this pprpcd was built without CUDA kernels");
	return PPRPC_EUNSUPP;
}

void gdn_cuda_close(struct gge_gdn_cuda *c)
{
	(void)c;
}

int gdn_cuda_run(struct gge_gdn_cuda *c, uint64_t floor, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst, struct kern_gdn_stats *native,
		 int *ret_outcome, char *err, size_t errlen)
{
	(void)c, (void)floor, (void)p, (void)src, (void)dst, (void)native, (void)ret_outcome;
	snprintf(err, errlen, "this pprpcd was built without CUDA kernels");
	return PPRPC_EUNSUPP;
}

#endif

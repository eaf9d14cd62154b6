/*
 * kernels/cuda/cuda_rows.cu — GET_ROWS (gather table rows, f32|f16|bf16|q8_0
 * -> f32) and SET_ROWS (scatter f32 rows into an f32|f16|bf16 table) at i32
 * indices (semantics: ops.h).
 *
 * Ids are data, found bad only on the GPU.  Every run first clears a flag
 * word at the start of the workspace and checks all ids with k_check_ids,
 * which sets the flag (and, when the backend gave one, stores PPRPC_ERANGE
 * into ctx->status).  The gather/scatter kernel then does
 * nothing at all when the flag is set: like the CPU build, a bad id means
 * nothing is read through it and SET_ROWS leaves the table untouched
 * (all-or-nothing).  Reporting (cuda_ops.h):
 *   ctx->status set  — asynchronous; the backend reads status after the
 *                      graph (kern_cuda_run returns 0);
 *   ctx->status NULL — the flag is copied back and the stream synchronised
 *                      before the main kernel, and kern_cuda_run returns
 *                      PPRPC_ERANGE itself.
 *
 * Repeated SET_ROWS ids: the last source row wins, as on the CPU.  A block
 * writes its row only when no later row of the same slice carries the same
 * id (a block-wide scan of the later ids), so exactly one writer per table
 * row and the result is deterministic.
 */
#include "kernels/cuda/cuda_impl.cuh"

static __device__ __forceinline__ int32_t id_at(const kcu_t &ids, int64_t i0, int64_t i1,
						 int64_t i2)
{
	return *(const int32_t *)kcu_at(ids, i0, i1, i2, 0);
}

__global__ void k_check_ids(kcu_t ids, int64_t nrows, int32_t *flag, int32_t *status)
{
	const int64_t n = ids.ne[0] * ids.ne[1] * ids.ne[2];

	KCU_FOR(l, n) {
		int64_t i0 = l % ids.ne[0], i1 = (l / ids.ne[0]) % ids.ne[1];
		int64_t i2 = l / (ids.ne[0] * ids.ne[1]);
		int32_t id = id_at(ids, i0, i1, i2);

		if (id < 0 || id >= nrows) {
			*flag = 1;
			/* A plain store, not an atomic: status may be host-mapped
			 * memory, and ERANGE is the only data error there is. */
			if (status)
				*(volatile int32_t *)status = PPRPC_ERANGE;
		}
	}
}

/* dst [D, n, C1, C2] contiguous f32; dst row (i10, i11, i12) is table row
 * ids[i10, i11, i12] of table slice (i11 % T2, i12 % T3). */
__global__ void k_get_rows(kcu_t tab, int tdt, kcu_t ids, float *d, int64_t n, bool small,
			   const int32_t *flag)
{
	const int64_t D = tab.ne[0];

	if (*flag)
		return;
	KCU_FOR(l, n) {
		int64_t i0, i[4], dne[4] = { D, ids.ne[0], ids.ne[1], ids.ne[2] };
		const char *row;
		int32_t id;

		kcu_unravel(dne, l, i, small);
		i0 = i[0];
		id = id_at(ids, i[1], i[2], i[3]);
		row = kcu_at(tab, 0, id, tab.ne[2] == 1 ? 0 : i[2], tab.ne[3] == 1 ? 0 : i[3]);
		if (tdt == PPRPC_Q8_0) {
			const char *blk = row + (i0 / KCU_Q8_BLCK) * tab.nb[0];
			float scale = kcu_f16_decode(*(const uint16_t *)blk);

			d[l] = scale * (float)(int8_t)blk[2 + i0 % KCU_Q8_BLCK];
		} else {
			d[l] = kcu_load(row + i0 * tab.nb[0], tdt);
		}
	}
}

/* One block per source row (i, b2, b3). */
__global__ void k_set_rows(kcu_t val, kcu_t ids, kcu_t d, int ddt, const int32_t *flag)
{
	const int64_t n = val.ne[1], nrows = val.ne[1] * val.ne[2] * val.ne[3];

	if (*flag)
		return;
	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i = r % n, b2 = (r / n) % val.ne[2], b3 = r / (n * val.ne[2]);
		int64_t c1 = ids.ne[1] == 1 ? 0 : b2, c2 = ids.ne[2] == 1 ? 0 : b3;
		int32_t id = id_at(ids, i, c1, c2);
		int later = 0;

		for (int64_t j = i + 1 + threadIdx.x; j < n && !later; j += blockDim.x)
			later = id_at(ids, j, c1, c2) == id;
		if (__syncthreads_or(later))
			continue;
		const char *src = kcu_at(val, 0, i, b2, b3);
		char *dst = kcu_at(d, 0, id, b2, b3);

		for (int64_t i0 = threadIdx.x; i0 < val.ne[0]; i0 += blockDim.x)
			kcu_store(dst + i0 * d.nb[0], ddt, *(const float *)(src + i0 * val.nb[0]));
	}
}

size_t kcu_rows_ws(void)
{
	return KCU_WS_ALIGN;  /* the flag word */
}

/* Clear the flag, check the ids; in synchronous mode also report. */
static int check_ids(const struct kern_cuda_ctx *ctx, const struct kern_tensor *ids,
		     int64_t nrows, const char *name, char *err, size_t errlen)
{
	cudaStream_t st = kcu_stream(ctx);
	int32_t *flag = (int32_t *)ctx->workspace, bad = 0;
	int64_t n = kern_tensor_nelements(ids);
	int rc;

	rc = kcu_err(cudaMemsetAsync(flag, 0, sizeof(*flag), st), name, err, errlen);
	if (rc < 0)
		return rc;
	k_check_ids<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, st>>>(kcu_view(ids), nrows,
									 flag, ctx->status);
	rc = kcu_launched(name, err, errlen);
	if (rc < 0 || ctx->status)
		return rc;
	rc = kcu_err(cudaMemcpyAsync(&bad, flag, sizeof(bad), cudaMemcpyDeviceToHost, st), name,
		     err, errlen);
	if (rc == 0)
		rc = kcu_err(cudaStreamSynchronize(st), name, err, errlen);
	if (rc == 0 && bad)
		rc = kern_errf(err, errlen, PPRPC_ERANGE, "%s: an id is outside [0, %lld)", name,
			       (long long)nrows);
	return rc;
}

KCU_DECL(get_rows)
{
	const struct kern_tensor *tab = src[0], *ids = src[1];
	int64_t n = kern_tensor_nelements(dst);
	int rc;

	(void)p;
	rc = check_ids(ctx, ids, tab->ne[1], "GET_ROWS", err, errlen);
	if (rc < 0)
		return rc;
	k_get_rows<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(tab), tab->dtype, kcu_view(ids), (float *)dst->data, n, kcu_small(n),
		(const int32_t *)ctx->workspace);
	return kcu_launched("GET_ROWS", err, errlen);
}

KCU_DECL(set_rows)
{
	const struct kern_tensor *val = src[0], *ids = src[1];
	int64_t nrows = val->ne[1] * val->ne[2] * val->ne[3];
	int rc;

	(void)p;
	rc = check_ids(ctx, ids, dst->ne[1], "SET_ROWS", err, errlen);
	if (rc < 0)
		return rc;
	k_set_rows<<<kcu_blocks(nrows, 1), kcu_row_threads(val->ne[0]), 0, kcu_stream(ctx)>>>(
		kcu_view(val), kcu_view(ids), kcu_view(dst), dst->dtype,
		(const int32_t *)ctx->workspace);
	return kcu_launched("SET_ROWS", err, errlen);
}

int kcu_rows_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_check_ids, "GET_ROWS", err, errlen);

	if (!rc)
		rc = kcu_touch(k_get_rows, "GET_ROWS", err, errlen);
	if (!rc)
		rc = kcu_touch(k_set_rows, "SET_ROWS", err, errlen);
	return rc;
}

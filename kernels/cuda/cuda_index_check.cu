/*
 * kernels/cuda/cuda_index_check.cu — indices checked on the GPU, in stream
 * order, before the kernels that follow them run (the ggml engine's START
 * guards on a ggml-cuda stream that holds timeline WAITs: the values may
 * not exist yet when the run is enqueued, so the host cannot read them).
 *
 * The indices are copied from the client's tensor into the graph's own
 * copy, which is what its kernels read.  An index outside [0, bound) is
 * reported (one of them, through *fault, host-mapped) and copied as 0, so
 * that the kernels queued behind it, which cannot be called off any more,
 * stay inside their tables; the client's tensor is never written.  The run
 * is failed by its completion; what it computed is not used.
 */
#include "kernels/cuda/cuda_impl.cuh"

#define CHECK_THREADS 256
#define CHECK_BLOCKS_MAX 256

struct checks {
	struct kern_index_check c[KERN_INDEX_CHECKS_PER_LAUNCH];
	int n;
};

/* The first thread to swap this launch's generation into the claim word
 * (device memory: atomics on host-mapped memory are not promised
 * everywhere) writes the report with plain stores, hit last. */
static __device__ void report(struct kern_index_fault *f, unsigned *claim, unsigned gen,
			      const struct kern_index_check *c, int64_t v, int64_t i)
{
	if (atomicExch(claim, gen) == gen)
		return;
	f->id = c->id;
	f->value = v;
	f->at[0] = i % c->ne[0];
	f->at[1] = i / c->ne[0] % c->ne[1];
	f->at[2] = i / (c->ne[0] * c->ne[1]) % c->ne[2];
	f->at[3] = i / (c->ne[0] * c->ne[1] * c->ne[2]);
	__threadfence_system();
	*(volatile int32_t *)&f->hit = 1;
}

static __global__ void k_index_check(const struct checks cs, struct kern_index_fault *f, unsigned *claim, unsigned gen)
{
	const int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int k = 0; k < cs.n; k++) {
		const struct kern_index_check *c = &cs.c[k];
		const int64_t n = c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3];

		for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
			const int64_t i0 = i % c->ne[0], i1 = i / c->ne[0] % c->ne[1];
			const int64_t i2 = i / (c->ne[0] * c->ne[1]) % c->ne[2], i3 = i / (c->ne[0] * c->ne[1] * c->ne[2]);
			const int64_t o = i0 * c->nb[0] + i1 * c->nb[1] + i2 * c->nb[2] + i3 * c->nb[3];
			const char *e = (const char *)c->src + o;
			char *d = (char *)c->dst + o;
			int64_t v = c->is64 ? *(const int64_t *)e : *(const int32_t *)e;

			if (v < 0 || v >= c->bound) {
				report(f, claim, gen, c, v, i);
				v = 0;
			}
			if (c->is64)
				*(int64_t *)d = v;
			else
				*(int32_t *)d = (int32_t)v;
		}
	}
}

extern "C" int kern_cuda_index_check(void *stream, const struct kern_index_check *c, int n,
				     struct kern_index_fault *fault, unsigned *claim, unsigned gen, char *err,
				     size_t errlen)
{
	while (n > 0) {
		struct checks cs;
		int64_t most = 0, blocks;

		cs.n = n < KERN_INDEX_CHECKS_PER_LAUNCH ? n : KERN_INDEX_CHECKS_PER_LAUNCH;
		for (int k = 0; k < cs.n; k++) {
			const int64_t e = c[k].ne[0] * c[k].ne[1] * c[k].ne[2] * c[k].ne[3];

			cs.c[k] = c[k];
			most = e > most ? e : most;
		}
		blocks = (most + CHECK_THREADS - 1) / CHECK_THREADS;
		if (blocks > CHECK_BLOCKS_MAX)
			blocks = CHECK_BLOCKS_MAX;
		if (blocks > 0) {
			k_index_check<<<(unsigned)blocks, CHECK_THREADS, 0, (cudaStream_t)stream>>>(cs, fault, claim, gen);
			if (kcu_launched("index check", err, errlen) < 0)
				return PPRPC_EDEVICE;
		}
		c += cs.n;
		n -= cs.n;
	}
	return 0;
}

int kcu_index_check_preload(char *err, size_t errlen)
{
	return kcu_touch(k_index_check, "index check", err, errlen);
}
